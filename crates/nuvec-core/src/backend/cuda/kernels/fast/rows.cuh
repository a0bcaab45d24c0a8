// Rows of a last-axis kernel held in registers, shared by the norms and softmax families.
// Needs common.cuh first.
//
// `S` slots a thread, a warp per row (eight rows a block of 256) or a block of `lanes`
// threads (at most 1024) per row, so that a row up to `lanes * S` elements is read once and
// no thread holds more registers than its share (the occupancy a bandwidth-bound kernel
// needs). Slot s of lane l holds element (l + (s / V) * lanes) * V + s % V when the row moves
// in 16-byte packs of V elements, else element l + s * lanes; slots past the row hold 0.

#define NV_INF __int_as_float(0x7f800000)
#define NV_NAN __int_as_float(0x7fc00000)

// The sum of `v` over the `lanes` threads of a row (a warp, or the whole block of up to 1024
// threads), in every one of them. With the block form every thread of the block must call it.
__device__ __forceinline__ float nv_row_sum(float v, int lanes) {
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  if (lanes > 32) {
    __shared__ float part[32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) part[warp] = v;
    __syncthreads();
    v = lane < lanes / 32 ? part[lane] : 0.0f;
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
    // `part` is written again by the next call.
    __syncthreads();
  }
  return v;
}

// The larger of a and b, NaN if either is (a NaN anywhere makes a row's maximum NaN).
__device__ __forceinline__ float nv_max_nan(float a, float b) { return (a != a || a > b) ? a : b; }

// The maximum of `v` over the `lanes` threads of a row, as `nv_row_sum`.
__device__ __forceinline__ float nv_row_max(float v, int lanes) {
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1) v = nv_max_nan(v, __shfl_xor_sync(0xffffffffu, v, m));
  if (lanes > 32) {
    __shared__ float part[32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) part[warp] = v;
    __syncthreads();
    v = lane < lanes / 32 ? part[lane] : -NV_INF;
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) v = nv_max_nan(v, __shfl_xor_sync(0xffffffffu, v, m));
    __syncthreads();
  }
  return v;
}

// The element of slot s.
template <typename T>
__device__ __forceinline__ i64 nv_slot(int s, bool packed, int lane, int lanes) {
  constexpr int V = 16 / sizeof(T);
  return packed ? ((i64)lane + (i64)(s / V) * lanes) * V + s % V : (i64)lane + (i64)s * lanes;
}

// Row `p` (elements `st` apart; step 1 and aligned when packed) into the slots, as float.
template <typename T, int S>
__device__ __forceinline__ void nv_load_slots(const T* __restrict__ p, i64 st, i64 n, bool packed,
                                              int lane, int lanes, float (&c)[S]) {
  constexpr int V = 16 / sizeof(T);
  if (packed) {
#pragma unroll
    for (int k = 0; k < S / V; ++k) {
      const i64 q = lane + (i64)k * lanes;
      NvPack<T, V> a;
      if (q * V < n) a = reinterpret_cast<const NvPack<T, V>*>(p)[q];
#pragma unroll
      for (int j = 0; j < V; ++j) c[k * V + j] = q * V < n ? nv_up(a.v[j]) : 0.0f;
    }
  } else {
#pragma unroll
    for (int s = 0; s < S; ++s) {
      const i64 i = lane + (i64)s * lanes;
      c[s] = i < n ? nv_up(p[i * st]) : 0.0f;
    }
  }
}

// The slots rounded to T into the row-major row `p` (aligned when packed).
template <typename T, int S>
__device__ __forceinline__ void nv_store_slots(T* __restrict__ p, i64 n, bool packed, int lane,
                                               int lanes, const float (&c)[S]) {
  constexpr int V = 16 / sizeof(T);
  if (packed) {
#pragma unroll
    for (int k = 0; k < S / V; ++k) {
      const i64 q = lane + (i64)k * lanes;
      if (q * V < n) {
        NvPack<T, V> o;
#pragma unroll
        for (int j = 0; j < V; ++j) o.v[j] = nv_down<T>(c[k * V + j]);
        reinterpret_cast<NvPack<T, V>*>(p)[q] = o;
      }
    }
  } else {
#pragma unroll
    for (int s = 0; s < S; ++s) {
      const i64 i = lane + (i64)s * lanes;
      if (i < n) p[i] = nv_down<T>(c[s]);
    }
  }
}

// A parameter (null: absent, `none` in every slot) into the slots.
template <typename T, int S>
__device__ __forceinline__ void nv_param_slots(const T* __restrict__ p, i64 st, i64 n, bool packed,
                                               int lane, int lanes, float none, float (&c)[S]) {
  if (p == nullptr) {
#pragma unroll
    for (int s = 0; s < S; ++s) c[s] = none;
  } else {
    nv_load_slots<T, S>(p, st, n, packed, lane, lanes, c);
  }
}
