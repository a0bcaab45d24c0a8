// The gated delta rule over long sequences in chunks of C = 64 steps on the tensor cores (the
// WY / UT form flash-linear-attention's chunk_gated_delta_rule uses). Needs common.cuh,
// gated_delta.cu (NvGd, nv_gd_load) and flash.cu (NvMma, ldmatrix and cp.async helpers).
//
// The derivation. One value head, a chunk of steps 1..C entered with state S0 ([Dv, Dk]).
// Write G_i = g_1 ... g_i (the decay from the chunk's start through step i) and
// D[i][j] = g_{j+1} ... g_i = G_i / G_j for j <= i (D[i][i] = 1). The step
//   S_i = g_i S_{i-1} + u_i k_i^T,   u_i = beta_i (v_i - g_i S_{i-1} k_i)
// unrolls to S_i = G_i S0 + sum_{j<=i} D[i][j] u_j k_j^T (induction: multiply by g_{i+1},
// add the next term). Putting that S_{i-1} into u_i:
//   u_i = beta_i v_i - beta_i G_i S0 k_i - sum_{j<i} beta_i D[i][j] (k_i . k_j) u_j,
// i.e. (I + A) U' = diag(beta) V - diag(beta G) K S0^T with the strictly lower
// A[i][j] = beta_i D[i][j] (k_i . k_j) (rows are steps). With T = (I + A)^-1 (unit lower
// triangular, by forward substitution):
//   U' = U - W S0^T,   U = T diag(beta) V,   W = T diag(beta G) K.
// Then the outputs y_i = S_i q_i and the state after the chunk:
//   Y = diag(G) Q S0^T + P U',   P[i][j] = D[i][j] (q_i . k_j) for j <= i, else 0,
//   S_C = G_C S0 + U'^T diag(D[C][.]) K.
// Only U' depends on S0, through one product; everything else a chunk needs is computed for
// every chunk at once (kernel 1), and the recurrence across chunks (kernel 2) is four products
// a chunk. `scripts/gated_delta_chunk.py` checks these steps against the recurrence.
//
// D is formed as products from the diagonal (D[i][i-1] = g_i, D[i][j-1] = D[i][j] g_j), never
// as quotients of G: a gate of 0 (a reset) is exact, and nothing overflows.
//
// Kernel 1 (`gdc_prep_*`, one block per chunk and head, every chunk at once) reads the
// chunk's q, k, v (any type, through strides), g and beta, and writes to a workspace:
//   W  = (T diag(beta G)) K      [C, Dk] in T (the mma type)
//   Kd = diag(D[C][.]) K          [C, Dk]   (the keys decayed to the chunk's end)
//   Qg = diag(G) Q                [C, Dk]
//   P                             [C, C]
//   U  = (T diag(beta)) V         [C, Dv] in float
//   G_C                           one float (64 reserved, for 16-byte rows)
// beta and the gates are folded into T's columns, so K and V enter the products as they were
// given (exact for half-type inputs). T itself is solved in float, in blocks of 16 (see the
// solve).
//
// Kernel 2 (`gdc_state_*`, one block per head and 32 state rows, the chunks one after the
// other) keeps its rows of the state in float registers, as the accumulators of the state's
// product, and a copy rounded to T in shared memory for the products that read it:
//   V' = U - W S^T;  Y = Qg S^T + P V';  S = G_C S + V'^T Kd.
// The next chunk's operands load (cp.async) while a chunk computes.
//
// A last partial chunk is padded with g = 1, beta = 0 and zero vectors: the padded rows of T
// are unit rows, so W, U, Kd and P vanish there and the state is unchanged by them.
//
// mma.sync m16n8k16 fragments (f32 accumulators): lane l = 4 g + t holds c0, c1 at row g,
// columns 2t, 2t + 1 and c2, c3 at row g + 8. ldmatrix addresses follow flash.cu: an A
// operand (or a B stored as [n][k]) from rows `a_row`/`b_row`; a B stored as [k][n] and an A
// stored as [k][m] through the transposing form.

