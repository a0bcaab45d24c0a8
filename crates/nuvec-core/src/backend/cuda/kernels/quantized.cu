// Affine quantization (MLX's layout): dequantize, quantize and the quantized products.
//
// A row's values are one little-endian stream of bits: value i occupies bits i*B.. of the row,
// so 32 values always fill exactly B words (a "pack"), and with 3, 5 or 6 bits a value may
// straddle two words. Every kernel works a pack at a time, with the bit positions known at
// compile time once the loops over the 32 values are unrolled. Packs never straddle a group
// (groups are 32, 64 or 128 values): the group of pack c is c >> gs_shift.
//
// The host passes row-major operands from 16-byte-aligned starts (copies where not), so a
// pack's words at c*B can be read with the widest access B*4 bytes allow.

// The B words of one pack, from `p` (aligned to the access width below).
template <int B>
__device__ __forceinline__ void nvq_load(const u32* __restrict__ p, u32 (&w)[B]) {
  if constexpr (B % 4 == 0) {
    const uint4* v = reinterpret_cast<const uint4*>(p);
#pragma unroll
    for (int i = 0; i < B / 4; ++i) {
      const uint4 a = v[i];
      w[4 * i] = a.x;
      w[4 * i + 1] = a.y;
      w[4 * i + 2] = a.z;
      w[4 * i + 3] = a.w;
    }
  } else if constexpr (B % 2 == 0) {
    const uint2* v = reinterpret_cast<const uint2*>(p);
#pragma unroll
    for (int i = 0; i < B / 2; ++i) {
      const uint2 a = v[i];
      w[2 * i] = a.x;
      w[2 * i + 1] = a.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < B; ++i) w[i] = p[i];
  }
}

// Stores the B words of one pack at `p` (aligned as for `nvq_load`).
template <int B>
__device__ __forceinline__ void nvq_store(u32* __restrict__ p, const u32 (&w)[B]) {
  if constexpr (B % 4 == 0) {
    uint4* v = reinterpret_cast<uint4*>(p);
#pragma unroll
    for (int i = 0; i < B / 4; ++i) v[i] = make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
  } else if constexpr (B % 2 == 0) {
    uint2* v = reinterpret_cast<uint2*>(p);
#pragma unroll
    for (int i = 0; i < B / 2; ++i) v[i] = make_uint2(w[2 * i], w[2 * i + 1]);
  } else {
#pragma unroll
    for (int i = 0; i < B; ++i) p[i] = w[i];
  }
}

// Value j of a pack. Called from fully unrolled loops only, so `j` (and with it the word and
// the shift) is a constant and `w` stays in registers.
template <int B>
__device__ __forceinline__ u32 nvq_get(const u32 (&w)[B], int j) {
  const int at = j * B / 32, off = j * B % 32;
  u32 q = w[at] >> off;
  if (off + B > 32) q |= w[at + 1] << (32 - off);
  return q & ((1u << B) - 1u);
}

// A quantized value (below 2^23) as a float without the conversion unit: its bits under the
// exponent of 2^23, less 2^23 (both steps exact).
__device__ __forceinline__ float nvq_float(u32 q) {
  return __uint_as_float(0x4B000000u | q) - 8388608.0f;
}

