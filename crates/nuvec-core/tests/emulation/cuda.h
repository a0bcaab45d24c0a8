// A host stand-in for the subset of CUDA that nuvec's SIMT and mma.sync kernels use, so that
// their logic can be checked on a machine without a GPU (`tests/kernel_emulation.rs`). One
// block runs at a time, its threads as fibers on the calling thread (each runs until it must
// wait, then the next; a switch costs far less than waking an OS thread, and a deadlock is
// seen and named rather than hung on); __syncthreads and the warp-collective operations
// (shuffles here, ldmatrix and mma.sync in ptx.h) meet at barriers. Half types
// round to nearest even like the device's conversions; the products of the tensor-core
// stand-ins sum in double, so results match the device's to rounding, not bit for bit.
#pragma once
#include <atomic>
#include <map>
#include <random>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>
#include <ucontext.h>

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#define __restrict__
// A block's shared arrays: statics (one block runs at a time, and every thread of it sees
// them); `extern __shared__` declarations lose the word (tests/kernel_emulation.rs) and name
// the arrays at the end of this file.
#define __shared__ static
#define __align__(x)
#define __launch_bounds__(...)
#define __grid_constant__

struct Dim3 {
  unsigned x, y, z;
};
// Set by the scheduler for the fiber it runs.
inline Dim3 threadIdx, blockIdx;
Dim3 blockDim, gridDim;

// Half types: the bits, converted through float.
struct __nv_bfloat16 {
  unsigned short b;
};
struct __half {
  unsigned short b;
};
inline float __bfloat162float(__nv_bfloat16 x) {
  const unsigned u = (unsigned)x.b << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16{(unsigned short)((u >> 16) | 0x40)};
  return __nv_bfloat16{(unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}
inline float __half2float(__half x) {
  _Float16 h;
  std::memcpy(&h, &x.b, 2);
  return (float)h;
}
inline __half __float2half_rn(float f) {
  const _Float16 h = (_Float16)f;
  __half r;
  std::memcpy(&r.b, &h, 2);
  return r;
}
inline __half __ushort_as_half(unsigned short b) { return __half{b}; }
struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
struct __half2 {
  __half x, y;
};
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
  return {__float2bfloat16_rn(a), __float2bfloat16_rn(b)};
}
inline __half2 __floats2half2_rn(float a, float b) {
  return {__float2half_rn(a), __float2half_rn(b)};
}
inline float nv_emu_up(__nv_bfloat16 x) { return __bfloat162float(x); }
inline float nv_emu_up(__half x) { return __half2float(x); }
inline void nv_emu_down(float f, __nv_bfloat16& x) { x = __float2bfloat16_rn(f); }
inline void nv_emu_down(float f, __half& x) { x = __float2half_rn(f); }
// Pair arithmetic, each result the exact one rounded once to the half type.
template <typename P>
inline P nv_emu_pair(P a, P b, P c, int op) {
  auto one = [&](auto x, auto y, auto z) {
    const double r = op == 0   ? (double)nv_emu_up(x) * nv_emu_up(y) + nv_emu_up(z)
                     : op == 1 ? (double)nv_emu_up(x) - nv_emu_up(y)
                     : op == 2 ? (double)nv_emu_up(x) * nv_emu_up(y)
                               : (double)nv_emu_up(x) + nv_emu_up(y);
    decltype(x) out;
    nv_emu_down((float)r, out);
    return out;
  };
  return {one(a.x, b.x, c.x), one(a.y, b.y, c.y)};
}
inline __nv_bfloat162 __hfma2(__nv_bfloat162 a, __nv_bfloat162 b, __nv_bfloat162 c) {
  return nv_emu_pair(a, b, c, 0);
}
inline __nv_bfloat162 __hsub2(__nv_bfloat162 a, __nv_bfloat162 b) {
  return nv_emu_pair(a, b, b, 1);
}
inline __nv_bfloat162 __hmul2(__nv_bfloat162 a, __nv_bfloat162 b) {
  return nv_emu_pair(a, b, b, 2);
}
inline __nv_bfloat162 __hadd2(__nv_bfloat162 a, __nv_bfloat162 b) {
  return nv_emu_pair(a, b, b, 3);
}
inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) { return nv_emu_pair(a, b, c, 0); }
inline __half2 __hsub2(__half2 a, __half2 b) { return nv_emu_pair(a, b, b, 1); }
inline __half2 __hmul2(__half2 a, __half2 b) { return nv_emu_pair(a, b, b, 2); }
inline __half2 __hadd2(__half2 a, __half2 b) { return nv_emu_pair(a, b, b, 3); }

