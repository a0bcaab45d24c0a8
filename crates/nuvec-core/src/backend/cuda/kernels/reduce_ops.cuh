// What the reduction and scan kernels share: accumulator types, conversions, the bounds
// that start a maximum or minimum, the operations themselves, and warp shuffles of any
// accumulator type.
//
// An operation is a struct with `Of<T>::A` (the accumulator for elements of type T), `init`
// (the identity) and `join` (two accumulators combined; also how an element enters, after
// conversion to A). The types follow the CPU backend exactly: half floats accumulate in
// float; sums and products of booleans and small integers widen (MLX's rule); integers wrap.
#pragma once

#define NV_WARP_MASK 0xffffffffu

// The accumulator of a sum or product (widened as MLX does).
template <typename T> struct NvWide { typedef T type; };
template <> struct NvWide<bool> { typedef i32 type; };
template <> struct NvWide<i8> { typedef i32 type; };
template <> struct NvWide<i16> { typedef i32 type; };
template <> struct NvWide<u8> { typedef u32 type; };
template <> struct NvWide<u16> { typedef u32 type; };
template <> struct NvWide<f16> { typedef float type; };
template <> struct NvWide<bf16> { typedef float type; };

// A value converted to type D (C casts, rounding to nearest for the half floats).
template <typename D, typename S> __device__ __forceinline__ D nv_to(S x) { return (D)x; }
template <> __device__ __forceinline__ float nv_to<float, f16>(f16 x) { return __half2float(x); }
template <> __device__ __forceinline__ float nv_to<float, bf16>(bf16 x) { return __bfloat162float(x); }
template <> __device__ __forceinline__ f16 nv_to<f16, float>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ bf16 nv_to<bf16, float>(float x) { return __float2bfloat16_rn(x); }

// The lowest and highest values of a type (the infinities for floats).
template <typename T> struct NvLim;
#define NV_LIM(T, lo, hi) \
  template <> struct NvLim<T> { \
    __device__ __forceinline__ static T low() { return lo; } \
    __device__ __forceinline__ static T high() { return hi; } };
NV_LIM(bool, false, true)
NV_LIM(u8, (u8)0, (u8)255)
NV_LIM(i8, (i8)-128, (i8)127)
NV_LIM(u16, (u16)0, (u16)65535)
NV_LIM(i16, (i16)-32768, (i16)32767)
NV_LIM(u32, 0u, 4294967295u)
NV_LIM(i32, (-2147483647 - 1), 2147483647)
NV_LIM(u64, 0ull, 18446744073709551615ull)
NV_LIM(i64, (-9223372036854775807ll - 1), 9223372036854775807ll)
NV_LIM(float, __int_as_float((int)0xff800000u), __int_as_float((int)0x7f800000u))
NV_LIM(double, __longlong_as_double((long long)0xfff0000000000000ull),
       __longlong_as_double((long long)0x7ff0000000000000ull))

template <typename A> __device__ __forceinline__ A nv_nan();
template <> __device__ __forceinline__ float nv_nan<float>() { return __int_as_float(0x7fc00000); }
template <> __device__ __forceinline__ double nv_nan<double>() {
  return __longlong_as_double(0x7ff8000000000000ll);
}

// Sums and products. Integers wrap (computed on unsigned types: signed overflow is undefined
// in C++); booleans use or/and (the scans keep boolean products as booleans).
template <typename A> __device__ __forceinline__ A nv_add(A a, A b) { return a + b; }
__device__ __forceinline__ i32 nv_add(i32 a, i32 b) { return (i32)((u32)a + (u32)b); }
__device__ __forceinline__ i64 nv_add(i64 a, i64 b) { return (i64)((u64)a + (u64)b); }
__device__ __forceinline__ bool nv_add(bool a, bool b) { return a || b; }
template <typename A> __device__ __forceinline__ A nv_mul(A a, A b) { return a * b; }
__device__ __forceinline__ bool nv_mul(bool a, bool b) { return a && b; }
__device__ __forceinline__ i8 nv_mul(i8 a, i8 b) { return (i8)((u32)a * (u32)b); }
__device__ __forceinline__ u8 nv_mul(u8 a, u8 b) { return (u8)((u32)a * (u32)b); }
__device__ __forceinline__ i16 nv_mul(i16 a, i16 b) { return (i16)((u32)a * (u32)b); }
__device__ __forceinline__ u16 nv_mul(u16 a, u16 b) { return (u16)((u32)a * (u32)b); }
__device__ __forceinline__ i32 nv_mul(i32 a, i32 b) { return (i32)((u32)a * (u32)b); }
__device__ __forceinline__ i64 nv_mul(i64 a, i64 b) { return (i64)((u64)a * (u64)b); }

