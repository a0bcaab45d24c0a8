// The quantized product's warp-specialised form: quantized_wgmma.cu (included before this file,
// as are bulk.cuh's barriers and tensor copies) says what the product computes and holds the
// parts both forms share (a thread's rows of w, their scales and A fragments, the store).
// A block has three warpgroups: one loads, two multiply.
// - One thread of the producer warpgroup moves each step's tile of x (BX rows × 64 values in
//   the 128-byte swizzle wgmma reads) and packed tile of w (128 rows × 8 words, rows packed)
//   into a ring of S stages with TMA, which fills rows past m and n and values past k with
//   zeros. A stage's `full` barrier completes when its bytes have landed, its `free` barrier
//   when the eight consumer warps have retired the products that read it.
// - Each consumer warpgroup owns 64 of the 128 rows of w and all BX rows of x, as in the other
//   form, but waits only on the stages it reads: no block-wide barrier in the loop, and no
//   consumer instruction spent on a copy or its address.
// - The producer gives most of its registers to the consumers (setmaxnreg).
// The other form's block waits at a barrier every step; ncu put its multiprocessor at 46% busy
// on `qmm_512x14336x4096`, mostly waiting, where cuBLAS's warp-specialised product reaches 76%.

#define NVQW_WS_THREADS 384

// The shared memory of one block: S stages of x then S stages of packed w, from a
// 1,024-aligned start (the host adds 1,024 bytes for the alignment), then the barriers.
template <int BX, int S> struct NvqwWsShape {
  static constexpr int XSTAGE = BX * 128;
  static constexpr int WSTAGE = NVQW_BN * 32;
  static constexpr int BARS = S * (XSTAGE + WSTAGE);
  static constexpr int SHARED = BARS + 16 * S;
  static_assert(BX * (NVQW_BN + 8) * 2 <= BARS, "the output staging fits the stages");
  static_assert(S >= 2, "a stage being multiplied, one loading");
};

// nuvec-emulation: device only (tests/emulation/ptx.h stands in for this region) {
// The two consumer warpgroups' barrier (named barrier 1; 0 is __syncthreads').
__device__ __forceinline__ void nvqw_consumers_sync() { asm volatile("bar.sync 1, 256;\n" ::: "memory"); }
// } nuvec-emulation

template <typename T, int BX, int S, bool G32>
__device__ __forceinline__ void nvqw_qmm_ws(const NvTmap* xm, const NvTmap* wm, const T* __restrict__ scales,
                                            const T* __restrict__ biases, T* __restrict__ y, const NvQw& a) {
  typedef NvqwWsShape<BX, S> Sh;
  constexpr int ACC = BX / 2;  // accumulators a thread: BX / 8 tiles of 8 columns, 4 each
  extern __shared__ __align__(16) unsigned char nvqw_raw[];
  unsigned char* smem;
  {
    const u32 raw = nvqw_smem(nvqw_raw);
    smem = nvqw_raw + (((raw + 1023) & ~1023u) - raw);
  }
  const u32 xs = nvqw_smem(smem);
  const u32 wsa = xs + S * Sh::XSTAGE;
  const u32* ws = reinterpret_cast<const u32*>(smem + S * Sh::XSTAGE);
  const u32 bars = xs + Sh::BARS;
  auto full = [&](int s) { return bars + 8 * s; };
  auto freed = [&](int s) { return bars + 8 * (S + s); };

  const i64 m = a.m, n = a.n;
  const i64 n0 = (i64)blockIdx.x * NVQW_BN, m0 = (i64)blockIdx.y * BX;
  // Steps run in pairs (the two A buffers alternate), as in the other form: an odd count gets
  // one more step, of zeros (TMA fills the values past k).
  const int steps = (((a.k + NVQW_BK - 1) / NVQW_BK) + 1) & ~1;
  const int wg = threadIdx.x >> 7;

  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      nv_bar_init(full(s), 1);
      nv_bar_init(freed(s), 8);  // lane 0 of each consumer warp
    }
    nv_bar_init_fence();
  }
  __syncthreads();

  // Step t uses stage t % S in phase (t / S) & 1, for the producer and the consumers alike.
  if (wg == 0) {
// nuvec-emulation: device only (a hint, nothing to stand in for) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n");
// } nuvec-emulation
    if (threadIdx.x == 0) {
      for (int t = 0; t < steps; ++t) {
        const int s = t % S;
        if (t >= S) nv_bar_wait(freed(s), (u32)((t / S) & 1) ^ 1u);
        nv_bar_expect(full(s), Sh::XSTAGE + Sh::WSTAGE);
        nv_tma2(xs + s * Sh::XSTAGE, xm, t * NVQW_BK, (int)m0, full(s));
        nv_tma2(wsa + s * Sh::WSTAGE, wm, t * (NVQW_BK / 8), (int)n0, full(s));
      }
    }
    return;
  }
