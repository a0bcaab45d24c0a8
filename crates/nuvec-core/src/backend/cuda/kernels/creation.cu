// Creation kernels: `arange`, computed as the CPU computes it.
//
// Floats: `start + i * step` in double, each operation rounded on its own (no fused
// multiply-add, which would round once and differ from the CPU), then rounded once to the
// element type. Integers: MLX's rule, with the first value and the step already truncated
// on the host; `first + i * delta` wraps modulo 2^64, then is truncated to the type's width
// (what the CPU's 128-bit arithmetic followed by a wrapping cast gives).

template <typename T> __device__ __forceinline__ T nv_range_value(double v);
template <> __device__ __forceinline__ float nv_range_value<float>(double v) { return __double2float_rn(v); }
template <> __device__ __forceinline__ double nv_range_value<double>(double v) { return v; }
template <> __device__ __forceinline__ f16 nv_range_value<f16>(double v) { return __double2half(v); }
template <> __device__ __forceinline__ bf16 nv_range_value<bf16>(double v) { return __double2bfloat16(v); }

#define NV_ARANGE_FLOAT(T, tn) \
  extern "C" __global__ void arange_##tn(T* y, i64 n, double start, double step) { \
    NV_FOR_EACH(i, n) y[i] = nv_range_value<T>(__dadd_rn(start, __dmul_rn((double)i, step))); }

#define NV_ARANGE_INT(T, tn) \
  extern "C" __global__ void arange_##tn(T* y, i64 n, u64 first, u64 delta) { \
    NV_FOR_EACH(i, n) y[i] = (T)(first + delta * (u64)i); }