// Arithmetic in the compute type, rounded once per operation: never contracted into a fused
// multiply-add, so that the results are the CPU's bit for bit.
__device__ __forceinline__ float nvq_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double nvq_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float nvq_add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double nvq_add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float nvq_sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double nvq_sub(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ float nvq_div(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ double nvq_div(double a, double b) { return __ddiv_rn(a, b); }
__device__ __forceinline__ float nvq_rint(float a) { return rintf(a); }
__device__ __forceinline__ double nvq_rint(double a) { return rint(a); }
__device__ __forceinline__ float nvq_abs(float a) { return fabsf(a); }
__device__ __forceinline__ double nvq_abs(double a) { return fabs(a); }
__device__ __forceinline__ float nvq_inf(float) { return __int_as_float(0x7f800000); }
__device__ __forceinline__ double nvq_inf(double) { return __longlong_as_double(0x7ff0000000000000ll); }

// 32 consecutive values of T (a pack's worth) read with 16-byte accesses, in the compute type.
template <typename T>
__device__ __forceinline__ void nvq_read32(const T* __restrict__ p, typename Acc<T>::type (&v)[32]) {
  constexpr int V = 16 / sizeof(T);
  const NvPack<T, V>* src = reinterpret_cast<const NvPack<T, V>*>(p);
#pragma unroll
  for (int i = 0; i < 32 / V; ++i) {
    const NvPack<T, V> a = src[i];
#pragma unroll
    for (int j = 0; j < V; ++j) v[i * V + j] = nv_up<T>(a.v[j]);
  }
}

// ---- dequantize ----
// out = T(T(s * q) + b) per value (MLX's multiply then add of T arrays). A thread writes one
// 16-byte piece of a pack's values (the 32 / V threads of a pack each load the whole pack,
// from the same cache lines), so that a warp's stores are consecutive: with a pack a thread,
// each store instruction left gaps of 48 bytes between its pieces.
template <typename T, int B>
__device__ __forceinline__ void nvq_dequantize(const u32* __restrict__ wq, const T* __restrict__ scales,
                                               const T* __restrict__ biases, T* __restrict__ out,
                                               i64 packs, int gs_shift) {
  typedef typename Acc<T>::type C;
  constexpr int V = 16 / sizeof(T), PIECES = 32 / V;
  NV_FOR_EACH(u, packs * PIECES) {
    const i64 c = u / PIECES;
    const int i = (int)(u % PIECES);
    u32 w[B];
    nvq_load<B>(wq + c * B, w);
    const i64 g = c >> gs_shift;
    const C s = nv_up<T>(scales[g]), b = nv_up<T>(biases[g]);
    // The piece's number as a constant, so that the words are picked in registers (indexed
    // by `i`, they went to the stack).
#pragma unroll
    for (int p = 0; p < PIECES; ++p) {
      if (p != i) continue;
      NvPack<T, V> r;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const C q = (C)nvq_get<B>(w, p * V + j);
        r.v[j] = nv_down<T>(nvq_add(nv_up<T>(nv_down<T>(nvq_mul(q, s))), b));
      }
      reinterpret_cast<NvPack<T, V>*>(out + c * 32)[p] = r;
    }
  }
}

// ---- quantize ----
// One pack a thread; the 1, 2 or 4 threads of a group (consecutive lanes) combine their
// extremes with shuffles, each taking the earlier lane's value on ties, which is what the
// CPU's pass in order keeps (the first maximum and minimum; NaN never taken). Every thread of
// a group then computes the group's scale and bias with the same operations, so they agree.
template <typename T, int B>
__device__ __forceinline__ void nvq_quantize(const T* __restrict__ w, u32* __restrict__ wq,
                                             T* __restrict__ scales, T* __restrict__ biases,
                                             i64 packs, int gs_shift) {
  typedef typename Acc<T>::type C;
  const i64 c0 = nv_thread();
  // Threads past the end read the last pack and write nothing: groups are whole runs of
  // aligned lanes, so their values reach no live group's shuffles.
  const bool live = c0 < packs;
  const i64 c = live ? c0 : packs - 1;
  C v[32];
  nvq_read32<T>(w + c * 32, v);
  C hi = -nvq_inf(C(0)), lo = nvq_inf(C(0));
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    if (hi < v[i]) hi = v[i];
    if (v[i] < lo) lo = v[i];
  }
  const int lanes = 1 << gs_shift;
  for (int d = 1; d < lanes; d <<= 1) {
    const C ohi = __shfl_xor_sync(0xffffffffu, hi, d);
    const C olo = __shfl_xor_sync(0xffffffffu, lo, d);
    const bool first = (threadIdx.x & d) == 0;
    const C ahi = first ? hi : ohi, bhi = first ? ohi : hi;
    const C alo = first ? lo : olo, blo = first ? olo : lo;
    hi = ahi < bhi ? bhi : ahi;
    lo = blo < alo ? blo : alo;
  }
  const C n_bins = (C)((1u << B) - 1u);
  const C eps = (C)1e-7;
  const C zero = (C)0;
  const bool low_edge = nvq_abs(lo) > nvq_abs(hi);
  const C spread = nvq_div(nvq_sub(hi, lo), n_bins);
  C scale = spread < eps ? eps : spread;
  if (!low_edge) scale = -scale;
  const C edge = low_edge ? lo : hi;
  const C q0 = nvq_rint(nvq_div(edge, scale));
  C bias = zero;
  if (q0 != zero) {
    scale = nvq_div(edge, q0);
    bias = edge;
  }
  u32 out[B];
#pragma unroll
  for (int i = 0; i < B; ++i) out[i] = 0;
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    C r = nvq_rint(nvq_div(nvq_sub(v[j], bias), scale));
    r = r < zero ? zero : r;
    r = n_bins < r ? n_bins : r;
    // NaN (a NaN value, or a group of them) packs as 0, as on the CPU.
    const u32 q = r == r ? (u32)r : 0u;
    const int at = j * B / 32, off = j * B % 32;
    out[at] |= q << off;
    if (off + B > 32) out[at + 1] |= q >> (32 - off);
  }
  if (live) {
    nvq_store<B>(wq + c * B, out);
    if ((c & (lanes - 1)) == 0) {
      scales[c >> gs_shift] = nv_down<T>(scale);
      biases[c >> gs_shift] = nv_down<T>(bias);
    }
  }
}

