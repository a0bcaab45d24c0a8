// quantized_gather.cu's gathered matrix-vector kernel and quantized_tiled.cu's gathered modes
// in the emulation against gather_qmm in double: index positions picking matrices of x (lhs)
// and of a 4-bit w (rhs), unsorted, and sorted by matrix with the runs' offsets (the chunks'
// table written first, as the host does; runs left empty; fewer blocks than chunks), unsorted
// and grouped on the device first (the order checked to be the stable sort by matrix), and the
// table alone over scrambled offsets; and the tensor-core form of the matrix-vector kernel,
// also with each block finding its matrix's positions.
// Built and run by tests/kernel_emulation.rs.
#include <algorithm>
#include <random>

// `lhs` holds each position's matrix of x; the kernels read `lhs_k`, one entry for every `rep`
// consecutive positions (a lhs broadcast over its last axes, read in place).
struct Problem {
  int E, X, mrows, N, K, gs, P;
  std::vector<bf16> x, s, b;
  std::vector<u32> w, lhs, rhs, lhs_k;
  std::vector<i32> offs;
  int rep = 1;
};

// Positions share lhs entries `rep` at a time in the cases made while this is above 1.
static int g_rep = 1;

static Problem make(int E, int X, int mrows, int N, int K, int gs, int P, bool sorted,
                    unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::uniform_int_distribution<u32> wd;
  Problem p{E, X, mrows, N, K, gs, P};
  p.x.resize((size_t)X * mrows * K);
  for (auto& e : p.x) e = nv_down<bf16>(u(rng));
  p.w.resize((size_t)E * N * K / 8);
  for (auto& e : p.w) e = wd(rng);
  p.s.resize((size_t)E * N * (K / gs));
  p.b.resize(p.s.size());
  for (auto& e : p.s) e = nv_down<bf16>(u(rng) * 0.05f);
  for (auto& e : p.b) e = nv_down<bf16>(u(rng) * 0.1f);
  p.rep = g_rep;
  for (int i = 0; i < P; ++i) {
    if (i % p.rep == 0) p.lhs_k.push_back(rng() % X);
    p.lhs.push_back(p.lhs_k.back());
    p.rhs.push_back(rng() % E);
  }
  if (sorted) std::sort(p.rhs.begin(), p.rhs.end());
  for (int e = 0; e < E; ++e)
    p.offs.push_back((i32)(std::lower_bound(p.rhs.begin(), p.rhs.end(), (u32)e) - p.rhs.begin()));
  return p;
}

// The largest difference of y from gather_qmm in double, relative to the largest output.
static double check(const Problem& p, const std::vector<bf16>& y) {
  const int wrow = p.K / 8, groups = p.K / p.gs;
  double err = 0, top = 0;
  for (int i = 0; i < p.P; ++i)
    for (int r = 0; r < p.mrows; ++r)
      for (int n = 0; n < p.N; ++n) {
        double acc = 0;
        const size_t xo = ((size_t)p.lhs[i] * p.mrows + r) * p.K;
        const size_t wo = ((size_t)p.rhs[i] * p.N + n) * wrow,
                     so = ((size_t)p.rhs[i] * p.N + n) * groups;
        for (int k = 0; k < p.K; ++k) {
          const u32 q = (p.w[wo + k / 8] >> (4 * (k % 8))) & 15u;
          acc += (double)nv_up(p.x[xo + k]) *
                 ((double)q * nv_up(p.s[so + k / p.gs]) + nv_up(p.b[so + k / p.gs]));
        }
        err = nv_emu_worse(err, std::abs(acc - nv_up(y[((size_t)i * p.mrows + r) * p.N + n])));
        top = std::max(top, std::abs(acc));
      }
  return err / top;
}

// The gathered kernels' arguments for problem `p` in chunks of `m` rows (as the host sets
// them: every chunk of every index position, plus one a matrix when sorted).
static NvGqmv args_of(const Problem& p, int mrows, int m, bool sorted) {
  NvGqmv a{};
  a.n = p.N;
  a.w_batch = (i64)p.N * p.K / 8;
  a.s_batch = (i64)p.N * (p.K / p.gs);
  a.xmats = p.X;
  a.experts = p.E;
  a.indices = p.P;
  a.chunks = p.P * ((mrows + m - 1) / m) + (sorted ? p.E : 0);
  a.packs = p.K / 32;
  a.groups = p.K / p.gs;
  a.gs_shift = __builtin_ctz(p.gs / 32);
  a.mrows = mrows;
  a.sorted = sorted;
  a.nibbles = 0x000F000Fu;
  a.lhs_repeat = p.rep;
  return a;
}

