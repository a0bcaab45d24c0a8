// Attention of a few query rows per head over many keys (decoding), from contiguous keys
// and values or from vLLM's paged cache; `attention.rs` says which cases come here.
//
// Memory bound: every key and value byte should cross the bus once and at full speed. One
// block of NV_ATTN_WARPS warps takes (batch b, key head h, a chunk of R query rows of that
// head's group, a split of the keys); a chunk's rows are (query head, query row) pairs of
// the query heads that share key head h, so the chunk reads each key and value row once,
// and the chunks of one head and split are neighbouring blocks (a second chunk finds the
// rows in L2). Lanes read 16-byte chunks of key and value rows straight from global memory
// into registers, several per lane in flight; nothing is staged through shared memory. The
// split's keys come in warp steps (the keys a warp takes at once), dealt to the block's
// warps in turn; every worker (a warp, or a group of its lanes) keeps its own online softmax
// state (base 2), and at the end the block merges its workers' states through shared memory
// in worker order. The splits are the host's to choose: enough blocks for every
// multiprocessor to hold several to the end.
//
// Two kernels, by element type (and, past head size 256, attention_wide.cu's):
// - f16 and bf16 (`nv_attention_mma`): the products on the tensor cores (mma.sync). A warp
//   takes 16 keys a step (8 past head size 128) and the block's 8 query rows: the scores
//   S^T = K·Q^T come out with keys down and rows across, the weights are packed to the input
//   type and transposed in registers (movmatrix), and O^T += V^T·P^T with V's chunks
//   transposed the same way. Each lane holds chunks 4i + (lane % 4) of its keys and of its
//   query row: a dot product may take the features in any order, so no shuffle is needed
//   to put them where the tensor cores want them.
// - f32 (`nv_attention_lanes`): the products on the FMA units in f32. LK lanes (the row's
//   16-byte chunks rounded up to a power of two, at most 32) share a key row; such a group
//   is a worker and takes U consecutive keys a step; a dot product is the lane's features in
//   order, then a butterfly over its LK lanes.
//
// Determinism. Every sum runs in an order fixed by the key indices, the split's bounds and
// the shape (never by addresses or timing; no atomics), and the roundings are written out
// (__fmaf_rn, __fmul_rn, __fadd_rn: no contraction freedom; a tensor-core product's sum is
// the hardware's, fixed for given inputs). The paged and the contiguous kernels differ only
// in where a key's row is read from, and the 16-byte and the scalar ones only in how a chunk
// is read, so they give the same bits. A sequence with fewer than NV_ATTN_SINGLE keys is
// done by split 0 alone in one pass (in every kernel); longer ones may be split, each split
// writing (max, sum, accumulator) that attention_merge.cu's kernels merge in split order.

#define NV_ATTN_WARPS 4
#define NV_ATTN_THREADS (32 * NV_ATTN_WARPS)
#define NV_ATTN_SINGLE 1024
#define NV_ATTN_NEG_INF __int_as_float(0xff800000)
#define NV_ATTN_COMBINE_THREADS 256
// Query rows a block of the tensor-core kernel takes (the products' n).
#define NV_ATTN_MMA_ROWS 8
// Tunable: whether the tensor-core kernel asks for the next step's keys and values during this
// step's arithmetic (see nv_attention_mma).
#ifndef NV_ATTN_PREFETCH
#define NV_ATTN_PREFETCH 1
#endif

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
  u32 bs_magic;      // paged: j / block_size = (j · bs_magic) >> (31 + bs_shift) for j < 2^31
  i32 bs_shift;
  i32 causal;        // row i sees keys 0..=len − lq + i (else all keys)
  i32 nsplit;
  i32 nchunks;       // row chunks per key head
  i32 merge;         // 1: the last split block of a chunk merges the splits (no second kernel)
  float scale;       // the score scale times log2(e)
  i32 l2_steps;      // half types: a warp's first steps asked of L2 at its start (0, 1: none)
  i32 l1_ahead;      // half types, keys not paged: steps ahead of its loads a warp asks L1 for
                     // its rows (0: none)
};

// The sequence's key count.
template <bool PAGED>
__device__ __forceinline__ i64 nv_attn_len(const i32* lengths, i64 b, const NvAttn& a) {
  if (!PAGED) return a.keys;
  i64 len = lengths[a.len_offset + b * a.len_stride];
  return len < 0 ? 0 : (len > a.keys ? a.keys : len);
}

// The keys [start, end) of this block's split, in whole warp steps of G keys (the block's
// warps take its steps in turn, so they may end one step apart); `direct` when the sequence
// is done in one pass (by split 0, the other splits returning at once).
template <int G>
__device__ __forceinline__ void nv_attn_bounds(i64 len, int split, const NvAttn& a,
                                               bool& direct, i64& start, i64& end) {
  direct = len < NV_ATTN_SINGLE || a.nsplit == 1;
  start = 0;
  end = len;
  if (!direct) {
    const i64 steps = (len + G - 1) / G;
    const i64 per = (steps + a.nsplit - 1) / a.nsplit;
    start = (i64)split * per * G;
    start = start < len ? start : len;
    end = start + per * G;
    end = end < len ? end : len;
  }
}

// Where key head kvh of sequence b starts in the keys and the values (elements; paged: within
// a block), and the sequence's table entries (paged only).
template <bool PAGED>
__device__ __forceinline__ void nv_attn_heads(const i32* table, i64 b, i64 kvh, const NvAttn& a,
                                              i64& k_head, i64& v_head, const i32*& entries) {
  k_head = a.k_offset + kvh * a.k_strides[1] + (PAGED ? 0 : b * a.k_strides[0]);
  v_head = a.v_offset + kvh * a.v_strides[1] + (PAGED ? 0 : b * a.v_strides[0]);
  entries = table + (PAGED ? a.t_offset + b * a.t_strides[0] : 0);
}