// nuvec-emulation: device only (a hint, nothing to stand in for) {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");
// } nuvec-emulation

  const int tid = threadIdx.x - 128, lane = tid & 31;
  const int w4 = (tid >> 5) & 3, g = lane >> 2, t4 = lane & 3;
  const bool lead = lane == 0;
  // The thread's two rows of the block's 128 rows of w.
  const int r0 = (tid >> 7) * 64 + w4 * 16 + g;
  const NvqwRows<T, G32> rows(scales, biases, a, n0, r0, t4);

  float acc[ACC];
#pragma unroll
  for (int i = 0; i < ACC; ++i) acc[i] = 0.0f;
  u32 fa[4][4], fb[4][4];
  NvqwScales sa, sb;

  // Step t: once its stage has landed, its weights are dequantized (while step t - 1's
  // product runs) into `cur` and multiplied; `prev` is free again once step t - 1's product
  // retires, and so is step t - 1's stage, which the warp then releases.
  auto step = [&](u32 (&cur)[4][4], u32 (&prev)[4][4], NvqwScales& s, NvqwScales& next, int t) {
    const int st = t % S;
    nv_bar_wait(full(st), (u32)((t / S) & 1));
    rows.scales(next, t + 1);
    rows.template frags<8>(cur, ws + st * (Sh::WSTAGE / 4), s);
    const u32 xa = xs + st * Sh::XSTAGE;
    nvqw_pin<ACC>(acc);
    nvqw_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) NvqwT<T>::template rs<BX>(acc, cur[kk], nvqw_desc(xa + kk * 32, 16, 1024));
    nvqw_commit();
    // The last step retires its own products inside the loop (the other form says why).
    if (t + 1 == steps) {
      nvqw_wait<0>();
    } else {
      nvqw_wait<1>();
    }
    nvqw_pin_frags(prev);
    if (lead && t > 0) nv_bar_arrive(freed((t - 1) % S));
  };

  rows.scales(sa, 0);
  for (int t = 0; t < steps; t += 2) {
    step(fa, fb, sa, sb, t);
    step(fb, fa, sb, sa, t + 1);
  }
  nvqw_pin<ACC>(acc);
  nvqw_pin_frags(fa);
  nvqw_pin_frags(fb);

  // Every load has been waited for, so no copy is in flight; the consumers' barrier keeps
  // either from staging its tile over a stage the other's products still read.
  nvqw_store<T, BX, 256>(acc, smem, y, m, n, m0, n0, r0, t4, tid, [] { nvqw_consumers_sync(); });
}

// One shape's kernels: type, rows of x a block (BX, wgmma's N) and stages; `_g32` for groups
// of 32, `_g64` for groups of 64 and 128. The tensor maps: x in boxes of 64 values × BX rows
// (128-byte swizzle), w in boxes of 8 words × 128 rows.
#define NV_QMM_WS_G(T, TN, BX, S, G, G32)                                                          \
  extern "C" __global__ void __launch_bounds__(NVQW_WS_THREADS, 1)                                 \
      qmmws_##TN##_x##BX##_s##S##_g##G(const __grid_constant__ NvTmap xm,                          \
                                       const __grid_constant__ NvTmap wm, const T* s, const T* b,  \
                                       T* y, NvQw a) {                                             \
    nvqw_qmm_ws<T, BX, S, G32>(&xm, &wm, s, b, y, a);                                              \
  }
#define NV_QMM_WS(T, TN, BX, S)         \
  NV_QMM_WS_G(T, TN, BX, S, 32, true) \
  NV_QMM_WS_G(T, TN, BX, S, 64, false)
