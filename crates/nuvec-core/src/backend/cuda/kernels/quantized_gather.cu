// gather_qmm's few-row product, x · wᵀ with w picked by index (mixtures of experts while
// decoding; `quantized/gather.rs` says which cases come here). Needs common.cuh,
// quantized.cu, whose `nvq_qmv_rows` does the sums, and (for `gqmv_mma_*`, 4 bits, chunks of
// 8 rows) quantized_mv_mma.cu, whose `nvqm_sums` does them on the tensor cores.
//
// Row v of the product is row v % mrows of matrix lhs[v / mrows / lhs_repeat] of x (row v
// itself without lhs; the repeat reads a lhs broadcast over its last axes in place). A block's
// warps take NvqRows<M> rows of w each (blockIdx.x), for a chunk of up to M rows of the
// product that share one matrix of w (blockIdx.z and on, a grid-stride loop):
// - unsorted: chunk z is rows sub · M .. of index position i (z = i · per + sub), with matrix
//   rhs[i] (i itself without rhs);
// - sorted (offsets given): matrix e's rows are [offs[e], offs[e + 1]) times mrows, cut into
//   chunks of M, counted matrix after matrix; so each matrix's weights are read once for every
//   M of its rows, however many index positions pick it. A one-block kernel first writes
//   every chunk's matrix and rows to a table (`gqmv_table_m*`: the runs laid out by two
//   block-wide scans, each chunk's matrix found by binary search), so that a block of the
//   product finds its chunk with one load.
// - grouped (unsorted indices, `order` given): a one-block kernel (`gqmv_group_m*`) first
//   sorts the index positions by matrix, stably (a count a matrix, their starts by a scan,
//   then each position placed after the earlier ones of its matrix, a warp at a time), into
//   `order` (sorted place -> position) and the offsets, then writes the table as above; the
//   product runs as sorted, reading row v's x through the position `order` gives it and
//   writing its output there. One launch does what an argsort, three takes and a search did
//   as graph nodes (about as long as the product itself at 64 tokens).
// - by matrix (the tensor-core form, grouped, at most NVQG_SCAN_MAX positions; `per_matrix`
//   set): no launch before the product. Block z takes matrix e = z / per_matrix: it finds the
//   positions that pick e itself (each thread tests a few of rhs, a ballot a warp, the warps'
//   counts laid out in shared memory, so the list is in increasing order) and takes chunks
//   z % per_matrix, + per_matrix, ... of their rows. Every block reads the whole of rhs (4 KB
//   at most, from L2), where the grouping launch and its table cost a launch and a round trip
//   through memory before the first weight was read.
// Indices past the end are clamped to the last matrix.

// The most matrices of w the sorted runs take (their starts and first chunks are kept in
// shared memory), and the most index positions the grouping kernel sorts (their matrices are
// kept there too).
#define NVQG_MAX_EXPERTS 1024
#define NVQG_GROUP_MAX 4096
// The most index positions a block of the product groups by matrix itself (a few a thread).
#define NVQG_SCAN_MAX 1024

// Mirrors `GatherArgs` in `quantized/gather.rs` (repr(C)): the 64-bit fields first.
struct NvGqmv {
  i64 n;        // rows of w (outputs)
  i64 w_batch;  // words between matrices of w
  i64 s_batch;  // scales (and biases) between matrices of w
  i64 xmats;    // matrices of x, for clamping lhs
  i64 experts;  // matrices of w
  i64 indices;  // index positions
  i64 chunks;   // chunks along z (sorted: an upper bound; the walk stops at the last)
  i32 packs;    // packs a row of w (k / 32)
  i32 groups;   // scales a row of w
  i32 gs_shift; // log2(group size / 32)
  i32 mrows;    // rows of each matrix of x
  i32 sorted;   // whether offs gives the matrices' runs
  u32 nibbles;  // 0x000F000F, for the tensor-core form (quantized_mv_mma.cu says why)
  i32 lhs_repeat; // index positions that share one entry of lhs (0 or 1: one each)
  i32 per_matrix; // blocks a matrix, found by the product itself (0: table or position)
};

