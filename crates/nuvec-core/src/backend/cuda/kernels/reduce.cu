// Reductions, arg-reductions and the fused last-axis kernels (logsumexp, softmax).
// Needs common.cuh and reduce_ops.cuh first. Every kernel runs with 256 threads per block.
//
// Rows (`_rows`, with a warp or the whole block per row): each row is a contiguous run (of a
// reduction) or a strided one (arg-reductions, softmax, logsumexp) starting where the `rows`
// view (the kept axes) locates it. A reduction's long row may be split in `parts` of `chunk`
// elements, each written as a partial result (of the accumulator type) for a second pass.
// Columns (`_cols`): a thread per output, which folds the elements the `red` view (the
// reduced axes, offset 0) lists from where `cols` locates it; consecutive outputs read
// consecutive elements, so the reads coalesce. `blockIdx.y` picks a part of `chunk`
// reduced positions; partial results go to `out[o * parts + part]` (rows of partials).

#define NV_THREADS 256
#define NV_NO_INDEX 0xffffffffu

// The fold of `len` contiguous elements from `p` by lane `lane` of `LANES`, with 16-byte
// loads from the first 16-byte boundary on (the elements before it and after the last
// whole vector are read one by one). Each lane keeps `U` loads in flight, and each of them
// folds into its own partial result: a warp issues in order, so one chain of joins through
// all of them would hold back its next loads.
template <class Op, typename T, typename A, int U, int LANES>
__device__ __forceinline__ A nv_fold_run(const T* __restrict__ p, i64 len, int lane) {
  constexpr int V = 16 / sizeof(T);
  A acc = Op::template init<A>();
  i64 head = (i64)(((16 - ((u64)p & 15)) & 15) / sizeof(T));
  if (head > len) head = len;
  for (i64 i = lane; i < head; i += LANES) acc = Op::join(acc, nv_to<A>(p[i]));
  const uint4* __restrict__ vp = reinterpret_cast<const uint4*>(p + head);
  const i64 nvec = (len - head) / V;
  // Whole rounds of `U · LANES` vectors load without bounds checks; the vectors after the
  // last whole round go one at a time (a bounds-checked round of `U` would double the
  // registers and lower the occupancy that every row relies on).
  const i64 whole = nvec / (U * LANES) * (U * LANES);
  A part[U];
#pragma unroll
  for (int k = 0; k < U; ++k) part[k] = Op::template init<A>();
  for (i64 i = lane; i < whole; i += U * LANES) {
    uint4 r[U];
#pragma unroll
    for (int k = 0; k < U; ++k) r[k] = __ldg(vp + i + k * LANES);
#pragma unroll
    for (int k = 0; k < U; ++k) {
      const T* e = reinterpret_cast<const T*>(&r[k]);
      A s = nv_to<A>(e[0]);
#pragma unroll
      for (int j = 1; j < V; ++j) s = Op::join(s, nv_to<A>(e[j]));
      part[k] = Op::join(part[k], s);
    }
  }
  for (i64 i = whole + lane; i < nvec; i += LANES) {
    const uint4 r = __ldg(vp + i);
    const T* e = reinterpret_cast<const T*>(&r);
#pragma unroll
    for (int j = 0; j < V; ++j) part[0] = Op::join(part[0], nv_to<A>(e[j]));
  }
#pragma unroll
  for (int k = 0; k < U; ++k) acc = Op::join(acc, part[k]);
  for (i64 i = head + nvec * V + lane; i < len; i += LANES) acc = Op::join(acc, nv_to<A>(p[i]));
  return acc;
}

