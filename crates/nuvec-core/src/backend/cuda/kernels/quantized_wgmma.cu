// The quantized product y = x · wᵀ for many rows of x on Hopper's warpgroup tensor cores
// (wgmma, compiled for sm_90a), 4-bit weights in MLX's affine layout (quantized.cu describes
// it: 8 values a u32 word, value j of a word in bits 4j.., a scale and a bias of T a group).
// `quantized/wgmma.rs` says which cases come here. Needs common.cuh only. Two forms share
// the parts from NvqwRows on: this file's, described below, and the warp-specialised one of
// quantized_wgmma_ws.cu (a loading warpgroup, TMA, barriers a stage), the default since it ran
// `qmm_512x14336x4096` at 590-600 TFLOP/s on an H100 where this one ran at 440.
//
// A block computes the transposed tile Yᵀ = W · Xᵀ for BN = 128 rows of w (outputs n) by BX
// rows of x (BX = 128 or 256), 64 values of k a step, so that the weights are wgmma's A
// operand, which it takes from registers: nothing dequantized ever goes through shared memory.
// - Two warpgroups (256 threads), each owning 64 of the 128 rows of w; every thread loads and
//   computes (no producer split yet: the simpler form first).
// - Each step's tile of x (BX rows x 64 values, 128 bytes a row) and packed tile of w (128
//   rows x 8 words) go into shared memory with cp.async, S - 2 steps ahead (S stages; x in the
//   128-byte swizzled layout wgmma reads: 16-byte chunk c of row r at chunk c ^ (r mod 8), so a
//   1,024-byte atom holds 8 rows). Rows of x past m and values past k are zeros, so the
//   weights there (dequantized from zero words) add nothing.
// - A thread holds, for each k16 sub-step, the m16n8k16-style A fragment of its warp's 16
//   rows: rows g and g + 8 (g = lane / 4), values 2t, 2t + 1 and 8 + 2t, 9 + 2t (t = lane % 4)
//   of the 16, which are byte t of two consecutive packed words of each row. Each byte becomes
//   one pair of T: its two nibbles are moved to bits 0 and 16 (the byte times 0x1001, masked),
//   OR-ed into the mantissas of 2^7 (bf16) or 2^10 (f16), that constant is subtracted (exact)
//   and s · q + b is one fused multiply-add of T pairs (each weight rounded once to T).
// - x's rows are wgmma's B, K-major (no transpose), through a descriptor: start at the stage
//   plus 32 bytes a k16 sub-step, 1,024 bytes between groups of 8 rows, 128-byte swizzle.
// - f32 accumulators, 64 x BX a warpgroup (BX / 2 registers a thread); a step's products stay
//   in flight while the next step's weights are dequantized (NVQW_INFLIGHT below), the A
//   fragments double buffered for it, and a barrier a step frees the stage read before.
// - The accumulators go through shared memory (row m, column n) so that y's rows are written
//   16 bytes at a time.
// - Instructions: a warp's loop of two steps (ptxas's SASS, sm_90a, groups of 64) is 568
//   instructions at 256 rows of x, where one step's products keep a sub-partition's tensor
//   core busy for about 1,024 cycles (two warps issue there). Scales located from scratch
//   each step, with guards, and the nibble mask as a literal (materialised again before its
//   uses) had made it 844; on an H100 `qmm_512x14336x4096` went from 428 to 441 TFLOP/s.
// - Tried: blocks of 256 rows of w by 128 of x, which read 24 KB a step from L2 where this
//   shape reads 38 KB, two product groups a step: 290-345 TFLOP/s on the H100 against 441.
//
// Knobs: BX and S are template arguments (the host picks among the instantiated pairs and
// sizes the shared memory from them); BN, BK and the thread count are fixed.

