// Tiled attention over many query rows (prefill) on the tensor cores; `flash.rs` says which
// cases come here. Needs common.cuh.
//
// One block of NV_FLASH_WARPS warps takes BM = 16 · warps query rows of one (batch, query
// head); each warp owns 16 of them. Key and value tiles of BN rows go through shared memory
// (cp.async, two stages, so the next tile loads while this one computes); per tile a warp
// forms its 16 × BN scores with mma.sync (m16n8k16, f32 accumulation), scales and masks them,
// updates the running maximum and sum of each row (online softmax, base 2), and adds the
// weights (rounded to T, as the tensor cores take them) times the values into an f32
// accumulator held in registers. The scores never leave the registers; the output is
// rounded once, at the end.
//
// Head sizes are padded to a multiple of 16 (72 → 80) with zeros in shared memory. Rows of
// shared memory are padded by 16 bytes so that the eight rows one ldmatrix reads fall in
// distinct banks.

#ifndef NV_FLASH_WARPS
#define NV_FLASH_WARPS 4
#endif
#define NV_FLASH_THREADS (NV_FLASH_WARPS * 32)
#define NV_FLASH_NEG_INF __int_as_float(0xff800000)
// What a boolean mask puts over a hidden score (base 2): finite, so that a row hiding every
// key averages all of them, as the composition does with the type's lowest value.
#define NV_FLASH_HIDDEN (-3.402823466e38f)
#define NV_FLASH_LOG2E 1.4426950408889634f
// 1 when the host has checked that the scale is positive and finite: with no mask, the row's
// maximum is then taken over the unscaled scores (scaling by a positive number and rounding
// both keep the order, so the scaled maximum is the same number) and the scale goes into the
// exponential's subtraction as one fused multiply-add, one instruction a score fewer.
#ifndef NV_FLASH_FOLD
#define NV_FLASH_FOLD 0
#endif

// Mirrors `FlashArgs` in `flash.rs` (repr(C)): all 64-bit fields first.
struct NvFlash {
  i64 q_strides[3];  // batch, head, row (elements); features contiguous
  i64 q_offset;
  i64 k_strides[3];
  i64 k_offset;
  i64 v_strides[3];
  i64 v_offset;
  i64 m_strides[4];  // the mask: batch, query head, query row, key (0 where broadcast)
  i64 m_offset;
  i64 s_stride;      // the sinks, one per query head
  i64 s_offset;
  i32 hq;
  i32 group;         // query heads per key head
  i32 lq;
  i32 lk;
  float scale;       // the score scale times log2(e)
  i32 batch;
  i32 items;         // blocks of work (tiles of query rows × heads × batch)
};

