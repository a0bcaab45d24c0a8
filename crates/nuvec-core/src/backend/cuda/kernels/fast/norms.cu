// RMS and layer normalisation over the last axis (with the residual sum of add_rms_norm),
// and their gradients. Needs common.cuh and fast/rows.cuh first.
//
// Rows the registers hold (at most 512 threads of 8 packs of 16 bytes, rows.cuh) run the
// `packs`/`elems` kernels below, one kernel for each of RMS, add-then-RMS and layer
// normalisation. Longer rows run the looped kernel, a block of 256 a row, which reads a row
// again for each pass (two for RMS, three for layer normalisation). Rows are located by the
// `rows` view (the leading axes) with their elements `s` apart. Statistics accumulate in
// float; the result is rounded as the CPU kernels round it: the normalised value to the
// element type, then times the weight (rounded), then plus the bias (rounded). Outputs are
// row-major.

#define NV_THREADS 256

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

// One row of n elements (any n >= 1) by lane `lane` of `lanes`.
template <typename T>
__device__ __forceinline__ void nv_norm_row(NvNormRow<T> R, i64 n, float eps, bool centre,
                                            int lane, int lanes) {
  const bool hw = R.w != nullptr, hb = R.b != nullptr;
  const float fn = (float)n;
  // A pass for the mean (layer norm), one for the sum of squares
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
// Rows held in registers as packs (rows.cuh).

// The mean (layer norm; 0 for RMS) and the inverse root mean square about it of the row
// whose packs `x` holds.
// Tunable: the layer norm's statistics in one exchange (each thread's mean and squared
// deviations merged) instead of two (the mean, then the squares about it). Two: 2,610
// against 2,170 GB/s on the H200 (bf16 [16384, 4096]; the merge costs registers).
#ifndef NV_LAYER_ONE_PASS
#define NV_LAYER_ONE_PASS 0
#endif

// `slot`: the exchanges' buffers (rows.cuh), or null for exchanges that end with a barrier.
template <typename T, int P, bool full = false>
__device__ __forceinline__ void nv_pack_stats(const NvPacks<T, P>& x, i64 n, float eps, bool centre,
                                              int lane, int lanes, float& mean, float& inv,
                                              int* slot = nullptr) {
  constexpr int V = NvVec<T>::v;
  const float fn = (float)n;
  if (centre && NV_LAYER_ONE_PASS) {
    // Each thread's own mean and squared deviations, merged over the row in one exchange.
    float c = 0.0f, s = 0.0f;
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const int valid = nv_pack_valid<T, full>(nv_pack_at(k, lane, lanes), n);
      c += (float)valid;
#pragma unroll
      for (int j = 0; j < V; ++j) s += x.at(k, j);
    }
    float m = c > 0.0f ? s / c : 0.0f, m2 = 0.0f;
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const int valid = nv_pack_valid<T, full>(nv_pack_at(k, lane, lanes), n);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float d = x.at(k, j) - m;
        m2 += j < valid ? d * d : 0.0f;
      }
    }
    nv_row_moments(c, m, m2, lanes, slot);
    mean = m;
    inv = 1.0f / sqrtf(m2 / fn + eps);
    return;
  }
  mean = 0.0f;
  if (centre) {
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < P; ++k)
#pragma unroll
      for (int j = 0; j < V; ++j) sum += x.at(k, j);
    mean = nv_row_sum(sum, lanes, slot) / fn;
  }
  float sq = 0.0f;
#pragma unroll
  for (int k = 0; k < P; ++k) {
    const int valid = centre ? nv_pack_valid<T, full>(nv_pack_at(k, lane, lanes), n) : V;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      // Elements past the row hold 0, which only the centred sum must skip.
      const float d = x.at(k, j) - mean;
      sq += j < valid ? d * d : 0.0f;
    }
  }
  sq = nv_row_sum(sq, lanes, slot);
  inv = 1.0f / sqrtf(sq / fn + eps);
}

