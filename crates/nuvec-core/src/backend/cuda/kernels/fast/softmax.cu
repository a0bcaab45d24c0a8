// Softmax and log-sum-exp over the last axis with the row in registers, and cross entropy
// over long rows (vocabularies) in one pass. Needs common.cuh and fast/rows.cuh first.
// Everything accumulates in float; a row whose maximum is not finite (a NaN or +inf in it,
// or only -inf) has no finite exponentials: log-sum-exp gives that maximum and softmax NaN
// everywhere, as the CPU does.

// 2^x by the multi-function unit (relative error about 2^-22): exp(v - m) is taken as
// 2^((v - m)·log2(e)); the difference first, so that the elements near the maximum, which
// make the sum, lose nothing to a rounded product of a large m.
// nuvec-emulation: device only (tests/emulation/ptx.h stands in for this region) {
__device__ __forceinline__ float nv_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// } nuvec-emulation
#define NV_LOG2E 1.4426950408889634f

// Tunables: whether softmax keeps its exponentials as floats (one exponential an element, more
// registers; else they are taken again for the output) and the resident blocks of 512 its
// register budget aims at. Kept, with two blocks: 3,160 against 2,920 GB/s on the H200
// (bf16 [16384, 4096]).
#ifndef NV_SOFTMAX_KEEP
#define NV_SOFTMAX_KEEP 1
#endif
#ifndef NV_SOFTMAX_MINB
#define NV_SOFTMAX_MINB 2
#endif
// Whether each row group loads its next row while it works on this one (twice the registers
// for the row; for a resident grid).
#ifndef NV_SOFTMAX_PREFETCH
#define NV_SOFTMAX_PREFETCH 0
#endif
// Whether a row's maximum and sum meet in one exchange of (maximum, sum) pairs, each thread's
// exponentials taken relative to its own maximum and rescaled after (two barriers a row in a
// block where a maximum then a sum take four). The kernels with two exchanges a row
// (softmax, log-sum-exp, layer norm) ran 18-50% below the RMS norm's one (H200); off until
// timed there.
#ifndef NV_SOFTMAX_ONE_EXCHANGE
#define NV_SOFTMAX_ONE_EXCHANGE 0
#endif
// Log-sum-exp's budget: it holds only the row's packs.
#ifndef NV_LSE_MINB
#define NV_LSE_MINB 3
#endif

// (m, s) merged with another thread's (mo, so), each s a sum of exp(x - m) over that
// thread's elements (0 where its m is -inf); only a finite maximum gives a meaningful sum.
// Partners of a butterfly get the same result (the sum's two terms commute).
__device__ __forceinline__ void nv_merge_max_sum(float& m, float& s, float mo, float so) {
  const float top = nv_max_nan(m, mo);
  if (top == top && top != -NV_INF && top != NV_INF) {
    const float a = m == -NV_INF ? 0.0f : s * nv_exp2((m - top) * NV_LOG2E);
    const float b = mo == -NV_INF ? 0.0f : so * nv_exp2((mo - top) * NV_LOG2E);
    s = a + b;
  }
  m = top;
}