// `LANES` threads per run: a warp, or the whole block. The two are separate kernels so that
// each gets the registers it needs (the warp's form holds more loads in flight and would
// otherwise lower the block's occupancy, and the other way round).
template <class Op, typename T, typename O, int LANES>
__device__ __forceinline__ void nv_reduce_rows(const T* __restrict__ x, O* __restrict__ out,
                                               i64 tasks, i64 parts, i64 chunk, i64 n,
                                               const Strided& rows) {
  typedef typename Op::template Of<T>::A A;
  constexpr int groups = NV_THREADS / LANES;
  // A warp alone on its run keeps more loads in flight to cover the memory's latency.
  constexpr int U = LANES == 32 ? 8 : 4;
  const int g = threadIdx.x / LANES, lane = threadIdx.x % LANES;
  // With a group of the whole block every thread runs the same iterations (the group
  // reduction synchronises the block).
  for (i64 t = (i64)blockIdx.x * groups + g; t < tasks; t += (i64)gridDim.x * groups) {
    const i64 row = t / parts, part = t - row * parts;
    const i64 start = part * chunk;
    i64 len = n - start;
    if (len > chunk) len = chunk;
    if (len < 0) len = 0;
    const T* p = x + nv_locate(rows, row) + start;
    A acc = nv_fold_run<Op, T, A, U, LANES>(p, len, lane);
    acc = nv_group_reduce<Op, A>(acc, LANES);
    if (lane == 0) out[t] = nv_to<O>(acc);
  }
}

template <class Op, typename T, typename O>
__device__ __forceinline__ void nv_reduce_cols(const T* __restrict__ x, O* __restrict__ out,
                                               i64 nout, i64 parts, i64 chunk, i64 nred,
                                               const Strided& cols, const Strided& red) {
  typedef typename Op::template Of<T>::A A;
  const i64 part = blockIdx.y;
  const i64 r0 = part * chunk;
  i64 r1 = r0 + chunk;
  if (r1 > nred) r1 = nred;
  NV_FOR_EACH(o, nout) {
    const T* p = x + nv_locate(cols, o);
    A acc = Op::template init<A>();
    if (red.ndim <= 1) {
      const i64 s = red.strides[0];
#pragma unroll 4
      for (i64 r = r0; r < r1; ++r) acc = Op::join(acc, nv_to<A>(p[r * s]));
    } else {
      for (i64 r = r0; r < r1; ++r) acc = Op::join(acc, nv_to<A>(p[nv_locate(red, r)]));
    }
    out[o * parts + part] = nv_to<O>(acc);
  }
}

// `reduce_rows_<op>_<in>_<out>` (a block per run), `reduce_warp_rows_<op>_<in>_<out>` (a
// warp per run) and `reduce_cols_<op>_<in>_<out>`.
#define NV_REDUCE_ROWS(op, Op, T, tn, O, on) \
  extern "C" __global__ void __launch_bounds__(NV_THREADS) reduce_rows_##op##_##tn##_##on( \
      const T* x, O* out, i64 tasks, i64 parts, i64 chunk, i64 n, Strided rows) { \
    nv_reduce_rows<Op, T, O, NV_THREADS>(x, out, tasks, parts, chunk, n, rows); } \
  extern "C" __global__ void __launch_bounds__(NV_THREADS) reduce_warp_rows_##op##_##tn##_##on( \
      const T* x, O* out, i64 tasks, i64 parts, i64 chunk, i64 n, Strided rows) { \
    nv_reduce_rows<Op, T, O, 32>(x, out, tasks, parts, chunk, n, rows); }
#define NV_REDUCE_COLS(op, Op, T, tn, O, on) \
  extern "C" __global__ void __launch_bounds__(NV_THREADS) reduce_cols_##op##_##tn##_##on( \
      const T* x, O* out, i64 nout, i64 parts, i64 chunk, i64 nred, Strided cols, Strided red) { \
    nv_reduce_cols<Op, T, O>(x, out, nout, parts, chunk, nred, cols, red); }

// ---- Arg-reductions: the first position of the extreme (a NaN counts as the extreme).

template <typename A> struct NvArg {
  A v;
  u32 i;  // NV_NO_INDEX: no element yet
};

// Whether x replaces best: beyond it, or the first NaN.
template <bool MAX, typename A> __device__ __forceinline__ bool nv_better(A x, A best) {
  const bool beyond = MAX ? x > best : x < best;
  return beyond || (x != x && best == best);
}

