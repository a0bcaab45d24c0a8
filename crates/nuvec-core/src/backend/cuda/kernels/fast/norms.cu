// RMS and layer normalisation over the last axis (with the residual sum of add_rms_norm).
// Needs common.cuh first. Every kernel runs with 256 threads per block.
//
// Each row gets `lanes` threads: a warp (rows of at most 1024 elements, eight rows per
// block) or the whole block. A row of at most NV_CACHE * lanes elements is read once into
// registers (NV_CACHE floats per thread); a longer one is read again for each pass (two
// for RMS, three for layer normalisation). Rows are located by the `rows` view (the leading
// axes) with their elements `s` apart; when a row has step 1 and every pointer it touches
// is 16-byte aligned, it moves in 16-byte packs. Statistics accumulate in float; the result
// is rounded as the CPU kernels round it: the normalised value to the element type, then
// times the weight (rounded), then plus the bias (rounded). Outputs are row-major.

#define NV_THREADS 256
#define NV_CACHE 32

// The sum of `v` over the `lanes` threads of a row (a warp or the block), in every one of
// them. With the block form every thread of the block must call it.
__device__ __forceinline__ float nv_row_sum(float v, int lanes) {
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  if (lanes > 32) {
    __shared__ float part[NV_THREADS / 32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) part[warp] = v;
    __syncthreads();
    v = lane < lanes / 32 ? part[lane] : 0.0f;
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
    // `part` is written again by the next call.
    __syncthreads();
  }
  return v;
}

// What a norm reads and writes: the input row, the residual row (add_rms_norm: `r` not
// null, the sum written to `h`), the parameters (null when absent, elements `ws`/`bs`
// apart) and the output row.
template <typename T> struct NvNormRow {
  const T* x;
  i64 xs;
  const T* r;
  i64 rs;
  T* h;
  const T* w;
  i64 ws;
  const T* b;
  i64 bs;
  T* y;
};

// Element i of the row to normalise, as float: x[i], or the sum x[i] + r[i] rounded to T
// (written to h[i] when `write`). Sums are never read back from h: x and r are read
// through the read-only cache, which does not see this kernel's writes.
template <typename T>
__device__ __forceinline__ float nv_norm_in(const NvNormRow<T>& R, i64 i, bool write) {
  const float v = nv_up(R.x[i * R.xs]);
  if (R.r == nullptr) return v;
  const T s = nv_down<T>(v + nv_up(R.r[i * R.rs]));
  if (write) R.h[i] = s;
  return nv_up(s);
}

// The normalised value v with the CPU kernels' roundings; `wv`/`bv` used when present.
template <typename T>
__device__ __forceinline__ T nv_norm_out(float v, float mean, float inv, bool hw, float wv,
                                         bool hb, float bv) {
  float z = nv_up(nv_down<T>((v - mean) * inv));
  if (hw) z = nv_up(nv_down<T>(z * wv));
  if (hb) z = nv_up(nv_down<T>(z + bv));
  return nv_down<T>(z);
}

// Whether row R moves in 16-byte packs of V elements.
template <typename T, int V>
__device__ __forceinline__ bool nv_norm_packed(const NvNormRow<T>& R, i64 n) {
  bool ok = R.xs == 1 && n % V == 0 && nv_aligned(R.x) && nv_aligned(R.y);
  if (R.r != nullptr) ok = ok && R.rs == 1 && nv_aligned(R.r) && nv_aligned(R.h);
  if (R.w != nullptr) ok = ok && R.ws == 1 && nv_aligned(R.w);
  if (R.b != nullptr) ok = ok && R.bs == 1 && nv_aligned(R.b);
  return ok;
}

// One row of n elements (any n >= 1) by lane `lane` of `lanes`.
template <typename T>
__device__ __forceinline__ void nv_norm_row(NvNormRow<T> R, i64 n, float eps, bool centre,
                                            int lane, int lanes) {
  constexpr int V = 16 / sizeof(T);
  typedef NvPack<T, V> P;
  const bool hw = R.w != nullptr, hb = R.b != nullptr;
  const float fn = (float)n;
  if (n > (i64)NV_CACHE * lanes) {
    // Too long for registers: a pass for the mean (layer norm), one for the sum of squares
    // (which writes add_rms_norm's sums), one for the output.
    float mean = 0.0f;
    if (centre) {
      float sum = 0.0f;
      for (i64 i = lane; i < n; i += lanes) sum += nv_norm_in(R, i, false);
      mean = nv_row_sum(sum, lanes) / fn;
    }
    float sq = 0.0f;
    for (i64 i = lane; i < n; i += lanes) {
      const float d = nv_norm_in(R, i, true) - mean;
      sq += d * d;
    }
    sq = nv_row_sum(sq, lanes);
    const float inv = 1.0f / sqrtf(sq / fn + eps);
    for (i64 i = lane; i < n; i += lanes) {
      const float wv = hw ? nv_up(R.w[i * R.ws]) : 1.0f;
      const float bv = hb ? nv_up(R.b[i * R.bs]) : 0.0f;
      R.y[i] = nv_norm_out<T>(nv_norm_in(R, i, false), mean, inv, hw, wv, hb, bv);
    }
    return;
  }
  // The row in registers: slot k*V + j holds element (lane + k*lanes)*V + j (packed) or
  // slot k holds element lane + k*lanes (one by one); slots past the row hold 0.
  float c[NV_CACHE];
  const bool packed = nv_norm_packed<T, V>(R, n);
  if (packed) {
    const i64 packs = n / V;
#pragma unroll
    for (int k = 0; k < NV_CACHE / V; ++k) {
      const i64 p = lane + (i64)k * lanes;
      if (p < packs) {
        const P a = reinterpret_cast<const P*>(R.x)[p];
        if (R.r != nullptr) {
          const P q = reinterpret_cast<const P*>(R.r)[p];
          P s;
#pragma unroll
          for (int j = 0; j < V; ++j) {
            s.v[j] = nv_down<T>(nv_up(a.v[j]) + nv_up(q.v[j]));
            c[k * V + j] = nv_up(s.v[j]);
          }
          reinterpret_cast<P*>(R.h)[p] = s;
        } else {
#pragma unroll
          for (int j = 0; j < V; ++j) c[k * V + j] = nv_up(a.v[j]);
        }
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j) c[k * V + j] = 0.0f;
      }
    }
  } else {
#pragma unroll
    for (int k = 0; k < NV_CACHE; ++k) {
      const i64 i = lane + (i64)k * lanes;
      c[k] = i < n ? nv_norm_in(R, i, true) : 0.0f;
    }
  }
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < NV_CACHE; ++k) sum += c[k];
  sum = nv_row_sum(sum, lanes);
  const float mean = centre ? sum / fn : 0.0f;
  float sq = 0.0f;
