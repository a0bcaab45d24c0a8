// quantized_tiled.cu's kernel in the emulation against the product in double over the
// dequantized weights: 3, 4 and 8 bits, groups of 32 to 128, both orientations, 16- and
// 4-byte copies, shapes that are not multiples of the tiles. Built and run by
// tests/kernel_emulation.rs.
#include <random>
#include <algorithm>

template <int B, bool TRANS, int MT, int V>
int run(int M, int N, int K, int gs, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::uniform_int_distribution<u32> wd;
  std::vector<bf16> x((size_t)M * K);
  for (auto& e : x) e = __float2bfloat16_rn(u(rng));
  const int rows = TRANS ? N : K, cols = TRANS ? K : N;  // w's rows, values a row
  const int wrow = cols * B / 32, groups = cols / gs;
  std::vector<u32> w((size_t)rows * wrow);
  for (auto& e : w) e = wd(rng);
  std::vector<bf16> s((size_t)rows * groups), b((size_t)rows * groups);
  for (auto& e : s) e = __float2bfloat16_rn(u(rng) * 0.05f);
  for (auto& e : b) e = __float2bfloat16_rn(u(rng) * 0.1f);
  NvQmm a{};
  a.m = M;
  a.n = N;
  a.xmats = 1;
  a.experts = 1;
  a.indices = 1;
  a.k = K;
  a.wrow = wrow;
  a.groups = groups;
  a.gs_shift = __builtin_ctz(gs / 32);
  a.wvec = V;
  a.mrows = M;
  a.mode = 0;
  std::vector<bf16> y((size_t)M * N);
  typedef NvqTile<bf16, B, TRANS, MT> S;
  nv_emu_launch({(unsigned)((N + 255) / 256), (unsigned)((M + S::BM - 1) / S::BM), 1}, 256, [&] {
    nvq_qmm<bf16, B, TRANS, MT, V>(x.data(), w.data(), s.data(), b.data(), y.data(), nullptr,
                                   nullptr, nullptr, a);
  });
  auto deq = [&](int r, int c) {  // value c of row r of w
    const u32* p = w.data() + (size_t)r * wrow + (c / 32) * B;
    u32 pk[B];
    for (int i = 0; i < B; ++i) pk[i] = p[i];
    const int j = c % 32, at = j * B / 32, off = j * B % 32;
    u32 q = pk[at] >> off;
    if (off + B > 32) q |= pk[at + 1] << (32 - off);
    q &= (1u << B) - 1u;
    const int gi = r * groups + c / gs;
    return (double)q * nv_up(s[gi]) + nv_up(b[gi]);
  };
  double err = 0, top = 0;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double acc = 0;
      for (int k = 0; k < K; ++k)
        acc += (double)nv_up(x[(size_t)m * K + k]) * (TRANS ? deq(n, k) : deq(k, n));
      err = nv_emu_worse(err, std::abs(acc - nv_up(y[(size_t)m * N + n])));
      top = std::max(top, std::abs(acc));
    }
  std::printf("B %d TRANS %d MT %d V %d M %d N %d K %d g %d: rel err %.3g\n", B, TRANS, MT, V, M, N,
              K, gs, err / top);
  return err / top < 2e-2 ? 0 : 1;
}

int main() {
  int bad = 0;
  bad += run<4, true, 4, 16>(70, 300, 320, 64, 1);
  bad += run<4, true, 2, 16>(33, 260, 256, 128, 2);
  bad += run<3, true, 4, 4>(20, 100, 320, 32, 3);
  bad += run<4, false, 4, 16>(40, 256, 192, 64, 4);
  bad += run<8, true, 2, 16>(17, 64, 128, 32, 5);
  std::printf(bad ? "FAIL %d\n" : "ALL OK\n", bad);
  return bad;
}