// ---- x · wᵀ for a few rows of x (decoding) ----
// Warps a block, and rows of w a warp for M rows of x: fewer as M grows, so that the sums
// (rows times M of them, twice) stay in registers.
#define NVQ_WARPS 4
template <int M> struct NvqRows { static constexpr int v = M == 1 ? 4 : (M <= 4 ? 2 : 1); };

// The shape of one product.
struct NvQmv {
  i64 n;        // rows of w (outputs per row of x)
  i64 m;        // rows of x
  i32 packs;    // packs a row of w (k / 32)
  i32 groups;   // groups a row of w
  i32 gs_shift; // log2(group size / 32)
  i32 per;      // packs each split of k takes
};

// The sums of NvqRows<M> rows of w (`row`, counted from `w`, `scales` and `biases`) with M rows
// of x (`xr`), y[i, n] = sum_k x[i, k] (s[n, g] q[n, k] + b[n, g]) taken as s · (x · q) +
// b · sum(x) per pack, over the packs p0 + lane, p0 + lane + 32, ... below p1: each lane reads
// the pack of all its rows (one or more 16-byte loads each, all issued before the first use)
// and the matching 32 values of each row of x, which every row reuses. The lanes' sums meet by
// shuffles, so every lane returns the warp's.
template <typename T, int B, int M>
__device__ __forceinline__ void nvq_qmv_rows(const T* const (&xr)[M], const u32* __restrict__ w,
                                             const T* __restrict__ scales, const T* __restrict__ biases,
                                             const i64 (&row)[NvqRows<M>::v], int p0, int p1,
                                             int packs, int groups, int gs_shift,
                                             float (&acc)[NvqRows<M>::v][M]) {
  constexpr int R = NvqRows<M>::v;
  constexpr int V = 16 / sizeof(T);
  const int lane = threadIdx.x & 31;
  const i64 words = (i64)packs * B;
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < M; ++i) acc[r][i] = 0.0f;
  for (int p = p0 + lane; p < p1; p += 32) {
    u32 q[R][B];
    float s[R], b[R];
    const int g = p >> gs_shift;
#pragma unroll
    for (int r = 0; r < R; ++r) nvq_load<B>(w + row[r] * words + (i64)p * B, q[r]);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      s[r] = nv_up<T>(scales[row[r] * groups + g]);
      b[r] = nv_up<T>(biases[row[r] * groups + g]);
    }
    float dot[R][M], xs[M];