// How a case's positions come: unsorted, sorted with their offsets, unsorted and grouped
// on the device first, or unsorted and found by each block of the product (tensor-core form).
enum Order { UNSORTED, SORTED, GROUPED, BY_MATRIX };

// Blocks a matrix of the cases made by matrix.
static int g_per = 1;

// The chunks' table (and for GROUPED the order and offsets) as the host launches them first;
// 0 where the grouping's order is not the stable sort of the positions by matrix.
template <int M>
static int prepare(const Problem& p, const NvGqmv& a, Order how, std::vector<i64>& table,
                   std::vector<u32>& order) {
  if (how == UNSORTED || how == BY_MATRIX) return 1;
  table.assign((size_t)a.chunks * 3, 0);
  if (how == SORTED) {
    nv_emu_launch({1, 1, 1}, NVQ_WARPS * 32,
                  [&] { nvqg_table<M>(p.offs.data(), table.data(), a); });
    return 1;
  }
  std::vector<i32> offs(p.E, -7);
  order.assign(p.P, 0);
  nv_emu_launch({1, 1, 1}, NVQ_WARPS * 32, [&] {
    nvqg_group<M>(p.rhs.data(), offs.data(), order.data(), table.data(), a);
  });
  std::vector<u32> want(p.P);
  for (int i = 0; i < p.P; ++i) want[i] = i;
  std::stable_sort(want.begin(), want.end(), [&](u32 i, u32 j) { return p.rhs[i] < p.rhs[j]; });
  bool ok = order == want;
  for (int e = 0; e < p.E; ++e) {
    const auto before = [&](u32 k) { return k < (u32)e; };
    ok &= offs[e] == (i32)std::count_if(p.rhs.begin(), p.rhs.end(), before);
  }
  return ok ? 1 : 0;
}

// E matrices of w, P index positions; `zb` blocks along z (0: one a chunk; fewer make each
// block take several chunks).
template <int M>
static int gqmv_case(Order how, int mrows, unsigned seed, int E = 5, int P = 12,
                     unsigned zb = 0) {
  Problem p = make(E, 3, mrows, 40, 256, 64, P, how == SORTED, seed);
  const NvGqmv a = args_of(p, mrows, M, how != UNSORTED);
  std::vector<bf16> y((size_t)p.P * mrows * p.N);
  const int R = NvqRows<M>::v;
  std::vector<i64> table;
  std::vector<u32> order;
  const int grouped = prepare<M>(p, a, how, table, order);
  const u32* ord = how == GROUPED ? order.data() : nullptr;
  nv_emu_launch({(unsigned)((p.N + NVQ_WARPS * R - 1) / (NVQ_WARPS * R)), 1,
                 zb ? zb : (unsigned)a.chunks},
                NVQ_WARPS * 32, [&] {
                  nvq_gqmv<bf16, 4, M>(p.x.data(), p.w.data(), p.s.data(), p.b.data(), y.data(),
                                       p.lhs_k.data(), p.rhs.data(), table.data(), ord, a);
                });
  const double e = check(p, y);
  std::printf("gqmv M %d order %d mrows %d E %d P %d z %u: rel err %.3g, grouping %s\n", M,
              (int)how, mrows, E, P, zb, e, grouped ? "ok" : "WRONG");
  return e < 2e-2 && grouped ? 0 : 1;
}