// The row's (maximum, sum of exponentials) from each thread's pair, over the `lanes` threads
// of the row (a warp, or the whole block of up to 1024 threads), in every one of them: one
// exchange where a maximum then a sum take two (`nv_row_max`, `nv_row_sum`; `slot` as there).
__device__ __forceinline__ void nv_row_max_sum(float& m, float& s, int lanes, int* slot) {
#pragma unroll
  for (int k = 16; k >= 1; k >>= 1) {
    const float mo = __shfl_xor_sync(0xffffffffu, m, k), so = __shfl_xor_sync(0xffffffffu, s, k);
    nv_merge_max_sum(m, s, mo, so);
  }
  if (lanes > 32) {
    __shared__ float parts[2][2][32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float (*part)[32] = parts[*slot];
    if (lane == 0) {
      part[0][warp] = m;
      part[1][warp] = s;
    }
    __syncthreads();
    const bool has = lane < lanes / 32;
    m = has ? part[0][lane] : -NV_INF;
    s = has ? part[1][lane] : 0.0f;
#pragma unroll
    for (int k = 16; k >= 1; k >>= 1) {
      const float mo = __shfl_xor_sync(0xffffffffu, m, k), so = __shfl_xor_sync(0xffffffffu, s, k);
      nv_merge_max_sum(m, s, mo, so);
    }
    *slot ^= 1;
    if (NV_ROW_TWO_BARRIERS) __syncthreads();
  }
}

// Every row of `x` (located by `rows`, elements `st` apart) through `lanes` threads of P
// packs: softmax into the row-major `out` (`lse` false) or log-sum-exp into out[t]. The row
// is read once. `lse` is a template argument so that log-sum-exp keeps no exponentials (its
// registers hold more rows in flight).
template <typename T, int P, bool packed, bool full, bool lse>
__device__ __forceinline__ void nv_softmax_pack_rows(const T* __restrict__ x, const Strided& rows,
                                                     i64 st, T* __restrict__ out, i64 nrows, i64 n,
                                                     int lanes) {
  constexpr int V = NvVec<T>::v;
  const int groups = blockDim.x / lanes;
  const int g = threadIdx.x / lanes, lane = threadIdx.x % lanes;
  const i64 step = (i64)gridDim.x * groups;
  // The exchanges' buffers, alternated (rows.cuh).
  int slot = 0;
  NvPacks<T, P> r, rn;
  if (NV_SOFTMAX_PREFETCH && (i64)blockIdx.x * groups + g < nrows) {
    const i64 t = (i64)blockIdx.x * groups + g;
    nv_packs_load<T, P>(x + nv_locate(rows, t), st, n, packed, lane, lanes, r);
  }
  for (i64 t = (i64)blockIdx.x * groups + g; t < nrows; t += step) {
    T* q = out + t * n;
    if (NV_SOFTMAX_PREFETCH) {
      // The next row's loads go out before this row's exchanges (a resident grid: the host's
      // `NUVEC_ROWS_RESIDENT`).
      rn = r;
      if (t + step < nrows)
        nv_packs_load<T, P>(x + nv_locate(rows, t + step), st, n, packed, lane, lanes, rn);
    } else {
      nv_packs_load<T, P>(x + nv_locate(rows, t), st, n, packed, lane, lanes, r);
    }
    // Elements past the row hold 0: masked by each pack's count of valid elements.
    float mx = -NV_INF;
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const int valid = nv_pack_valid<T, full>(nv_pack_at(k, lane, lanes), n);
#pragma unroll
      for (int j = 0; j < V; ++j)
        if (j < valid) mx = nv_max_nan(mx, r.at(k, j));
    }
#if NV_SOFTMAX_ONE_EXCHANGE
    // Exponentials relative to the thread's own maximum (0 where it is not finite: they are
    // then 0, or the row's maximum is not finite either).
    const float own = mx == mx && mx != -NV_INF && mx != NV_INF ? mx : 0.0f;
#else
    const float m0 = nv_row_max(mx, lanes, &slot);
    const float own = m0 == m0 && m0 != -NV_INF && m0 != NV_INF ? m0 : 0.0f;
#endif
    float acc = 0.0f;
#if NV_SOFTMAX_KEEP
    float e[P][V];
#endif
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const int valid = nv_pack_valid<T, full>(nv_pack_at(k, lane, lanes), n);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float v = j < valid ? nv_exp2((r.at(k, j) - own) * NV_LOG2E) : 0.0f;
#if NV_SOFTMAX_KEEP
        if (!lse) e[k][j] = v;
#endif
        acc += v;
      }
    }
    // Every thread takes part (the block form synchronises); `finite` is the same in all.