struct uint2 {
  unsigned x, y;
};
struct uint4 {
  unsigned x, y, z, w;
};
struct float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
inline uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
inline float2 make_float2(float a, float b) { return {a, b}; }
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __longlong_as_double(long long i) {
  double d;
  std::memcpy(&d, &i, 8);
  return d;
}
inline long long __double_as_longlong(double d) {
  long long i;
  std::memcpy(&i, &d, 8);
  return i;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
template <typename T>
inline T __ldg(const T* p) {
  return *p;
}
template <typename T>
inline T __ldcg(const T* p) {
  return *p;
}
// Blocks run one at a time: a fence orders nothing more than program order does, and an
// atomic needs only to be atomic among the block's threads.
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  return std::atomic_ref<unsigned>(*p).fetch_add(v);
}
inline int atomicAdd(int* p, int v) { return std::atomic_ref<int>(*p).fetch_add(v); }
// CUDA's overloaded min and max of mixed integer types.
template <typename A, typename B>
inline auto min(A a, B b) {
  return a < b ? a : b;
}
template <typename A, typename B>
inline auto max(A a, B b) {
  return a < b ? b : a;
}
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const unsigned long long v = ((unsigned long long)y << 32) | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return r;
}

// The fibers of the block being run: each thread's context and stack, and whether it has
// ended. `nv_emu_progress` counts every arrival at a barrier, every phase an mbarrier
// completes and every fiber's end: two rounds of the scheduler in a row in which it does not
// move while fibers remain are a deadlock.
struct NvEmuFiber {
  ucontext_t ctx;
  std::vector<unsigned char> stack;
  bool done = false;
};
inline std::vector<NvEmuFiber> nv_emu_fibers;
inline ucontext_t nv_emu_sched;
inline unsigned nv_emu_cur = 0;
inline unsigned long nv_emu_progress = 0;
inline const std::function<void()>* nv_emu_body = nullptr;
// Gives the scheduler back control; this fiber resumes after every other live one has run.
inline void nv_emu_yield() { swapcontext(&nv_emu_fibers[nv_emu_cur].ctx, &nv_emu_sched); }
// A barrier of `n` threads (std::barrier's arrive_and_wait and arrive, for fibers).
struct NvEmuBarrier {
  unsigned n, arrived = 0, phase = 0;
  explicit NvEmuBarrier(unsigned count) : n(count) {}
  unsigned arrive() {
    const unsigned at = phase;
    ++nv_emu_progress;
    if (++arrived == n) {
      arrived = 0;
      ++phase;
    }
    return at;
  }
  void arrive_and_wait() {
    const unsigned at = arrive();
    while (phase == at) nv_emu_yield();
  }
};
// The block's barrier and one per warp, with the warps' exchange buffers.
inline std::unique_ptr<NvEmuBarrier> nv_emu_block;
inline std::unique_ptr<NvEmuBarrier> nv_emu_warp[32];
inline std::unique_ptr<NvEmuBarrier> nv_emu_wg[8];
// Named barriers 1 to 15 of 256 threads (two warpgroups: one waits, one arrives).
inline std::unique_ptr<NvEmuBarrier> nv_emu_named[16];
inline float nv_emu_xf[32][32];
// With NV_EMU_JITTER, whole warps leaving a block barrier lag now and then (about one barrier
// in four; every lane of a warp draws the same): they wait until no other fiber can move, so
// that a warp still to read a shared buffer lags as far as it can behind one that goes on to
// write it again; a missing barrier then shows in the results.
#ifdef NV_EMU_JITTER
inline unsigned nv_emu_passed[1024];
inline void nv_emu_jitter() {
  const unsigned h =
      (unsigned)(threadIdx.x >> 5) * 2654435761u + ++nv_emu_passed[threadIdx.x] * 40503u;
  if (((h >> 7) & 3) != 0) return;
  unsigned long seen;
  do {
    seen = nv_emu_progress;
    nv_emu_yield();
  } while (nv_emu_progress != seen);
  ++nv_emu_progress;
}
#else
inline void nv_emu_jitter() {}
#endif
inline void __syncthreads() {
  nv_emu_block->arrive_and_wait();
  nv_emu_jitter();
}
inline void nv_emu_warp_sync() { nv_emu_warp[threadIdx.x >> 5]->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { nv_emu_warp_sync(); }
inline float nv_emu_shfl(float v, int src) {
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
  nv_emu_xf[w][l] = v;
  nv_emu_warp_sync();
  const float r = nv_emu_xf[w][src & 31];
  nv_emu_warp_sync();
  return r;
}
inline float __shfl_xor_sync(unsigned, float v, int m) {
  return nv_emu_shfl(v, (threadIdx.x & 31) ^ m);
}
inline float __shfl_sync(unsigned, float v, int src) { return nv_emu_shfl(v, src); }
inline int __shfl_sync(unsigned, int v, int src) {
  float f, r;
  std::memcpy(&f, &v, 4);
  r = nv_emu_shfl(f, src);
  std::memcpy(&v, &r, 4);
  return v;
}
// The lanes of the warp holding the same value as this one (bit l for lane l).
inline unsigned __match_any_sync(unsigned, unsigned v) {
  const int w = threadIdx.x >> 5;
  static unsigned held[32][32];
  held[w][threadIdx.x & 31] = v;
  nv_emu_warp_sync();
  unsigned peers = 0;
  for (int l = 0; l < 32; ++l) peers |= (held[w][l] == v ? 1u : 0u) << l;
  nv_emu_warp_sync();
  return peers;
}
// The lanes of the warp whose predicate holds (bit l for lane l).
inline unsigned __ballot_sync(unsigned, int pred) {
  const int w = threadIdx.x >> 5;
  static unsigned held[32][32];
  held[w][threadIdx.x & 31] = pred != 0;
  nv_emu_warp_sync();
  unsigned bits = 0;
  for (int l = 0; l < 32; ++l) bits |= held[w][l] << l;
  nv_emu_warp_sync();
  return bits;
}
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __ffs(int v) { return __builtin_ffs(v); }

// A fiber's start: the kernel's body, then its end.
inline void nv_emu_fiber_main() {
  (*nv_emu_body)();
  nv_emu_fibers[nv_emu_cur].done = true;
  ++nv_emu_progress;
  swapcontext(&nv_emu_fibers[nv_emu_cur].ctx, &nv_emu_sched);
}
// Fiber stacks: the kernels' register arrays and the stand-ins' locals live there.
constexpr size_t NV_EMU_STACK = 1 << 19;

// Runs `body` for every thread of every block of `grid`, one block at a time, its threads as
// fibers in turn.
inline void nv_emu_launch(Dim3 grid, unsigned threads, const std::function<void()>& body) {
  gridDim = grid;
  blockDim = {threads, 1, 1};
  nv_emu_body = &body;
  if (nv_emu_fibers.size() < threads) nv_emu_fibers.resize(threads);
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        nv_emu_block = std::make_unique<NvEmuBarrier>(threads);
        for (unsigned w = 0; w < threads / 32; ++w)
          nv_emu_warp[w] = std::make_unique<NvEmuBarrier>(32);
        for (unsigned w = 0; w < threads / 128; ++w)
          nv_emu_wg[w] = std::make_unique<NvEmuBarrier>(128);
        for (int i = 1; i < 16; ++i) nv_emu_named[i] = std::make_unique<NvEmuBarrier>(256);
#ifdef NV_EMU_JITTER
        std::memset(nv_emu_passed, 0, sizeof nv_emu_passed);
#endif
        blockIdx = {x, y, z};
        for (unsigned t = 0; t < threads; ++t) {
          NvEmuFiber& f = nv_emu_fibers[t];
          f.stack.resize(NV_EMU_STACK);
          f.done = false;
          getcontext(&f.ctx);
          f.ctx.uc_stack.ss_sp = f.stack.data();
          f.ctx.uc_stack.ss_size = f.stack.size();
          f.ctx.uc_link = nullptr;
          makecontext(&f.ctx, nv_emu_fiber_main, 0);
        }
        // Rounds in a row in which nothing moved: two (a lagging warp's last look counts one)
        // are a deadlock.
        for (unsigned live = threads, still = 0; live > 0;) {
          const unsigned long before = nv_emu_progress;
          live = 0;
          for (unsigned t = 0; t < threads; ++t) {
            if (nv_emu_fibers[t].done) continue;
            nv_emu_cur = t;
            threadIdx = {t, 0, 0};
            swapcontext(&nv_emu_sched, &nv_emu_fibers[t].ctx);
            live += !nv_emu_fibers[t].done;
          }
          still = nv_emu_progress == before ? still + 1 : 0;
          if (live > 0 && still == 2) {
            std::fprintf(stderr, "deadlock: block (%u, %u, %u), %u of %u threads wait on barriers "
                         "that no thread will reach\n", x, y, z, live, threads);
            std::abort();
          }
        }
      }
}

