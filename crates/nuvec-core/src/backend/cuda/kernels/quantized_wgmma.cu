// The quantized product y = x · wᵀ for many rows of x on Hopper's warpgroup tensor cores
// (wgmma, compiled for sm_90a), 4-bit weights in MLX's affine layout (quantized.cu describes
// it: 8 values a u32 word, value j of a word in bits 4j.., a scale and a bias of T a group).
// `quantized/wgmma.rs` says which cases come here. Needs common.cuh and bulk.cuh (the
// barriers and tensor copies) first.
//
// A tile is the transposed Yᵀ = W · Xᵀ for BN = 128 rows of w (outputs n) by BX rows of x
// (BX = 128 or 256), 64 values of k a step, so that the weights are wgmma's A operand, which
// it takes from registers: nothing dequantized ever goes through shared memory. A block has
// three warpgroups: one loads, two multiply.
// - One thread of the producer warpgroup moves each step's tile of x (BX rows × 64 values in
//   the 128-byte swizzle wgmma reads: 16-byte chunk c of row r at chunk c ^ (r mod 8)) and
//   packed tile of w (128 rows × 8 words, rows packed) into a ring of S stages with TMA, which
//   fills rows past m and n and values past k with zeros (zero rows of x add nothing). A
//   stage's `full` barrier completes when its bytes have landed, its `free` barrier when the
//   eight consumer warps have retired the products that read it. The producer gives most of
//   its registers to the consumers (setmaxnreg).
// - Each consumer warpgroup owns 64 of the 128 rows of w and all BX rows of x, and waits only
//   on the stages it reads. A thread holds, for each k16 sub-step, the m16n8k16-style A
//   fragment of its warp's 16 rows: rows g and g + 8 (g = lane / 4), values 2t, 2t + 1 and
//   8 + 2t, 9 + 2t (t = lane % 4) of the 16, which are byte t of two consecutive packed words
//   of each row. Each byte becomes one pair of T: its two nibbles are moved to bits 0 and 16
//   (the byte times 0x1001, masked), OR-ed into the mantissas of 2^7 (bf16) or 2^10 (f16),
//   that constant is subtracted (exact) and s · q + b is one fused multiply-add of T pairs
//   (each weight rounded once to T).
// - x's rows are wgmma's B, K-major (no transpose), through a descriptor: start at the stage
//   plus 32 bytes a k16 sub-step, 1,024 bytes between groups of 8 rows, 128-byte swizzle.
// - f32 accumulators, 64 x BX a warpgroup (BX / 2 registers a thread); a step's products stay
//   in flight while the next step's weights are dequantized, the A fragments double buffered
//   for it. The accumulators go through shared memory (row m, column n) so that y's rows are
//   written 16 bytes at a time.
// - Stream-K (SK, a template argument): a grid of about one block a multiprocessor walks the
//   tiles' units of work (pairs of steps along k, tile after tile, n fastest) in equal
//   shares, so that no last wave leaves multiprocessors idle. A block takes the pieces of its
//   share from the last tile to the first, so a tile cut between blocks is finished by the
//   last of them (the owner), which reaches it last in its share, while each earlier one
//   takes its piece first, writes its f32 sums to its slot of `a.part` and raises its flag.
//   The owner waits on those flags and adds the slots in block order (no float atomics: the
//   same result on every run), then stores. A block waits only on blocks before it, which
//   start before it does, so the walk cannot wait on a block that never starts. The flags
//   (the stream's counters, `Place::zeroed_counters`) are zero at the launch, and the owner
//   sets each it waited on back to zero. Without SK, a block takes its own tile whole.
//
// History, on an H100 at `qmm_512x14336x4096` (cuBLAS's bf16 product: 637-664 TFLOP/s):
// - A first form had every thread load (cp.async) and multiply, with a block barrier a step:
//   441 TFLOP/s; ncu put its multiprocessor at 46% busy, mostly waiting. This form: 563-600.
// - Blocks of 256 rows of w by 128 of x in that form (less read from L2 a step): 290-345.
// - Stream-K: 566-575 against 563-574 at 512 rows (224 tiles), 617 against 566-569 at 1,024.
//
// Knobs: BX and S are template arguments (the host picks among the instantiated pairs and
// sizes the shared memory from them); BN, BK and the thread count are fixed.