// The winner of two candidates; on a tie the lower position (also between two NaNs).
template <bool MAX, typename A>
__device__ __forceinline__ NvArg<A> nv_arg_join(NvArg<A> a, NvArg<A> b) {
  if (a.i == NV_NO_INDEX) return b;
  if (b.i == NV_NO_INDEX) return a;
  if (nv_better<MAX>(b.v, a.v)) return b;
  if (nv_better<MAX>(a.v, b.v)) return a;
  return b.i < a.i ? b : a;
}

template <bool MAX, typename A>
__device__ __forceinline__ NvArg<A> nv_arg_group(NvArg<A> a, int lanes) {
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1) {
    NvArg<A> o;
    o.v = nv_shfl_xor(a.v, m);
    o.i = __shfl_xor_sync(NV_WARP_MASK, a.i, m);
    a = nv_arg_join<MAX>(a, o);
  }
  if (lanes > 32) {
    __shared__ A pv[32];
    __shared__ u32 pi[32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) {
      pv[warp] = a.v;
      pi[warp] = a.i;
    }
    __syncthreads();
    if (lane < lanes / 32) {
      a.v = pv[lane];
      a.i = pi[lane];
    } else {
      a.i = NV_NO_INDEX;
    }
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) {
      NvArg<A> o;
      o.v = nv_shfl_xor(a.v, m);
      o.i = __shfl_xor_sync(NV_WARP_MASK, a.i, m);
      a = nv_arg_join<MAX>(a, o);
    }
    __syncthreads();
  }
  return a;
}

// Rows of `n` (at least 1) elements `s` apart.
template <bool MAX, typename T>
__device__ __forceinline__ void nv_arg_rows(const T* __restrict__ x, u32* __restrict__ out,
                                            i64 nrows, i64 n, i64 s, const Strided& rows,
                                            int lanes) {
  typedef typename Acc<T>::type A;
  const int groups = NV_THREADS / lanes;
  const int g = threadIdx.x / lanes, lane = threadIdx.x % lanes;
  for (i64 t = (i64)blockIdx.x * groups + g; t < nrows; t += (i64)gridDim.x * groups) {
    const T* p = x + nv_locate(rows, t);
    NvArg<A> best;
    best.v = A(0);
    best.i = NV_NO_INDEX;
    // Each lane visits its positions in increasing order: a tie keeps the earlier one.
    for (i64 i = lane; i < n; i += lanes) {
      NvArg<A> c;
      c.v = nv_up(p[i * s]);
      c.i = (u32)i;
      best = nv_arg_join<MAX>(best, c);
    }
    best = nv_arg_group<MAX, A>(best, lanes);
    if (lane == 0) out[t] = best.i;
  }
}

// A thread per output; outputs next to each other read elements next to each other.
template <bool MAX, typename T>
__device__ __forceinline__ void nv_arg_cols(const T* __restrict__ x, u32* __restrict__ out,
                                            i64 nout, i64 n, i64 s, const Strided& cols) {
  typedef typename Acc<T>::type A;
  NV_FOR_EACH(o, nout) {
    const T* p = x + nv_locate(cols, o);
    A best = nv_up(p[0]);
    u32 at = 0;
    for (i64 i = 1; i < n; ++i) {
      const A v = nv_up(p[i * s]);
      if (nv_better<MAX>(v, best)) {
        best = v;
        at = (u32)i;
      }
    }
    out[o] = at;
  }
}

#define NV_ARG_ONE(op, MAX, T, tn) \
  extern "C" __global__ void __launch_bounds__(NV_THREADS) op##_rows_##tn( \
      const T* x, u32* out, i64 nrows, i64 n, i64 s, Strided rows, int lanes) { \
    nv_arg_rows<MAX, T>(x, out, nrows, n, s, rows, lanes); } \
  extern "C" __global__ void __launch_bounds__(NV_THREADS) op##_cols_##tn( \
      const T* x, u32* out, i64 nout, i64 n, i64 s, Strided cols) { \
    nv_arg_cols<MAX, T>(x, out, nout, n, s, cols); }
// `arg{max,min}_{rows,cols}_<type>`.
#define NV_ARG(T, tn) NV_ARG_ONE(argmax, true, T, tn) NV_ARG_ONE(argmin, false, T, tn)