#if NV_SOFTMAX_ONE_EXCHANGE
    float m = mx, sum = acc;
    nv_row_max_sum(m, sum, lanes, &slot);
    const bool finite = m == m && m != -NV_INF && m != NV_INF;
    // The thread's exponentials relative to the row's maximum.
    const float rescale = finite && mx != -NV_INF ? nv_exp2((own - m) * NV_LOG2E) : 0.0f;
#else
    const float m = m0, sum = nv_row_sum(acc, lanes, &slot), rescale = 1.0f;
    const bool finite = m == m && m != -NV_INF && m != NV_INF;
#endif
    if (lse) {
      if (lane == 0) out[t] = nv_down<T>(finite ? m + logf(sum) : m);
      if (NV_SOFTMAX_PREFETCH) r = rn;
      continue;
    }
    const float scale = rescale / sum;
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const i64 pk = nv_pack_at(k, lane, lanes);
      if (pk * V >= n) break;
      typename NvVec<T>::P o;
#pragma unroll
      for (int j = 0; j < V; ++j)
#if NV_SOFTMAX_KEEP
        o.v[j] = nv_down<T>(finite ? e[k][j] * scale : NV_NAN);
#else
        o.v[j] = nv_down<T>(finite ? nv_exp2((r.at(k, j) - own) * NV_LOG2E) * scale : NV_NAN);
#endif
      nv_pack_store<T>(q, pk, n, packed, o);
    }
    if (NV_SOFTMAX_PREFETCH) r = rn;
  }
}

// ---- cross entropy over rows of n logits (row-major): block (row, chunk), a row split into
// `gridDim.y` chunks of `per` elements (a multiple of the pack) when rows are few.
// Pass one: each block runs an online maximum and sum over its chunk of its row (16-byte
// packs when aligned) and writes the pair; pass two combines a row's pairs, takes the
// target's logit and writes the loss. The gradient recovers the row's log-sum-exp from the
// loss and the target's logit, and writes g * (softmax - onehot) in one pass.

// (m, s) merged with the value v: m is the running maximum and s the sum of exp(x - m);
// a NaN makes both NaN, and +inf leaves m = +inf (the row's log-sum-exp is then m).
__device__ __forceinline__ void nv_online(float& m, float& s, float v) {
  if (v > m) {
    s = (m == -NV_INF ? 0.0f : s * expf(m - v));
    m = v;
  }
  if (m != -NV_INF) s += expf(v - m);
  if (v != v) m = s = v;
}

// (m, s) merged with a pack of values: its maximum first, so that the running sum is
// rescaled once a pack, then each value's exponential (the multi-function unit's, as
// softmax's) relative to the maximum.
template <int V>
__device__ __forceinline__ void nv_online_pack(float& m, float& s, const float (&v)[V]) {
  float pm = -NV_INF;
#pragma unroll
  for (int j = 0; j < V; ++j) pm = nv_max_nan(pm, v[j]);
  if (pm > m || pm != pm) {
    s = m == -NV_INF ? 0.0f : s * nv_exp2((m - pm) * NV_LOG2E);
    m = pm;
  }
  if (m != -NV_INF) {
#pragma unroll
    for (int j = 0; j < V; ++j) s += nv_exp2((v[j] - m) * NV_LOG2E);
  }
}

// ---- log-sum-exp of many rows too long for a warp to hold: a warp a row (eight rows a
// block of 256), each lane streaming its packs (lane, lane + 32, ...) in batches of
// NV_LSE_BATCH values (8 packs of f32, 4 of the half types: 8 of those spill at the register
// budget of 4 blocks a multiprocessor) with an online maximum and sum, then one exchange of
// the lanes' pairs. A batch's loads are all in flight before its first use and no
// block-wide barrier holds a row back: the row-in-registers kernel above, a block of 128 a
// row with four barriers, reads [16384, 4096] bf16 at 45% of the copy on the H200 (as long
// as the RMS norm takes to read and write the same rows), the reductions' warp rows at 85%.
#ifndef NV_LSE_BATCH
#define NV_LSE_BATCH 32
#endif
#ifndef NV_LSE_WARP_MINB
#define NV_LSE_WARP_MINB 4
#endif

