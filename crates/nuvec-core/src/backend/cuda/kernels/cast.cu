// Conversions between element types (and, from a type to itself, strided copies).
// NV_CAST instantiates `cast_<from>_<to>` over a contiguous (`_c`) or strided (`_s`) input.
// Floats become integers as on the CPU: truncated, then wrapped modulo 2^bits; NaN gives 0.

template <typename D> __device__ __forceinline__ D nv_from_double(double v);

template <typename D> __device__ __forceinline__ D nv_float_to_int(double v) {
  if (isnan(v)) return (D)0;
  v = trunc(v);
  if (fabs(v) < 9.0e18) return (D)(i64)v;
  if (isinf(v) || fabs(v) >= 1.7014118346046923e38) return v > 0 ? (D)(~0ull) : (D)0;
  double m = fmod(v, 18446744073709551616.0);
  if (m < 0) m += 18446744073709551616.0;
  return (D)(u64)m;
}

// Value conversion from S to D.
template <typename S, typename D> struct NvCast {
  __device__ __forceinline__ static D go(S x) { return (D)x; }
};
// To bool: nonzero.
template <typename S> struct NvCast<S, bool> {
  __device__ __forceinline__ static bool go(S x) { return nv_up(x) != 0; }
};
template <> struct NvCast<bool, bool> { __device__ __forceinline__ static bool go(bool x) { return x; } };
// Between floats: through the wider type, rounding once.
template <typename S> struct NvCast<S, f16> {
  __device__ __forceinline__ static f16 go(S x) { return __double2half((double)nv_up(x)); }
};
template <> struct NvCast<float, f16> { __device__ __forceinline__ static f16 go(float x) { return __float2half_rn(x); } };
template <> struct NvCast<f16, f16> { __device__ __forceinline__ static f16 go(f16 x) { return x; } };
template <> struct NvCast<bf16, f16> { __device__ __forceinline__ static f16 go(bf16 x) { return __float2half_rn(__bfloat162float(x)); } };
template <typename S> struct NvCast<S, bf16> {
  __device__ __forceinline__ static bf16 go(S x) { return __double2bfloat16((double)nv_up(x)); }
};
template <> struct NvCast<float, bf16> { __device__ __forceinline__ static bf16 go(float x) { return __float2bfloat16_rn(x); } };
template <> struct NvCast<bf16, bf16> { __device__ __forceinline__ static bf16 go(bf16 x) { return x; } };
template <> struct NvCast<f16, bf16> { __device__ __forceinline__ static bf16 go(f16 x) { return __float2bfloat16_rn(__half2float(x)); } };
template <typename D> struct NvCast<f16, D> {
  __device__ __forceinline__ static D go(f16 x) { return NvCast<float, D>::go(__half2float(x)); }
};
template <typename D> struct NvCast<bf16, D> {
  __device__ __forceinline__ static D go(bf16 x) { return NvCast<float, D>::go(__bfloat162float(x)); }
};
template <> struct NvCast<f16, bool> { __device__ __forceinline__ static bool go(f16 x) { return __half2float(x) != 0.0f; } };
template <> struct NvCast<bf16, bool> { __device__ __forceinline__ static bool go(bf16 x) { return __bfloat162float(x) != 0.0f; } };
// Floats to integers: wrapped.
#define NV_F2I(S, D) \
  template <> struct NvCast<S, D> { __device__ __forceinline__ static D go(S x) { return nv_float_to_int<D>((double)x); } };
#define NV_F2I_ALL(S) NV_F2I(S, i8) NV_F2I(S, u8) NV_F2I(S, i16) NV_F2I(S, u16) NV_F2I(S, i32) \
  NV_F2I(S, u32) NV_F2I(S, i64) NV_F2I(S, u64)
NV_F2I_ALL(float)
NV_F2I_ALL(double)

// The contiguous form takes 16-byte packs of the narrower type (common.cuh).
#define NV_CAST(S, sn, D, dn) \
  extern "C" __global__ void cast_##sn##_##dn##_c(const S* x, D* y, i64 n) { \
    nv_map1(x, y, n, [] (S a) { return NvCast<S, D>::go(a); }); } \
  extern "C" __global__ void cast_##sn##_##dn##_s(const S* x, D* y, i64 n, Strided sx) { \
    NV_FOR_EACH(i, n) y[i] = NvCast<S, D>::go(x[nv_locate(sx, i)]); }
