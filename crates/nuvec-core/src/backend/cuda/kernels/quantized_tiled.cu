// The quantized products for many rows of x, on the tensor cores (`quantized/tiled.rs` says
// which cases come here). Needs common.cuh and quantized.cu.
//
// A block of 8 warps computes a BM x 256 tile of y = x · wᵀ (TRANS: w is [n, k], packed along
// k) or y = x · w (w is [k, n], packed along n), 64 values of k at a time:
// - the x tile (BM x 64 values of T) and the packed tile of w (its words as they lie) go into
//   shared memory with cp.async, NVQT_STAGES - 1 tiles ahead of the one being dequantized;
// - the whole block dequantizes the packed tile, a pack of 32 values a thread, into a tile of
//   T (s · q + b as one fused multiply-add of T, rounded once), double-buffered: tile t + 1 is
//   dequantized while tile t multiplies, so each step needs one barrier;
// - the warps sit 2 (rows) x 4 (outputs); each multiplies its 16·MT x 64 piece with mma.sync
//   m16n8k16 into f32 accumulators held in registers, the fragments read with ldmatrix (the
//   weights' transposed for x · w, whose dequantized tile is k-major).
// Rows of the shared tiles are padded by 16 bytes so that the eight rows an ldmatrix reads, and
// the rows the dequantizing threads write side by side, fall in distinct banks.
//
// Rows of x may be gathered (gather_qmm): row v of the product is row v % mrows of matrix
// lhs[v / mrows] of x (row v itself without lhs), and a block multiplies rows of one matrix of
// w: mode 0, a plain product (one matrix); mode 1, the rows of index z (blockIdx.z and on) with
// matrix rhs[z] (z itself without rhs); mode 2, rows sorted by matrix, where matrix e's rows
// are [offs[e], offs[e + 1]) times mrows and blockIdx.y counts the tiles of every matrix's rows
// in turn. Indices past the end are clamped to the last matrix.
//
// B = NVQ_PLAIN (16) is gather_mm's form: w holds values of T (row stride `wrow` values,
// matrices `w_batch` words apart), no scales or biases; its tiles go by cp.async straight into
// NVQT_PLAIN_STAGES buffers of the layout the dequantized tiles have, so a step waits for its
// own tile, not the next one.

// Fixed (not a tunable of NUVEC_KERNEL_DEFINES): the host sizes the shared memory from it.
#define NVQT_STAGES 4
#define NVQT_THREADS 256
#define NVQT_BN 256
#define NVQT_BK 64
// The most matrices of w mode 2 walks (their offsets are kept in shared memory).
#define NVQT_MAX_EXPERTS 1024
// The "width" of plain (unquantized) weights, and their stages (tiles of x and w buffered).
#define NVQ_PLAIN 16
#define NVQT_PLAIN_STAGES 3

// Mirrors `TiledArgs` in `quantized/tiled.rs` (repr(C)): the 64-bit fields first.
struct NvQmm {
  i64 m;        // rows of the product (every gathered row)
  i64 n;        // outputs
  i64 w_batch;  // words between matrices of w (plain: half the values)
  i64 s_batch;  // scales (and biases) between matrices of w
  i64 xmats;    // matrices of x (gathered), for clamping lhs
  i64 experts;  // matrices of w, for clamping rhs and walking offs
  i64 indices;  // gathered index positions (m / mrows)
  i64 slots;    // mode 2: tiles blockIdx.y walks at most
  i32 k;        // the inner axis
  i32 wrow;     // words a row of w (plain: values)
  i32 groups;   // scales a row of w
  i32 gs_shift; // log2(group size / 32)
  i32 wvec;     // bytes one cp.async of packed words moves (the kernel's V; unused)
  i32 mrows;    // rows of each gathered matrix of x (m without gathering)
  i32 mode;     // 0, 1 or 2 (above)
  i32 lhs_repeat; // index positions that share one entry of lhs (0 or 1: one each)
};

// The pair type of T and the bits of 2^7 (bf16) or 2^10 (f16): OR-ing a value below 2^7 into
// its mantissa gives 2^7 + q (2^10 + q) exactly.
template <typename T> struct NvqPair;
template <> struct NvqPair<bf16> {
  typedef __nv_bfloat162 t;
  static constexpr u32 magic = 0x43004300u;
  static __device__ __forceinline__ t of(float a, float b) { return __floats2bfloat162_rn(a, b); }
};
template <> struct NvqPair<f16> {
  typedef __half2 t;
  static constexpr u32 magic = 0x64006400u;
  static __device__ __forceinline__ t of(float a, float b) { return __floats2half2_rn(a, b); }
};

