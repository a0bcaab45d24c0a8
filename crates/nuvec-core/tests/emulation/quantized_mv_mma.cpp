// quantized_mv_mma.cu's tensor-core matrix-vector product in the emulation (bf16 and f16; 1 to
// 11 rows of x, so that a second block of 8 rows along z is partly empty; rows of w not a
// multiple of 16; an inner axis whose last chunk of 128 values is partial; groups of 32, 64
// and 128; the instantiated tiles a warp and slices of k a block; the unrolled loop as built
// and not) against the product in double twice: with each weight s · q + b rounded once to the
// activations' type, as the kernel rounds it (tight), and exact (loose). Built and run by
// tests/kernel_emulation.rs.
#include <algorithm>
#include <random>

template <typename T, int R, int S>
static int qmv_mma_case(int m, int n, int k, int gs, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::uniform_int_distribution<u32> wd;
  const int packs = k / 32, groups = k / gs;
  std::vector<T> x((size_t)m * k), s((size_t)n * groups), b(s.size()), y((size_t)m * n);
  std::vector<u32> w((size_t)n * k / 8);
  for (auto& e : x) e = nv_down<T>(u(rng));
  for (auto& e : w) e = wd(rng);
  for (auto& e : s) e = nv_down<T>(u(rng) * 0.05f);
  for (auto& e : b) e = nv_down<T>(u(rng) * 0.1f);
  for (auto& e : y) e = nv_down<T>(12345.0f);  // every output must be written
  NvQmvMma a{n, m, packs, groups, __builtin_ctz(gs / 32), 0x000F000Fu};
  const int rows = 16 * R * (NVQM_WARPS / S);
  const unsigned tiles = (unsigned)((n + rows - 1) / rows);
  nv_emu_launch({tiles, 1, (unsigned)((m + 7) / 8)}, NVQM_WARPS * 32, [&] {
    nvqm_qmv<T, R, S>(x.data(), w.data(), s.data(), b.data(), y.data(), a);
  });
  double rounded = 0, exact = 0, top = 0;
  for (int r = 0; r < m; ++r)
    for (int j = 0; j < n; ++j) {
      double acc_r = 0, acc_e = 0;
      for (int c = 0; c < k; ++c) {
        const u32 q = (w[((size_t)j * k + c) / 8] >> (4 * (c % 8))) & 15u;
        const size_t at = (size_t)j * groups + c / gs;
        const float sv = nv_up<T>(s[at]), bv = nv_up<T>(b[at]);
        const double xv = nv_up<T>(x[(size_t)r * k + c]);
        acc_r += xv * nv_up<T>(nv_down<T>(std::fma((float)q, sv, bv)));
        acc_e += xv * ((double)q * sv + bv);
      }
      const double got = nv_up<T>(y[(size_t)r * n + j]);
      rounded = nv_emu_worse(rounded, std::abs(got - acc_r));
      exact = nv_emu_worse(exact, std::abs(got - acc_e));
      top = std::max(top, std::abs(acc_e));
    }
  std::printf("qmv_mma %s r %d s %d m %d n %d k %d gs %d: rel to rounded weights %.3g, to exact "
              "%.3g\n",
              std::is_same<T, bf16>::value ? "bf16" : "f16", R, S, m, n, k, gs, rounded / top,
              exact / top);
  return rounded / top < 4e-3 && exact / top < 1.0 / 64 ? 0 : 1;
}

int main() {
  int bad = 0;
  bad += qmv_mma_case<bf16, 2, 4>(1, 40, 384, 64, 1);
  bad += qmv_mma_case<bf16, 2, 4>(3, 33, 416, 32, 2);
  bad += qmv_mma_case<bf16, 2, 4>(8, 16, 512, 128, 3);
  bad += qmv_mma_case<bf16, 2, 4>(11, 100, 256, 64, 4);
  bad += qmv_mma_case<f16, 2, 4>(1, 40, 384, 128, 5);
  bad += qmv_mma_case<f16, 2, 4>(5, 17, 96, 32, 6);
  bad += qmv_mma_case<bf16, 1, 4>(2, 40, 416, 32, 7);
  bad += qmv_mma_case<bf16, 2, 2>(1, 70, 384, 64, 8);
  bad += qmv_mma_case<bf16, 2, 8>(4, 40, 1280, 128, 9);
  std::printf(bad ? "FAIL %d\n" : "ALL OK\n", bad);
  return bad;
}