// Two half-type elements in a 32-bit word (the even one in the low half), multiplied or
// added by the packed instructions. Each result is the exact product or sum rounded once,
// which is what the float path gives (float, then rounded to T): the product of two half-type
// values is exact in float, and so is their sum unless their exponents lie so far apart that
// the smaller cannot move the rounded result. Only a NaN's payload may differ.
template <typename T> struct NvHalf2;
template <> struct NvHalf2<bf16> {
  static __device__ __forceinline__ u32 bits(__nv_bfloat162 v) { return *reinterpret_cast<u32*>(&v); }
  static __device__ __forceinline__ __nv_bfloat162 of(u32 w) { return *reinterpret_cast<__nv_bfloat162*>(&w); }
  static __device__ __forceinline__ u32 round(float lo, float hi) { return bits(__floats2bfloat162_rn(lo, hi)); }
  static __device__ __forceinline__ u32 mul(u32 a, u32 b) { return bits(__hmul2(of(a), of(b))); }
  static __device__ __forceinline__ u32 add(u32 a, u32 b) { return bits(__hadd2(of(a), of(b))); }
};
template <> struct NvHalf2<f16> {
  static __device__ __forceinline__ u32 bits(__half2 v) { return *reinterpret_cast<u32*>(&v); }
  static __device__ __forceinline__ __half2 of(u32 w) { return *reinterpret_cast<__half2*>(&w); }
  static __device__ __forceinline__ u32 round(float lo, float hi) { return bits(__floats2half2_rn(lo, hi)); }
  static __device__ __forceinline__ u32 mul(u32 a, u32 b) { return bits(__hmul2(of(a), of(b))); }
  static __device__ __forceinline__ u32 add(u32 a, u32 b) { return bits(__hadd2(of(a), of(b))); }
};

// One row of at most `lanes * P * V` elements, read once into registers. `res`: the residual
// is added first (add_rms_norm), `centre`: layer norm. Each combination is its own kernel,
// so that the plain norms carry no registers for what they do not do.
// The row's packs as loaded: x, and the residual q (add_rms_norm).
template <typename T, int P, bool packed, bool res>
__device__ __forceinline__ void nv_norm_load(const NvNormRow<T>& R, i64 n, int lane, int lanes,
                                             NvPacks<T, P>& x, NvPacks<T, P>& q) {
  nv_packs_load<T, P>(R.x, R.xs, n, packed, lane, lanes, x);
  if (res) nv_packs_load<T, P>(R.r, R.rs, n, packed, lane, lanes, q);
}

template <typename T, int P, bool packed, bool full, bool res, bool centre>
__device__ __forceinline__ void nv_norm_packs(const NvNormRow<T>& R, NvPacks<T, P> x,
                                              const NvPacks<T, P>& q, i64 n, float eps, int lane,
                                              int lanes, int* slot) {
  constexpr int V = NvVec<T>::v;
  if (res) {
#pragma unroll
    for (int k = 0; k < P; ++k) {
      typename NvVec<T>::P o;
      if constexpr (sizeof(T) == 2) {
        // Two sums a word, each rounded once (see NvHalf2).
#pragma unroll
        for (int i = 0; i < 4; ++i) x.p[k].w[i] = NvHalf2<T>::add(x.p[k].w[i], q.p[k].w[i]);
        o = *reinterpret_cast<const typename NvVec<T>::P*>(&x.p[k]);
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j) {
          o.v[j] = nv_down<T>(x.at(k, j) + q.at(k, j));
          x.set(k, j, o.v[j]);
        }
      }
      nv_pack_store<T>(R.h, nv_pack_at(k, lane, lanes), n, packed, o);
    }
  }
  float mean, inv;
  nv_pack_stats<T, P, full>(x, n, eps, centre, lane, lanes, mean, inv, slot);
  const bool hw = R.w != nullptr, hb = centre && R.b != nullptr;
#pragma unroll
  for (int k = 0; k < P; ++k) {
    const i64 q = nv_pack_at(k, lane, lanes);
    if (q * V >= n) break;
    // The parameters stay as loaded, converted element by element (fewer registers).
    const NvRaw w = nv_raw_param<T>(R.w, R.ws, q, n, packed);
    const NvRaw b = nv_raw_param<T>(centre ? R.b : nullptr, R.bs, q, n, packed);
    typename NvVec<T>::P o;
    if constexpr (sizeof(T) == 2) {
      // Two elements a word: the normalised pair rounded from float, then the weight's and
      // the bias's pairs by the packed instructions (see NvHalf2).
      NvRaw out;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        u32 z = NvHalf2<T>::round((x.at(k, 2 * i) - mean) * inv, (x.at(k, 2 * i + 1) - mean) * inv);
        if (hw) z = NvHalf2<T>::mul(z, w.w[i]);
        if (hb) z = NvHalf2<T>::add(z, b.w[i]);
        out.w[i] = z;
      }
      o = *reinterpret_cast<const typename NvVec<T>::P*>(&out);
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j)
        o.v[j] = nv_norm_out<T>(x.at(k, j), mean, inv, hw, nv_raw_get<T>(w, j), hb,
                                nv_raw_get<T>(b, j));
    }
    nv_pack_store<T>(R.y, q, n, packed, o);
  }
}