template <typename P> __device__ __forceinline__ P nvq_as(u32 u) { return *reinterpret_cast<P*>(&u); }
template <typename P> __device__ __forceinline__ u32 nvq_bits(P p) { return *reinterpret_cast<u32*>(&p); }

// nuvec-emulation: device only (tests/emulation/ptx.h stands in for this region) {
template <typename T> struct NvqMma;
template <> struct NvqMma<bf16> {
  static __device__ __forceinline__ void run(float* c, const u32* a, u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                 "{%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
template <> struct NvqMma<f16> {
  static __device__ __forceinline__ void run(float* c, const u32* a, u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                 "{%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

__device__ __forceinline__ u32 nvq_smem(const void* p) { return (u32)__cvta_generic_to_shared(p); }

// V bytes from global to shared memory, or V zero bytes when !valid (nothing is read).
template <int V>
__device__ __forceinline__ void nvq_cp(void* dst, const void* src, bool valid) {
  if constexpr (V == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(nvq_smem(dst)), "l"(src),
                 "r"(valid ? 16 : 0)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(nvq_smem(dst)), "l"(src),
                 "n"(V), "r"(valid ? V : 0)
                 : "memory");
  }
}
__device__ __forceinline__ void nvq_cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void nvq_cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void nvq_ldsm4(u32* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(nvq_smem(p))
               : "memory");
}
__device__ __forceinline__ void nvq_ldsm4_t(u32* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(nvq_smem(p))
               : "memory");
}
// } nuvec-emulation

// The tile shapes: sizes in elements of T (x, dequantized w) or words (packed w).
template <typename T, int B, bool TRANS, int MT> struct NvqTile {
  static constexpr bool PLAIN = B == NVQ_PLAIN;
  static constexpr int STAGES = PLAIN ? NVQT_PLAIN_STAGES : NVQT_STAGES;
  static constexpr int BM = 32 * MT;
  static constexpr int BN = NVQT_BN;
  static constexpr int BK = NVQT_BK;
  static constexpr int XS = BK + 8;                    // x row stride
  static constexpr int WS = (TRANS ? BK : BN) + 8;     // dequantized row stride
  static constexpr int WQ_ROWS = TRANS ? BN : BK;      // packed rows a tile
  // Packed row stride: a tile row's words (8 or 2 packs), padded by 16 bytes when the packs
  // are read down the rows (x · w) so that those rows fall in distinct banks.
  static constexpr int WQS = TRANS ? 2 * B : 8 * B + 4;
  static constexpr int X_STAGE = BM * XS;
  static constexpr int WQ_STAGE = PLAIN ? 0 : WQ_ROWS * WQS;
  static constexpr int DQ = WQ_ROWS * WS;
  // Plain weights: a tile buffer a stage; packed ones: two, dequantized from the stages.
  static constexpr int DQ_BUFFERS = PLAIN ? STAGES : 2;
  static constexpr int SHARED =
      STAGES * (X_STAGE * (int)sizeof(T) + WQ_STAGE * 4) + DQ_BUFFERS * DQ * (int)sizeof(T);
};

// One pack (32 values of B bits, from shared memory) dequantized into 32 values of T at `dst`
// (16-byte aligned): s · q + b as a fused multiply-add of pairs of T, rounded once. Four bits
// take their values from each word with one mask-and-or a pair (q into the mantissa of 2^7 or
// 2^10, less that power); the other widths convert each value through f32 (exact).
template <typename T, int B>
__device__ __forceinline__ void nvq_dq_pack(const u32* src, T* dst, T s, T b) {
  typedef NvqPair<T> P;
  typedef typename P::t T2;
  u32 w[B];
  nvq_load<B>(src, w);
  T2 s2, b2;
  s2.x = s;
  s2.y = s;
  b2.x = b;
  b2.y = b;
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    u32 out[4];
    if constexpr (B == 4) {
      const T2 m2 = nvq_as<T2>(P::magic);
      const u32 x = w[c];
      // Values (0, 4), (1, 5), (2, 6), (3, 7) of the word.
      T2 v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const u32 q = ((x >> (4 * j)) & 0x000F000Fu) | P::magic;
        v[j] = __hfma2(__hsub2(nvq_as<T2>(q), m2), s2, b2);
      }
      out[0] = __byte_perm(nvq_bits(v[0]), nvq_bits(v[1]), 0x5410);
      out[1] = __byte_perm(nvq_bits(v[2]), nvq_bits(v[3]), 0x5410);
      out[2] = __byte_perm(nvq_bits(v[0]), nvq_bits(v[1]), 0x7632);
      out[3] = __byte_perm(nvq_bits(v[2]), nvq_bits(v[3]), 0x7632);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const T2 q = P::of(nvq_float(nvq_get<B>(w, 8 * c + 2 * j)), nvq_float(nvq_get<B>(w, 8 * c + 2 * j + 1)));
        out[j] = nvq_bits(__hfma2(q, s2, b2));
      }
    }
    *reinterpret_cast<uint4*>(dst + 8 * c) = make_uint4(out[0], out[1], out[2], out[3]);
  }
}

