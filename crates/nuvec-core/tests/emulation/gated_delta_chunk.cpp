// gated_delta_chunk.cu's kernels in the emulation (the first kernel with both load paths, then
// the walk across the chunks) against the recurrence in double on the same rounded inputs.
// Built and run by tests/kernel_emulation.rs.
#include <random>
#include <algorithm>

template <int DK, int DV>
int run(int B, int T, int HK, int HV, int vec, unsigned seed) {
  constexpr int C = NV_GDC_C;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f), ug(0.85f, 1.0f), ub(0.1f, 0.9f);
  auto bfv = [&](size_t n, float s) {
    std::vector<bf16> v(n);
    for (auto& x : v) x = __float2bfloat16_rn(u(rng) * s);
    return v;
  };
  auto q = bfv((size_t)B * T * HK * DK, 1.0f / std::sqrt((float)DK));
  auto k = bfv((size_t)B * T * HK * DK, 1.0f / std::sqrt((float)DK));
  auto v = bfv((size_t)B * T * HV * DV, 1.0f);
  std::vector<float> g((size_t)B * T * HV), beta((size_t)B * T * HV),
      state((size_t)B * HV * DV * DK);
  for (auto& x : g) x = ug(rng);
  for (auto& x : beta) x = ub(rng);
  for (auto& x : state) x = u(rng) * 0.1f;
  NvGd a{};
  a.q[0] = (i64)T * HK * DK;
  a.q[1] = (i64)HK * DK;
  a.q[2] = DK;
  a.q[3] = 1;
  for (int i = 0; i < 4; ++i) a.k[i] = a.q[i];
  a.v[0] = (i64)T * HV * DV;
  a.v[1] = (i64)HV * DV;
  a.v[2] = DV;
  a.v[3] = 1;
  a.g[0] = (i64)T * HV;
  a.g[1] = HV;
  a.g[2] = 1;
  for (int i = 0; i < 3; ++i) a.beta[i] = a.g[i];
  a.steps = T;
  a.hv = HV;
  a.dv = DV;
  a.group = HV / HK;
  a.types = 2 | (2 << 2) | (2 << 4) | (0 << 6) | (0 << 8) | (2 << 10);
  const int nt = (T + C - 1) / C, heads = B * HV;
  typedef NvGdcWs<DK, DV> Ws;
  std::vector<bf16> wsh((size_t)heads * nt * Ws::HALF);
  std::vector<float> wsf((size_t)heads * nt * Ws::FLOAT);
  std::vector<float> out(state.size());
  std::vector<bf16> y((size_t)B * T * HV * DV);
  nv_emu_launch({(unsigned)(heads * nt), 1, 1}, 128, [&] {
    nv_gdc_prep<bf16, DK, DV>(q.data(), k.data(), v.data(), g.data(), beta.data(), wsh.data(),
                              wsf.data(), a, nt, vec);
  });
  nv_emu_launch({(unsigned)(heads * (DV / 32)), 1, 1}, 128, [&] {
    nv_gdc_state<bf16, float, DK, DV>(state.data(), out.data(), y.data(), wsh.data(), wsf.data(),
                                      a, nt);
  });
  // Reference: the recurrence in double on the rounded inputs.
  double ey = 0, ty = 0, es = 0, ts = 0;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < HV; ++h) {
      const int hk = h / (HV / HK);
      std::vector<double> S((size_t)DV * DK);
      for (int i = 0; i < DV * DK; ++i) S[i] = state[((size_t)(b * HV + h)) * DV * DK + i];
      for (int t = 0; t < T; ++t) {
        const size_t gi = ((size_t)b * T + t) * HV + h;
        const double gt = g[gi], bt = beta[gi];
        auto qv = [&](int d) { return (double)nv_up(q[(((size_t)b * T + t) * HK + hk) * DK + d]); };
        auto kv = [&](int d) { return (double)nv_up(k[(((size_t)b * T + t) * HK + hk) * DK + d]); };
        for (int r = 0; r < DV; ++r) {
          double rec = 0;
          for (int d = 0; d < DK; ++d) {
            S[r * DK + d] *= gt;
            rec += S[r * DK + d] * kv(d);
          }
          const double delta =
              bt * ((double)nv_up(v[(((size_t)b * T + t) * HV + h) * DV + r]) - rec);
          double yy = 0;
          for (int d = 0; d < DK; ++d) {
            S[r * DK + d] += delta * kv(d);
            yy += S[r * DK + d] * qv(d);
          }
          const size_t yi = (((size_t)b * T + t) * HV + h) * DV + r;
          ey = nv_emu_worse(ey, std::abs(yy - nv_up(y[yi])));
          ty = std::max(ty, std::abs(yy));
        }
      }
      for (int i = 0; i < DV * DK; ++i) {
        const size_t si = ((size_t)(b * HV + h)) * DV * DK + i;
        es = nv_emu_worse(es, std::abs(S[i] - out[si]));
        ts = std::max(ts, std::abs(S[i]));
      }
    }
  nv_emu_mix(y);
  nv_emu_mix(out);
  std::printf("DK %d DV %d T %d vec %d: y rel %.3g, state rel %.3g\n", DK, DV, T, vec, ey / ty,
              es / ts);
  return (ey / ty < 3e-2 && es / ts < 3e-2) ? 0 : 1;
}

int main() {
  int bad = 0;
  bad += run<64, 64>(1, 100, 1, 2, 7, 1);
  bad += run<64, 64>(1, 100, 1, 2, 0, 2);
  bad += run<128, 64>(1, 130, 1, 1, 7, 3);
  bad += run<64, 128>(2, 64, 2, 2, 0, 4);
  std::printf("bits %016llx\n", nv_emu_bits);
  std::printf(bad ? "FAIL %d\n" : "ALL OK\n", bad);
  return bad;
}