#define NV_GDC_C 64            // steps a chunk
#define NV_GDC_THREADS 128     // 4 warps, 16 rows of the chunk each
#define NV_GDC_RV 32           // state rows a block of kernel 2
#define NV_GDC_CS (NV_GDC_C + 1)  // f32 matrix row stride (odd: columns fall in distinct banks)
#define NV_GDC_PS (NV_GDC_C + 8)  // T matrix row stride [C][C] (16 bytes of padding)

// Element offsets of one chunk's parts in the T workspace and the float workspace.
template <int DK, int DV> struct NvGdcWs {
  static constexpr i64 W = 0;
  static constexpr i64 KD = NV_GDC_C * DK;
  static constexpr i64 QG = 2 * NV_GDC_C * DK;
  static constexpr i64 P = 3 * NV_GDC_C * DK;
  static constexpr i64 HALF = 3 * NV_GDC_C * DK + NV_GDC_C * NV_GDC_C;  // T elements a chunk
  static constexpr i64 FLOAT = NV_GDC_C * DV + 64;                       // floats a chunk
};

// Two floats as one 32-bit word of T.
template <typename T>
__device__ __forceinline__ void nv_gdc_put2(T* p, float lo, float hi) {
  *reinterpret_cast<u32*>(p) = NvMma<T>::pack(lo, hi);
}

// Warp-tile products on the tensor cores, with f32 accumulators in mma.sync's fragments
// (tile j of 8 columns: rows lane/4 and lane/4 + 8, columns 2(lane % 4) and the next). The
// contraction goes 16 at a time in the outer loop, pairs of column tiles in the inner one, so
// each accumulator takes its products in one fixed order whatever the helper.
//
// acc[i] += A_i B for the NA row tiles A_i (16 rows from a[i], row stride `as`, K columns) and
// B given by the rows of its transpose (N rows of K from `bt`, stride `bs`): A_i share each
// fragment of B.
template <typename T, int K, int N, int NA>
__device__ __forceinline__ void nv_gdc_mul_bt(float (&acc)[NA][N / 8][4], const T* const (&a)[NA],
                                              int as, const T* bt, int bs, int lane) {
  const int a_row = (lane & 7) + ((lane >> 3) & 1) * 8, a_col = (lane >> 4) * 8;
  const int b_row = (lane & 7) + (lane >> 4) * 8, b_col = ((lane >> 3) & 1) * 8;
#pragma unroll
  for (int s = 0; s < K / 16; ++s) {
    u32 af[NA][4];
#pragma unroll
    for (int i = 0; i < NA; ++i) nv_ldsm4(af[i], a[i] + a_row * as + s * 16 + a_col);
#pragma unroll
    for (int j = 0; j < N / 8; j += 2) {
      u32 bf[4];
      nv_ldsm4(bf, bt + (j * 8 + b_row) * bs + s * 16 + b_col);
#pragma unroll
      for (int i = 0; i < NA; ++i) {
        NvMma<T>::run(acc[i][j], af[i], bf[0], bf[1]);
        NvMma<T>::run(acc[i][j + 1], af[i], bf[2], bf[3]);
      }
    }
  }
}

// acc += A B: A's 16 rows from `a` (stride `as`, K columns), B as K rows of N from `b`
// (stride `bs`).
template <typename T, int K, int N>
__device__ __forceinline__ void nv_gdc_mul_b(float (&acc)[N / 8][4], const T* a, int as,
                                             const T* b, int bs, int lane) {
  const int a_row = (lane & 7) + ((lane >> 3) & 1) * 8, a_col = (lane >> 4) * 8;
#pragma unroll
  for (int s = 0; s < K / 16; ++s) {
    u32 af[4];
    nv_ldsm4(af, a + a_row * as + s * 16 + a_col);
#pragma unroll
    for (int j = 0; j < N / 8; j += 2) {
      u32 bf[4];
      nv_ldsm4_t(bf, b + (s * 16 + a_row) * bs + j * 8 + a_col);
      NvMma<T>::run(acc[j], af, bf[0], bf[1]);
      NvMma<T>::run(acc[j + 1], af, bf[2], bf[3]);
    }
  }
}

