// gather_qmm's few-row product, x · wᵀ with w picked by index (mixtures of experts while
// decoding; `quantized/gather.rs` says which cases come here). Needs common.cuh and
// quantized.cu, whose `nvq_qmv_rows` does the sums.
//
// Row v of the product is row v % mrows of matrix lhs[v / mrows] of x (row v itself without
// lhs). A block's warps take NvqRows<M> rows of w each (blockIdx.x), for a chunk of up to M
// rows of the product that share one matrix of w (blockIdx.z and on, a grid-stride loop):
// - unsorted: chunk z is rows sub · M .. of index position i (z = i · per + sub), with matrix
//   rhs[i] (i itself without rhs);
// - sorted (offsets given): matrix e's rows are [offs[e], offs[e + 1]) times mrows, cut into
//   chunks of M, counted matrix after matrix; so each matrix's weights are read once for every
//   M of its rows, however many index positions pick it.
// Indices past the end are clamped to the last matrix.

// The most matrices of w the sorted walk takes (their offsets are kept in shared memory).
#define NVQG_MAX_EXPERTS 1024

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
  i32 pad_;
};

// Index `i` of an index array, clamped below `count` (or `i` itself without one).
__device__ __forceinline__ i64 nvqg_index(const u32* __restrict__ idx, i64 i, i64 count) {
  if (idx == nullptr) return i;
  const i64 v = idx[i];
  return v < count ? v : count - 1;
}

template <typename T, int B, int M>
__device__ __forceinline__ void nvq_gqmv(const T* __restrict__ x, const u32* __restrict__ w,
                                         const T* __restrict__ scales, const T* __restrict__ biases,
                                         T* __restrict__ y, const u32* __restrict__ lhs,
                                         const u32* __restrict__ rhs, const i32* __restrict__ offs,
                                         const NvGqmv a) {
  constexpr int R = NvqRows<M>::v;
  __shared__ i32 so[NVQG_MAX_EXPERTS];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const i64 n0 = ((i64)blockIdx.x * NVQ_WARPS + warp) * R;
  const int experts = (int)a.experts;
  if (a.sorted) {
    for (int e = threadIdx.x; e < experts; e += NVQ_WARPS * 32) so[e] = offs[e];
    __syncthreads();
  }
  // Rows past the end read the last row and are never written.
  i64 row[R];
#pragma unroll
  for (int r = 0; r < R; ++r) row[r] = min(n0 + r, a.n - 1);
  const i64 per = (a.mrows + M - 1) / M;
  for (i64 z = blockIdx.z; z < a.chunks; z += gridDim.z) {
    // This chunk's rows [v0, v1) of the product and its matrix of w.
    i64 v0 = -1, v1 = 0, e = 0;
    if (!a.sorted) {
      const i64 i = z / per;
      v0 = i * a.mrows + (z - i * per) * M;
      v1 = (i + 1) * a.mrows;
      e = nvqg_index(rhs, i, a.experts);
    } else {
      // Each matrix's run starts where the last ended; the last runs to the end.
      i64 before = 0, start = 0;
      for (int f = 0; f < experts; ++f) {
        i64 end = a.indices;
        if (f + 1 < experts) {
          const i64 o = so[f + 1];
          end = o < start ? start : (o > a.indices ? a.indices : o);
        }
        const i64 count = ((end - start) * a.mrows + M - 1) / M;
        if (z < before + count) {
          v0 = start * a.mrows + (z - before) * M;
          v1 = end * a.mrows;
          e = f;
          break;
        }
        before += count;
        start = end;
      }
      if (v0 < 0) break;
    }
    const T* xr[M];
#pragma unroll
    for (int i = 0; i < M; ++i) {
      const i64 v = min(v0 + i, v1 - 1);
      i64 at = v;
      if (lhs != nullptr) {
        const i64 mi = v / a.mrows;
        at = nvqg_index(lhs, mi, a.xmats) * a.mrows + (v - mi * a.mrows);
      }
      xr[i] = x + at * (i64)a.packs * 32;
    }
    float acc[R][M];
    nvq_qmv_rows<T, B, M>(xr, w + e * a.w_batch, scales + e * a.s_batch, biases + e * a.s_batch, row, 0,
                          a.packs, a.packs, a.groups, a.gs_shift, acc);
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int i = 0; i < M; ++i)
          if (n0 + r < a.n && v0 + i < v1) y[(v0 + i) * a.n + n0 + r] = nv_down<T>(acc[r][i]);
    }
  }
}

#define NV_GQMV(T, TN, B, M)                                                                    \
  extern "C" __global__ void __launch_bounds__(NVQ_WARPS * 32)                                  \
      gqmv_##TN##_b##B##_m##M(const T* x, const u32* w, const T* s, const T* b, T* y,            \
                              const u32* lhs, const u32* rhs, const i32* offs, NvGqmv a) {      \
    nvq_gqmv<T, B, M>(x, w, s, b, y, lhs, rhs, offs, a);                                        \
  }
