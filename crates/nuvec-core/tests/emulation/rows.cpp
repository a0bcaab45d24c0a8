// norms.cu's and softmax.cu's row kernels and the norms' gradients in the emulation (bf16; a warp a
// row, and a block of four warps a row; whole packs and element by element; a grid of fewer blocks
// than rows, so that each block loops, which the prefetching forms need): the norms against the CPU
// kernels' formula and roundings in float, softmax and log-sum-exp against double. Built and
// run by tests/kernel_emulation.rs, once as the kernels are and once with their prefetching
// forms.
#include <algorithm>
#include <limits>
#include <random>

static float up(bf16 x) { return nv_up<bf16>(x); }
static bf16 down(float x) { return nv_down<bf16>(x); }

// The CPU kernels' norm of one row (float statistics in order; the output rounded as
// nv_norm_out does), with the residual sum first when `r` is given.
static void norm_ref(const bf16* x, const bf16* r, const bf16* w, const bf16* b, int n, float eps,
                     bool centre, bf16* y, bf16* h) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) {
    v[i] = up(x[i]);
    if (r) {
      h[i] = down(v[i] + up(r[i]));
      v[i] = up(h[i]);
    }
  }
  double mean = 0;
  if (centre) {
    for (float e : v) mean += e;
    mean /= n;
  }
  double sq = 0;
  for (float e : v) sq += (e - mean) * (e - mean);
  const float inv = (float)(1.0 / std::sqrt(sq / n + eps));
  for (int i = 0; i < n; ++i) {
    float z = up(down((v[i] - (float)mean) * inv));
    z = up(down(z * up(w[i])));
    if (b) z = up(down(z + up(b[i])));
    y[i] = down(z);
  }
}

template <int P, bool packed, bool full, bool res, bool centre>
static int norm_case(int nrows, int n, int lanes, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  auto fill = [&](size_t k) {
    std::vector<bf16> v(k);
    for (auto& e : v) e = down(u(rng));
    return v;
  };
  auto x = fill((size_t)nrows * n), r = fill((size_t)nrows * n), w = fill(n), b = fill(n);
  std::vector<bf16> y((size_t)nrows * n), h((size_t)nrows * n), ry(y.size()), rh(h.size());
  Strided rows{};
  rows.shape[0] = nrows;
  rows.strides[0] = n;
  rows.ndim = 1;
  const int block = lanes == 32 ? 256 : lanes, groups = block / lanes;
  const unsigned grid = (unsigned)std::min(3, (nrows + groups - 1) / groups);
  const float eps = 1e-5f;
  nv_emu_launch({grid, 1, 1}, block, [&] {
    nv_norm_pack_rows<bf16, P, packed, full, res, centre>(
        x.data(), rows, 1, res ? r.data() : nullptr, rows, 1, w.data(), 1,
        centre ? b.data() : nullptr, 1, y.data(), res ? h.data() : nullptr, nrows, n, eps, lanes);
  });
  int off = 0;
  double worst = 0;
  for (int t = 0; t < nrows; ++t) {
    norm_ref(&x[(size_t)t * n], res ? &r[(size_t)t * n] : nullptr, w.data(),
             centre ? b.data() : nullptr, n, eps, centre, &ry[(size_t)t * n], &rh[(size_t)t * n]);
    for (int i = 0; i < n; ++i) {
      const size_t at = (size_t)t * n + i;
      const double d = std::abs(up(y[at]) - up(ry[at])),
                   scale = std::max(1.0f, std::abs(up(ry[at])));
      worst = nv_emu_worse(worst, d / scale);
      if (d > scale / 64) ++off;
      if (res && h[at].b != rh[at].b) ++off;
    }
  }
  std::printf("norm P %d packed %d full %d res %d centre %d rows %d n %d lanes %d: worst %.3g, off %d\n",
              P, packed, full, res, centre, nrows, n, lanes, worst, off);
  return off == 0 ? 0 : 1;
}

