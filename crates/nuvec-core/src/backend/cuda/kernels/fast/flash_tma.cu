// Prefill attention on Hopper with the tensor-memory accelerator: `flash_sm90.cu` (included
// before this file, as is `bulk.cuh`, the barriers and the tensor copies) holds the consumer's
// steps (`NvHRows`); here one producer warpgroup, of which one thread works, loads queries,
// keys and values with TMA (the 128-byte swizzle written by the copy engine itself, rows past
// the sequence filled with zeros) into stages tied to two (or, for head size 64, three)
// consumer warpgroups of 64 query rows each by shared-memory barriers, so each consumer runs
// at its own pace and no thread of theirs spends an instruction on a load.
//
// A consumer's tile t: the scores of t are issued, then the product of tile t − 1's weights
// with its values; once the scores land, their exponentials are taken in place (while the
// product runs); once the product lands, the output is rescaled and the exponentials are
// packed into the weights, whose registers the product has just released. One set of weights
// and one of scores: 64 + 64 + 32 registers of state a thread at 128 keys a tile (NV_H_BN),
// 88 + 64 + 44 at FlashAttention-3's 176 (head size 128 without causality or a mask).

#ifndef NV_T_STAGES
#define NV_T_STAGES 2
#endif
// Whether the two consumers take turns at the tensor cores (one issues its two products while
// the other takes its exponentials), as FlashAttention-3's ping-pong schedule does.
#ifndef NV_T_PINGPONG
#define NV_T_PINGPONG 0
#endif
// Consumer warpgroups, 64 query rows each: 2 (registers for head sizes up to 128), or 3 for
// head size 64 (FlashAttention-3's 192-row tiles: more warps to hide the exponentials).
#ifndef NV_T_CONSUMERS
#define NV_T_CONSUMERS 2
#endif
// Whether a grid of about one block a multiprocessor walks all the work items (FlashAttention-3's
// persistent blocks: the producer loads an item's queries and first tiles while the consumers
// finish the item before and write its rows), rather than a block an item (0). 1: each block
// takes a fixed share (NvTItems); 2: each block's producer takes the next item from a counter
// in global memory when it has issued the loads of its last (FlashAttention-3's dynamic
// scheduler, for causal rows of unequal work), and passes it to the consumers through shared
// memory.
#ifndef NV_T_PERSISTENT
#define NV_T_PERSISTENT 0
#endif

// nuvec-emulation: device only (tests/emulation/ptx.h stands in for this region) {
// Named barriers 1 to NC (0 is __syncthreads') order the consumers' turns, in a ring: a
// consumer waits on its own before issuing its products and arrives on the next one's after.
__device__ __forceinline__ void nv_turn_wait(int consumer) {
  if (NV_T_PINGPONG) asm volatile("bar.sync %0, 256;\n" ::"r"(1 + consumer) : "memory");
}
__device__ __forceinline__ void nv_turn_pass(int consumer, int consumers) {
  if (NV_T_PINGPONG)
    asm volatile("bar.arrive %0, 256;\n" ::"r"(1 + (consumer + 1) % consumers) : "memory");
}
// } nuvec-emulation

// The work items a block takes, in order: its own place in a grid of (query-row tiles, query
// heads, batch), or, persistent (NV_T_PERSISTENT), a.items over gridDim.x blocks in rounds of
// gridDim.x, every other round in reverse (block i takes i, 2G - 1 - i, 2G + i, ...), so that
// over the causal order's descending tiles each block's sum of work comes out about even.
struct NvTItems {
  int count;  // items this block takes
  __device__ __forceinline__ NvTItems(const NvFlash& a) {
    count = 1;
    if (NV_T_PERSISTENT) {
      // Every round but the last is whole.
      const i64 rounds = ((i64)a.items + gridDim.x - 1) / gridDim.x;
      count = (int)rounds - (rounds > 0 && at(a, rounds - 1) >= a.items ? 1 : 0);
    }
  }
  // The linear index of the block's item of round r (past a.items: none).
  static __device__ __forceinline__ i64 at(const NvFlash& a, i64 r) {
    const i64 g = gridDim.x, i = blockIdx.x;
    return r * g + ((r & 1) ? g - 1 - i : i);
  }
};

// The dynamic walk's counters (NV_T_PERSISTENT 2; zero at the launch, zero again at the end):
// [0] the next item to take, [1] the blocks whose producers have taken their last. The last
// block to finish taking sets both back to zero, once no other block will touch them.
__device__ __forceinline__ int nv_t_take(u32* counters) { return (int)atomicAdd(&counters[0], 1u); }
__device__ __forceinline__ void nv_t_finish(u32* counters) {
  __threadfence();
  if (atomicAdd(&counters[1], 1u) == gridDim.x - 1) {
    counters[0] = 0u;
    counters[1] = 0u;
  }
}

