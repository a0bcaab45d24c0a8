// Rows of a last-axis kernel held in registers, shared by the norms and softmax families.
// Needs common.cuh first.
//
// `lanes` threads a row: a warp (eight rows a block of 256) or a block of up to 512 threads
// in whole warps, so that a row is read once and no thread holds more registers than its
// share (the occupancy a bandwidth-bound kernel needs). The row reductions below take either
// form.

#define NV_INF __int_as_float(0x7f800000)
#define NV_NAN __int_as_float(0x7fc00000)

// The block form of an exchange (a row over more than a warp) meets in a shared buffer, after
// one barrier. Before the buffer is written again, every thread must have read it:
// - `slot` null: a second barrier ends the exchange;
// - else the exchange takes buffer *slot of two and flips *slot, with no second barrier. A
//   kernel that passes one slot variable to every exchange of its rows alternates the two
//   buffers, so a buffer is written again only after another exchange's barrier, which every
//   thread reaches after its reads of the buffer (one barrier an exchange where there were
//   two: a row of softmax or layer norm waited on four).
// NV_ROW_TWO_BARRIERS=1 (`NUVEC_KERNEL_DEFINES`) ends every exchange with the second barrier
// again, for the comparison.
#ifndef NV_ROW_TWO_BARRIERS
#define NV_ROW_TWO_BARRIERS 0
#endif

// The sum of `v` over the `lanes` threads of a row (a warp, or the whole block of up to 1024
// threads), in every one of them. With the block form every thread of the block must call it.
__device__ __forceinline__ float nv_row_sum(float v, int lanes, int* slot = nullptr) {
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  if (lanes > 32) {
    __shared__ float part[2][32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int b = slot != nullptr ? *slot : 0;
    if (lane == 0) part[b][warp] = v;
    __syncthreads();
    v = lane < lanes / 32 ? part[b][lane] : 0.0f;
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
    if (slot != nullptr) *slot ^= 1;
    if (slot == nullptr || NV_ROW_TWO_BARRIERS) __syncthreads();  // `part` is written again
  }
  return v;
}

// (count, mean, sum of squared deviations) of two parts merged into the first (Chan et al.'s
// update; an empty part changes nothing).
__device__ __forceinline__ void nv_merge_moments(float& c, float& m, float& m2, float cb, float mb,
                                                 float m2b) {
  const float t = c + cb;
  if (cb == 0.0f) return;
  const float d = mb - m, f = cb / t;
  m += d * f;
  m2 += m2b + d * d * c * f;
  c = t;
}

// The moments of a row from each thread's own (count, mean, squared deviations), merged over
// the `lanes` threads of the row, in every one of them (the block form as nv_row_sum).
__device__ __forceinline__ void nv_row_moments(float& c, float& m, float& m2, int lanes,
                                               int* slot = nullptr) {
#pragma unroll
  for (int s = 16; s >= 1; s >>= 1) {
    const float cb = __shfl_xor_sync(0xffffffffu, c, s);
    const float mb = __shfl_xor_sync(0xffffffffu, m, s);
    const float m2b = __shfl_xor_sync(0xffffffffu, m2, s);
    nv_merge_moments(c, m, m2, cb, mb, m2b);
  }
  if (lanes > 32) {
    __shared__ float parts[2][3][32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float (*part)[32] = parts[slot != nullptr ? *slot : 0];
    if (lane == 0) {
      part[0][warp] = c;
      part[1][warp] = m;
      part[2][warp] = m2;
    }
    __syncthreads();
    const bool has = lane < lanes / 32;
    c = has ? part[0][lane] : 0.0f;
    m = has ? part[1][lane] : 0.0f;
    m2 = has ? part[2][lane] : 0.0f;
#pragma unroll
    for (int s = 16; s >= 1; s >>= 1) {
      const float cb = __shfl_xor_sync(0xffffffffu, c, s);
      const float mb = __shfl_xor_sync(0xffffffffu, m, s);
      const float m2b = __shfl_xor_sync(0xffffffffu, m2, s);
      nv_merge_moments(c, m, m2, cb, mb, m2b);
    }
    if (slot != nullptr) *slot ^= 1;
    if (slot == nullptr || NV_ROW_TWO_BARRIERS) __syncthreads();
  }
}

// The larger of a and b, NaN if either is (a NaN anywhere makes a row's maximum NaN): one
// `max.NaN` from compute capability 8.0, where the comparisons and the select took three
// instructions an element of softmax's and log-sum-exp's maxima.
// nuvec-emulation: device only (tests/emulation/ptx.h stands in for this region) {
__device__ __forceinline__ float nv_max_nan(float a, float b) {
#if __CUDA_ARCH__ >= 800
  float y;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b));
  return y;
#else
  return (a != a || a > b) ? a : b;
#endif
}
// } nuvec-emulation

