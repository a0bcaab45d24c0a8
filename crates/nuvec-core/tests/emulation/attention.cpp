// attention.cu's decoding kernels in the emulation: contiguous keys against attention in
// double (one pass, and split with the merge kernel or merged by each chunk's last split block;
// causal or not; one and two query rows over
// grouped heads; bf16 on the tensor cores at head sizes 64, 128 and 256, and past 256 with the
// features split over the warps; f32 on the FMA units at 512), and the paged kernel over a
// shuffled block table and the kernel over [B, L, H, D] rows equal to the contiguous one bit
// for bit. Built and run by tests/kernel_emulation.rs (as the kernels are, and with
// NV_ATTN_PREFETCH=0).
#include <algorithm>
#include <cstring>
#include <random>
#include <type_traits>

// The kernel attention.rs launches for T and D, R query rows a block.
template <typename T, int D, int R, bool P>
static void decode_kernel(const T* q, const T* k, const T* v, const i32* table, const i32* lens,
                          T* o, float* part_o, float2* part_ml, const NvAttn& a) {
  if constexpr (std::is_same_v<T, float>)
    nv_attention_lanes<T, D, R, P, true>(q, k, v, table, lens, o, part_o, part_ml, a);
  else if constexpr (D > 256)
    nv_attention_mma_wide<T, D, P, true>(q, k, v, table, lens, o, part_o, part_ml, a);
  else
    nv_attention_mma<T, D, P, true>(q, k, v, table, lens, o, part_o, part_ml, a);
}

template <typename T> static unsigned bits_of(T x) {
  unsigned u = 0;
  std::memcpy(&u, &x, sizeof(T));
  return u;
}

template <typename T, int D, int R = 8>
static int decode_case(int B, int hkv, int group, int lq, int lk, bool causal, int nsplit,
                       unsigned seed, bool merge = false) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const int hq = hkv * group, rows = group * lq, nchunks = (rows + R - 1) / R, bs = 16;
  auto fill = [&](size_t n) {
    std::vector<T> v(n);
    for (auto& e : v) e = nv_down<T>(u(rng));
    return v;
  };
  auto q = fill((size_t)B * hq * lq * D), k = fill((size_t)B * hkv * lk * D),
       v = fill((size_t)B * hkv * lk * D);
  NvAttn a{};
  a.q_strides[0] = (i64)hq * lq * D;
  a.q_strides[1] = (i64)lq * D;
  a.q_strides[2] = D;
  a.k_strides[0] = (i64)hkv * lk * D;
  a.k_strides[1] = (i64)lk * D;
  a.k_strides[2] = D;
  for (int i = 0; i < 3; ++i) a.v_strides[i] = a.k_strides[i];
  a.keys = lk;
  a.hkv = hkv;
  a.group = group;
  a.lq = lq;
  a.causal = causal;
  a.nsplit = nsplit;
  a.nchunks = nchunks;
  a.merge = merge;
  // The L2 requests of a warp's later steps (a hint: nothing here) walk the rows they name,
  // paged ones through the table: they must stay inside the split.
  a.l2_steps = 3;
  // The L1 requests ahead of the loads, likewise (hints), when the build asks for them.
#ifdef NV_EMU_L1_AHEAD
  a.l1_ahead = NV_EMU_L1_AHEAD;
