// Sorting kernels. Every element becomes a (key, index) pair: the key is an unsigned integer
// whose order is NumPy's (the CPU backend's `SortKey`: NaN last, -0.0 equal to 0.0, signed
// integers with their sign bit flipped), the index its position in the lane. Pairs compare by
// key, then index, so no two are equal and any correct sort of them is the stable sort.
//
// The input is a strided view whose last axis is the sorted one: lane r, position j is flat
// element r * n + j of the view. Outputs keep lanes contiguous (lane r at r * n).
//
// Lanes of at most NV_SORT_TILE elements: one block per lane, a bitonic sort in shared memory
// (`sort_rows`). Longer lanes: blocks sort tiles of NV_SORT_TILE (`sort_tiles`), merge passes
// in global memory double the sorted runs (`sort_merge`), then `sort_gather` reads the values.

#define NV_SORT_TILE 4096

// Keys. Narrow types widen to 32 bits, which keeps their order.
template <typename U>
__device__ __forceinline__ U nv_float_key(U bits, U inf) {
  const U sign = (U)((U)1 << (sizeof(U) * 8 - 1));
  const U mag = (U)(bits & (U)~sign);
  if (mag > inf) return (U)~(U)0;  // NaN, any payload: after everything
  if (mag == 0) bits = 0;          // -0.0 sorts as 0.0
  return (bits & sign) ? (U)~bits : (U)(bits | sign);
}

__device__ __forceinline__ u32 nv_sort_key(bool x) { return x ? 1u : 0u; }
__device__ __forceinline__ u32 nv_sort_key(u8 x) { return x; }
__device__ __forceinline__ u32 nv_sort_key(u16 x) { return x; }
__device__ __forceinline__ u32 nv_sort_key(u32 x) { return x; }
__device__ __forceinline__ u64 nv_sort_key(u64 x) { return x; }
__device__ __forceinline__ u32 nv_sort_key(i8 x) { return (u32)(u8)((u8)x ^ (u8)0x80); }
__device__ __forceinline__ u32 nv_sort_key(i16 x) { return (u32)(u16)((u16)x ^ (u16)0x8000); }
__device__ __forceinline__ u32 nv_sort_key(i32 x) { return (u32)x ^ 0x80000000u; }
__device__ __forceinline__ u64 nv_sort_key(i64 x) { return (u64)x ^ 0x8000000000000000ull; }
__device__ __forceinline__ u32 nv_sort_key(f16 x) {
  return nv_float_key<u16>(__half_as_ushort(x), (u16)0x7c00);
}
__device__ __forceinline__ u32 nv_sort_key(bf16 x) {
  return nv_float_key<u16>(__bfloat16_as_ushort(x), (u16)0x7f80);
}
__device__ __forceinline__ u32 nv_sort_key(float x) {
  return nv_float_key<u32>(__float_as_uint(x), 0x7f800000u);
}
__device__ __forceinline__ u64 nv_sort_key(double x) {
  return nv_float_key<u64>((u64)__double_as_longlong(x), 0x7ff0000000000000ull);
}

// Whether pair a comes before pair b.
template <typename K>
__device__ __forceinline__ bool nv_pair_less(K ka, u32 ia, K kb, u32 ib) {
  return ka < kb || (ka == kb && ia < ib);
}

// Sorts `len` (<= p, p a power of two) elements of the view, flat elements base .. base+len,
// into shared memory: sk/si hold the p sorted pairs, the first `len` the real ones (padding
// pairs have the largest key and index, which no real pair has: indices stay below 2^32-1).
// Indices are first + j. Every thread of the block must call it.
template <typename T, typename K>
__device__ void nv_sort_tile(const T* x, const Strided& sx, i64 base, i64 len, i64 p, u32 first,
                             K* sk, u32* si) {
  for (i64 j = threadIdx.x; j < p; j += blockDim.x) {
    if (j < len) {
      sk[j] = (K)nv_sort_key(x[nv_locate(sx, base + j)]);
      si[j] = first + (u32)j;
    } else {
      sk[j] = (K)~(K)0;
      si[j] = 0xffffffffu;
    }
  }
  __syncthreads();
  // Bitonic sort: stage k merges bitonic runs of k, step j compares elements j apart. Pair t
  // of a step is (i, i + j), i being t with a zero bit inserted at j (the indices whose bit j
  // is clear); its direction is ascending where bit k of i is clear. Shared-memory indices
  // fit an int (p <= NV_SORT_TILE).
  const int pp = (int)p;
  for (int k = 2; k <= pp; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int t = threadIdx.x; t < pp / 2; t += blockDim.x) {
        const int i = ((t & ~(j - 1)) << 1) | (t & (j - 1));
        const int o = i + j;
        const bool up = (i & k) == 0;
        const K ka = sk[i], kb = sk[o];
        const u32 ia = si[i], ib = si[o];
        const bool swap = up ? nv_pair_less(kb, ib, ka, ia) : nv_pair_less(ka, ia, kb, ib);
        if (swap) {
          sk[i] = kb; sk[o] = ka;
          si[i] = ib; si[o] = ia;
        }
      }
      __syncthreads();
    }
  }
}

// Lanes of n <= p elements, p = n rounded up to a power of two; block b sorts lanes b,
// b + gridDim.x, ... Dynamic shared memory: p keys then p indices.
template <typename T, typename K>
__device__ void nv_sort_rows(const T* x, Strided sx, i64 rows, i64 n, i64 p, T* vals, u32* inds) {
  extern __shared__ __align__(16) unsigned char nv_smem[];
  K* sk = (K*)nv_smem;
  u32* si = (u32*)(sk + p);
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    nv_sort_tile<T, K>(x, sx, r * n, n, p, 0u, sk, si);
    for (i64 j = threadIdx.x; j < n; j += blockDim.x) {
      const u32 id = si[j];
      vals[r * n + j] = x[nv_locate(sx, r * n + id)];
      inds[r * n + j] = id;
    }
    __syncthreads();  // the next lane overwrites the shared pairs
  }
}

