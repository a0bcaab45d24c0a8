// quantized_tiled.cu's kernel with plain (unquantized) weights, gather_mm's form, in the
// emulation against the gathered products in double: one product (mode 0), rows gathered by
// index position with unsorted matrices (mode 1) and rows sorted by matrix with offsets (mode 2,
// a matrix no row picks among them), w row-major ([k, n]) and as the transpose of [n, k], shapes
// that are not multiples of the tiles. Built and run by tests/kernel_emulation.rs.
#include <algorithm>
#include <random>

// Matrices `experts` of w, `xmats` of x of `mrows` rows; `lhs`/`rhs` one per index position.
template <bool TRANS, int MT>
int gather_case(int mode, int mrows, int n, int k, int xmats, int experts, std::vector<u32> lhs,
                std::vector<u32> rhs, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const int indices = (int)rhs.size();
  std::vector<bf16> x((size_t)xmats * mrows * k), w((size_t)experts * k * n);
  for (auto& e : x) e = __float2bfloat16_rn(u(rng));
  for (auto& e : w) e = __float2bfloat16_rn(u(rng));
  // Value (kk, j) of matrix e of w: TRANS keeps w as [n, k] rows.
  auto wv = [&](int e, int kk, int j) {
    const size_t at = TRANS ? ((size_t)e * n + j) * k + kk : ((size_t)e * k + kk) * n + j;
    return (double)nv_up(w[at]);
  };
  std::vector<i32> offs(experts, 0);
  if (mode == 2) {
    for (int e = 0; e < experts; ++e)
      offs[e] = (i32)(std::lower_bound(rhs.begin(), rhs.end(), (u32)e) - rhs.begin());
  }
  NvQmm a{};
  a.m = (i64)indices * mrows;
  a.n = n;
  a.w_batch = (i64)k * n / 2;
  a.xmats = xmats;
  a.experts = experts;
  a.indices = indices;
  a.k = k;
  a.wrow = TRANS ? k : n;
  a.wvec = 16;
  a.mrows = mrows;
  a.mode = mode;
  typedef NvqTile<bf16, NVQ_PLAIN, TRANS, MT> S;
  const unsigned bx = (unsigned)((n + 255) / 256);
  unsigned by = 1, bz = 1;
  if (mode == 0) by = (unsigned)((a.m + S::BM - 1) / S::BM);
  if (mode == 1) {
    by = (unsigned)((mrows + S::BM - 1) / S::BM);
    bz = (unsigned)indices;
  }
  if (mode == 2) {
    a.slots = (a.m + S::BM - 1) / S::BM + experts;
    by = (unsigned)a.slots;
  }
  std::vector<bf16> y((size_t)a.m * n);
  static_assert(S::SHARED + 4 * 8 <= (int)sizeof(nvq_smem_tiles), "the emulation's shared memory");
  nv_emu_launch({bx, by, bz}, 256, [&] {
    nvq_qmm<bf16, NVQ_PLAIN, TRANS, MT, 16>(
        x.data(), reinterpret_cast<const u32*>(w.data()), nullptr, nullptr, y.data(),
        mode == 0 ? nullptr : lhs.data(), mode == 0 ? nullptr : rhs.data(),
        mode == 2 ? offs.data() : nullptr, a);
  });
  double err = 0, top = 0;
  for (int i = 0; i < indices; ++i)
    for (int r = 0; r < mrows; ++r)
      for (int j = 0; j < n; ++j) {
        const int xm = mode == 0 ? 0 : (int)std::min<u32>(lhs[i], xmats - 1);
        const int e = mode == 0 ? 0 : (int)std::min<u32>(rhs[i], experts - 1);
        double acc = 0;
        for (int kk = 0; kk < k; ++kk)
          acc += (double)nv_up(x[((size_t)xm * mrows + r) * k + kk]) * wv(e, kk, j);
        const double got = nv_up(y[((size_t)i * mrows + r) * n + j]);
        err = nv_emu_worse(err, std::abs(acc - got));
        top = std::max(top, std::abs(acc));
      }
  std::printf("plain TRANS %d MT %d mode %d: %d x (%d x %d x %d): rel err %.3g\n", TRANS, MT, mode,
              indices, mrows, n, k, err / top);
  return err / top < 1e-2 ? 0 : 1;
}

int main() {
  int bad = 0;
  // One product: rows, outputs and inner axis past whole tiles.
  bad += gather_case<false, 4>(0, 150, 264, 200, 1, 1, {0}, {0}, 1);
  bad += gather_case<true, 2>(0, 40, 72, 136, 1, 1, {0}, {0}, 2);
  // Unsorted: each index position's rows with its own matrix (one index past the end).
  bad += gather_case<false, 2>(1, 3, 96, 64, 2, 3, {0, 1, 1, 0}, {2, 0, 7, 1}, 3);
  bad += gather_case<true, 2>(1, 70, 40, 48, 2, 2, {1, 0}, {1, 0}, 4);
  // Sorted with offsets: matrix 1 picked by no row.
  bad += gather_case<false, 2>(2, 1, 264, 64, 6, 3, {5, 4, 3, 2, 1, 0}, {0, 0, 2, 2, 2, 2}, 5);
  bad += gather_case<true, 4>(2, 2, 56, 80, 5, 4, {0, 1, 2, 3, 4}, {0, 1, 1, 3, 3}, 6);
  std::printf(bad ? "FAIL %d\n" : "ALL OK\n", bad);
  return bad;
}
