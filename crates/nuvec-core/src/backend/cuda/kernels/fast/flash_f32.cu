// Tiled attention over many query rows in float32, on the FMA units; `flash.cu` (included
// before this file) holds the arguments (`NvFlash`), the mask conventions and the constants.
//
// One block of four warps takes 16 query rows of one (batch, query head), four a warp; the
// queries sit in shared memory. Tiles of 32 keys and their values go through shared memory,
// the keys with an odd row stride so that lane j reading key j's feature d hits bank
// (j + d) mod 32. Per tile each lane forms the scores of its key against the warp's four
// rows (the queries' features broadcast, four at a time), scales and masks them exactly as the tensor-core
// kernels do, updates each row's running maximum (a butterfly over the warp) and its own
// share of the running sum, and adds the weights times the values into an accumulator that
// holds features lane, lane + 32, ... of the four rows (the weights passed round by
// shuffles). Everything stays in float32 (exp2f, not the approximation the half types use);
// the output is divided by the row's sum once, at the end.

#define NV_F32_ROWS 16    // query rows a block
#define NV_F32_KEYS 32    // keys a tile: one a lane
#define NV_F32_THREADS 128

// Shared memory of a block (bytes): queries [16][D], keys [32][KS], values [32][DV].
template <int D, int DV> struct NvFlashF32Shape {
  static constexpr int KS = D | 1;  // odd: distinct banks for the lanes' keys
  static constexpr int SHARED = (NV_F32_ROWS * D + NV_F32_KEYS * KS + NV_F32_KEYS * DV) * 4;
};

// `rows` rows of `n` floats (row i at g + i * gs; rows from `valid` on are zeros) into shared
// memory with row stride `ss`.
__device__ __forceinline__ void nv_f32_tile(float* s, int ss, const float* __restrict__ g, i64 gs,
                                            int rows, int valid, int n) {
  for (int u = threadIdx.x; u < rows * n; u += NV_F32_THREADS) {
    const int r = u / n, c = u % n;
    s[r * ss + c] = r < valid ? g[r * gs + c] : 0.0f;
  }
}

// MASK: 0 none, 1 boolean (u8, true keeps), 2 additive (float).
template <int D, int DV, int MASK, bool CAUSAL, bool SINKS>
__device__ void nv_flash_f32(const float* __restrict__ q, const float* __restrict__ k,
                             const float* __restrict__ v, const void* __restrict__ mask,
                             const float* __restrict__ sinks, float* __restrict__ out,
                             const NvFlash a) {
  static_assert(D % 4 == 0, "queries are read four features at a time");
  typedef NvFlashF32Shape<D, DV> S;
  constexpr int BM = NV_F32_ROWS, BN = NV_F32_KEYS, KS = S::KS;
  constexpr int U = (DV + 31) / 32;  // output features a lane holds per row
  extern __shared__ __align__(16) float nv_f32_smem[];
  float* qs = nv_f32_smem;       // [BM][D]
  float* ks = qs + BM * D;       // [BN][KS]
  float* vs = ks + BN * KS;      // [BN][DV]

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const NvFlashBlock blk = nv_flash_block<CAUSAL, BN, BM>(a, (D + DV) * 4);
  const i64 h = blk.h, b = blk.b, kvh = blk.kvh;
  const int m0 = blk.m0, ntiles = blk.ntiles;
  const int off = a.lk - a.lq;  // causal: row i sees keys 0..=i + off
  const float* qg = q + a.q_offset + b * a.q_strides[0] + h * a.q_strides[1] + (i64)m0 * a.q_strides[2];
  const float* kg = k + a.k_offset + b * a.k_strides[0] + kvh * a.k_strides[1];
  const float* vg = v + a.v_offset + b * a.v_strides[0] + kvh * a.v_strides[1];
  nv_f32_tile(qs, D, qg, a.q_strides[2], BM, a.lq - m0, D);

  const char* mbase = nullptr;
  if (MASK) {
    mbase = reinterpret_cast<const char*>(mask) +
            (a.m_offset + b * a.m_strides[0] + h * a.m_strides[1]) * (MASK == 1 ? 1 : sizeof(float));
  }
  float sink2 = NV_FLASH_NEG_INF;
  if (SINKS) sink2 = sinks[a.s_offset + h * a.s_stride] * NV_FLASH_LOG2E;
  float m_run[4], l_run[4], o[4][U];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    m_run[i] = sink2;
    l_run[i] = 0.0f;  // this lane's share
#pragma unroll
    for (int u = 0; u < U; ++u) o[i][u] = 0.0f;
  }

  for (int t = 0; t < ntiles; ++t) {
    const int n0 = t * BN;
    __syncthreads();  // the previous tile is done with (and, at t = 0, nothing yet)
    nv_f32_tile(ks, KS, kg + (i64)n0 * a.k_strides[2], a.k_strides[2], BN, a.lk - n0, D);
    nv_f32_tile(vs, DV, vg + (i64)n0 * a.v_strides[2], a.v_strides[2], BN, a.lk - n0, DV);
    __syncthreads();

    // Scores of key n0 + lane against the warp's four rows.
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const float* kr = ks + lane * KS;
    const float* qr = qs + warp * 4 * D;
#pragma unroll 2
    for (int d = 0; d < D; d += 4) {
      float kv[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) kv[e] = kr[d + e];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float4 qv = *reinterpret_cast<const float4*>(qr + i * D + d);
        s[i] = fmaf(qv.x, kv[0], s[i]);
        s[i] = fmaf(qv.y, kv[1], s[i]);
        s[i] = fmaf(qv.z, kv[2], s[i]);
        s[i] = fmaf(qv.w, kv[3], s[i]);
      }
    }
    const int c = n0 + lane;
    const bool edge = n0 + BN > a.lk || (CAUSAL && n0 + BN - 1 > m0 + off);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = m0 + warp * 4 + i;
      float x = s[i] * a.scale;
      if (MASK && r < a.lq && c < a.lk) {
        const i64 at = (i64)r * a.m_strides[2] + (i64)c * a.m_strides[3];
        if (MASK == 1) {
          x = mbase[at] ? x : NV_FLASH_HIDDEN;
        } else {
          x += reinterpret_cast<const float*>(mbase)[at] * NV_FLASH_LOG2E;
        }
      }
      if (edge && (c >= a.lk || (CAUSAL && c > r + off))) x = NV_FLASH_NEG_INF;
      float mx = x;