// ---- logsumexp and softmax over rows of `n` (at least 1) elements `s` apart, computed in
// float for the half types. A row whose maximum is not finite (a NaN or +inf in it, or only
// -inf) has no finite exponentials: logsumexp gives that maximum (NaN, +inf, -inf) and
// softmax NaN everywhere, as the CPU does.

__device__ __forceinline__ float nv_exp(float x) { return expf(x); }
__device__ __forceinline__ double nv_exp(double x) { return exp(x); }
__device__ __forceinline__ float nv_log(float x) { return logf(x); }
__device__ __forceinline__ double nv_log(double x) { return log(x); }

// The row's maximum and, when it is finite, the sum of exp(x - max), in every lane.
template <typename T, typename A>
__device__ __forceinline__ bool nv_row_max_sum(const T* __restrict__ p, i64 n, i64 s, int lane,
                                               int lanes, A& m, A& sum) {
  A mx = NvLim<A>::low();
  for (i64 i = lane; i < n; i += lanes) mx = nv_pick_max(mx, nv_up(p[i * s]));
  mx = nv_group_reduce<NvMax, A>(mx, lanes);
  const bool finite = mx == mx && mx != NvLim<A>::low() && mx != NvLim<A>::high();
  A acc = A(0);
  if (finite)
    for (i64 i = lane; i < n; i += lanes) acc += nv_exp(nv_up(p[i * s]) - mx);
  // Every thread takes part (the block form synchronises); `finite` is the same in all.
  acc = nv_group_reduce<NvSum, A>(acc, lanes);
  m = mx;
  sum = acc;
  return finite;
}

template <typename T>
__device__ __forceinline__ void nv_lse_rows(const T* __restrict__ x, T* __restrict__ out,
                                            i64 nrows, i64 n, i64 s, const Strided& rows,
                                            int lanes) {
  typedef typename Acc<T>::type A;
  const int groups = NV_THREADS / lanes;
  const int g = threadIdx.x / lanes, lane = threadIdx.x % lanes;
  for (i64 t = (i64)blockIdx.x * groups + g; t < nrows; t += (i64)gridDim.x * groups) {
    A m, sum;
    const bool finite = nv_row_max_sum<T>(x + nv_locate(rows, t), n, s, lane, lanes, m, sum);
    if (lane == 0) out[t] = nv_down<T>(finite ? m + nv_log(sum) : m);
  }
}

// Output rows are row-major: row t at `out + t * n`.
template <typename T>
__device__ __forceinline__ void nv_softmax_rows(const T* __restrict__ x, T* __restrict__ out,
                                                i64 nrows, i64 n, i64 s, const Strided& rows,
                                                int lanes) {
  typedef typename Acc<T>::type A;
  const int groups = NV_THREADS / lanes;
  const int g = threadIdx.x / lanes, lane = threadIdx.x % lanes;
  for (i64 t = (i64)blockIdx.x * groups + g; t < nrows; t += (i64)gridDim.x * groups) {
    const T* p = x + nv_locate(rows, t);
    A m, sum;
    const bool finite = nv_row_max_sum<T>(p, n, s, lane, lanes, m, sum);
    T* q = out + t * n;
    if (finite) {
      const A scale = A(1) / sum;
      for (i64 i = lane; i < n; i += lanes) q[i] = nv_down<T>(nv_exp(nv_up(p[i * s]) - m) * scale);
    } else {
      for (i64 i = lane; i < n; i += lanes) q[i] = nv_down<T>(nv_nan<A>());
    }
  }
}

// `logsumexp_rows_<type>` and `softmax_rows_<type>`.
#define NV_SOFTMAX(T, tn) \
  extern "C" __global__ void __launch_bounds__(NV_THREADS) logsumexp_rows_##tn( \
      const T* x, T* out, i64 nrows, i64 n, i64 s, Strided rows, int lanes) { \
    nv_lse_rows<T>(x, out, nrows, n, s, rows, lanes); } \
  extern "C" __global__ void __launch_bounds__(NV_THREADS) softmax_rows_##tn( \
      const T* x, T* out, i64 nrows, i64 n, i64 s, Strided rows, int lanes) { \
    nv_softmax_rows<T>(x, out, nrows, n, s, rows, lanes); }