// Every row, from registers: `lanes` threads a row (32: eight rows a block of 256; more: the
// block is one row), grid-stride over the rows.
// Tunable: whether each row group loads its next row while it works on this one (twice the
// registers for the row; for a grid of a few blocks a multiprocessor).
#ifndef NV_NORM_PREFETCH
#define NV_NORM_PREFETCH 0
#endif
template <typename T, int P, bool packed, bool full, bool res, bool centre>
__device__ __forceinline__ void nv_norm_pack_rows(const T* __restrict__ x, const Strided& xrows,
                                                  i64 xs, const T* __restrict__ r,
                                                  const Strided& rrows, i64 rs,
                                                  const T* __restrict__ w, i64 ws,
                                                  const T* __restrict__ b, i64 bs,
                                                  T* __restrict__ y, T* __restrict__ h, i64 nrows,
                                                  i64 n, float eps, int lanes) {
  const int groups = blockDim.x / lanes;
  const int g = threadIdx.x / lanes, lane = threadIdx.x % lanes;
  auto row = [&](i64 t) {
    NvNormRow<T> R;
    R.x = x + nv_locate(xrows, t);
    R.xs = xs;
    R.r = res ? r + nv_locate(rrows, t) : nullptr;
    R.rs = rs;
    R.h = res ? h + t * n : nullptr;
    R.w = w;
    R.ws = ws;
    R.b = b;
    R.bs = bs;
    R.y = y + t * n;
    return R;
  };
  const i64 step = (i64)gridDim.x * groups;
  // The exchanges' buffers, alternated (rows.cuh).
  int slot = 0;
  NvPacks<T, P> xp, qp;
  if (NV_NORM_PREFETCH) {
    // The next row's loads go out before this row's exchanges, so the memory stays busy
    // while the row waits on them (a grid of a few blocks a multiprocessor: the host's
    // `NUVEC_ROWS_RESIDENT`).
    i64 t = (i64)blockIdx.x * groups + g;
    if (t < nrows) nv_norm_load<T, P, packed, res>(row(t), n, lane, lanes, xp, qp);
    for (; t < nrows; t += step) {
      NvPacks<T, P> xn = xp, qn = qp;
      if (t + step < nrows) nv_norm_load<T, P, packed, res>(row(t + step), n, lane, lanes, xn, qn);
      nv_norm_packs<T, P, packed, full, res, centre>(row(t), xp, qp, n, eps, lane, lanes, &slot);
      xp = xn;
      qp = qn;
    }
    return;
  }
  for (i64 t = (i64)blockIdx.x * groups + g; t < nrows; t += step) {
    const NvNormRow<T> R = row(t);
    nv_norm_load<T, P, packed, res>(R, n, lane, lanes, xp, qp);
    nv_norm_packs<T, P, packed, full, res, centre>(R, xp, qp, n, eps, lane, lanes, &slot);
  }
}

// ---------------------------------------------------------------------------------------
// The gradients of both norms, rows in registers as packs. For row x with cotangent g,
// c = x - mean (mean 0 for RMS), inv = 1 / sqrt(mean(c²) + eps), u = g·w:
//   dx = (u - mean(u)) · inv - c · mean(u·c) · inv³      (mean(u) only for layer norm)
// and the parameters' cotangents sum g·c·inv (weight) and g (bias) over the rows. Each row
// group adds its rows into its own float32 row in shared memory (each thread only the
// elements it holds, so no synchronisation), then writes it as one partial row; a second
// kernel adds the partial rows in a fixed order (no atomics: every run gives the same bits).
// The RMS norm needs one row reduction (of two sums), the layer norm two.