// acc[mi] += A^T B for MI row tiles of 16: A stored as K rows of its MI · 16 columns (`at`,
// stride `as`), B as K rows of N (`b`, stride `bs`).
template <typename T, int K, int MI, int N>
__device__ __forceinline__ void nv_gdc_mul_at_b(float (&acc)[MI][N / 8][4], const T* at, int as,
                                                const T* b, int bs, int lane) {
  const int a_row = (lane & 7) + ((lane >> 3) & 1) * 8, a_col = (lane >> 4) * 8;
  // The transposed operand: rows k from bit 4 of the lane, columns m from bit 3.
  const int t_row = (lane & 7) + ((lane >> 4) & 1) * 8, t_col = ((lane >> 3) & 1) * 8;
#pragma unroll
  for (int s = 0; s < K / 16; ++s) {
    u32 af[MI][4];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) nv_ldsm4_t(af[mi], at + (s * 16 + t_row) * as + mi * 16 + t_col);
#pragma unroll
    for (int j = 0; j < N / 8; j += 2) {
      u32 bf[4];
      nv_ldsm4_t(bf, b + (s * 16 + a_row) * bs + j * 8 + a_col);
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        NvMma<T>::run(acc[mi][j], af[mi], bf[0], bf[1]);
        NvMma<T>::run(acc[mi][j + 1], af[mi], bf[2], bf[3]);
      }
    }
  }
}

// C rows of D features of one head's sequence into shared memory (row stride `ds` elements of
// T), from element `base` of `src` (of type code `type`; rows `rs`, features `fs` elements
// apart); rows from `valid` on are zeros. With `vec`, src holds T with fs = 1 and every row
// 16-byte aligned: cp.async copies (the caller commits and waits); else every thread loads its
// eight elements of each of its pieces before storing any, so its loads are all in flight.
template <typename T, int D>
__device__ __forceinline__ void nv_gdc_stage(T* dst, int ds, const void* src, int type, i64 base,
                                             i64 rs, i64 fs, int valid, bool vec) {
  constexpr int PIECES = NV_GDC_C * D / 8;
  if (vec) {
    const T* s = static_cast<const T*>(src) + base;
    for (int u = threadIdx.x; u < PIECES; u += NV_GDC_THREADS) {
      const int r = u / (D / 8), c = (u % (D / 8)) * 8;
      const bool ok = r < valid;
      nv_cp16(dst + r * ds + c, ok ? (const void*)(s + r * rs + c) : (const void*)s, ok);
    }
    return;
  }
  constexpr int PER = PIECES / NV_GDC_THREADS;  // pieces a thread: 4 or 8
  float x[PER][8];
#pragma unroll
  for (int j = 0; j < PER; ++j) {
    const int u = threadIdx.x + j * NV_GDC_THREADS;
    const int r = u / (D / 8), c = (u % (D / 8)) * 8;
#pragma unroll
    for (int e = 0; e < 8; ++e)
      x[j][e] = r < valid ? nv_gd_load(src, type, base + r * rs + (c + e) * fs) : 0.0f;
  }
#pragma unroll
  for (int j = 0; j < PER; ++j) {
    const int u = threadIdx.x + j * NV_GDC_THREADS;
    const int r = u / (D / 8), c = (u % (D / 8)) * 8;
#pragma unroll
    for (int e = 0; e < 8; e += 2) nv_gdc_put2(dst + r * ds + c + e, x[j][e], x[j][e + 1]);
  }
}

