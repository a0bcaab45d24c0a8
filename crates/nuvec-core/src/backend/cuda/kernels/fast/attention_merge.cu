// The merges of a long sequence's splits (attention.cu's kernels write each split's max, sum
// and accumulator): a second kernel (attention_combine_*), or the last of a row chunk's split
// blocks (a.merge). Included after attention.cu, before the kernels are instantiated.

// One split's (max, sum) x and accumulator y folded into the running (mx, sum, o), an online
// log-sum-exp in base 2; both merges take their splits through it, in split order.
__device__ __forceinline__ void nv_attn_merge_split(float& mx, float& sum, float4& o, float2 x,
                                                    float4 y) {
  const float m_new = fmaxf(mx, x.x);
  const float ref = m_new == NV_ATTN_NEG_INF ? 0.0f : m_new;
  const float alpha = nv_attn_exp2(__fadd_rn(mx, -ref));
  const float f = nv_attn_exp2(__fadd_rn(x.x, -ref));
  sum = __fmaf_rn(x.y, f, __fmul_rn(sum, alpha));
  o.x = __fmaf_rn(y.x, f, __fmul_rn(o.x, alpha));
  o.y = __fmaf_rn(y.y, f, __fmul_rn(o.y, alpha));
  o.z = __fmaf_rn(y.z, f, __fmul_rn(o.z, alpha));
  o.w = __fmaf_rn(y.w, f, __fmul_rn(o.w, alpha));
  mx = m_new;
}

// Merges the splits of each row of a sequence with at least NV_ATTN_SINGLE keys; one block
// per output row. The block's threads are P parts of D / 4 threads (4 features each); part p
// merges its own contiguous range of splits in split order (an online log-sum-exp), then the
// first part merges the parts in order: an order fixed by nsplit and D alone.
template <int D> struct NvAttnCombine {
  static constexpr int TPP = D / 4;                         // threads per part
  static constexpr int P = NV_ATTN_COMBINE_THREADS / TPP;   // parts
  static constexpr int THREADS = P * TPP;
};

template <typename T, int D, bool PAGED>
__device__ __forceinline__ void nv_attention_combine(const i32* __restrict__ lengths,
                                                     T* __restrict__ out,
                                                     const float* __restrict__ part_o,
                                                     const float2* __restrict__ part_ml,
                                                     const NvAttn& a) {
  constexpr int TPP = NvAttnCombine<D>::TPP, P = NvAttnCombine<D>::P;
  __shared__ float4 sh_o[P * TPP];
  __shared__ float2 sh_ml[P];
  nv_attn_wait_primary();
  const i64 row = blockIdx.x;
  const i64 hq = (i64)a.hkv * a.group;
  const i64 b = row / (hq * a.lq);
  if (nv_attn_len<PAGED>(lengths, b, a) < NV_ATTN_SINGLE) return;  // split 0 wrote it
  const int tid = threadIdx.x, part = tid / TPP, c4 = tid % TPP;
  const int per = (a.nsplit + P - 1) / P;
  const int s0 = part * per < a.nsplit ? part * per : a.nsplit;
  const int s1 = s0 + per < a.nsplit ? s0 + per : a.nsplit;
  const float2* ml = part_ml + row * a.nsplit;
  const float4* po = reinterpret_cast<const float4*>(part_o + row * a.nsplit * D) + c4;
  float mx = NV_ATTN_NEG_INF, sum = 0.0f;
  float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 4
  for (int s = s0; s < s1; ++s) {
    nv_attn_merge_split(mx, sum, o, ml[s], po[(i64)s * TPP]);
  }
  sh_o[part * TPP + c4] = o;
  if (c4 == 0) sh_ml[part] = make_float2(mx, sum);
  __syncthreads();
  if (part != 0) return;
  float m_all = NV_ATTN_NEG_INF;
  for (int p = 0; p < P; ++p) m_all = fmaxf(m_all, sh_ml[p].x);
  const float ref = m_all == NV_ATTN_NEG_INF ? 0.0f : m_all;
  float l = 0.0f;
  float4 y = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int p = 0; p < P; ++p) {
    const float2 x = sh_ml[p];
    const float f = nv_attn_exp2(__fadd_rn(x.x, -ref));
    const float4 z = sh_o[p * TPP + c4];
    l = __fmaf_rn(x.y, f, l);
    y.x = __fmaf_rn(z.x, f, y.x);
    y.y = __fmaf_rn(z.y, f, y.y);
    y.z = __fmaf_rn(z.z, f, y.z);
    y.w = __fmaf_rn(z.w, f, y.w);
  }
  nv_attn_store4<T>(out + row * D + c4 * 4, nv_attn_normalize(y, l));
}

