// The quantized decoding product y = x · wᵀ (up to 8 rows of x, 4-bit weights, f16 and bf16)
// fed by the copy engine: Hopper's tensor copies (TMA) stream the packed weights, scales and
// biases into a ring of shared-memory stages, so that the bytes in flight no longer depend on
// the registers of the threads that multiply. Needs common.cuh, bulk.cuh and
// quantized_mv_mma.cu first (its pair, fragment and mma helpers); `quantized/mv_tma.rs`
// launches it.
//
// Why: the register form (`qmv_mma_*`) keeps each warp's next chunks in flight in its own
// registers, 13-14 warps a multiprocessor; ncu has it waiting on memory (long scoreboard), at
// 14 us for `qmv_14336x4096` on both the H100 and the H200, whose bus is 1.4 times faster.
//
// - A block is 8 consumer warps and one producer warp, one or two blocks a multiprocessor,
//   walking the tiles of 16 rows of w blockIdx.x, blockIdx.x + gridDim.x, ... (the walk's
//   shares differ by at most one tile: 896 tiles over 132 blocks for a [14336, 4096] weight,
//   where the register form's 224 blocks of 64 rows left 40 of its 264 places empty). Each
//   tile's inner axis comes in stages of NVQT_KS values: the rows' packed words (16 rows of
//   NVQT_KS / 8 words), scales and biases (16 rows of NVQT_KS / group values each), one box
//   each, zeros past the edges.
// - One thread of the producer fills the ring's NVQT_STAGES stages in the walk's order, each
//   once the 8 consumer warps have released it (barrier `freed`), its copies completing on
//   barrier `full`.
// - Consumer warp c takes chunk c (128 values) of each stage: lane (g, t) pack 4c + t of rows g
//   and g + 8, turned into pairs s · q + b of T as `nvqm_sums` does, and x's fragments from
//   the block's copy of x in shared memory (read once, zeros past k and past m). The 8 warps'
//   sums of a tile meet in shared memory in a fixed order (no atomics).
// - The column form (`qmv_tmc_*_p<P>`, P = 128 / group size, for up to 8 / P rows of x): the
//   register form's bytes in flight held it back (BENCHMARKS.md, thirteenth session), not its
//   instructions, but here the copy engine keeps the bytes in flight and the consumers' issue
//   rate may bind instead. Each group's scale and bias are applied to f32 sums: the products'
//   8 columns are P columns for each row of x, column P r + i holding row r's values in group i
//   of the chunk and zeros elsewhere, so that every sum stays inside one group; the products
//   take 2^7 + q (bf16) or 2^10 + q (f16) straight from the mask-and-or, and
//   s · Σ x (o + q) + (b - o s) · Σ x gives Σ x (s q + b) in f32 with the groups' sums of x
//   (Σ x) computed once a block. Each weight is exact (the rounded form rounds s q + b to T as
//   MLX does), in about two thirds of the instructions.

#define NVQT_STAGES 8
// Accumulator sets a warp's chunk alternates between (its 8 products are otherwise one chain of
// dependent mma), added at the tile's end; NUVEC_KERNEL_DEFINES="NVQT_CHAINS=1" for one.
#ifndef NVQT_CHAINS
#define NVQT_CHAINS 2
#endif
#define NVQT_KS 1024
#define NVQT_CONSUMERS 8
#define NVQT_WSTAGE (16 * NVQT_KS / 2)

// Mirrors `TmaArgs` in `quantized/mv_tma.rs` (repr(C)).
struct NvQmvTma {
  i64 n;           // rows of w
  i64 m;           // rows of x (at most 8)
  i32 k;           // values a row
  i32 tiles;       // tiles of 16 rows of w
  i32 stages;      // stages a tile: k / NVQT_KS rounded up
  i32 gs_shift;    // log2(group size / 32)
  i32 sstage;      // bytes of a stage's scales (as of its biases): 16 rows of NVQT_KS / group
  i32 xstride;     // values between rows of x in shared memory (stages · NVQT_KS + 8)
  u32 nibbles;     // 0x000F000F
  // Where the dynamic shared memory's parts start, in bytes (the host lays them out): the
  // stages' words at 0, their scales, their biases, x, the sums (two tiles' worth of 8 warps'
  // 4 × 32), the barriers (`full` then `freed`, 8 bytes each), the column form's sums of x
  // (8 floats a chunk of 128 values).
  i32 scales_at, biases_at, x_at, sums_at, bars_at, xsums_at;
};