#define NVQW_THREADS 384
#define NVQW_BN 128
#define NVQW_BK 64
// Whether a step issues each k16 sub-step's product as soon as its fragment is made, each
// behind its own fence (1), or makes all four fragments first, one fence before the four
// products (0, the form of the figures above). On an H100, in alternation: 582-583 and 628
// TFLOP/s at 512 and 1,024 rows against 569-583 and 617-623; `NUVEC_KERNEL_DEFINES` sets it.
#ifndef NVQW_INTERLEAVE
#define NVQW_INTERLEAVE 1
#endif

// Mirrors `WgArgs` in `quantized/wgmma.rs` (repr(C)).
struct NvQw {
  i64 m;         // rows of x and y
  i64 n;         // rows of w, columns of y
  i32 k;         // the inner axis (a multiple of 32)
  i32 wrow;      // words a row of w (k / 8)
  i32 groups;    // scales (and biases) a row of w
  i32 gs_shift;  // log2(group size / 32)
  // 0x000F000F, the low nibble of each half: from the arguments so that it stays in one
  // register (as a literal, ptxas materialised it again before most of its uses).
  u32 nibbles;
  // Tiles along n; the stream-K walk's units (pairs of steps) in all, and its partial sums'
  // slots and flags.
  i32 tiles_n;
  i64 units;
  float* part;
  u32* flags;
};

// nuvec-emulation: device only (tests/emulation/ptx.h stands in for this region) {
// The register lists of the accumulators (64 and 128 of them), for the inline PTX.
#define NVQW_D64 \
  "{" \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63" \
  "}"
#define NVQW_D128 \
  "{" \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127" \
  "}"
#define NVQW_F8(i)                                                                                 \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define NVQW_F32(i) NVQW_F8(i), NVQW_F8(i + 8), NVQW_F8(i + 16), NVQW_F8(i + 24)

// D += A · B, m64nNk16, f32 accumulation, A (four registers a thread) from registers, B
// K-major from shared memory (the last operand, 0: no transpose); the predicate p (always
// true) keeps D. Written out per type and N: inline PTX names every accumulator.
#define NVQW_RS(TN, PT)                                                                           \
  __device__ __forceinline__ void nvqw_rs_##TN##_n128(float* d, const u32* a, u64 b) {           \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                        \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." PT "." PT " " NVQW_D64            \
                 ", {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"                                  \
                 : NVQW_F32(0), NVQW_F32(32)                                                      \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));                           \
  }                                                                                               \
  __device__ __forceinline__ void nvqw_rs_##TN##_n256(float* d, const u32* a, u64 b) {           \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                        \
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32." PT "." PT " " NVQW_D128           \
                 ", {%128, %129, %130, %131}, %132, p, 1, 1, 0;\n}\n"                             \
                 : NVQW_F32(0), NVQW_F32(32), NVQW_F32(64), NVQW_F32(96)                          \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));                           \
  }
NVQW_RS(bf16, "bf16")
NVQW_RS(f16, "f16")

// Per type: the products by N, the pair type and the bits of 2^7 (bf16) or 2^10 (f16) in both
// halves (OR-ing a nibble into the mantissa gives 2^7 + q or 2^10 + q exactly).
template <typename T> struct NvqwT;
template <> struct NvqwT<bf16> {
  typedef __nv_bfloat162 P;
  static constexpr u32 magic = 0x43004300u;
  template <int N> static __device__ __forceinline__ void rs(float* d, const u32* a, u64 b) {
    if (N == 128) nvqw_rs_bf16_n128(d, a, b);
    else nvqw_rs_bf16_n256(d, a, b);
  }
};
template <> struct NvqwT<f16> {
  typedef __half2 P;
  static constexpr u32 magic = 0x64006400u;
  template <int N> static __device__ __forceinline__ void rs(float* d, const u32* a, u64 b) {
    if (N == 128) nvqw_rs_f16_n128(d, a, b);
    else nvqw_rs_f16_n256(d, a, b);
  }
};

