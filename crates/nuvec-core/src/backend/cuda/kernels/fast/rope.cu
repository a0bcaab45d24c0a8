// Rotary position embeddings. Needs common.cuh and fast/rows.cuh first. `rope_rows` runs a
// warp per row (eight rows a block of 256); `rope_heads` a block per position (below).
//
// Row t of x (the last axis, `d` elements `s` apart, located by the `rows` view) sits at
// position `t % positions` of batch entry `t / per_batch`; its angle for pair i is
// `(position + offset) * scale * inv_freq[i]` with `inv_freq[i] = exp(i * step)` or
// `1 / freqs[i]`, all in float as the CPU kernel computes them. The first `dims` features
// rotate in pairs (the halves (i, i + dims/2), or the neighbours (2i, 2i + 1) when
// `traditional`); the inverse rotation negates the sines; the other features are copied.
// The output is row-major.

#define NV_THREADS 256

// The pair (a, b) rotated by the angle whose cosine and sine are `cs` and `sn`, with the
// roundings spelled out (no contraction left to the compiler), so that every kernel that
// rotates (these and norm_rope.cu's) gives the same bits.
__device__ __forceinline__ void nv_rotate(float a, float b, float cs, float sn, float& o1,
                                          float& o2) {
  o1 = __fmaf_rn(a, cs, -__fmul_rn(b, sn));
  o2 = __fmaf_rn(a, sn, __fmul_rn(b, cs));
}

// The inverse frequency of pair j: 1 / freqs[j], or exp(j * step).
__device__ __forceinline__ float nv_inv_freq(const float* __restrict__ freqs, i64 fstride, i64 j,
                                             float step) {
  return freqs != nullptr ? 1.0f / freqs[j * fstride] : expf((float)j * step);
}

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
        float sn, cs;
        sincosf(position * nv_inv_freq(freqs, fstride, j, step), &sn, &cs);
        if (!forward) sn = -sn;
        const i64 i1 = traditional ? 2 * j : j;
        const i64 i2 = traditional ? 2 * j + 1 : j + half;
        float o1, o2;
        nv_rotate(nv_up(p[i1 * s]), nv_up(p[i2 * s]), cs, sn, o1, o2);
        q[i1] = nv_down<T>(o1);
        q[i2] = nv_down<T>(o2);
      } else {
        const i64 k = dims + (j - half);
        q[k] = p[k * s];
      }
    }
  }
}

// The rows of one batch entry and position (the `heads` rows `positions` apart within the
// entry) share their angles: a block takes such a group (a task) at a time, its threads first
// compute each pair's sine and cosine once into shared memory (with their first items' loads
// already in flight), then rotate every head's row with 16-byte accesses, NV_ROPE_ITEMS
// (head, chunk) items a thread with all their loads issued before the first use. For rows of
// step 1, 16-byte aligned, rotated whole (`dims == d`): an item is a chunk of V pairs (the
// halves' elements [cV, cV + V) and [half + cV, ...)) or, `traditional`, of V adjacent
// elements (V / 2 pairs). Shared memory: 2 * pairs floats.
//
// `addressing` says how a task's rows are found, the host having proved the steps from the
// rows' view: 0, each row located; 1, the task's first row located and head h's row h · hstep
// elements after it; 2, as 1 with the task's first row at `rows.offset + entry · estep + l ·
// lstep`. Locating a row of a transposed [B, L, H, D] input takes two 64-bit divisions, as
// many instructions as rotating it; the first round's (head, chunk) items of a thread are
// the same in every task, so they are found once.
#define NV_ROPE_ITEMS 2