// Index `i` of an index array, clamped below `count` (or `i` itself without one).
__device__ __forceinline__ i64 nvq_index(const u32* __restrict__ idx, i64 i, i64 count) {
  if (idx == nullptr) return i;
  const i64 v = idx[i];
  return v < count ? v : count - 1;
}

// The packed tile t of w into `dst`, V bytes a copy: TRANS, rows n0.. of w and words
// 2B·t..; else rows 64·t.. of w and words (n0 / 32)·B.. Copies past the matrix are zeros.
template <int B, bool TRANS, int V>
__device__ __forceinline__ void nvq_load_w(u32* dst, const u32* __restrict__ w, const NvQmm& a, i64 n0, int t) {
  constexpr int RB = TRANS ? 8 * B : 32 * B;  // bytes a tile row
  constexpr int CPR = RB / V;                 // copies a tile row
  constexpr int ROWS = TRANS ? NVQT_BN : NVQT_BK;
  constexpr int WQS = TRANS ? 2 * B : 8 * B + 4;
  const i64 rows = TRANS ? a.n - n0 : (i64)a.k - (i64)NVQT_BK * t;
  const i64 first = TRANS ? (i64)t * 2 * B : n0 / 32 * B;  // first word of the tile in a row
  const i64 row0 = TRANS ? n0 : (i64)NVQT_BK * t;
  constexpr int COPIES = ROWS * CPR;
  // Unrolled for 16-byte copies only: the 4-byte ones are many, and their addresses would
  // otherwise stay in registers across the loop.
#pragma unroll(V == 16 ? 8 : 1)
  for (int i = 0; i < (COPIES + NVQT_THREADS - 1) / NVQT_THREADS; ++i) {
    const int u = (int)threadIdx.x + NVQT_THREADS * i;
    if (COPIES % NVQT_THREADS != 0 && u >= COPIES) break;
    const int r = u / CPR, c = u % CPR;
    const i64 word = first + c * (V / 4);
    const bool ok = r < rows && word + V / 4 <= a.wrow;
    const u32* src = ok ? w + (row0 + r) * a.wrow + word : w;
    nvq_cp<V>(dst + r * WQS + c * (V / 4), src, ok);
  }
}

// Plain tile t of w (values of T) into `dst`, in the dequantized tiles' layout: TRANS, rows
// n0.. of w and values 64·t..; else rows 64·t.. and values n0... Row lengths (k with TRANS,
// else n) are multiples of 8, so a 16-byte copy is whole or past the end (zeros).
template <typename T, bool TRANS>
__device__ __forceinline__ void nvq_load_plain(T* dst, const T* __restrict__ w, const NvQmm& a,
                                               i64 n0, int t) {
  constexpr int ROWS = TRANS ? NVQT_BN : NVQT_BK;
  constexpr int COLS = TRANS ? NVQT_BK : NVQT_BN;
  constexpr int CPR = COLS / 8;               // copies a tile row
  constexpr int RSTEP = NVQT_THREADS / CPR;   // rows between one thread's copies
  constexpr int WS = COLS + 8;
  const i64 row0 = TRANS ? n0 : (i64)NVQT_BK * t;
  const i64 col0 = TRANS ? (i64)NVQT_BK * t : n0;
  const i64 rows = TRANS ? a.n - row0 : (i64)a.k - row0;
  const i64 cols = TRANS ? (i64)a.k : a.n;
  // A thread copies one column of chunks, every RSTEP-th row: one address and one step.
  const int c = (int)threadIdx.x % CPR, r0 = (int)threadIdx.x / CPR;
  const i64 col = col0 + 8 * c;
  const T* src = w + (row0 + r0) * a.wrow + col;
  const i64 step = (i64)RSTEP * a.wrow;
  T* d = dst + r0 * WS + 8 * c;
#pragma unroll
  for (int i = 0; i < ROWS / RSTEP; ++i) {
    const bool ok = col < cols && r0 + RSTEP * i < rows;
    nvq_cp<16>(d + RSTEP * i * WS, ok ? src + i * step : w, ok);
  }
}