template <typename P> __device__ __forceinline__ P nvqw_as(u32 u) { return *reinterpret_cast<P*>(&u); }
template <typename P> __device__ __forceinline__ u32 nvqw_bits(P p) { return *reinterpret_cast<u32*>(&p); }

__device__ __forceinline__ u32 nvqw_smem(const void* p) { return (u32)__cvta_generic_to_shared(p); }

// The descriptor of a 128-byte swizzled operand at shared address `addr`: `lbo` and `sbo`
// bytes (the latter between groups of 8 rows).
__device__ __forceinline__ u64 nvqw_desc(u32 addr, u32 lbo, u32 sbo) {
  return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(lbo >> 4) << 16) | ((u64)(sbo >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ void nvqw_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void nvqw_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void nvqw_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accesses of registers a product in flight reads or writes
// across the wgmma instructions (it does not know they are asynchronous): the accumulators,
// and the A fragments until the wait that retires their product.
template <int N> __device__ __forceinline__ void nvqw_pin(float* r) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
__device__ __forceinline__ void nvqw_pin_frags(u32 (&a)[4][4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(a[i][j])::"memory");
}
// The two consumer warpgroups' barrier (named barrier 1; 0 is __syncthreads').
__device__ __forceinline__ void nvqw_consumers_sync() { asm volatile("bar.sync 1, 256;\n" ::: "memory"); }
// A partial sum to its slot and back, through L2 (another multiprocessor reads it).
__device__ __forceinline__ void nvqw_part_store(float* p, float v) { __stcg(p, v); }
__device__ __forceinline__ float nvqw_part_load(const float* p) { return __ldcg(p); }
// A block's flag raised after its slot's stores (each storing thread fenced them and the
// consumers met at a barrier), and waited for before the owner's loads.
__device__ __forceinline__ void nvqw_flag_raise(u32* f) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(f), "r"(1u) : "memory");
}
__device__ __forceinline__ void nvqw_flag_wait(const u32* f) {
  u32 v = 0;
  do {
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(f) : "memory");
  } while (v == 0);
}
__device__ __forceinline__ void nvqw_flag_clear(u32* f) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;\n" ::"l"(f), "r"(0u) : "memory");
}
__device__ __forceinline__ void nvqw_fence_gpu() { __threadfence(); }
// } nuvec-emulation

// Byte t of `word` (selected by `sel`) as a pair of T: s · q + b for its low and high nibble,
// low in the low half; `s2` and `b2` hold the scale and the bias in both halves, `nibbles` is
// 0x000F000F.
template <typename T>
__device__ __forceinline__ u32 nvqw_pair(u32 word, u32 sel, u32 nibbles, u32 s2, u32 b2) {
  typedef typename NvqwT<T>::P P;
  constexpr u32 M = NvqwT<T>::magic;
  const u32 q = ((__byte_perm(word, 0u, sel) * 0x1001u) & nibbles) | M;
  return nvqw_bits(__hfma2(__hsub2(nvqw_as<P>(q), nvqw_as<P>(M)), nvqw_as<P>(s2), nvqw_as<P>(b2)));
}

// A step's scales and biases for the thread's two rows (index r) and the step's two packs of
// 32 values (index h), each value in both halves of a word.
struct NvqwScales {
  u32 s[2][2], b[2][2];
};