// nuvec-emulation: device only (tests/emulation/ptx.h stands in for this region) {
template <typename T> struct NvMma;
template <> struct NvMma<bf16> {
  static __device__ __forceinline__ void run(float* c, const u32* a, u32 b0, u32 b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ u32 pack(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<u32*>(&h);
  }
};
template <> struct NvMma<f16> {
  static __device__ __forceinline__ void run(float* c, const u32* a, u32 b0, u32 b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ u32 pack(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<u32*>(&h);
  }
};

__device__ __forceinline__ u32 nv_smem(const void* p) {
  return (u32)__cvta_generic_to_shared(p);
}

// 16 bytes from global to shared memory, or 16 zero bytes when !valid (nothing is read).
__device__ __forceinline__ void nv_cp16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(nv_smem(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void nv_cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void nv_cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void nv_ldsm4(u32* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(nv_smem(p)));
}
__device__ __forceinline__ void nv_ldsm4_t(u32* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(nv_smem(p)));
}

__device__ __forceinline__ float nv_flash_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// The larger of x and lo, NaN when x is.
__device__ __forceinline__ float nv_flash_max_nan(float x, float lo) {
  float y;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(x), "f"(lo));
  return y;
}
// } nuvec-emulation

// Every NV_FLASH_POLY-th tile of 8 scores (0: none) takes its exponentials on the FMA pipes
// (nv_flash_exp2_poly) rather than the special-function unit, which at 16 results a clock a
// multiprocessor takes as long over a tile of head size 64 as the tile's products do.
#ifndef NV_FLASH_POLY
#define NV_FLASH_POLY 0
#endif

// 2^x for x at most about 0 (a weight): x = j + f with j an integer and |f| <= 1/2, 2^f by a
// cubic (relative error 7.5e-5, against bf16's 2^-9 rounding of the weights), and 2^j built in
// the exponent bits. Below -127 the weight is 0; NaN stays NaN.
__device__ __forceinline__ float nv_flash_exp2_poly(float x) {
  const float round = 12582912.0f;  // 1.5 · 2^23: x + round holds j in its low mantissa bits
  x = nv_flash_max_nan(x, -127.0f);
  const float t = x + round;
  const float f = x - (t - round);
  const float p = fmaf(fmaf(fmaf(0.05517168f, f, 0.24261117f), f, 0.69326097f), f, 0.99992806f);
  // (j + 127) << 23: the low bits of t's pattern are j + 2^22, whose high bit the shift drops.
  return p * __uint_as_float((__float_as_uint(t) << 23) + 0x3f800000u);
}

// The tile shapes of head sizes (D for the keys, DV for the values); `tile` in `flash.rs`
// mirrors them to size the dynamic shared memory (queries, two stages of keys and values).
template <int D, int DV> struct NvFlashShape {
  static constexpr int DP = (D + 15) / 16 * 16;    // padded key head
  static constexpr int DVP = (DV + 15) / 16 * 16;  // padded value head
  static constexpr int BM = 16 * NV_FLASH_WARPS;
  static constexpr int BN = (DP > 128 || DVP > 128) ? 32 : 64;
  static constexpr int QS = DP + 8;   // shared row strides (elements)
  static constexpr int VS = DVP + 8;
  // Q fragments stay in registers for the whole block up to head size 128.
  static constexpr bool QREG = DP <= 128;
};

// Rows [0, rows) of a tile of `n` rows × `d` elements (the rest of the padded row, and the
// rows past `valid`, zeros) into shared memory of row stride `ss`.
template <typename T, int ROWS, int DPAD>
__device__ __forceinline__ void nv_flash_tile(T* s, int ss, const T* g, i64 gs, int valid, int d) {
  constexpr int CH = DPAD / 8;  // 16-byte chunks a padded row
  const int dch = d / 8;
  for (int u = threadIdx.x; u < ROWS * CH; u += NV_FLASH_THREADS) {
    const int r = u / CH, c = u % CH;
    const bool ok = r < valid && c < dch;
    nv_cp16(s + r * ss + c * 8, ok ? (const void*)(g + r * gs + c * 8) : (const void*)g, ok);
  }
}

// The block's place, shared by every prefill kernel: (batch, query head, its key head, first
// query row, key tiles to visit) from blockIdx, BM query rows a block, BN keys a tile.
struct NvFlashBlock {
  i64 b, h, kvh;
  int m0, ntiles;
};
// Tunable: the order causal blocks start in. 0: each head's blocks together, the most keys
// first. 1 (FlashAttention-3's): the heads in groups whose keys and values fit in
// NV_H_L2_BYTES of L2, and within a group the blocks with the most keys first over all its
// heads, so each wave takes the heaviest blocks left while its heads' keys stay in L2.
#ifndef NV_H_ORDER
#define NV_H_ORDER 0
#endif
#ifndef NV_H_L2_BYTES
#define NV_H_L2_BYTES (24 << 20)
#endif

// Work item `lin` of a grid of mtiles × hq × batch blocks (query-row tiles fastest, then
// query heads): the block's own place (blockIdx, gridDim) or one a persistent block takes.
// `row_bytes`: the bytes of one key row and one value row (for NV_H_ORDER).
template <bool CAUSAL, int BN, int BM>
__device__ __forceinline__ NvFlashBlock nv_flash_item(const NvFlash& a, int row_bytes, i64 lin,
                                                      int mtiles) {
  NvFlashBlock k;
  const i64 heads_lin = lin / mtiles;
  const int x = (int)(lin - heads_lin * mtiles);
  // Causal blocks with the most keys go first.
  int mt = CAUSAL ? mtiles - 1 - x : x;
  k.h = heads_lin % a.hq;
  k.b = heads_lin / a.hq;
  if (CAUSAL && NV_H_ORDER) {
    // Blocks start in launch order (x fastest): rank them (group, key tiles, head).
    const i64 heads = (i64)a.hq * a.batch;  // (batch, query head), heads fastest
    const i64 kv = (i64)a.lk * row_bytes;
    i64 g = (i64)NV_H_L2_BYTES / (kv > 0 ? kv : 1);
    g = (g > 1 ? g : 1) * a.group;
    g = g < heads ? g : heads;
    const i64 gi = lin / (g * mtiles), first = gi * g;
    const i64 size = heads - first < g ? heads - first : g;
    const i64 r = lin - first * mtiles;
    const i64 head = first + r % size;
    mt = mtiles - 1 - (int)(r / size);
    k.h = head % a.hq;
    k.b = head / a.hq;
  }
  k.kvh = k.h / a.group;
  k.m0 = mt * BM;
  int kend = a.lk;
  if (CAUSAL) {
    // Row i sees keys 0..=i + lk − lq.
    const int last = (k.m0 + BM < a.lq ? k.m0 + BM : a.lq) - 1;
    const int see = last + (a.lk - a.lq) + 1;
    kend = see < a.lk ? see : a.lk;
  }
  k.ntiles = (kend + BN - 1) / BN;
  return k;
}

// The place of this block of a grid of (query-row tiles, query heads, batch).
template <bool CAUSAL, int BN, int BM>
__device__ __forceinline__ NvFlashBlock nv_flash_block(const NvFlash& a, int row_bytes) {
  const i64 lin = blockIdx.x + (i64)gridDim.x * (blockIdx.y + (i64)gridDim.y * blockIdx.z);
  return nv_flash_item<CAUSAL, BN, BM>(a, row_bytes, lin, (int)gridDim.x);
}

// The online softmax (base 2) of the two query rows a lane holds in the tensor cores'
// accumulator layout (mma.sync's, and each warp's part of wgmma's): rows r0 and r0 + 8, tile j
// of 8 keys at s[4j ..]: (r0, 2 t4), (r0, 2 t4 + 1), (r1, 2 t4), (r1, 2 t4 + 1), t4 = lane % 4.
// The four lanes of a row meet by shuffles. The arguments the steps read are copied by value:
// a reference to the kernel's parameter would make the compiler copy it to local memory.
template <typename T, int NT, int MASK, bool CAUSAL, bool SINKS>
struct NvFlashRows {
  float m_run[2], l_run[2], alpha[2];
  float sink2;
  int r0, r1, t4, m0, off, lq, lk;
  float scale;
  i64 mrow, mcol;
  const char* mbase;

  // Rows r0_ and r0_ + 8 of (b, h), in a block whose first row is m0_.
  __device__ __forceinline__ void init(const NvFlash& a, const void* mask, const T* sinks, i64 b,
                                       i64 h, int m0_, int r0_) {
    lq = a.lq;
    lk = a.lk;
    scale = a.scale;
    mrow = a.m_strides[2];
    mcol = a.m_strides[3];
    t4 = threadIdx.x & 3;
    m0 = m0_;
    off = a.lk - a.lq;  // causal: row i sees keys 0..=i + off
    r0 = r0_;
    r1 = r0_ + 8;
    sink2 = NV_FLASH_NEG_INF;
    if (SINKS) sink2 = nv_up(sinks[a.s_offset + h * a.s_stride]) * NV_FLASH_LOG2E;
    m_run[0] = m_run[1] = sink2;
    l_run[0] = l_run[1] = 0.0f;
    mbase = nullptr;
    if (MASK) {
      mbase = reinterpret_cast<const char*>(mask) +
              (a.m_offset + b * a.m_strides[0] + h * a.m_strides[1]) * (MASK == 1 ? 1 : sizeof(T));
    }
  }

  // Scales and masks the scores in s of the tile from key n0, updates the running statistics
  // (alpha: the factor the output takes) and leaves the weights, in f32, in s.
  __device__ __forceinline__ void exponentials(float* s, int n0) {
    const int bn = NT * 8;
    // Without a mask, only a tile that crosses the keys' end or the causal diagonal (one or
    // two of a row of blocks) tests each score's position; the compiler would otherwise keep
    // those tests, predicated, in every tile's code: 2.5 instructions a score. (With a mask,
    // whose loads take more, a second copy of the code costs the Hopper kernels registers.)
    if (MASK != 0 || n0 + bn > lk || (CAUSAL && n0 + bn - 1 > m0 + off)) {
      exponentials_of<true>(s, n0);
    } else {
      exponentials_of<false>(s, n0);
    }
  }

  template <bool EDGE> __device__ __forceinline__ void exponentials_of(float* s, int n0) {
    constexpr bool FOLD = NV_FLASH_FOLD && MASK == 0;
    // Each row's maximum in CH independent chains (one chain is NT · 2 dependent steps, whose
    // latency the few warps of a multiprocessor do not hide), joined after; with a mask, whose
    // loads hide it, in one (the Hopper kernels have no registers to spare there).
    constexpr int CH = MASK == 0 && NT >= 4 ? 4 : 1;
    float mc[2][CH];
#pragma unroll
    for (int i = 0; i < CH; ++i) mc[0][i] = mc[1][i] = NV_FLASH_NEG_INF;
#pragma unroll
    for (int j = 0; j < NT; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e < 2 ? r0 : r1;
        const int c = n0 + j * 8 + 2 * t4 + (e & 1);
        float x = FOLD ? s[j * 4 + e] : s[j * 4 + e] * scale;
        if (MASK && r < lq && (!EDGE || c < lk)) {
          const i64 at = (i64)r * mrow + (i64)c * mcol;
          if (MASK == 1) {
            x = mbase[at] ? x : NV_FLASH_HIDDEN;
          } else {
            x += nv_up(reinterpret_cast<const T*>(mbase)[at]) * NV_FLASH_LOG2E;
          }
        }
        if (EDGE && (c >= lk || (CAUSAL && c > r + off))) x = NV_FLASH_NEG_INF;
        s[j * 4 + e] = x;
        mc[e >> 1][j % CH] = fmaxf(mc[e >> 1][j % CH], x);
      }
    }
    float mx[2], m_use[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      mx[i] = mc[i][0];
#pragma unroll
      for (int c = 1; c < CH; ++c) mx[i] = fmaxf(mx[i], mc[i][c]);
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
      mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
      if (FOLD) mx[i] *= scale;
      const float m_new = fmaxf(m_run[i], mx[i]);
      // A row that has seen only −∞ so far keeps weights of 0 (not NaN).
      m_use[i] = m_new == NV_FLASH_NEG_INF ? 0.0f : m_new;
      alpha[i] = nv_flash_exp2(m_run[i] - m_use[i]);
      m_run[i] = m_new;
      l_run[i] *= alpha[i];
    }
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      constexpr int EVERY = NV_FLASH_POLY > 0 ? NV_FLASH_POLY : 1;
      const bool poly = NV_FLASH_POLY > 0 && j % EVERY == EVERY - 1;
      // The weight of a score x in a row of maximum m.
      auto weight = [&](float x, float m) {
        const float d = FOLD ? fmaf(x, scale, -m) : x - m;
        return poly ? nv_flash_exp2_poly(d) : nv_flash_exp2(d);
      };
      const float p0 = weight(s[j * 4 + 0], m_use[0]);
      const float p1 = weight(s[j * 4 + 1], m_use[0]);
      const float p2 = weight(s[j * 4 + 2], m_use[1]);
      const float p3 = weight(s[j * 4 + 3], m_use[1]);
      l_run[0] += p0 + p1;
      l_run[1] += p2 + p3;
      s[j * 4 + 0] = p0;
      s[j * 4 + 1] = p1;
      s[j * 4 + 2] = p2;
      s[j * 4 + 3] = p3;
    }
  }

  // The weights in s, rounded to T and packed as the A fragments of the value product.
  __device__ __forceinline__ void pack(u32 (*p)[4], const float* s) const {
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      p[j >> 1][(j & 1) * 2 + 0] = NvMma<T>::pack(s[j * 4 + 0], s[j * 4 + 1]);
      p[j >> 1][(j & 1) * 2 + 1] = NvMma<T>::pack(s[j * 4 + 2], s[j * 4 + 3]);
    }
  }

  // The output accumulator (OT tiles of 8 features, o[4j ..] as s) times alpha.
  template <int OT> __device__ __forceinline__ void rescale(float* o) const {
#pragma unroll
    for (int j = 0; j < OT; ++j) {
      o[j * 4 + 0] *= alpha[0];
      o[j * 4 + 1] *= alpha[0];
      o[j * 4 + 2] *= alpha[1];
      o[j * 4 + 3] *= alpha[1];
    }
  }

  // The row sums over the four lanes of a row, the sink's weight, and the output rows of
  // (b, h): the DV features of OT tiles (padding tiles past DV are not written).
  template <int DV, int OT>
  __device__ __forceinline__ void store(const float* o, T* out, i64 b, i64 h, int hq) {
    float inv[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float l = l_run[i];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      if (SINKS) l += nv_flash_exp2(sink2 - (m_run[i] == NV_FLASH_NEG_INF ? 0.0f : m_run[i]));
      inv[i] = 1.0f / l;
    }
    T* ob = out + ((b * hq + h) * lq) * (i64)DV;
#pragma unroll
    for (int j = 0; j < OT; ++j) {
      const int c = j * 8 + 2 * t4;
      if (c >= DV) continue;
      if (r0 < lq)
        *reinterpret_cast<u32*>(ob + (i64)r0 * DV + c) =
            NvMma<T>::pack(o[j * 4 + 0] * inv[0], o[j * 4 + 1] * inv[0]);
      if (r1 < lq)
        *reinterpret_cast<u32*>(ob + (i64)r1 * DV + c) =
            NvMma<T>::pack(o[j * 4 + 2] * inv[1], o[j * 4 + 3] * inv[1]);
    }
  }
};