#endif
  const float scale = 1.0f / std::sqrt((float)D);
  a.scale = scale * 1.4426950408889634f;
  const size_t outs = (size_t)B * hq * lq;
  std::vector<T> out(outs * D), pout(outs * D), tout(outs * D);
  std::vector<float> part_o(outs * nsplit * D), part_ml(outs * nsplit * 2);
  // One counter a row chunk, zero between launches (the last block of a chunk resets it).
  std::vector<u32> counters((size_t)B * hkv * nchunks, 0u);
  auto run = [&](auto paged, const T* kk, const T* vv, const i32* table, const i32* lens,
                 const NvAttn& at, T* o) {
    constexpr bool P = decltype(paged)::value;
    nv_emu_launch({(unsigned)(nchunks * nsplit), (unsigned)hkv, (unsigned)B}, NV_ATTN_THREADS, [&] {
      decode_kernel<T, D, R, P>(q.data(), kk, vv, table, lens, o, part_o.data(),
                                reinterpret_cast<float2*>(part_ml.data()), at);
      nv_attn_merge_last<T, D, R, P>(lens, o, part_o.data(),
                                     reinterpret_cast<const float2*>(part_ml.data()),
                                     counters.data(), at);
    });
    if (!at.merge) {
      nv_emu_launch({(unsigned)outs, 1, 1}, NvAttnCombine<D>::THREADS, [&] {
        nv_attention_combine<T, D, P>(lens, o, part_o.data(),
                                      reinterpret_cast<const float2*>(part_ml.data()), at);
      });
    }
  };
  run(std::false_type{}, k.data(), v.data(), nullptr, nullptr, a, out.data());

  // The same keys in a paged cache: blocks of 16 rows in a shuffled order.
  const int entries = (lk + bs - 1) / bs, nblocks = B * entries;
  std::vector<i32> order(nblocks), table((size_t)B * entries), lens(B, lk);
  for (int i = 0; i < nblocks; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<T> kc((size_t)nblocks * hkv * bs * D), vc(kc.size());
  for (int b = 0; b < B; ++b)
    for (int e = 0; e < entries; ++e) {
      const int blk = order[b * entries + e];
      table[(size_t)b * entries + e] = blk;
      for (int h = 0; h < hkv; ++h)
        for (int r = 0; r < bs && e * bs + r < lk; ++r)
          for (int d = 0; d < D; ++d) {
            const size_t from = (((size_t)b * hkv + h) * lk + e * bs + r) * D + d;
            const size_t to = (((size_t)blk * hkv + h) * bs + r) * D + d;
            kc[to] = k[from];
            vc[to] = v[from];
          }
    }
  NvAttn p = a;
  p.k_strides[0] = (i64)hkv * bs * D;
  p.k_strides[1] = (i64)bs * D;
  p.k_strides[2] = D;
  for (int i = 0; i < 3; ++i) p.v_strides[i] = p.k_strides[i];
  p.t_strides[0] = entries;
  p.t_strides[1] = 1;
  p.len_stride = 1;
  p.keys = (i64)entries * bs;
  p.blocks = nblocks;
  p.block_size = bs;
  p.bs_magic = 0x80000000u;  // j / 16 = (j · 2^31) >> (31 + 4)
  p.bs_shift = 4;
  run(std::true_type{}, kc.data(), vc.data(), table.data(), lens.data(), p, pout.data());

  // The same keys and values as [B, L, H, D] rows: a transposed view, each row located by its
  // strides.
  std::vector<T> kt(k.size()), vt(v.size());
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < hkv; ++h)
      for (int j = 0; j < lk; ++j)
        for (int d = 0; d < D; ++d) {
          const size_t from = (((size_t)b * hkv + h) * lk + j) * D + d;
          const size_t to = (((size_t)b * lk + j) * hkv + h) * D + d;
          kt[to] = k[from];
          vt[to] = v[from];
        }
  NvAttn tr = a;
  tr.k_strides[0] = (i64)lk * hkv * D;
  tr.k_strides[1] = D;
  tr.k_strides[2] = (i64)hkv * D;
  for (int i = 0; i < 3; ++i) tr.v_strides[i] = tr.k_strides[i];
  run(std::false_type{}, kt.data(), vt.data(), nullptr, nullptr, tr, tout.data());

  int unequal = 0;
  double worst = 0, top = 0;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < hq; ++h)
      for (int i = 0; i < lq; ++i) {
        const int kvh = h / group;
        const int last = causal ? lk - lq + i : lk - 1;
        std::vector<double> s(last + 1);
        double m = -1e300, den = 0;
        for (int j = 0; j <= last; ++j) {
          double dot = 0;
          for (int d = 0; d < D; ++d)
            dot += (double)nv_up(q[(((size_t)b * hq + h) * lq + i) * D + d]) *
                   nv_up(k[(((size_t)b * hkv + kvh) * lk + j) * D + d]);
          s[j] = dot * scale;
          m = std::max(m, s[j]);
        }
        for (int j = 0; j <= last; ++j) den += std::exp(s[j] - m);
        for (int d = 0; d < D; ++d) {
          double o = 0;
          for (int j = 0; j <= last; ++j)
            o += std::exp(s[j] - m) * nv_up(v[(((size_t)b * hkv + kvh) * lk + j) * D + d]);
          o /= den;
          const size_t at = (((size_t)b * hq + h) * lq + i) * D + d;
          worst = nv_emu_worse(worst, std::abs(o - nv_up(out[at])));
          top = std::max(top, std::abs(o));
          unequal += (bits_of(out[at]) != bits_of(pout[at])) +
                     (bits_of(out[at]) != bits_of(tout[at]));
        }
      }
  for (u32 c : counters) unequal += c != 0u;  // left for the next launch at zero
  nv_emu_mix(out);
  std::printf(
      "decode %s%s D %d B %d hkv %d group %d lq %d lk %d causal %d splits %d: rel err %.3g, paged "
      "and [B, L, H, D] unequal %d\n",
      sizeof(T) == 4 ? "f32" : "bf16", merge ? " merged in-block" : "", D, B, hkv, group, lq, lk,
      causal, nsplit, worst / top, unequal);
  const double tol = sizeof(T) == 4 ? 1e-5 : 1.0 / 64;
  return (worst / top < tol && unequal == 0) ? 0 : 1;
}

int main() {
  int bad = 0;
  bad += decode_case<bf16, 128>(1, 2, 4, 1, 300, false, 1, 1);
  bad += decode_case<bf16, 128>(2, 1, 4, 2, 301, true, 1, 2);
  bad += decode_case<bf16, 128>(1, 2, 4, 1, 2100, false, 3, 3);
  bad += decode_case<bf16, 64>(1, 1, 8, 1, 1500, true, 2, 4);
  bad += decode_case<bf16, 256>(1, 1, 2, 1, 1100, false, 2, 5);
  // Head size 512: MLX's shape (one row of 8 query heads a key head), split and not; two
  // row chunks; causal rows past one step; a sequence shorter than a step.
  bad += decode_case<bf16, 512>(1, 1, 8, 1, 1100, false, 3, 6);
  bad += decode_case<bf16, 512>(2, 1, 8, 2, 203, true, 1, 7);
  bad += decode_case<bf16, 512>(1, 2, 3, 1, 9, false, 1, 8);
  bad += decode_case<float, 512, 4>(1, 1, 8, 1, 1030, false, 2, 9);
  bad += decode_case<float, 512, 2>(1, 2, 1, 2, 77, true, 1, 10);
  // The last split block of each row chunk merges the splits (no second kernel).
  bad += decode_case<bf16, 128>(1, 2, 4, 1, 2100, false, 3, 11, true);
  bad += decode_case<bf16, 128>(2, 2, 8, 2, 1500, true, 5, 12, true);
  bad += decode_case<bf16, 512>(1, 1, 8, 1, 1100, false, 3, 13, true);
  bad += decode_case<float, 128, 4>(1, 2, 4, 1, 1300, true, 4, 14, true);
  std::printf("bits %016llx\n", nv_emu_bits);
  std::printf(bad ? "FAIL %d\n" : "ALL OK\n", bad);
  return bad;
}
