// The gated delta rule (Gated DeltaNet's recurrence, mlx-lm's gated_delta_update once its
// gates are computed). For each sequence b, step t and value head h, with S that head's state
// ([Dv, Dk], in float whatever the state's type):
//
//   S <- g_t S;   S <- S + beta_t (v_t - S k_t) k_t^T;   y_t = S q_t,
//
// value head h reading key head h / group. Needs common.cuh first.
//
// The work: a block is one (sequence, value head, run of `rows` state rows); each warp of it
// holds R consecutive rows in registers for all the steps, each lane E = Dk / 32 elements of
// every row, so the state is read once and written once (or once a step, for every step's
// state). Row r only needs its own dot products S[r,:] k and S[r,:] q: the lanes' partial sums
// meet through warp shuffles, and no other exchange between threads is needed. The steps'
// inputs (q_t, k_t, the block's rows of v_t, g_t, beta_t) go through shared memory as floats,
// `chunk` steps at a time, read by every warp of the block.
//
// Which elements a lane holds: the row is cut into accesses of P elements (up to 16 bytes of
// the state's type, the largest power of two dividing E elements' bytes), and access a of
// lane l covers columns (a * 32 + l) * P .. + P, so each load or store instruction of a warp
// moves one contiguous run of 32 accesses. q and k are read from shared memory the same way.
//
// Bits: every sum and product is written with explicit rounding (no contraction left to the
// compiler), and a row's arithmetic depends neither on R nor on the block's other rows nor on
// the number of steps, so every step's state, the slots' kernel and a kernel over fewer
// sequences or steps give the same bits for the same row. With S' = g S:
//   recalled = S' k,  delta = (v - recalled) beta,  S = S' + k delta,
//   y = S q = S' q + delta (k q),
// so the three dot products of a step (S' k, S' q and k q) are reduced together, one chain
// of shuffles a step rather than two after each other.

// The element types of the small inputs, read at run time (2 bits each in `NvGd::types`):
// their loads are few next to the state's, and one module then serves every combination.
#define NV_GD_F32 0
#define NV_GD_F16 1
#define NV_GD_BF16 2

// What the host passes (`GdArgs` in `gated_delta.rs`): strides in elements.
struct NvGd {
  i64 q[4];     // q [B, T, Hk, Dk]: strides of b, t, head, feature
  i64 k[4];     // k [B, T, Hk, Dk]
  i64 v[4];     // v [B, T, Hv, Dv]
  i64 g[3];     // g [B, T, Hv]: strides of b, t, head
  i64 beta[3];  // beta [B, T, Hv]
  i64 slot_stride;  // slots [B]
  i64 steps;    // T
  i64 hv;       // value heads
  i64 dv;       // state rows (value features)
  i64 group;    // value heads a key head serves
  i64 entries;  // pool entries (slots), else 0
  i64 units;    // the blocks of the one-unit-a-block grid (B · Hv · runs of rows)
  i32 types;    // q, k, v, g, beta, y: 2 bits each from bit 0
  i32 every;    // write the state after every step ([B, T, Hv, Dv, Dk]) instead of the last
  i32 chunk;    // steps staged in shared memory at once
  i32 pad;
};