// The sums a and b over the `lanes` threads of a row, as `nv_row_sum` (one exchange; `slot`
// as there).
__device__ __forceinline__ void nv_row_sum2(float& a, float& b, int lanes, int* slot) {
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1) {
    a += __shfl_xor_sync(0xffffffffu, a, m);
    b += __shfl_xor_sync(0xffffffffu, b, m);
  }
  if (lanes > 32) {
    __shared__ float parts[2][2][32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float (*part)[32] = parts[*slot];
    if (lane == 0) {
      part[0][warp] = a;
      part[1][warp] = b;
    }
    __syncthreads();
    a = lane < lanes / 32 ? part[0][lane] : 0.0f;
    b = lane < lanes / 32 ? part[1][lane] : 0.0f;
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) {
      a += __shfl_xor_sync(0xffffffffu, a, m);
      b += __shfl_xor_sync(0xffffffffu, b, m);
    }
    *slot ^= 1;
    if (NV_ROW_TWO_BARRIERS) __syncthreads();
  }
}

// Adds v[0..V) to the V floats at `a` (16-byte aligned) in 16-byte steps.
template <int V>
__device__ __forceinline__ void nv_add_floats(float* a, const float (&v)[V]) {
#pragma unroll
  for (int h = 0; h < V / 4; ++h) {
    float4 s = reinterpret_cast<float4*>(a)[h];
    s.x += v[4 * h];
    s.y += v[4 * h + 1];
    s.z += v[4 * h + 2];
    s.w += v[4 * h + 3];
    reinterpret_cast<float4*>(a)[h] = s;
  }
}

// Tunable: whether each row group loads its next row while it works on this one (the grid is
// one wave of blocks looping over the rows; twice the registers for the rows).
#ifndef NV_VJP_PREFETCH
#define NV_VJP_PREFETCH 0
#endif