// Index `i` of an index array, clamped below `count` (or `i` itself without one).
__device__ __forceinline__ i64 nvqg_index(const u32* __restrict__ idx, i64 i, i64 count) {
  if (idx == nullptr) return i;
  const i64 v = idx[i];
  return v < count ? v : count - 1;
}

// A block-wide inclusive scan of one value a thread (NVQ_WARPS warps) through `part`, by
// maximum (MAX) or sum; every thread returns its own. `part` holds the inclusive values after.
template <bool MAX>
__device__ __forceinline__ i64 nvqg_scan(i64* part, i64 v) {
  const int tid = threadIdx.x;
  part[tid] = v;
  __syncthreads();
  for (int d = 1; d < NVQ_WARPS * 32; d <<= 1) {
    const i64 o = tid >= d ? part[tid - d] : 0;
    __syncthreads();
    if (tid >= d) v = MAX ? (o > v ? o : v) : v + o;
    part[tid] = v;
    __syncthreads();
  }
  return v;
}

// The sorted runs (see the top): matrix f's rows are [st[f], st[f + 1]), the last's end at
// `indices`, each start the largest offset so far clamped to [0, indices] (so no chunk reaches
// outside the rows whatever the offsets hold); fc[f] is the number of chunks of M rows before
// matrix f's first and fc[experts] all of them. Each thread takes a run of consecutive
// matrices; a scan by maximum gives the starts, one by sum the chunk counts.
template <int M>
__device__ __forceinline__ void nvqg_runs(const i32* __restrict__ offs, const NvGqmv& a, i64* st,
                                          i64* fc, i64* part) {
  constexpr int NT = NVQ_WARPS * 32;
  const int tid = threadIdx.x, experts = (int)a.experts;
  const int per = (experts + NT - 1) / NT, f0 = min(tid * per, experts);
  const int f1 = min(f0 + per, experts);
  const i64 n = a.indices;
  auto offset = [&](int f) -> i64 {
    const i64 o = f == 0 ? 0 : offs[f];
    return o < 0 ? 0 : (o > n ? n : o);
  };
  i64 run = 0;
  for (int f = f0; f < f1; ++f) run = max(run, offset(f));
  nvqg_scan<true>(part, run);
  run = tid == 0 ? 0 : part[tid - 1];
  for (int f = f0; f < f1; ++f) {
    run = max(run, offset(f));
    st[f] = run;
  }
  __syncthreads();
  auto chunks = [&](int f) -> i64 {
    const i64 end = f + 1 < experts ? st[f + 1] : n;
    return ((end - st[f]) * a.mrows + M - 1) / M;
  };
  i64 sum = 0;
  for (int f = f0; f < f1; ++f) sum += chunks(f);
  nvqg_scan<false>(part, sum);
  run = tid == 0 ? 0 : part[tid - 1];
  for (int f = f0; f < f1; ++f) {
    fc[f] = run;
    run += chunks(f);
  }
  if (tid == 0) fc[experts] = part[NT - 1];
  __syncthreads();
}

// The sorted chunks' table (one block): entry z is (matrix, first row, end row) of chunk z,
// or a matrix of -1 past the last chunk, for z below `a.chunks`.
template <int M>
__device__ __forceinline__ void nvqg_table(const i32* __restrict__ offs, i64* __restrict__ table,
                                           const NvGqmv a) {
  __shared__ i64 st[NVQG_MAX_EXPERTS];
  __shared__ i64 fc[NVQG_MAX_EXPERTS + 1];
  __shared__ i64 part[NVQ_WARPS * 32];
  nvqg_runs<M>(offs, a, st, fc, part);
  const int experts = (int)a.experts;
  for (i64 z = threadIdx.x; z < a.chunks; z += NVQ_WARPS * 32) {
    i64* t = table + 3 * z;
    if (z >= fc[experts]) {
      t[0] = -1;
      continue;
    }
    // The last matrix whose first chunk is at or before z (an empty one shares its first
    // chunk with the next, so the search passes over it).
    int lo = 0, hi = experts - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) >> 1;
      if (fc[mid] <= z) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    const i64 end = lo + 1 < experts ? st[lo + 1] : a.indices;
    t[0] = lo;
    t[1] = st[lo] * a.mrows + (z - fc[lo]) * M;
    t[2] = end * a.mrows;
  }
}