// Pack q of a row known to lie inside it (16-byte loads when `packed`).
template <typename T, bool packed>
__device__ __forceinline__ NvRaw nv_raw_inside(const T* __restrict__ p, i64 st, i64 q, i64 n) {
  if (packed) return reinterpret_cast<const NvRaw*>(p)[q];
  return nv_raw_load<T>(p, st, q, n, false);
}

template <typename T, int U, bool packed>
__device__ __forceinline__ void nv_lse_warp_rows(const T* __restrict__ x, const Strided& rows,
                                                 i64 st, T* __restrict__ out, i64 nrows, i64 n) {
  constexpr int V = NvVec<T>::v;
  const int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  // Packs wholly inside a row, and packs touching it.
  const i64 whole = n / V, packs = (n + V - 1) / V;
  for (i64 t = (i64)blockIdx.x * warps + (threadIdx.x >> 5); t < nrows;
       t += (i64)gridDim.x * warps) {
    const T* p = x + nv_locate(rows, t);
    float m = -NV_INF, s = 0.0f;
    i64 q0 = 0;
    for (; q0 + 32 * U <= whole; q0 += 32 * U) {
      NvRaw r[U];
#pragma unroll
      for (int u = 0; u < U; ++u) r[u] = nv_raw_inside<T, packed>(p, st, q0 + lane + 32 * u, n);
      float v[U * V];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int j = 0; j < V; ++j) v[u * V + j] = nv_raw_get<T>(r[u], j);
      nv_online_pack<U * V>(m, s, v);
    }
    // The rest, fewer than 32 U packs: elements past the row count as -inf.
    if (q0 < packs) {
      NvRaw r[U];
#pragma unroll
      for (int u = 0; u < U; ++u) r[u] = nv_raw_load<T>(p, st, q0 + lane + 32 * u, n, packed);
      float v[U * V];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int valid = nv_pack_valid<T>(q0 + lane + 32 * u, n);
#pragma unroll
        for (int j = 0; j < V; ++j) v[u * V + j] = j < valid ? nv_raw_get<T>(r[u], j) : -NV_INF;
      }
      nv_online_pack<U * V>(m, s, v);
    }
    // The lanes' pairs: a lane that saw only -inf adds nothing; a row whose maximum is not
    // finite gives that maximum.
    const float rm = nv_row_max(m, 32);
    const bool finite = rm == rm && rm != -NV_INF && rm != NV_INF;
    const float share = (finite && m != -NV_INF) ? s * nv_exp2((m - rm) * NV_LOG2E) : 0.0f;
    const float sum = nv_row_sum(share, 32);
    if (lane == 0) out[t] = nv_down<T>(finite ? rm + logf(sum) : rm);
  }
}

// The chunk [lo, hi) of a row a block takes.
__device__ __forceinline__ void nv_chunk(i64 n, i64 per, i64& lo, i64& hi) {
  lo = (i64)blockIdx.y * per;
  hi = lo + per < n ? lo + per : n;
}