// A thread's two rows of w (r0 and r0 + 8 of the block's 128; the m16n8k16 A layout): where
// their scales start, a step's scales and biases, and a step's A fragments from the packed
// words in shared memory.
template <typename T, bool G32> struct NvqwRows {
  const u16* sc;
  const u16* bc;
  int srow[2];  // the first scale of each row
  int r0, k, gs_shift;
  u32 sel;  // byte t4 of a word, then zeros
  u32 nib;
  // Rows past n read row n - 1's scales (their outputs are never written), so only the packs
  // past k (the padding step's, a half step's) are guarded, alike for the whole block, and
  // take zeros; a row's offset is computed once, in 32 bits (the host checks n · groups <
  // 2^31).
  __device__ __forceinline__ NvqwRows(const T* scales, const T* biases, const NvQw& a, i64 n0, int r0_,
                                      int t4)
      : sc(reinterpret_cast<const u16*>(scales)), bc(reinterpret_cast<const u16*>(biases)), r0(r0_),
        k(a.k), gs_shift(a.gs_shift), sel((u32)t4 | 0x4440u), nib(a.nibbles) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const i64 row = n0 + r0 + 8 * r;
      srow[r] = (int)(row < a.n ? row : a.n - 1) * a.groups;
    }
  }
  // Step t's scales and biases.
  __device__ __forceinline__ void scales(NvqwScales& o, int t) const {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int p = 2 * t + h;  // pack of 32 along k
      // Both packs of a step share a group past groups of 32 (k, a multiple of the group,
      // has no half step then). G32 is a template argument so that neither form branches.
      const bool again = h == 1 && !G32;
      const bool ok = 32 * p < k;
      const int gi = G32 ? p : p >> gs_shift;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        if (again) {
          o.s[r][1] = o.s[r][0];
          o.b[r][1] = o.b[r][0];
        } else {
          const u32 s = ok ? (u32)sc[srow[r] + gi] : 0u;
          const u32 b = ok ? (u32)bc[srow[r] + gi] : 0u;
          o.s[r][h] = s * 0x10001u;  // the value in both halves
          o.b[r][h] = b * 0x10001u;
        }
      }
    }
  }
  // A step's fragments from its packed tile `wt` (WQ words between rows), scales `s`.
  // `ready(kk)` runs once sub-step kk's fragment is made (NVQW_INTERLEAVE issues its product
  // there).
  template <int WQ, typename Ready>
  __device__ __forceinline__ void frags(u32 (&cur)[4][4], const u32* wt, const NvqwScales& s, Ready ready) const {
    const uint4 a0 = *reinterpret_cast<const uint4*>(wt + r0 * WQ);
    const uint4 a1 = *reinterpret_cast<const uint4*>(wt + r0 * WQ + 4);
    const uint4 b0 = *reinterpret_cast<const uint4*>(wt + (r0 + 8) * WQ);
    const uint4 b1 = *reinterpret_cast<const uint4*>(wt + (r0 + 8) * WQ + 4);
    const u32 u[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
    const u32 v[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const int h = kk >> 1;  // the pack of 32 the sub-step's 16 values lie in
      cur[kk][0] = nvqw_pair<T>(u[2 * kk], sel, nib, s.s[0][h], s.b[0][h]);
      cur[kk][1] = nvqw_pair<T>(v[2 * kk], sel, nib, s.s[1][h], s.b[1][h]);
      cur[kk][2] = nvqw_pair<T>(u[2 * kk + 1], sel, nib, s.s[0][h], s.b[0][h]);
      cur[kk][3] = nvqw_pair<T>(v[2 * kk + 1], sel, nib, s.s[1][h], s.b[1][h]);
      ready(kk);
    }
  }
};

// The tile of y through shared memory `smem` (row m of x, column n of w), by `threads`
// threads of which this is `tid`; `sync` is a barrier of those threads, called before the
// staging is written (the caller's products are retired, its stages no longer read) and
// after. Accumulator 4j + e is row r0 (e < 2) or r0 + 8 of w and column 8j + 2 t4 + e % 2 of
// the block's rows of x.
template <typename T, int BX, int THREADS, typename Sync>
__device__ __forceinline__ void nvqw_store(const float* acc, unsigned char* smem, T* __restrict__ y, i64 m,
                                           i64 n, i64 m0, i64 n0, int r0, int t4, int tid, Sync sync) {
  constexpr int OS = NVQW_BN + 8;  // row stride of the staging (elements)
  sync();
  T* ot = reinterpret_cast<T*>(smem);
#pragma unroll
  for (int j = 0; j < BX / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int mm = 8 * j + 2 * t4 + (e & 1), nn = e < 2 ? r0 : r0 + 8;
      ot[mm * OS + nn] = nv_down<T>(acc[4 * j + e]);
    }
  }
  sync();
  const bool vec = (n & 7) == 0;