// The tiled kernel over index positions (mode 1) or runs sorted by matrix (mode 2).
static int tiled_case(int mode, int mrows, unsigned seed) {
  Problem p = make(5, 3, mrows, 300, 256, 64, 6, mode == 2, seed);
  NvQmm a{};
  a.m = (i64)p.P * mrows;
  a.n = p.N;
  a.w_batch = (i64)p.N * p.K / 8;
  a.s_batch = (i64)p.N * (p.K / p.gs);
  a.xmats = p.X;
  a.experts = p.E;
  a.indices = p.P;
  a.k = p.K;
  a.wrow = p.K / 8;
  a.groups = p.K / p.gs;
  a.gs_shift = __builtin_ctz(p.gs / 32);
  a.wvec = 16;
  a.mrows = mrows;
  a.mode = mode;
  a.lhs_repeat = p.rep;
  typedef NvqTile<bf16, 4, true, 2> S;
  a.slots = (a.m + S::BM - 1) / S::BM + p.E;
  std::vector<bf16> y((size_t)a.m * p.N);
  const unsigned gy = mode == 1 ? (unsigned)((mrows + S::BM - 1) / S::BM) : (unsigned)a.slots;
  nv_emu_launch({(unsigned)((p.N + 255) / 256), gy, mode == 1 ? (unsigned)p.P : 1u}, 256, [&] {
    nvq_qmm<bf16, 4, true, 2, 16>(p.x.data(), p.w.data(), p.s.data(), p.b.data(), y.data(),
                                  p.lhs_k.data(), p.rhs.data(), p.offs.data(), a);
  });
  const double e = check(p, y);
  std::printf("tiled gather mode %d mrows %d: rel err %.3g\n", mode, mrows, e);
  return e < 2e-2 ? 0 : 1;
}

// The sorted chunks' table over offsets that are not a sorted run's (out of order, negative,
// past the end): every entry stays inside the rows and matrices, and the chunks cover each
// row exactly once (the runs partition the rows whatever the offsets hold).
template <int M>
static int table_case(int E, int P, int mrows, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<i32> offs(E);
  for (auto& o : offs) o = (i32)(rng() % (3 * P)) - P;
  NvGqmv a{};
  a.experts = E;
  a.indices = P;
  a.mrows = mrows;
  a.chunks = ((i64)P * mrows + M - 1) / M + E;
  std::vector<i64> table((size_t)a.chunks * 3);
  nv_emu_launch({1, 1, 1}, NVQ_WARPS * 32, [&] { nvqg_table<M>(offs.data(), table.data(), a); });
  std::vector<int> seen((size_t)P * mrows, 0);
  int bad = 0;
  bool ended = false;
  for (i64 z = 0; z < a.chunks; ++z) {
    const i64 e = table[3 * z], v0 = table[3 * z + 1], v1 = table[3 * z + 2];
    if (e < 0) {
      ended = true;
      continue;
    }
    const i64 last = std::min(v0 + M, v1);
    if (ended || e >= E || v0 < 0 || v0 >= last || v1 > (i64)P * mrows) {
      ++bad;
      continue;
    }
    for (i64 v = v0; v < last; ++v) ++seen[v];
  }
  for (int c : seen) bad += c != 1;
  std::printf("table M %d E %d P %d mrows %d over scrambled offsets: %d wrong\n", M, E, P, mrows,
              bad);
  return bad ? 1 : 0;
}

// The tensor-core form (quantized_mv_mma.cu's sums): chunks of 8 rows, R tiles of 16 rows of
// w a warp, S slices of k a block; `zb` as above.
template <int R, int S>
static int gqmv_mma_case(Order how, int mrows, unsigned seed, int E = 5, int P = 12,
                         unsigned zb = 0) {
  Problem p = make(E, 3, mrows, 40, 256, 64, P, how == SORTED, seed);
  NvGqmv a = args_of(p, mrows, 8, how == SORTED || how == GROUPED);
  if (how == BY_MATRIX) {
    a.per_matrix = g_per;
    a.chunks = (i64)E * g_per;
  }
  std::vector<bf16> y((size_t)p.P * mrows * p.N);
  for (auto& v : y) v = nv_down<bf16>(12345.0f);  // every output must be written
  std::vector<i64> table;
  std::vector<u32> order;
  const int grouped = prepare<8>(p, a, how, table, order);
  const u32* ord = how == GROUPED ? order.data() : nullptr;
  const int rows = 16 * R * (NVQM_WARPS / S);
  nv_emu_launch({(unsigned)((p.N + rows - 1) / rows), 1, zb ? zb : (unsigned)a.chunks},
                NVQM_WARPS * 32, [&] {
                  if (how == BY_MATRIX) {
                    nvqm_gqmv_by_matrix<bf16, R, S>(p.x.data(), p.w.data(), p.s.data(),
                                                    p.b.data(), y.data(), p.lhs_k.data(),
                                                    p.rhs.data(), a);
                  } else {
                    nvqm_gqmv<bf16, R, S>(p.x.data(), p.w.data(), p.s.data(), p.b.data(),
                                          y.data(), p.lhs_k.data(), p.rhs.data(), table.data(),
                                          ord, a);
                  }
                });
  const double e = check(p, y);
  std::printf("gqmv mma R %d S %d order %d mrows %d E %d P %d z %u rep %d per %d: rel err "
              "%.3g, grouping %s\n",
              R, S, (int)how, mrows, E, P, zb, p.rep, how == BY_MATRIX ? g_per : 0, e,
              grouped ? "ok" : "WRONG");
  return e < 2e-2 && grouped ? 0 : 1;
}

