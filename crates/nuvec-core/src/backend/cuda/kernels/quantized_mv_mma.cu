// The quantized product y = x · wᵀ for up to 8 rows of x (decoding) on the tensor cores
// (mma.sync m16n8k16, f32 accumulation), 4-bit weights in MLX's affine layout (quantized.cu
// describes it), f16 and bf16. `quantized/mv_mma.rs` says which cases come here. Needs
// common.cuh only.
//
// Why: the CUDA-core kernel (`nvq_qmv`) spends about five and a half instructions on each
// weight (extract the nibble, make it a float, subtract, multiply-add: ptxas's SASS), which at
// the H200's issue rate takes as long as reading the weights; here a weight costs about three
// (385 SASS instructions a warp's chunk at R = 2: a mask-and-or gives two weights at once as a
// pair of T, one subtraction and one fused multiply-add of pairs scale and bias it) and the
// products go to the tensor cores, whose n = 8 columns hold up to 8 rows of x at no extra cost.
//
// - A warp takes R tiles of 16 rows of w (the m16 of the product: lane (g, t) =
//   (lane / 4, lane % 4) holds rows g and g + 8 of each), which share its x fragments; a
//   block of 8 warps takes 8 / S such warps' rows by S slices of k. Slice s takes the chunks
//   of 128 values s, s + S, ... and the slices' sums meet in shared memory at the end, in a
//   fixed order (no atomics: the same result on every run). R and S are template arguments
//   (the host picks among the instantiated pairs and sizes the grid from them).
// - In a chunk, lane t reads pack 4c + t (16 bytes, 32 values) of each of its rows:
//   four words, each giving four pairs, nibbles (j, j + 4) of the word for j < 4 (a shift and
//   one mask-and-or into the mantissas of 2^7 (bf16) or 2^10 (f16), exact), so that the
//   chunk's 8 products take those pairs in place of consecutive values. The sum over k does
//   not depend on the order of k, so x's B fragments take the same pairs of x's values
//   (a byte permutation a pair, from the lane's own pack of its row of x): no shuffle moves
//   a weight.
// - Each pair becomes s · q + b in T, rounded once (a fused multiply-add of pairs), as in the
//   tiled kernels; the accumulators stay in f32.
// - Lanes whose column g of x lies past m, and packs past k, read nothing and give zeros.
//
// Knobs (`NUVEC_KERNEL_DEFINES`): NVQM_UNROLL (chunks a warp's loop unrolls, so that their
// loads are in flight together: 4 read `qmv_14336x4096` at 2,368 GB/s on the H200, 2 at
// 2,306), NVQM_MINB (blocks a multiprocessor the register budget aims at) and NVQM_AHEAD
// (below).
//
// Loads in flight: at 128 registers a thread ptxas issues a chunk's loads while the chunk
// before finishes its products (SASS), so a warp keeps one to two chunks of its rows (2 to 3
// KB) on their way; at the H200's bandwidth and latency a multiprocessor needs about 50 KB in
// flight, its 16 warps hold half that. NVQM_AHEAD = d > 0 has each warp ask L1 for its rows'
// packs d chunks ahead of the one it loads (a prefetch a row from the lane that reads the
// row's first pack: no register waits on it), so d more chunks a warp are on their way.

#define NVQM_WARPS 8
#ifndef NVQM_UNROLL
#define NVQM_UNROLL 4
#endif
#ifndef NVQM_MINB
#define NVQM_MINB 2
#endif
#ifndef NVQM_AHEAD
#define NVQM_AHEAD 0
#endif
#define NVQM_STR(x) #x
#define NVQM_PRAGMA(x) _Pragma(NVQM_STR(x))

// Mirrors `MmaArgs` in `quantized/mv_mma.rs` (repr(C)).
struct NvQmvMma {
  i64 n;        // rows of w (outputs per row of x)
  i64 m;        // rows of x
  i32 packs;    // packs a row of w (k / 32)
  i32 groups;   // groups a row of w
  i32 gs_shift; // log2(group size / 32)
  // 0x000F000F, the low nibble of each half: from the arguments so that it stays in one
  // register (as a literal, ptxas materialised it again before each of the 32 uses a chunk).
  u32 nibbles;
};