// One block's rows [v0, v1) of the product (with matrix w, scales and biases counted from
// their matrix) by outputs n0 .. n0 + 256.
template <typename T, int B, bool TRANS, int MT, int V>
__device__ __forceinline__ void nvq_qmm_tile(const T* __restrict__ x, const u32* __restrict__ w,
                                             const T* __restrict__ scales, const T* __restrict__ biases,
                                             T* __restrict__ y, const u32* __restrict__ lhs, const NvQmm& a,
                                             i64 v0, i64 v1, i64 n0, unsigned char* smem) {
  typedef NvqTile<T, B, TRANS, MT> S;
  constexpr int BK = S::BK, XS = S::XS, WS = S::WS, WQS = S::WQS, STAGES = S::STAGES;
  constexpr bool PLAIN = S::PLAIN;
  T* xs = reinterpret_cast<T*>(smem);
  u32* wq = reinterpret_cast<u32*>(smem + STAGES * S::X_STAGE * sizeof(T));
  T* dq = reinterpret_cast<T*>(wq + STAGES * S::WQ_STAGE);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp & 1, wn = warp >> 1;
  const int tiles = (a.k + BK - 1) / BK;

  // The rows of x this thread copies: (tid / 8) + 32 j, 8 values at column 8 (tid % 8).
  const T* xp[MT];
  bool xv[MT];
#pragma unroll
  for (int j = 0; j < MT; ++j) {
    const i64 v = v0 + (tid >> 3) + 32 * j;
    xv[j] = v < v1;
    i64 xr = 0;
    if (xv[j]) {
      xr = v;
      if (lhs != nullptr) {
        const i64 i = v / a.mrows, li = a.lhs_repeat > 1 ? i / a.lhs_repeat : i;
        xr = nvq_index(lhs, li, a.xmats) * a.mrows + (v - i * a.mrows);
      }
    }
    xp[j] = x + xr * a.k + (tid & 7) * 8;
  }

  auto load = [&](int t) {
    if (t < tiles) {
      const int stage = t % STAGES;
      const int k0 = t * BK;
      T* xd = xs + stage * S::X_STAGE + (tid >> 3) * XS + (tid & 7) * 8;
      const bool kin = k0 + (tid & 7) * 8 < a.k;
#pragma unroll
      for (int j = 0; j < MT; ++j) {
        const bool ok = xv[j] && kin;
        nvq_cp<16>(xd + 32 * j * XS, ok ? (const void*)(xp[j] + k0) : (const void*)x, ok);
      }
      if constexpr (PLAIN)
        nvq_load_plain<T, TRANS>(dq + stage * S::DQ, reinterpret_cast<const T*>(w), a, n0, t);
      else
        nvq_load_w<B, TRANS, V>(wq + stage * S::WQ_STAGE, w, a, n0, t);
    }
    nvq_cp_commit();
  };

  // This thread's two packs of each tile: TRANS, row (tid / 2) + 128 i of the tile, pack tid % 2;
  // else row tid % 64, pack (tid / 64) + 4 i. Their scales and biases are read a tile ahead.
  int pr[2], pc[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int u = tid + NVQT_THREADS * i;
    pr[i] = TRANS ? u >> 1 : u & 63;
    pc[i] = TRANS ? u & 1 : u >> 6;
  }
  T sr[2], br[2];
  auto prefetch = [&](int t) {
    if (PLAIN || t >= tiles) return;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      i64 at = -1;
      if (TRANS) {
        const i64 n = n0 + pr[i];
        const int p = 2 * t + pc[i];  // pack along k
        if (n < a.n && 32 * p < a.k) at = n * a.groups + (p >> a.gs_shift);
      } else {
        const i64 kk = (i64)BK * t + pr[i];
        const i64 p = n0 / 32 + pc[i];  // pack along n
        if (kk < a.k && 32 * p < a.n) at = kk * a.groups + (p >> a.gs_shift);
      }
      // Packs past the matrix dequantize to zeros.
      sr[i] = at >= 0 ? scales[at] : nv_down<T>(0.0f);
      br[i] = at >= 0 ? biases[at] : nv_down<T>(0.0f);
    }
  };
  auto dequant = [&](int t) {
    if constexpr (!PLAIN) {
      const u32* src = wq + (t % STAGES) * S::WQ_STAGE;
      T* dst = dq + (t & 1) * S::DQ;
#pragma unroll
      for (int i = 0; i < 2; ++i)
        nvq_dq_pack<T, B>(src + pr[i] * WQS + pc[i] * B, dst + pr[i] * WS + pc[i] * 32, sr[i], br[i]);
    }
  };

  float acc[MT][8][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;

  // ldmatrix addresses: A (x) and the transposed B (x · w) take rows (lane & 7) + 8 · bit 3 and
  // columns 8 · bit 4; B (x · wᵀ) takes rows (lane & 7) + 8 · bit 4 and columns 8 · bit 3.
  const int a_row = (lane & 7) + ((lane >> 3) & 1) * 8, a_col = (lane >> 4) * 8;
  const int b_row = (lane & 7) + (lane >> 4) * 8, b_col = ((lane >> 3) & 1) * 8;

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) load(s);
  if constexpr (!PLAIN) {
    prefetch(0);
    nvq_cp_wait<STAGES - 2>();
    __syncthreads();
    dequant(0);
    prefetch(1);
  }
  for (int t = 0; t < tiles; ++t) {
    // Packed: tile t + 1 has landed (t was dequantized a step ago); plain: tile t has. Every
    // warp is past tile t - 1, whose buffers are free again.
    if constexpr (PLAIN)
      nvq_cp_wait<STAGES - 2>();
    else
      nvq_cp_wait<STAGES - 3>();
    __syncthreads();
    load(t + STAGES - 1);
    if (!PLAIN && t + 1 < tiles) {
      dequant(t + 1);
      prefetch(t + 2);
    }
    const T* xt = xs + (t % STAGES) * S::X_STAGE + (wm * 16 * MT + a_row) * XS + a_col;
    const T* dt = dq + (PLAIN ? t % STAGES : t & 1) * S::DQ;
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      u32 af[MT][4];
#pragma unroll
      for (int mi = 0; mi < MT; ++mi) nvq_ldsm4(af[mi], xt + mi * 16 * XS + kk * 16);
#pragma unroll
      for (int nj = 0; nj < 8; nj += 2) {
        u32 bf[4];
        if (TRANS) {
          nvq_ldsm4(bf, dt + (wn * 64 + nj * 8 + b_row) * WS + kk * 16 + b_col);
        } else {
          nvq_ldsm4_t(bf, dt + (kk * 16 + a_row) * WS + wn * 64 + nj * 8 + a_col);
        }
#pragma unroll
        for (int mi = 0; mi < MT; ++mi) {
          NvqMma<T>::run(acc[mi][nj], af[mi], bf[0], bf[1]);
          NvqMma<T>::run(acc[mi][nj + 1], af[mi], bf[2], bf[3]);
        }
      }
    }
  }

  // Rows g and g + 8 of each 16, columns 2 (lane % 4) and the next.
  const int g = lane >> 2, t4 = lane & 3;
  const bool pairs = (a.n & 1) == 0;
