// gated_delta.cu's recurrent kernel in the emulation (bf16 inputs, f32 state) against the
// recurrence in double: the final state and the outputs, every step's state, and the slots'
// form (entries read and written in place, a negative slot counted from the end, one past the
// pool's end left unwritten), each also by the looping form (a grid of fewer blocks than units,
// the next unit's rows loaded during this one) with the same bits. The kernel's claim that a row's bits depend neither on the rows
// a warp holds nor on how many steps are staged at once is checked too: R = 1, 2 and 4 and
// chunks of 1, 3 and every step give the same bits. Built and run by tests/kernel_emulation.rs.
#include <algorithm>
#include <random>

struct GdInputs {
  int B, T, HK, HV;
  std::vector<bf16> q, k, v;
  std::vector<float> g, beta, state;
};

template <int DK, int DV>
static GdInputs gd_inputs(int B, int T, int HK, int HV, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f), ug(0.85f, 1.0f), ub(0.1f, 0.9f);
  auto bfv = [&](size_t n, float s) {
    std::vector<bf16> v(n);
    for (auto& x : v) x = __float2bfloat16_rn(u(rng) * s);
    return v;
  };
  GdInputs in{B, T, HK, HV};
  in.q = bfv((size_t)B * T * HK * DK, 1.0f / std::sqrt((float)DK));
  in.k = bfv((size_t)B * T * HK * DK, 1.0f / std::sqrt((float)DK));
  in.v = bfv((size_t)B * T * HV * DV, 1.0f);
  in.g.resize((size_t)B * T * HV);
  in.beta.resize(in.g.size());
  in.state.resize((size_t)B * HV * DV * DK);
  for (auto& x : in.g) x = ug(rng);
  for (auto& x : in.beta) x = ub(rng);
  for (auto& x : in.state) x = u(rng) * 0.1f;
  return in;
}

template <int DK, int DV>
static NvGd gd_args(const GdInputs& in, int chunk, bool every) {
  NvGd a{};
  a.q[0] = (i64)in.T * in.HK * DK;
  a.q[1] = (i64)in.HK * DK;
  a.q[2] = DK;
  a.q[3] = 1;
  for (int i = 0; i < 4; ++i) a.k[i] = a.q[i];
  a.v[0] = (i64)in.T * in.HV * DV;
  a.v[1] = (i64)in.HV * DV;
  a.v[2] = DV;
  a.v[3] = 1;
  a.g[0] = (i64)in.T * in.HV;
  a.g[1] = in.HV;
  a.g[2] = 1;
  for (int i = 0; i < 3; ++i) a.beta[i] = a.g[i];
  a.slot_stride = 1;
  a.steps = in.T;
  a.hv = in.HV;
  a.dv = DV;
  a.group = in.HV / in.HK;
  a.types = 2 | (2 << 2) | (2 << 4) | (0 << 6) | (0 << 8) | (2 << 10);
  a.every = every;
  a.chunk = chunk;
  return a;
}

// One launch: `warps` warps of R rows a block; `state` read (and, with slots, `out` the same
// pool), y and `out` written.
template <int DK, int DV, int R>
static void gd_launch(const GdInputs& in, const NvGd& a, int warps, const float* state, float* out,
                      bf16* y, const i32* slots) {
  const int rows = warps * R, runs = (DV + rows - 1) / rows;
  nv_emu_launch({(unsigned)(in.B * in.HV * runs), 1, 1}, (unsigned)(32 * warps), [&] {
    nv_gated_delta<float, DK / 32, R>(in.q.data(), in.k.data(), in.v.data(), in.g.data(),
                                      in.beta.data(), state, out, y, slots, a);
  });
}

// The looping form over the same units with `grid` blocks.
template <int DK, int DV, int R>
static void gd_launch_units(const GdInputs& in, NvGd a, int warps, int grid, const float* state,
                            float* out, bf16* y, const i32* slots) {
  const int rows = warps * R, runs = (DV + rows - 1) / rows;
  a.units = (i64)in.B * in.HV * runs;
  nv_emu_launch({(unsigned)grid, 1, 1}, (unsigned)(32 * warps), [&] {
    nv_gated_delta_units<float, DK / 32, R>(in.q.data(), in.k.data(), in.v.data(), in.g.data(),
                                            in.beta.data(), state, out, y, slots, a);
  });
}