int main() {
  int bad = 0;
  bad += table_case<4>(9, 30, 1, 7);
  bad += table_case<8>(300, 50, 3, 8);
  bad += gqmv_case<1>(UNSORTED, 1, 1);
  bad += gqmv_case<1>(SORTED, 1, 2);
  bad += gqmv_case<4>(UNSORTED, 3, 3);
  bad += gqmv_case<8>(SORTED, 5, 4);
  // Sorted with most matrices picked by none (empty runs), and with fewer blocks than chunks.
  bad += gqmv_case<2>(SORTED, 1, 5, 16, 6);
  bad += gqmv_case<4>(SORTED, 3, 6, 7, 20, 3);
  // Grouped on the device: more positions than threads, matrices picked by none.
  bad += gqmv_case<1>(GROUPED, 1, 21, 9, 300, 40);
  bad += gqmv_case<4>(GROUPED, 3, 22, 40, 70);
  bad += gqmv_mma_case<2, 4>(UNSORTED, 1, 11);
  bad += gqmv_mma_case<2, 4>(UNSORTED, 11, 12, 5, 4);
  bad += gqmv_mma_case<2, 4>(SORTED, 1, 13, 16, 20);
  bad += gqmv_mma_case<1, 4>(SORTED, 3, 14, 7, 20, 3);
  bad += gqmv_mma_case<2, 2>(SORTED, 2, 15, 5, 12, 2);
  bad += gqmv_mma_case<2, 4>(GROUPED, 1, 23, 130, 520, 64);
  bad += gqmv_mma_case<1, 4>(GROUPED, 2, 24, 6, 33);
  // The gathered form's default tiles (2, 2), grouped.
  bad += gqmv_mma_case<2, 2>(GROUPED, 1, 25, 130, 520, 64);
  bad += gqmv_mma_case<2, 2>(GROUPED, 3, 26, 9, 40);
  // Its tiles for few blocks (2, 8): unsorted, as one token through its experts.
  bad += gqmv_mma_case<2, 8>(UNSORTED, 1, 27, 8, 8);
  // Found by each block: more positions than threads (four batches), matrices picked by
  // none, more than 8 rows a matrix in some (a block's chunks in turn, or split over two
  // blocks a matrix), fewer blocks than matrices, the most positions.
  bad += gqmv_mma_case<2, 2>(BY_MATRIX, 1, 41, 130, 1000, 64);
  bad += gqmv_mma_case<2, 4>(BY_MATRIX, 3, 42, 9, 40);
  bad += gqmv_mma_case<1, 4>(BY_MATRIX, 1, 43, 3, 60, 2);
  g_per = 2;
  bad += gqmv_mma_case<2, 2>(BY_MATRIX, 2, 44, 6, 33, 5);
  bad += gqmv_mma_case<2, 8>(BY_MATRIX, 1, 45, 40, 1024);
  g_per = 1;
  bad += tiled_case(1, 40, 5);
  bad += tiled_case(2, 20, 6);
  // lhs read in place with its entries repeated (a broadcast over the last axes: each matrix
  // of x for 2, 3 or 8 consecutive positions), through every kernel and order.
  g_rep = 3;
  bad += gqmv_case<1>(UNSORTED, 1, 31);
  bad += gqmv_case<4>(GROUPED, 3, 32, 40, 72);
  bad += gqmv_mma_case<2, 2>(UNSORTED, 1, 33);
  bad += gqmv_mma_case<2, 2>(SORTED, 2, 34, 5, 12, 2);
  g_rep = 8;
  bad += gqmv_mma_case<2, 2>(GROUPED, 1, 35, 130, 512, 64);
  bad += gqmv_mma_case<2, 2>(BY_MATRIX, 1, 38, 128, 512);
  g_rep = 2;
  bad += tiled_case(1, 40, 36);
  bad += tiled_case(2, 20, 37);
  g_rep = 1;
  std::printf(bad ? "FAIL %d\n" : "ALL OK\n", bad);
  return bad;
}