// The maximum of `v` over the `lanes` threads of a row, as `nv_row_sum`.
__device__ __forceinline__ float nv_row_max(float v, int lanes, int* slot = nullptr) {
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1) v = nv_max_nan(v, __shfl_xor_sync(0xffffffffu, v, m));
  if (lanes > 32) {
    __shared__ float part[2][32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int b = slot != nullptr ? *slot : 0;
    if (lane == 0) part[b][warp] = v;
    __syncthreads();
    v = lane < lanes / 32 ? part[b][lane] : -NV_INF;
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) v = nv_max_nan(v, __shfl_xor_sync(0xffffffffu, v, m));
    if (slot != nullptr) *slot ^= 1;
    if (slot == nullptr || NV_ROW_TWO_BARRIERS) __syncthreads();
  }
  return v;
}

// ---------------------------------------------------------------------------------------
// Rows held as packs: P packs of V = 16 / sizeof(T) elements a thread, kept as the raw
// 32-bit words they are loaded in (two half-precision elements a word: as separate 16-bit
// values the compiler gives each a register). A bf16 row of 4,096 then costs 16 registers a
// thread over 128 threads, half of what floats take, so that a multiprocessor keeps a dozen
// rows' loads in flight (what a bandwidth-bound row kernel's speed depends on). Pack k of
// lane l holds the elements (l + k * lanes) * V + j, j < V; elements past the row hold 0.
// A row moves in 16-byte accesses when it is `packed` (step 1, every pointer it touches
// aligned, n % V == 0: the host checks), else element by element in the same arrangement.

template <typename T> struct NvVec { static constexpr int v = 16 / sizeof(T); typedef NvPack<T, v> P; };

// Sixteen bytes of elements as four words, aligned so that a pack moves in one 16-byte access
// (with the words' own alignment the compiler split every load into four of 4 bytes).
// NV_RAW_ALIGN=4 (`NUVEC_KERNEL_DEFINES`) gives the split loads again, for the comparison.
#ifndef NV_RAW_ALIGN
#define NV_RAW_ALIGN 16
#endif
struct alignas(NV_RAW_ALIGN) NvRaw { u32 w[4]; };

// Element j of a raw pack, as float (the bits of a half type sit in the low half of the word
// for even j).
template <typename T> __device__ __forceinline__ float nv_raw_get(const NvRaw& r, int j);
template <> __device__ __forceinline__ float nv_raw_get<float>(const NvRaw& r, int j) {
  return __uint_as_float(r.w[j]);
}
template <> __device__ __forceinline__ float nv_raw_get<bf16>(const NvRaw& r, int j) {
  const u32 w = r.w[j >> 1];
  return __uint_as_float((j & 1) ? (w & 0xffff0000u) : (w << 16));
}
template <> __device__ __forceinline__ float nv_raw_get<f16>(const NvRaw& r, int j) {
  const u32 w = r.w[j >> 1];
  return __half2float(__ushort_as_half((unsigned short)((j & 1) ? (w >> 16) : (w & 0xffffu))));
}

// The bits of v as element j of a raw pack.
template <typename T> __device__ __forceinline__ void nv_raw_set(NvRaw& r, int j, T v) {
  if (sizeof(T) == 4) {
    r.w[j] = *reinterpret_cast<const u32*>(&v);
  } else {
    const u32 b = *reinterpret_cast<const unsigned short*>(&v);
    u32& w = r.w[j >> 1];
    w = (j & 1) ? ((w & 0xffffu) | (b << 16)) : ((w & 0xffff0000u) | b);
  }
}