// The recurrence in double for sequence b, head h from `s0` ([DV][DK]): every step's state
// (T + 1 of them) and output.
template <int DK, int DV>
static void gd_reference(const GdInputs& in, int b, int h, const float* s0,
                         std::vector<std::vector<double>>& states, std::vector<double>& y) {
  const int hk = h / (in.HV / in.HK);
  std::vector<double> S(s0, s0 + DV * DK);
  states.assign(1, S);
  y.assign((size_t)in.T * DV, 0.0);
  for (int t = 0; t < in.T; ++t) {
    const size_t gi = ((size_t)b * in.T + t) * in.HV + h;
    auto qv = [&](int d) { return (double)nv_up(in.q[(((size_t)b * in.T + t) * in.HK + hk) * DK + d]); };
    auto kv = [&](int d) { return (double)nv_up(in.k[(((size_t)b * in.T + t) * in.HK + hk) * DK + d]); };
    for (int r = 0; r < DV; ++r) {
      double rec = 0;
      for (int d = 0; d < DK; ++d) {
        S[r * DK + d] *= in.g[gi];
        rec += S[r * DK + d] * kv(d);
      }
      const double vv = nv_up(in.v[(((size_t)b * in.T + t) * in.HV + h) * DV + r]);
      const double delta = in.beta[gi] * (vv - rec);
      double yy = 0;
      for (int d = 0; d < DK; ++d) {
        S[r * DK + d] += delta * kv(d);
        yy += S[r * DK + d] * qv(d);
      }
      y[(size_t)t * DV + r] = yy;
    }
    states.push_back(S);
  }
}

