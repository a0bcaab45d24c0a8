// flash_f32.cu's kernel in the emulation against attention in double: head sizes 64 to 256
// and 96/64, 192/128, every mask kind, sinks, grouped heads, causal with more keys than
// queries, transposed [B, L, H, D] views (flash_case.h). Built and run by
// tests/kernel_emulation.rs.

template <int D, int DV, int MASK, bool CAUSAL, bool SINKS>
double run_case(int B, int HQ, int HKV, int LQ, int LK, unsigned seed, bool transposed) {
  return flash_case<float, D, DV, MASK, CAUSAL, SINKS>(
      B, HQ, HKV, LQ, LK, seed, transposed,
      [&](const float* q, const float* k, const float* v, const void* mask, const float* sinks,
          float* out, const NvFlash& a) {
        nv_emu_launch({(unsigned)((LQ + 15) / 16), (unsigned)HQ, (unsigned)B}, 128, [&] {
          nv_flash_f32<D, DV, MASK, CAUSAL, SINKS>(q, k, v, mask, sinks, out, a);
        });
      });
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
  bool ok = true;
  for (auto& r : rs) {
    std::printf("%-30s rel err %.3g\n", r.name, r.err);
    ok &= r.err < 2e-5;
  }
  std::printf("bits %016llx\n", nv_emu_bits);
  std::printf(ok ? "ALL OK\n" : "FAIL\n");
  return ok ? 0 : 1;
}