// Kernel 1: one chunk `n` of head `bh = b * Hv + h` (see the top of the file).
template <typename T, int DK, int DV>
__device__ __forceinline__ void nv_gdc_prep(const void* __restrict__ q, const void* __restrict__ k,
                                            const void* __restrict__ v, const void* __restrict__ g,
                                            const void* __restrict__ beta, T* __restrict__ wsh,
                                            float* __restrict__ wsf, const NvGd& a, int nt,
                                            int vec) {
  constexpr int C = NV_GDC_C, KS = DK + 8, VS = DV + 8, CS = NV_GDC_CS, PS = NV_GDC_PS;
  typedef NvGdcWs<DK, DV> Ws;
  extern __shared__ __align__(16) unsigned char nv_gdc_smem[];
  T* ks = reinterpret_cast<T*>(nv_gdc_smem);  // [C][KS]
  T* qs = ks + C * KS;                         // [C][KS], later T diag(beta G) [C][PS]
  T* vs = qs + C * KS;                         // [C][VS]
  float* dm = reinterpret_cast<float*>(vs + C * VS);  // D [C][CS], later T (float)
  float* am = dm + C * CS;                     // A [C][CS], later T diag(beta) [C][PS] in T
  float* gs = am + C * CS;                     // g [C]
  float* bs = gs + C;                          // beta [C]
  float* gam = bs + C;                         // G [C]
  float* dec = gam + C;                        // D[C][.] [C]

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int gr = lane >> 2, t4 = lane & 3;
  const i64 n = blockIdx.x % nt, bh = blockIdx.x / nt;
  const i64 h = bh % a.hv, b = bh / a.hv;
  const i64 hk = h / a.group;
  const i64 t0 = n * C;
  const int qt = a.types & 3, kt = (a.types >> 2) & 3, vt = (a.types >> 4) & 3;
  const int gt = (a.types >> 6) & 3, bt = (a.types >> 8) & 3;

  // The chunk's inputs, rounded to T; steps past the end padded (see the top of the file).
  // Every load of a thread is issued before the first is waited on: 16-byte copies straight
  // into shared memory where the input is T, contiguous along the feature and aligned
  // (`vec`), else eight elements at a time into registers.
  const int valid = a.steps - t0 < C ? (int)(a.steps - t0) : C;
  nv_gdc_stage<T, DK>(ks, KS, k, kt, b * a.k[0] + t0 * a.k[1] + hk * a.k[2], a.k[1], a.k[3],
                      valid, vec & 2);
  nv_gdc_stage<T, DK>(qs, KS, q, qt, b * a.q[0] + t0 * a.q[1] + hk * a.q[2], a.q[1], a.q[3],
                      valid, vec & 1);
  nv_gdc_stage<T, DV>(vs, VS, v, vt, b * a.v[0] + t0 * a.v[1] + h * a.v[2], a.v[1], a.v[3],
                      valid, vec & 4);
  nv_cp_commit();
  if (tid < C) {
    const i64 t = t0 + tid;
    const bool in = t < a.steps;
    gs[tid] = in ? nv_gd_load(g, gt, b * a.g[0] + t * a.g[1] + h * a.g[2]) : 1.0f;
    bs[tid] = in ? nv_gd_load(beta, bt, b * a.beta[0] + t * a.beta[1] + h * a.beta[2]) : 0.0f;
  }
  nv_cp_wait<0>();
  __syncthreads();

  // D, row by row from the diagonal, and G; D's last row once more as `dec`.
  if (tid < C) {
    float p = 1.0f;
    for (int j = tid; j >= 0; --j) {
      dm[tid * CS + j] = p;
      p *= gs[j];
    }
    for (int j = tid + 1; j < C; ++j) dm[tid * CS + j] = 0.0f;
    gam[tid] = p;
  } else if (tid == C) {
    float p = 1.0f;
    for (int j = C - 1; j >= 0; --j) {
      dec[j] = p;
      p *= gs[j];
    }
  }
  __syncthreads();

  // K K^T and Q K^T for this warp's 16 rows, all 64 columns.
  const int row0 = warp * 16;
  {
    // K K^T and Q K^T, this warp's 16 rows.
    float prod[2][C / 8][4];
#pragma unroll
    for (int j = 0; j < C / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) prod[0][j][e] = prod[1][j][e] = 0.0f;
    const T* const rows[2] = {ks + row0 * KS, qs + row0 * KS};
    nv_gdc_mul_bt<T, DK, C, 2>(prod, rows, KS, ks, KS, lane);
    const auto& kk = prod[0];
    const auto& qk = prod[1];
    // A (strictly lower) into shared memory; P (lower with the diagonal) to the workspace.
    T* pw = wsh + (bh * nt + n) * Ws::HALF + Ws::P;
#pragma unroll
    for (int j = 0; j < C / 8; ++j) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = row0 + gr + half * 8, c = j * 8 + 2 * t4;
        float pv[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int cc = c + e;
          const float d = dm[r * CS + cc];  // 0 above the diagonal
          am[r * CS + cc] = r > cc ? bs[r] * d * kk[j][half * 2 + e] : 0.0f;
          pv[e] = d * qk[j][half * 2 + e];
        }
        nv_gdc_put2(pw + r * C + c, pv[0], pv[1]);
      }
    }
  }
  // Kd and Qg to the workspace (q and k as rounded to T, then scaled and rounded again).
  {
    T* kd = wsh + (bh * nt + n) * Ws::HALF + Ws::KD;
    T* qg = wsh + (bh * nt + n) * Ws::HALF + Ws::QG;
    for (int i = tid; i < C * DK / 2; i += NV_GDC_THREADS) {
      const int r = (2 * i) / DK, d = (2 * i) % DK;
      const float kd0 = nv_up(ks[r * KS + d]), kd1 = nv_up(ks[r * KS + d + 1]);
      const float q0 = nv_up(qs[r * KS + d]), q1 = nv_up(qs[r * KS + d + 1]);
      nv_gdc_put2(kd + r * DK + d, dec[r] * kd0, dec[r] * kd1);
      nv_gdc_put2(qg + r * DK + d, gam[r] * q0, gam[r] * q1);
    }
  }
  __syncthreads();  // A is whole; D and Q are no longer read

  // T = (I + A)^-1 into `dm`, in blocks of 16 (four a side). Warp w inverts diagonal block w
  // by forward substitution, lane c < 16 holding column c in registers; then row block
  // i = 1, 2, 3 in turn takes
  //   T[i][0..i) = -T[i][i] (A[i][0..i) T[0..i)[0..i)),
  // which reads only the row blocks above it. The critical path is 16 dependent rows and three
  // pairs of small products (one thread a column of all 64 rows made it 64 rows of up to 63
  // dependent terms, two thirds of this kernel's time).
  {
    constexpr int B = 16;
    for (int u = tid; u < C * C; u += NV_GDC_THREADS) {
      const int r = u / C, c = u % C;
      if (c >= (r / B + 1) * B) dm[r * CS + c] = 0.0f;
    }
    if (lane < B) {
      const int c = lane, d0 = warp * B;
      float t[B];
#pragma unroll
      for (int i = 0; i < B; ++i) t[i] = i == c ? 1.0f : 0.0f;
#pragma unroll
      for (int i = 1; i < B; ++i) {
        // Rows above c hold 0 and row c holds 1, so the sum needs no bound on c.
        const float* ar = am + (d0 + i) * CS + d0;
        float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
        for (int j = 0; j < i; j += 2) {
          s0 = __fmaf_rn(ar[j], t[j], s0);
          if (j + 1 < i) s1 = __fmaf_rn(ar[j + 1], t[j + 1], s1);
        }
        if (i > c) t[i] = -(s0 + s1);
      }
#pragma unroll
      for (int i = 0; i < B; ++i) dm[(d0 + i) * CS + d0 + c] = t[i];
    }
    __syncthreads();
    // Thread (r, g) = (tid / 8, tid % 8) makes row r of the row block, columns g + 8 e.
    const int r = tid >> 3, g8 = tid & 7;
#pragma unroll
    for (int i = 1; i < C / B; ++i) {
      float m[2 * (C / B - 1)];
#pragma unroll
      for (int e = 0; e < 2 * i; ++e) m[e] = 0.0f;
      const float* ar = am + (i * B + r) * CS;
      for (int k = 0; k < i * B; ++k) {
        const float x = ar[k];
        const float* tk = dm + k * CS + g8;
#pragma unroll
        for (int e = 0; e < 2 * i; ++e) m[e] = __fmaf_rn(x, tk[8 * e], m[e]);
      }
      __syncthreads();  // A's row block i is read: its place takes the product
#pragma unroll
      for (int e = 0; e < 2 * i; ++e) am[(i * B + r) * CS + g8 + 8 * e] = m[e];
      __syncthreads();
      const float* td = dm + (i * B + r) * CS + i * B;  // row r of T[i][i]
#pragma unroll
      for (int e = 0; e < 2 * i; ++e) m[e] = 0.0f;
#pragma unroll
      for (int k = 0; k < B; ++k) {
        const float x = td[k];
        const float* mk = am + (i * B + k) * CS + g8;
#pragma unroll
        for (int e = 0; e < 2 * i; ++e) m[e] = __fmaf_rn(x, mk[8 * e], m[e]);
      }
#pragma unroll
      for (int e = 0; e < 2 * i; ++e) dm[(i * B + r) * CS + g8 + 8 * e] = -m[e];
      __syncthreads();
    }
  }

  // T diag(beta G) over Q's tile, T diag(beta) over A's, both in T.
  T* tw = qs;
  T* tu = reinterpret_cast<T*>(am);
  for (int i = tid; i < C * C / 2; i += NV_GDC_THREADS) {
    const int r = (2 * i) / C, c = (2 * i) % C;
    const float x0 = dm[r * CS + c], x1 = dm[r * CS + c + 1];
    nv_gdc_put2(tw + r * PS + c, x0 * bs[c] * gam[c], x1 * bs[c + 1] * gam[c + 1]);
    nv_gdc_put2(tu + r * PS + c, x0 * bs[c], x1 * bs[c + 1]);
  }
  __syncthreads();

  // W = (T diag(beta G)) K and U = (T diag(beta)) V, this warp's 16 rows.
  {
    T* ww = wsh + (bh * nt + n) * Ws::HALF + Ws::W;
    float acc[DK / 8][4];
#pragma unroll
    for (int j = 0; j < DK / 8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
    nv_gdc_mul_b<T, C, DK>(acc, tw + row0 * PS, PS, ks, KS, lane);
#pragma unroll
    for (int j = 0; j < DK / 8; ++j) {
      const int r = row0 + gr, c = j * 8 + 2 * t4;
      nv_gdc_put2(ww + r * DK + c, acc[j][0], acc[j][1]);
      nv_gdc_put2(ww + (r + 8) * DK + c, acc[j][2], acc[j][3]);
    }
  }
  {
    float* uw = wsf + (bh * nt + n) * Ws::FLOAT;
    float acc[DV / 8][4];
#pragma unroll
    for (int j = 0; j < DV / 8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
    nv_gdc_mul_b<T, C, DV>(acc, tu + row0 * PS, PS, vs, VS, lane);
#pragma unroll
    for (int j = 0; j < DV / 8; ++j) {
      const int r = row0 + gr, c = j * 8 + 2 * t4;
      *reinterpret_cast<float2*>(uw + r * DV + c) = make_float2(acc[j][0], acc[j][1]);
      *reinterpret_cast<float2*>(uw + (r + 8) * DV + c) = make_float2(acc[j][2], acc[j][3]);
    }
    if (tid == 0) uw[C * DV] = gam[C - 1];
  }
}

// Shared memory of kernel 1 (bytes).
template <typename T, int DK, int DV> struct NvGdcPrepShape {
  static constexpr int SHARED = (2 * NV_GDC_C * (DK + 8) + NV_GDC_C * (DV + 8)) * 2 +
                                (2 * NV_GDC_C * NV_GDC_CS + 4 * NV_GDC_C) * 4;
};

// `rows` rows of `chunks` 16-byte pieces from global (row stride `gs` bytes) to shared (row
// stride `ss` bytes), by all the block's threads.
__device__ __forceinline__ void nv_gdc_copy(void* s, int ss, const void* gp, i64 gsb, int rows,
                                            int chunks) {
  for (int u = threadIdx.x; u < rows * chunks; u += NV_GDC_THREADS) {
    const int r = u / chunks, c = u % chunks;
    nv_cp16(static_cast<char*>(s) + r * ss + c * 16,
            static_cast<const char*>(gp) + r * gsb + c * 16, true);
  }
}

// Kernel 2: rows r0 .. r0 + 32 of head bh's state through the chunks (see the top).
template <typename T, typename S, int DK, int DV>
__device__ __forceinline__ void nv_gdc_state(const S* __restrict__ state, S* __restrict__ out,
                                             T* __restrict__ y, const T* __restrict__ wsh,
                                             const float* __restrict__ wsf, const NvGd& a,
                                             int nt) {
  constexpr int C = NV_GDC_C, RV = NV_GDC_RV, KS = DK + 8, PS = NV_GDC_PS;
  constexpr int US = RV + 4;   // float row stride of U's slice (16-byte rows, fewer conflicts)
  constexpr int VS = RV + 8;   // T row stride of V'
  constexpr int NTW = DK / 32; // the state's column tiles of 8 a warp
  constexpr int SLICES = DV / RV;
  typedef NvGdcWs<DK, DV> Ws;
  // One stage: W, Kd, Qg [C][KS], P [C][PS] (T); U's slice [C][US] and G_C (16 bytes) (float).
  constexpr int STAGE_H = 3 * C * KS + C * PS;
  constexpr int STAGE_F = C * US + 4;
  extern __shared__ __align__(16) unsigned char nv_gdc_smem[];
  T* hbuf = reinterpret_cast<T*>(nv_gdc_smem);            // [2][STAGE_H]
  float* fbuf = reinterpret_cast<float*>(hbuf + 2 * STAGE_H);  // [2][STAGE_F]
  T* ss = reinterpret_cast<T*>(fbuf + 2 * STAGE_F);       // the state in T [RV][KS]
  T* vsm = ss + RV * KS;                                   // V' in T [C][VS]

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int gr = lane >> 2, t4 = lane & 3;
  const i64 slice = blockIdx.x % SLICES, bh = blockIdx.x / SLICES;
  const i64 h = bh % a.hv, b = bh / a.hv;
  const i64 r0 = slice * RV;
  const int row0 = warp * 16;  // this warp's steps in the chunk products
  const int col0 = warp * (DK / 4);  // this warp's state columns

  auto load = [&](int n, int stage) {
    const T* src = wsh + (bh * nt + n) * Ws::HALF;
    T* dst = hbuf + stage * STAGE_H;
    // W, Kd and Qg: three [C][DK] blocks one after the other, as 3C rows.
    nv_gdc_copy(dst, KS * 2, src, DK * 2, 3 * C, DK / 8);
    nv_gdc_copy(dst + 3 * C * KS, PS * 2, src + Ws::P, C * 2, C, C / 8);
    const float* fs = wsf + (bh * nt + n) * Ws::FLOAT;
    float* fd = fbuf + stage * STAGE_F;
    nv_gdc_copy(fd, US * 4, fs + r0, DV * 4, C, RV / 4);
    nv_gdc_copy(fd + C * US, 16, fs + C * DV, 16, 1, 1);
  };
  load(0, 0);
  nv_cp_commit();

  // The state's rows, as accumulators: m-tile mi (rows 16 mi ..), column tile j.
  float st[2][NTW][4];
  const i64 base = (b * a.hv + h) * a.dv + r0;
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int j = 0; j < NTW; ++j)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = mi * 16 + gr + half * 8, c = col0 + j * 8 + 2 * t4;
        const S* p = state + (base + r) * DK + c;
        st[mi][j][half * 2] = (float)nv_up(p[0]);
        st[mi][j][half * 2 + 1] = (float)nv_up(p[1]);
        nv_gdc_put2(ss + r * KS + c, st[mi][j][half * 2], st[mi][j][half * 2 + 1]);
      }

  for (int n = 0; n < nt; ++n) {
    const int stage = n & 1;
    if (n + 1 < nt) {
      load(n + 1, stage ^ 1);
      nv_cp_commit();
      nv_cp_wait<1>();
    } else {
      nv_cp_wait<0>();
    }
    __syncthreads();
    const T* ws = hbuf + stage * STAGE_H;
    const T* kds = ws + C * KS;
    const T* qgs = ws + 2 * C * KS;
    const T* ps = ws + 3 * C * KS;
    const float* us = fbuf + stage * STAGE_F;
    const float total = us[C * US];

    // W S^T and Qg S^T: this warp's 16 steps, the block's 32 rows.
    float prod[2][RV / 8][4];
#pragma unroll
    for (int j = 0; j < RV / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) prod[0][j][e] = prod[1][j][e] = 0.0f;
    const T* const rows[2] = {ws + row0 * KS, qgs + row0 * KS};
    nv_gdc_mul_bt<T, DK, RV, 2>(prod, rows, KS, ss, KS, lane);
    auto& vacc = prod[0];
    auto& yacc = prod[1];
    // V' = U - W S^T, rounded to T into shared memory.
#pragma unroll
    for (int j = 0; j < RV / 8; ++j)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = row0 + gr + half * 8, c = j * 8 + 2 * t4;
        const float2 u = *reinterpret_cast<const float2*>(us + r * US + c);
        nv_gdc_put2(vsm + r * VS + c, u.x - vacc[j][half * 2], u.y - vacc[j][half * 2 + 1]);
      }
    __syncthreads();  // V' whole; S in T no longer read this chunk

    // Y = Qg S^T + P V', written for the steps inside the sequence.
    nv_gdc_mul_b<T, C, RV>(yacc, ps + row0 * PS, PS, vsm, VS, lane);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const i64 t = (i64)n * C + row0 + gr + half * 8;
      if (t < a.steps) {
        T* yr = y + ((b * a.steps + t) * a.hv + h) * a.dv + r0;
#pragma unroll
        for (int j = 0; j < RV / 8; ++j)
          nv_gdc_put2(yr + j * 8 + 2 * t4, yacc[j][half * 2], yacc[j][half * 2 + 1]);
      }
    }

    // S = G_C S + V'^T Kd: rows (m) are the state's, k runs over the chunk's steps.
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int j = 0; j < NTW; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) st[mi][j][e] *= total;
    nv_gdc_mul_at_b<T, C, 2, 8 * NTW>(st, vsm, VS, kds + col0, KS, lane);
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int j = 0; j < NTW; ++j)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int r = mi * 16 + gr + half * 8, c = col0 + j * 8 + 2 * t4;
          nv_gdc_put2(ss + r * KS + c, st[mi][j][half * 2], st[mi][j][half * 2 + 1]);
        }
    __syncthreads();  // this stage, V' and the new S in T are done with / written
  }