// This chunk's rows [v0, v1) of the product and its matrix e of w (`nvq_gqmv`'s walk, for
// chunks of M rows); false past the last sorted chunk.
template <int M>
__device__ __forceinline__ bool nvqg_chunk(const u32* __restrict__ rhs,
                                           const i64* __restrict__ table, const NvGqmv& a, i64 z,
                                           i64& v0, i64& v1, i64& e) {
  if (!a.sorted) {
    const i64 per = (a.mrows + M - 1) / M;
    const i64 i = z / per;
    v0 = i * a.mrows + (z - i * per) * M;
    v1 = (i + 1) * a.mrows;
    e = nvqg_index(rhs, i, a.experts);
    return true;
  }
  const i64* t = table + 3 * z;
  e = t[0];
  v0 = t[1];
  v1 = t[2];
  return e >= 0;
}

// Row v of the product (in the sorted order when `order` is given) as its index position's
// row: the position's first row plus v's place within its matrix.
__device__ __forceinline__ i64 nvqg_out_row(const u32* __restrict__ order, const NvGqmv& a,
                                            i64 v) {
  if (order == nullptr) return v;
  const i64 mi = v / a.mrows;
  return (i64)order[mi] * a.mrows + (v - mi * a.mrows);
}

// Row v of the product's row of x (through `order`, then lhs, when given).
__device__ __forceinline__ i64 nvqg_xrow(const u32* __restrict__ lhs,
                                         const u32* __restrict__ order, const NvGqmv& a, i64 v) {
  v = nvqg_out_row(order, a, v);
  if (lhs == nullptr) return v;
  const i64 mi = v / a.mrows, li = a.lhs_repeat > 1 ? mi / a.lhs_repeat : mi;
  return nvqg_index(lhs, li, a.xmats) * a.mrows + (v - mi * a.mrows);
}

// The grouping (one block; see the top): the `a.indices` positions (at most NVQG_GROUP_MAX)
// sorted stably by their matrix (rhs, clamped) into `order`, each matrix's first place into
// `offs` (`a.experts` of them, at most NVQG_MAX_EXPERTS), then the sorted chunks' table.
template <int M>
__device__ __forceinline__ void nvqg_group(const u32* __restrict__ rhs, i32* __restrict__ offs,
                                           u32* __restrict__ order, i64* __restrict__ table,
                                           const NvGqmv a) {
  constexpr int NT = NVQ_WARPS * 32;
  __shared__ int next[NVQG_MAX_EXPERTS];
  __shared__ u32 keys[NVQG_GROUP_MAX];
  __shared__ i64 part[NT];
  const int tid = threadIdx.x, experts = (int)a.experts, n = (int)a.indices;
  for (int e = tid; e < experts; e += NT) next[e] = 0;
  __syncthreads();
  for (int p = tid; p < n; p += NT) {
    const u32 k = (u32)nvqg_index(rhs, p, a.experts);
    keys[p] = k;
    atomicAdd(&next[k], 1);
  }
  __syncthreads();
  // Each thread's run of matrices: their counts' sum, scanned, gives the run's first place.
  const int per = (experts + NT - 1) / NT, f0 = min(tid * per, experts);
  const int f1 = min(f0 + per, experts);
  i64 sum = 0;
  for (int f = f0; f < f1; ++f) sum += next[f];
  nvqg_scan<false>(part, sum);
  int place = tid == 0 ? 0 : (int)part[tid - 1];
  for (int f = f0; f < f1; ++f) {
    const int c = next[f];
    offs[f] = place;
    next[f] = place;
    place += c;
  }
  __syncthreads();
  // The positions are placed NT at a time, in order. In a warp, the lanes whose positions
  // pick one matrix find each other (__match_any_sync) and take consecutive places after that
  // matrix's earlier positions, the lowest of them claiming the places for all; the warps take
  // turns between barriers, so the sort is stable and nothing races. (With every thread
  // reading every key and placing those of its matrices, the launch took 35 us under ncu on
  // the H200 for 512 positions a key at a time, about a third of the product.)
  const int lane = tid & 31, warp = tid >> 5;
  for (int c0 = 0; c0 < n; c0 += NT) {
    const int p = c0 + tid;
    const u32 k = p < n ? keys[p] : 0xFFFFFFFFu;
    const u32 peers = __match_any_sync(0xFFFFFFFFu, k);
    const int first = __ffs(peers) - 1;
    const int rank = __popc(peers & ((1u << lane) - 1u));
    for (int w = 0; w < NVQ_WARPS; ++w) {
      if (warp == w) {
        int base = 0;
        if (lane == first && k != 0xFFFFFFFFu) {
          base = next[k];
          next[k] = base + __popc(peers);
        }
        base = __shfl_sync(0xFFFFFFFFu, base, first);
        if (k != 0xFFFFFFFFu) order[base + rank] = (u32)p;
      }
      __syncthreads();
    }
  }
  // The block's writes of offs are seen by all its threads after the barrier.
  __syncthreads();
  nvqg_table<M>(offs, table, a);
}

