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

__device__ __forceinline__ i64 nv_locate(const Strided& s, i64 i) {
  i64 at = s.offset;
  for (int d = s.ndim - 1; d >= 0; --d) {
    i64 q = i / s.shape[d];
    at += (i - q * s.shape[d]) * s.strides[d];
    i = q;
  }
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

// The grid-stride loop over `n` elements with 64-bit indices.
#define NV_FOR_EACH(i, n) \
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)
