// Two- and three-input elementwise kernels. NV_BINARY instantiates, for one operation and
// element type, a kernel over two contiguous inputs (`_cc`) and one over any two strided
// views (`_ss`, which also covers broadcasting: stride 0). `where_` is NV_SELECT.

template <typename A> __device__ __forceinline__ A nv_floor_div(A x, A y) { return floor(x / y); }
template <typename A> __device__ __forceinline__ A nv_rem(A x, A y) {
  A r = fmod(x, y);
  return (r != A(0) && ((r < A(0)) != (y < A(0)))) ? r + y : r;
}
template <typename A> __device__ __forceinline__ A nv_max(A x, A y) { return (isnan(x) || x > y) ? x : y; }
template <typename A> __device__ __forceinline__ A nv_min(A x, A y) { return (isnan(x) || x < y) ? x : y; }
template <typename A> __device__ __forceinline__ A nv_logaddexp(A x, A y) {
  if (isnan(x) || isnan(y)) return x + y;
  A m = x > y ? x : y;
  if (isinf(m)) return m;
  return m + log1p(exp(-fabs(x - y)));
}

#define NV_DEF_BINARY(name, expr) \
  struct B_##name { template <typename A> __device__ __forceinline__ A operator()(A x, A y) const { return expr; } };
#define NV_DEF_CMP(name, expr) \
  struct B_##name { template <typename A> __device__ __forceinline__ bool operator()(A x, A y) const { return expr; } };

NV_DEF_BINARY(add, x + y)
NV_DEF_BINARY(subtract, x - y)
NV_DEF_BINARY(multiply, x * y)
NV_DEF_BINARY(divide, x / y)
NV_DEF_BINARY(floor_divide, nv_floor_div(x, y))
NV_DEF_BINARY(remainder, nv_rem(x, y))
NV_DEF_BINARY(power, pow(x, y))
NV_DEF_BINARY(maximum, nv_max(x, y))
NV_DEF_BINARY(minimum, nv_min(x, y))
NV_DEF_BINARY(arctan2, atan2(x, y))
NV_DEF_BINARY(logaddexp, nv_logaddexp(x, y))
NV_DEF_CMP(equal, x == y)
NV_DEF_CMP(not_equal, x != y)
NV_DEF_CMP(less, x < y)
NV_DEF_CMP(less_equal, x <= y)
NV_DEF_CMP(greater, x > y)
NV_DEF_CMP(greater_equal, x >= y)
NV_DEF_CMP(logical_and, x != A(0) && y != A(0))
NV_DEF_CMP(logical_or, x != A(0) || y != A(0))

// Integer arithmetic wraps (computed on the unsigned type of the same width).
template <typename T> struct Unsigned { typedef T type; };
template <> struct Unsigned<i8> { typedef u8 type; };
template <> struct Unsigned<i16> { typedef u16 type; };
template <> struct Unsigned<i32> { typedef u32 type; };
template <> struct Unsigned<i64> { typedef u64 type; };
#define NV_DEF_WRAP(name, op) \
  struct B_##name { template <typename A> __device__ __forceinline__ A operator()(A x, A y) const { \
    typedef typename Unsigned<A>::type W; return (A)((W)x op (W)y); } };
NV_DEF_WRAP(wrap_add, +)
NV_DEF_WRAP(wrap_subtract, -)
NV_DEF_WRAP(wrap_multiply, *)
NV_DEF_BINARY(int_maximum, x > y ? x : y)
NV_DEF_BINARY(int_minimum, x < y ? x : y)
NV_DEF_BINARY(bitwise_and, x & y)
NV_DEF_BINARY(bitwise_or, x | y)
NV_DEF_BINARY(bitwise_xor, x ^ y)

// `z = f(x, y)` with results of the operands' type (`U` = T) or bool (comparisons): both
// inputs contiguous (`_cc`, 16-byte packs), one contiguous and the other a single element
// broadcast (`_cs`: y is; `_sc`: x is; the pointer is that element), or two strided views
// (`_ss`, any broadcast).
#define NV_BINARY_T(name, T, U, tn) \
  extern "C" __global__ void binary_##name##_##tn##_cc(const T* x, const T* y, U* z, i64 n) { \
    nv_map2(x, y, z, n, [] (T a, T b) { return nv_down<U>(B_##name{}(nv_up(a), nv_up(b))); }); } \
  extern "C" __global__ void binary_##name##_##tn##_cs(const T* x, const T* y, U* z, i64 n) { \
    const auto s = nv_up(*y); \
    nv_map1(x, z, n, [s] (T a) { return nv_down<U>(B_##name{}(nv_up(a), s)); }); } \
  extern "C" __global__ void binary_##name##_##tn##_sc(const T* x, const T* y, U* z, i64 n) { \
    const auto s = nv_up(*x); \
    nv_map1(y, z, n, [s] (T b) { return nv_down<U>(B_##name{}(s, nv_up(b))); }); } \
  extern "C" __global__ void binary_##name##_##tn##_ss(const T* x, const T* y, U* z, i64 n, \
                                                        Strided sx, Strided sy) { \
    B_##name op; NV_FOR_EACH(i, n) \
      z[i] = nv_down<U>(op(nv_up(x[nv_locate(sx, i)]), nv_up(y[nv_locate(sy, i)]))); }
#define NV_BINARY(name, T, tn) NV_BINARY_T(name, T, T, tn)
#define NV_CMP(name, T, tn) NV_BINARY_T(name, T, bool, tn)

// `where_(c, x, y)`: three contiguous inputs (`_ccc`, 16-byte packs) or three strided views.
#define NV_SELECT(T, tn) \
  extern "C" __global__ void select_##tn##_ccc(const bool* c, const T* x, const T* y, T* z, i64 n) { \
    nv_select3(c, x, y, z, n); } \
  extern "C" __global__ void select_##tn##_sss(const bool* c, const T* x, const T* y, T* z, i64 n, \
                                               Strided sc, Strided sx, Strided sy) { \
    NV_FOR_EACH(i, n) z[i] = c[nv_locate(sc, i)] ? x[nv_locate(sx, i)] : y[nv_locate(sy, i)]; }