// The kernels' dynamic shared memory (one block at a time): their `extern __shared__`
// declarations name these.
alignas(16) unsigned char nv_flash_smem[1 << 18];
alignas(16) float nv_f32_smem[1 << 16];
alignas(16) unsigned char nv_gdc_smem[1 << 18];
alignas(16) unsigned char nvq_smem_tiles[1 << 18];
float4 nv_gd_shared[1 << 14];
alignas(16) float nv_rope_angles[1 << 14];
float4 nv_vjp_acc[1 << 14];
alignas(1024) unsigned char nvqw_raw[1 << 18];
alignas(1024) unsigned char nv_t_smem[1 << 18];
// What shared addresses (the u32 a kernel gives TMA, barriers and descriptors) count from.
inline unsigned char* nv_emu_smem_base = nv_t_smem;

// A running hash (FNV-1a) of the bits of every output a test mixes in, printed at its end, so
// that a rewrite meant to keep the kernels' bits can be checked against the hash before it.
inline unsigned long long nv_emu_bits = 1469598103934665603ull;
template <typename V> inline void nv_emu_mix(const std::vector<V>& v) {
  const unsigned char* p = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(V); ++i) nv_emu_bits = (nv_emu_bits ^ p[i]) * 1099511628211ull;
}

// The larger of a test's worst error so far and a new one, where a NaN error (an output the
// kernel got as NaN) is infinite: std::max(worst, NaN) keeps worst, and would pass it over.
inline double nv_emu_worse(double worst, double e) { return e == e ? std::max(worst, e) : INFINITY; }