// MASK: 0 none, 1 boolean (u8, true keeps), 2 additive (T).
template <typename T, int D, int DV, int MASK, bool CAUSAL, bool SINKS>
__device__ void nv_flash(const T* __restrict__ q, const T* __restrict__ k,
                         const T* __restrict__ v, const void* __restrict__ mask,
                         const T* __restrict__ sinks, T* __restrict__ out, const NvFlash a) {
  typedef NvFlashShape<D, DV> S;
  constexpr int BM = S::BM, BN = S::BN, DP = S::DP, DVP = S::DVP, QS = S::QS, VS = S::VS;
  constexpr int KSTEPS = DP / 16;   // k-steps of the scores
  constexpr int NT = BN / 8;        // score tiles of 8 keys
  constexpr int OT = DVP / 8;       // output tiles of 8 features
  extern __shared__ __align__(16) unsigned char nv_flash_smem[];
  T* qs = reinterpret_cast<T*>(nv_flash_smem);
  T* ks = qs + BM * QS;            // two stages
  T* vs = ks + 2 * BN * QS;        // two stages

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const NvFlashBlock blk = nv_flash_block<CAUSAL, BN, BM>(a, (D + DV) * (int)sizeof(T));
  const i64 h = blk.h, b = blk.b, kvh = blk.kvh;
  const int m0 = blk.m0, ntiles = blk.ntiles;

  const T* qg = q + a.q_offset + b * a.q_strides[0] + h * a.q_strides[1] + (i64)m0 * a.q_strides[2];
  const T* kg = k + a.k_offset + b * a.k_strides[0] + kvh * a.k_strides[1];
  const T* vg = v + a.v_offset + b * a.v_strides[0] + kvh * a.v_strides[1];

  nv_flash_tile<T, BM, DP>(qs, QS, qg, a.q_strides[2], a.lq - m0, D);
  nv_flash_tile<T, BN, DP>(ks, QS, kg, a.k_strides[2], a.lk, D);
  nv_flash_tile<T, BN, DVP>(vs, VS, vg, a.v_strides[2], a.lk, DV);
  nv_cp_commit();

  // Rows lane / 4 and lane / 4 + 8 of this warp's 16.
  NvFlashRows<T, NT, MASK, CAUSAL, SINKS> rows;
  rows.init(a, mask, sinks, b, h, m0, m0 + warp * 16 + (lane >> 2));
  float o[OT][4];
#pragma unroll
  for (int j = 0; j < OT; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;

  u32 qf[S::QREG ? KSTEPS : 1][4];
  // ldmatrix addresses: A (Q) and the transposed B (V) take rows (lane & 7) + 8 · bit 3 and
  // columns 8 · bit 4; B (K) takes rows (lane & 7) + 8 · bit 4 and columns 8 · bit 3.
  const int a_row = (lane & 7) + ((lane >> 3) & 1) * 8, a_col = (lane >> 4) * 8;
  const int b_row = (lane & 7) + (lane >> 4) * 8, b_col = ((lane >> 3) & 1) * 8;
  const T* qw = qs + (warp * 16 + a_row) * QS + a_col;

  for (int t = 0; t < ntiles; ++t) {
    const int stage = t & 1;
    const int n0 = t * BN;
    if (t + 1 < ntiles) {
      const int n1 = n0 + BN;
      nv_flash_tile<T, BN, DP>(ks + (stage ^ 1) * BN * QS, QS, kg + (i64)n1 * a.k_strides[2],
                               a.k_strides[2], a.lk - n1, D);
      nv_flash_tile<T, BN, DVP>(vs + (stage ^ 1) * BN * VS, VS, vg + (i64)n1 * a.v_strides[2],
                                a.v_strides[2], a.lk - n1, DV);
      nv_cp_commit();
      nv_cp_wait<1>();
    } else {
      nv_cp_wait<0>();
    }
    __syncthreads();
    if (S::QREG && t == 0) {
#pragma unroll
      for (int kk = 0; kk < KSTEPS; ++kk) nv_ldsm4(qf[kk], qw + kk * 16);
    }
    const T* kt = ks + stage * BN * QS;
    const T* vt = vs + stage * BN * VS;

    // Scores: 16 rows × BN keys a warp.
    float s[NT][4];
#pragma unroll
    for (int j = 0; j < NT; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk) {
      u32 af[4];
      if (S::QREG) {
#pragma unroll
        for (int e = 0; e < 4; ++e) af[e] = qf[S::QREG ? kk : 0][e];
      } else {
        nv_ldsm4(af, qw + kk * 16);
      }
#pragma unroll
      for (int j = 0; j < NT; j += 2) {
        u32 bf[4];
        nv_ldsm4(bf, kt + (j * 8 + b_row) * QS + kk * 16 + b_col);
        NvMma<T>::run(s[j], af, bf[0], bf[1]);
        NvMma<T>::run(s[j + 1], af, bf[2], bf[3]);
      }
    }

    // Scale, mask, the running statistics, and the weights packed as A fragments of the
    // value product.
    rows.exponentials(&s[0][0], n0);
    rows.template rescale<OT>(&o[0][0]);
    u32 pf[NT / 2][4];
    rows.pack(pf, &s[0][0]);
    // Output += weights · values.
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
#pragma unroll
      for (int j = 0; j < OT; j += 2) {
        u32 bf[4];
        nv_ldsm4_t(bf, vt + (kk * 16 + a_row) * VS + j * 8 + a_col);
        NvMma<T>::run(o[j], pf[kk], bf[0], bf[1]);
        NvMma<T>::run(o[j + 1], pf[kk], bf[2], bf[3]);
      }
    }
    __syncthreads();
  }

  rows.template store<DV, OT>(&o[0][0], out, b, h, a.hq);
}

// One kernel: type, head sizes, mask kind, causal, sinks.
#define NV_FLASH(T, TN, D, DV, MASK, CAUSAL, SINKS)                                            \
  extern "C" __global__ void __launch_bounds__(NV_FLASH_THREADS)                              \
      flash_##TN##_##D##_##DV##_m##MASK##_c##CAUSAL##_s##SINKS(                                \
          const T* q, const T* k, const T* v, const void* mask, const T* sinks, T* out,        \
          NvFlash a) {                                                                         \
    nv_flash<T, D, DV, MASK, (bool)CAUSAL, (bool)SINKS>(q, k, v, mask, sinks, out, a);        \
  }