// nuvec-emulation: device only (tests/emulation/ptx.h stands in for this region) {
__device__ __forceinline__ u32 nvqt_smem(const void* p) { return (u32)__cvta_generic_to_shared(p); }
// The consumer warps' barrier (named barrier 1; 0 is __syncthreads').
__device__ __forceinline__ void nvqt_consumers_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(NVQT_CONSUMERS * 32) : "memory");
}
// } nuvec-emulation

// The group of the chunk's P that accumulator column 2 t + u sums in the column form.
template <int P> __device__ __forceinline__ int nvqt_column_group(int t, int u) {
  return (2 * t + u) % P;
}

// The column form's groups' sums of x (see the top): xsums[8 ch + P r + i] is the sum of row r's
// values in group i of chunk ch, in f32 and a fixed order (a warp a chunk, 4 values a lane, the
// group's lanes added by shuffles), zeros for rows past m. Every warp calls it.
template <typename T, int P>
__device__ __forceinline__ void nvqt_xsums(const T* xs, float* xsums, const NvQmvTma& a) {
  constexpr int LANES = 32 / P;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int chunks = a.stages * (NVQT_KS / 128);
  for (int ch = warp; ch < chunks; ch += NVQT_CONSUMERS + 1) {
    for (int r = 0; r < 8 / P; ++r) {
      float v = 0.0f;
      if (r < a.m) {
        const T* at = xs + r * a.xstride + 128 * ch + 4 * lane;
        v = (nv_up(at[0]) + nv_up(at[1])) + (nv_up(at[2]) + nv_up(at[3]));
      }
#pragma unroll
      for (int o = LANES / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
      if (lane % LANES == 0) xsums[8 * ch + r * P + lane / LANES] = v;
    }
  }
}

// P = 0: the rounded form; P = 1, 2, 4: the column form for groups of 128 / P values.
template <typename T, int P>
__device__ __forceinline__ void nvqt_qmv(const NvTmap* wm, const NvTmap* sm, const NvTmap* bm,
                                         const T* __restrict__ x, T* __restrict__ y,
                                         const NvQmvTma& a) {
  extern __shared__ __align__(128) unsigned char nvqt_raw[];
  constexpr int S = NVQT_STAGES;
  constexpr int COLS = P > 0 ? P : 1;  // the products' columns a row of x
  static_assert(P == 0 || P == 1 || P == 2 || P == 4, "groups of 128, 64 or 32");
  unsigned char* smem = nvqt_raw;
  const u32 base = nvqt_smem(smem);
  const int sst = a.sstage, scales_at = a.scales_at, biases_at = a.biases_at;
  auto full = [&](int s) { return base + a.bars_at + 8 * s; };
  auto freed = [&](int s) { return base + a.bars_at + 8 * (S + s); };
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      nv_bar_init(full(s), 1);
      nv_bar_init(freed(s), NVQT_CONSUMERS);  // lane 0 of each consumer warp
    }
    nv_bar_init_fence();
  }
  // The block's copy of x, zeros past k (to the last stage's end), 16 bytes at a time (k is a
  // multiple of 32, and rows start on 16 bytes both here and there).
  T* xs = reinterpret_cast<T*>(smem + a.x_at);
  const int row16 = a.stages * (NVQT_KS / 8);
  for (int i = threadIdx.x; i < (int)a.m * row16; i += blockDim.x) {
    const int r = i / row16, c = 8 * (i - r * row16);
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    *reinterpret_cast<uint4*>(xs + r * a.xstride + c) =
        c < a.k ? *reinterpret_cast<const uint4*>(x + (i64)r * a.k + c) : zero;
  }
  __syncthreads();
  float* xsums = reinterpret_cast<float*>(smem + a.xsums_at);
  if constexpr (P > 0) {
    nvqt_xsums<T, P>(xs, xsums, a);
    __syncthreads();
  }

  if (warp == NVQT_CONSUMERS) {
    if (lane == 0) {
      u32 it = 0;
      for (int tile = blockIdx.x; tile < a.tiles; tile += gridDim.x) {
        for (int st = 0; st < a.stages; ++st, ++it) {
          const int s = (int)(it % S);
          if (it >= S) nv_bar_wait(freed(s), ((it / S) & 1) ^ 1u);
          nv_bar_expect(full(s), NVQT_WSTAGE + 2 * sst);
          nv_tma2(base + s * NVQT_WSTAGE, wm, st * (NVQT_KS / 8), tile * 16, full(s));
          const int group0 = (st * NVQT_KS) >> (a.gs_shift + 5);
          nv_tma2(base + scales_at + s * sst, sm, group0, tile * 16, full(s));
          nv_tma2(base + biases_at + s * sst, bm, group0, tile * 16, full(s));
        }
      }
    }
    return;
  }

  const int g = lane >> 2, t = lane & 3;
  const int row_groups = sst / 32;  // groups a stage's row of scales
  float* sums = reinterpret_cast<float*>(smem + a.sums_at);
  // The lane's row of x: row g (the rounded form), or row g / P where its pack lies in column
  // g's group (the column form).
  const int xrow = g / COLS;
  const bool has_x = xrow < a.m && (P == 0 || (t * P) / 4 == g % COLS);
  const uint4* xr = reinterpret_cast<const uint4*>(xs + (has_x ? xrow : 0) * a.xstride);
  float c[NVQT_CHAINS][4];
