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
// - One thread of the producer fills the ring's NVQT_STAGES stages in the walk's order from the
//   start (the consumers copy x meanwhile), each once the 8 consumer warps have released it
//   (barrier `freed`), its copies completing on barrier `full`.
// - Consumer warp c takes chunk c (128 values) of each stage: lane (g, t) pack 4c + t of rows g
//   and g + 8, turned into pairs s · q + b of T as `nvqm_sums` does, and x's fragments from
//   the block's copy of x in shared memory (read once, zeros past k and past m). A warp
//   releases a stage as soon as its operands are in registers, before its products. The 8
//   warps' sums of a tile meet in shared memory in a fixed order (no atomics).
// - Measured on an H100 (BENCHMARKS.md, fourteenth session), the form before these two changes
//   and NVQT_PAIRS ran `qmv_14336x4096` in 18.0 us (16.1 at two blocks a multiprocessor)
//   against the register form's 14.0.

#define NVQT_STAGES 8
// Accumulator sets a warp's chunk alternates between (its 8 products are otherwise one chain of
// dependent mma), added at the tile's end; NUVEC_KERNEL_DEFINES="NVQT_CHAINS=1" for one.
#ifndef NVQT_CHAINS
#define NVQT_CHAINS 2
#endif
// A consumer warp's stages at a time: with 2, the operands of two stages are read before either's
// products, so that two independent chains of 8 mma are in flight (the H100's ncu had one block
// of 8 warps issuing an instruction every 5 cycles a warp, DRAM at 44%: latency, not issue,
// bound). NUVEC_KERNEL_DEFINES="NVQT_PAIRS=1" until a device has timed it.
#ifndef NVQT_PAIRS
#define NVQT_PAIRS 0
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
  // 4 × 32), the barriers (`full` then `freed`, 8 bytes each).
  i32 scales_at, biases_at, x_at, sums_at, bars_at;
};

// nuvec-emulation: device only (tests/emulation/ptx.h stands in for this region) {
__device__ __forceinline__ u32 nvqt_smem(const void* p) { return (u32)__cvta_generic_to_shared(p); }
// The consumer warps' barrier (named barrier 1; 0 is __syncthreads').
__device__ __forceinline__ void nvqt_consumers_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(NVQT_CONSUMERS * 32) : "memory");
}
// } nuvec-emulation

// A lane's operands of one stage's chunk: its packs of rows g and g + 8, their scales and
// biases in both halves, and its pack of x.
struct NvqtChunk {
  uint4 qa, qb;
  u32 s2a, s2b, b2a, b2b;
  u32 xw[16];
};

// This warp's chunk of ring slot `s`, which holds stage `st` of its tile, into `o`: shared-memory
// reads only. A chunk past k reads zeros (the copies fill past the edges, x is padded), so its
// products add nothing; the single-stage loop skips it, the pairs' loop need not.
__device__ __forceinline__ void nvqt_read(NvqtChunk& o, const unsigned char* smem, int s, int st,
                                          const uint4* xr, bool has_x, const NvQmvTma& a) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int sst = a.sstage, row_groups = sst / 32;  // groups a stage's row of scales
  const int lp = 4 * warp + t;                      // the lane's pack in the stage's rows
  const uint4* ws = reinterpret_cast<const uint4*>(smem + s * NVQT_WSTAGE);
  o.qa = ws[g * (NVQT_KS / 32) + lp];
  o.qb = ws[(g + 8) * (NVQT_KS / 32) + lp];
  const u16* ss = reinterpret_cast<const u16*>(smem + a.scales_at + s * sst);
  const u16* bs = reinterpret_cast<const u16*>(smem + a.biases_at + s * sst);
  const int gi = lp >> a.gs_shift;
  const u32 sa = ss[g * row_groups + gi], sb = ss[(g + 8) * row_groups + gi];
  const u32 ba = bs[g * row_groups + gi], bb = bs[(g + 8) * row_groups + gi];
  o.s2a = sa | (sa << 16);
  o.s2b = sb | (sb << 16);
  o.b2a = ba | (ba << 16);
  o.b2b = bb | (bb << 16);
  // The lane's pack of its row of x: pack lp of the stage's.
  nvqm_xload(o.xw, xr, st * (NVQT_KS / 32) + lp, has_x);
}

// The chunk's 8 products into the accumulator sets `c` (step i into set i % C).
template <typename T, int C>
__device__ __forceinline__ void nvqt_products(const NvqtChunk& o, u32 nibbles, float (*c)[4]) {
#pragma unroll
  for (int step = 0; step < 8; ++step) {
    const int i = step >> 1, j = (step & 1) * 2;
    const u32 b0 = nvqm_xpair(o.xw, i, j), b1 = nvqm_xpair(o.xw, i, j + 1);
    const u32 wa = nvqm_word(o.qa, i), wb = nvqm_word(o.qb, i);
    const u32 frag[4] = {nvqm_pair<T>(wa, j, nibbles, o.s2a, o.b2a),
                         nvqm_pair<T>(wb, j, nibbles, o.s2b, o.b2b),
                         nvqm_pair<T>(wa, j + 1, nibbles, o.s2a, o.b2a),
                         nvqm_pair<T>(wb, j + 1, nibbles, o.s2b, o.b2b)};
    nvqm_mma<T>(c[step % C], frag, b0, b1);
  }
}

