// Indexing kernels: gathers, scatters and region updates.
//
// Indices are turned into buffer positions (`i64`) first, by the kernels of NV_INDEX_POS
// (one module per index type); the value kernels of NV_INDEX (one module per element type)
// then only move elements, so the two type choices never multiply. A dropped position (a
// scatter index outside its axis) is NV_SKIPPED.
//
// Scatters may meet repeated positions: every mode but `replace` combines atomically (a
// compare-and-swap loop on the aligned word that holds the element; native atomicAdd where
// it computes exactly what the CPU does). With `replace`, one of the writers wins.

#define NV_SKIPPED ((i64)(-9223372036854775807LL - 1))

// ---- index values -------------------------------------------------------------------------

// An index as i64; huge u64 values saturate (they stay out of range), as on the CPU.
template <typename I> __device__ __forceinline__ i64 nv_index_value(I v) { return (i64)v; }
template <> __device__ __forceinline__ i64 nv_index_value<u64>(u64 v) {
  return v > 9223372036854775807ULL ? 9223372036854775807LL : (i64)v;
}

// Where a window of `window` elements starts along an axis of `dim` for index `v`: negative
// indices count from the end, then the window is clamped inside (`skip` false) or the index
// is dropped (`skip` true: returns false).
__device__ __forceinline__ bool nv_resolve(i64 v, i64 dim, i64 window, bool skip, i64* at) {
  if (v < 0) v += dim;
  i64 last = dim - window;
  if (skip) {
    if (v < 0 || v > last) return false;
    *at = v;
    return true;
  }
  i64 hi = last > 0 ? last : 0;
  *at = v < 0 ? 0 : (v > hi ? hi : v);
  return true;
}

// `bases[p] += stride * start(p)` for each index position p (row-major over the indices'
// shape); `first` starts from 0 instead of reading `bases`. A dropped index marks its base.
#define NV_INDEX_POS(I, in) \
  extern "C" __global__ void index_bases_##in(const I* idx, Strided si, i64* bases, i64 n, \
                                              i64 dim, i64 window, i64 stride, i32 skip, \
                                              i32 first) { \
    NV_FOR_EACH(p, n) { \
      i64 b = first ? 0 : bases[p]; \
      if (b == NV_SKIPPED) continue; \
      i64 at; \
      bases[p] = nv_resolve(nv_index_value(idx[nv_locate(si, p)]), dim, window, skip != 0, &at) \
                     ? b + at * stride : NV_SKIPPED; \
    } } \
  extern "C" __global__ void index_axis_##in(const I* idx, Strided si, Strided others, i64* pos, \
                                             i64 n, i64 dim, i64 along, i32 skip) { \
    NV_FOR_EACH(p, n) { \
      i64 at; \
      pos[p] = nv_resolve(nv_index_value(idx[nv_locate(si, p)]), dim, 1, skip != 0, &at) \
                   ? nv_locate(others, p) + at * along : NV_SKIPPED; \
    } }

// ---- combining an element with an update ----------------------------------------------------

// Integers wrap (computed in u64, then truncated); halves compute in float and round once;
// bool adds as `or` and multiplies as `and`; float max/min let NaN win, as the CPU does.
template <typename T> __device__ __forceinline__ T nv_c_add(T a, T u) { return (T)((u64)a + (u64)u); }
template <typename T> __device__ __forceinline__ T nv_c_mul(T a, T u) { return (T)((u64)a * (u64)u); }
template <typename T> __device__ __forceinline__ T nv_c_max(T a, T u) { return a > u ? a : u; }
template <typename T> __device__ __forceinline__ T nv_c_min(T a, T u) { return a < u ? a : u; }

#define NV_C_FLOAT(T) \
  template <> __device__ __forceinline__ T nv_c_add<T>(T a, T u) { return a + u; } \
  template <> __device__ __forceinline__ T nv_c_mul<T>(T a, T u) { return a * u; } \
  template <> __device__ __forceinline__ T nv_c_max<T>(T a, T u) { return (isnan(a) || a > u) ? a : u; } \
  template <> __device__ __forceinline__ T nv_c_min<T>(T a, T u) { return (isnan(a) || a < u) ? a : u; }
NV_C_FLOAT(float)
NV_C_FLOAT(double)