// Where key j's key and value rows start: contiguous from the head's first row, paged through
// the sequence's table entries (clamped into the cache).
template <bool PAGED>
__device__ __forceinline__ void nv_attn_rows(i64 j, const i32* entries, i64 k_head, i64 v_head,
                                             const NvAttn& a, i64& kr, i64& vr) {
  if (PAGED) {
    // The division by the block size, by multiplication (host-made magic, exact below 2^31).
    const i64 entry = j < 0x80000000ll
                          ? (i64)(((u64)(u32)j * a.bs_magic) >> (31 + a.bs_shift))
                          : j / a.block_size;
    const i64 row = j - entry * a.block_size;
    i64 blk = __ldg(entries + entry * a.t_strides[1]);
    blk = blk < 0 ? 0 : (blk >= a.blocks ? a.blocks - 1 : blk);
    kr = k_head + blk * a.k_strides[0] + row * a.k_strides[2];
    vr = v_head + blk * a.v_strides[0] + row * a.v_strides[2];
  } else {
    kr = k_head + j * a.k_strides[2];
    vr = v_head + j * a.v_strides[2];
  }
}

// 2^x (the softmax's base; 2^-inf = 0): one MUFU instruction, the same in every kernel.
// nuvec-emulation: device only (tests/emulation/ptx.h stands in for this region) {
__device__ __forceinline__ float nv_attn_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Programmatic dependent launches (Hopper's; no-ops where a kernel was not launched so, and
// before Hopper): the split kernel lets the merge's launch begin as soon as its blocks have
// all started, and the merge waits for the split kernel to finish, its writes visible, before
// it reads anything.
__device__ __forceinline__ void nv_attn_release_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void nv_attn_wait_primary() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// } nuvec-emulation

// One 16-byte chunk of a row as raw words: one vector load when VEC, else element by element.
// Keys and values are read once: the vector load skips L1 and asks L2 for whole 256-byte
// runs, which the neighbouring lanes read next.
// nuvec-emulation: device only (tests/emulation/ptx.h stands in for this region) {
template <typename T, bool VEC>
__device__ __forceinline__ uint4 nv_attn_chunk(const T* p) {
  uint4 r;
  if (VEC) {
#if __CUDA_ARCH__ >= 800
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p));
#else
    r = __ldg(reinterpret_cast<const uint4*>(p));
#endif
  } else if (sizeof(T) == 4) {
    const u32* w = reinterpret_cast<const u32*>(p);
    r = make_uint4(__ldg(w), __ldg(w + 1), __ldg(w + 2), __ldg(w + 3));
  } else {
    const u16* h = reinterpret_cast<const u16*>(p);
    u32 w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = (u32)__ldg(h + 2 * i) | ((u32)__ldg(h + 2 * i + 1) << 16);
    r = make_uint4(w[0], w[1], w[2], w[3]);
  }
  return r;
}
// } nuvec-emulation

// Word w (0..3) of a chunk.
__device__ __forceinline__ u32 nv_attn_word(const uint4& c, int w) {
  return w == 0 ? c.x : (w == 1 ? c.y : (w == 2 ? c.z : c.w));
}

// The elements of a chunk as floats (4 of f32, 8 of the half types).
template <typename T> __device__ __forceinline__ void nv_attn_unpack(uint4 c, float* f);
template <> __device__ __forceinline__ void nv_attn_unpack<float>(uint4 c, float* f) {
  f[0] = __uint_as_float(c.x);
  f[1] = __uint_as_float(c.y);
  f[2] = __uint_as_float(c.z);
  f[3] = __uint_as_float(c.w);
}
template <> __device__ __forceinline__ void nv_attn_unpack<bf16>(uint4 c, float* f) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const u32 w = nv_attn_word(c, i);
    f[2 * i] = __uint_as_float(w << 16);
    f[2 * i + 1] = __uint_as_float(w & 0xffff0000u);
  }
}
template <> __device__ __forceinline__ void nv_attn_unpack<f16>(uint4 c, float* f) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const u32 w = nv_attn_word(c, i);
    f[2 * i] = __half2float(__ushort_as_half((unsigned short)(w & 0xffffu)));
    f[2 * i + 1] = __half2float(__ushort_as_half((unsigned short)(w >> 16)));
  }
}

// 4 floats rounded to T and stored together (the output's rows are 16-byte aligned: D is a
// multiple of 32 and the output a fresh row-major array).
// o / l, or zeros where l is 0 (a row with no key to weigh): the output of an accumulator o
// and its sum of weights l, rounded as written.
__device__ __forceinline__ float4 nv_attn_normalize(float4 o, float l) {
  if (!(l > 0.0f)) return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  return make_float4(__fdiv_rn(o.x, l), __fdiv_rn(o.y, l), __fdiv_rn(o.z, l), __fdiv_rn(o.w, l));
}

template <typename T> __device__ __forceinline__ void nv_attn_store4(T* y, float4 o) {
  NvPack<T, 4> p;
  p.v[0] = nv_down<T>(o.x);
  p.v[1] = nv_down<T>(o.y);
  p.v[2] = nv_down<T>(o.z);
  p.v[3] = nv_down<T>(o.w);
  *reinterpret_cast<NvPack<T, 4>*>(y) = p;
}

