// quantized_mv_tma.cu's TMA-fed decoding product in the emulation (the tensor copies and the
// ring's barriers as ptx.h's stand-ins) against the product in double over each weight s · q + b
// rounded once to the activations' type, as the kernel rounds it: bf16 and f16, 1 to 8 rows of
// x, rows of w not a multiple of 16, inner axes with a partial last stage and a partial last
// chunk, groups of 32, 64 and 128, more tiles than blocks (the persistent walk) and more stages
// than the ring holds (it wraps), odd numbers of stages (with NVQT_PAIRS, a pair then one).
// Built and run by tests/kernel_emulation.rs.
#include <algorithm>
#include <random>

template <typename T>
static int tma_case(int m, int n, int k, int gs, unsigned blocks, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::uniform_int_distribution<u32> wd;
  const int groups = k / gs, ks = NVQT_KS;
  std::vector<T> x((size_t)m * k), s((size_t)n * groups), b(s.size()), y((size_t)m * n);
  std::vector<u32> w((size_t)n * k / 8);
  for (auto& e : x) e = nv_down<T>(u(rng));
  for (auto& e : w) e = wd(rng);
  for (auto& e : s) e = nv_down<T>(u(rng) * 0.05f);
  for (auto& e : b) e = nv_down<T>(u(rng) * 0.1f);
  for (auto& e : y) e = nv_down<T>(12345.0f);  // every output must be written
  NvQmvTma a{};
  a.n = n;
  a.m = m;
  a.k = k;
  a.tiles = (n + 15) / 16;
  a.stages = (k + ks - 1) / ks;
  a.gs_shift = __builtin_ctz(gs / 32);
  a.sstage = 16 * (ks / gs) * 2;
  a.xstride = a.stages * ks + 8;
  a.nibbles = 0x000F000Fu;
  // The host's layout (quantized/mv_tma.rs, SharedLayout).
  a.scales_at = NVQT_STAGES * NVQT_WSTAGE;
  a.biases_at = a.scales_at + NVQT_STAGES * a.sstage;
  a.x_at = a.biases_at + NVQT_STAGES * a.sstage;
  a.sums_at = a.x_at + (m * a.xstride * 2 + 15) / 16 * 16;
  a.bars_at = a.sums_at + 2 * NVQT_CONSUMERS * 4 * 32 * 4;
  // The maps nv_tma2's stand-in reads.
  const long pitch = (long)groups * 2;
  const NvTmap wm = nv_emu_map2<NvTmap>(w.data(), k / 8, n, (long)k / 2, ks / 8, 16, 4, false);
  const NvTmap sm = nv_emu_map2<NvTmap>(s.data(), groups, n, pitch, ks / gs, 16, 2, false);
  const NvTmap bm = nv_emu_map2<NvTmap>(b.data(), groups, n, pitch, ks / gs, 16, 2, false);
  nv_emu_smem_base = nvqt_raw;
  nv_emu_launch({std::min(blocks, (unsigned)a.tiles), 1, 1}, (NVQT_CONSUMERS + 1) * 32,
                [&] { nvqt_qmv<T>(&wm, &sm, &bm, x.data(), y.data(), a); });
  double err = 0, top = 0;
  for (int r = 0; r < m; ++r)
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int c = 0; c < k; ++c) {
        const u32 q = (w[((size_t)j * k + c) / 8] >> (4 * (c % 8))) & 15u;
        const size_t at = (size_t)j * groups + c / gs;
        const float sv = nv_up<T>(s[at]), bv = nv_up<T>(b[at]);
        acc += (double)nv_up<T>(x[(size_t)r * k + c]) *
               nv_up<T>(nv_down<T>(std::fma((float)q, sv, bv)));
      }
      err = nv_emu_worse(err, std::abs(acc - nv_up<T>(y[(size_t)r * n + j])));
      top = std::max(top, std::abs(acc));
    }
  std::printf("qmv_tma %s m %d n %d k %d gs %d blocks %u: rel to rounded weights %.3g\n",
              std::is_same<T, bf16>::value ? "bf16" : "f16", m, n, k, gs, blocks, err / top);
  return err / top < 4e-3 ? 0 : 1;
}

int main() {
  int bad = 0;
  bad += tma_case<bf16>(1, 40, 1024, 64, 2, 1);
  bad += tma_case<bf16>(3, 33, 1536, 32, 1, 2);
  bad += tma_case<bf16>(8, 16, 2048, 128, 3, 3);
  bad += tma_case<f16>(1, 50, 1152, 64, 2, 4);
  bad += tma_case<f16>(5, 17, 384, 32, 4, 5);
  bad += tma_case<bf16>(2, 24, 9 * 1024 + 160, 32, 1, 6);
  bad += tma_case<bf16>(4, 20, 2560, 64, 2, 7);  // three stages: a pair, then one alone
  bad += tma_case<f16>(1, 70, 5 * 1024, 128, 2, 8);
  std::printf(bad ? "FAIL %d\n" : "ALL OK\n", bad);
  return bad;
}