#define NV_C_HALF(T) \
  template <> __device__ __forceinline__ T nv_c_add<T>(T a, T u) { return nv_down<T>(nv_up(a) + nv_up(u)); } \
  template <> __device__ __forceinline__ T nv_c_mul<T>(T a, T u) { return nv_down<T>(nv_up(a) * nv_up(u)); } \
  template <> __device__ __forceinline__ T nv_c_max<T>(T a, T u) { return nv_down<T>(nv_c_max<float>(nv_up(a), nv_up(u))); } \
  template <> __device__ __forceinline__ T nv_c_min<T>(T a, T u) { return nv_down<T>(nv_c_min<float>(nv_up(a), nv_up(u))); }
NV_C_HALF(f16)
NV_C_HALF(bf16)

template <> __device__ __forceinline__ bool nv_c_add<bool>(bool a, bool u) { return a || u; }
template <> __device__ __forceinline__ bool nv_c_mul<bool>(bool a, bool u) { return a && u; }
template <> __device__ __forceinline__ bool nv_c_max<bool>(bool a, bool u) { return a || u; }
template <> __device__ __forceinline__ bool nv_c_min<bool>(bool a, bool u) { return a && u; }

struct NvReplace { template <typename T> __device__ __forceinline__ static T go(T, T u) { return u; } };
struct NvSum { template <typename T> __device__ __forceinline__ static T go(T a, T u) { return nv_c_add(a, u); } };
struct NvProd { template <typename T> __device__ __forceinline__ static T go(T a, T u) { return nv_c_mul(a, u); } };
struct NvMax { template <typename T> __device__ __forceinline__ static T go(T a, T u) { return nv_c_max(a, u); } };
struct NvMin { template <typename T> __device__ __forceinline__ static T go(T a, T u) { return nv_c_min(a, u); } };

// `*p = M(*p, u)` atomically. Elements of 1 or 2 bytes are updated inside the aligned 32-bit
// word that holds them (device blocks are allocated in multiples of 512 bytes, so that word
// is inside the block). Values are compared as bits, so NaN never loops.
template <typename M, typename T> struct NvAtomic {
  __device__ __forceinline__ static void go(T* p, T u) {
    if constexpr (sizeof(T) == 8) {
      unsigned long long* w = reinterpret_cast<unsigned long long*>(p);
      unsigned long long old = *w, assumed;
      do {
        assumed = old;
        T cur;
        memcpy(&cur, &assumed, 8);
        T next = M::go(cur, u);
        unsigned long long bits;
        memcpy(&bits, &next, 8);
        old = atomicCAS(w, assumed, bits);
      } while (old != assumed);
    } else if constexpr (sizeof(T) == 4) {
      unsigned int* w = reinterpret_cast<unsigned int*>(p);
      unsigned int old = *w, assumed;
      do {
        assumed = old;
        T cur;
        memcpy(&cur, &assumed, 4);
        T next = M::go(cur, u);
        unsigned int bits;
        memcpy(&bits, &next, 4);
        old = atomicCAS(w, assumed, bits);
      } while (old != assumed);
    } else {
      static_assert(sizeof(T) == 1 || sizeof(T) == 2, "element sizes are 1, 2, 4 or 8 bytes");
      size_t addr = reinterpret_cast<size_t>(p);
      unsigned int* w = reinterpret_cast<unsigned int*>(addr & ~(size_t)3);
      unsigned int shift = (unsigned int)(addr & 3) * 8;
      unsigned int mask = (sizeof(T) == 1 ? 0xffu : 0xffffu) << shift;
      unsigned int old = *w, assumed;
      do {
        assumed = old;
        // Little-endian: the element's bytes are the low bytes of the shifted word.
        unsigned int lane = (assumed & mask) >> shift;
        T cur;
        memcpy(&cur, &lane, sizeof(T));
        T next = M::go(cur, u);
        unsigned int bits = 0;
        memcpy(&bits, &next, sizeof(T));
        old = atomicCAS(w, assumed, (assumed & ~mask) | ((bits << shift) & mask));
      } while (old != assumed);
    }
  }
};
// Replacing needs no read: one of the writers wins.
template <typename T> struct NvAtomic<NvReplace, T> {
  __device__ __forceinline__ static void go(T* p, T u) { *p = u; }
};
// Native additions that compute exactly what the CPU does (integers wrap in hardware).
template <> struct NvAtomic<NvSum, float> {
  __device__ __forceinline__ static void go(float* p, float u) { atomicAdd(p, u); }
};
template <> struct NvAtomic<NvSum, double> {
  __device__ __forceinline__ static void go(double* p, double u) { atomicAdd(p, u); }
};
template <> struct NvAtomic<NvSum, i32> {
  __device__ __forceinline__ static void go(i32* p, i32 u) { atomicAdd(p, u); }
};
template <> struct NvAtomic<NvSum, u32> {
  __device__ __forceinline__ static void go(u32* p, u32 u) { atomicAdd(p, u); }
};
template <> struct NvAtomic<NvSum, i64> {
  __device__ __forceinline__ static void go(i64* p, i64 u) {
    atomicAdd(reinterpret_cast<unsigned long long*>(p), (unsigned long long)u);
  }
};
template <> struct NvAtomic<NvSum, u64> {
  __device__ __forceinline__ static void go(u64* p, u64 u) {
    atomicAdd(reinterpret_cast<unsigned long long*>(p), (unsigned long long)u);
  }
};