// The block's end: merges its NW workers' states (sh_ml[w·R + r] = (max, sum), sh_o[(w·R + r)·D
// + f] the accumulators, written before a barrier) in worker order and writes the chunk's
// rows: the outputs when `direct`, else the split's (accumulator, max, sum).
template <typename T, int D, int R, int NW>
__device__ __forceinline__ void nv_attn_finish(const float* sh_o, const float2* sh_ml,
                                               float* sh_w, float2* sh_row, bool direct,
                                               int chunk, int split, i64 b, i64 kvh, T* out,
                                               float* part_o, float2* part_ml,
                                               const NvAttn& a) {
  const int tid = threadIdx.x;
  if (tid < R) {
    float mx = NV_ATTN_NEG_INF;
    for (int w = 0; w < NW; ++w) mx = fmaxf(mx, sh_ml[w * R + tid].x);
    const float ref = mx == NV_ATTN_NEG_INF ? 0.0f : mx;
    float sum = 0.0f;
    for (int w = 0; w < NW; ++w) {
      const float2 ml = sh_ml[w * R + tid];
      const float f = nv_attn_exp2(__fadd_rn(ml.x, -ref));
      sh_w[w * R + tid] = f;
      sum = __fmaf_rn(ml.y, f, sum);
    }
    sh_row[tid] = make_float2(mx, sum);
  }
  __syncthreads();
  const i64 rows = (i64)a.group * a.lq;
  const i64 hq = (i64)a.hkv * a.group;
  for (int u = tid; u < R * (D / 4); u += NV_ATTN_THREADS) {
    const int r = u / (D / 4), c4 = u % (D / 4);
    const i64 gr = (i64)chunk * R + r;
    if (gr >= rows) continue;
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 4
    for (int w = 0; w < NW; ++w) {
      const float f = sh_w[w * R + r];
      const float4 x = reinterpret_cast<const float4*>(sh_o + (w * R + r) * D)[c4];
      o.x = __fmaf_rn(x.x, f, o.x);
      o.y = __fmaf_rn(x.y, f, o.y);
      o.z = __fmaf_rn(x.z, f, o.z);
      o.w = __fmaf_rn(x.w, f, o.w);
    }
    const i64 h = kvh * a.group + gr / a.lq, i = gr % a.lq;
    const i64 row = (b * hq + h) * a.lq + i;  // of the row-major [B, Hq, Lq, D] output
    const float2 ml = sh_row[r];
    if (direct) {
      nv_attn_store4<T>(out + row * D + c4 * 4, nv_attn_normalize(o, ml.y));
    } else {
      const i64 at = row * a.nsplit + split;
      reinterpret_cast<float4*>(part_o + at * D)[c4] = o;
      if (c4 == 0) part_ml[at] = ml;
    }
  }
}

// ---- f32: the FMA units ----

// How the lanes share a key row of type T and head size D (see the top of the file).
template <typename T, int D> struct NvAttnLanes {
  static constexpr int W = 16 / (int)sizeof(T);  // elements in a 16-byte chunk
  static constexpr int NCH = D / W;              // chunks in a row
  static constexpr int LK = NCH > 16 ? 32 : (NCH > 8 ? 16 : (NCH > 4 ? 8 : 4));
  static constexpr int CPL = (NCH + LK - 1) / LK;  // chunks a lane holds
  static constexpr int E = CPL * W;                // features a lane holds
  static constexpr int KP = 32 / LK;               // workers in a warp
  static constexpr int WORKERS = NV_ATTN_WARPS * KP;
  // Keys per worker and step: four 16-byte loads in flight per lane for keys and values each.
  static constexpr int U = CPL == 1 ? 4 : 2;
  static constexpr int STEP = WORKERS * U;  // keys per block and step
};

template <typename T, int D, int R, bool PAGED, bool VEC>
__device__ __forceinline__ void nv_attention_lanes(const T* __restrict__ q,
                                                   const T* __restrict__ k,
                                                   const T* __restrict__ v,
                                                   const i32* __restrict__ table,
                                                   const i32* __restrict__ lengths,
                                                   T* __restrict__ out, float* __restrict__ part_o,
                                                   float2* __restrict__ part_ml, const NvAttn& a) {
  using S = NvAttnLanes<T, D>;
  constexpr int W = S::W, NCH = S::NCH, LK = S::LK, CPL = S::CPL, E = S::E, KP = S::KP;
  constexpr int U = S::U, WORKERS = S::WORKERS, STEP = S::STEP;
  // The workers' states, merged at the end (WORKERS · R · D floats: 32 KiB at most, f32 rows
  // of 512 features four a block, or half-type rows of 256 eight a block).
  __shared__ __align__(16) float sh_o[WORKERS * R * D];
  __shared__ float2 sh_ml[WORKERS * R];
  __shared__ float sh_w[WORKERS * R];
  __shared__ float2 sh_row[R];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int grp = lane / LK, sub = lane % LK;
  const int worker = warp * KP + grp;
  const int chunk = (int)(blockIdx.x % (unsigned)a.nchunks);
  const int split = (int)(blockIdx.x / (unsigned)a.nchunks);
  const i64 kvh = blockIdx.y, b = blockIdx.z;
  const i64 rows = (i64)a.group * a.lq;  // query rows of this key head

  const i64 len = nv_attn_len<PAGED>(lengths, b, a);
  bool direct;
  i64 start, end;
  nv_attn_bounds<KP * U>(len, split, a, direct, start, end);
  if (direct && split != 0) return;

  // The query rows, scaled, as this lane's features; lim[r]: the last key row r sees, capped
  // at the split's end (-1 for the chunk's padding rows, which see nothing).
  float qf[R][E];
  i64 lim[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const i64 gr = (i64)chunk * R + r;
    const bool valid = gr < rows;
    const i64 h = kvh * a.group + gr / a.lq, i = gr % a.lq;
    const i64 last = valid ? (a.causal ? len - a.lq + i : len - 1) : -1;
    lim[r] = last < end - 1 ? last : end - 1;
    const T* qr = q + a.q_offset + b * a.q_strides[0] + h * a.q_strides[1] + i * a.q_strides[2];
#pragma unroll
    for (int ci = 0; ci < CPL; ++ci) {
      const int c = sub + LK * ci;
#pragma unroll
      for (int e = 0; e < W; ++e)
        qf[r][ci * W + e] =
            valid && c < NCH ? __fmul_rn(nv_up(qr[c * W + e]), a.scale) : 0.0f;
    }
  }

  float m[R], l[R], acc[R][E];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    m[r] = NV_ATTN_NEG_INF;
    l[r] = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) acc[r][e] = 0.0f;
  }

  i64 k_head, v_head;
  const i32* entries;
  nv_attn_heads<PAGED>(table, b, kvh, a, k_head, v_head, entries);

  // The loop is uniform over the warp (its shuffles need every lane): a worker whose keys lie
  // past the end loads nothing and sees nothing.
  for (i64 step = start + (i64)warp * KP * U; step < end; step += STEP) {
    const i64 j0 = step + (i64)grp * U;  // this worker's first key
    uint4 kc[U][CPL], vc[U][CPL];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const bool live = j0 + u < end;
      i64 kr = 0, vr = 0;
      if (live) nv_attn_rows<PAGED>(j0 + u, entries, k_head, v_head, a, kr, vr);
#pragma unroll
      for (int ci = 0; ci < CPL; ++ci) {
        const int c = sub + LK * ci;
        kc[u][ci] = vc[u][ci] = make_uint4(0u, 0u, 0u, 0u);
        if (live && c < NCH) {
          kc[u][ci] = nv_attn_chunk<T, VEC>(k + kr + c * W);
          vc[u][ci] = nv_attn_chunk<T, VEC>(v + vr + c * W);
        }
      }
    }

    // Scores (base 2) of the U keys for every row; -inf where the row does not see the key.
    float sc[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float kf[E];
#pragma unroll
      for (int ci = 0; ci < CPL; ++ci) nv_attn_unpack<T>(kc[u][ci], kf + ci * W);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float dot = 0.0f;
#pragma unroll
        for (int e = 0; e < E; ++e) dot = __fmaf_rn(qf[r][e], kf[e], dot);
#pragma unroll
        for (int o = LK / 2; o > 0; o >>= 1)
          dot = __fadd_rn(dot, __shfl_xor_sync(0xffffffffu, dot, o));
        sc[u][r] = j0 + u <= lim[r] ? dot : NV_ATTN_NEG_INF;
      }
    }

    // Online softmax per row over the U keys: one rescale per step.
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float mx = sc[0][r];
#pragma unroll
      for (int u = 1; u < U; ++u) mx = fmaxf(mx, sc[u][r]);
      const float m_new = fmaxf(m[r], mx);
      // While the row has seen nothing, any finite reference gives weights 0.
      const float ref = m_new == NV_ATTN_NEG_INF ? 0.0f : m_new;
      const float alpha = nv_attn_exp2(__fadd_rn(m[r], -ref));
      float sum = __fmul_rn(l[r], alpha);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        sc[u][r] = nv_attn_exp2(__fadd_rn(sc[u][r], -ref));  // the weight
        sum = __fadd_rn(sum, sc[u][r]);
      }
      l[r] = sum;
      m[r] = m_new;