template <typename T, int D, int DV, int MASK, bool CAUSAL, bool SINKS, int NC>
__device__ void nv_flash_tma(const NvTmap* qm, const NvTmap* km, const NvTmap* vm,
                             const void* __restrict__ mask, const T* __restrict__ sinks,
                             T* __restrict__ out, u32* __restrict__ counters, const NvFlash a) {
  constexpr int BM = 64 * NC, BN = NV_H_BN, S = NV_T_STAGES;
  static_assert(BN == 128 || BN == 176, "the score products are written out for these");
  typedef NvHRows<T, D, DV, MASK, CAUSAL, SINKS, BN, BM> Rows;
  constexpr int KT = BN * D * 2, VT = BN * DV * 2;
  constexpr int ROW_BYTES = (D + DV) * (int)sizeof(T);
  extern __shared__ __align__(16) unsigned char nv_t_smem[];
  unsigned char* qs = nv_h_base(nv_t_smem);
  const u32 qa = nv_smem(qs);
  const u32 ka = qa + BM * D * 2;
  const u32 va = ka + S * KT;
  const u32 bars = va + S * VT;
  // Barriers: queries in and free; a stage's keys in and free, its values in and free.
  const u32 q_full = bars, q_free = bars + 8 * (1 + 4 * S);
  // The dynamic walk's item for the queries being loaded (-1: none left), written by the
  // producer before it arrives on q_full, read by the consumers once that phase completes.
  volatile int* const slot = reinterpret_cast<volatile int*>(qs + (bars - qa) + 8 * (2 + 4 * S));
  auto k_full = [&](int s) { return bars + 8 * (1 + s); };
  auto k_free = [&](int s) { return bars + 8 * (1 + S + s); };
  auto v_full = [&](int s) { return bars + 8 * (1 + 2 * S + s); };
  auto v_free = [&](int s) { return bars + 8 * (1 + 3 * S + s); };
  const NvTItems items(a);
  // The place of the block's j-th item. A block of one item: its own place, which the
  // consumers take from before the warpgroups part and the producer works out again (ptxas
  // spills the masked kernels' registers when the consumers' branch works it out, and keeps
  // none when the producer's does).
  // The place of work item `lin` (the launch order's rank) when persistent.
  auto item_place = [&](i64 lin) {
    return nv_flash_item<CAUSAL, BN, BM>(a, ROW_BYTES, lin, (a.lq + BM - 1) / BM);
  };
  auto place = [&](int j) {
    return NV_T_PERSISTENT ? item_place(NvTItems::at(a, j))
                           : nv_flash_block<CAUSAL, BN, BM>(a, ROW_BYTES);
  };
  const NvFlashBlock own = NV_T_PERSISTENT ? NvFlashBlock{} : place(0);
  const int wg = threadIdx.x >> 7;

  if (threadIdx.x == 0) {
    nv_bar_init(q_full, 1);
    nv_bar_init(q_free, 4 * NC);  // lane 0 of each consumer warp
    for (int s = 0; s < S; ++s) {
      nv_bar_init(k_full(s), 1);
      nv_bar_init(v_full(s), 1);
      nv_bar_init(k_free(s), 4 * NC);
      nv_bar_init(v_free(s), 4 * NC);
    }
    nv_bar_init_fence();
  }
  __syncthreads();

  // Tiles of keys and values pass through the stages in one sequence over all of a block's
  // items: tile number `it` (counting from the block's first item) uses stage it % S in
  // phase (it / S) & 1, for the producer and the consumers alike.
  if (wg == 0) {
// nuvec-emulation: device only (a hint, nothing to stand in for) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n");
// } nuvec-emulation
    if (threadIdx.x == 0) {
      u32 it = 0;
      int item = NV_T_PERSISTENT == 2 ? nv_t_take(counters) : 0;
      for (int j = 0; NV_T_PERSISTENT == 2 || j < items.count; ++j) {
        // The queries' buffer is free once the consumers' last scores of the item before
        // have landed (while they finish its products and write its rows).
        if (j > 0) nv_bar_wait(q_free, (u32)((j - 1) & 1));
        if (NV_T_PERSISTENT == 2) {
          *slot = item < a.items ? item : -1;
          if (item >= a.items) {
            nv_bar_arrive(q_full);  // no bytes: the consumers wake to find none
            break;
          }
        }
        const NvFlashBlock blk = NV_T_PERSISTENT == 2 ? item_place(item) : place(j);
        const int b = (int)blk.b, h = (int)blk.h, kvh = (int)blk.kvh;
        nv_bar_expect(q_full, BM * D * 2);
        for (int c = 0; c < D / 64; ++c) nv_tma4(qa + c * BM * 128, qm, c * 64, blk.m0, h, b, q_full);
        for (int t = 0; t < blk.ntiles; ++t, ++it) {
          const int s = (int)(it % S);
          const u32 use = (it / S) & 1;
          if (it >= S) nv_bar_wait(k_free(s), use ^ 1);
          nv_bar_expect(k_full(s), KT);
          for (int c = 0; c < D / 64; ++c)
            nv_tma4(ka + s * KT + c * BN * 128, km, c * 64, t * BN, kvh, b, k_full(s));
          if (it >= S) nv_bar_wait(v_free(s), use ^ 1);
          nv_bar_expect(v_full(s), VT);
          for (int c = 0; c < DV / 64; ++c)
            nv_tma4(va + s * VT + c * BN * 128, vm, c * 64, t * BN, kvh, b, v_full(s));
        }
        if (NV_T_PERSISTENT == 2) item = nv_t_take(counters);
      }
      if (NV_T_PERSISTENT == 2) nv_t_finish(counters);
    }
    return;
  }

  // The registers the producer gave up: 240 a thread for two consumers, 160 for three.
  if constexpr (NC == 2) {
// nuvec-emulation: device only (a hint, nothing to stand in for) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");
// } nuvec-emulation
  } else {
// nuvec-emulation: device only (a hint, nothing to stand in for) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 160;\n");
// } nuvec-emulation
  }
  const bool lead = (threadIdx.x & 31) == 0;
  const int me = wg - 1;
  // Each consumer takes ntiles + 1 turns an item (the first tile's scores alone, then scores
  // with the previous tile's product, the last product alone); the first consumer goes
  // first, so the last one passes once before its first turn, and the first waits once
  // after its last for the last one's final pass.
  if (me == NC - 1) nv_turn_pass(me, NC);
  u32 it = 0;
  for (int j = 0; NV_T_PERSISTENT == 2 || j < items.count; ++j) {
    int item = 0;
    if (NV_T_PERSISTENT == 2) {
      nv_bar_wait(q_full, (u32)(j & 1));
      item = *slot;
      if (item < 0) break;
    }
    const NvFlashBlock blk =
        NV_T_PERSISTENT == 2 ? item_place(item) : (NV_T_PERSISTENT ? place(j) : own);
    const int ntiles = blk.ntiles;
    Rows rows(a, mask, sinks, blk.b, blk.h, blk.m0, me, qa);
    typename Rows::Weights p;
    auto stage = [&](int t) { return (int)((it + t) % S); };
    auto phase = [&](int t) { return ((it + t) / S) & 1; };
    if (NV_T_PERSISTENT != 2) nv_bar_wait(q_full, (u32)(j & 1));
    nv_bar_wait(k_full(stage(0)), phase(0));
    nv_turn_wait(me);
    rows.scores(ka + stage(0) * KT);
    nv_turn_pass(me, NC);
    nv_wg_wait<0>();
    nv_wg_pin<Rows::NT * 4>(rows.s);
    if (lead) {
      nv_bar_arrive(k_free(stage(0)));
      if (ntiles == 1) nv_bar_arrive(q_free);
    }
    rows.exponentials(0);
    rows.pack(p);
    for (int t = 1; t < ntiles; ++t) {
      const int s = stage(t), sp = stage(t - 1);
      nv_bar_wait(k_full(s), phase(t));
      nv_turn_wait(me);
      rows.scores(ka + s * KT);
      nv_bar_wait(v_full(sp), phase(t - 1));
      rows.product(p, va + sp * VT);
      nv_turn_pass(me, NC);
      nv_wg_wait<1>();
      nv_wg_pin<Rows::NT * 4>(rows.s);
      if (lead) {
        nv_bar_arrive(k_free(s));
        if (t == ntiles - 1) nv_bar_arrive(q_free);
      }
      rows.exponentials(t);
      nv_wg_wait<0>();
      nv_wg_pin<Rows::OT * 4>(rows.o);
      nv_wg_pin<Rows::NT * 2>(reinterpret_cast<float*>(p));
      if (lead) nv_bar_arrive(v_free(sp));
      rows.rescale();
      rows.pack(p);
    }
    const int sl = stage(ntiles - 1);
    nv_bar_wait(v_full(sl), phase(ntiles - 1));
    nv_turn_wait(me);
    rows.product(p, va + sl * VT);
    nv_turn_pass(me, NC);
    nv_wg_wait<0>();
    nv_wg_pin<Rows::OT * 4>(rows.o);
    if (lead) nv_bar_arrive(v_free(sl));
    rows.store(out, blk.b, blk.h, a.hq);
    it += ntiles;
  }
  if (me == 0) nv_turn_wait(me);
}

#define NV_FLASH_TMA(T, TN, D, DV, MASK, CAUSAL, SINKS)                                        \
  extern "C" __global__ void __launch_bounds__(128 * (NV_T_CONSUMERS + 1), 1)                  \
      flashtma_##TN##_##D##_##DV##_m##MASK##_c##CAUSAL##_s##SINKS(                             \
          const __grid_constant__ NvTmap qm, const __grid_constant__ NvTmap km,                \
          const __grid_constant__ NvTmap vm, const void* mask, const T* sinks, T* out,         \
          u32* counters, NvFlash a) {                                                          \
    nv_flash_tma<T, D, DV, MASK, (bool)CAUSAL, (bool)SINKS, NV_T_CONSUMERS>(                   \
        &qm, &km, &vm, mask, sinks, out, counters, a);                                         \
  }