// nuvec-emulation: device only (tests/emulation/ptx.h stands in for this region) {
// C += A · B, m16n8k16, row.col, f32 accumulation.
template <typename T>
__device__ __forceinline__ void nvqm_mma(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1);
template <>
__device__ __forceinline__ void nvqm_mma<bf16>(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
               "{%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void nvqm_mma<f16>(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
               "{%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// } nuvec-emulation

// Per type: the pair type and 2^7 (bf16) or 2^10 (f16) in both halves (OR-ing a nibble into
// the mantissa gives 2^7 + q or 2^10 + q exactly).
template <typename T> struct NvqmT;
template <> struct NvqmT<bf16> {
  typedef __nv_bfloat162 P;
  static constexpr u32 magic = 0x43004300u;
};
template <> struct NvqmT<f16> {
  typedef __half2 P;
  static constexpr u32 magic = 0x64006400u;
};

// Nibbles j and j + 4 of `word` (j < 4) as s · q + b, a pair of T (low half: nibble j);
// `nibbles` is 0x000F000F.
template <typename T>
__device__ __forceinline__ u32 nvqm_pair(u32 word, int j, u32 nibbles, u32 s2, u32 b2) {
  typedef typename NvqmT<T>::P P;
  constexpr u32 M = NvqmT<T>::magic;
  u32 q = ((word >> (4 * j)) & nibbles) | M;
  u32 m = M;
  const P d = __hsub2(*reinterpret_cast<P*>(&q), *reinterpret_cast<P*>(&m));
  const P r = __hfma2(d, *reinterpret_cast<const P*>(&s2), *reinterpret_cast<const P*>(&b2));
  return *reinterpret_cast<const u32*>(&r);
}

// Word i of a pack.
__device__ __forceinline__ u32 nvqm_word(const uint4& v, int i) {
  return i == 0 ? v.x : (i == 1 ? v.y : (i == 2 ? v.z : v.w));
}

// A lane's pack of a row of x (32 values, 16 words): pack `pack` of the row at `row`, or zeros
// where not `valid`.
__device__ __forceinline__ void nvqm_xload(u32 (&xw)[16], const uint4* row, int pack, bool valid) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint4 v = valid ? row[4 * pack + i] : make_uint4(0u, 0u, 0u, 0u);
    xw[4 * i] = v.x;
    xw[4 * i + 1] = v.y;
    xw[4 * i + 2] = v.z;
    xw[4 * i + 3] = v.w;
  }
}

// Values j and j + 4 of word i of a pack of x (16 words, two values a word, the lower first)
// as a pair: the B operand matching `nvqm_pair` of word i.
__device__ __forceinline__ u32 nvqm_xpair(const u32 (&xw)[16], int i, int j) {
  return __byte_perm(xw[4 * i + j / 2], xw[4 * i + 2 + j / 2], (j & 1) ? 0x7632u : 0x5410u);
}

// The products of a warp's slice of k (chunks slice, slice + S, ...) for its R tiles of 16
// rows of one matrix of w from row n0 (`w`, `scales` and `biases` at that matrix; rows past
// n read the last row), with its lanes' column of x: the row at `xr` (null: zeros).
template <typename T, int R, int S>
__device__ __forceinline__ void nvqm_sums(const uint4* __restrict__ w,
                                          const u16* __restrict__ scales,
                                          const u16* __restrict__ biases,
                                          const uint4* __restrict__ xr,
                                          i64 n, i64 n0, int packs, int groups, int gs_shift,
                                          u32 nib, int slice, float (&c)[R][4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  // The lane's rows: g + 8 h of each m16 tile, h < 2, their packed words and their scales
  // and biases (the bits of T).
  const uint4* wr[2 * R];
  const u16 *sr[2 * R], *br[2 * R];
#pragma unroll
  for (int h = 0; h < 2 * R; ++h) {
    const i64 row = min(n0 + g + 8 * h, n - 1);
    wr[h] = w + row * packs;
    sr[h] = scales + row * groups;
    br[h] = biases + row * groups;
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int e = 0; e < 4; ++e) c[r][e] = 0.0f;
  const int chunks = (packs + 3) >> 2;
  // The L1 requests (NVQM_AHEAD): chunk c's pack of each row, from lane t = 0 of each row.
  auto ask = [&](int c) {
    if (NVQM_AHEAD > 0 && t == 0 && c < chunks) {
#pragma unroll
      for (int h = 0; h < 2 * R; ++h) nv_l1_prefetch(wr[h] + 4 * c);
    }
  };
#pragma unroll
  for (int d = 1; d < NVQM_AHEAD; ++d) ask(slice + d * S);
  NVQM_PRAGMA(unroll NVQM_UNROLL)
  for (int ch = slice; ch < chunks; ch += S) {
    ask(ch + NVQM_AHEAD * S);
    const int p = 4 * ch + t;
    const bool pin = p < packs;
    const int pc = pin ? p : packs - 1;
    const int gi = pc >> gs_shift;
    uint4 q[2 * R];
    u32 s2[2 * R], b2[2 * R];
#pragma unroll
    for (int h = 0; h < 2 * R; ++h) q[h] = wr[h][pc];
    // Scales and biases in both halves; zeros past k (weights 0 there).
#pragma unroll
    for (int h = 0; h < 2 * R; ++h) {
      const u32 sv = pin ? (u32)sr[h][gi] : 0u, bv = pin ? (u32)br[h][gi] : 0u;
      s2[h] = sv | (sv << 16);
      b2[h] = bv | (bv << 16);
    }
    u32 xw[16];
    nvqm_xload(xw, xr, p, xr != nullptr && pin);
#pragma unroll
    for (int step = 0; step < 8; ++step) {
      const int i = step >> 1, j = (step & 1) * 2;
      const u32 b0 = nvqm_xpair(xw, i, j), b1 = nvqm_xpair(xw, i, j + 1);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const u32 wa = nvqm_word(q[2 * r], i), wb = nvqm_word(q[2 * r + 1], i);
        const u32 frag[4] = {nvqm_pair<T>(wa, j, nib, s2[2 * r], b2[2 * r]),
                             nvqm_pair<T>(wb, j, nib, s2[2 * r + 1], b2[2 * r + 1]),
                             nvqm_pair<T>(wa, j + 1, nib, s2[2 * r], b2[2 * r]),
                             nvqm_pair<T>(wb, j + 1, nib, s2[2 * r + 1], b2[2 * r + 1])};
        nvqm_mma<T>(c[r], frag, b0, b1);
      }
    }
  }
}

