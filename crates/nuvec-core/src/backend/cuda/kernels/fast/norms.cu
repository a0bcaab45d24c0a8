// RMS and layer normalisation over the last axis (with the residual sum of add_rms_norm),
// and their gradients. Needs common.cuh and fast/rows.cuh first.
//
// Rows the registers hold (at most 512 threads of 8 to 32 slots) run the `slots` kernels
// below. Longer rows run the looped kernel, 256 threads a block: each row gets `lanes`
// threads, a warp or the whole block. A row of at most NV_CACHE * lanes elements is read once into
// registers (NV_CACHE floats per thread); a longer one is read again for each pass (two
// for RMS, three for layer normalisation). Rows are located by the `rows` view (the leading
// axes) with their elements `s` apart; when a row has step 1 and every pointer it touches
// is 16-byte aligned, it moves in 16-byte packs. Statistics accumulate in float; the result
// is rounded as the CPU kernels round it: the normalised value to the element type, then
// times the weight (rounded), then plus the bias (rounded). Outputs are row-major.

#define NV_THREADS 256
#define NV_CACHE 32

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

// ---------------------------------------------------------------------------------------
// Rows held in registers (rows.cuh).

// The mean (layer norm; 0 for RMS) and the inverse root mean square about it of the row in
// `c`, which then holds the centred values (0 past the row).
template <typename T, int S>
__device__ __forceinline__ void nv_slot_stats(float (&c)[S], i64 n, float eps, bool centre,
                                              bool packed, int lane, int lanes, float& mean,
                                              float& inv) {
  const float fn = (float)n;
  mean = 0.0f;
  if (centre) {
    float sum = 0.0f;
#pragma unroll
    for (int s = 0; s < S; ++s) sum += c[s];
    mean = nv_row_sum(sum, lanes) / fn;
#pragma unroll
    for (int s = 0; s < S; ++s) c[s] = nv_slot<T>(s, packed, lane, lanes) < n ? c[s] - mean : 0.0f;
  }
  float sq = 0.0f;
#pragma unroll
  for (int s = 0; s < S; ++s) sq += c[s] * c[s];
  sq = nv_row_sum(sq, lanes);
  inv = 1.0f / sqrtf(sq / fn + eps);
}

// One row of at most `lanes * S` elements, from registers.
template <typename T, int S>
__device__ __forceinline__ void nv_norm_slots(const NvNormRow<T>& R, i64 n, float eps, bool centre,
                                              int lane, int lanes) {
  constexpr int V = 16 / sizeof(T);
  const bool packed = nv_norm_packed<T, V>(R, n);
  float c[S];
  nv_load_slots<T, S>(R.x, R.xs, n, packed, lane, lanes, c);
  if (R.r != nullptr) {
    float q[S];
    nv_load_slots<T, S>(R.r, R.rs, n, packed, lane, lanes, q);
#pragma unroll
    for (int s = 0; s < S; ++s) c[s] = nv_up(nv_down<T>(c[s] + q[s]));
    nv_store_slots<T, S>(R.h, n, packed, lane, lanes, c);
  }
  float mean, inv;
  nv_slot_stats<T, S>(c, n, eps, centre, packed, lane, lanes, mean, inv);
  const bool hw = R.w != nullptr, hb = R.b != nullptr;
  float w[S], b[S];
  nv_param_slots<T, S>(R.w, R.ws, n, packed, lane, lanes, 1.0f, w);
  nv_param_slots<T, S>(R.b, R.bs, n, packed, lane, lanes, 0.0f, b);
#pragma unroll
  for (int s = 0; s < S; ++s) c[s] = nv_up(nv_norm_out<T>(c[s], 0.0f, inv, hw, w[s], hb, b[s]));
  nv_store_slots<T, S>(R.y, n, packed, lane, lanes, c);
}

// Every row, from registers: `lanes` threads a row (32: eight rows a block of 256; more: the
// block is one row), grid-stride over the rows.
template <typename T, int S>
__device__ __forceinline__ void nv_norm_slot_rows(const T* __restrict__ x, const Strided& xrows,
                                                  i64 xs, const T* __restrict__ r,
                                                  const Strided& rrows, i64 rs,
                                                  const T* __restrict__ w, i64 ws,
                                                  const T* __restrict__ b, i64 bs,
                                                  T* __restrict__ y, T* __restrict__ h, i64 nrows,
                                                  i64 n, float eps, int centre, int lanes) {
  const int groups = blockDim.x / lanes;
  const int g = threadIdx.x / lanes, lane = threadIdx.x % lanes;
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
    nv_norm_slots<T, S>(R, n, eps, centre != 0, lane, lanes);
  }
}