#pragma unroll
  for (int h = 0; h < NVQT_CHAINS; ++h)
#pragma unroll
    for (int e = 0; e < 4; ++e) c[h][e] = 0.0f;
  u32 it = 0;
  int parity = 0;
  for (int tile = blockIdx.x; tile < a.tiles; tile += gridDim.x, parity ^= 1) {
    for (int st = 0; st < a.stages; ++st, ++it) {
      const int s = (int)(it % S);
      nv_bar_wait(full(s), (it / S) & 1);
      // The warp's chunk: values st · NVQT_KS + 128 warp of the tile's rows (warp-uniform).
      if (st * NVQT_KS + 128 * warp < a.k) {
        const int lp = 4 * warp + t;  // the lane's pack in the stage's rows
        const uint4* ws = reinterpret_cast<const uint4*>(smem + s * NVQT_WSTAGE);
        const uint4 qa = ws[g * (NVQT_KS / 32) + lp], qb = ws[(g + 8) * (NVQT_KS / 32) + lp];
        if constexpr (P == 0) {
          const u16* ss = reinterpret_cast<const u16*>(smem + scales_at + s * sst);
          const u16* bs = reinterpret_cast<const u16*>(smem + biases_at + s * sst);
          const int gi = lp >> a.gs_shift;
          const u32 sa = ss[g * row_groups + gi], sb = ss[(g + 8) * row_groups + gi];
          const u32 ba = bs[g * row_groups + gi], bb = bs[(g + 8) * row_groups + gi];
          const u32 s2a = sa | (sa << 16), s2b = sb | (sb << 16);
          const u32 b2a = ba | (ba << 16), b2b = bb | (bb << 16);
          u32 xw[16];
          // The lane's pack of its row of x: pack lp of the stage's.
          nvqm_xload(xw, xr, st * (NVQT_KS / 32) + lp, has_x);
#pragma unroll
          for (int step = 0; step < 8; ++step) {
            const int i = step >> 1, j = (step & 1) * 2;
            const u32 b0 = nvqm_xpair(xw, i, j), b1 = nvqm_xpair(xw, i, j + 1);
            const u32 wa = nvqm_word(qa, i), wb = nvqm_word(qb, i);
            const u32 frag[4] = {nvqm_pair<T>(wa, j, a.nibbles, s2a, b2a),
                                 nvqm_pair<T>(wb, j, a.nibbles, s2b, b2b),
                                 nvqm_pair<T>(wa, j + 1, a.nibbles, s2a, b2a),
                                 nvqm_pair<T>(wb, j + 1, a.nibbles, s2b, b2b)};
            nvqm_mma<T>(c[step % NVQT_CHAINS], frag, b0, b1);
          }
        } else {
          // The chunk's sums of x (o + q) a column, from zero, then scaled into c[0].
          constexpr u32 M = NvqmT<T>::magic;
          float cc[NVQT_CHAINS][4];
#pragma unroll
          for (int h = 0; h < NVQT_CHAINS; ++h)
#pragma unroll
            for (int e = 0; e < 4; ++e) cc[h][e] = 0.0f;
          u32 xw[16];
          nvqm_xload(xw, xr, st * (NVQT_KS / 32) + lp, has_x);
#pragma unroll
          for (int step = 0; step < 8; ++step) {
            const int i = step >> 1, j = (step & 1) * 2;
            const u32 b0 = nvqm_xpair(xw, i, j), b1 = nvqm_xpair(xw, i, j + 1);
            const u32 wa = nvqm_word(qa, i), wb = nvqm_word(qb, i);
            const u32 frag[4] = {((wa >> (4 * j)) & a.nibbles) | M,
                                 ((wb >> (4 * j)) & a.nibbles) | M,
                                 ((wa >> (4 * j + 4)) & a.nibbles) | M,
                                 ((wb >> (4 * j + 4)) & a.nibbles) | M};
            nvqm_mma<T>(cc[step % NVQT_CHAINS], frag, b0, b1);
          }
          const T* ss = reinterpret_cast<const T*>(smem + scales_at + s * sst);
          const T* bs = reinterpret_cast<const T*>(smem + biases_at + s * sst);
          const float* sx = xsums + 8 * (st * (NVQT_KS / 128) + warp) + 2 * t;
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            float sum = cc[0][e];
#pragma unroll
            for (int h = 1; h < NVQT_CHAINS; ++h) sum += cc[h][e];
            const int at = (g + 8 * (e >> 1)) * row_groups + warp * P +
                           nvqt_column_group<P>(t, e & 1);
            const float sc = nv_up(ss[at]), bi = nv_up(bs[at]);
            const float shifted = fmaf(-NvqmT<T>::magic_value, sc, bi);
            c[0][e] = fmaf(sc, sum, fmaf(shifted, sx[e & 1], c[0][e]));
          }
        }
      }
      __syncwarp();
      if (lane == 0) nv_bar_arrive(freed(s));
    }
    // The tile's sums: each warp's into its slot of this tile's half, then warp 0 adds them in
    // warp order and stores (the other half is the next tile's, so no second barrier: a
    // warp writes this half again only after the next tile's barrier, which warp 0 reaches
    // after its stores).
    float* tile_sums = sums + parity * (NVQT_CONSUMERS * 4 * 32);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float v = c[0][e];