#pragma unroll
      for (int e = 0; e < E; ++e) acc[r][e] = __fmul_rn(acc[r][e], alpha);
    }

    // The weighted values, key by key.
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float vf[E];
#pragma unroll
      for (int ci = 0; ci < CPL; ++ci) nv_attn_unpack<T>(vc[u][ci], vf + ci * W);
#pragma unroll
      for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int e = 0; e < E; ++e) acc[r][e] = __fmaf_rn(sc[u][r], vf[e], acc[r][e]);
      }
    }
  }

  // The workers' states to shared memory, then the merge.
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (sub == 0) sh_ml[worker * R + r] = make_float2(m[r], l[r]);
#pragma unroll
    for (int ci = 0; ci < CPL; ++ci) {
      const int c = sub + LK * ci;
      if (c < NCH) {
        float4* o = reinterpret_cast<float4*>(sh_o + (worker * R + r) * D + c * W);
#pragma unroll
        for (int e4 = 0; e4 < W / 4; ++e4)
          o[e4] = make_float4(acc[r][ci * W + 4 * e4], acc[r][ci * W + 4 * e4 + 1],
                              acc[r][ci * W + 4 * e4 + 2], acc[r][ci * W + 4 * e4 + 3]);
      }
    }
  }
  __syncthreads();
  nv_attn_finish<T, D, R, WORKERS>(sh_o, sh_ml, sh_w, sh_row, direct, chunk, split, b, kvh, out,
                                   part_o, part_ml, a);
}

// ---- f16 and bf16: the tensor cores ----

// d += a·b over 16 (k16) or 8 (k8) of the contraction, f32 accumulators; a and b hold pairs
// of T in the fragment layouts of mma.sync (PTX ISA, "Matrix fragments for mma.m16n8k16").
// nuvec-emulation: device only (tests/emulation/ptx.h stands in for this region) {
template <typename T>
__device__ __forceinline__ void nv_attn_mma16(float (&d)[4], u32 a0, u32 a1, u32 a2, u32 a3,
                                              u32 b0, u32 b1);
template <>
__device__ __forceinline__ void nv_attn_mma16<bf16>(float (&d)[4], u32 a0, u32 a1, u32 a2,
                                                    u32 a3, u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void nv_attn_mma16<f16>(float (&d)[4], u32 a0, u32 a1, u32 a2,
                                                   u32 a3, u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
template <typename T>
__device__ __forceinline__ void nv_attn_mma8(float (&d)[4], u32 a0, u32 a1, u32 b0);
template <>
__device__ __forceinline__ void nv_attn_mma8<bf16>(float (&d)[4], u32 a0, u32 a1, u32 b0) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(b0));
}
template <>
__device__ __forceinline__ void nv_attn_mma8<f16>(float (&d)[4], u32 a0, u32 a1, u32 b0) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(b0));
}

// The transpose of the 8×8 matrix of 16-bit elements the warp holds (lane l: row l / 4,
// columns 2(l % 4) and 2(l % 4) + 1), in the same layout.
__device__ __forceinline__ u32 nv_attn_trans(u32 x) {
  u32 y;
  asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}

// Two floats rounded to T and packed, lo in the low half.
template <typename T> __device__ __forceinline__ u32 nv_attn_pack2(float lo, float hi);
template <> __device__ __forceinline__ u32 nv_attn_pack2<bf16>(float lo, float hi) {
  u32 y;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(y) : "f"(hi), "f"(lo));
  return y;
}
template <> __device__ __forceinline__ u32 nv_attn_pack2<f16>(float lo, float hi) {
  u32 y;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(y) : "f"(hi), "f"(lo));
  return y;
}
// } nuvec-emulation