#pragma unroll
      for (int m = 16; m >= 1; m >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, m));
      const float m_new = fmaxf(m_run[i], mx);
      // A row that has seen only −∞ so far keeps weights of 0 (not NaN).
      const float m_use = m_new == NV_FLASH_NEG_INF ? 0.0f : m_new;
      const float alpha = exp2f(m_run[i] - m_use);
      m_run[i] = m_new;
      s[i] = exp2f(x - m_use);
      l_run[i] = l_run[i] * alpha + s[i];
#pragma unroll
      for (int u = 0; u < U; ++u) o[i][u] *= alpha;
    }
    // Output += weights · values: key j's weights come from lane j.
#pragma unroll 4
    for (int j = 0; j < BN; ++j) {
      float w[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) w[i] = __shfl_sync(0xffffffffu, s[i], j);
      const float* vr = vs + j * DV;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int f = lane + 32 * u;
        const float vv = f < DV ? vr[f] : 0.0f;
#pragma unroll
        for (int i = 0; i < 4; ++i) o[i][u] = fmaf(w[i], vv, o[i][u]);
      }
    }
  }

  float* ob = out + ((b * a.hq + h) * a.lq) * (i64)DV;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float l = l_run[i];
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) l += __shfl_xor_sync(0xffffffffu, l, m);
    if (SINKS) l += exp2f(sink2 - (m_run[i] == NV_FLASH_NEG_INF ? 0.0f : m_run[i]));
    const float inv = 1.0f / l;
    const int r = m0 + warp * 4 + i;
    if (r >= a.lq) continue;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int f = lane + 32 * u;
      if (f < DV) ob[(i64)r * DV + f] = o[i][u] * inv;
    }
  }
}

// One kernel: head sizes, mask kind, causal, sinks.
#define NV_FLASH_F32(D, DV, MASK, CAUSAL, SINKS)                                              \
  extern "C" __global__ void __launch_bounds__(NV_F32_THREADS, 4)                             \
      flashf32_f32_##D##_##DV##_m##MASK##_c##CAUSAL##_s##SINKS(                               \
          const float* q, const float* k, const float* v, const void* mask, const float* sinks,\
          float* out, NvFlash a) {                                                            \
    nv_flash_f32<D, DV, MASK, (bool)CAUSAL, (bool)SINKS>(q, k, v, mask, sinks, out, a);       \
  }
