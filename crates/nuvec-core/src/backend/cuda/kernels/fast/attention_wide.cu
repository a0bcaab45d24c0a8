// Decoding at head sizes past 256 (512), f16 and bf16: attention.cu's tensor-core kernel with
// the features split over the block's warps. Needs common.cuh and attention.cu first (their
// helpers, the merge of the splits and the kernels' forms); `attention.rs` says which cases
// come here.

// One warp's accumulators for 8 rows of D features take D / 4 registers a lane, too many past
// head size 256. Here the block's warps take the same 16 keys a step, warp w its own DW =
// D / NV_ATTN_WARPS features (from f0 = w · DW) of the query rows, keys, values and outputs,
// in the fragment layouts of nv_attention_mma over those features. Each warp's part of the
// scores S^T meets the others' in shared memory (two buffers, one barrier a step) and every
// warp adds the parts in warp order, so all hold the same scores, softmax state and weights
// (the same bits); each then multiplies its own features of the values. The warps' outputs
// are disjoint: no merge at the end.
template <typename T, int D, bool PAGED, bool VEC>
__device__ __forceinline__ void nv_attention_mma_wide(
    const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
    const i32* __restrict__ table, const i32* __restrict__ lengths, T* __restrict__ out,
    float* __restrict__ part_o, float2* __restrict__ part_ml, const NvAttn& a) {
  constexpr int R = NV_ATTN_MMA_ROWS;
  constexpr int DW = D / NV_ATTN_WARPS;  // features a warp takes
  constexpr int CI = DW / 32;            // chunks of them a lane holds
  constexpr int KS = 16;                 // keys a step, the block's
  static_assert(DW % 32 == 0, "whole chunks a lane");
  __shared__ __align__(16) float4 sh_s[2][NV_ATTN_WARPS][32];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int f0 = warp * DW;
  const int chunk = (int)(blockIdx.x % (unsigned)a.nchunks);
  const int split = (int)(blockIdx.x / (unsigned)a.nchunks);
  const i64 kvh = blockIdx.y, b = blockIdx.z;
  const i64 rows = (i64)a.group * a.lq;
  const i64 hq = (i64)a.hkv * a.group;

  const i64 len = nv_attn_len<PAGED>(lengths, b, a);
  bool direct;
  i64 start, end;
  nv_attn_bounds<KS>(len, split, a, direct, start, end);
  if (direct && split != 0) return;

  i64 k_head, v_head;
  const i32* entries;
  nv_attn_heads<PAGED>(table, b, kvh, a, k_head, v_head, entries);

  // This warp's key (`keys`) or value chunks of keys st + g and st + 8 + g.
  auto fetch = [&](i64 st, bool keys, uint4 (&into)[2][CI]) {
    nv_attn_mma_fetch<T, 2, CI, PAGED, VEC>(into, k, v, keys, st, end, entries, k_head, v_head,
                                            f0, a);
  };
  // The next step's keys are asked for once this step's part of the scores is formed, its
  // values once this step's are multiplied (as in nv_attention_mma).
  uint4 kc[2][CI], vc[2][CI];
  if (start < end) {
    fetch(start, true, kc);
    fetch(start, false, vc);
  }
  // The query rows after the first step's loads (as in nv_attention_mma).
  u32 qb[CI][4];
  i64 lim[2];
  float m[2], l[2], acc[2 * CI][4];
  nv_attn_mma_begin<T, CI>(qb, lim, m, l, acc, q, chunk, kvh, b, f0, len, end, a);
  int buf = 0;
  // Uniform over the block: every warp takes every step (the barrier needs them all).
  for (i64 step = start; step < end; step += KS, buf ^= 1) {
    float s[4];
    nv_attn_mma_scores<T, 2, CI>(s, kc, qb);
    if (step + KS < end) fetch(step + KS, true, kc);
    // The parts of the scores, added in warp order. A buffer is written again two steps on,
    // after every warp has passed the next step's barrier, so after every warp read it here.
    sh_s[buf][warp][lane] = make_float4(s[0], s[1], s[2], s[3]);
    __syncthreads();
    {
      float4 sum = sh_s[buf][0][lane];
#pragma unroll
      for (int w = 1; w < NV_ATTN_WARPS; ++w) {
        const float4 p = sh_s[buf][w][lane];
        sum = make_float4(__fadd_rn(sum.x, p.x), __fadd_rn(sum.y, p.y), __fadd_rn(sum.z, p.z),
                          __fadd_rn(sum.w, p.w));
      }
      s[0] = sum.x;
      s[1] = sum.y;
      s[2] = sum.z;
      s[3] = sum.w;
    }

    nv_attn_mma_softmax<2, 2 * CI>(s, step, g, lim, a.scale, m, l, acc);
    nv_attn_mma_values<T, 2, CI>(acc, s, vc);
    if (step + KS < end) fetch(step + KS, false, vc);
  }

#pragma unroll
  for (int o = 4; o < 32; o <<= 1) {
    l[0] = __fadd_rn(l[0], __shfl_xor_sync(0xffffffffu, l[0], o));
    l[1] = __fadd_rn(l[1], __shfl_xor_sync(0xffffffffu, l[1], o));
  }
  // Rows 2t and 2t + 1: the outputs when `direct`, else the split's (accumulator, max, sum).
#pragma unroll
  for (int x = 0; x < 2; ++x) {
    const i64 gr = (i64)chunk * R + 2 * t + x;
    if (gr >= rows) continue;
    const i64 h = kvh * a.group + gr / a.lq, i = gr % a.lq;
    const i64 row = (b * hq + h) * a.lq + i;
    const i64 at = row * a.nsplit + split;
    if (!direct && warp == 0 && g == 0) part_ml[at] = make_float2(m[x], l[x]);
#pragma unroll
    for (int ci = 0; ci < CI; ++ci) {
#pragma unroll
      for (int y = 0; y < 2; ++y) {
        const int f = f0 + 8 * (4 * ci + (g >> 1)) + 4 * y + (g & 1);
        const float o0 = acc[2 * ci + y][x], o1 = acc[2 * ci + y][x + 2];
        if (direct) {
          const bool any = l[x] > 0.0f;
          out[row * D + f] = nv_down<T>(any ? __fdiv_rn(o0, l[x]) : 0.0f);
          out[row * D + f + 2] = nv_down<T>(any ? __fdiv_rn(o1, l[x]) : 0.0f);
        } else {
          part_o[at * D + f] = o0;
          part_o[at * D + f + 2] = o1;
        }
      }
    }
  }
}

// f16 and bf16 past head size 256 (the warps split the features), 8 query rows a block:
// attention_{tn}_d{D}_r8_{form}. None before Ampere (`attention.rs` sends those heads to the
// fallback there).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define NV_ATTENTION_MMA_WIDE(T, TN, D) \
  NV_ATTN_FORMS(attention_##TN##_d##D##_r8, 3, T, D, NV_ATTN_MMA_ROWS, nv_attention_mma_wide, \
                T, D)
#else
#define NV_ATTENTION_MMA_WIDE(T, TN, D)
#endif
