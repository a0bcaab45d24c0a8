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

// The rows of one batch entry and position (the `heads` rows `positions` apart within the
// entry) share their angles: a block takes such a group at a time, computes each of its
// pairs' sine and cosine once, and rotates every head's row with 16-byte accesses. For rows
// of step 1, 16-byte aligned, rotated whole (`dims == d`): a thread takes a chunk of V pairs
// (the halves' elements [cV, cV + V) and [half + cV, ...)) or, `traditional`, of V adjacent
// elements (V / 2 pairs).
template <typename T>
__device__ __forceinline__ void nv_rope_heads(
    const T* __restrict__ x, const Strided& rows, T* __restrict__ y, i64 nrows, i64 d,
    i64 positions, i64 per_batch, const void* __restrict__ offsets, i64 ostride, int unsigned_off,
    const float* __restrict__ freqs, i64 fstride, float step, float scale, i64 half,
    int traditional, int forward) {
  constexpr int V = 16 / sizeof(T);
  typedef NvPack<T, V> P;
  const int chunks = traditional ? (int)(d / V) : (int)(half / V);
  const int hstep = blockDim.x / chunks;
  if ((int)threadIdx.x >= hstep * chunks) return;
  const int c = threadIdx.x % chunks, hl = threadIdx.x / chunks;
  const int np = traditional ? V / 2 : V;
  const i64 heads = per_batch / positions;
  const i64 tasks = nrows / heads;
  for (i64 task = blockIdx.x; task < tasks; task += gridDim.x) {
    const i64 entry = task / positions, l = task % positions;
    const float off = unsigned_off
                          ? (float)reinterpret_cast<const u32*>(offsets)[entry * ostride]
                          : (float)reinterpret_cast<const i32*>(offsets)[entry * ostride];
    const float position = ((float)l + off) * scale;
    float cs[V], sn[V];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      if (k < np) {
        const i64 j = (i64)c * np + k;
        const float inv = freqs != nullptr ? 1.0f / freqs[j * fstride] : expf((float)j * step);
        sincosf(position * inv, &sn[k], &cs[k]);
        if (!forward) sn[k] = -sn[k];
      }
    }
    for (i64 h = hl; h < heads; h += hstep) {
      const i64 t = entry * per_batch + h * positions + l;
      const T* p = x + nv_locate(rows, t);
      T* q = y + t * d;
      if (traditional) {
        const P a = reinterpret_cast<const P*>(p)[c];
        P o;
#pragma unroll
        for (int k = 0; k < V / 2; ++k) {
          const float a0 = nv_up(a.v[2 * k]), a1 = nv_up(a.v[2 * k + 1]);
          o.v[2 * k] = nv_down<T>(a0 * cs[k] - a1 * sn[k]);
          o.v[2 * k + 1] = nv_down<T>(a0 * sn[k] + a1 * cs[k]);
        }
        reinterpret_cast<P*>(q)[c] = o;
      } else {
        const P a = reinterpret_cast<const P*>(p)[c];
        const P b = reinterpret_cast<const P*>(p + half)[c];
        P o1, o2;
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float a0 = nv_up(a.v[k]), b0 = nv_up(b.v[k]);
          o1.v[k] = nv_down<T>(a0 * cs[k] - b0 * sn[k]);
          o2.v[k] = nv_down<T>(a0 * sn[k] + b0 * cs[k]);
        }
        reinterpret_cast<P*>(q)[c] = o1;
        reinterpret_cast<P*>(q + half)[c] = o2;
      }
    }
  }
}

// `rope_rows_<type>` (any rows) and `rope_heads_<type>` (see nv_rope_heads).
#define NV_ROPE(T, tn) \
  extern "C" __global__ void __launch_bounds__(NV_THREADS, 4) rope_heads_##tn( \
      const T* x, Strided rows, i64 s, T* y, i64 nrows, i64 d, i64 positions, i64 per_batch, \
      const void* offsets, i64 ostride, int unsigned_off, const float* freqs, i64 fstride, \
      float step, float scale, i64 half, int traditional, int forward) { \
    nv_rope_heads<T>(x, rows, y, nrows, d, positions, per_batch, offsets, ostride, unsigned_off, \
                     freqs, fstride, step, scale, half, traditional, forward); } \
  extern "C" __global__ void __launch_bounds__(NV_THREADS) rope_rows_##tn( \
      const T* x, Strided rows, i64 s, T* y, i64 nrows, i64 d, i64 positions, i64 per_batch, \
      const void* offsets, i64 ostride, int unsigned_off, const float* freqs, i64 fstride, \
      float step, float scale, i64 half, int traditional, int forward) { \
    nv_rope_rows<T>(x, rows, s, y, nrows, d, positions, per_batch, offsets, ostride, \
                    unsigned_off, freqs, fstride, step, scale, half, traditional, forward); }