template <typename T>
__device__ __forceinline__ void nv_rope_heads(
    const T* __restrict__ x, const Strided& rows, T* __restrict__ y, i64 nrows, i64 d,
    i64 positions, i64 per_batch, const void* __restrict__ offsets, i64 ostride, int unsigned_off,
    const float* __restrict__ freqs, i64 fstride, float step, float scale, i64 half,
    int traditional, int forward, i64 hstep, int addressing, i64 estep, i64 lstep) {
  constexpr int V = 16 / sizeof(T);
  typedef NvPack<T, V> P;
  extern __shared__ float nv_rope_angles[];
  float* cs = nv_rope_angles;
  float* sn = nv_rope_angles + half;
  const int chunks = traditional ? (int)(d / V) : (int)(half / V);
  const i64 heads = per_batch / positions;
  const int nitems = (int)(heads * chunks);
  const i64 tasks = nrows / heads;
  // The first round's items: head and chunk.
  int head0[NV_ROPE_ITEMS], chunk0[NV_ROPE_ITEMS];
#pragma unroll
  for (int u = 0; u < NV_ROPE_ITEMS; ++u) {
    const int it = threadIdx.x + u * blockDim.x;
    head0[u] = it / chunks;
    chunk0[u] = it - head0[u] * chunks;
  }
  for (i64 task = blockIdx.x; task < tasks; task += gridDim.x) {
    const i64 entry = task / positions, l = task - entry * positions;
    const float off = unsigned_off
                          ? (float)reinterpret_cast<const u32*>(offsets)[entry * ostride]
                          : (float)reinterpret_cast<const i32*>(offsets)[entry * ostride];
    const float position = ((float)l + off) * scale;
    const T* first_row = addressing == 2   ? x + rows.offset + entry * estep + l * lstep
                         : addressing == 1 ? x + nv_locate(rows, entry * per_batch + l)
                                           : x;
    // Item `it`'s head and chunk: found once for the first round.
    auto coords = [&](int first, int u, int& h, int& c) {
      if (first == (int)threadIdx.x) {
        h = head0[u];
        c = chunk0[u];
      } else {
        const int it = first + u * blockDim.x;
        h = it / chunks;
        c = it - h * chunks;
      }
    };
    // As loaded, two half-precision elements a word (fewer registers: more loads in flight).
    NvRaw a[NV_ROPE_ITEMS], b[NV_ROPE_ITEMS];
    auto load = [&](int first) {
#pragma unroll
      for (int u = 0; u < NV_ROPE_ITEMS; ++u) {
        if (first + u * (int)blockDim.x < nitems) {
          int h, c;
          coords(first, u, h, c);
          const T* p = addressing != 0
                           ? first_row + h * hstep
                           : x + nv_locate(rows, entry * per_batch + h * positions + l);
          a[u] = reinterpret_cast<const NvRaw*>(p)[c];
          if (!traditional) b[u] = reinterpret_cast<const NvRaw*>(p + half)[c];
        }
      }
    };
    // The first items' loads go out before the angles are taken, which they do not need.
    load(threadIdx.x);
    for (i64 j = threadIdx.x; j < half; j += blockDim.x) {
      float sv, cv;
      sincosf(position * nv_inv_freq(freqs, fstride, j, step), &sv, &cv);
      cs[j] = cv;
      sn[j] = forward ? sv : -sv;
    }
    __syncthreads();
    T* const task_out = y + (entry * per_batch + l) * d;
    for (int first = threadIdx.x; first < nitems; first += NV_ROPE_ITEMS * blockDim.x) {
      if (first != (int)threadIdx.x) load(first);
#pragma unroll
      for (int u = 0; u < NV_ROPE_ITEMS; ++u) {
        if (first + u * (int)blockDim.x >= nitems) break;
        int h, c;
        coords(first, u, h, c);
        T* q = task_out + h * positions * d;
        if (traditional) {
          P o;
#pragma unroll
          for (int k = 0; k < V / 2; ++k) {
            const int j = c * (V / 2) + k;
            float o1, o2;
            nv_rotate(nv_raw_get<T>(a[u], 2 * k), nv_raw_get<T>(a[u], 2 * k + 1), cs[j], sn[j],
                      o1, o2);
            o.v[2 * k] = nv_down<T>(o1);
            o.v[2 * k + 1] = nv_down<T>(o2);
          }
          reinterpret_cast<P*>(q)[c] = o;
        } else {
          P o1, o2;
#pragma unroll
          for (int k = 0; k < V; ++k) {
            const int j = c * V + k;
            float r1, r2;
            nv_rotate(nv_raw_get<T>(a[u], k), nv_raw_get<T>(b[u], k), cs[j], sn[j], r1, r2);
            o1.v[k] = nv_down<T>(r1);
            o2.v[k] = nv_down<T>(r2);
          }
          reinterpret_cast<P*>(q)[c] = o1;
          reinterpret_cast<P*>(q + half)[c] = o2;
        }
      }
    }
    // The angles are written again for the next task.
    __syncthreads();
  }
}

// `rope_rows_<type>` (any rows) and `rope_heads_<type>` (see nv_rope_heads), with one list
// of arguments (the rows kernel ignores the last four).
#define NV_ROPE(T, tn) \
  extern "C" __global__ void __launch_bounds__(NV_THREADS, 4) rope_heads_##tn( \
      const T* x, Strided rows, i64 s, T* y, i64 nrows, i64 d, i64 positions, i64 per_batch, \
      const void* offsets, i64 ostride, int unsigned_off, const float* freqs, i64 fstride, \
      float step, float scale, i64 half, int traditional, int forward, i64 hstep, \
      int addressing, i64 estep, i64 lstep) { \
    nv_rope_heads<T>(x, rows, y, nrows, d, positions, per_batch, offsets, ostride, \
                     unsigned_off, freqs, fstride, step, scale, half, traditional, forward, hstep, \
                     addressing, estep, lstep); } \
  extern "C" __global__ void __launch_bounds__(NV_THREADS) rope_rows_##tn( \
      const T* x, Strided rows, i64 s, T* y, i64 nrows, i64 d, i64 positions, i64 per_batch, \
      const void* offsets, i64 ostride, int unsigned_off, const float* freqs, i64 fstride, \
      float step, float scale, i64 half, int traditional, int forward, i64, int, i64, i64) { \
    nv_rope_rows<T>(x, rows, s, y, nrows, d, positions, per_batch, offsets, ostride, \
                    unsigned_off, freqs, fstride, step, scale, half, traditional, forward); }