#pragma unroll 4
  for (int i = 0; i < BX * 16 / THREADS; ++i) {
    const int u = tid + THREADS * i;
    const int r = u >> 4, c = (u & 15) * 8;
    const i64 row = m0 + r, col = n0 + c;
    if (row >= m || col >= n) continue;
    const T* src = ot + r * OS + c;
    T* dst = y + row * n + col;
    if (vec && col + 8 <= n) {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
    } else {
      for (int e = 0; e < 8 && col + e < n; ++e) dst[e] = src[e];
    }
  }
}

// The shared memory of one block: S stages of x then S stages of packed w, from a
// 1,024-aligned start (the host adds 1,024 bytes for the alignment), then the barriers.
template <int BX, int S> struct NvqwShape {
  static constexpr int XSTAGE = BX * 128;
  static constexpr int WSTAGE = NVQW_BN * 32;
  static constexpr int BARS = S * (XSTAGE + WSTAGE);
  static constexpr int SHARED = BARS + 16 * S;
  // Stream-K's staging, after the barriers (16-byte aligned), and its end.
  static constexpr int SHARED_SK_STAGING = (SHARED + 15) & ~15;
  static constexpr int STAGING = BX * (NVQW_BN + 8) * 2;
  static constexpr int SHARED_SK = SHARED_SK_STAGING + STAGING;
  static_assert(STAGING <= BARS, "the output staging fits the stages");
  static_assert(S >= 2, "a stage being multiplied, one loading");
};

// One piece of a block's walk: tile number `tile` at (n0, m0), units [u0, u1) of its `per`
// (pairs of steps).
struct NvqwSeg {
  i64 tile, n0, m0;
  int u0, u1;
};

// The pieces a block takes, in order (the producer and the consumers walk alike): with SK,
// units [c U / G, (c + 1) U / G) of all U for block c of G, tile by tile from the last; else
// its own tile whole.
template <bool SK, int BX> struct NvqwWalk {
  i64 begin, u;
  int per, tiles_n;
  __device__ __forceinline__ NvqwWalk(const NvQw& a, int per_) : per(per_), tiles_n(a.tiles_n) {
    if (SK) {
      begin = start(a, blockIdx.x);
      u = start(a, blockIdx.x + 1);
    } else {
      begin = ((i64)blockIdx.y * gridDim.x + blockIdx.x) * per;
      u = begin + per;
    }
  }
  static __device__ __forceinline__ i64 start(const NvQw& a, i64 c) { return c * a.units / gridDim.x; }
  __device__ __forceinline__ bool next(NvqwSeg& s) {
    if (u <= begin) return false;
    const i64 tile = (u - 1) / per, first = tile * per;
    s.tile = tile;
    s.u0 = (int)(begin > first ? begin - first : 0);
    s.u1 = (int)(u - first);
    s.n0 = (tile % tiles_n) * NVQW_BN;
    s.m0 = (tile / tiles_n) * BX;
    u = first + s.u0;
    return true;
  }
};

