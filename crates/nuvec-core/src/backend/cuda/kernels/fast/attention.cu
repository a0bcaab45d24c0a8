// Attention of a few query rows per head over many keys (decoding), from contiguous keys
// and values or from vLLM's paged cache; `attention.rs` says which cases come here.
//
// One block of NV_ATTN_THREADS threads takes (batch b, key head h, a chunk of up to R query
// rows of that head's group, a split of the keys). The rows of a chunk are (query head,
// query row) pairs of the query heads that share key head h, so every key and value row is
// read once per chunk. Keys go through shared memory in tiles of TK consecutive keys, in
// key order; per row the block keeps a running maximum and sum (online softmax, base 2)
// and an f32 accumulator of the weighted values.
//
// The arithmetic is a function of the key index only: tiles start at multiples of TK from
// the split's first key, every dot product runs over d in order, every weighted sum over the
// tile's keys in order, and the rounding of each step is fixed with __fmaf_rn / __fmul_rn /
// __fadd_rn (no contraction freedom). So the paged and the contiguous kernels, which differ
// only in where a key's row is read from, give the same bits. A sequence with fewer than
// NV_ATTN_SINGLE keys is done by split 0 alone in one pass (in both kernels); longer ones may
// be split, each split writing (max, sum, accumulator) that `attention_combine` merges in
// split order.

#define NV_ATTN_THREADS 128
#define NV_ATTN_WARPS (NV_ATTN_THREADS / 32)
#define NV_ATTN_SINGLE 1024
#define NV_ATTN_NEG_INF __int_as_float(0xff800000)

// Mirrors `AttnArgs` in `attention.rs` (repr(C)): all 64-bit fields first.
struct NvAttn {
  i64 q_strides[3];  // batch, head, row (elements); features are contiguous
  i64 q_offset;
  i64 k_strides[3];  // contiguous: batch, head, key; paged: block, head, row in block
  i64 k_offset;
  i64 v_strides[3];
  i64 v_offset;
  i64 t_strides[2];  // block table: sequence, entry (paged only)
  i64 t_offset;
  i64 len_stride;    // lengths (paged only)
  i64 len_offset;
  i64 keys;          // contiguous: the keys; paged: the table's capacity (entries · block size)
  i64 blocks;        // paged: blocks in the cache (table entries are clamped into it)
  i32 hkv;
  i32 group;         // query heads per key head
  i32 lq;            // query rows per head
  i32 block_size;    // paged only
  i32 causal;        // row i sees keys 0..=len − lq + i (else all keys)
  i32 nsplit;
  i32 nchunks;       // row chunks per key head
  float scale;       // the score scale times log2(e)
};

// Keys per tile and query rows per block: shared memory stays under 48 KiB.
template <int D> struct NvAttnShape {
  static constexpr int TK = D <= 64 ? 64 : (D <= 128 ? 32 : 16);
  static constexpr int R = D <= 128 ? 16 : 8;
  static constexpr int DP = D + 4;  // padded key rows: float4 reads across keys hit distinct banks
};

// The sequence's key count.
template <bool PAGED>
__device__ __forceinline__ i64 nv_attn_len(const i32* lengths, i64 b, const NvAttn& a) {
  if (!PAGED) return a.keys;
  i64 len = lengths[a.len_offset + b * a.len_stride];
  return len < 0 ? 0 : (len > a.keys ? a.keys : len);
}

// Where key (or value) row j of sequence b, head h starts.
template <bool PAGED>
__device__ __forceinline__ i64 nv_attn_row(const i32* table, i64 s0, i64 s1, i64 s2, i64 off,
                                           i64 b, i64 h, i64 j, const NvAttn& a) {
  if (PAGED) {
    i64 entry = j / a.block_size;
    i64 blk = table[a.t_offset + b * a.t_strides[0] + entry * a.t_strides[1]];
    blk = blk < 0 ? 0 : (blk >= a.blocks ? a.blocks - 1 : blk);
    return off + blk * s0 + h * s1 + (j - entry * a.block_size) * s2;
  }
  return off + b * s0 + h * s1 + j * s2;
}

