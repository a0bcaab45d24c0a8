// flash_tma.cu's Hopper prefill in the emulation (a producer warpgroup loading by TMA into
// stages on shared-memory barriers, consumers on wgmma) against attention in double on the
// same rounded inputs: head sizes 64 and 128, every mask kind, sinks, grouped heads, causal
// with more keys than queries, lengths that are not multiples of the tiles, two consumers and
// (head size 64) three. Built and run by tests/kernel_emulation.rs, once as the kernel is, once
// in FlashAttention-3's block order over a small L2, and once and again with the consumers taking
// turns (NV_T_PINGPONG=1), the second time over three stages in that block order (the defaults
// on Hopper for head size 64); then with the scale folded into the exponentials (as the host
// compiles it for a positive scale), with some exponentials by the polynomial, with a
// negative scale, with three persistent blocks walking every item (NV_T_PERSISTENT 1, fixed
// shares; 2, each block's producer taking the next item from a counter), and over
// FlashAttention-3's tiles of 176 keys (NV_H_BN=176), with the consumers taking turns and in
// that block order.

// The test's tensor map (nv_tma4's stand-in reads it): base, [D, L, H, B], byte strides of a
// row, a head and a batch entry, the box's rows.
static NvTmap map_of(const bf16* base, int d, int len, int h, int b, int rows) {
  NvTmap m{};
  m.v[0] = (u64)base;
  m.v[1] = d;
  m.v[2] = len;
  m.v[3] = h;
  m.v[4] = b;
  m.v[5] = (u64)d * 2;
  m.v[6] = (u64)len * d * 2;
  m.v[7] = (u64)h * len * d * 2;
  m.v[8] = rows;
  return m;
}

// The case's inputs, mask and reference are flash_case.h's ([B, H, L, D] layout, the one the
// tensor maps describe); the launch builds the maps from its pointers.
template <int D, int NC, int MASK, bool CAUSAL, bool SINKS>
static int tma_case(int B, int HQ, int HKV, int LQ, int LK, unsigned seed) {
  const double err = flash_case<bf16, D, D, MASK, CAUSAL, SINKS>(
      B, HQ, HKV, LQ, LK, seed, false,
      [&](const bf16* q, const bf16* k, const bf16* v, const void* mask, const bf16* sinks,
          bf16* out, const NvFlash& a) {
        constexpr int BM = 64 * NC;
        const NvTmap qm = map_of(q, D, LQ, HQ, B, BM), km = map_of(k, D, LK, HKV, B, NV_H_BN),
                     vm = map_of(v, D, LK, HKV, B, NV_H_BN);
        nv_emu_smem_base = nv_t_smem;
        const unsigned mtiles = (LQ + BM - 1) / BM;
        NvFlash args = a;
        args.items = (int)(mtiles * HQ * B);
        // Persistent: three blocks (or fewer, for fewer items) walk every item; the dynamic
        // walk's counters start at zero and must be zero again at the end.
        const Dim3 grid = NV_T_PERSISTENT
                              ? Dim3{std::min(3u, (unsigned)args.items), 1, 1}
                              : Dim3{mtiles, (unsigned)HQ, (unsigned)B};
        static u32 counters[2] = {0u, 0u};
        nv_emu_launch(grid, 128 * (NC + 1), [&] {
          nv_flash_tma<bf16, D, D, MASK, CAUSAL, SINKS, NC>(&qm, &km, &vm, mask, sinks, out,
                                                            counters, args);
        });
        if (counters[0] != 0u || counters[1] != 0u) {
          std::printf("the dynamic walk left its counters at %u and %u\n", counters[0], counters[1]);
          std::exit(1);
        }
      });
  std::printf(
      "tma D %d consumers %d mask %d causal %d sinks %d B %d HQ %d HKV %d LQ %d LK %d: rel err "
      "%.3g\n",
      D, NC, MASK, CAUSAL, SINKS, B, HQ, HKV, LQ, LK, err);
  return err < 1.0 / 64 ? 0 : 1;
}

int main() {
  int bad = 0;
  bad += tma_case<64, 2, 0, false, false>(1, 2, 1, 130, 300, 1);
  bad += tma_case<128, 2, 0, true, false>(1, 2, 2, 200, 260, 2);
  bad += tma_case<64, 2, 1, false, true>(1, 2, 1, 70, 129, 3);
  bad += tma_case<128, 2, 2, true, true>(2, 2, 1, 100, 100, 4);
  bad += tma_case<64, 3, 0, true, false>(1, 2, 2, 250, 400, 5);
  bad += tma_case<64, 3, 2, false, true>(1, 1, 1, 100, 200, 6);
  bad += tma_case<128, 2, 0, false, true>(1, 2, 1, 150, 300, 7);
  bad += tma_case<128, 2, 0, true, false>(2, 3, 1, 300, 300, 8);
  std::printf("bits %016llx\n", nv_emu_bits);
  std::printf(bad ? "FAIL %d\n" : "ALL OK\n", bad);
  return bad;
}