template <typename T, int BX, int S, bool G32, bool SK>
__device__ __forceinline__ void nvqw_qmm(const NvTmap* xm, const NvTmap* wm, const T* __restrict__ scales,
                                         const T* __restrict__ biases, T* __restrict__ y, const NvQw& a) {
  typedef NvqwShape<BX, S> Sh;
  constexpr int ACC = BX / 2;  // accumulators a thread: BX / 8 tiles of 8 columns, 4 each
  extern __shared__ __align__(16) unsigned char nvqw_raw[];
  unsigned char* smem;
  {
    const u32 raw = nvqw_smem(nvqw_raw);
    smem = nvqw_raw + (((raw + 1023) & ~1023u) - raw);
  }
  const u32 xs = nvqw_smem(smem);
  const u32 wsa = xs + S * Sh::XSTAGE;
  const u32* ws = reinterpret_cast<const u32*>(smem + S * Sh::XSTAGE);
  const u32 bars = xs + Sh::BARS;
  auto full = [&](int s) { return bars + 8 * s; };
  auto freed = [&](int s) { return bars + 8 * (S + s); };

  const i64 m = a.m, n = a.n;
  // Steps run in pairs (the two A buffers alternate): an odd count gets one more step, of
  // zeros (TMA fills the values past k). A lone last step would make ptxas serialize every
  // product (its registers are allocated apart from the loop's, and the copies between read
  // accumulators in flight). A unit of the walk is a pair.
  const int per = (((a.k + NVQW_BK - 1) / NVQW_BK) + 1) >> 1;
  const int wg = threadIdx.x >> 7;

  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      nv_bar_init(full(s), 1);
      nv_bar_init(freed(s), 8);  // lane 0 of each consumer warp
    }
    nv_bar_init_fence();
  }
  __syncthreads();

  // The block's steps, counted over its whole walk as `it`, use stage it % S in phase
  // (it / S) & 1, for the producer and the consumers alike.
  if (wg == 0) {
// nuvec-emulation: device only (a hint, nothing to stand in for) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n");
// } nuvec-emulation
    if (threadIdx.x == 0) {
      NvqwWalk<SK, BX> walk(a, per);
      NvqwSeg seg;
      u32 it = 0;
      while (walk.next(seg)) {
        for (int t = 2 * seg.u0; t < 2 * seg.u1; ++t, ++it) {
          const int s = (int)(it % S);
          if (it >= S) nv_bar_wait(freed(s), ((it / S) & 1) ^ 1u);
          nv_bar_expect(full(s), Sh::XSTAGE + Sh::WSTAGE);
          nv_tma2(xs + s * Sh::XSTAGE, xm, t * NVQW_BK, (int)seg.m0, full(s));
          nv_tma2(wsa + s * Sh::WSTAGE, wm, t * (NVQW_BK / 8), (int)seg.n0, full(s));
        }
      }
    }
    return;
  }
// nuvec-emulation: device only (a hint, nothing to stand in for) {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");
// } nuvec-emulation

  const int tid = threadIdx.x - 128, lane = tid & 31;
  const int w4 = (tid >> 5) & 3, g = lane >> 2, t4 = lane & 3;
  const bool lead = lane == 0;
  // The thread's two rows of the block's 128 rows of w.
  const int r0 = (tid >> 7) * 64 + w4 * 16 + g;
  // The staging of the stores: past the stages and the barriers with SK (the producer is
  // already loading the next piece's stages), over the stages without (nothing is loading).
  unsigned char* staging = smem + (SK ? Sh::SHARED_SK_STAGING : 0);

  float acc[ACC];
  u32 fa[4][4], fb[4][4];
  NvqwScales sa, sb;
  NvqwWalk<SK, BX> walk(a, per);
  NvqwSeg seg;
  u32 it = 0;
  while (walk.next(seg)) {
    const NvqwRows<T, G32> rows(scales, biases, a, seg.n0, r0, t4);
    const int t_end = 2 * seg.u1;
    // Step t of the tile (the walk's it): once its stage has landed, its weights are
    // dequantized (while the step before's product runs) into `cur` and multiplied; `prev`
    // is free again once that product retires, and so is the step before's stage, which the
    // warp then releases. The piece's last step retires its own products inside the loop:
    // with one wait after the loop, ptxas moved the store's conversions of the accumulators
    // above it (seen in the SASS: F2FP before WARPGROUP.DEPBAR.LE gsb0, 0x0), and the H200
    // lost the last step's later sub-steps.
    auto step = [&](u32 (&cur)[4][4], u32 (&prev)[4][4], NvqwScales& s, NvqwScales& next, int t) {
      const int st = (int)(it % S);
      nv_bar_wait(full(st), (it / S) & 1);
      rows.scales(next, t + 1);
      const u32 xa = xs + st * Sh::XSTAGE;
      auto product = [&](int kk) {
        NvqwT<T>::template rs<BX>(acc, cur[kk], nvqw_desc(xa + kk * 32, 16, 1024));
      };
      if (NVQW_INTERLEAVE) {
        // Each sub-step's product issued as soon as its fragment is made, behind a fence
        // for the registers just written.
        nvqw_pin<ACC>(acc);
        rows.template frags<8>(cur, ws + st * (Sh::WSTAGE / 4), s, [&](int kk) {
          nvqw_fence();
          product(kk);
        });
      } else {
        rows.template frags<8>(cur, ws + st * (Sh::WSTAGE / 4), s, [](int) {});
        nvqw_pin<ACC>(acc);
        nvqw_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) product(kk);
      }
      nvqw_commit();
      if (t + 1 == t_end) {
        nvqw_wait<0>();
      } else {
        nvqw_wait<1>();
      }
      nvqw_pin_frags(prev);
      if (lead && it > 0) nv_bar_arrive(freed((int)((it - 1) % S)));
      ++it;
    };