#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int j = 0; j < NTW; ++j)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = mi * 16 + gr + half * 8, c = col0 + j * 8 + 2 * t4;
        S* p = out + (base + r) * DK + c;
        p[0] = nv_down<S>(st[mi][j][half * 2]);
        p[1] = nv_down<S>(st[mi][j][half * 2 + 1]);
      }
}

// Shared memory of kernel 2 (bytes).
template <typename T, int DK> struct NvGdcStateShape {
  static constexpr int SHARED =
      (2 * (3 * NV_GDC_C * (DK + 8) + NV_GDC_C * NV_GDC_PS) + NV_GDC_RV * (DK + 8) +
       NV_GDC_C * (NV_GDC_RV + 8)) * 2 +
      2 * (NV_GDC_C * (NV_GDC_RV + 4) + 4) * 4;
};

// `gdc_prep_<T>_<DK>_<DV>` and `gdc_state_<T>_<S>_<DK>_<DV>`: T the mma type (q's), S the
// state's. Grids: kernel 1 one block per (head, chunk), chunks fastest; kernel 2 one per
// (head, 32 state rows), rows fastest.
#define NV_GDC_PREP(T, TN, DK, DV)                                                            \
  extern "C" __global__ void __launch_bounds__(NV_GDC_THREADS) gdc_prep_##TN##_##DK##_##DV(  \
      const void* q, const void* k, const void* v, const void* g, const void* beta, T* wsh,    \
      float* wsf, NvGd a, int nt, int vec) {                                                  \
    nv_gdc_prep<T, DK, DV>(q, k, v, g, beta, wsh, wsf, a, nt, vec);                           \
  }
#define NV_GDC_STATE(T, TN, S, SN, DK, DV)                                                    \
  extern "C" __global__ void __launch_bounds__(NV_GDC_THREADS)                               \
      gdc_state_##TN##_##SN##_##DK##_##DV(const S* state, S* out, T* y, const T* wsh,         \
                                          const float* wsf, NvGd a, int nt) {                 \
    nv_gdc_state<T, S, DK, DV>(state, out, y, wsh, wsf, a, nt);                               \
  }