template <typename T>
__device__ __forceinline__ void nv_ce_parts(const T* __restrict__ x, float* __restrict__ parts,
                                            i64 n, i64 per) {
  constexpr int V = 16 / sizeof(T);
  const i64 row = blockIdx.x;
  const T* p = x + row * n;
  i64 lo, hi;
  nv_chunk(n, per, lo, hi);
  float m = -NV_INF, s = 0.0f;
  // `per` is a multiple of V, so packed chunks start on a pack.
  if (n % V == 0 && nv_aligned(p)) {
    const NvPack<T, V>* pp = reinterpret_cast<const NvPack<T, V>*>(p);
#pragma unroll 4
    for (i64 q = lo / V + threadIdx.x; q < hi / V; q += blockDim.x) {
      const NvPack<T, V> a = pp[q];
      float v[V];
#pragma unroll
      for (int j = 0; j < V; ++j) v[j] = nv_up(a.v[j]);
      nv_online_pack<V>(m, s, v);
    }
  } else {
    for (i64 i = lo + threadIdx.x; i < hi; i += blockDim.x) nv_online(m, s, nv_up(p[i]));
  }
  const int lanes = blockDim.x;
  const float rm = nv_row_max(m, lanes);
  const float share = (m == -NV_INF || rm != rm) ? (m != m ? m : 0.0f) : s * expf(m - rm);
  const float rs = nv_row_sum(share, lanes);
  if (threadIdx.x == 0) {
    parts[(row * gridDim.y + blockIdx.y) * 2] = rm;
    parts[(row * gridDim.y + blockIdx.y) * 2 + 1] = rs;
  }
}

// The target's logit of row `row` (0 when the index is outside the row once negative ones
// count from the end), and the index (-1 then).
template <typename T>
__device__ __forceinline__ float nv_target(const T* __restrict__ x, const i32* __restrict__ t,
                                           i64 row, i64 n, i64& at) {
  i64 k = t[row];
  if (k < 0) k += n;
  at = (k >= 0 && k < n) ? k : -1;
  return at >= 0 ? nv_up(x[row * n + at]) : 0.0f;
}

// One thread a row: the row's `splits` pairs merged into its log-sum-exp, minus the target.
template <typename T>
__device__ __forceinline__ void nv_ce_loss(const T* __restrict__ x, const i32* __restrict__ t,
                                           const float* __restrict__ parts, float* __restrict__ loss,
                                           i64 nrows, i64 n, i64 splits) {
  for (i64 row = (i64)blockIdx.x * blockDim.x + threadIdx.x; row < nrows;
       row += (i64)gridDim.x * blockDim.x) {
    float m = -NV_INF;
    for (i64 k = 0; k < splits; ++k) m = nv_max_nan(m, parts[(row * splits + k) * 2]);
    float lse = m;
    if (m == m && m != NV_INF && m != -NV_INF) {
      float s = 0.0f;
      for (i64 k = 0; k < splits; ++k) {
        const float pm = parts[(row * splits + k) * 2];
        if (pm != -NV_INF) s += parts[(row * splits + k) * 2 + 1] * expf(pm - m);
      }
      lse = m + logf(s);
    }
    i64 at;
    loss[row] = lse - nv_target<T>(x, t, row, n, at);
  }
}

template <typename T>
__device__ __forceinline__ void nv_ce_grad(const T* __restrict__ x, const i32* __restrict__ t,
                                           const float* __restrict__ loss,
                                           const float* __restrict__ g, T* __restrict__ dx, i64 n,
                                           i64 per) {
  constexpr int V = 16 / sizeof(T);
  const i64 row = blockIdx.x;
  i64 at;
  const float lse = loss[row] + nv_target<T>(x, t, row, n, at);
  const float gr = g[row];
  const T* p = x + row * n;
  T* q = dx + row * n;
  i64 lo, hi;
  nv_chunk(n, per, lo, hi);
  if (n % V == 0 && nv_aligned(p) && nv_aligned(q)) {
    const NvPack<T, V>* pp = reinterpret_cast<const NvPack<T, V>*>(p);
    NvPack<T, V>* qp = reinterpret_cast<NvPack<T, V>*>(q);
#pragma unroll 4
    for (i64 k = lo / V + threadIdx.x; k < hi / V; k += blockDim.x) {
      const NvPack<T, V> a = pp[k];
      NvPack<T, V> o;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float hit = (k * V + j == at) ? 1.0f : 0.0f;
        o.v[j] = nv_down<T>(gr * (nv_exp2((nv_up(a.v[j]) - lse) * NV_LOG2E) - hit));
      }
      qp[k] = o;
    }
  } else {
    for (i64 i = lo + threadIdx.x; i < hi; i += blockDim.x) {
      const float hit = i == at ? 1.0f : 0.0f;
      q[i] = nv_down<T>(gr * (nv_exp2((nv_up(p[i]) - lse) * NV_LOG2E) - hit));
    }
  }
}