// One step's online softmax over the S^T fragment s (lane (g, t): keys step + g and, with
// KH == 2, step + 8 + g, of rows 2t and 2t + 1), base 2: scaled and masked past lim (the last
// key each row sees), the rows' maxima over the warp, the weights in place of the scores, the
// rows' maxima m and this lane's sums l updated, and the accumulator's N tiles rescaled.
template <int KH, int N>
__device__ __forceinline__ void nv_attn_mma_softmax(float (&s)[4], i64 step, int g,
                                                    const i64 (&lim)[2], float scale,
                                                    float (&m)[2], float (&l)[2],
                                                    float (&acc)[N][4]) {
  float mx[2];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const i64 j = step + 8 * (e >> 1) + g;
    const bool seen = (e >> 1) < KH && j <= lim[e & 1];
    s[e] = seen ? __fmul_rn(s[e], scale) : NV_ATTN_NEG_INF;
  }
  mx[0] = fmaxf(s[0], s[2]);
  mx[1] = fmaxf(s[1], s[3]);
#pragma unroll
  for (int o = 4; o < 32; o <<= 1) {
    mx[0] = fmaxf(mx[0], __shfl_xor_sync(0xffffffffu, mx[0], o));
    mx[1] = fmaxf(mx[1], __shfl_xor_sync(0xffffffffu, mx[1], o));
  }
  float alpha[2];
#pragma unroll
  for (int x = 0; x < 2; ++x) {
    const float m_new = fmaxf(m[x], mx[x]);
    // While the row has seen nothing, any finite reference gives weights 0.
    const float ref = m_new == NV_ATTN_NEG_INF ? 0.0f : m_new;
    alpha[x] = nv_attn_exp2(__fadd_rn(m[x], -ref));
    s[x] = nv_attn_exp2(__fadd_rn(s[x], -ref));  // the weights
    s[x + 2] = nv_attn_exp2(__fadd_rn(s[x + 2], -ref));
    // This lane's part of the row's sum (its keys); the lanes are added up at the end.
    l[x] = __fadd_rn(__fadd_rn(__fmul_rn(l[x], alpha[x]), s[x]), s[x + 2]);
    m[x] = m_new;
  }
#pragma unroll
  for (int n = 0; n < N; ++n) {
    acc[n][0] = __fmul_rn(acc[n][0], alpha[0]);
    acc[n][1] = __fmul_rn(acc[n][1], alpha[1]);
    acc[n][2] = __fmul_rn(acc[n][2], alpha[0]);
    acc[n][3] = __fmul_rn(acc[n][3], alpha[1]);
  }
}

// The pieces the tensor-core kernels share (lane (g, t) = (lane / 4, lane % 4), 8 query rows a
// block; `f0`: the first feature the warp takes, 0 but in nv_attention_mma_wide).
//
// This lane's part of the chunk's query row g: its chunks 4 ci + t of the features from f0, as
// words (unscaled: the inputs' own values, exact in T); zeros for padding rows.
template <typename T, int CI>
__device__ __forceinline__ void nv_attn_mma_query(u32 (&qb)[CI][4], const T* __restrict__ q,
                                                  int chunk, i64 kvh, i64 b, int f0,
                                                  const NvAttn& a) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const i64 gr = (i64)chunk * NV_ATTN_MMA_ROWS + g;
  const bool valid = gr < (i64)a.group * a.lq;
  const i64 h = kvh * a.group + gr / a.lq, i = gr % a.lq;
  const u16* qr = reinterpret_cast<const u16*>(q + a.q_offset + b * a.q_strides[0] +
                                               h * a.q_strides[1] + i * a.q_strides[2] + f0);
#pragma unroll
  for (int ci = 0; ci < CI; ++ci) {
    const int c = 4 * ci + t;
#pragma unroll
    for (int w = 0; w < 4; ++w)
      qb[ci][w] = valid ? (u32)__ldg(qr + 8 * c + 2 * w) |
                              ((u32)__ldg(qr + 8 * c + 2 * w + 1) << 16)
                        : 0u;
  }
}

// The last key rows 2t and 2t + 1 of the chunk see, capped at the split's end (-1: padding
// rows).
__device__ __forceinline__ void nv_attn_mma_limits(i64 (&lim)[2], int chunk, i64 len, i64 end,
                                                   const NvAttn& a) {
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int x = 0; x < 2; ++x) {
    const i64 gr = (i64)chunk * NV_ATTN_MMA_ROWS + 2 * t + x;
    const i64 i = gr % a.lq;
    const i64 last = gr < (i64)a.group * a.lq ? (a.causal ? len - a.lq + i : len - 1) : -1;
    lim[x] = last < end - 1 ? last : end - 1;
  }
}

// The key (`keys`) or value chunks 4 ci + t, from feature f0, of keys st + 8 hh + g (hh < KH):
// zeros past the split's end.
template <typename T, int KH, int CI, bool PAGED, bool VEC>
__device__ __forceinline__ void nv_attn_mma_fetch(uint4 (&into)[KH][CI], const T* __restrict__ k,
                                                  const T* __restrict__ v, bool keys, i64 st,
                                                  i64 end, const i32* entries, i64 k_head,
                                                  i64 v_head, int f0, const NvAttn& a) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int hh = 0; hh < KH; ++hh) {
    const i64 j = st + 8 * hh + g;
    const bool live = j < end;
    i64 kr = 0, vr = 0;
    if (live) nv_attn_rows<PAGED>(j, entries, k_head, v_head, a, kr, vr);
    const T* from = (keys ? k + kr : v + vr) + f0;
#pragma unroll
    for (int ci = 0; ci < CI; ++ci) {
      into[hh][ci] = make_uint4(0u, 0u, 0u, 0u);
      if (live) into[hh][ci] = nv_attn_chunk<T, VEC>(from + 8 * (4 * ci + t));
    }
  }
}

