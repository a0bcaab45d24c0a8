// Rotary position embeddings. Needs common.cuh first. Every kernel runs with 256 threads
// per block, a warp per row (eight rows per block).
//
// Row t of x (the last axis, `d` elements `s` apart, located by the `rows` view) sits at
// position `t % positions` of batch entry `t / per_batch`; its angle for pair i is
// `(position + offset) * scale * inv_freq[i]` with `inv_freq[i] = exp(i * step)` or
// `1 / freqs[i]`, all in float as the CPU kernel computes them. The first `dims` features
// rotate in pairs (the halves (i, i + dims/2), or the neighbours (2i, 2i + 1) when
// `traditional`); the inverse rotation negates the sines; the other features are copied.
// The output is row-major.

#define NV_THREADS 256

template <typename T>
__device__ __forceinline__ void nv_rope_rows(
    const T* __restrict__ x, const Strided& rows, i64 s, T* __restrict__ y, i64 nrows, i64 d,
    i64 positions, i64 per_batch, const void* __restrict__ offsets, i64 ostride, int unsigned_off,
    const float* __restrict__ freqs, i64 fstride, float step, float scale, i64 half,
    int traditional, int forward) {
  const int groups = NV_THREADS / 32;
  const int g = threadIdx.x / 32, lane = threadIdx.x % 32;
  const i64 dims = 2 * half;
  const i64 items = half + (d - dims);
  for (i64 t = (i64)blockIdx.x * groups + g; t < nrows; t += (i64)gridDim.x * groups) {
    const T* p = x + nv_locate(rows, t);
    T* q = y + t * d;
    const i64 entry = t / per_batch;
    const float off = unsigned_off
                          ? (float)reinterpret_cast<const u32*>(offsets)[entry * ostride]
                          : (float)reinterpret_cast<const i32*>(offsets)[entry * ostride];
    const float position = ((float)(t % positions) + off) * scale;
    for (i64 j = lane; j < items; j += 32) {
      if (j < half) {
        const float inv = freqs != nullptr ? 1.0f / freqs[j * fstride] : expf((float)j * step);
        float sn, cs;
        sincosf(position * inv, &sn, &cs);
        if (!forward) sn = -sn;
        const i64 i1 = traditional ? 2 * j : j;
        const i64 i2 = traditional ? 2 * j + 1 : j + half;
        const float a = nv_up(p[i1 * s]);
        const float b = nv_up(p[i2 * s]);
        q[i1] = nv_down<T>(a * cs - b * sn);
        q[i2] = nv_down<T>(a * sn + b * cs);
      } else {
        const i64 k = dims + (j - half);
        q[k] = p[k * s];
      }
    }
  }
}

// `rope_rows_<type>`.
#define NV_ROPE(T, tn) \
  extern "C" __global__ void __launch_bounds__(NV_THREADS) rope_rows_##tn( \
      const T* x, Strided rows, i64 s, T* y, i64 nrows, i64 d, i64 positions, i64 per_batch, \
      const void* offsets, i64 ostride, int unsigned_off, const float* freqs, i64 fstride, \
      float step, float scale, i64 half, int traditional, int forward) { \
    nv_rope_rows<T>(x, rows, s, y, nrows, d, positions, per_batch, offsets, ostride, \
                    unsigned_off, freqs, fstride, step, scale, half, traditional, forward); }