template <typename T, int B, int M>
__device__ __forceinline__ void nvq_gqmv(const T* __restrict__ x, const u32* __restrict__ w,
                                         const T* __restrict__ scales, const T* __restrict__ biases,
                                         T* __restrict__ y, const u32* __restrict__ lhs,
                                         const u32* __restrict__ rhs, const i64* __restrict__ table,
                                         const u32* __restrict__ order, const NvGqmv a) {
  constexpr int R = NvqRows<M>::v;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const i64 n0 = ((i64)blockIdx.x * NVQ_WARPS + warp) * R;
  // Rows past the end read the last row and are never written.
  i64 row[R];
#pragma unroll
  for (int r = 0; r < R; ++r) row[r] = min(n0 + r, a.n - 1);
  for (i64 z = blockIdx.z; z < a.chunks; z += gridDim.z) {
    // This chunk's rows [v0, v1) of the product and its matrix of w.
    i64 v0, v1, e;
    if (!nvqg_chunk<M>(rhs, table, a, z, v0, v1, e)) break;
    const T* xr[M];
#pragma unroll
    for (int i = 0; i < M; ++i)
      xr[i] = x + nvqg_xrow(lhs, order, a, min(v0 + i, v1 - 1)) * (i64)a.packs * 32;
    float acc[R][M];
    nvq_qmv_rows<T, B, M>(xr, w + e * a.w_batch, scales + e * a.s_batch, biases + e * a.s_batch, row, 0,
                          a.packs, a.packs, a.groups, a.gs_shift, acc);
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int i = 0; i < M; ++i)
          if (n0 + r < a.n && v0 + i < v1)
            y[nvqg_out_row(order, a, v0 + i) * a.n + n0 + r] = nv_down<T>(acc[r][i]);
    }
  }
}

// The tensor-core form for 4 bits (f16, bf16; in modules that include quantized_mv_mma.cu
// first): a block takes 16 R (8 / S) rows of w for a chunk of up to 8 rows of the product
// (the products' 8 columns), chunks as above.
#ifdef NVQM_WARPS
#define NVQG_SCAN_EACH (NVQG_SCAN_MAX / (NVQM_WARPS * 32))

// One chunk of the product with matrix e of w, in either order: the chunk's first `filled` of
// 8 columns are rows product_row(0), ... of the product (each read through lhs, written in
// place). `sums` is the block's exchange, `n0` the warp's first row of w; every thread calls it.
template <typename T, int R, int S, typename RowOf>
__device__ __forceinline__ void nvqm_gqmv_chunk(const T* __restrict__ x, const u32* __restrict__ w,
                                                const T* __restrict__ scales,
                                                const T* __restrict__ biases, T* __restrict__ y,
                                                const u32* __restrict__ lhs, const NvGqmv& a,
                                                float (*sums)[R][4][32], i64 n0, i64 e,
                                                int filled, RowOf product_row) {
  const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2;
  // The lane's column: row product_row(g) of the product, if the chunk has it.
  const uint4* xr =
      g < filled ? reinterpret_cast<const uint4*>(x + nvqg_xrow(lhs, nullptr, a, product_row(g)) *
                                                          (i64)a.packs * 32)
                 : nullptr;
  float c[R][4];
  nvqm_sums<T, R, S>(reinterpret_cast<const uint4*>(w + e * a.w_batch),
                     reinterpret_cast<const u16*>(scales + e * a.s_batch),
                     reinterpret_cast<const u16*>(biases + e * a.s_batch), xr, a.n, n0, a.packs,
                     a.groups, a.gs_shift, a.nibbles, warp % S, c);
  nvqm_meet<R, S>(sums, c, [&](int row, int col, float v) {
    if (n0 + row < a.n && col < filled) y[product_row(col) * a.n + n0 + row] = nv_down<T>(v);
  });
}