// ---------------------------------------------------------------------------------------
// The gradients of both norms, rows in registers as above. For row x with cotangent g,
// c = x - mean (mean 0 for RMS), inv = 1 / sqrt(mean(c²) + eps), u = g·w:
//   dx = (u - mean(u)) · inv - c · mean(u·c) · inv³      (mean(u) only for layer norm)
// and the parameters' cotangents sum g·c·inv (weight) and g (bias) over the rows: each row
// group adds its rows into registers and writes one partial row of float32 sums; a second
// kernel adds the partial rows in a fixed order (no atomics: every run gives the same bits).
template <typename T, int S>
__device__ __forceinline__ void nv_norm_vjp_rows(const T* __restrict__ x, const T* __restrict__ w,
                                                 const T* __restrict__ g, T* __restrict__ dx,
                                                 float* __restrict__ pw, float* __restrict__ pb,
                                                 i64 nrows, i64 n, float eps, int centre,
                                                 int lanes) {
  constexpr int V = 16 / sizeof(T);
  const int groups = blockDim.x / lanes;
  const int gi = threadIdx.x / lanes, lane = threadIdx.x % lanes;
  const bool packed = n % V == 0 && nv_aligned(x) && nv_aligned(g) && nv_aligned(dx) &&
                      (w == nullptr || nv_aligned(w));
  float wv[S], aw[S], ab[S];
  nv_param_slots<T, S>(w, 1, n, packed, lane, lanes, 1.0f, wv);
#pragma unroll
  for (int s = 0; s < S; ++s) aw[s] = ab[s] = 0.0f;
  const float fn = (float)n;
  for (i64 t = (i64)blockIdx.x * groups + gi; t < nrows; t += (i64)gridDim.x * groups) {
    float c[S], u[S];
    nv_load_slots<T, S>(x + t * n, 1, n, packed, lane, lanes, c);
    nv_load_slots<T, S>(g + t * n, 1, n, packed, lane, lanes, u);
    float mean, inv;
    nv_slot_stats<T, S>(c, n, eps, centre != 0, packed, lane, lanes, mean, inv);
    float su = 0.0f, suc = 0.0f;
#pragma unroll
    for (int s = 0; s < S; ++s) {
      ab[s] += u[s];
      aw[s] += u[s] * c[s] * inv;
      u[s] *= wv[s];
      su += u[s];
      suc += u[s] * c[s];
    }
    const float umean = centre ? nv_row_sum(su, lanes) / fn : 0.0f;
    const float proj = nv_row_sum(suc, lanes) / fn * inv * inv * inv;
#pragma unroll
    for (int s = 0; s < S; ++s) c[s] = (u[s] - umean) * inv - c[s] * proj;
    nv_store_slots<T, S>(dx + t * n, n, packed, lane, lanes, c);
  }
  // This group's partial row: slot order as the loads (packed or not, same mapping).
  const i64 prow = (i64)blockIdx.x * groups + gi;
#pragma unroll
  for (int s = 0; s < S; ++s) {
    const i64 i = nv_slot<T>(s, packed, lane, lanes);
    if (i < n) {
      if (pw != nullptr) pw[prow * n + i] = aw[s];
      if (pb != nullptr) pb[prow * n + i] = ab[s];
    }
  }
}

// out[i] = the sum over the `parts` partial rows of column i, in row order: 32 columns a
// block, eight threads a column, then their eight sums added in shared memory.
template <typename T>
__device__ __forceinline__ void nv_sum_parts(const float* __restrict__ part, i64 parts, i64 n,
                                             T* __restrict__ out) {
  __shared__ float acc[8][33];
  const int col = threadIdx.x & 31, row = threadIdx.x >> 5;
  const i64 i = (i64)blockIdx.x * 32 + col;
  float v = 0.0f;
  if (i < n)
    for (i64 p = row; p < parts; p += 8) v += part[p * n + i];
  acc[row][col] = v;
  __syncthreads();
  if (row == 0 && i < n) {
    float t = 0.0f;
#pragma unroll
    for (int k = 0; k < 8; ++k) t += acc[k][col];
    out[i] = nv_down<T>(t);
  }
}

// At most 512 threads a block, and at least `MINB` blocks of 512 resident a multiprocessor:
// the register budget (65536 / (512 * MINB) a thread) that keeps S slots each of the row,
// weight and bias in registers while enough rows are in flight to hide the memory's latency.
#define NV_NORM_FWD(T, tn, S, MINB) \
  extern "C" __global__ void __launch_bounds__(512, MINB) norm_slots_##tn##_##S( \
      const T* x, Strided xrows, i64 xs, const T* r, Strided rrows, i64 rs, const T* w, i64 ws, \
      const T* b, i64 bs, T* y, T* h, i64 nrows, i64 n, float eps, int centre, int lanes) { \
    nv_norm_slot_rows<T, S>(x, xrows, xs, r, rrows, rs, w, ws, b, bs, y, h, nrows, n, eps, \
                            centre, lanes); }
#define NV_NORM_VJP(T, tn, S, MINB) \
  extern "C" __global__ void __launch_bounds__(512, MINB) norm_vjp_##tn##_##S( \
      const T* x, const T* w, const T* g, T* dx, float* pw, float* pb, i64 nrows, i64 n, \
      float eps, int centre, int lanes) { \
    nv_norm_vjp_rows<T, S>(x, w, g, dx, pw, pb, nrows, n, eps, centre, lanes); }

// `norm_rows_<type>` (any row), `norm_slots_<type>_<S>` and `norm_vjp_<type>_<S>` (rows of
// at most lanes * S elements), `norm_parts_<type>` (the parameters' cotangents).
#define NV_NORMS(T, tn) \
  NV_NORM_FWD(T, tn, 8, 3) \
  NV_NORM_FWD(T, tn, 16, 2) \
  NV_NORM_FWD(T, tn, 32, 1) \
  NV_NORM_VJP(T, tn, 8, 1) \
  NV_NORM_VJP(T, tn, 16, 1) \
  extern "C" __global__ void __launch_bounds__(256) norm_parts_##tn( \
      const float* part, i64 parts, i64 n, T* out) { nv_sum_parts<T>(part, parts, n, out); } \
  extern "C" __global__ void __launch_bounds__(NV_THREADS) norm_rows_##tn( \
      const T* x, Strided xrows, i64 xs, const T* r, Strided rrows, i64 rs, const T* w, i64 ws, \
      const T* b, i64 bs, T* y, T* h, i64 nrows, i64 n, float eps, int centre, int lanes) { \
    nv_norm_rows<T>(x, xrows, xs, r, rrows, rs, w, ws, b, bs, y, h, nrows, n, eps, centre, \
                    lanes); }