// Asks L2 for the key and value rows of the warp step from key st (those before the split's
// end; rows start 16-byte aligned in the 16-byte forms): where a head's rows follow each other
// (not paged), lane 0 asks for each run at once; else lane l < KS asks for key st + l's rows.
template <typename T, int D, int KS, bool PAGED>
__device__ __forceinline__ void nv_attn_l2_step(const T* __restrict__ k, const T* __restrict__ v,
                                                i64 st, i64 end, const i32* entries, i64 k_head,
                                                i64 v_head, const NvAttn& a) {
  const int lane = threadIdx.x & 31;
  if (!PAGED && a.k_strides[2] == D && a.v_strides[2] == D) {
    const i64 n = end - st < KS ? end - st : KS;
    if (lane == 0 && n > 0) {
      nv_l2_prefetch(k + k_head + st * D, (u32)(n * D * (i64)sizeof(T)));
      nv_l2_prefetch(v + v_head + st * D, (u32)(n * D * (i64)sizeof(T)));
    }
    return;
  }
  const i64 j = st + lane;
  if (lane < KS && j < end) {
    i64 kr, vr;
    nv_attn_rows<PAGED>(j, entries, k_head, v_head, a, kr, vr);
    nv_l2_prefetch(k + kr, D * (u32)sizeof(T));
    nv_l2_prefetch(v + vr, D * (u32)sizeof(T));
  }
}

// Asks L1 for the key and value rows of the warp step from key st (`l1_ahead`; keys not
// paged): lane l takes line l % L of key st + l / L (L lines a row), up to the split's end.
template <typename T, int D, int KS>
__device__ __forceinline__ void nv_attn_l1_step(const T* __restrict__ k, const T* __restrict__ v,
                                                i64 st, i64 end, i64 k_head, i64 v_head,
                                                const NvAttn& a) {
  constexpr int L = (D * (int)sizeof(T) + 127) / 128;
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int i = lane; i < KS * L; i += 32) {
    const i64 j = st + i / L;
    if (j < end) {
      i64 kr, vr;
      nv_attn_rows<false>(j, nullptr, k_head, v_head, a, kr, vr);
      const int off = (i % L) * (128 / (int)sizeof(T));
      nv_l1_prefetch(k + kr + off);
      nv_l1_prefetch(v + vr + off);
    }
  }
}

// The start of a tensor-core warp's work on its block: the chunk's query rows as B fragments
// (features from f0), the rows' last keys capped at the split's end, and an empty softmax
// state and accumulators.
template <typename T, int CI>
__device__ __forceinline__ void nv_attn_mma_begin(u32 (&qb)[CI][4], i64 (&lim)[2], float (&m)[2],
                                                  float (&l)[2], float (&acc)[2 * CI][4],
                                                  const T* __restrict__ q, int chunk, i64 kvh,
                                                  i64 b, int f0, i64 len, i64 end,
                                                  const NvAttn& a) {
  nv_attn_mma_query<T, CI>(qb, q, chunk, kvh, b, f0, a);
  nv_attn_mma_limits(lim, chunk, len, end, a);
  m[0] = m[1] = NV_ATTN_NEG_INF;
  l[0] = l[1] = 0.0f;
#pragma unroll
  for (int n = 0; n < 2 * CI; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
}

// S^T of one warp step from its key chunks kc (lane (g, t): keys g (s[0], s[1]) and 8 + g
// (s[2], s[3]) of the step, rows 2t and 2t + 1); the contraction blocks in two chains (even
// and odd words), added at the end, so that the products wait on half as many others.
template <typename T, int KH, int CI>
__device__ __forceinline__ void nv_attn_mma_scores(float (&s)[4], const uint4 (&kc)[KH][CI],
                                                   const u32 (&qb)[CI][4]) {
  float s_odd[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  s[0] = s[1] = s[2] = s[3] = 0.0f;
#pragma unroll
  for (int ci = 0; ci < CI; ++ci) {
    const u32 lo0 = nv_attn_word(kc[0][ci], 0), hi0 = nv_attn_word(kc[0][ci], 1);
    const u32 lo1 = KH == 2 ? nv_attn_word(kc[KH - 1][ci], 0) : 0u;
    const u32 hi1 = KH == 2 ? nv_attn_word(kc[KH - 1][ci], 1) : 0u;
    nv_attn_mma16<T>(s, lo0, lo1, hi0, hi1, qb[ci][0], qb[ci][1]);
    const u32 lo2 = nv_attn_word(kc[0][ci], 2), hi2 = nv_attn_word(kc[0][ci], 3);
    const u32 lo3 = KH == 2 ? nv_attn_word(kc[KH - 1][ci], 2) : 0u;
    const u32 hi3 = KH == 2 ? nv_attn_word(kc[KH - 1][ci], 3) : 0u;
    nv_attn_mma16<T>(s_odd, lo2, lo3, hi2, hi3, qb[ci][2], qb[ci][3]);
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) s[e] = __fadd_rn(s[e], s_odd[e]);
}

// O^T += V^T·P^T for one warp step: the weights s (as nv_attn_mma_softmax leaves them) and
// the value chunks vc.
template <typename T, int KH, int CI>
__device__ __forceinline__ void nv_attn_mma_values(float (&acc)[2 * CI][4], const float (&s)[4],
                                                   const uint4 (&vc)[KH][CI]) {
  // P^T's B fragment: the weights of key g (then 8 + g) for rows 2t, 2t + 1, transposed.
  const u32 p0 = nv_attn_trans(nv_attn_pack2<T>(s[0], s[1]));
  const u32 p1 = KH == 2 ? nv_attn_trans(nv_attn_pack2<T>(s[2], s[3])) : 0u;
  // Tile (ci, x): word pairs (2x, 2x + 1) of chunk ci, transposed.
#pragma unroll
  for (int ci = 0; ci < CI; ++ci) {
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      const u32 a0 = nv_attn_trans(nv_attn_word(vc[0][ci], 2 * x));
      const u32 a1 = nv_attn_trans(nv_attn_word(vc[0][ci], 2 * x + 1));
      if (KH == 2) {
        const u32 a2 = nv_attn_trans(nv_attn_word(vc[KH - 1][ci], 2 * x));
        const u32 a3 = nv_attn_trans(nv_attn_word(vc[KH - 1][ci], 2 * x + 1));
        nv_attn_mma16<T>(acc[2 * ci + x], a0, a1, a2, a3, p0, p1);
      } else {
        nv_attn_mma8<T>(acc[2 * ci + x], a0, a1, p0);
      }
    }
  }
}

// A warp's end: its rows' sums over its lanes (a butterfly: every lane ends with the same
// sum), then its state (max, sum) and accumulators into its slots of the block's merge.
template <int D, int CI>
__device__ __forceinline__ void nv_attn_mma_park(float* sh_o, float2* sh_ml, const float (&m)[2],
                                                 float (&l)[2], const float (&acc)[2 * CI][4]) {
  constexpr int R = NV_ATTN_MMA_ROWS;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int o = 4; o < 32; o <<= 1) {
    l[0] = __fadd_rn(l[0], __shfl_xor_sync(0xffffffffu, l[0], o));
    l[1] = __fadd_rn(l[1], __shfl_xor_sync(0xffffffffu, l[1], o));
  }
  if (g == 0) {
    sh_ml[warp * R + 2 * t] = make_float2(m[0], l[0]);
    sh_ml[warp * R + 2 * t + 1] = make_float2(m[1], l[1]);
  }
#pragma unroll
  for (int ci = 0; ci < CI; ++ci) {
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      const int f = 8 * (4 * ci + (g >> 1)) + 4 * x + (g & 1);
      float* o0 = sh_o + (warp * R + 2 * t) * D;
      float* o1 = o0 + D;
      o0[f] = acc[2 * ci + x][0];
      o1[f] = acc[2 * ci + x][1];
      o0[f + 2] = acc[2 * ci + x][2];
      o1[f + 2] = acc[2 * ci + x][3];
    }
  }
}