// The index positions (below NVQG_SCAN_MAX) whose matrix (rhs, clamped) is e, in increasing
// order, into `list`; returns their count. Thread t tests positions t, t + 256, ...; batch b's
// warp w places its positions after those of every earlier batch and of batch b's earlier
// warps, whose counts it reads from `counts` (both arrays the block's shared memory, free again
// when every thread has returned).
__device__ __forceinline__ int nvqg_find(const u32* __restrict__ rhs, i64 e, const NvGqmv& a,
                                         u16* __restrict__ list, int* __restrict__ counts) {
  constexpr int NT = NVQM_WARPS * 32;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  bool hit[NVQG_SCAN_EACH];
#pragma unroll
  for (int b = 0; b < NVQG_SCAN_EACH; ++b) {
    const int p = b * NT + tid;
    hit[b] = p < a.indices && nvqg_index(rhs, p, a.experts) == e;
  }
  u32 mask[NVQG_SCAN_EACH];
#pragma unroll
  for (int b = 0; b < NVQG_SCAN_EACH; ++b) {
    mask[b] = __ballot_sync(0xFFFFFFFFu, hit[b]);
    if (lane == 0) counts[b * NVQM_WARPS + warp] = __popc(mask[b]);
  }
  __syncthreads();
  int run = 0;
#pragma unroll
  for (int b = 0; b < NVQG_SCAN_EACH; ++b) {
    for (int w = 0; w < NVQM_WARPS; ++w) {
      if (w == warp && hit[b])
        list[run + __popc(mask[b] & ((1u << lane) - 1u))] = (u16)(b * NT + tid);
      run += counts[b * NVQM_WARPS + w];
    }
  }
  __syncthreads();
  return run;
}

// The product by matrix (see the top; a kernel of its own, so that the other's registers do
// not spill for it): block z finds matrix z / per_matrix's positions, then takes every
// per_matrix-th chunk of 8 of their rows from chunk z % per_matrix.
template <typename T, int R, int S>
__device__ __forceinline__ void nvqm_gqmv_by_matrix(
    const T* __restrict__ x, const u32* __restrict__ w, const T* __restrict__ scales,
    const T* __restrict__ biases, T* __restrict__ y, const u32* __restrict__ lhs,
    const u32* __restrict__ rhs, const NvGqmv a) {
  static_assert(NVQM_WARPS % S == 0, "whole tiles a block");
  __shared__ float sums[NVQM_WARPS][R][4][32];
  __shared__ u16 list[NVQG_SCAN_MAX];
  __shared__ int counts[NVQG_SCAN_EACH * NVQM_WARPS];
  // In 32 bits (a 64-bit division is a call, whose registers spilled): z is below
  // experts · per_matrix, at most NVQG_MAX_EXPERTS · NVQG_SCAN_MAX.
  const int warp = threadIdx.x >> 5, mrows = a.mrows;
  const i64 n0 = ((i64)blockIdx.x * (NVQM_WARPS / S) + warp / S) * 16 * R;
  const int per = a.per_matrix, chunks = (int)a.chunks;
  for (int z = blockIdx.z; z < chunks; z += gridDim.z) {
    const int e = z / per;
    const int rows = nvqg_find(rhs, e, a, list, counts) * mrows;
    // Row r of the matrix's rows as a row of the product: row r % mrows of its position's.
    auto product_row = [&](int r) -> i64 {
      const int i = r / mrows;
      return (i64)list[i] * mrows + (r - i * mrows);
    };
    for (int c = (z - e * per) * 8; c < rows; c += per * 8) {
      nvqm_gqmv_chunk<T, R, S>(x, w, scales, biases, y, lhs, a, sums, n0, e, min(rows - c, 8),
                               [&](int i) { return product_row(c + i); });
    }
  }
}

