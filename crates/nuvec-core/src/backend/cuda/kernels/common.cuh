// Types, layouts and conversions shared by every nuvec kernel.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef signed char i8;
typedef unsigned char u8;
typedef short i16;
typedef unsigned short u16;
typedef int i32;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;
typedef __half f16;
typedef __nv_bfloat16 bf16;

// A strided view: element i (row-major over `shape`) sits at `offset + sum(idx[d] * strides[d])`.
// Axes that merge were merged on the host, so few are left; the host rejects more than 8.
#define NV_MAX_DIMS 8
struct Strided {
  i64 shape[NV_MAX_DIMS];
  i64 strides[NV_MAX_DIMS];
  i64 offset;
  i32 ndim;
};

// The loop is unrolled over all NV_MAX_DIMS axes with the unused ones skipped: indexing the
// view (a kernel parameter) only at constant positions keeps it in the parameter space,
// where a loop over `ndim` would make every thread copy it to local memory first. `i` lies
// in the view, so what is left of it at the first axis is that axis's index: no division
// there (a 64-bit division is some thirty instructions, and a view of rows is often 1-D).
__device__ __forceinline__ i64 nv_locate(const Strided& s, i64 i) {
  i64 at = s.offset;
#pragma unroll
  for (int d = NV_MAX_DIMS - 1; d >= 1; --d) {
    if (d < s.ndim) {
      const i64 q = i / s.shape[d];
      at += (i - q * s.shape[d]) * s.strides[d];
      i = q;
    }
  }
  if (s.ndim > 0) at += i * s.strides[0];
  return at;
}

// The type a value computes in: half types in float, as the CPU backend does.
template <typename T> struct Acc { typedef T type; };
template <> struct Acc<f16> { typedef float type; };
template <> struct Acc<bf16> { typedef float type; };

template <typename T> __device__ __forceinline__ typename Acc<T>::type nv_up(T x) { return x; }
template <> __device__ __forceinline__ float nv_up<f16>(f16 x) { return __half2float(x); }
template <> __device__ __forceinline__ float nv_up<bf16>(bf16 x) { return __bfloat162float(x); }

template <typename T> __device__ __forceinline__ T nv_down(typename Acc<T>::type x) { return x; }
template <> __device__ __forceinline__ f16 nv_down<f16>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ bf16 nv_down<bf16>(float x) { return __float2bfloat16_rn(x); }

// The grid-stride loop over `n` elements with 64-bit indices (strided kernels).
#define NV_FOR_EACH(i, n) \
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)

// ---- Contiguous fast paths: 16-byte accesses ----
// A contiguous kernel moves `NvWidth<A, B>::v` elements per thread and step, so that the side
// with the narrower type (A or B bytes) reads or writes one whole 16-byte word, capped so that
// the wider side stays within 64 bytes (four words) of registers. Both sizes are powers of
// two, so a pack is 2^k bytes; packs are used only when every pointer is 16-byte aligned (the
// host passes element starts that a layout offset may misalign), and the elements past the
// last whole pack are done one by one.
template <int A, int B> struct NvWidth {
  static constexpr int lo = A < B ? A : B;
  static constexpr int hi = A < B ? B : A;
  static constexpr int v = (16 / lo < 64 / hi) ? 16 / lo : 64 / hi;
};

// `V` elements of `T` read or written with one access per 16 bytes (a single narrower one
// when the pack is smaller than 16 bytes).
template <int Bytes> struct NvAlign { static constexpr int v = Bytes < 16 ? Bytes : 16; };
template <typename T, int V> struct alignas(NvAlign<sizeof(T) * V>::v) NvPack { T v[V]; };

__device__ __forceinline__ bool nv_aligned(const void* p) {
  return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}