template <typename T>
__device__ __forceinline__ void nvqt_qmv(const NvTmap* wm, const NvTmap* sm, const NvTmap* bm,
                                         const T* __restrict__ x, T* __restrict__ y,
                                         const NvQmvTma& a) {
  extern __shared__ __align__(128) unsigned char nvqt_raw[];
  constexpr int S = NVQT_STAGES;
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
  __syncthreads();
  // The producer starts at once; the consumer warps first copy x (below).
  T* xs = reinterpret_cast<T*>(smem + a.x_at);
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

  // The block's copy of x, zeros past k (to the last stage's end), 16 bytes at a time (k is a
  // multiple of 32, and rows start on 16 bytes both here and there).
  const int row16 = a.stages * (NVQT_KS / 8);
  for (int i = threadIdx.x; i < (int)a.m * row16; i += NVQT_CONSUMERS * 32) {
    const int r = i / row16, c = 8 * (i - r * row16);
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    *reinterpret_cast<uint4*>(xs + r * a.xstride + c) =
        c < a.k ? *reinterpret_cast<const uint4*>(x + (i64)r * a.k + c) : zero;
  }
  nvqt_consumers_sync();

  const int g = lane >> 2, t = lane & 3;
  float* sums = reinterpret_cast<float*>(smem + a.sums_at);
  const uint4* xr = reinterpret_cast<const uint4*>(xs + (g < a.m ? g : 0) * a.xstride);
  const bool has_x = g < a.m;
  constexpr int C = NVQT_PAIRS ? 2 : NVQT_CHAINS;
  float c[C][4];
#pragma unroll
  for (int h = 0; h < C; ++h)
#pragma unroll
    for (int e = 0; e < 4; ++e) c[h][e] = 0.0f;
  u32 it = 0;
  int parity = 0;
  for (int tile = blockIdx.x; tile < a.tiles; tile += gridDim.x, parity ^= 1) {
    int st = 0;
    // Pairs of stages: both read, then both multiplied, each into its own accumulator set.
    for (; NVQT_PAIRS && st + 1 < a.stages; st += 2, it += 2) {
      const int s0 = (int)(it % S), s1 = (int)((it + 1) % S);
      nv_bar_wait(full(s0), (it / S) & 1);
      nv_bar_wait(full(s1), ((it + 1) / S) & 1);
      NvqtChunk o0, o1;
      nvqt_read(o0, smem, s0, st, xr, has_x, a);
      nvqt_read(o1, smem, s1, st + 1, xr, has_x, a);
      __syncwarp();
      if (lane == 0) {
        nv_bar_arrive(freed(s0));
        nv_bar_arrive(freed(s1));
      }
      nvqt_products<T, 1>(o0, a.nibbles, &c[0]);
      nvqt_products<T, 1>(o1, a.nibbles, &c[C - 1]);
    }
    for (; st < a.stages; ++st, ++it) {
      const int s = (int)(it % S);
      nv_bar_wait(full(s), (it / S) & 1);
      // The warp's chunk: values st · NVQT_KS + 128 warp of the tile's rows (warp-uniform);
      // chunks past k hold zeros, skipped.
      const bool inside = st * NVQT_KS + 128 * warp < a.k;
      NvqtChunk o;
      if (inside) nvqt_read(o, smem, s, st, xr, has_x, a);
      __syncwarp();
      if (lane == 0) nv_bar_arrive(freed(s));
      if (inside) nvqt_products<T, C>(o, a.nibbles, c);
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
      for (int h = 1; h < C; ++h) v += c[h][e];
      tile_sums[(warp * 4 + e) * 32 + lane] = v;
    }
    nvqt_consumers_sync();
    if (warp == 0) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float v = 0.0f;
        for (int w = 0; w < NVQT_CONSUMERS; ++w) v += tile_sums[(w * 4 + e) * 32 + lane];
        const i64 row = (i64)tile * 16 + g + 8 * (e >> 1);
        const int col = 2 * t + (e & 1);
        if (row < a.n && col < a.m) y[col * a.n + row] = nv_down<T>(v);
      }
    }
#pragma unroll
    for (int h = 0; h < C; ++h)
#pragma unroll
      for (int e = 0; e < 4; ++e) c[h][e] = 0.0f;
  }
}

// `qmv_tma_<type>`: the product for 4-bit weights, persistent blocks (one or two a
// multiprocessor, `NUVEC_QMV_TMA_BLOCKS`).
#define NV_QMV_TMA(T, TN)                                                                          \
  extern "C" __global__ void __launch_bounds__((NVQT_CONSUMERS + 1) * 32)                          \
      qmv_tma_##TN(const __grid_constant__ NvTmap wm, const __grid_constant__ NvTmap sm,           \
                   const __grid_constant__ NvTmap bm, const T* x, T* y, NvQmvTma a) {             \
    nvqt_qmv<T>(&wm, &sm, &bm, x, y, a);                                                           \
  }
