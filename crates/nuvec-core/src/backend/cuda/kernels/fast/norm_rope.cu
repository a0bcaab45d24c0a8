// norm_rope: each row of x ([B, H, L, D], the rows located by the `rows` view) RMS-normalised
// (when `normed`), rotated at position `offset + l`, and written to row `(t / L) * lc + loff +
// t % L` of the row-major destination (the cache at positions loff.., or a fresh output with
// lc = L, loff = 0). Needs common.cuh, fast/rows.cuh, fast/norms.cu and fast/rope.cu first.
//
// The norm is the RMS kernel's (same packs, lanes and sums, so the same bits as rms_norm on
// the same row) and the rotation the rope kernels' (nv_rotate, the same angles): the result
// equals rms_norm, then rope, then the cache write, bit for bit. The normalised row goes
// through shared memory as floats, since a pair's halves sit in different threads.

template <typename T, int P, bool packed>
__device__ __forceinline__ void nv_norm_rope_rows(
    const T* __restrict__ x, const Strided& rows, i64 xs, const T* __restrict__ w, i64 ws,
    T* __restrict__ dst, i64 nrows, i64 n, i64 positions, i64 lc, i64 loff, int normed,
    float eps, float off, float scale, float step, const float* __restrict__ freqs, i64 fstride,
    i64 half, int traditional, int lanes) {
  constexpr int V = NvVec<T>::v;
  extern __shared__ float4 nv_norm_rope_row[];
  const int groups = blockDim.x / lanes;
  const int g = threadIdx.x / lanes, lane = threadIdx.x % lanes;
  const int span = lanes * P * V;
  float* row = reinterpret_cast<float*>(nv_norm_rope_row) + g * span;
  const i64 dims = 2 * half;
  for (i64 t = (i64)blockIdx.x * groups + g; t < nrows; t += (i64)gridDim.x * groups) {
    NvPacks<T, P> h;
    nv_packs_load<T, P>(x + nv_locate(rows, t), xs, n, packed, lane, lanes, h);
    if (normed) {
      float mean, inv;
      nv_pack_stats<T, P>(h, n, eps, false, lane, lanes, mean, inv);
#pragma unroll
      for (int k = 0; k < P; ++k) {
        float wv[V];
        nv_pack_param<T>(w, ws, nv_pack_at(k, lane, lanes), n, packed, 1.0f, wv);
#pragma unroll
        for (int j = 0; j < V; ++j)
          h.set(k, j, nv_norm_out<T>(h.at(k, j), 0.0f, inv, w != nullptr, wv[j], false, 0.0f));
      }
    }
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const i64 q = nv_pack_at(k, lane, lanes);
#pragma unroll
      for (int j = 0; j < V; ++j)
        if (q * V + j < n) row[q * V + j] = h.at(k, j);
    }
    if (lanes > 32) __syncthreads(); else __syncwarp();
    const float position = ((float)(t % positions) + off) * scale;
    T* out = dst + ((t / positions) * lc + loff + t % positions) * n;
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const i64 q = nv_pack_at(k, lane, lanes);
      if (q * V >= n) break;
      typename NvVec<T>::P o;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const i64 i = q * V + j;
        const float a = h.at(k, j);
        float v = a;
        if (i < dims) {
          // Element i is the first (`lo`) or second of pair `pair`, whose partner is `b`.
          const i64 pair = traditional ? i / 2 : (i < half ? i : i - half);
          const bool lo = traditional ? (i % 2 == 0) : i < half;
          const i64 other = traditional ? (i ^ 1) : (lo ? i + half : i - half);
          float sn, cs;
          sincosf(position * nv_inv_freq(freqs, fstride, pair, step), &sn, &cs);
          const float b = i < n && other < n ? row[other] : 0.0f;
          float o1, o2;
          if (lo) {
            nv_rotate(a, b, cs, sn, o1, o2);
            v = o1;
          } else {
            nv_rotate(b, a, cs, sn, o1, o2);
            v = o2;
          }
        }
        o.v[j] = nv_down<T>(v);
      }
      nv_pack_store<T>(out, q, n, packed, o);
    }
    // `row` is written again by the next row of this group.
    if (lanes > 32) __syncthreads(); else __syncwarp();
  }
}

#define NV_NORM_ROPE1(T, tn, P, mode, packed) \
  extern "C" __global__ void __launch_bounds__(512, 2) norm_rope_##mode##_##tn##_##P( \
      const T* x, Strided rows, i64 xs, const T* w, i64 ws, T* dst, i64 nrows, i64 n, \
      i64 positions, i64 lc, i64 loff, int normed, float eps, float off, float scale, \
      float step, const float* freqs, i64 fstride, i64 half, int traditional, int lanes) { \
    nv_norm_rope_rows<T, P, packed>(x, rows, xs, w, ws, dst, nrows, n, positions, lc, loff, \
                                    normed, eps, off, scale, step, freqs, fstride, half, \
                                    traditional, lanes); }
// `NV_NORM_ROPE_P(T, tn, P)`: `norm_rope_{packs,elems}_<type>_<P>`, rows of at most lanes * P
// packs, one module a pack count.
#define NV_NORM_ROPE_P(T, tn, P) \
  NV_NORM_ROPE1(T, tn, P, packs, true) \
  NV_NORM_ROPE1(T, tn, P, elems, false)