#pragma unroll
    for (int i = 0; i < M; ++i) {
      xs[i] = 0.0f;
#pragma unroll
      for (int r = 0; r < R; ++r) dot[r][i] = 0.0f;
    }
#pragma unroll
    for (int c = 0; c < 32 / V; ++c) {
      float wf[R][V];
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int j = 0; j < V; ++j) wf[r][j] = nvq_float(nvq_get<B>(q[r], c * V + j));
#pragma unroll
      for (int i = 0; i < M; ++i) {
        const NvPack<T, V> xv = reinterpret_cast<const NvPack<T, V>*>(xr[i] + (i64)p * 32)[c];
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const float xf = nv_up<T>(xv.v[j]);
          xs[i] += xf;
#pragma unroll
          for (int r = 0; r < R; ++r) dot[r][i] = fmaf(xf, wf[r][j], dot[r][i]);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int i = 0; i < M; ++i) acc[r][i] = fmaf(s[r], dot[r][i], fmaf(b[r], xs[i], acc[r][i]));
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < M; ++i)
#pragma unroll
      for (int d = 16; d > 0; d >>= 1) acc[r][i] += __shfl_xor_sync(0xffffffffu, acc[r][i], d);
}

// y = x · wᵀ for M rows of x from blockIdx.z * M: each warp takes NvqRows<M> rows of w, its
// lanes every 32nd pack of the block's split of k (blockIdx.y). With one split the result goes
// to y, otherwise to `partial` ([splits, m, n] float32, summed by `nvq_sum`).
template <typename T, int B, int M>
__device__ __forceinline__ void nvq_qmv(const T* __restrict__ x, const u32* __restrict__ w,
                                        const T* __restrict__ scales, const T* __restrict__ biases,
                                        T* __restrict__ y, float* __restrict__ partial, const NvQmv& a) {
  constexpr int R = NvqRows<M>::v;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const i64 n0 = ((i64)blockIdx.x * NVQ_WARPS + warp) * R;
  const i64 m0 = (i64)blockIdx.z * M;
  const int p0 = blockIdx.y * a.per;
  const int p1 = min(a.packs, p0 + a.per);
  // Rows past the end read the last row and are never written.
  i64 row[R];
#pragma unroll
  for (int r = 0; r < R; ++r) row[r] = min(n0 + r, a.n - 1);
  const T* xr[M];
#pragma unroll
  for (int i = 0; i < M; ++i) xr[i] = x + min(m0 + i, a.m - 1) * (i64)a.packs * 32;
  float acc[R][M];
  nvq_qmv_rows<T, B, M>(xr, w, scales, biases, row, p0, p1, a.packs, a.groups, a.gs_shift, acc);
  if (lane != 0) return;
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int i = 0; i < M; ++i) {
      if (n0 + r < a.n && m0 + i < a.m) {
        const i64 at = (m0 + i) * a.n + n0 + r;
        if (gridDim.y == 1) {
          y[at] = nv_down<T>(acc[r][i]);
        } else {
          partial[(i64)blockIdx.y * a.m * a.n + at] = acc[r][i];
        }
      }
    }
  }
}

// ---- x · w (w packed along the outputs) ----
// The shape of one product.
struct NvQvm {
  i64 k;        // rows of w (the inner axis)
  i64 m;        // rows of x
  i32 packs;    // packs a row of w (n / 32)
  i32 groups;   // groups a row of w
  i32 gs_shift; // log2(group size / 32)
  i32 per;      // rows of w each split of k takes
};

