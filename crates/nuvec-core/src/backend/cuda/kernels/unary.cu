// One-input elementwise kernels. Each function is a functor over the computing type `A`
// (float for the half types); NV_UNARY instantiates a contiguous (`_c`) and a strided (`_s`)
// kernel named `unary_<op>_<type>` for one element type.

template <typename A> __device__ __forceinline__ A nv_sign(A a) {
  return a > A(0) ? A(1) : (a < A(0) ? A(-1) : a);
}
template <typename A> __device__ __forceinline__ A nv_sigmoid(A a) { return A(1) / (A(1) + exp(-a)); }

#define NV_DEF_UNARY(name, expr) \
  struct U_##name { template <typename A> __device__ __forceinline__ A operator()(A a) const { return expr; } };
#define NV_DEF_PRED(name, expr) \
  struct U_##name { template <typename A> __device__ __forceinline__ bool operator()(A a) const { return expr; } };

NV_DEF_UNARY(abs, a < A(0) ? -a : a)
NV_DEF_UNARY(negative, -a)
NV_DEF_UNARY(sign, nv_sign(a))
NV_DEF_UNARY(square, a * a)
NV_DEF_UNARY(sqrt, sqrt(a))
NV_DEF_UNARY(rsqrt, A(1) / sqrt(a))
NV_DEF_UNARY(reciprocal, A(1) / a)
NV_DEF_UNARY(exp, exp(a))
NV_DEF_UNARY(expm1, expm1(a))
NV_DEF_UNARY(log, log(a))
NV_DEF_UNARY(log1p, log1p(a))
NV_DEF_UNARY(log2, log2(a))
NV_DEF_UNARY(log10, log10(a))
NV_DEF_UNARY(sin, sin(a))
NV_DEF_UNARY(cos, cos(a))
NV_DEF_UNARY(tan, tan(a))
NV_DEF_UNARY(arcsin, asin(a))
NV_DEF_UNARY(arccos, acos(a))
NV_DEF_UNARY(arctan, atan(a))
NV_DEF_UNARY(sinh, sinh(a))
NV_DEF_UNARY(cosh, cosh(a))
NV_DEF_UNARY(tanh, tanh(a))
NV_DEF_UNARY(arcsinh, asinh(a))
NV_DEF_UNARY(arccosh, acosh(a))
NV_DEF_UNARY(arctanh, atanh(a))
NV_DEF_UNARY(sigmoid, nv_sigmoid(a))
NV_DEF_UNARY(erf, erf(a))
NV_DEF_UNARY(erfinv, erfinv(a))
NV_DEF_UNARY(floor, floor(a))
NV_DEF_UNARY(ceil, ceil(a))
NV_DEF_UNARY(round, rint(a))
NV_DEF_UNARY(trunc, trunc(a))
NV_DEF_PRED(isnan, isnan(a))
NV_DEF_PRED(isinf, isinf(a))
NV_DEF_PRED(isposinf, isinf(a) && a > A(0))
NV_DEF_PRED(isneginf, isinf(a) && a < A(0))
NV_DEF_PRED(isfinite, isfinite(a))
NV_DEF_PRED(logical_not, a == A(0))

// `y = f(x)` of one element type; the contiguous form takes 16-byte packs (common.cuh).
#define NV_UNARY(name, T, tn) \
  extern "C" __global__ void unary_##name##_##tn##_c(const T* x, T* y, i64 n) { \
    nv_map1(x, y, n, [] (T a) { return nv_down<T>(U_##name{}(nv_up(a))); }); } \
  extern "C" __global__ void unary_##name##_##tn##_s(const T* x, T* y, i64 n, Strided sx) { \
    U_##name op; NV_FOR_EACH(i, n) y[i] = nv_down<T>(op(nv_up(x[nv_locate(sx, i)]))); }

// A predicate: boolean results.
#define NV_UNARY_PRED(name, T, tn) \
  extern "C" __global__ void unary_##name##_##tn##_c(const T* x, bool* y, i64 n) { \
    nv_map1(x, y, n, [] (T a) { return (bool)U_##name{}(nv_up(a)); }); } \
  extern "C" __global__ void unary_##name##_##tn##_s(const T* x, bool* y, i64 n, Strided sx) { \
    U_##name op; NV_FOR_EACH(i, n) y[i] = op(nv_up(x[nv_locate(sx, i)])); }