#pragma unroll
      for (int h = 1; h < NVQT_CHAINS; ++h) v += c[h][e];
      tile_sums[(warp * 4 + e) * 32 + lane] = v;
    }
    nvqt_consumers_sync();
    if (warp == 0) {
      float v[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        v[e] = 0.0f;
        for (int w = 0; w < NVQT_CONSUMERS; ++w) v[e] += tile_sums[(w * 4 + e) * 32 + lane];
      }
      // The column form: a row of x's P columns added (2t and 2t + 1, and the next lane's).
      if constexpr (P > 1) {
        v[0] += v[1];
        v[2] += v[3];
        if constexpr (P == 4) {
          v[0] += __shfl_xor_sync(0xFFFFFFFFu, v[0], 1);
          v[2] += __shfl_xor_sync(0xFFFFFFFFu, v[2], 1);
        }
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const i64 row = (i64)tile * 16 + g + 8 * (e >> 1);
        const int col = 2 * t + (e & 1);
        if (row < a.n && col % COLS == 0 && col / COLS < a.m)
          y[(col / COLS) * a.n + row] = nv_down<T>(v[e]);
      }
    }
#pragma unroll
    for (int h = 0; h < NVQT_CHAINS; ++h)
#pragma unroll
      for (int e = 0; e < 4; ++e) c[h][e] = 0.0f;
  }
}

// `qmv_tma_<type>` (the rounded form) and `qmv_tmc_<type>_p<P>` (the column form for groups of
// 128 / P values): the product for 4-bit weights, persistent blocks (one or two a
// multiprocessor, `NUVEC_QMV_TMA_BLOCKS`).
#define NV_QMV_TMA_FORM(T, NAME, P)                                                                \
  extern "C" __global__ void __launch_bounds__((NVQT_CONSUMERS + 1) * 32)                          \
      NAME(const __grid_constant__ NvTmap wm, const __grid_constant__ NvTmap sm,                   \
           const __grid_constant__ NvTmap bm, const T* x, T* y, NvQmvTma a) {                     \
    nvqt_qmv<T, P>(&wm, &sm, &bm, x, y, a);                                                        \
  }
#define NV_QMV_TMA(T, TN)                                                                          \
  NV_QMV_TMA_FORM(T, qmv_tma_##TN, 0)                                                              \
  NV_QMV_TMA_FORM(T, qmv_tmc_##TN##_p1, 1)                                                         \
  NV_QMV_TMA_FORM(T, qmv_tmc_##TN##_p2, 2)                                                         \
  NV_QMV_TMA_FORM(T, qmv_tmc_##TN##_p4, 4)
