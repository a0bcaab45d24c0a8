// quantized_mv_mma.cu's tensor-core matrix-vector products in the emulation, both forms (bf16
// and f16; 1 to 11 rows of x, so that a second block of 8 rows along z is partly empty; rows of
// w not a multiple of 16; groups of 32, 64 and 128; the instantiated tiles a warp and slices of
// k a block, with slices that get no chunk and slices that get up to 4; the loops as built and
// in their other forms) against the product in double twice: with each weight s · q + b
// rounded once to the activations' type and exact. The rounded form must be close to the
// first (it rounds so; the inner axis's last chunk of 128 values partial in some cases); every
// output of the grouped form must be the exact product rounded to T, give or take the f32 sums
// (each weight is exact there). Built and run by tests/kernel_emulation.rs.
#include <algorithm>
#include <random>

// P: 0 for the rounded form, else the grouped form's (gs = 32 P).
template <typename T, int R, int S, int P = 0>
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
    nvqm_qmv<T, R, S, P>(x.data(), w.data(), s.data(), b.data(), y.data(), a);
  });
  // Outputs further from the exact sum than their own rounding to T allows: half a unit in the
  // last place, plus 2^-21 of the grouped form's f32 terms' sizes (its sums of x (o + q) and of
  // x take o = 2^7 (bf16) or 2^10 (f16) in place of each weight's size, and cancel by o s);
  // counted for both forms, required to be none of the grouped form's.
  const int digits = std::is_same<T, bf16>::value ? 8 : 11;
  const double o = std::is_same<T, bf16>::value ? 128 : 1024;
  double rounded = 0, exact = 0, top = 0;
  std::vector<double> want((size_t)m * n), size((size_t)m * n);
  for (int r = 0; r < m; ++r)
    for (int j = 0; j < n; ++j) {
      double acc_r = 0, acc_e = 0, terms = 0;
      for (int c = 0; c < k; ++c) {
        const u32 q = (w[((size_t)j * k + c) / 8] >> (4 * (c % 8))) & 15u;
        const size_t at = (size_t)j * groups + c / gs;
        const float sv = nv_up<T>(s[at]), bv = nv_up<T>(b[at]);
        const double xv = nv_up<T>(x[(size_t)r * k + c]);
        acc_r += xv * nv_up<T>(nv_down<T>(std::fma((float)q, sv, bv)));
        acc_e += xv * ((double)q * sv + bv);
        terms += std::abs(xv) * (std::abs(sv) * (o + q) + std::abs(bv - o * sv));
      }
      const double got = nv_up<T>(y[(size_t)r * n + j]);
      rounded = nv_emu_worse(rounded, std::abs(got - acc_r));
      exact = nv_emu_worse(exact, std::abs(got - acc_e));
      top = std::max(top, std::abs(acc_e));
      want[(size_t)r * n + j] = acc_e;
      size[(size_t)r * n + j] = terms;
    }
  int beyond = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double got = nv_up<T>(y[i]), e = want[i];
    const double half_ulp = e == 0 ? 0 : std::ldexp(0.5, std::ilogb(e) - (digits - 1));
    if (!(std::abs(got - e) <= half_ulp + std::ldexp(size[i], -21))) ++beyond;
  }
  std::printf("qmv_mma %s %s r %d s %d m %d n %d k %d gs %d: rel to rounded weights %.3g, to "
              "exact %.3g; %d of %zu past their rounding\n",
              P == 0 ? "rounded" : "grouped", std::is_same<T, bf16>::value ? "bf16" : "f16", R, S,
              m, n, k, gs, rounded / top, exact / top, beyond, want.size());
  if (P == 0) return rounded / top < 4e-3 && exact / top < 1.0 / 64 ? 0 : 1;
  return beyond == 0 ? 0 : 1;
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
  // The grouped form: whole chunks of 128 values (the host sends no other).
  bad += qmv_mma_case<bf16, 2, 4, 2>(1, 40, 384, 64, 11);
  bad += qmv_mma_case<bf16, 2, 4, 1>(3, 33, 512, 32, 12);
  bad += qmv_mma_case<bf16, 2, 4, 4>(8, 16, 512, 128, 13);
  bad += qmv_mma_case<bf16, 2, 4, 2>(11, 100, 256, 64, 14);
  bad += qmv_mma_case<f16, 2, 4, 4>(1, 40, 384, 128, 15);
  bad += qmv_mma_case<f16, 2, 4, 1>(5, 17, 128, 32, 16);
  bad += qmv_mma_case<f16, 2, 4, 2>(2, 50, 640, 64, 17);
  bad += qmv_mma_case<bf16, 1, 4, 1>(2, 40, 640, 32, 18);
  bad += qmv_mma_case<bf16, 2, 2, 2>(1, 70, 384, 64, 19);
  bad += qmv_mma_case<bf16, 2, 8, 4>(4, 40, 1280, 128, 20);
  // 13 chunks over 4 slices: 4, 3, 3 and 3 a slice (the loop of two chunks ends on either).
  bad += qmv_mma_case<bf16, 2, 4, 2>(2, 24, 1664, 64, 21);
  std::printf(bad ? "FAIL %d\n" : "ALL OK\n", bad);
  return bad;
}
