// flash.cu's portable tensor-core kernel (bf16) in the emulation against attention in double
// on the same rounded inputs: head sizes 64 to 256, 72 (padded), 96/64, 192/128, every mask
// kind, sinks, grouped heads, causal with more keys than queries, transposed [B, L, H, D]
// views (flash_case.h). Built and run by tests/kernel_emulation.rs.

template <int D, int DV, int MASK, bool CAUSAL, bool SINKS>
double run_case(int B, int HQ, int HKV, int LQ, int LK, unsigned seed, bool transposed) {
  typedef NvFlashShape<D, DV> Shape;
  return flash_case<bf16, D, DV, MASK, CAUSAL, SINKS>(
      B, HQ, HKV, LQ, LK, seed, transposed,
      [&](const bf16* q, const bf16* k, const bf16* v, const void* mask, const bf16* sinks,
          bf16* out, const NvFlash& a) {
        nv_emu_launch({(unsigned)((LQ + Shape::BM - 1) / Shape::BM), (unsigned)HQ, (unsigned)B},
                      NV_FLASH_THREADS, [&] {
                        nv_flash<bf16, D, DV, MASK, CAUSAL, SINKS>(q, k, v, mask, sinks, out, a);
                      });
      });
}

// nv_flash_exp2_poly against exp2 in double over the weights' range and at its ends: the
// relative error below 1e-4 down to 2^-126 (normal results), 0 for -inf and below 2^-127,
// NaN for NaN. Returns the number of wrong results.
static int poly_exp2_errors() {
  int bad = 0;
  double worst = 0;
  for (int i = 0; i <= 1 << 20; ++i) {
    const float x = -126.0f * (float)i / (float)(1 << 20);
    const double want = std::exp2((double)x);
    worst = nv_emu_worse(worst, std::abs(nv_flash_exp2_poly(x) - want) / want);
  }
  for (float x : {0.25f, 1e-7f, -0.5f, -0.4999f, -0.5001f, -1.5f, -126.5f}) {
    const double want = std::exp2((double)x);
    worst = nv_emu_worse(worst, std::abs(nv_flash_exp2_poly(x) - want) / want);
  }
  bad += worst > 1e-4;
  for (float x : {-INFINITY, -127.0f, -200.0f, -1e30f}) bad += nv_flash_exp2_poly(x) != 0.0f;
  const float nan = nv_flash_exp2_poly(NAN);
  bad += nan == nan;
  std::printf("exp2 by polynomial: worst rel err %.3g, wrong %d\n", worst, bad);
  return bad;
}

int main() {
  struct R {
    const char* name;
    double err;
  };
  std::vector<R> rs;
  rs.push_back({"64 none", run_case<64, 64, 0, false, false>(1, 2, 2, 40, 77, 1, false)});
  rs.push_back({"64 causal", run_case<64, 64, 0, true, false>(2, 4, 2, 33, 100, 2, false)});
  rs.push_back({"128 bool sinks", run_case<128, 128, 1, false, true>(1, 2, 1, 17, 65, 3, false)});
  rs.push_back(
      {"96/64 additive causal sinks", run_case<96, 64, 2, true, true>(1, 3, 1, 50, 50, 4, false)});
  rs.push_back(
      {"72 transposed causal", run_case<72, 72, 0, true, false>(1, 4, 2, 37, 37, 5, true)});
  rs.push_back({"256 none", run_case<256, 256, 0, false, false>(1, 2, 2, 20, 33, 6, false)});
  rs.push_back({"192/128 bool", run_case<192, 128, 1, false, false>(1, 2, 1, 16, 40, 7, false)});
  rs.push_back({"64 causal sinks", run_case<64, 64, 0, true, true>(1, 2, 1, 45, 90, 8, false)});
  bool ok = poly_exp2_errors() == 0;
  for (auto& r : rs) {
    std::printf("%-30s rel err %.3g\n", r.name, r.err);
    ok &= r.err < 1.0 / 64;
  }
  std::printf("bits %016llx\n", nv_emu_bits);
  std::printf(ok ? "ALL OK\n" : "FAIL\n");
  return ok ? 0 : 1;
}