// Extremes that a NaN sticks to (whichever side it is on), as the CPU's `max_nan`.
template <typename A> __device__ __forceinline__ A nv_pick_max(A a, A b) {
  return (b > a || b != b) ? b : a;
}
template <typename A> __device__ __forceinline__ A nv_pick_min(A a, A b) {
  return (b < a || b != b) ? b : a;
}

// log(e^a + e^b) without overflow: -inf is the identity, +inf absorbs, NaN propagates.
template <typename A> __device__ __forceinline__ A nv_log_add(A a, A b) {
  if (a != a || b != b) return a + b;
  const A hi = a > b ? a : b, lo = a > b ? b : a;
  if (lo == NvLim<A>::low() || hi == NvLim<A>::high()) return hi;
  return hi + log1p(exp(lo - hi));
}

struct NvSum {
  template <typename T> struct Of { typedef typename NvWide<T>::type A; };
  template <typename A> __device__ __forceinline__ static A init() { return A(0); }
  template <typename A> __device__ __forceinline__ static A join(A a, A b) { return nv_add(a, b); }
};
struct NvProd {
  template <typename T> struct Of { typedef typename NvWide<T>::type A; };
  template <typename A> __device__ __forceinline__ static A init() { return A(1); }
  template <typename A> __device__ __forceinline__ static A join(A a, A b) { return nv_mul(a, b); }
};
// A product that keeps the element type (cumprod, as MLX).
struct NvProdKeep {
  template <typename T> struct Of { typedef typename Acc<T>::type A; };
  template <typename A> __device__ __forceinline__ static A init() { return A(1); }
  template <typename A> __device__ __forceinline__ static A join(A a, A b) { return nv_mul(a, b); }
};
struct NvMax {
  template <typename T> struct Of { typedef typename Acc<T>::type A; };
  template <typename A> __device__ __forceinline__ static A init() { return NvLim<A>::low(); }
  template <typename A> __device__ __forceinline__ static A join(A a, A b) { return nv_pick_max(a, b); }
};
struct NvMin {
  template <typename T> struct Of { typedef typename Acc<T>::type A; };
  template <typename A> __device__ __forceinline__ static A init() { return NvLim<A>::high(); }
  template <typename A> __device__ __forceinline__ static A join(A a, A b) { return nv_pick_min(a, b); }
};
struct NvAll {
  template <typename T> struct Of { typedef bool A; };
  template <typename A> __device__ __forceinline__ static A init() { return true; }
  template <typename A> __device__ __forceinline__ static A join(A a, A b) { return a && b; }
};
struct NvAny {
  template <typename T> struct Of { typedef bool A; };
  template <typename A> __device__ __forceinline__ static A init() { return false; }
  template <typename A> __device__ __forceinline__ static A join(A a, A b) { return a || b; }
};
struct NvLogAdd {
  template <typename T> struct Of { typedef typename Acc<T>::type A; };
  template <typename A> __device__ __forceinline__ static A init() { return NvLim<A>::low(); }
  template <typename A> __device__ __forceinline__ static A join(A a, A b) { return nv_log_add(a, b); }
};

// Warp shuffles of any accumulator type (types narrower than 32 bits travel as int).
template <typename A> __device__ __forceinline__ A nv_shfl_xor(A v, int m) {
  return __shfl_xor_sync(NV_WARP_MASK, v, m);
}
template <typename A> __device__ __forceinline__ A nv_shfl_up(A v, int d) {
  return __shfl_up_sync(NV_WARP_MASK, v, d);
}
#define NV_SHFL_NARROW(T) \
  template <> __device__ __forceinline__ T nv_shfl_xor<T>(T v, int m) { \
    return (T)__shfl_xor_sync(NV_WARP_MASK, (int)v, m); } \
  template <> __device__ __forceinline__ T nv_shfl_up<T>(T v, int d) { \
    return (T)__shfl_up_sync(NV_WARP_MASK, (int)v, d); }
NV_SHFL_NARROW(bool)
NV_SHFL_NARROW(i8)
NV_SHFL_NARROW(u8)
NV_SHFL_NARROW(i16)
NV_SHFL_NARROW(u16)

// `v` combined over a group of `lanes` threads: 32 (a warp) or the whole block (a multiple
// of 32). Every thread of the group gets the result. The block form synchronises the block:
// every thread must call it.
template <class Op, typename A> __device__ __forceinline__ A nv_group_reduce(A v, int lanes) {
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1) v = Op::join(v, nv_shfl_xor(v, m));
  if (lanes > 32) {
    __shared__ A part[32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) part[warp] = v;
    __syncthreads();
    v = lane < lanes / 32 ? part[lane] : Op::template init<A>();
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) v = Op::join(v, nv_shfl_xor(v, m));
    // `part` is written again by the next call.
    __syncthreads();
  }
  return v;
}