// ---- value kernels ---------------------------------------------------------------------------

// Kernels of one combining mode: `update` combines a strided source into a strided view of
// the destination, position by position (distinct positions: no atomics; `replace` is the
// strided copy into an offset); `scatter` places window `w` of index position `p` at
// `bases[p]` plus the window's own offset (`bases` null: one position, at 0); `scatter_pos`
// places value `p` at `pos[p]`.
#define NV_INDEX_MODE(T, tn, mode, M) \
  extern "C" __global__ void update_##mode##_##tn(T* dst, Strided sd, const T* src, Strided ss, \
                                                  i64 n) { \
    NV_FOR_EACH(i, n) { \
      T* p = dst + nv_locate(sd, i); \
      *p = M::go(*p, src[nv_locate(ss, i)]); \
    } } \
  extern "C" __global__ void scatter_##mode##_##tn(T* dst, const T* upd, Strided su, \
                                                   const i64* bases, i64 np, i64 nw, \
                                                   Strided window) { \
    NV_FOR_EACH(i, np * nw) { \
      i64 p = i / nw, w = i - p * nw; \
      i64 b = bases ? bases[p] : 0; \
      if (b == NV_SKIPPED) continue; \
      NvAtomic<M, T>::go(dst + b + nv_locate(window, w), upd[nv_locate(su, i)]); \
    } } \
  extern "C" __global__ void scatter_pos_##mode##_##tn(T* dst, const i64* pos, const T* vals, \
                                                       Strided sv, i64 n) { \
    NV_FOR_EACH(p, n) { \
      i64 at = pos[p]; \
      if (at == NV_SKIPPED) continue; \
      NvAtomic<M, T>::go(dst + at, vals[nv_locate(sv, p)]); \
    } }

// Every kernel of one element type. `gather_blocks`: output element (o, p, b), row-major, is
// the source element at `outer(o) + bases[p] + block(b)` (`bases` null: one position, at 0);
// `gather_pos`: output p is the source element at `pos[p]`; `fill`: every element is `*v`.
#define NV_INDEX(T, tn) \
  extern "C" __global__ void gather_blocks_##tn(const T* src, T* out, const i64* bases, i64 np, \
                                                i64 nb, i64 total, Strided outer, \
                                                Strided block) { \
    NV_FOR_EACH(i, total) { \
      i64 r = i / nb, b = i - r * nb; \
      i64 o = r / np, p = r - o * np; \
      out[i] = src[nv_locate(outer, o) + (bases ? bases[p] : 0) + nv_locate(block, b)]; \
    } } \
  extern "C" __global__ void gather_pos_##tn(const T* src, const i64* pos, T* out, i64 n) { \
    NV_FOR_EACH(i, n) out[i] = src[pos[i]]; } \
  extern "C" __global__ void fill_##tn(T* y, i64 n, const T* v) { \
    T x = *v; \
    NV_FOR_EACH(i, n) y[i] = x; } \
  NV_INDEX_MODE(T, tn, replace, NvReplace) \
  NV_INDEX_MODE(T, tn, sum, NvSum) \
  NV_INDEX_MODE(T, tn, prod, NvProd) \
  NV_INDEX_MODE(T, tn, max, NvMax) \
  NV_INDEX_MODE(T, tn, min, NvMin)