template <typename T, int P, bool packed, bool full, bool lay>
__device__ __forceinline__ void nv_norm_vjp_packs(const T* __restrict__ x, const T* __restrict__ w,
                                                  const T* __restrict__ g, T* __restrict__ dx,
                                                  float* __restrict__ pw, float* __restrict__ pb,
                                                  i64 nrows, i64 n, float eps, int lanes) {
  constexpr int V = NvVec<T>::v;
  // Per row group, `span` floats for the weight's sums and (layer norm) as many for the
  // bias's, in the row's order; a thread touches only its own packs' floats.
  extern __shared__ float4 nv_vjp_acc[];
  const int groups = blockDim.x / lanes;
  const int gi = threadIdx.x / lanes, lane = threadIdx.x % lanes;
  const int span = lanes * P * V;
  float* aw = reinterpret_cast<float*>(nv_vjp_acc) + gi * span * (lay ? 2 : 1);
  float* ab = aw + span;
  const float zero[V] = {};
#pragma unroll
  for (int k = 0; k < P; ++k) {
    const int at = (int)nv_pack_at(k, lane, lanes) * V;
#pragma unroll
    for (int h = 0; h < V / 4; ++h) {
      reinterpret_cast<float4*>(aw + at)[h] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (lay) reinterpret_cast<float4*>(ab + at)[h] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  }
  (void)zero;
  const float fn = (float)n;
  const i64 step = (i64)gridDim.x * groups;
  // The exchanges' buffers, alternated (rows.cuh).
  int slot = 0;
  NvPacks<T, P> xr, gr;
  if (NV_VJP_PREFETCH && (i64)blockIdx.x * groups + gi < nrows) {
    const i64 t = (i64)blockIdx.x * groups + gi;
    nv_packs_load<T, P>(x + t * n, 1, n, packed, lane, lanes, xr);
    nv_packs_load<T, P>(g + t * n, 1, n, packed, lane, lanes, gr);
  }
  for (i64 t = (i64)blockIdx.x * groups + gi; t < nrows; t += step) {
    NvPacks<T, P> xn, gn;
    if (NV_VJP_PREFETCH) {
      // The next row's loads go out before this row's exchanges.
      xn = xr;
      gn = gr;
      if (t + step < nrows) {
        nv_packs_load<T, P>(x + (t + step) * n, 1, n, packed, lane, lanes, xn);
        nv_packs_load<T, P>(g + (t + step) * n, 1, n, packed, lane, lanes, gn);
      }
    } else {
      nv_packs_load<T, P>(x + t * n, 1, n, packed, lane, lanes, xr);
      nv_packs_load<T, P>(g + t * n, 1, n, packed, lane, lanes, gr);
    }
    // The weight is read again for each row (from the L1 cache): the opaque copy of its
    // pointer keeps the compiler from hoisting its values out of the loop into registers
    // that the rows in flight need more.
    const T* wr = w;
// nuvec-emulation: device only (an optimisation barrier, nothing to stand in for) {
    asm("" : "+l"(wr));
// } nuvec-emulation
    // Layer norm: the mean of x and of u first.
    float mean = 0.0f, umean = 0.0f;
    if (lay) {
      float sx = 0.0f, su = 0.0f;
#pragma unroll
      for (int k = 0; k < P; ++k) {
        float wv[V];
        nv_pack_param<T>(wr, 1, nv_pack_at(k, lane, lanes), n, packed, 1.0f, wv);
#pragma unroll
        for (int j = 0; j < V; ++j) {
          sx += xr.at(k, j);
          su += gr.at(k, j) * wv[j];
        }
      }
      nv_row_sum2(sx, su, lanes, &slot);
      mean = sx / fn;
      umean = su / fn;
    }
    // The sum of c² and of u·c (elements past the row: c = -mean, u = 0).
    float sq = 0.0f, suc = 0.0f;
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const i64 q = nv_pack_at(k, lane, lanes);
      float wv[V];
      nv_pack_param<T>(wr, 1, q, n, packed, 1.0f, wv);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float c = xr.at(k, j) - mean;
        sq += (!lay || full || q * V + j < n) ? c * c : 0.0f;
        suc += gr.at(k, j) * wv[j] * c;
      }
    }
    nv_row_sum2(sq, suc, lanes, &slot);
    const float inv = 1.0f / sqrtf(sq / fn + eps);
    const float proj = suc / fn * inv * inv * inv;
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const i64 q = nv_pack_at(k, lane, lanes);
      float wv[V], dw[V], db[V];
      nv_pack_param<T>(wr, 1, q, n, packed, 1.0f, wv);
      typename NvVec<T>::P o;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float c = xr.at(k, j) - mean, gv = gr.at(k, j);
        o.v[j] = nv_down<T>((gv * wv[j] - umean) * inv - c * proj);
        dw[j] = gv * (c * inv);
        db[j] = gv;
      }
      nv_pack_store<T>(dx + t * n, q, n, packed, o);
      nv_add_floats<V>(aw + q * V, dw);
      if (lay) nv_add_floats<V>(ab + q * V, db);
    }
    if (NV_VJP_PREFETCH) {
      xr = xn;
      gr = gn;
    }
  }
  // This group's partial row.
  const i64 prow = (i64)blockIdx.x * groups + gi;
#pragma unroll
  for (int k = 0; k < P; ++k) {
    const i64 q = nv_pack_at(k, lane, lanes);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const i64 i = q * V + j;
      if (i < n) {
        if (pw != nullptr) pw[prow * n + i] = aw[i];
        if (lay && pb != nullptr) pb[prow * n + i] = ab[i];
      }
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
// the register budget (65536 / (512 * MINB) a thread) that keeps P packs of the row in
// registers while enough rows are in flight to hide the memory's latency. `*_packs_*` move
// rows in 16-byte packs (the host checks the alignment), `*_elems_*` element by element.
// `*_full_*` (layer norm and its gradient, the kernels that mask elements) are the packed
// kernels for rows that fill every pack of their threads (`nv_pack_valid` in rows.cuh; the
// host checks).
#define NV_NORM_FWD1(T, tn, kind, P, MINB, mode, packed, full, res, centre) \
  extern "C" __global__ void __launch_bounds__(512, MINB) kind##_##mode##_##tn##_##P( \
      const T* x, Strided xrows, i64 xs, const T* r, Strided rrows, i64 rs, const T* w, i64 ws, \
      const T* b, i64 bs, T* y, T* h, i64 nrows, i64 n, float eps, int lanes) { \
    nv_norm_pack_rows<T, P, packed, full, res, centre>(x, xrows, xs, r, rrows, rs, w, ws, b, bs, \
                                                       y, h, nrows, n, eps, lanes); }
