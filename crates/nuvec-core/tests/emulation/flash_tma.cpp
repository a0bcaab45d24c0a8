// flash_tma.cu's Hopper prefill in the emulation (a producer warpgroup loading by TMA into
// stages on shared-memory barriers, consumers on wgmma) against attention in double on the
// same rounded inputs: head sizes 64 and 128, every mask kind, sinks, grouped heads, causal
// with more keys than queries, lengths that are not multiples of the tiles, two consumers and
// (head size 64) three. Built and run by tests/kernel_emulation.rs, once as the kernel is, once
// in FlashAttention-3's block order over a small L2, and once and again with the consumers taking
// turns (NV_T_PINGPONG=1), the second time over three stages in that block order (the defaults
// on Hopper for head size 64).
#include <algorithm>
#include <random>

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

template <int D, int NC, int MASK, bool CAUSAL, bool SINKS>
static int tma_case(int B, int HQ, int HKV, int LQ, int LK, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto fill = [&](size_t n) {
    std::vector<bf16> v(n);
    for (auto& x : v) x = nv_down<bf16>(u(rng));
    return v;
  };
  auto q = fill((size_t)B * HQ * LQ * D), k = fill((size_t)B * HKV * LK * D),
       v = fill((size_t)B * HKV * LK * D);
  auto mask = fill((size_t)B * HQ * LQ * LK), sinks = fill(HQ);
  std::vector<unsigned char> keep((size_t)LQ * LK);
  for (size_t i = 0; i < keep.size(); ++i) keep[i] = i >= (size_t)LK && u(rng) > -0.4f;
  NvFlash a{};
  a.q_strides[0] = (i64)HQ * LQ * D;
  a.q_strides[1] = (i64)LQ * D;
  a.q_strides[2] = D;
  a.k_strides[0] = (i64)HKV * LK * D;
  a.k_strides[1] = (i64)LK * D;
  a.k_strides[2] = D;
  for (int i = 0; i < 3; ++i) a.v_strides[i] = a.k_strides[i];
  const void* mptr = nullptr;
  if (MASK == 1) {
    a.m_strides[2] = LK;
    a.m_strides[3] = 1;
    mptr = keep.data();
  }
  if (MASK == 2) {
    a.m_strides[0] = (i64)HQ * LQ * LK;
    a.m_strides[1] = (i64)LQ * LK;
    a.m_strides[2] = LK;
    a.m_strides[3] = 1;
    mptr = mask.data();
  }
  a.s_stride = 1;
  a.hq = HQ;
  a.group = HQ / HKV;
  a.lq = LQ;
  a.lk = LK;
  const float scale = 0.7f / std::sqrt((float)D);
  a.scale = scale * NV_FLASH_LOG2E;
  constexpr int BM = 64 * NC;
  const NvTmap qm = map_of(q.data(), D, LQ, HQ, B, BM),
               km = map_of(k.data(), D, LK, HKV, B, NV_H_BN),
               vm = map_of(v.data(), D, LK, HKV, B, NV_H_BN);
  std::vector<bf16> out((size_t)B * HQ * LQ * D);
  nv_emu_smem_base = nv_t_smem;
  nv_emu_launch({(unsigned)((LQ + BM - 1) / BM), (unsigned)HQ, (unsigned)B}, 128 * (NC + 1), [&] {
    nv_flash_tma<bf16, D, D, MASK, CAUSAL, SINKS, NC>(&qm, &km, &vm, mptr, sinks.data(), out.data(),
                                                      a);
  });
  nv_emu_mix(out);
  const double L2E = 1.4426950408889634;
  double worst = 0, top = 0;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < HQ; ++h)
      for (int i = 0; i < LQ; ++i) {
        const int kvh = h / (HQ / HKV);
        std::vector<double> x(LK);
        double m = SINKS ? nv_up(sinks[h]) * L2E : -INFINITY;
        for (int j = 0; j < LK; ++j) {
          double dot = 0;
          for (int f = 0; f < D; ++f)
            dot += (double)nv_up(q[(((size_t)b * HQ + h) * LQ + i) * D + f]) *
                   nv_up(k[(((size_t)b * HKV + kvh) * LK + j) * D + f]);
          double s2 = dot * scale * L2E;
          if (MASK == 1 && !keep[(size_t)i * LK + j]) s2 = NV_FLASH_HIDDEN;
          if (MASK == 2) s2 += nv_up(mask[(((size_t)b * HQ + h) * LQ + i) * LK + j]) * L2E;
          if (CAUSAL && j > i + (LK - LQ)) s2 = -INFINITY;
          x[j] = s2;
          m = std::max(m, s2);
        }
        double den = SINKS ? std::exp2(nv_up(sinks[h]) * L2E - m) : 0;
        std::vector<double> o(D, 0.0);
        for (int j = 0; j < LK; ++j) {
          const double w = std::exp2(x[j] - m);
          den += w;
          for (int f = 0; f < D; ++f)
            o[f] += w * nv_up(v[(((size_t)b * HKV + kvh) * LK + j) * D + f]);
        }
        for (int f = 0; f < D; ++f) {
          const double want = o[f] / den, got = nv_up(out[(((size_t)b * HQ + h) * LQ + i) * D + f]);
          worst = std::max(worst, std::abs(want - got));
          top = std::max(top, std::abs(want));
        }
      }
  std::printf(
      "tma D %d consumers %d mask %d causal %d sinks %d B %d HQ %d HKV %d LQ %d LK %d: rel err "
      "%.3g\n",
      D, NC, MASK, CAUSAL, SINKS, B, HQ, HKV, LQ, LK, worst / top);
  return worst / top < 1.0 / 64 ? 0 : 1;
}

int main() {
  int bad = 0;
  bad += tma_case<64, 2, 0, false, false>(1, 2, 1, 130, 300, 1);
  bad += tma_case<128, 2, 0, true, false>(1, 2, 2, 200, 260, 2);
  bad += tma_case<64, 2, 1, false, true>(1, 2, 1, 70, 129, 3);
  bad += tma_case<128, 2, 2, true, true>(2, 2, 1, 100, 100, 4);
  bad += tma_case<64, 3, 0, true, false>(1, 2, 2, 250, 400, 5);
  bad += tma_case<64, 3, 2, false, true>(1, 1, 1, 100, 200, 6);
  std::printf("bits %016llx\n", nv_emu_bits);
  std::printf(bad ? "FAIL %d\n" : "ALL OK\n", bad);
  return bad;
}
