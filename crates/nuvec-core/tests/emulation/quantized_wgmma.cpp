// quantized_wgmma.cu's kernel in the emulation (wgmma's register form as a warpgroup collective
// over the 128-byte swizzled operand; TMA's copies and the stages' barriers as ptx.h's
// stand-ins) against the product in double over the dequantized 4-bit weights: groups of 32,
// 64 and 128, 128 and 256 rows of x a tile, shapes that are not multiples of the tiles, an odd
// number of steps, more steps than stages (the ring wraps), a block a tile and the stream-K
// walk (tiles cut between two and three blocks). Built and run by tests/kernel_emulation.rs,
// with each sub-step's product issued as its fragment is made, and (NVQW_INTERLEAVE=0) after
// all four.
#include <algorithm>
#include <random>

// SK_BLOCKS: the stream-K walk over that many blocks (0: a block a tile).
template <typename T, int BX, int S, int SK_BLOCKS = 0>
static int wgmma_case(int M, int N, int K, int gs, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::uniform_int_distribution<u32> wd;
  std::vector<T> x((size_t)M * K);
  for (auto& e : x) e = nv_down<T>(u(rng));
  const int wrow = K / 8, groups = K / gs;
  std::vector<u32> w((size_t)N * wrow);
  for (auto& e : w) e = wd(rng);
  std::vector<T> s((size_t)N * groups), b((size_t)N * groups);
  for (auto& e : s) e = nv_down<T>(u(rng) * 0.05f);
  for (auto& e : b) e = nv_down<T>(u(rng) * 0.1f);
  NvQw a{};
  a.m = M;
  a.n = N;
  a.k = K;
  a.wrow = wrow;
  a.groups = groups;
  a.gs_shift = __builtin_ctz(gs / 32);
  a.nibbles = 0x000F000Fu;
  std::vector<T> y((size_t)M * N);
  const Dim3 tiles{(unsigned)((N + 127) / 128), (unsigned)((M + BX - 1) / BX), 1};
  a.tiles_n = (int)tiles.x;
  constexpr bool SK = SK_BLOCKS > 0;
  // The stream-K walk's units (pairs of 64-value steps a tile), slots and flags.
  const long per = ((K + 63) / 64 + 1) / 2;
  a.units = (i64)tiles.x * tiles.y * per;
  std::vector<float> part((size_t)std::max(SK_BLOCKS, 1) * BX / 2 * 256);
  std::vector<u32> flags((size_t)std::max(SK_BLOCKS, 1), 0u);
  a.part = part.data();
  a.flags = flags.data();
  // The maps nv_tma2's stand-in reads.
  const NvTmap xm = nv_emu_map2<NvTmap>(x.data(), K, M, (long)K * 2, 64, BX, 2, true);
  const NvTmap wm = nv_emu_map2<NvTmap>(w.data(), wrow, N, (long)wrow * 4, 8, 128, 4, false);
  nv_emu_smem_base = nvqw_raw;
  nv_emu_launch(SK ? Dim3{(unsigned)SK_BLOCKS, 1, 1} : tiles, 384, [&] {
    if (gs == 32)
      nvqw_qmm<T, BX, S, true, SK>(&xm, &wm, s.data(), b.data(), y.data(), a);
    else
      nvqw_qmm<T, BX, S, false, SK>(&xm, &wm, s.data(), b.data(), y.data(), a);
  });
  // The stream's next launch finds the flags as this one did: all down.
  const bool raised = std::any_of(flags.begin(), flags.end(), [](u32 f) { return f != 0; });
  double err = 0, top = 0;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double acc = 0;
      for (int k = 0; k < K; ++k) {
        const u32 q = (w[(size_t)n * wrow + k / 8] >> (4 * (k % 8))) & 15u;
        const int gi = n * groups + k / gs;
        acc += (double)nv_up(x[(size_t)m * K + k]) * ((double)q * nv_up(s[gi]) + nv_up(b[gi]));
      }
      err = nv_emu_worse(err, std::abs(acc - nv_up(y[(size_t)m * N + n])));
      top = std::max(top, std::abs(acc));
    }
  std::printf("wgmma BX %d S %d M %d N %d K %d g %d stream-K blocks %d: rel err %.3g%s\n", BX, S,
              M, N, K, gs, SK_BLOCKS, err / top, raised ? ", flags left raised" : "");
  return err / top < 2e-2 && !raised ? 0 : 1;
}

int main() {
  int bad = 0;
  // A block a tile.
  bad += wgmma_case<bf16, 128, 4>(65, 128, 448, 64, 1);
  bad += wgmma_case<bf16, 128, 2>(100, 200, 640, 128, 2);
  bad += wgmma_case<bf16, 256, 4>(300, 130, 256, 64, 3);
  bad += wgmma_case<f16, 128, 6>(70, 64, 416, 32, 4);
  bad += wgmma_case<bf16, 256, 3>(150, 200, 320, 32, 5);
  bad += wgmma_case<f16, 256, 3>(300, 130, 640, 128, 6);
  // Stream-K: 6 tiles of 5 units on 4 blocks (tiles cut between two blocks, the ring over
  // pieces), 2 tiles on 6 blocks (a tile cut among three, pieces of one unit), and a block a
  // tile and a half.
  bad += wgmma_case<bf16, 128, 3, 4>(300, 200, 640, 64, 9);
  bad += wgmma_case<f16, 256, 2, 6>(150, 200, 608, 32, 10);
  bad += wgmma_case<bf16, 256, 4, 2>(150, 300, 384, 128, 11);
  std::printf(bad ? "FAIL %d\n" : "ALL OK\n", bad);
  return bad;
}