// The slices' sums of each warp's tiles meet in `sums` (the block's shared array), added in
// slice order by the first slice's warp, which passes each to `store(row, column, value)`:
// row 16 r + g (+ 8) of the warp's rows of w, column 2t (+ 1) of its 8 rows of x. Every thread
// of the block calls it; `sums` is free again when it returns.
template <int R, int S, typename Store>
__device__ __forceinline__ void nvqm_meet(float (*sums)[R][4][32], const float (&c)[R][4],
                                          Store store) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int e = 0; e < 4; ++e) sums[warp][r][e][lane] = c[r][e];
  __syncthreads();
  if (warp % S == 0) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float v = c[r][e];
        for (int s = 1; s < S; ++s) v += sums[warp + s][r][e][lane];
        store(16 * r + g + 8 * (e >> 1), 2 * t + (e & 1), v);
      }
    }
  }
  __syncthreads();
}

template <typename T, int R, int S>
__device__ __forceinline__ void nvqm_qmv(const T* __restrict__ x, const u32* __restrict__ w,
                                         const T* __restrict__ scales, const T* __restrict__ biases,
                                         T* __restrict__ y, const NvQmvMma& a) {
  static_assert(NVQM_WARPS % S == 0, "whole tiles a block");
  __shared__ float sums[NVQM_WARPS][R][4][32];
  const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2;
  const i64 n0 = ((i64)blockIdx.x * (NVQM_WARPS / S) + warp / S) * 16 * R;
  const i64 m0 = (i64)blockIdx.z * 8;
  // The lane's column of the product: row m0 + g of x.
  const uint4* xr =
      m0 + g < a.m ? reinterpret_cast<const uint4*>(x + (m0 + g) * (i64)a.packs * 32) : nullptr;
  float c[R][4];
  nvqm_sums<T, R, S>(reinterpret_cast<const uint4*>(w), reinterpret_cast<const u16*>(scales),
                     reinterpret_cast<const u16*>(biases), xr, a.n, n0, a.packs, a.groups,
                     a.gs_shift, a.nibbles, warp % S, c);
  nvqm_meet<R, S>(sums, c, [&](int row, int col, float v) {
    if (n0 + row < a.n && m0 + col < a.m) y[(m0 + col) * a.n + n0 + row] = nv_down<T>(v);
  });
}

// `qmv_mma_<type>_r<R>_s<S>`: the product for 4-bit weights, 16 R (8 / S) rows of w and 8
// rows of x a block (along x and z).
#define NV_QMV_MMA(T, TN, R, S)                                                                    \
  extern "C" __global__ void __launch_bounds__(NVQM_WARPS * 32, NVQM_MINB)                         \
      qmv_mma_##TN##_r##R##_s##S(const T* x, const u32* w, const T* s, const T* b, T* y,          \
                                 NvQmvMma a) {                                                     \
    nvqm_qmv<T, R, S>(x, w, s, b, y, a);                                                           \
  }