#pragma unroll
  for (int mi = 0; mi < MT; ++mi) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const i64 v = v0 + wm * 16 * MT + mi * 16 + g + 8 * h;
      if (v >= v1) continue;
      T* yr = y + v * a.n;
#pragma unroll
      for (int nj = 0; nj < 8; ++nj) {
        const i64 c = n0 + wn * 64 + nj * 8 + 2 * t4;
        const float e0 = acc[mi][nj][2 * h], e1 = acc[mi][nj][2 * h + 1];
        if (pairs && c + 1 < a.n) {
          typename NvqPair<T>::t p;
          p.x = nv_down<T>(e0);
          p.y = nv_down<T>(e1);
          *reinterpret_cast<typename NvqPair<T>::t*>(yr + c) = p;
        } else {
          if (c < a.n) yr[c] = nv_down<T>(e0);
          if (c + 1 < a.n) yr[c + 1] = nv_down<T>(e1);
        }
      }
    }
  }
}

// The grid: blockIdx.x the outputs' tiles of 256; blockIdx.y the tiles of rows (mode 2: the
// tiles of every matrix's rows, walked); blockIdx.z the index positions (mode 1).
template <typename T, int B, bool TRANS, int MT, int V>
__device__ __forceinline__ void nvq_qmm(const T* __restrict__ x, const u32* __restrict__ w,
                                        const T* __restrict__ scales, const T* __restrict__ biases,
                                        T* __restrict__ y, const u32* __restrict__ lhs,
                                        const u32* __restrict__ rhs, const i32* __restrict__ offs,
                                        const NvQmm& a) {
  typedef NvqTile<T, B, TRANS, MT> S;
  extern __shared__ __align__(16) unsigned char nvq_smem_tiles[];
  const i64 n0 = (i64)blockIdx.x * NVQT_BN;
  if (a.mode == 0) {
    nvq_qmm_tile<T, B, TRANS, MT, V>(x, w, scales, biases, y, nullptr, a, (i64)blockIdx.y * S::BM, a.m, n0,
                                  nvq_smem_tiles);
    return;
  }
  if (a.mode == 1) {
    for (i64 z = blockIdx.z; z < a.indices; z += gridDim.z) {
      const i64 v0 = z * a.mrows + (i64)blockIdx.y * S::BM, v1 = (z + 1) * a.mrows;
      if (v0 >= v1) break;
      const i64 e = nvq_index(rhs, z, a.experts);
      nvq_qmm_tile<T, B, TRANS, MT, V>(x, w + e * a.w_batch, scales + e * a.s_batch, biases + e * a.s_batch, y,
                                    lhs, a, v0, v1, n0, nvq_smem_tiles);
      __syncthreads();
    }
    return;
  }
  // Mode 2: each matrix's run of rows, from the offsets (kept past the tiles).
  i32* so = reinterpret_cast<i32*>(nvq_smem_tiles + S::SHARED);
  const int experts = (int)a.experts;
  for (int e = threadIdx.x; e < experts; e += NVQT_THREADS) so[e] = offs[e];
  __syncthreads();
  for (i64 slot = blockIdx.y; slot < a.slots; slot += gridDim.y) {
    // Matrix e's rows are [start, end) of the index positions, each run starting where the
    // last ended (the last runs to the end, taking the clamped indices).
    i64 before = 0, start = 0, v0 = -1, v1 = 0, e = 0;
    for (int f = 0; f < experts; ++f) {
      i64 end = a.indices;
      if (f + 1 < experts) {
        const i64 o = so[f + 1];
        end = o < start ? start : (o > a.indices ? a.indices : o);
      }
      const i64 count = ((end - start) * a.mrows + S::BM - 1) / S::BM;
      if (slot < before + count) {
        v0 = start * a.mrows + (slot - before) * S::BM;
        v1 = end * a.mrows;
        e = f;
        break;
      }
      before += count;
      start = end;
    }
    if (v0 < 0) break;
    nvq_qmm_tile<T, B, TRANS, MT, V>(x, w + e * a.w_batch, scales + e * a.s_batch, biases + e * a.s_batch, y, lhs,
                                  a, v0, v1, n0, nvq_smem_tiles);
    __syncthreads();
  }
}

// One kernel: type, bits, orientation, row tiles of 16 a warp, bytes a copy of packed words
// (16, or 4 where rows of w do not start on 16 bytes: one width a kernel, since each keeps its
// copies' addresses in registers across the loop).
#define NV_QMM(T, TN, B, TRANS, MT, V)                                                          \
  extern "C" __global__ void __launch_bounds__(NVQT_THREADS, 1)                                 \
      qmm_##TN##_b##B##_t##TRANS##_m##MT##_v##V(const T* x, const u32* w, const T* s, const T* b, \
                                                T* y, const u32* lhs, const u32* rhs,           \
                                                const i32* offs, NvQmm a) {                     \
    nvq_qmm<T, B, (bool)TRANS, MT, V>(x, w, s, b, y, lhs, rhs, offs, a);                        \
  }