#pragma unroll
    for (int i = 0; i < ACC; ++i) acc[i] = 0.0f;
    rows.scales(sa, 2 * seg.u0);
    for (int t = 2 * seg.u0; t < t_end; t += 2) {
      step(fa, fb, sa, sb, t);
      step(fb, fa, sb, sa, t + 1);
    }
    nvqw_pin<ACC>(acc);
    nvqw_pin_frags(fa);
    nvqw_pin_frags(fb);

    if (SK && (seg.u0 > 0 || seg.u1 < per)) {
      if (seg.u1 < per) {
        // An earlier part of a tile (this block's first piece): the sums to this block's
        // slot, then its flag.
        float* slot = a.part + (i64)blockIdx.x * ACC * 256;
#pragma unroll
        for (int i = 0; i < ACC; ++i) nvqw_part_store(slot + i * 256 + tid, acc[i]);
        nvqw_fence_gpu();
        nvqw_consumers_sync();
        if (tid == 0) nvqw_flag_raise(a.flags + blockIdx.x);
        continue;
      }
      // The tile's last part (this block's last piece): the blocks before this one that took
      // the rest, nearest first.
      const i64 tile_start = seg.tile * per;
      for (i64 c = (i64)blockIdx.x - 1; c >= 0 && NvqwWalk<SK, BX>::start(a, c + 1) > tile_start; --c) {
        if (tid == 0) nvqw_flag_wait(a.flags + c);
        nvqw_consumers_sync();
        const float* slot = a.part + c * ACC * 256;
#pragma unroll
        for (int i = 0; i < ACC; ++i) acc[i] += nvqw_part_load(slot + i * 256 + tid);
        // This block alone waits on flag c: back to zero for the stream's next launch.
        if (tid == 0) nvqw_flag_clear(a.flags + c);
      }
    }
    // No copy is in flight over the staging: without SK every load has been waited for, with
    // SK the staging has its own place; the consumers' barrier keeps either from staging its
    // tile where the other still reads (a stage's products, or the last tile's staging).
    nvqw_store<T, BX, 256>(acc, staging, y, m, n, seg.m0, seg.n0, r0, t4, tid, [] { nvqw_consumers_sync(); });
  }
}

// One shape's kernels: type, rows of x a block (BX, wgmma's N) and stages; `_g32` for groups
// of 32, `_g64` for groups of 64 and 128; `_sk` for the stream-K walk. The tensor maps: x in
// boxes of 64 values × BX rows (128-byte swizzle), w in boxes of 8 words × 128 rows.
#define NV_QMM_WG_G(T, TN, BX, S, G, G32, SKN, SK)                                              \
  extern "C" __global__ void __launch_bounds__(NVQW_THREADS, 1)                                 \
      qmmwg_##TN##_x##BX##_s##S##_g##G##SKN(const __grid_constant__ NvTmap xm,                  \
                                            const __grid_constant__ NvTmap wm, const T* s,      \
                                            const T* b, T* y, NvQw a) {                         \
    nvqw_qmm<T, BX, S, G32, SK>(&xm, &wm, s, b, y, a);                                          \
  }
#define NV_QMM_WG(T, TN, BX, S)                \
  NV_QMM_WG_G(T, TN, BX, S, 32, true, , false) \
  NV_QMM_WG_G(T, TN, BX, S, 64, false, , false) \
  NV_QMM_WG_G(T, TN, BX, S, 32, true, _sk, true) \
  NV_QMM_WG_G(T, TN, BX, S, 64, false, _sk, true)
