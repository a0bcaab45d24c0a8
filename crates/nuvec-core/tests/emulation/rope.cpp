// rope.cu's kernels in the emulation (bf16): the heads kernel (a block a position, every head's
// row from shared angles) equal bit for bit to the rows kernel (a warp a row) on the same
// transposed [B, H, T, D] view of a [B, T, H, D] input, both halves and traditional pairs,
// forward and inverse, with grids of fewer blocks than positions (each block loops) and of
// one block a position, rows found by the entry's, position's and head's steps, by the head's
// step from a located first row, or each located, also in a view with an offset; both against
// the rotation in double. Built and run by tests/kernel_emulation.rs.
#include <algorithm>
#include <random>

template <bool TRAD>
static int rope_case(int B, int H, int T, int D, int grid, bool forward, unsigned seed,
                     int addressing = 2, int lead = 0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  // Stored [B, lead + T, H, D]; the kernels read positions lead.. as [B, H, T, D] rows (a
  // view with an offset).
  const i64 TS = lead + T;
  std::vector<bf16> x((size_t)B * TS * H * D);
  for (auto& e : x) e = nv_down<bf16>(u(rng));
  Strided rows{};
  rows.ndim = 3;
  rows.shape[0] = B;
  rows.shape[1] = H;
  rows.shape[2] = T;
  rows.strides[0] = TS * H * D;
  rows.strides[1] = D;
  rows.strides[2] = (i64)H * D;
  rows.offset = (i64)lead * H * D;
  const i64 nrows = (i64)B * H * T, half = D / 2, per_batch = (i64)H * T;
  std::vector<i32> offsets(B);
  for (int b = 0; b < B; ++b) offsets[b] = 3 + 5 * b;
  const float base = 10000.f, scale = 1.f;
  const float step = (float)(-std::log((double)base) / (double)half);
  std::vector<bf16> yh((size_t)nrows * D), yr((size_t)nrows * D);
  const int fwd = forward ? 1 : 0, trad = TRAD ? 1 : 0;
  const int chunks = TRAD ? D / 8 : (int)half / 8;
  const int threads = std::clamp((H * chunks + NV_ROPE_ITEMS - 1) / NV_ROPE_ITEMS, 32, 256);
  const int tasks = B * T;
  const unsigned hgrid = (unsigned)(grid > 0 ? std::min(grid, tasks) : tasks);
  nv_emu_launch({hgrid, 1, 1}, (unsigned)((threads + 31) / 32 * 32), [&] {
    nv_rope_heads<bf16>(x.data(), rows, yh.data(), nrows, D, T, per_batch, offsets.data(), 1, 0,
                        nullptr, 0, step, scale, half, trad, fwd, D, addressing,
                        TS * H * D, (i64)H * D);
  });
  nv_emu_launch({(unsigned)std::min<i64>(5, (nrows + 7) / 8), 1, 1}, NV_THREADS, [&] {
    nv_rope_rows<bf16>(x.data(), rows, 1, yr.data(), nrows, D, T, per_batch, offsets.data(), 1, 0,
                       nullptr, 0, step, scale, half, trad, fwd);
  });
  nv_emu_mix(yh);
  int unequal = 0;
  double worst = 0;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t) {
        const size_t out = (((size_t)b * H + h) * T + t) * D;
        const bf16* in = x.data() + (((size_t)b * TS + lead + t) * H + h) * D;
        const double pos = (double)(t + offsets[b]) * scale;
        for (int j = 0; j < half; ++j) {
          const double ang = pos * std::exp((double)j * step) * (forward ? 1 : -1);
          const int i1 = TRAD ? 2 * j : j, i2 = TRAD ? 2 * j + 1 : j + (int)half;
          const double a = nv_up(in[i1]), c = nv_up(in[i2]);
          const double o1 = a * std::cos(ang) - c * std::sin(ang);
          const double o2 = a * std::sin(ang) + c * std::cos(ang);
          worst = nv_emu_worse(nv_emu_worse(worst, std::abs(o1 - nv_up(yh[out + i1]))),
                               std::abs(o2 - nv_up(yh[out + i2])));
        }
        for (int d = 0; d < D; ++d)
          unequal += yh[out + d].b != yr[out + d].b;
      }
  std::printf("rope %s %s B %d H %d T %d D %d grid %u addressing %d lead %d: max err %.3g, "
              "heads vs rows unequal %d\n",
              TRAD ? "traditional" : "halves", forward ? "forward" : "inverse", B, H, T, D, hgrid,
              addressing, lead, worst, unequal);
  // Inputs below 2 in magnitude: a bf16 rounding of the result is below 2^-7.
  return (worst < 2e-2 && unequal == 0) ? 0 : 1;
}

int main() {
  int bad = 0;
  bad += rope_case<false>(2, 4, 9, 128, 5, true, 1);
  bad += rope_case<false>(1, 3, 7, 64, 0, false, 2);
  bad += rope_case<true>(2, 2, 6, 128, 4, true, 3);
  bad += rope_case<false>(1, 40, 3, 128, 2, true, 4);
  // More (head, chunk) items than a block takes at once: a second round a position.
  bad += rope_case<false>(1, 80, 3, 128, 2, false, 5);
  // The task's first row located, the heads' rows stepped from it.
  bad += rope_case<false>(2, 4, 9, 128, 5, true, 6, 1);
  // Positions from the third on (a view with an offset), by steps and by a located first row.
  bad += rope_case<false>(2, 4, 7, 128, 3, true, 9, 2, 2);
  bad += rope_case<true>(2, 4, 7, 128, 0, false, 10, 1, 2);
  bad += rope_case<true>(2, 80, 3, 128, 2, false, 7, 1);
  // Every row located (a view the host finds not affine in the head).
  bad += rope_case<false>(2, 4, 9, 128, 5, true, 8, 0);
  std::printf("bits %016llx\n", nv_emu_bits);
  std::printf(bad ? "FAIL %d\n" : "ALL OK\n", bad);
  return bad;
}