// Lane (g, t) = (lane / 4, lane % 4) of a warp holds chunks c = 4i + t (i < CI) of two key
// rows, g and 8 + g of the step's 16 (one row, g, of 8 past head size 128: KH halves), and
// the same chunks of query row g. With the features of every chunk in the order
// (0 1 | 2 3) (4 5 | 6 7), chunk i's words are the key's A fragment and the query's B
// fragment of contraction blocks 2i and 2i + 1 of S^T = K·Q^T (16 keys × 8 rows); S^T comes
// back as lane (g, t) holding keys g and 8 + g of rows 2t and 2t + 1, which is where the row
// statistics for those rows are kept. The weights, packed by key, are the transpose of P^T's
// B fragment (one movmatrix per 8 keys), and word w of chunk i of the 8 keys of a half,
// transposed, is the A fragment of V^T whose row g is feature 8(4i + g/2) + 2w + g % 2: so
// O^T (16 features × 8 rows) of tile (i, p), made of words 2p and 2p + 1, holds in lane
// (g, t) features f = 8(4i + g/2) + 4p + g % 2 and f + 2 of rows 2t and 2t + 1.
template <typename T, int D, bool PAGED, bool VEC>
__device__ __forceinline__ void nv_attention_mma(const T* __restrict__ q, const T* __restrict__ k,
                                                 const T* __restrict__ v,
                                                 const i32* __restrict__ table,
                                                 const i32* __restrict__ lengths,
                                                 T* __restrict__ out, float* __restrict__ part_o,
                                                 float2* __restrict__ part_ml, const NvAttn& a) {
  constexpr int R = NV_ATTN_MMA_ROWS;
  constexpr int CI = D / 32;             // chunks of a row a lane holds
  constexpr int KH = D <= 128 ? 2 : 1;   // halves of 8 keys a step
  constexpr int KS = 8 * KH;             // keys a warp takes a step
  constexpr int STEP = NV_ATTN_WARPS * KS;
  __shared__ __align__(16) float sh_o[NV_ATTN_WARPS * R * D];
  __shared__ float2 sh_ml[NV_ATTN_WARPS * R];
  __shared__ float sh_w[NV_ATTN_WARPS * R];
  __shared__ float2 sh_row[R];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int chunk = (int)(blockIdx.x % (unsigned)a.nchunks);
  const int split = (int)(blockIdx.x / (unsigned)a.nchunks);
  const i64 kvh = blockIdx.y, b = blockIdx.z;

  const i64 len = nv_attn_len<PAGED>(lengths, b, a);
  bool direct;
  i64 start, end;
  nv_attn_bounds<KS>(len, split, a, direct, start, end);
  if (direct && split != 0) return;

  i64 k_head, v_head;
  const i32* entries;
  nv_attn_heads<PAGED>(table, b, kvh, a, k_head, v_head, entries);

  // The key (`keys`) or value chunks of the step from key `st`.
  auto fetch = [&](i64 st, bool keys, uint4 (&into)[KH][CI]) {
    nv_attn_mma_fetch<T, KH, CI, PAGED, VEC>(into, k, v, keys, st, end, entries, k_head, v_head,
                                             0, a);
  };
  // With NV_ATTN_PREFETCH the next step's keys are asked for as soon as this step's scores
  // are formed, and its values once this step's values are multiplied, so that a warp's loads
  // stay in flight through its arithmetic (the same registers; the same bits).
  uint4 kc[KH][CI], vc[KH][CI];
  const i64 first = start + (i64)warp * KS;
  if (NV_ATTN_PREFETCH && first < end) {
    fetch(first, true, kc);
    fetch(first, false, vc);
  }
  // Where the host asks (`NUVEC_ATTN_L2=1`, a warp of a few steps), its later steps are asked
  // of L2 at once (Hopper's bulk prefetch), so that their rows stream in behind the first's
  // rather than each step waiting a full memory latency for its registers' loads.
  if (VEC) {
#pragma unroll 1
    for (int i = 1; i < a.l2_steps; ++i)
      nv_attn_l2_step<T, D, KS, PAGED>(k, v, first + (i64)i * STEP, end, entries, k_head, v_head,
                                       a);
  }
  // Where the host asks (a warp of a few steps), L1 is asked for the rows `l1_ahead` steps
  // ahead of each step's loads: bytes on their way with no register waiting on them.
  if (!PAGED && a.l1_ahead > 0) {
#pragma unroll 1
    for (int i = 1; i < a.l1_ahead; ++i)
      nv_attn_l1_step<T, D, KS>(k, v, first + (i64)i * STEP, end, k_head, v_head, a);
  }
  // The query rows once the first step's loads and requests are on their way: packing them
  // waits on their loads, and a warp of a few steps (one sequence split over the machine)
  // would otherwise wait a memory latency for them before asking for its keys.
  u32 qb[CI][4];
  i64 lim[2];
  float m[2], l[2], acc[2 * CI][4];
  nv_attn_mma_begin<T, CI>(qb, lim, m, l, acc, q, chunk, kvh, b, 0, len, end, a);
  for (i64 step = first; step < end; step += STEP) {
    if (!PAGED && a.l1_ahead > 0)
      nv_attn_l1_step<T, D, KS>(k, v, step + (i64)a.l1_ahead * STEP, end, k_head, v_head, a);
    if (!NV_ATTN_PREFETCH) {
      fetch(step, true, kc);
      fetch(step, false, vc);
    }

    float s[4];
    nv_attn_mma_scores<T, KH, CI>(s, kc, qb);
    if (NV_ATTN_PREFETCH && step + STEP < end) fetch(step + STEP, true, kc);
    nv_attn_mma_softmax<KH, 2 * CI>(s, step, g, lim, a.scale, m, l, acc);
    nv_attn_mma_values<T, KH, CI>(acc, s, vc);
    if (NV_ATTN_PREFETCH && step + STEP < end) fetch(step + STEP, false, vc);
  }

  nv_attn_mma_park<D, CI>(sh_o, sh_ml, m, l, acc);
  __syncthreads();
  nv_attn_finish<T, D, R, NV_ATTN_WARPS>(sh_o, sh_ml, sh_w, sh_row, direct, chunk, split, b, kvh,
                                         out, part_o, part_ml, a);
}

