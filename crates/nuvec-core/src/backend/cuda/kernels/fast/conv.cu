// The depthwise 1-D convolution: x [N, L, C] (strides xs), w [C, K, 1] (strides ws), output
// [N, L_out, C] row-major, a thread an output. Needs common.cuh first.
//
// Each output sums its K taps in order from zero, every product and sum rounded in float as
// its fallback graph rounds them on the CPU (the taps stacked, multiplied, then summed over
// the tap axis one tap after another; half types widened to float first and the sum rounded
// once), so the two agree bit for bit. Taps in the padding multiply a zero.

template <typename T>
__device__ __forceinline__ void nv_depthwise_conv1d(const T* __restrict__ x, i64 xn, i64 xl, i64 xc,
                                                    const T* __restrict__ w, i64 wc, i64 wk,
                                                    T* __restrict__ y, i64 n, i64 l, i64 c,
                                                    i64 lout, i64 k, i64 stride, i64 padding,
                                                    i64 dilation) {
  NV_FOR_EACH(i, n * lout * c) {
    const i64 ch = i % c, rest = i / c;
    const i64 o = rest % lout, b = rest / lout;
    float acc = 0.0f;
    for (i64 j = 0; j < k; ++j) {
      const i64 pos = o * stride + j * dilation - padding;
      const float xv = (pos >= 0 && pos < l) ? (float)nv_up(x[b * xn + pos * xl + ch * xc]) : 0.0f;
      acc = __fadd_rn(acc, __fmul_rn(xv, (float)nv_up(w[ch * wc + j * wk])));
    }
    y[i] = nv_down<T>(acc);
  }
}

// `depthwise_conv1d_<type>`.
#define NV_CONV_FAST(T, tn) \
  extern "C" __global__ void depthwise_conv1d_##tn( \
      const T* x, i64 xn, i64 xl, i64 xc, const T* w, i64 wc, i64 wk, T* y, i64 n, i64 l, \
      i64 c, i64 lout, i64 k, i64 stride, i64 padding, i64 dilation) { \
    nv_depthwise_conv1d<T>(x, xn, xl, xc, w, wc, wk, y, n, l, c, lout, k, stride, padding, \
                           dilation); }