// W consecutive elements from p into f (W elements of 16 bytes when VEC, else one).
template <typename T, int W>
__device__ __forceinline__ void nv_attn_load(const T* p, float* f) {
  if (W == 1) {
    f[0] = nv_up(p[0]);
  } else {
    NvPack<T, W> pack = *reinterpret_cast<const NvPack<T, W>*>(p);
#pragma unroll
    for (int e = 0; e < W; ++e) f[e] = nv_up(pack.v[e]);
  }
}

template <typename T, int D, bool PAGED, bool VEC>
__device__ void nv_attention(const T* __restrict__ q, const T* __restrict__ k,
                             const T* __restrict__ v, const i32* __restrict__ table,
                             const i32* __restrict__ lengths, T* __restrict__ out,
                             float* __restrict__ part_o, float2* __restrict__ part_ml,
                             const NvAttn a) {
  constexpr int TK = NvAttnShape<D>::TK;
  constexpr int R = NvAttnShape<D>::R;
  constexpr int DP = NvAttnShape<D>::DP;
  constexpr int W = VEC ? 16 / (int)sizeof(T) : 1;
  constexpr int CW = D / W;                 // loads per key row
  constexpr int U = R * D / 4;              // float4 accumulators of the block
  constexpr int NU = (U + NV_ATTN_THREADS - 1) / NV_ATTN_THREADS;
  __shared__ __align__(16) float ks[TK * DP];
  __shared__ __align__(16) float vs[TK * D];
  __shared__ __align__(16) float qs[R * D];
  __shared__ float ps[R * TK];
  __shared__ float row_m[R], row_l[R], row_a[R];
  __shared__ i64 row_lim[R];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int split = blockIdx.x;
  const i64 kvh = blockIdx.y / a.nchunks, chunk = blockIdx.y % a.nchunks;
  const i64 b = blockIdx.z;
  const i64 rows = (i64)a.group * a.lq;  // query rows of this key head
  const i64 hq = (i64)a.hkv * a.group;

  const i64 len = nv_attn_len<PAGED>(lengths, b, a);
  const bool direct = len < NV_ATTN_SINGLE || a.nsplit == 1;
  if (direct && split != 0) return;
  i64 start = 0, end = len;
  if (!direct) {
    const i64 tiles = (len + TK - 1) / TK;
    const i64 per = (tiles + a.nsplit - 1) / a.nsplit;
    start = (i64)split * per * TK;
    start = start < len ? start : len;
    end = start + per * TK;
    end = end < len ? end : len;
  }

  if (tid < R) {
    const i64 gr = chunk * R + tid;
    const i64 i = gr % a.lq;
    // The last key the row sees; -1 for rows past the chunk's end (they see nothing).
    row_lim[tid] = gr < rows ? (a.causal ? len - a.lq + i : len - 1) : -1;
    row_m[tid] = NV_ATTN_NEG_INF;
    row_l[tid] = 0.0f;
  }
  for (int u = tid; u < R * D; u += NV_ATTN_THREADS) {
    const int r = u / D, d = u % D;
    const i64 gr = chunk * R + r;
    float x = 0.0f;
    if (gr < rows) {
      const i64 h = kvh * a.group + gr / a.lq, i = gr % a.lq;
      x = __fmul_rn(nv_up(q[a.q_offset + b * a.q_strides[0] + h * a.q_strides[1] +
                            i * a.q_strides[2] + d]),
                    a.scale);
    }
    qs[u] = x;
  }

  float4 acc[NU];
#pragma unroll
  for (int n = 0; n < NU; ++n) acc[n] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  __syncthreads();

  for (i64 t0 = start; t0 < end; t0 += TK) {
    const int n = (int)(end - t0 < TK ? end - t0 : TK);
    // The tile's keys and values, as float; rows past the tile's end are zeros.
    for (int u = tid; u < TK * CW; u += NV_ATTN_THREADS) {
      const int t = u / CW, c = u % CW;
      float kf[W], vf[W];
      if (t < n) {
        const i64 j = t0 + t;
        const i64 kr = nv_attn_row<PAGED>(table, a.k_strides[0], a.k_strides[1], a.k_strides[2],
                                          a.k_offset, b, kvh, j, a);
        const i64 vr = nv_attn_row<PAGED>(table, a.v_strides[0], a.v_strides[1], a.v_strides[2],
                                          a.v_offset, b, kvh, j, a);
        nv_attn_load<T, W>(k + kr + c * W, kf);
        nv_attn_load<T, W>(v + vr + c * W, vf);
      } else {
#pragma unroll
        for (int e = 0; e < W; ++e) kf[e] = vf[e] = 0.0f;
      }
#pragma unroll
      for (int e = 0; e < W; ++e) {
        ks[t * DP + c * W + e] = kf[e];
        vs[t * D + c * W + e] = vf[e];
      }
    }
    __syncthreads();
    // Scores (base 2): -inf where the row does not see the key.
    for (int p = tid; p < R * TK; p += NV_ATTN_THREADS) {
      const int r = p / TK, t = p % TK;
      float s = NV_ATTN_NEG_INF;
      if (t < n && t0 + t <= row_lim[r]) {
        const float4* qr = reinterpret_cast<const float4*>(qs + r * D);
        const float4* kr = reinterpret_cast<const float4*>(ks + t * DP);
        float dot = 0.0f;
#pragma unroll 8
        for (int d4 = 0; d4 < D / 4; ++d4) {
          const float4 x = qr[d4], y = kr[d4];
          dot = __fmaf_rn(x.x, y.x, dot);
          dot = __fmaf_rn(x.y, y.y, dot);
          dot = __fmaf_rn(x.z, y.z, dot);
          dot = __fmaf_rn(x.w, y.w, dot);
        }
        s = dot;
      }
      ps[p] = s;
    }
    __syncthreads();
    // Per row: the new maximum, the weights, their sum; one warp per row.
    for (int r = warp; r < R; r += NV_ATTN_WARPS) {
      const float m_old = row_m[r];
      float mx = NV_ATTN_NEG_INF;
      for (int t = lane; t < TK; t += 32) mx = fmaxf(mx, ps[r * TK + t]);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      const float m_new = fmaxf(m_old, mx);
      float sum = 0.0f;
      for (int t = lane; t < TK; t += 32) {
        const float s = ps[r * TK + t];
        const float w = s == NV_ATTN_NEG_INF ? 0.0f : exp2f(__fadd_rn(s, -m_new));
        ps[r * TK + t] = w;
        sum = __fadd_rn(sum, w);
      }
      // A butterfly: every lane ends with the same sum (a + b == b + a).
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, o));
      if (lane == 0) {
        const float alpha = m_old == NV_ATTN_NEG_INF ? 0.0f : exp2f(__fadd_rn(m_old, -m_new));
        row_a[r] = alpha;
        row_l[r] = __fmaf_rn(row_l[r], alpha, sum);
        row_m[r] = m_new;
      }
    }
    __syncthreads();
    // The accumulators: rescaled, then the tile's weighted values in key order.
