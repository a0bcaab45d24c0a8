// The prefill kernels' emulation cases (flash.cpp, flash_f32.cpp, flash_tma.cpp): inputs of T
// (every mask kind, sinks, grouped heads, [B, H, L, D] or transposed [B, L, H, D] views), the
// kernel run by `launch(q, k, v, mask, sinks, out, args)` into an output filled with a value no
// kernel writes, and its largest error against attention in double on the same inputs,
// relative to the largest output. The outputs' bits go into the emulation's hash.
#include <algorithm>
#include <random>

template <typename T, int D, int DV, int MASK, bool CAUSAL, bool SINKS, typename Launch>
double flash_case(int B, int HQ, int HKV, int LQ, int LK, unsigned seed, bool transposed,
                  Launch launch) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  // q [B, HQ, LQ, D] possibly as a transposed view of [B, LQ, HQ, D].
  auto fill = [&](std::vector<T>& v, size_t n) {
    v.resize(n);
    for (auto& x : v) x = nv_down<T>(u(rng));
  };
  std::vector<T> q, k, v, mask, sinks;
  fill(q, (size_t)B * HQ * LQ * D);
  fill(k, (size_t)B * HKV * LK * D);
  fill(v, (size_t)B * HKV * LK * DV);
  fill(sinks, HQ);
  std::vector<unsigned char> bmask((size_t)LQ * LK);
  for (size_t i = 0; i < bmask.size(); ++i) bmask[i] = (i >= (size_t)LK) && (u(rng) > -0.4f);
  fill(mask, (size_t)B * HQ * LQ * LK);
  NvFlash a{};
  auto strides = [&](i64* s, int H, int L, int DD) {
    if (transposed) {
      s[0] = (i64)L * H * DD;
      s[1] = DD;
      s[2] = (i64)H * DD;
    } else {
      s[0] = (i64)H * L * DD;
      s[1] = (i64)L * DD;
      s[2] = DD;
    }
  };
  strides(a.q_strides, HQ, LQ, D);
  strides(a.k_strides, HKV, LK, D);
  strides(a.v_strides, HKV, LK, DV);
  const void* mptr = nullptr;
  if (MASK == 1) {
    a.m_strides[0] = 0;
    a.m_strides[1] = 0;
    a.m_strides[2] = LK;
    a.m_strides[3] = 1;
    mptr = bmask.data();
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
  a.batch = B;
  a.group = HQ / HKV;
  a.lq = LQ;
  a.lk = LK;
  // A negative scale (NV_CASE_NEGATIVE_SCALE) takes the kernels' path that does not fold it.
#ifdef NV_CASE_NEGATIVE_SCALE
  const float scale = -0.7f / std::sqrt((float)D);
#else
  const float scale = 0.7f / std::sqrt((float)D);
#endif
  a.scale = scale * NV_FLASH_LOG2E;
  std::vector<T> out((size_t)B * HQ * LQ * DV, nv_down<T>(12345.f));
  launch(q.data(), k.data(), v.data(), mptr, sinks.data(), out.data(), a);
  nv_emu_mix(out);
  double worst = 0, top = 0;
  const double L2E = 1.4426950408889634;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < HQ; ++h)
      for (int i = 0; i < LQ; ++i) {
        const int kvh = h / (HQ / HKV);
        std::vector<double> x(LK);
        double m = SINKS ? nv_up(sinks[h]) * L2E : -INFINITY;
        for (int j = 0; j < LK; ++j) {
          double d = 0;
          for (int f = 0; f < D; ++f)
            d +=
                (double)nv_up(q[b * a.q_strides[0] + h * a.q_strides[1] + i * a.q_strides[2] + f]) *
                nv_up(k[b * a.k_strides[0] + kvh * a.k_strides[1] + j * a.k_strides[2] + f]);
          double s2 = d * scale * L2E;
          if (MASK == 1 && !bmask[(size_t)i * LK + j]) s2 = NV_FLASH_HIDDEN;
          if (MASK == 2) s2 += nv_up(mask[((size_t)(b * HQ + h) * LQ + i) * LK + j]) * L2E;
          if (CAUSAL && j > i + (LK - LQ)) s2 = -INFINITY;
          x[j] = s2;
          m = std::max(m, s2);
        }
        double den = SINKS ? std::exp2(nv_up(sinks[h]) * L2E - m) : 0;
        std::vector<double> o(DV, 0.0);
        for (int j = 0; j < LK; ++j) {
          const double w = std::exp2(x[j] - m);
          den += w;
          for (int f = 0; f < DV; ++f)
            o[f] +=
                w * nv_up(v[b * a.v_strides[0] + kvh * a.v_strides[1] + j * a.v_strides[2] + f]);
        }
        for (int f = 0; f < DV; ++f) {
          const double want = o[f] / den,
                       got = nv_up(out[(((size_t)b * HQ + h) * LQ + i) * DV + f]);
          worst = nv_emu_worse(worst, std::abs(want - got));
          top = std::max(top, std::abs(want));
        }
      }
  return worst / std::max(top, 1e-30);
}

