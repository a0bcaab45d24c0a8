// The tensor-core decoding kernel of attention.cu (nv_attention_mma) with its keys and values
// brought in by Hopper's bulk copies several warp steps ahead, where that kernel loads each
// step straight into registers one step ahead. Included after attention.cu and bulk.cuh; the
// host takes it on sm_90 on, for rows whose starts are 16-byte aligned (the VEC forms).
//
// A warp owns a ring of NV_RING_STAGES slots in dynamic shared memory. A slot holds one warp
// step's KS key rows and KS value rows, PITCH bytes apart (a row's bytes, plus 64 where that
// puts the 8 rows a quarter-warp reads in distinct banks), and has a barrier. Lane j < KS
// copies key row j of the step and lane KS + j value row j, one bulk copy each: rows are
// located one by one (nv_attn_rows), so contiguous, strided and paged caches are read alike.
// Rows past the split's end are zeros, written by their lanes. The warp waits for a step's
// slot, reads its chunks into the registers nv_attention_mma would have loaded them into,
// and runs the same arithmetic in the same order (nv_attn_mma_scores, _softmax, _values,
// _park): the two kernels give the same bits. Once the step's values are multiplied (so its
// chunks have been read), the slot takes the step NV_RING_STAGES ahead. With that many steps
// in flight a block keeps more bytes coming than the register kernel can, so the host gives
// it fewer, longer splits (sized by this kernel's occupancy).

#ifndef NV_RING_STAGES
#define NV_RING_STAGES 4
#endif

template <typename T, int D> struct NvRing {
  static constexpr int KH = D <= 128 ? 2 : 1;
  static constexpr int KS = 8 * KH;               // keys a warp step
  static constexpr int ROW = D * (int)sizeof(T);  // a row's bytes (a multiple of 64)
  static constexpr int PITCH = ROW % 128 == 64 ? ROW : ROW + 64;
  static constexpr int SLOT = 2 * KS * PITCH;  // the keys, then the values
  // The block's dynamic shared memory: the warps' rings, then their barriers.
  static constexpr int RINGS = NV_ATTN_WARPS * NV_RING_STAGES * SLOT;
  static constexpr int BYTES = RINGS + 8 * NV_ATTN_WARPS * NV_RING_STAGES;
};