#pragma unroll
    for (int m = 0; m < NU; ++m) {
      const int u = tid + m * NV_ATTN_THREADS;
      if (u < U) {
        const int r = u / (D / 4), c = u % (D / 4);
        const float al = row_a[r];
        float4 o = acc[m];
        o.x = __fmul_rn(o.x, al);
        o.y = __fmul_rn(o.y, al);
        o.z = __fmul_rn(o.z, al);
        o.w = __fmul_rn(o.w, al);
        const float* pr = ps + r * TK;
        for (int t = 0; t < n; ++t) {
          const float w = pr[t];
          const float4 y = reinterpret_cast<const float4*>(vs + t * D)[c];
          o.x = __fmaf_rn(w, y.x, o.x);
          o.y = __fmaf_rn(w, y.y, o.y);
          o.z = __fmaf_rn(w, y.z, o.z);
          o.w = __fmaf_rn(w, y.w, o.w);
        }
        acc[m] = o;
      }
    }
    __syncthreads();
  }

#pragma unroll
  for (int m = 0; m < NU; ++m) {
    const int u = tid + m * NV_ATTN_THREADS;
    if (u >= U) continue;
    const int r = u / (D / 4), c = u % (D / 4);
    const i64 gr = chunk * R + r;
    if (gr >= rows) continue;
    const i64 h = kvh * a.group + gr / a.lq, i = gr % a.lq;
    const i64 row = (b * hq + h) * a.lq + i;  // of the row-major [B, Hq, Lq, D] output
    const float4 o = acc[m];
    if (direct) {
      const float l = row_l[r];
      T* y = out + row * D + c * 4;
      y[0] = nv_down<T>(l > 0.0f ? __fdiv_rn(o.x, l) : 0.0f);
      y[1] = nv_down<T>(l > 0.0f ? __fdiv_rn(o.y, l) : 0.0f);
      y[2] = nv_down<T>(l > 0.0f ? __fdiv_rn(o.z, l) : 0.0f);
      y[3] = nv_down<T>(l > 0.0f ? __fdiv_rn(o.w, l) : 0.0f);
    } else {
      const i64 at = row * a.nsplit + split;
      reinterpret_cast<float4*>(part_o + at * D)[c] = o;
      if (c == 0) part_ml[at] = make_float2(row_m[r], row_l[r]);
    }
  }
}