// Register budgets as the norms' (norms.cu): at least MINB blocks of 512 a multiprocessor.
// `*_full_*`: the packed kernels for rows that fill every pack of their threads
// (`nv_pack_valid` in rows.cuh; the host checks).
#define NV_SOFTMAX_KIND1(T, tn, P, MINB, name, lse, mode, packed, full) \
  extern "C" __global__ void __launch_bounds__(512, MINB) name##_##mode##_##tn##_##P( \
      const T* x, Strided rows, i64 st, T* out, i64 nrows, i64 n, int lanes) { \
    nv_softmax_pack_rows<T, P, packed, full, lse>(x, rows, st, out, nrows, n, lanes); }
#define NV_SOFTMAX_KIND(T, tn, P, MINB, name, lse) \
  NV_SOFTMAX_KIND1(T, tn, P, MINB, name, lse, packs, true, false) \
  NV_SOFTMAX_KIND1(T, tn, P, MINB, name, lse, elems, false, false) \
  NV_SOFTMAX_KIND1(T, tn, P, MINB, name, lse, full, true, true)
#define NV_SOFTMAX_PACKS(T, tn, P, MINB) \
  NV_SOFTMAX_KIND(T, tn, P, MINB, softmax, false) \
  NV_SOFTMAX_KIND(T, tn, P, ((P) == 8 ? 2 : NV_LSE_MINB), logsumexp, true)

// One module a pack count P: `NV_SOFTMAX_P(T, tn, P)` instantiates
// `{softmax,logsumexp}_{packs,elems,full}_<type>_<P>` (rows of at most lanes * P packs;
// in 16-byte packs, which the host checks the alignment for, or element by element);
// `NV_CROSS_ENTROPY(T, tn)` the online kernels: `cross_entropy_{parts,loss,grad}_<type>` and
// `logsumexp_warp_{packs,elems}_<type>`.
#define NV_SOFTMAX_P(T, tn, P) NV_SOFTMAX_PACKS(T, tn, P, ((P) == 8 ? 2 : NV_SOFTMAX_MINB))
#define NV_CROSS_ENTROPY(T, tn) \
  extern "C" __global__ void __launch_bounds__(256, NV_LSE_WARP_MINB) logsumexp_warp_packs_##tn( \
      const T* x, Strided rows, i64 st, T* out, i64 nrows, i64 n) { \
    nv_lse_warp_rows<T, NV_LSE_BATCH / NvVec<T>::v, true>(x, rows, st, out, nrows, n); } \
  extern "C" __global__ void __launch_bounds__(256, NV_LSE_WARP_MINB) logsumexp_warp_elems_##tn( \
      const T* x, Strided rows, i64 st, T* out, i64 nrows, i64 n) { \
    nv_lse_warp_rows<T, NV_LSE_BATCH / NvVec<T>::v, false>(x, rows, st, out, nrows, n); } \
  extern "C" __global__ void __launch_bounds__(512, 2) cross_entropy_parts_##tn( \
      const T* x, float* parts, i64 n, i64 per) { nv_ce_parts<T>(x, parts, n, per); } \
  extern "C" __global__ void cross_entropy_loss_##tn( \
      const T* x, const i32* t, const float* parts, float* loss, i64 nrows, i64 n, i64 splits) { \
    nv_ce_loss<T>(x, t, parts, loss, nrows, n, splits); } \
  extern "C" __global__ void __launch_bounds__(512, 2) cross_entropy_grad_##tn( \
      const T* x, const i32* t, const float* loss, const float* g, T* dx, i64 n, i64 per) { \
    nv_ce_grad<T>(x, t, loss, g, dx, n, per); }