__device__ __forceinline__ float nv_gd_load(const void* p, int type, i64 i) {
  switch (type) {
    case NV_GD_F16: return __half2float(static_cast<const f16*>(p)[i]);
    case NV_GD_BF16: return __bfloat162float(static_cast<const bf16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ void nv_gd_store(void* p, int type, i64 i, float x) {
  switch (type) {
    case NV_GD_F16: static_cast<f16*>(p)[i] = __float2half_rn(x); break;
    case NV_GD_BF16: static_cast<bf16*>(p)[i] = __float2bfloat16_rn(x); break;
    default: static_cast<float*>(p)[i] = x; break;
  }
}

// How a lane's E elements of a row of S are accessed (see the top of the file).
template <typename S, int E> struct NvGdRow {
  static constexpr int bytes = E * (int)sizeof(S);
  static constexpr int low = bytes & -bytes;             // largest power of two dividing it
  static constexpr int access = low < 16 ? low : 16;
  static constexpr int P = access / (int)sizeof(S);      // elements an access
  static constexpr int N = E / P;                        // accesses a lane
};

// A lane's elements of a row starting at `row` (the row start is `access`-aligned: the host
// checks the state's start, and a row is 32 E elements).
template <typename S, int E>
__device__ __forceinline__ void nv_gd_read(const S* row, int lane, float (&x)[E]) {
  typedef NvGdRow<S, E> L;
  const NvPack<S, L::P>* p = reinterpret_cast<const NvPack<S, L::P>*>(row);
#pragma unroll
  for (int a = 0; a < L::N; ++a) {
    const NvPack<S, L::P> w = p[a * 32 + lane];
#pragma unroll
    for (int j = 0; j < L::P; ++j) x[a * L::P + j] = (float)nv_up(w.v[j]);
  }
}

template <typename S, int E>
__device__ __forceinline__ void nv_gd_write(S* row, int lane, const float (&x)[E]) {
  typedef NvGdRow<S, E> L;
  NvPack<S, L::P>* p = reinterpret_cast<NvPack<S, L::P>*>(row);
#pragma unroll
  for (int a = 0; a < L::N; ++a) {
    NvPack<S, L::P> w;
#pragma unroll
    for (int j = 0; j < L::P; ++j) w.v[j] = nv_down<S>(x[a * L::P + j]);
    p[a * 32 + lane] = w;
  }
}

// A lane's elements of a staged q or k (floats, in the state's column order).
template <int E, int P>
__device__ __forceinline__ void nv_gd_take(const float* vec, int lane, float (&x)[E]) {
#pragma unroll
  for (int a = 0; a < E / P; ++a) {
    const float* at = vec + (a * 32 + lane) * P;
    if constexpr (P % 4 == 0) {
#pragma unroll
      for (int j = 0; j < P; j += 4) {
        const float4 f = *reinterpret_cast<const float4*>(at + j);
        x[a * P + j] = f.x;
        x[a * P + j + 1] = f.y;
        x[a * P + j + 2] = f.z;
        x[a * P + j + 3] = f.w;
      }
    } else if constexpr (P % 2 == 0) {
#pragma unroll
      for (int j = 0; j < P; j += 2) {
        const float2 f = *reinterpret_cast<const float2*>(at + j);
        x[a * P + j] = f.x;
        x[a * P + j + 1] = f.y;
      }
    } else {
#pragma unroll
      for (int j = 0; j < P; ++j) x[a * P + j] = at[j];
    }
  }
}

// sum_i a[i] b[i] over a lane's elements, in order, from zero.
template <int E>
__device__ __forceinline__ float nv_gd_dot(const float (&a)[E], const float (&b)[E]) {
  float s = 0.0f;
#pragma unroll
  for (int e = 0; e < E; ++e) s = __fmaf_rn(a[e], b[e], s);
  return s;
}

// Where unit `unit` (a block of the one-unit-a-block grid: sequence, value head, run of
// `rows` rows) lies, for this warp: its head, key head and rows, and the state's entries.
// `state` is read at entry `slots[b]` (negative counting from the end, then clamped into the
// pool, as `take` reads) or at sequence b; `out` is written at the same entry when it is in
// the pool (as `scatter` skips others) or at sequence b. With slots, `state` and `out` are
// the same pool: a unit reads its rows before it writes them, and distinct slots keep units
// apart.
struct NvGdPlace {
  i64 b, h, hk;
  i64 first;  // the unit's first row
  i64 mine;   // this warp's first row
  i64 from, to;
  bool keep;
};

__device__ __forceinline__ NvGdPlace nv_gd_place(const NvGd& a, const i32* __restrict__ slots,
                                                 i64 unit, int rows, int R) {
  NvGdPlace p;
  const int w = threadIdx.x >> 5;
  // In 32 bits (the host keeps B * Hv * Dv within them): 64-bit divisions are calls.
  const u32 runs = ((u32)a.dv + rows - 1) / rows;
  const u32 hv = (u32)a.hv, ht = (u32)unit / runs;
  const i64 run = unit - (i64)ht * runs;
  p.h = ht % hv;
  p.b = ht / hv;
  p.hk = (u32)p.h / (u32)a.group;
  p.first = run * rows;
  p.mine = p.first + w * R;
  p.from = p.b;
  p.to = p.b;
  p.keep = true;
  if (slots != nullptr) {
    i64 s = slots[p.b * a.slot_stride];
    if (s < 0) s += a.entries;
    p.keep = s >= 0 && s < a.entries;
    p.from = s < 0 ? 0 : (s >= a.entries ? a.entries - 1 : s);
    p.to = p.from;
  }
  return p;
}

// This warp's R state rows of a unit into registers (zeros past Dv): loads only, so that they
// stay in flight while the caller does other work.
template <typename S, int E, int R>
__device__ __forceinline__ void nv_gd_rows(const S* state, const NvGdPlace& p, const NvGd& a,
                                           float (&st)[R][E]) {
  constexpr int DK = 32 * E;
  const int lane = threadIdx.x & 31;
  const S* src = state + ((p.from * a.hv + p.h) * a.dv + p.mine) * DK;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (p.mine + r < a.dv) {
      nv_gd_read<S, E>(src + r * DK, lane, st[r]);
    } else {
#pragma unroll
      for (int e = 0; e < E; ++e) st[r][e] = 0.0f;
    }
  }
}

// The steps of one unit from its state rows in st (see the top of the file), which it leaves
// updated, writing the outputs and the state (every step's, or the last). `staged()` is
// called once the first chunk of steps is staged (the looping form asks for its next unit's
// rows there).
template <typename S, int E, int R, typename Staged>
__device__ __forceinline__ void nv_gd_unit(
    const void* __restrict__ q, const void* __restrict__ k, const void* __restrict__ v,
    const void* __restrict__ g, const void* __restrict__ beta, S* out, void* __restrict__ y,
    const NvGd& a, const NvGdPlace& p, float (&st)[R][E], Staged staged) {
  constexpr int DK = 32 * E;
  constexpr int P = NvGdRow<S, E>::P;
  extern __shared__ float4 nv_gd_shared[];
  const int warps = blockDim.x >> 5;
  const int rows = warps * R;
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const i64 b = p.b, h = p.h, hk = p.hk, first = p.first, mine = p.mine;
  const int qt = a.types & 3, kt = (a.types >> 2) & 3, vt = (a.types >> 4) & 3;
  const int gt = (a.types >> 6) & 3, bt = (a.types >> 8) & 3, yt = (a.types >> 10) & 3;
  float* qs = reinterpret_cast<float*>(nv_gd_shared);  // [chunk][DK]
  float* ks = qs + a.chunk * DK;                         // [chunk][DK]
  float* vs = ks + a.chunk * DK;                         // [chunk][rows]
  float* gs = vs + a.chunk * rows;                       // [chunk]
  float* bs = gs + a.chunk;                              // [chunk]
  const int threads = blockDim.x;
  const i64 total = a.steps;
  // y at step t of this warp's first row, and every step's state (when asked) at step t:
  // both advance by one step's Hv * Dv rows.
  const i64 step_rows = a.hv * a.dv;
  i64 y_at = (b * total * a.hv + h) * a.dv + mine;
  S* each = a.every ? out + ((p.to * total * a.hv + h) * a.dv + mine) * DK : out;

  for (i64 t0 = 0; t0 < total; t0 += a.chunk) {
    const int n = (int)(total - t0 < a.chunk ? total - t0 : a.chunk);
    // The previous chunk's steps are done with the buffers.
    if (t0 > 0) __syncthreads();
    for (int i = threadIdx.x; i < n * DK; i += threads) {
      const i64 t = t0 + i / DK, d = i % DK;
      qs[i] = nv_gd_load(q, qt, b * a.q[0] + t * a.q[1] + hk * a.q[2] + d * a.q[3]);
      ks[i] = nv_gd_load(k, kt, b * a.k[0] + t * a.k[1] + hk * a.k[2] + d * a.k[3]);
    }
    for (int i = threadIdx.x; i < n * rows; i += threads) {
      const i64 t = t0 + i / rows, row = first + i % rows;
      vs[i] = row < a.dv
                  ? nv_gd_load(v, vt, b * a.v[0] + t * a.v[1] + h * a.v[2] + row * a.v[3])
                  : 0.0f;
    }
    for (int i = threadIdx.x; i < n; i += threads) {
      const i64 t = t0 + i;
      gs[i] = nv_gd_load(g, gt, b * a.g[0] + t * a.g[1] + h * a.g[2]);
      bs[i] = nv_gd_load(beta, bt, b * a.beta[0] + t * a.beta[1] + h * a.beta[2]);
    }
    __syncthreads();
    if (t0 == 0) staged();

    // One step after the other (unrolling them only lengthens the code).
#pragma unroll 1
    for (int i = 0; i < n; ++i) {
      float kr[E], qr[E];
      nv_gd_take<E, P>(ks + i * DK, lane, kr);
      nv_gd_take<E, P>(qs + i * DK, lane, qr);
      const float decay = gs[i], rate = bs[i];
      // Per row: S' k and S' q; then k q. Partial sums of this lane, then the warp's.
      float sum[2 * R + 1];
#pragma unroll
      for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int e = 0; e < E; ++e) st[r][e] = __fmul_rn(st[r][e], decay);
        sum[2 * r] = nv_gd_dot<E>(st[r], kr);
        sum[2 * r + 1] = nv_gd_dot<E>(st[r], qr);
      }
      sum[2 * R] = nv_gd_dot<E>(kr, qr);
      // A butterfly: every lane ends with the same sums (each addition has the same two
      // operands in every lane, in one order or the other).
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) {
#pragma unroll
        for (int j = 0; j < 2 * R + 1; ++j)
          sum[j] = __fadd_rn(sum[j], __shfl_xor_sync(0xffffffffu, sum[j], off));
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float delta = __fmul_rn(__fsub_rn(vs[i * rows + w * R + r], sum[2 * r]), rate);
#pragma unroll
        for (int e = 0; e < E; ++e) st[r][e] = __fmaf_rn(kr[e], delta, st[r][e]);
        if (lane == r && mine + r < a.dv) {
          const float out_y = __fmaf_rn(delta, sum[2 * R], sum[2 * r + 1]);
          nv_gd_store(y, yt, y_at + r, out_y);
        }
      }
      y_at += step_rows;
      if (a.every && p.keep) {
#pragma unroll
        for (int r = 0; r < R; ++r)
          if (mine + r < a.dv) nv_gd_write<S, E>(each + r * DK, lane, st[r]);
        each += step_rows * DK;
      }
    }
  }

  if (!a.every && p.keep) {
    S* dst = out + ((p.to * a.hv + h) * a.dv + mine) * DK;
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (mine + r < a.dv) nv_gd_write<S, E>(dst + r * DK, lane, st[r]);
  }
}