#define NVQW_THREADS 256
#define NVQW_BN 128
#define NVQW_BK 64
// Words a packed row of w takes in shared memory: 8 used, 4 of padding so that the 8 rows a
// quarter-warp reads fall in distinct banks.
#define NVQW_WQS 12
// Product groups left in flight at the end of a step: 1 overlaps a step's product with the
// next step's dequantization; 0 retires every step's product before the next step starts.
// With 1 and one wait after the loop, the H200 lost the last step's later sub-steps (k = 128,
// one-hot x: the outputs of the second step's last 48 values were 0): ptxas had moved the
// epilogue's conversions of the accumulators above that wait, so they read the accumulators
// while the last products were still landing (seen in the SASS: F2FP before
// WARPGROUP.DEPBAR.LE gsb0, 0x0). The last step now waits for its own products inside the
// loop, where nothing after the loop can move above it (the SASS shows the conversions after
// the wait). Both forms pass the tests on an H100 since; 1, the default, ran
// `qmm_512x14336x4096` at 428 TFLOP/s there, 0 at 345 (`NUVEC_KERNEL_DEFINES="NVQW_INFLIGHT=0"`).
#ifndef NVQW_INFLIGHT
#define NVQW_INFLIGHT 1
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

// 16 bytes from global to shared memory, or 16 zero bytes when !valid (nothing is read).
__device__ __forceinline__ void nvqw_cp16(u32 dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void nvqw_cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void nvqw_cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

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
// Makes cp.async's writes (generic proxy) visible to wgmma's reads (async proxy).
__device__ __forceinline__ void nvqw_proxy_fence() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
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

// The shared memory of one block: S stages of x (BX rows of 128 bytes) then S stages of
// packed w, from a 1,024-aligned start (the host adds 1,024 bytes for the alignment).
template <int BX, int S> struct NvqwShape {
  static constexpr int XSTAGE = BX * 128;
  static constexpr int WSTAGE = NVQW_BN * NVQW_WQS * 4;
  static constexpr int SHARED = S * (XSTAGE + WSTAGE);
  static_assert(BX * (NVQW_BN + 8) * 2 <= SHARED, "the output staging fits the stages");
  static_assert(S >= 3, "a stage being multiplied, one in flight, one loading");
};

// A thread's two rows of w (r0 and r0 + 8 of the block's 128; the m16n8k16 A layout): where
// their scales start, a step's scales and biases, and a step's A fragments from the packed
// words in shared memory. Shared by both forms of the kernel.
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
  template <int WQ>
  __device__ __forceinline__ void frags(u32 (&cur)[4][4], const u32* wt, const NvqwScales& s) const {
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

template <typename T, int BX, int S, bool G32>
__device__ __forceinline__ void nvqw_qmm(const T* __restrict__ x, const u32* __restrict__ w,
                                         const T* __restrict__ scales, const T* __restrict__ biases,
                                         T* __restrict__ y, const NvQw& a) {
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

  const i64 m = a.m, n = a.n;
  const int k = a.k, wrow = a.wrow;
  const i64 n0 = (i64)blockIdx.x * NVQW_BN, m0 = (i64)blockIdx.y * BX;
  const int tiles = (k + NVQW_BK - 1) / NVQW_BK;
  // Steps run in pairs (the two A buffers alternate): an odd count gets one more step of
  // zeros. A lone last step would make ptxas serialize every product (its registers are
  // allocated apart from the loop's, and the copies between read accumulators in flight).
  const int steps = (tiles + 1) & ~1;
  const int tid = threadIdx.x, lane = tid & 31;
  const int wg = tid >> 7, w4 = (tid >> 5) & 3, g = lane >> 2, t4 = lane & 3;
  // The thread's two rows of the block's 128 rows of w.
  const int r0 = wg * 64 + w4 * 16 + g;

  // Copies of a step: x rows (tid / 8) + 32 i, chunk tid % 8 (its swizzled place is the same
  // for every i, rows 32 apart sharing r mod 8); w row tid / 2, half tid % 2.
  const int xc = tid & 7, xr = tid >> 3;
  const u32 x_dst = xr * 128 + ((xc ^ (xr & 7)) << 4);
  const i64 x_rows = m - m0 - xr;  // rows i with 32 i below this are inside x
  const T* x_src = x + (m0 + xr) * (i64)k + 8 * xc;
  const int wr = tid >> 1, wh = tid & 1;
  const bool w_in = n0 + wr < n;
  const u32* w_src = w + (w_in ? (n0 + wr) * (i64)wrow : 0) + 4 * wh;
  const u32 w_dst = (wr * NVQW_WQS + 4 * wh) * 4;

  // Step t's copies (zeros past k: the padding step among them).
  auto load = [&](int t) {
    if (t < steps) {
      const int stage = t % S, k0 = t * NVQW_BK;
      const u32 xd = xs + stage * Sh::XSTAGE + x_dst;
      const bool kin = k0 + 8 * xc < k;
#pragma unroll
      for (int i = 0; i < BX / 32; ++i) {
        const bool ok = kin && 32 * i < x_rows;
        nvqw_cp16(xd + i * 32 * 128, ok ? (const void*)(x_src + (i64)i * 32 * k + k0) : (const void*)x, ok);
      }
      const bool ok = w_in && 8 * t + 4 * wh + 4 <= wrow;
      nvqw_cp16(wsa + stage * Sh::WSTAGE + w_dst, ok ? (const void*)(w_src + 8 * t) : (const void*)w, ok);
    }
    nvqw_cp_commit();
  };

  const NvqwRows<T, G32> rows(scales, biases, a, n0, r0, t4);

  float acc[ACC];
#pragma unroll
  for (int i = 0; i < ACC; ++i) acc[i] = 0.0f;
  u32 fa[4][4], fb[4][4];
  NvqwScales sa, sb;

  // Step t: its copies have landed; its weights are dequantized (while step t - 1's product
  // runs) into `cur` and multiplied; `prev` is free again once step t - 1's product retires.
  auto step = [&](u32 (&cur)[4][4], u32 (&prev)[4][4], NvqwScales& s, NvqwScales& next, int t) {
    nvqw_cp_wait<S - 3>();
    nvqw_proxy_fence();
    // Everyone's copies of step t are in; every warpgroup is past step t - 2's product and
    // its reads of that stage, which the next copies overwrite.
    __syncthreads();
    load(t + S - 2);
    rows.scales(next, t + 1);
    rows.template frags<NVQW_WQS>(cur, ws + (t % S) * (Sh::WSTAGE / 4), s);
    const u32 xa = xs + (t % S) * Sh::XSTAGE;
    nvqw_pin<ACC>(acc);
    nvqw_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) NvqwT<T>::template rs<BX>(acc, cur[kk], nvqw_desc(xa + kk * 32, 16, 1024));
    nvqw_commit();
    // The last step retires its own products: ptxas moves the epilogue's reads of the
    // accumulators above a wait that follows the loop (seen in the SASS), so that wait must
    // come before the loop's last branch.
    if (NVQW_INFLIGHT == 0 || t + 1 == steps) {
      nvqw_wait<0>();
    } else {
      nvqw_wait<1>();
    }
    nvqw_pin_frags(prev);
  };

#pragma unroll
  for (int s = 0; s < S - 2; ++s) load(s);
  rows.scales(sa, 0);
  for (int t = 0; t < steps; t += 2) {
    step(fa, fb, sa, sb, t);
    step(fb, fa, sb, sa, t + 1);
  }
  nvqw_wait<0>();
  nvqw_pin<ACC>(acc);
  nvqw_pin_frags(fa);
  nvqw_pin_frags(fb);

  nvqw_cp_wait<0>();
  nvqw_store<T, BX, NVQW_THREADS>(acc, smem, y, m, n, m0, n0, r0, t4, tid, [] { __syncthreads(); });
}

// One shape's kernels: type, rows of x a block (BX, wgmma's N) and stages; `_g32` for groups
// of 32, `_g64` for groups of 64 and 128.
#define NV_QMM_WG_G(T, TN, BX, S, G, G32)                                                        \
  extern "C" __global__ void __launch_bounds__(NVQW_THREADS, 1)                                  \
      qmmwg_##TN##_x##BX##_s##S##_g##G(const T* x, const u32* w, const T* s, const T* b, T* y,   \
                                       NvQw a) {                                                 \
    nvqw_qmm<T, BX, S, G32>(x, w, s, b, y, a);                                                   \
  }
#define NV_QMM_WG(T, TN, BX, S)         \
  NV_QMM_WG_G(T, TN, BX, S, 32, true) \
  NV_QMM_WG_G(T, TN, BX, S, 64, false)