// A plain kernel: each thread takes one pack of 32 outputs of row blockIdx.z of x, over the
// rows of w of its split of k (blockIdx.y), accumulating x · (s q + b) as the CPU does
// (q · (x s) + (x b)). Outputs as for `nvq_qmv`.
template <typename T, int B>
__device__ __forceinline__ void nvq_qvm(const T* __restrict__ x, const u32* __restrict__ w,
                                        const T* __restrict__ scales, const T* __restrict__ biases,
                                        T* __restrict__ y, float* __restrict__ partial, const NvQvm& a) {
  const i64 c = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= a.packs) return;
  const i64 i = blockIdx.z;
  const i64 k0 = (i64)blockIdx.y * a.per;
  const i64 k1 = min(a.k, k0 + a.per);
  const i64 g = c >> a.gs_shift;
  const i64 n = (i64)a.packs * 32;
  float acc[32];
#pragma unroll
  for (int j = 0; j < 32; ++j) acc[j] = 0.0f;
  for (i64 k = k0; k < k1; ++k) {
    u32 q[B];
    nvq_load<B>(w + k * a.packs * B + c * B, q);
    const float xv = nv_up<T>(x[i * a.k + k]);
    const float xs = xv * nv_up<T>(scales[k * a.groups + g]);
    const float xb = xv * nv_up<T>(biases[k * a.groups + g]);
#pragma unroll
    for (int j = 0; j < 32; ++j) acc[j] = fmaf(nvq_float(nvq_get<B>(q, j)), xs, acc[j] + xb);
  }
  const i64 at = i * n + c * 32;
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    if (gridDim.y == 1) {
      y[at + j] = nv_down<T>(acc[j]);
    } else {
      partial[(i64)blockIdx.y * a.m * n + at + j] = acc[j];
    }
  }
}

// y[i] = T(sum over the splits of partial[s, i]), in the order of the splits.
template <typename T>
__device__ __forceinline__ void nvq_sum(const float* __restrict__ partial, T* __restrict__ y, i64 n, int splits) {
  NV_FOR_EACH(i, n) {
    float v = 0.0f;
    for (int s = 0; s < splits; ++s) v += partial[s * n + i];
    y[i] = nv_down<T>(v);
  }
}

// The kernels over values of T (type name TN) packed with B bits.
#define NV_QUANTIZE(T, TN, B)                                                                      \
  extern "C" __global__ void dequantize_##TN##_b##B(const u32* wq, const T* s, const T* b, T* out, \
                                                    i64 packs, int gs_shift) {                     \
    nvq_dequantize<T, B>(wq, s, b, out, packs, gs_shift);                                          \
  }                                                                                                \
  extern "C" __global__ void quantize_##TN##_b##B(const T* w, u32* wq, T* s, T* b, i64 packs,     \
                                                  int gs_shift) {                                  \
    nvq_quantize<T, B>(w, wq, s, b, packs, gs_shift);                                              \
  }

// Blocks of the matrix-vector product a multiprocessor must hold at least (the register
// bound): a tunable (`NUVEC_KERNEL_DEFINES="NVQ_QMV_MINB=4"`).
#ifndef NVQ_QMV_MINB
#define NVQ_QMV_MINB 1
#endif

#define NV_QMV(T, TN, B, M)                                                                        \
  extern "C" __global__ void __launch_bounds__(NVQ_WARPS * 32, NVQ_QMV_MINB)                          \
      qmv_##TN##_b##B##_m##M(const T* x, const u32* w, const T* s, const T* b, T* y, float* part,  \
                             NvQmv a) {                                                            \
    nvq_qmv<T, B, M>(x, w, s, b, y, part, a);                                                      \
  }

#define NV_QVM(T, TN, B)                                                                           \
  extern "C" __global__ void qvm_##TN##_b##B(const T* x, const u32* w, const T* s, const T* b,    \
                                             T* y, float* part, NvQvm a) {                         \
    nvq_qvm<T, B>(x, w, s, b, y, part, a);                                                         \
  }                                                                                                \
  extern "C" __global__ void qsum_##TN##_b##B(const float* part, T* y, i64 n, int splits) {       \
    nvq_sum<T>(part, y, n, splits);                                                                \
  }