template <int DK, int DV>
static int gd_case(int B, int T, int HK, int HV, unsigned seed) {
  const GdInputs in = gd_inputs<DK, DV>(B, T, HK, HV, seed);
  const size_t ny = (size_t)B * T * HV * DV, ns = in.state.size();
  // Final state and outputs over R, warps and chunks: the same bits every way.
  std::vector<float> out(ns);
  std::vector<bf16> y(ny);
  gd_launch<DK, DV, 2>(in, gd_args<DK, DV>(in, T, false), 4, in.state.data(), out.data(), y.data(),
                       nullptr);
  int unequal = 0;
  auto same = [&](const std::vector<float>& o, const std::vector<bf16>& yy) {
    for (size_t i = 0; i < ns; ++i) unequal += o[i] != out[i];
    for (size_t i = 0; i < ny; ++i) unequal += yy[i].b != y[i].b;
  };
  {
    std::vector<float> o(ns);
    std::vector<bf16> yy(ny);
    gd_launch<DK, DV, 1>(in, gd_args<DK, DV>(in, 3, false), 2, in.state.data(), o.data(),
                         yy.data(), nullptr);
    same(o, yy);
    gd_launch<DK, DV, 4>(in, gd_args<DK, DV>(in, 1, false), 3, in.state.data(), o.data(),
                         yy.data(), nullptr);
    same(o, yy);
    // The looping form: 3 blocks over every unit.
    gd_launch_units<DK, DV, 2>(in, gd_args<DK, DV>(in, T, false), 4, 3, in.state.data(),
                               o.data(), yy.data(), nullptr);
    same(o, yy);
  }
  // Every step's state ([B, T, Hv, Dv, Dk]).
  std::vector<float> steps((size_t)B * T * HV * DV * DK);
  std::vector<bf16> ys(ny);
  gd_launch<DK, DV, 2>(in, gd_args<DK, DV>(in, 4, true), 4, in.state.data(), steps.data(),
                       ys.data(), nullptr);
  for (size_t i = 0; i < ny; ++i) unequal += ys[i].b != y[i].b;
  {
    std::vector<float> s2(steps.size());
    std::vector<bf16> y2(ny);
    gd_launch_units<DK, DV, 1>(in, gd_args<DK, DV>(in, 2, true), 2, 2, in.state.data(),
                               s2.data(), y2.data(), nullptr);
    for (size_t i = 0; i < s2.size(); ++i) unequal += s2[i] != steps[i];
    for (size_t i = 0; i < ny; ++i) unequal += y2[i].b != y[i].b;
  }
  // Slots: a pool of B + 2 entries; sequence 0 at entry B, sequence 1 at -3 (entry B - 1),
  // the others at their index, and the last, when B > 2, past the pool's end (read from the
  // last entry, which no sequence writes, and not written).
  const int entries = B + 2;
  std::vector<i32> slots(B);
  for (int b = 0; b < B; ++b) slots[b] = b;
  slots[0] = B;
  if (B > 1) slots[1] = -3;
  if (B > 2) slots[B - 1] = entries + 5;
  std::vector<float> pool((size_t)entries * HV * DV * DK);
  std::mt19937 rng(seed + 99);
  std::uniform_real_distribution<float> u(-0.1f, 0.1f);
  for (auto& x : pool) x = u(rng);
  const std::vector<float> before = pool;
  NvGd sa = gd_args<DK, DV>(in, T, false);
  sa.entries = entries;
  std::vector<bf16> yp(ny);
  gd_launch<DK, DV, 2>(in, sa, 4, pool.data(), pool.data(), yp.data(), slots.data());
  {
    std::vector<float> pool2 = before;
    std::vector<bf16> y2(ny);
    gd_launch_units<DK, DV, 2>(in, sa, 4, 2, pool2.data(), pool2.data(), y2.data(), slots.data());
    for (size_t i = 0; i < pool.size(); ++i) unequal += pool2[i] != pool[i];
    for (size_t i = 0; i < ny; ++i) unequal += y2[i].b != yp[i].b;
  }

  double ey = 0, ty = 0, es = 0, ts = 0;
  const size_t head = (size_t)DV * DK;
  std::vector<bool> written(entries, false);
  for (int b = 0; b < B; ++b) {
    i64 s = slots[b];
    if (s < 0) s += entries;
    const bool keep = s >= 0 && s < entries;
    const i64 from = std::clamp<i64>(s, 0, entries - 1);
    if (keep) written[from] = true;
    for (int h = 0; h < HV; ++h) {
      std::vector<std::vector<double>> st, sst;
      std::vector<double> yr, syr;
      gd_reference<DK, DV>(in, b, h, in.state.data() + ((size_t)b * HV + h) * head, st, yr);
      gd_reference<DK, DV>(in, b, h, before.data() + ((size_t)from * HV + h) * head, sst, syr);
      for (int t = 0; t < T; ++t)
        for (int r = 0; r < DV; ++r) {
          const size_t yi = (((size_t)b * T + t) * HV + h) * DV + r;
          ey = nv_emu_worse(nv_emu_worse(ey, std::abs(yr[(size_t)t * DV + r] - nv_up(y[yi]))),
                            std::abs(syr[(size_t)t * DV + r] - nv_up(yp[yi])));
          ty = std::max(ty, std::abs(yr[(size_t)t * DV + r]));
          for (int d = 0; d < DK; ++d) {
            const size_t si = ((((size_t)b * T + t) * HV + h) * DV + r) * DK + d;
            es = nv_emu_worse(es, std::abs(st[t + 1][r * DK + d] - steps[si]));
          }
        }
      for (size_t i = 0; i < head; ++i) {
        es = nv_emu_worse(es, std::abs(st[T][i] - out[((size_t)b * HV + h) * head + i]));
        if (keep) es = nv_emu_worse(es, std::abs(sst[T][i] - pool[((size_t)from * HV + h) * head + i]));
        ts = std::max(ts, std::abs(st[T][i]));
      }
    }
  }
  // Entries no sequence writes keep their values.
  for (int e = 0; e < entries; ++e)
    if (!written[e])
      for (size_t i = 0; i < (size_t)HV * head; ++i)
        unequal += pool[(size_t)e * HV * head + i] != before[(size_t)e * HV * head + i];
  nv_emu_mix(out);
  nv_emu_mix(y);
  std::printf("gated delta DK %d DV %d B %d T %d HK %d HV %d: y rel %.3g, state rel %.3g, "
              "unequal %d\n",
              DK, DV, B, T, HK, HV, ey / ty, es / ts, unequal);
  return (ey / ty < 2e-2 && es / ts < 1e-4 && unequal == 0) ? 0 : 1;
}

int main() {
  int bad = 0;
  bad += gd_case<64, 64>(3, 7, 1, 2, 1);
  bad += gd_case<128, 32>(1, 5, 2, 4, 2);
  bad += gd_case<64, 96>(4, 1, 2, 2, 3);
  std::printf("bits %016llx\n", nv_emu_bits);
  std::printf(bad ? "FAIL %d\n" : "ALL OK\n", bad);
  return bad;
}