#pragma unroll
  for (int k = 0; k < NV_CACHE; ++k) {
    const i64 i = packed ? (lane + (i64)(k / V) * lanes) * V + k % V : lane + (i64)k * lanes;
    const float d = c[k] - mean;
    if (i < n) sq += d * d;
  }
  sq = nv_row_sum(sq, lanes);
  const float inv = 1.0f / sqrtf(sq / fn + eps);
  if (packed) {
    const i64 packs = n / V;
#pragma unroll
    for (int k = 0; k < NV_CACHE / V; ++k) {
      const i64 p = lane + (i64)k * lanes;
      if (p < packs) {
        P wp, bp, o;
        if (hw) wp = reinterpret_cast<const P*>(R.w)[p];
        if (hb) bp = reinterpret_cast<const P*>(R.b)[p];
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const float wv = hw ? nv_up(wp.v[j]) : 1.0f;
          const float bv = hb ? nv_up(bp.v[j]) : 0.0f;
          o.v[j] = nv_norm_out<T>(c[k * V + j], mean, inv, hw, wv, hb, bv);
        }
        reinterpret_cast<P*>(R.y)[p] = o;
      }
    }
  } else {
#pragma unroll
    for (int k = 0; k < NV_CACHE; ++k) {
      const i64 i = lane + (i64)k * lanes;
      if (i < n) {
        const float wv = hw ? nv_up(R.w[i * R.ws]) : 1.0f;
        const float bv = hb ? nv_up(R.b[i * R.bs]) : 0.0f;
        R.y[i] = nv_norm_out<T>(c[k], mean, inv, hw, wv, hb, bv);
      }
    }
  }
}

// Every row: `xrows`/`rrows` locate the rows of x and r (r null: no residual), their
// elements `xs`/`rs` apart; y and h are row-major `nrows * n`; w and b (null: absent) point
// at their first element.
template <typename T>
__device__ __forceinline__ void nv_norm_rows(const T* __restrict__ x, const Strided& xrows,
                                             i64 xs, const T* __restrict__ r,
                                             const Strided& rrows, i64 rs,
                                             const T* __restrict__ w, i64 ws,
                                             const T* __restrict__ b, i64 bs, T* __restrict__ y,
                                             T* __restrict__ h, i64 nrows, i64 n, float eps,
                                             int centre, int lanes) {
  const int groups = NV_THREADS / lanes;
  const int g = threadIdx.x / lanes, lane = threadIdx.x % lanes;
  // With a group of the whole block every thread runs the same iterations (the row sums
  // synchronise the block).
  for (i64 t = (i64)blockIdx.x * groups + g; t < nrows; t += (i64)gridDim.x * groups) {
    NvNormRow<T> R;
    R.x = x + nv_locate(xrows, t);
    R.xs = xs;
    R.r = r == nullptr ? nullptr : r + nv_locate(rrows, t);
    R.rs = rs;
    R.h = r == nullptr ? nullptr : h + t * n;
    R.w = w;
    R.ws = ws;
    R.b = b;
    R.bs = bs;
    R.y = y + t * n;
    nv_norm_row<T>(R, n, eps, centre != 0, lane, lanes);
  }
}

// `norm_rows_<type>`.
#define NV_NORMS(T, tn) \
  extern "C" __global__ void __launch_bounds__(NV_THREADS) norm_rows_##tn( \
      const T* x, Strided xrows, i64 xs, const T* r, Strided rrows, i64 rs, const T* w, i64 ws, \
      const T* b, i64 bs, T* y, T* h, i64 nrows, i64 n, float eps, int centre, int lanes) { \
    nv_norm_rows<T>(x, xrows, xs, r, rrows, rs, w, ws, b, bs, y, h, nrows, n, eps, centre, \
                    lanes); }