// Four forms of one kernel FN<ARGS..., PAGED, VEC>: contiguous or paged keys, 16-byte or
// scalar loads, each followed by the in-block merge (a no-op unless a.merge). `BLOCKS`: the
// blocks a multiprocessor should hold (it caps the registers at 65,536 / (128 · BLOCKS)); D
// and R: the head size and the query rows a block.
#define NV_ATTN_FORMS(NAME, BLOCKS, T, D, R, FN, ...)                        \
  NV_ATTN_FORM(NAME##_cv, BLOCKS, T, D, R, FN, false, true, __VA_ARGS__)     \
  NV_ATTN_FORM(NAME##_cs, BLOCKS, T, D, R, FN, false, false, __VA_ARGS__)    \
  NV_ATTN_FORM(NAME##_pv, BLOCKS, T, D, R, FN, true, true, __VA_ARGS__)      \
  NV_ATTN_FORM(NAME##_ps, BLOCKS, T, D, R, FN, true, false, __VA_ARGS__)
#define NV_ATTN_FORM(NAME, BLOCKS, T, D, R, FN, PAGED, VEC, ...)                                \
  extern "C" __global__ void __launch_bounds__(NV_ATTN_THREADS, BLOCKS)                         \
      NAME(const T* q, const T* k, const T* v, const i32* table, const i32* lengths, T* out,    \
           float* part_o, float2* part_ml, u32* counters, const NvAttn a) {                     \
    nv_attn_release_dependents();                                                               \
    FN<__VA_ARGS__, PAGED, VEC>(q, k, v, table, lengths, out, part_o, part_ml, a);              \
    nv_attn_merge_last<T, D, R, PAGED>(lengths, out, part_o, part_ml, counters, a);             \
  }

// f32 over the FMA units, R (1, 2 or 4) query rows a block: attention_f32_d{D}_r{R}_{form}.
#define NV_ATTENTION_LANES(T, TN, D, R) \
  NV_ATTN_FORMS(attention_##TN##_d##D##_r##R, (D <= 256 ? 3 : 2), T, D, R, nv_attention_lanes, T, \
                D, R)

// Blocks a multiprocessor the half types' kernel aims at up to head size 128, which caps its
// registers at 65,536 / (128 · blocks): 3 holds them without spills (ptxas, sm_90: 154), 4
// spills 84 bytes. Batch-1 decoding runs one wave of 12 warps an SM at 3 (ncu on an H100,
// DRAM at 55%), so 4 is worth timing: `NUVEC_KERNEL_DEFINES="NV_ATTN_MMA_BLOCKS=4"`.
#ifndef NV_ATTN_MMA_BLOCKS
#define NV_ATTN_MMA_BLOCKS 3
#endif
// f16 and bf16 over the tensor cores, 8 query rows a block: attention_{tn}_d{D}_r8_{form}.
// Past head size 128 the accumulators take twice the registers: two blocks a multiprocessor.
// Before Ampere (no bf16 products, no cvt to bf16x2) the same rows go over the FMA units.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define NV_ATTN_HALF nv_attention_mma
#define NV_ATTN_HALF_ARGS(T, D) T, D
#else
#define NV_ATTN_HALF nv_attention_lanes
#define NV_ATTN_HALF_ARGS(T, D) T, D, NV_ATTN_MMA_ROWS
#endif
#define NV_ATTENTION_MMA(T, TN, D)                                                         \
  NV_ATTN_FORMS(attention_##TN##_d##D##_r8, (D <= 128 ? NV_ATTN_MMA_BLOCKS : 2), T, D,   \
                NV_ATTN_MMA_ROWS, NV_ATTN_HALF, NV_ATTN_HALF_ARGS(T, D))