// The first element a thread takes in a grid-stride loop, and the loop's step.
__device__ __forceinline__ i64 nv_thread() { return (i64)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ i64 nv_threads() { return (i64)gridDim.x * blockDim.x; }

// y[i] = f(x[i]) for i < n over contiguous arrays.
template <typename S, typename D, typename F>
__device__ __forceinline__ void nv_map1(const S* __restrict__ x, D* __restrict__ y, i64 n, F f) {
  constexpr int V = NvWidth<sizeof(S), sizeof(D)>::v;
  const i64 first = nv_thread(), step = nv_threads();
  i64 done = 0;
  if (nv_aligned(x) && nv_aligned(y)) {
    const i64 packs = n / V;
    const NvPack<S, V>* xp = reinterpret_cast<const NvPack<S, V>*>(x);
    NvPack<D, V>* yp = reinterpret_cast<NvPack<D, V>*>(y);
    for (i64 k = first; k < packs; k += step) {
      const NvPack<S, V> a = xp[k];
      NvPack<D, V> r;
#pragma unroll
      for (int j = 0; j < V; ++j) r.v[j] = f(a.v[j]);
      yp[k] = r;
    }
    done = packs * V;
  }
  for (i64 i = done + first; i < n; i += step) y[i] = f(x[i]);
}

// z[i] = f(x[i], y[i]) for i < n over contiguous arrays.
template <typename S, typename D, typename F>
__device__ __forceinline__ void nv_map2(const S* __restrict__ x, const S* __restrict__ y,
                                        D* __restrict__ z, i64 n, F f) {
  constexpr int V = NvWidth<sizeof(S), sizeof(D)>::v;
  const i64 first = nv_thread(), step = nv_threads();
  i64 done = 0;
  if (nv_aligned(x) && nv_aligned(y) && nv_aligned(z)) {
    const i64 packs = n / V;
    const NvPack<S, V>* xp = reinterpret_cast<const NvPack<S, V>*>(x);
    const NvPack<S, V>* yp = reinterpret_cast<const NvPack<S, V>*>(y);
    NvPack<D, V>* zp = reinterpret_cast<NvPack<D, V>*>(z);
    for (i64 k = first; k < packs; k += step) {
      const NvPack<S, V> a = xp[k];
      const NvPack<S, V> b = yp[k];
      NvPack<D, V> r;
#pragma unroll
      for (int j = 0; j < V; ++j) r.v[j] = f(a.v[j], b.v[j]);
      zp[k] = r;
    }
    done = packs * V;
  }
  for (i64 i = done + first; i < n; i += step) z[i] = f(x[i], y[i]);
}

// z[i] = c[i] ? x[i] : y[i] for i < n over contiguous arrays.
template <typename T>
__device__ __forceinline__ void nv_select3(const bool* __restrict__ c, const T* __restrict__ x,
                                           const T* __restrict__ y, T* __restrict__ z, i64 n) {
  constexpr int V = NvWidth<1, sizeof(T)>::v;
  const i64 first = nv_thread(), step = nv_threads();
  i64 done = 0;
  if (nv_aligned(c) && nv_aligned(x) && nv_aligned(y) && nv_aligned(z)) {
    const i64 packs = n / V;
    const NvPack<bool, V>* cp = reinterpret_cast<const NvPack<bool, V>*>(c);
    const NvPack<T, V>* xp = reinterpret_cast<const NvPack<T, V>*>(x);
    const NvPack<T, V>* yp = reinterpret_cast<const NvPack<T, V>*>(y);
    NvPack<T, V>* zp = reinterpret_cast<NvPack<T, V>*>(z);
    for (i64 k = first; k < packs; k += step) {
      const NvPack<bool, V> p = cp[k];
      const NvPack<T, V> a = xp[k];
      const NvPack<T, V> b = yp[k];
      NvPack<T, V> r;
#pragma unroll
      for (int j = 0; j < V; ++j) r.v[j] = p.v[j] ? a.v[j] : b.v[j];
      zp[k] = r;
    }
    done = packs * V;
  }
  for (i64 i = done + first; i < n; i += step) z[i] = c[i] ? x[i] : y[i];
}

// Asks L2 for `bytes` bytes from `p` (16-byte aligned, a multiple of 16) without waiting:
// Hopper's bulk prefetch, which keeps a streaming kernel's next reads on their way to L2
// beyond what its registers can hold in flight. A hint: a no-op before Hopper.
__device__ __forceinline__ void nv_l2_prefetch(const void* p, u32 bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// nuvec-emulation: device only (a hint, nothing to stand in for) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
// } nuvec-emulation
#endif
  (void)p;
  (void)bytes;
}

// Asks L1 for the line holding `p` without waiting (`prefetch.global.L1`), so that a later
// load of it finds it there: bytes on their way for a streaming loop without registers held
// for them. A hint.
__device__ __forceinline__ void nv_l1_prefetch(const void* p) {
#if defined(__CUDA_ARCH__)
// nuvec-emulation: device only (a hint, nothing to stand in for) {
  asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
// } nuvec-emulation
#endif
  (void)p;
}