// The gated delta rule over the rows of one unit a block (see the top of the file).
template <typename S, int E, int R>
__device__ __forceinline__ void nv_gated_delta(
    const void* __restrict__ q, const void* __restrict__ k, const void* __restrict__ v,
    const void* __restrict__ g, const void* __restrict__ beta, const S* state, S* out,
    void* __restrict__ y, const i32* __restrict__ slots, const NvGd& a) {
  const int rows = (blockDim.x >> 5) * R;
  const NvGdPlace p = nv_gd_place(a, slots, blockIdx.x, rows, R);
  // The state rows first: their loads are the kernel's traffic, and stay in flight while the
  // first steps are staged.
  float st[R][E];
  nv_gd_rows<S, E, R>(state, p, a, st);
  nv_gd_unit<S, E, R>(q, k, v, g, beta, out, y, a, p, st, [] {});
}

// The looping form (decoding, few steps): a grid of fewer blocks than units, each block
// taking units blockIdx.x, + gridDim.x, ...; the next unit's state rows are asked for as soon
// as this unit's steps are staged, so they are in flight while this unit computes and writes.
// The two units' rows alternate between two sets of registers (a loop of two units): copying
// the next rows into this unit's set would wait for their loads at the end of each unit, and
// the next unit's staging would then wait its own latency after that one. Each unit's
// arithmetic is nv_gated_delta's: the same bits.
template <typename S, int E, int R>
__device__ __forceinline__ void nv_gated_delta_units(
    const void* __restrict__ q, const void* __restrict__ k, const void* __restrict__ v,
    const void* __restrict__ g, const void* __restrict__ beta, const S* state, S* out,
    void* __restrict__ y, const i32* __restrict__ slots, const NvGd& a) {
  const int rows = (blockDim.x >> 5) * R;
  i64 unit = blockIdx.x;
  if (unit >= a.units) return;
  float even[R][E], odd[R][E];
  nv_gd_rows<S, E, R>(state, nv_gd_place(a, slots, unit, rows, R), a, even);
  // One unit from the rows in `st`, the next unit's asked for into `sn`; false after the last.
  auto step = [&](float (&st)[R][E], float (&sn)[R][E]) {
    const NvGdPlace p = nv_gd_place(a, slots, unit, rows, R);
    const i64 next = unit + gridDim.x;
    nv_gd_unit<S, E, R>(q, k, v, g, beta, out, y, a, p, st, [&] {
      if (next < a.units) nv_gd_rows<S, E, R>(state, nv_gd_place(a, slots, next, rows, R), a, sn);
    });
    // The staged steps are read by every warp before the next unit stages its own.
    __syncthreads();
    unit = next;
    return unit < a.units;
  };
  while (step(even, odd) && step(odd, even)) {
  }
}

// `gated_delta_<state type>_e<E>_r<R>`: Dk = 32 E, R rows a warp, at most 4 warps a block.
// No __launch_bounds__: with one, ptxas spilled a few bytes in several instantiations while
// using fewer registers than it does without (at most 96, none spilled).
#define NV_GATED_DELTA(S, sn, E, R) \
  extern "C" __global__ void gated_delta_##sn##_e##E##_r##R( \
      const void* q, const void* k, const void* v, const void* g, const void* beta, \
      const S* state, S* out, void* y, const i32* slots, NvGd a) { \
    nv_gated_delta<S, E, R>(q, k, v, g, beta, state, out, y, slots, a); } \
  extern "C" __global__ void gated_delta_units_##sn##_e##E##_r##R( \
      const void* q, const void* k, const void* v, const void* g, const void* beta, \
      const S* state, S* out, void* y, const i32* slots, NvGd a) { \
    nv_gated_delta_units<S, E, R>(q, k, v, g, beta, state, out, y, slots, a); }