// With a.merge, the last of a row chunk's split blocks to finish (counted in `counters`, one
// per chunk, which it sets back to 0 for the next launch) merges the splits' parts into the
// output, in split order, as one online log-sum-exp: no second kernel. Every block's parts
// are made visible device-wide before it counts itself (the threadfence pattern of CUDA's
// samples), and the last block reads them through L2.
template <typename T, int D, int R, bool PAGED>
__device__ __forceinline__ void nv_attn_merge_last(const i32* __restrict__ lengths,
                                                   T* __restrict__ out, const float* part_o,
                                                   const float2* part_ml, u32* counters,
                                                   const NvAttn& a) {
  if (!a.merge || a.nsplit == 1) return;
  const int chunk = (int)(blockIdx.x % (unsigned)a.nchunks);
  const i64 kvh = blockIdx.y, b = blockIdx.z;
  if (nv_attn_len<PAGED>(lengths, b, a) < NV_ATTN_SINGLE) return;  // split 0 wrote it
  __shared__ int last;
  __threadfence();
  __syncthreads();
  const i64 unit = (b * a.hkv + kvh) * a.nchunks + chunk;
  if (threadIdx.x == 0) last = atomicAdd(counters + unit, 1u) == (u32)(a.nsplit - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  const i64 rows = (i64)a.group * a.lq, hq = (i64)a.hkv * a.group;
  for (int u = threadIdx.x; u < R * (D / 4); u += NV_ATTN_THREADS) {
    const int r = u / (D / 4), c4 = u % (D / 4);
    const i64 gr = (i64)chunk * R + r;
    if (gr >= rows) continue;
    const i64 h = kvh * a.group + gr / a.lq, i = gr % a.lq;
    const i64 row = (b * hq + h) * a.lq + i;
    const float2* ml = part_ml + row * a.nsplit;
    const float4* po = reinterpret_cast<const float4*>(part_o + row * a.nsplit * D) + c4;
    float mx = NV_ATTN_NEG_INF, sum = 0.0f;
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    // Unrolled so that several splits' loads are in flight at once (each waits on L2).
#pragma unroll 4
    for (int sp = 0; sp < a.nsplit; ++sp) {
      nv_attn_merge_split(mx, sum, o, __ldcg(ml + sp), __ldcg(po + (i64)sp * (D / 4)));
    }
    nv_attn_store4<T>(out + row * D + c4 * 4, nv_attn_normalize(o, sum));
  }
  if (threadIdx.x == 0) counters[unit] = 0u;
}

#define NV_ATTENTION_COMBINE(T, TN, D)                                                           \
  extern "C" __global__ void __launch_bounds__(NvAttnCombine<D>::THREADS)                        \
      attention_combine_##TN##_d##D##_c(T* out, const float* part_o, const float2* part_ml,      \
                                        const i32* lengths, const NvAttn a) {                    \
    nv_attention_combine<T, D, false>(lengths, out, part_o, part_ml, a);                         \
  }                                                                                              \
  extern "C" __global__ void __launch_bounds__(NvAttnCombine<D>::THREADS)                        \
      attention_combine_##TN##_d##D##_p(T* out, const float* part_o, const float2* part_ml,      \
                                        const i32* lengths, const NvAttn a) {                    \
    nv_attention_combine<T, D, true>(lengths, out, part_o, part_ml, a);                          \
  }