template <typename T, int D, bool PAGED, bool VEC>
__device__ __forceinline__ void nv_attention_ring(const T* __restrict__ q, const T* __restrict__ k,
                                                  const T* __restrict__ v,
                                                  const i32* __restrict__ table,
                                                  const i32* __restrict__ lengths,
                                                  T* __restrict__ out, float* __restrict__ part_o,
                                                  float2* __restrict__ part_ml, const NvAttn& a) {
  static_assert(VEC, "bulk copies need 16-byte aligned rows");
  using G = NvRing<T, D>;
  constexpr int R = NV_ATTN_MMA_ROWS, CI = D / 32, KH = G::KH, KS = G::KS;
  constexpr int S = NV_RING_STAGES, STEP = NV_ATTN_WARPS * KS;
  __shared__ __align__(16) float sh_o[NV_ATTN_WARPS * R * D];
  __shared__ float2 sh_ml[NV_ATTN_WARPS * R];
  __shared__ float sh_w[NV_ATTN_WARPS * R];
  __shared__ float2 sh_row[R];
  extern __shared__ __align__(16) unsigned char nv_ring_smem[];

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

  unsigned char* ring = nv_ring_smem + warp * S * G::SLOT;
  const u32 ring_at = nv_bulk_addr(ring);
  const u32 bars = nv_bulk_addr(nv_ring_smem + G::RINGS) + 8 * warp * S;
  if (lane < S) nv_bar_init(bars + 8 * lane, 1);
  nv_bar_init_fence();
  __syncwarp();

  i64 k_head, v_head;
  const i32* entries;
  nv_attn_heads<PAGED>(table, b, kvh, a, k_head, v_head, entries);

  // Step st's rows into slot s: lane 0 arms the barrier with the live rows' bytes, then each
  // lane of the first 2 KS copies its row or, past the end, zeros it. Uniform over the warp.
  auto issue = [&](int s, i64 st) {
    if (st >= end) return;
    const i64 live = end - st < KS ? end - st : KS;
    if (lane == 0) nv_bar_expect(bars + 8 * s, (u32)(2 * live * G::ROW));
    __syncwarp();
    if (lane < 2 * KS) {
      const int j = lane % KS;
      const bool values = lane >= KS;
      const int at = s * G::SLOT + (values ? KS * G::PITCH : 0) + j * G::PITCH;
      if (st + j < end) {
        i64 kr, vr;
        nv_attn_rows<PAGED>(st + j, entries, k_head, v_head, a, kr, vr);
        const T* from = values ? v + vr : k + kr;
        nv_bulk_copy(ring_at + at, from, G::ROW, bars + 8 * s);
      } else {
        uint4* row = reinterpret_cast<uint4*>(ring + at);
#pragma unroll
        for (int c = 0; c < G::ROW / 16; ++c) row[c] = make_uint4(0u, 0u, 0u, 0u);
      }
    }
  };

  u32 qb[CI][4];
  i64 lim[2];
  float m[2], l[2], acc[2 * CI][4];
  nv_attn_mma_begin<T, CI>(qb, lim, m, l, acc, q, chunk, kvh, b, 0, len, end, a);

  // The warp's steps are those of nv_attention_mma: keys first + i · STEP, step i in slot
  // i % S, the (i / S)-th filling of that slot.
  const i64 first = start + (i64)warp * KS;
#pragma unroll
  for (int s = 0; s < S; ++s) issue(s, first + (i64)s * STEP);
  int i = 0;
  for (i64 step = first; step < end; step += STEP, ++i) {
    const int s = i % S;
    nv_bar_wait(bars + 8 * s, (u32)((i / S) & 1));
    __syncwarp();  // the zeros other lanes wrote
    const unsigned char* keys = ring + s * G::SLOT;
    uint4 kc[KH][CI], vc[KH][CI];
#pragma unroll
    for (int hh = 0; hh < KH; ++hh) {
#pragma unroll
      for (int ci = 0; ci < CI; ++ci) {
        const int at = (8 * hh + g) * G::PITCH + 16 * (4 * ci + t);
        kc[hh][ci] = *reinterpret_cast<const uint4*>(keys + at);
        vc[hh][ci] = *reinterpret_cast<const uint4*>(keys + KS * G::PITCH + at);
      }
    }
    float sc[4];
    nv_attn_mma_scores<T, KH, CI>(sc, kc, qb);
    nv_attn_mma_softmax<KH, 2 * CI>(sc, step, g, lim, a.scale, m, l, acc);
    nv_attn_mma_values<T, KH, CI>(acc, sc, vc);
    // The slot's chunks are in registers the products have used: it takes its next step.
    __syncwarp();
    issue(s, step + (i64)S * STEP);
  }

  nv_attn_mma_park<D, CI>(sh_o, sh_ml, m, l, acc);
  __syncthreads();
  nv_attn_finish<T, D, R, NV_ATTN_WARPS>(sh_o, sh_ml, sh_w, sh_row, direct, chunk, split, b, kvh,
                                         out, part_o, part_ml, a);
}

// f16 and bf16 through the rings, 8 query rows a block, the 16-byte forms only (contiguous or
// paged): attention_{tn}_d{D}_r8_{cr,pr}. Up to two blocks a multiprocessor by registers;
// the shared memory decides (the host asks the driver).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define NV_ATTENTION_RING(T, TN, D)                                                          \
  NV_ATTN_FORM(attention_##TN##_d##D##_r8_cr, 2, T, D, NV_ATTN_MMA_ROWS, nv_attention_ring, \
               false, true, T, D)                                                          \
  NV_ATTN_FORM(attention_##TN##_d##D##_r8_pr, 2, T, D, NV_ATTN_MMA_ROWS, nv_attention_ring, \
               true, true, T, D)
#else
#define NV_ATTENTION_RING(T, TN, D)
#endif