// Merges the splits of each row of a sequence with at least NV_ATTN_SINGLE keys, in split
// order; one block per output row.
template <typename T, bool PAGED>
__device__ void nv_attention_combine(const i32* __restrict__ lengths, T* __restrict__ out,
                                     const float* __restrict__ part_o,
                                     const float2* __restrict__ part_ml, i64 d, const NvAttn a) {
  const i64 row = blockIdx.x;
  const i64 hq = (i64)a.hkv * a.group;
  const i64 b = row / (hq * a.lq);
  if (nv_attn_len<PAGED>(lengths, b, a) < NV_ATTN_SINGLE) return;  // split 0 wrote it
  const float2* ml = part_ml + row * a.nsplit;
  float mx = NV_ATTN_NEG_INF;
  for (int s = 0; s < a.nsplit; ++s) mx = fmaxf(mx, ml[s].x);
  float l = 0.0f;
  for (int s = 0; s < a.nsplit; ++s) {
    const float w = ml[s].x == NV_ATTN_NEG_INF ? 0.0f : exp2f(__fadd_rn(ml[s].x, -mx));
    l = __fmaf_rn(ml[s].y, w, l);
  }
  for (i64 e = threadIdx.x; e < d; e += blockDim.x) {
    float o = 0.0f;
    for (int s = 0; s < a.nsplit; ++s) {
      const float w = ml[s].x == NV_ATTN_NEG_INF ? 0.0f : exp2f(__fadd_rn(ml[s].x, -mx));
      o = __fmaf_rn(part_o[(row * a.nsplit + s) * d + e], w, o);
    }
    out[row * d + e] = nv_down<T>(l > 0.0f ? __fdiv_rn(o, l) : 0.0f);
  }
}

#define NV_ATTN_ONE(T, TN, D, PAGED, VEC, SUFFIX)                                               \
  extern "C" __global__ void __launch_bounds__(NV_ATTN_THREADS)                                 \
      attention_##TN##_d##D##_##SUFFIX(const T* q, const T* k, const T* v, const i32* table,    \
                                       const i32* lengths, T* out, float* part_o,              \
                                       float2* part_ml, NvAttn a) {                             \
    nv_attention<T, D, PAGED, VEC>(q, k, v, table, lengths, out, part_o, part_ml, a);           \
  }

// The four kernels of one type and head size: contiguous or paged, 16-byte or scalar loads.
#define NV_ATTENTION(T, TN, D)           \
  NV_ATTN_ONE(T, TN, D, false, true, cv) \
  NV_ATTN_ONE(T, TN, D, false, false, cs) \
  NV_ATTN_ONE(T, TN, D, true, true, pv)  \
  NV_ATTN_ONE(T, TN, D, true, false, ps)

#define NV_ATTENTION_COMBINE(T, TN)                                                              \
  extern "C" __global__ void attention_combine_##TN##_c(T* out, const float* part_o,            \
                                                        const float2* part_ml,                 \
                                                        const i32* lengths, i64 d, NvAttn a) { \
    nv_attention_combine<T, false>(lengths, out, part_o, part_ml, d, a);                        \
  }                                                                                              \
  extern "C" __global__ void attention_combine_##TN##_p(T* out, const float* part_o,            \
                                                        const float2* part_ml,                 \
                                                        const i32* lengths, i64 d, NvAttn a) { \
    nv_attention_combine<T, true>(lengths, out, part_o, part_ml, d, a);                         \
  }
