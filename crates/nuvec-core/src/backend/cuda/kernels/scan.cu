// Scans (cumsum, cumprod, cummax, cummin, logcumsumexp) along one axis of `len` positions
// whose elements are `s` apart; forwards or from the end (`reverse`), with element i in its
// own result or not (`inclusive`: an exclusive scan starts from the identity). Needs
// common.cuh and reduce_ops.cuh first. The output is row-major: [outer, len, inner].
//
// `_rows` (the axis is the last one, inner == 1): a block per row walks it in tiles of
// NV_SCAN_THREADS * NV_SCAN_ITEMS positions; each thread folds its consecutive items, the
// block scans the thread totals (warp shuffles, then the warp totals), and a carry takes
// each tile's total into the next. `_cols` (inner > 1): a thread per (outer, inner) column
// walks the axis in order; neighbouring threads read neighbouring elements.

#define NV_SCAN_THREADS 256
#define NV_SCAN_ITEMS 4

template <class Op, typename T, typename O>
__device__ __forceinline__ void nv_scan_rows(const T* __restrict__ x, O* __restrict__ out,
                                             i64 nrows, i64 len, i64 s, const Strided& rows,
                                             int reverse, int inclusive) {
  typedef typename Op::template Of<T>::A A;
  constexpr int WARPS = NV_SCAN_THREADS / 32;
  __shared__ A warp_total[WARPS];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const i64 tile = (i64)NV_SCAN_THREADS * NV_SCAN_ITEMS;
  for (i64 row = blockIdx.x; row < nrows; row += gridDim.x) {
    const T* p = x + nv_locate(rows, row);
    O* q = out + row * len;
    A carry = Op::template init<A>();
    for (i64 t0 = 0; t0 < len; t0 += tile) {
      // This thread's items: positions (in scan order) first + 0 .. first + ITEMS - 1.
      const i64 first = t0 + (i64)tid * NV_SCAN_ITEMS;
      A v[NV_SCAN_ITEMS];
      A mine = Op::template init<A>();
#pragma unroll
      for (int k = 0; k < NV_SCAN_ITEMS; ++k) {
        const i64 pos = first + k;
        if (pos < len) {
          const i64 at = reverse ? len - 1 - pos : pos;
          v[k] = nv_to<A>(p[at * s]);
        } else {
          v[k] = Op::template init<A>();
        }
        mine = Op::join(mine, v[k]);
      }
      // Inclusive scan of the thread totals within the warp.
      A inc = mine;
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) {
        const A y = nv_shfl_up(inc, d);
        if (lane >= d) inc = Op::join(y, inc);
      }
      const A left = nv_shfl_up(inc, 1);  // the lanes before this one
      if (lane == 31) warp_total[warp] = inc;
      __syncthreads();
      A before = carry, total = carry;
#pragma unroll
      for (int w = 0; w < WARPS; ++w) {
        if (w < warp) before = Op::join(before, warp_total[w]);
        total = Op::join(total, warp_total[w]);
      }
      if (lane > 0) before = Op::join(before, left);
      // warp_total is written again by the next tile.
      __syncthreads();
      A run = before;
#pragma unroll
      for (int k = 0; k < NV_SCAN_ITEMS; ++k) {
        const i64 pos = first + k;
        if (pos < len) {
          const i64 at = reverse ? len - 1 - pos : pos;
          if (inclusive) {
            run = Op::join(run, v[k]);
            q[at] = nv_to<O>(run);
          } else {
            q[at] = nv_to<O>(run);
            run = Op::join(run, v[k]);
          }
        }
      }
      carry = total;
    }
  }
}

template <class Op, typename T, typename O>
__device__ __forceinline__ void nv_scan_cols(const T* __restrict__ x, O* __restrict__ out,
                                             i64 ncols, i64 len, i64 inner, i64 s,
                                             const Strided& cols, int reverse, int inclusive) {
  typedef typename Op::template Of<T>::A A;
  NV_FOR_EACH(c, ncols) {
    const T* p = x + nv_locate(cols, c);
    const i64 o = c / inner, j = c - o * inner;
    O* q = out + o * len * inner + j;
    A run = Op::template init<A>();
    for (i64 k = 0; k < len; ++k) {
      const i64 at = reverse ? len - 1 - k : k;
      const A v = nv_to<A>(p[at * s]);
      if (inclusive) {
        run = Op::join(run, v);
        q[at * inner] = nv_to<O>(run);
      } else {
        q[at * inner] = nv_to<O>(run);
        run = Op::join(run, v);
      }
    }
  }
}

// `scan_{rows,cols}_<op>_<in>_<out>`.
#define NV_SCAN(op, Op, T, tn, O, on) \
  extern "C" __global__ void __launch_bounds__(NV_SCAN_THREADS) scan_rows_##op##_##tn##_##on( \
      const T* x, O* out, i64 nrows, i64 len, i64 s, Strided rows, int reverse, int inclusive) { \
    nv_scan_rows<Op, T, O>(x, out, nrows, len, s, rows, reverse, inclusive); } \
  extern "C" __global__ void __launch_bounds__(NV_SCAN_THREADS) scan_cols_##op##_##tn##_##on( \
      const T* x, O* out, i64 ncols, i64 len, i64 inner, i64 s, Strided cols, int reverse, \
      int inclusive) { \
    nv_scan_cols<Op, T, O>(x, out, ncols, len, inner, s, cols, reverse, inclusive); }