#define NV_NORM_FWD(T, tn, kind, P, MINB, res, centre) \
  NV_NORM_FWD1(T, tn, kind, P, MINB, packs, true, false, res, centre) \
  NV_NORM_FWD1(T, tn, kind, P, MINB, elems, false, false, res, centre)
#define NV_NORM_VJP1(T, tn, kind, P, MINB, mode, packed, full, lay) \
  extern "C" __global__ void __launch_bounds__(512, MINB) kind##_vjp_##mode##_##tn##_##P( \
      const T* x, const T* w, const T* g, T* dx, float* pw, float* pb, i64 nrows, i64 n, \
      float eps, int lanes) { \
    nv_norm_vjp_packs<T, P, packed, full, lay>(x, w, g, dx, pw, pb, nrows, n, eps, lanes); }
#define NV_NORM_VJP(T, tn, kind, P, MINB, lay) \
  NV_NORM_VJP1(T, tn, kind, P, MINB, packs, true, false, lay) \
  NV_NORM_VJP1(T, tn, kind, P, MINB, elems, false, false, lay)
// Resident blocks of 512 a multiprocessor the register budgets aim at (tunable).
#ifndef NV_RMS_MINB
#define NV_RMS_MINB 3
#endif
#ifndef NV_ADD_RMS_MINB
#define NV_ADD_RMS_MINB 2
#endif
#ifndef NV_LAYER_MINB
#define NV_LAYER_MINB 2
#endif
#ifndef NV_VJP4_MINB
#define NV_VJP4_MINB 1
#endif

// The register budget of kernels of P packs: two resident blocks of 512 at 8 packs, else
// `MINB` (the kind's).
#define NV_MINB(P, MINB) ((P) == 8 ? 2 : (MINB))

// One module a kind and a pack count P (a module compiles only what a launch asks for):
// `NV_NORMS_<kind>(T, tn, P)` instantiates `<kind>_{packs,elems}_<type>_<P>` for kind rms,
// add_rms and layer, `<kind>_vjp_{packs,elems}_<type>_<P>` for rms_vjp and layer_vjp (P at
// most 4), and layer norm's `layer_full_*` and `layer_vjp_full_*`; `NV_NORMS_rows(T, tn)` the looped `norm_rows_<type>` (any row) and
// `norm_parts_<type>` (the parameters' cotangents from the gradients' partial rows).
#define NV_NORMS_rms(T, tn, P) NV_NORM_FWD(T, tn, rms, P, NV_MINB(P, NV_RMS_MINB), false, false)
#define NV_NORMS_add_rms(T, tn, P) \
  NV_NORM_FWD(T, tn, add_rms, P, NV_MINB(P, NV_ADD_RMS_MINB), true, false)
#define NV_NORMS_layer(T, tn, P) \
  NV_NORM_FWD(T, tn, layer, P, NV_MINB(P, NV_LAYER_MINB), false, true) \
  NV_NORM_FWD1(T, tn, layer, P, NV_MINB(P, NV_LAYER_MINB), full, true, true, false, true)
#define NV_NORMS_rms_vjp(T, tn, P) NV_NORM_VJP(T, tn, rms, P, ((P) == 4 ? NV_VJP4_MINB : 2), false)
#define NV_NORMS_layer_vjp(T, tn, P) \
  NV_NORM_VJP(T, tn, layer, P, ((P) == 4 ? NV_VJP4_MINB : 2), true) \
  NV_NORM_VJP1(T, tn, layer, P, ((P) == 4 ? NV_VJP4_MINB : 2), full, true, true, true)
#define NV_NORMS_rows(T, tn) \
  extern "C" __global__ void __launch_bounds__(256) norm_parts_##tn( \
      const float* part, i64 parts, i64 n, T* out) { nv_sum_parts<T>(part, parts, n, out); } \
  extern "C" __global__ void __launch_bounds__(NV_THREADS) norm_rows_##tn( \
      const T* x, Strided xrows, i64 xs, const T* r, Strided rrows, i64 rs, const T* w, i64 ws, \
      const T* b, i64 bs, T* y, T* h, i64 nrows, i64 n, float eps, int centre, int lanes) { \
    nv_norm_rows<T>(x, xrows, xs, r, rrows, rs, w, ws, b, bs, y, h, nrows, n, eps, centre, \
                    lanes); }