// Softmax or log-sum-exp against double; rows 0 to 3 (of at least 4) hold a +inf, only -inf,
// some -inf (below) and a NaN: log-sum-exp gives +inf, -inf, the finite elements' and NaN, softmax
// NaN everywhere but in row 2 (0 at the -inf).
template <int P, bool packed, bool full, bool lse>
static int softmax_case(int nrows, int n, int lanes, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  std::vector<bf16> x((size_t)nrows * n), out(lse ? nrows : (size_t)nrows * n);
  for (auto& e : x) e = down(u(rng));
  const float inf = std::numeric_limits<float>::infinity();
  x[n / 2] = down(inf);
  for (int i = 0; i < n; ++i) x[(size_t)n + i] = down(-inf);
  // Row 2: -inf at every fifth element and in every pack of the first four threads (whose
  // own maxima are then -inf in a finite row).
  for (int i = 0; i < n; ++i)
    if (i % 5 == 0 || (i / 8) % 32 < 4) x[(size_t)2 * n + i] = down(-inf);
  x[(size_t)3 * n + n - 1] = down(std::numeric_limits<float>::quiet_NaN());
  Strided rows{};
  rows.shape[0] = nrows;
  rows.strides[0] = n;
  rows.ndim = 1;
  const int block = lanes == 32 ? 256 : lanes, groups = block / lanes;
  const unsigned grid = (unsigned)std::min(3, (nrows + groups - 1) / groups);
  nv_emu_launch({grid, 1, 1}, block, [&] {
    nv_softmax_pack_rows<bf16, P, packed, full, lse>(x.data(), rows, 1, out.data(), nrows, n, lanes);
  });
  double worst = 0;
  int off = 0;
  for (int t = 0; t < nrows; ++t) {
    if (t == 0 || t == 1 || t == 3) {
      // A maximum that is not finite: it (log-sum-exp) or NaN (softmax).
      if (lse) {
        const float got = up(out[t]);
        if (t == 0 ? got != inf : (t == 1 ? got != -inf : got == got)) ++off;
      } else {
        for (int i = 0; i < n; ++i)
          if (up(out[(size_t)t * n + i]) == up(out[(size_t)t * n + i])) ++off;
      }
      continue;
    }
    double m = -1e300, s = 0;
    for (int i = 0; i < n; ++i) m = std::max(m, (double)up(x[(size_t)t * n + i]));
    for (int i = 0; i < n; ++i) s += std::exp(up(x[(size_t)t * n + i]) - m);
    if (lse) {
      const double want = m + std::log(s);
      worst = nv_emu_worse(worst, std::abs(want - up(out[t])) / std::max(1.0, std::abs(want)));
    } else {
      for (int i = 0; i < n; ++i) {
        const double want = std::exp(up(x[(size_t)t * n + i]) - m) / s;
        worst = nv_emu_worse(worst, std::abs(want - up(out[(size_t)t * n + i])) / std::max(want, 1e-3));
      }
    }
  }
  std::printf("%s P %d packed %d rows %d n %d lanes %d: worst rel %.3g, specials off %d\n",
              lse ? "logsumexp" : "softmax", P, packed, nrows, n, lanes, worst, off);
  return worst < 1.0 / 64 && off == 0 ? 0 : 1;
}

// Log-sum-exp's warp rows (softmax.cu, nv_lse_warp_rows) against double, with a grid of
// fewer warps than rows; rows 0 to 3 hold a +inf, a NaN, only -inf and some -inf, whose
// results must be +inf, NaN, -inf and the finite elements' log-sum-exp.
template <bool packed>
static int lse_warp_case(int nrows, int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  std::vector<bf16> x((size_t)nrows * n), out(nrows);
  for (auto& e : x) e = down(u(rng));
  const float inf = std::numeric_limits<float>::infinity();
  x[(size_t)0 * n + n / 3] = down(inf);
  x[(size_t)1 * n + n - 1] = down(std::numeric_limits<float>::quiet_NaN());
  for (int i = 0; i < n; ++i) x[(size_t)2 * n + i] = down(-inf);
  for (int i = 0; i < n; i += 3) x[(size_t)3 * n + i] = down(-inf);
  Strided rows{};
  rows.shape[0] = nrows;
  rows.strides[0] = n;
  rows.ndim = 1;
  nv_emu_launch({2, 1, 1}, 256, [&] {
    nv_lse_warp_rows<bf16, NV_LSE_BATCH / NvVec<bf16>::v, packed>(x.data(), rows, 1, out.data(),
                                                                   nrows, n);
  });
  double worst = 0;
  int off = 0;
  for (int t = 0; t < nrows; ++t) {
    const float got = up(out[t]);
    if (t == 0 || t == 2) {
      if (got != (t == 0 ? inf : -inf)) ++off;
      continue;
    }
    if (t == 1) {
      if (got == got) ++off;
      continue;
    }
    double m = -1e300, s = 0;
    for (int i = 0; i < n; ++i) m = std::max(m, (double)up(x[(size_t)t * n + i]));
    for (int i = 0; i < n; ++i) s += std::exp(up(x[(size_t)t * n + i]) - m);
    const double want = m + std::log(s);
    worst = nv_emu_worse(worst, std::abs(want - got) / std::max(1.0, std::abs(want)));
  }
  std::printf("logsumexp warp rows packed %d rows %d n %d: worst rel %.3g, specials off %d\n",
              packed, nrows, n, worst, off);
  return worst < 1.0 / 128 && off == 0 ? 0 : 1;
}