// Tiles of NV_SORT_TILE along lanes of n elements (the last tile of a lane may be shorter):
// tile b of the lane-major order is sorted into keys/ids at its own place.
template <typename T, typename K>
__device__ void nv_sort_tiles(const T* x, Strided sx, i64 rows, i64 n, K* keys, u32* ids) {
  extern __shared__ __align__(16) unsigned char nv_smem[];
  K* sk = (K*)nv_smem;
  u32* si = (u32*)(sk + NV_SORT_TILE);
  const i64 per_lane = (n + NV_SORT_TILE - 1) / NV_SORT_TILE;
  for (i64 b = blockIdx.x; b < rows * per_lane; b += gridDim.x) {
    const i64 r = b / per_lane;
    const i64 start = (b - r * per_lane) * NV_SORT_TILE;
    const i64 len = min((i64)NV_SORT_TILE, n - start);
    nv_sort_tile<T, K>(x, sx, r * n + start, len, NV_SORT_TILE, (u32)start, sk, si);
    for (i64 j = threadIdx.x; j < len; j += blockDim.x) {
      keys[r * n + start + j] = sk[j];
      ids[r * n + start + j] = si[j];
    }
    __syncthreads();
  }
}

// One merge pass: in every lane, sorted runs of w (from 0; the last may be shorter) are
// merged pairwise into runs of 2w. An element's place in the merged run is its place in its
// own run plus the number of elements of the partner run before it (pairs are distinct, so
// a binary search counts them exactly). A run without a partner stays where it is.
template <typename K>
__device__ void nv_sort_merge(const K* ks, const u32* is, K* kd, u32* id, i64 rows, i64 n, i64 w) {
  NV_FOR_EACH(i, rows * n) {
    const i64 r = i / n;
    const i64 p = i - r * n;
    const i64 run = p / w;
    const i64 other = (run ^ 1) * w;
    const i64 other_len = max((i64)0, min(w, n - other));
    const K k = ks[i];
    const u32 ix = is[i];
    const K* ok = ks + r * n + other;
    const u32* oi = is + r * n + other;
    i64 lo = 0, hi = other_len;
    while (lo < hi) {
      const i64 mid = lo + (hi - lo) / 2;
      if (nv_pair_less(ok[mid], oi[mid], k, ix)) lo = mid + 1; else hi = mid;
    }
    const i64 dst = (run & ~(i64)1) * w + (p - run * w) + lo;
    kd[r * n + dst] = k;
    id[r * n + dst] = ix;
  }
}

// The values of sorted indices: lane r, position j takes element ids[r * n + j] of lane r.
template <typename T>
__device__ void nv_sort_gather(const T* x, Strided sx, i64 rows, i64 n, const u32* ids, T* vals,
                               u32* inds) {
  NV_FOR_EACH(i, rows * n) {
    const i64 r = i / n;
    const u32 id = ids[i];
    vals[i] = x[nv_locate(sx, r * n + id)];
    inds[i] = id;
  }
}

// searchsorted: for each element of v, the number of elements of the sorted 1-D a (na
// elements from a + a_off, a_step apart) before it (`right`: before or equal to it).
template <typename T>
__device__ void nv_searchsorted(const T* a, i64 na, i64 a_off, i64 a_step, const T* v, Strided sv,
                                i64 nv, u32* out, int right) {
  NV_FOR_EACH(i, nv) {
    const auto k = nv_sort_key(v[nv_locate(sv, i)]);
    i64 lo = 0, hi = na;
    while (lo < hi) {
      const i64 mid = lo + (hi - lo) / 2;
      const auto e = nv_sort_key(a[a_off + mid * a_step]);
      if (right ? e <= k : e < k) lo = mid + 1; else hi = mid;
    }
    out[i] = (u32)lo;
  }
}

// Every kernel of one element type T (CUDA type), key type K, name suffix tn.
#define NV_SORT(T, K, tn) \
  extern "C" __global__ void sort_rows_##tn(const T* x, Strided sx, i64 rows, i64 n, i64 p, \
                                            T* vals, u32* inds) { \
    nv_sort_rows<T, K>(x, sx, rows, n, p, vals, inds); } \
  extern "C" __global__ void sort_tiles_##tn(const T* x, Strided sx, i64 rows, i64 n, K* keys, \
                                             u32* ids) { \
    nv_sort_tiles<T, K>(x, sx, rows, n, keys, ids); } \
  extern "C" __global__ void sort_merge_##tn(const K* ks, const u32* is, K* kd, u32* id, \
                                             i64 rows, i64 n, i64 w) { \
    nv_sort_merge<K>(ks, is, kd, id, rows, n, w); } \
  extern "C" __global__ void sort_gather_##tn(const T* x, Strided sx, i64 rows, i64 n, \
                                              const u32* ids, T* vals, u32* inds) { \
    nv_sort_gather<T>(x, sx, rows, n, ids, vals, inds); } \
  extern "C" __global__ void searchsorted_##tn(const T* a, i64 na, i64 a_off, i64 a_step, \
                                               const T* v, Strided sv, i64 nv, u32* out, \
                                               int right) { \
    nv_searchsorted<T>(a, na, a_off, a_step, v, sv, nv, out, right); }