template <typename T, int R, int S>
__device__ __forceinline__ void nvqm_gqmv(const T* __restrict__ x, const u32* __restrict__ w,
                                          const T* __restrict__ scales,
                                          const T* __restrict__ biases, T* __restrict__ y,
                                          const u32* __restrict__ lhs, const u32* __restrict__ rhs,
                                          const i64* __restrict__ table,
                                          const u32* __restrict__ order, const NvGqmv a) {
  static_assert(NVQM_WARPS % S == 0, "whole tiles a block");
  __shared__ float sums[NVQM_WARPS][R][4][32];
  const int warp = threadIdx.x >> 5;
  const i64 n0 = ((i64)blockIdx.x * (NVQM_WARPS / S) + warp / S) * 16 * R;
  // Every thread of the block walks the same chunks (the exchange synchronises it).
  for (i64 z = blockIdx.z; z < a.chunks; z += gridDim.z) {
    i64 v0, v1, e;
    if (!nvqg_chunk<8>(rhs, table, a, z, v0, v1, e)) break;
    const int filled = (int)min(v1 - v0, (i64)8);
    nvqm_gqmv_chunk<T, R, S>(x, w, scales, biases, y, lhs, a, sums, n0, e, filled,
                             [&](int i) { return nvqg_out_row(order, a, v0 + i); });
  }
}
#endif

// Blocks of the product a multiprocessor must hold at least (the register bound), where
// `NUVEC_KERNEL_DEFINES="NVQG_MINB=4"` sets it (a tunable); unset, ptxas picks (99 registers
// for 4 rows, where a bound of one block lets it take 170).
#ifdef NVQG_MINB
#define NVQG_BOUNDS __launch_bounds__(NVQ_WARPS * 32, NVQG_MINB)
#else
#define NVQG_BOUNDS __launch_bounds__(NVQ_WARPS * 32)
#endif

// The product (`table` read only when sorted, `order` null unless grouped) and, by M, the
// sorted chunks' table and the grouping.
#define NV_GQMV(T, TN, B, M)                                                                    \
  extern "C" __global__ void NVQG_BOUNDS                                                        \
      gqmv_##TN##_b##B##_m##M(const T* x, const u32* w, const T* s, const T* b, T* y,            \
                              const u32* lhs, const u32* rhs, const i64* table,                 \
                              const u32* order, NvGqmv a) {                                     \
    nvq_gqmv<T, B, M>(x, w, s, b, y, lhs, rhs, table, order, a);                                \
  }                                                                                             \
  extern "C" __global__ void __launch_bounds__(NVQ_WARPS * 32)                                  \
      gqmv_table_m##M(const i32* offs, i64* table, NvGqmv a) {                                 \
    nvqg_table<M>(offs, table, a);                                                              \
  }                                                                                             \
  extern "C" __global__ void __launch_bounds__(NVQ_WARPS * 32)                                  \
      gqmv_group_m##M(const u32* rhs, i32* offs, u32* order, i64* table, NvGqmv a) {           \
    nvqg_group<M>(rhs, offs, order, table, a);                                                  \
  }

// `gqmv_mma_<type>_r<R>_s<S>`: the tensor-core form (4 bits; its table and grouping are
// `gqmv_table_m8` and `gqmv_group_m8`).
#define NV_GQMV_MMA(T, TN, R, S)                                                                \
  extern "C" __global__ void __launch_bounds__(NVQM_WARPS * 32, NVQM_MINB)                       \
      gqmv_mma_##TN##_r##R##_s##S(const T* x, const u32* w, const T* s, const T* b, T* y,        \
                                  const u32* lhs, const u32* rhs, const i64* table,             \
                                  const u32* order, NvGqmv a) {                                 \
    nvqm_gqmv<T, R, S>(x, w, s, b, y, lhs, rhs, table, order, a);                               \
  }                                                                                             \
  extern "C" __global__ void __launch_bounds__(NVQM_WARPS * 32, NVQM_MINB)                       \
      gqmv_mmam_##TN##_r##R##_s##S(const T* x, const u32* w, const T* s, const T* b, T* y,       \
                                   const u32* lhs, const u32* rhs, NvGqmv a) {                  \
    nvqm_gqmv_by_matrix<T, R, S>(x, w, s, b, y, lhs, rhs, a);                                   \
  }