// Pack q of the row at `p` (elements `st` apart; zeros past n).
template <typename T>
__device__ __forceinline__ NvRaw nv_raw_load(const T* __restrict__ p, i64 st, i64 q, i64 n,
                                             bool packed) {
  constexpr int V = NvVec<T>::v;
  NvRaw a;
  if (packed) {
    if (q * V < n) return reinterpret_cast<const NvRaw*>(p)[q];
#pragma unroll
    for (int i = 0; i < 4; ++i) a.w[i] = 0u;
    return a;
  }
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const i64 i = q * V + j;
    nv_raw_set<T>(a, j, i < n ? p[i * st] : nv_down<T>(0.0f));
  }
  return a;
}

// Pack q of a parameter row (null: `none` in every element) as floats.
template <typename T>
__device__ __forceinline__ void nv_pack_param(const T* __restrict__ p, i64 st, i64 q, i64 n,
                                              bool packed, float none, float (&out)[NvVec<T>::v]) {
  constexpr int V = NvVec<T>::v;
  if (p == nullptr) {
#pragma unroll
    for (int j = 0; j < V; ++j) out[j] = none;
    return;
  }
  const NvRaw a = nv_raw_load<T>(p, st, q, n, packed);
#pragma unroll
  for (int j = 0; j < V; ++j) out[j] = nv_raw_get<T>(a, j);
}

// Pack q of a parameter row as loaded (zeros for a null one: the caller picks its default).
template <typename T>
__device__ __forceinline__ NvRaw nv_raw_param(const T* __restrict__ p, i64 st, i64 q, i64 n,
                                              bool packed) {
  if (p != nullptr) return nv_raw_load<T>(p, st, q, n, packed);
  NvRaw a;
#pragma unroll
  for (int i = 0; i < 4; ++i) a.w[i] = 0u;
  return a;
}

// Pack q into the row-major row `p` (only the elements before n).
template <typename T>
__device__ __forceinline__ void nv_pack_store(T* __restrict__ p, i64 q, i64 n, bool packed,
                                              const typename NvVec<T>::P& o) {
  constexpr int V = NvVec<T>::v;
  if (packed) {
    if (q * V < n) reinterpret_cast<typename NvVec<T>::P*>(p)[q] = o;
    return;
  }
#pragma unroll
  for (int j = 0; j < V; ++j)
    if (q * V + j < n) p[q * V + j] = o.v[j];
}

// How many of pack q's V elements lie in a row of n (0 to V): a per-pack count, so that
// masks compare small constants instead of 64-bit element indices.
// `full`: the row fills all P packs of its `lanes` threads (n = lanes P V: hidden sizes such
// as 4,096 over 128 threads of four packs; the host checks), so that every count is V and the
// masks compile away. The kernels that mask elements (layer norm, its gradient, softmax,
// log-sum-exp) have a `*_full_*` form for such rows: the masks of a partial last pack took
// about a third of a layer norm's instructions (per-element predicates and the pack counts),
// and these kernels issued instructions 70% of the time on an H100 under ncu, near the limit
// on the H200, which moves 1.4 times the bytes per issue slot.
template <typename T, bool full = false>
__device__ __forceinline__ int nv_pack_valid(i64 q, i64 n) {
  if (full) return NvVec<T>::v;
  const i64 left = n - q * NvVec<T>::v;
  return left <= 0 ? 0 : (left >= NvVec<T>::v ? NvVec<T>::v : (int)left);
}

// The pack index of pack k of `lane`.
__device__ __forceinline__ i64 nv_pack_at(int k, int lane, int lanes) {
  return (i64)lane + (i64)k * lanes;
}

// A row's share of one thread: P raw packs.
template <typename T, int P> struct NvPacks {
  NvRaw p[P];
  __device__ __forceinline__ float at(int k, int j) const { return nv_raw_get<T>(p[k], j); }
  __device__ __forceinline__ void set(int k, int j, T v) { nv_raw_set<T>(p[k], j, v); }
};

// Loads this thread's packs of the row at `p`.
template <typename T, int P>
__device__ __forceinline__ void nv_packs_load(const T* __restrict__ p, i64 st, i64 n, bool packed,
                                              int lane, int lanes, NvPacks<T, P>& r) {
#pragma unroll
  for (int k = 0; k < P; ++k) r.p[k] = nv_raw_load<T>(p, st, nv_pack_at(k, lane, lanes), n, packed);
}
