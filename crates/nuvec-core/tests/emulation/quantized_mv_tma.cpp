// quantized_mv_tma.cu's TMA-fed decoding product in the emulation (the tensor copies and the
// ring's barriers as ptx.h's stand-ins) against the product in double over each weight s · q + b
// rounded once to the activations' type, as the kernel rounds it: bf16 and f16, 1 to 8 rows of
// x, rows of w not a multiple of 16, inner axes with a partial last stage and a partial last
// chunk, groups of 32, 64 and 128, more tiles than blocks (the persistent walk) and more stages
// than the ring holds (it wraps). The column form (P > 0) against the product over each weight
// s · q + b unrounded, as it computes it, for the rows it takes (8 / P). Built and run by
// tests/kernel_emulation.rs.
#include <algorithm>
#include <random>

template <typename T, int P = 0>
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
  a.xsums_at = a.sums_at + 2 * NVQT_CONSUMERS * 4 * 32 * 4;
  a.bars_at = a.xsums_at + a.stages * (ks / 128) * 8 * 4;
  // The maps nv_tma2's stand-in reads.
  const long pitch = (long)groups * 2;
  const NvTmap wm = nv_emu_map2<NvTmap>(w.data(), k / 8, n, (long)k / 2, ks / 8, 16, 4, false);
  const NvTmap sm = nv_emu_map2<NvTmap>(s.data(), groups, n, pitch, ks / gs, 16, 2, false);
  const NvTmap bm = nv_emu_map2<NvTmap>(b.data(), groups, n, pitch, ks / gs, 16, 2, false);
  nv_emu_smem_base = nvqt_raw;
  nv_emu_launch({std::min(blocks, (unsigned)a.tiles), 1, 1}, (NVQT_CONSUMERS + 1) * 32,
                [&] { nvqt_qmv<T, P>(&wm, &sm, &bm, x.data(), y.data(), a); });
  double err = 0, top = 0;
  for (int r = 0; r < m; ++r)
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int c = 0; c < k; ++c) {
        const u32 q = (w[((size_t)j * k + c) / 8] >> (4 * (c % 8))) & 15u;
        const size_t at = (size_t)j * groups + c / gs;
        const float sv = nv_up<T>(s[at]), bv = nv_up<T>(b[at]);
        const double wv = P == 0 ? (double)nv_up<T>(nv_down<T>(std::fma((float)q, sv, bv)))
                                 : (double)q * sv + bv;
        acc += (double)nv_up<T>(x[(size_t)r * k + c]) * wv;
      }
      err = nv_emu_worse(err, std::abs(acc - nv_up<T>(y[(size_t)r * n + j])));
      top = std::max(top, std::abs(acc));
    }
  std::printf("qmv_tma %s P %d m %d n %d k %d gs %d blocks %u: rel to %s weights %.3g\n",
              std::is_same<T, bf16>::value ? "bf16" : "f16", P, m, n, k, gs, blocks,
              P == 0 ? "rounded" : "exact", err / top);
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
  // The column form: groups of 128, 64 and 32 (P = 1, 2, 4) at their most rows and fewer.
  bad += tma_case<bf16, 1>(8, 40, 2048, 128, 2, 7);
  bad += tma_case<bf16, 2>(4, 33, 1536, 64, 1, 8);
  bad += tma_case<bf16, 2>(1, 50, 9 * 1024 + 512, 64, 3, 9);
  bad += tma_case<bf16, 4>(2, 17, 1024, 32, 2, 10);
  bad += tma_case<f16, 4>(1, 24, 2304, 32, 1, 11);
  bad += tma_case<f16, 2>(3, 16, 1024, 64, 2, 12);
  std::printf(bad ? "FAIL %d\n" : "ALL OK\n", bad);
  return bad;
}