template <int P, bool packed, bool full, bool lay>
static int vjp_case(int nrows, int n, int lanes, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  auto fill = [&](size_t k) {
    std::vector<bf16> v(k);
    for (auto& e : v) e = down(u(rng));
    return v;
  };
  auto x = fill((size_t)nrows * n), g = fill((size_t)nrows * n), w = fill(n);
  std::vector<bf16> dx((size_t)nrows * n), dw(n), db(n);
  const int block = lanes == 32 ? 256 : lanes, groups = block / lanes;
  const unsigned grid = (unsigned)std::min(3, (nrows + groups - 1) / groups);
  const int parts = (int)grid * groups;
  std::vector<float> pw((size_t)parts * n), pb((size_t)parts * n);
  const float eps = 1e-5f;
  nv_emu_launch({grid, 1, 1}, block, [&] {
    nv_norm_vjp_packs<bf16, P, packed, full, lay>(x.data(), w.data(), g.data(), dx.data(), pw.data(),
                                            lay ? pb.data() : nullptr, nrows, n, eps, lanes);
  });
  nv_emu_launch({(unsigned)((n + 31) / 32), 1, 1}, 256,
                [&] { nv_sum_parts<bf16>(pw.data(), parts, n, dw.data()); });
  if (lay)
    nv_emu_launch({(unsigned)((n + 31) / 32), 1, 1}, 256,
                  [&] { nv_sum_parts<bf16>(pb.data(), parts, n, db.data()); });
  std::vector<double> rw(n, 0.0), rb(n, 0.0);
  double worst = 0, top = 0;
  for (int t = 0; t < nrows; ++t) {
    const size_t o = (size_t)t * n;
    double mean = 0, umean = 0;
    if (lay) {
      for (int i = 0; i < n; ++i) {
        mean += up(x[o + i]);
        umean += (double)up(g[o + i]) * up(w[i]);
      }
      mean /= n;
      umean /= n;
    }
    double sq = 0, suc = 0;
    for (int i = 0; i < n; ++i) {
      const double c = up(x[o + i]) - mean;
      sq += c * c;
      suc += (double)up(g[o + i]) * up(w[i]) * c;
    }
    const double inv = 1.0 / std::sqrt(sq / n + eps), proj = suc / n * inv * inv * inv;
    for (int i = 0; i < n; ++i) {
      const double c = up(x[o + i]) - mean, gv = up(g[o + i]);
      const double want = (gv * up(w[i]) - umean) * inv - c * proj;
      worst = nv_emu_worse(worst, std::abs(want - up(dx[o + i])));
      top = std::max(top, std::abs(want));
      rw[i] += gv * c * inv;
      rb[i] += gv;
    }
  }
  double pworst = 0, ptop = 0;
  for (int i = 0; i < n; ++i) {
    pworst = nv_emu_worse(pworst, std::abs(rw[i] - up(dw[i])));
    ptop = std::max(ptop, std::abs(rw[i]));
    if (lay) {
      pworst = nv_emu_worse(pworst, std::abs(rb[i] - up(db[i])));
      ptop = std::max(ptop, std::abs(rb[i]));
    }
  }
  std::printf("%s vjp P %d packed %d rows %d n %d lanes %d: dx rel %.3g, params rel %.3g\n",
              lay ? "layer" : "rms", P, packed, nrows, n, lanes, worst / top, pworst / ptop);
  return (worst / top < 1.0 / 64 && pworst / ptop < 1.0 / 64) ? 0 : 1;
}

int main() {
  int bad = 0;
  // `full` only where the row fills all P packs of its lanes (n = lanes * P * 8); the masked
  // form (full false) also on such rows, and on packed rows that do not fill them.
  bad += norm_case<4, true, true, false, false>(20, 1024, 32, 1);
  bad += norm_case<4, true, true, true, false>(20, 1024, 32, 2);
  bad += norm_case<4, true, true, false, true>(20, 1024, 32, 3);
  bad += norm_case<4, true, true, false, true>(7, 4096, 128, 4);
  bad += norm_case<4, true, false, false, true>(7, 4096, 128, 21);
  bad += norm_case<4, true, true, true, false>(7, 4096, 128, 5);
  bad += norm_case<4, false, false, true, true>(9, 1001, 32, 6);
  bad += norm_case<4, true, false, false, true>(9, 1000, 32, 22);
  bad += softmax_case<4, true, true, false>(20, 1024, 32, 7);
  bad += softmax_case<4, true, true, true>(20, 1024, 32, 8);
  bad += softmax_case<4, true, true, false>(7, 4096, 128, 9);
  bad += softmax_case<4, true, false, false>(7, 4096, 128, 23);
  bad += softmax_case<4, true, true, true>(7, 4096, 128, 19);
  bad += softmax_case<4, false, false, true>(9, 1001, 32, 10);
  bad += softmax_case<4, true, false, false>(9, 1000, 32, 24);
  bad += lse_warp_case<true>(37, 4096, 15);
  bad += lse_warp_case<true>(21, 3000, 16);
  bad += lse_warp_case<true>(9, 200, 17);
  bad += lse_warp_case<false>(19, 1001, 18);
  bad += vjp_case<4, true, true, false>(20, 1024, 32, 11);
  bad += vjp_case<4, true, true, true>(20, 1024, 32, 12);
  bad += vjp_case<4, true, true, false>(7, 4096, 128, 13);
  bad += vjp_case<4, true, true, true>(7, 4096, 128, 20);
  bad += vjp_case<4, true, false, true>(7, 4096, 128, 25);
  bad += vjp_case<4, false, false, true>(9, 1001, 32, 14);
  bad += vjp_case<4, true, false, true>(9, 1000, 32, 26);
  std::printf(bad ? "FAIL %d\n" : "ALL OK\n", bad);
  return bad;
}
