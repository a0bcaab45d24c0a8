/* The ceiling of the GPU `sum_rows` case: how fast row-sum kernels read a bf16 [16384, 4096]
 * tensor on this GPU, beside a device-to-device copy and a kernel that only reads the tensor.
 * Variants: nuvec's own row kernels (included from the kernel sources, as the library
 * launches them), a warp per row with U 16-byte loads in flight (each folded into its own
 * partial sum; plain loads or loads that ask the L2 for 256-byte sectors; all rows at once
 * or one wave of warps), and rows brought into shared memory by the bulk copy engine (R rows
 * a stage, S stages, one to four blocks a multiprocessor). BENCHMARKS.md quotes the figures.
 *
 *   nvcc -O3 -arch=sm_90 -I crates/nuvec-core/src/backend/cuda/kernels \
 *       -o /tmp/gpu_row_sum bench/ceiling/gpu_row_sum.cu && /tmp/gpu_row_sum
 *
 * Each line: the median and the best of 25 samples, each sample 20 launches back to back
 * between two events (so launch latency is not counted), after 5 untimed launches; every
 * sum kernel's result is checked against float64 sums first. GB/s counts the bytes read and
 * written (the copy's: both ways). */
#include "common.cuh"
#include "reduce_ops.cuh"
#include "reduce.cu"
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cmath>
NV_REDUCE_ROWS(sum, NvSum, bf16, bf16, bf16, bf16)

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s (line %d)\n", #x, cudaGetErrorString(e), __LINE__); exit(1); } } while (0)
typedef __nv_bfloat16 bf;

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  return v;
}
__device__ __forceinline__ uint4 ld_hint(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ uint4 ld_plain(const uint4* p) { return __ldg(p); }
__device__ __forceinline__ float sum8(uint4 v) {
  const __nv_bfloat162* e = reinterpret_cast<const __nv_bfloat162*>(&v);
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < 4; ++j) { float2 f = __bfloat1622float2(e[j]); s += f.x + f.y; }
  return s;
}

// Warp per row, U vectors in flight, each its own partial.
template <int U, bool HINT>
__global__ void __launch_bounds__(256) warp_rows(const bf* x, bf* out, int rows, int n) {
  int warp = (blockIdx.x * 256 + threadIdx.x) / 32, lane = threadIdx.x % 32;
  int nw = gridDim.x * 8;
  for (int r = warp; r < rows; r += nw) {
    const uint4* p = reinterpret_cast<const uint4*>(x + (size_t)r * n);
    int nvec = n / 8;
    float part[U];
#pragma unroll
    for (int k = 0; k < U; ++k) part[k] = 0.f;
    for (int i = lane; i < nvec; i += U * 32) {
      uint4 v[U];
#pragma unroll
      for (int k = 0; k < U; ++k)
        if (i + k * 32 < nvec) v[k] = HINT ? ld_hint(p + i + k * 32) : ld_plain(p + i + k * 32);
        else v[k] = make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int k = 0; k < U; ++k) part[k] += sum8(v[k]);
    }
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < U; ++k) s += part[k];
    s = warp_sum(s);
    if (lane == 0) out[r] = __float2bfloat16_rn(s);
  }
}

// ---- Bulk copies into shared memory (TMA, 1-D), STAGES deep, R rows a stage, a warp per
// row (R = 8) or 8/R warps per row.
__device__ __forceinline__ uint32_t saddr(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(uint64_t* b, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(saddr(b)), "r"(count));
}
__device__ __forceinline__ void mbar_expect(uint64_t* b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(saddr(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* b) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(saddr(dst)), "l"(src), "r"(bytes), "r"(saddr(b)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* b, uint32_t phase) {
  uint32_t ok;
  do {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(ok) : "r"(saddr(b)), "r"(phase) : "memory");
  } while (!ok);
}

template <int R, int STAGES>
__global__ void __launch_bounds__(256) bulk_rows(const bf* x, bf* out, int rows, int n) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ uint64_t full[STAGES];
  __shared__ float partial[8];
  const int rowbytes = n * 2;
  const int tiles = rows / R;
  const int stage_bytes = R * rowbytes;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) mbar_init(&full[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  // Prologue.
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      int t = blockIdx.x + s * gridDim.x;
      if (t < tiles) {
        mbar_expect(&full[s], stage_bytes);
        bulk_load(smem + s * stage_bytes, x + (size_t)t * R * n, stage_bytes, &full[s]);
      }
    }
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int WPR = 8 / R;  // warps per row
  const int row_in = warp / WPR, piece = warp % WPR;
  int it = 0;
  for (int t = blockIdx.x; t < tiles; t += gridDim.x, ++it) {
    const int s = it % STAGES;
    mbar_wait(&full[s], (it / STAGES) & 1);
    const uint4* p = reinterpret_cast<const uint4*>(smem + s * stage_bytes + row_in * rowbytes) +
                     piece * (rowbytes / 16 / WPR);
    const int nv = rowbytes / 16 / WPR;
    float a0 = 0.f, a1 = 0.f;
    for (int i = lane; i < nv; i += 64) {
      a0 += sum8(p[i]);
      if (i + 32 < nv) a1 += sum8(p[i + 32]);
    }
    float v = warp_sum(a0 + a1);
    if (WPR > 1) {
      if (lane == 0) partial[warp] = v;
    }
    __syncthreads();  // every thread is done with stage s (and partial written)
    if (threadIdx.x == 0) {
      int tn = t + STAGES * gridDim.x;
      if (tn < tiles) {
        mbar_expect(&full[s], stage_bytes);
        bulk_load(smem + s * stage_bytes, x + (size_t)tn * R * n, stage_bytes, &full[s]);
      }
    }
    if (WPR == 1) {
      if (lane == 0) out[t * R + row_in] = __float2bfloat16_rn(v);
    } else if (piece == 0 && lane == 0) {
      float tot = 0.f;
      for (int q = 0; q < WPR; ++q) tot += partial[warp + q];
      out[t * R + row_in] = __float2bfloat16_rn(tot);
    }
    __syncthreads();  // partial reused next iteration
  }
}

// The read ceiling: every 16 bytes read once, flat, grid-stride, 4 in flight.
__global__ void __launch_bounds__(256) read_all(const uint4* x, size_t nvec, unsigned* sink) {
  size_t i = (size_t)blockIdx.x * 256 + threadIdx.x, step = (size_t)gridDim.x * 256;
  unsigned acc = 0;
  for (; i + 3 * step < nvec; i += 4 * step) {
    uint4 a = __ldg(x + i), b = __ldg(x + i + step), c = __ldg(x + i + 2 * step), d = __ldg(x + i + 3 * step);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < nvec; i += step) { uint4 a = __ldg(x + i); acc ^= a.x ^ a.y ^ a.z ^ a.w; }
  if (acc == 0x12345678u) sink[0] = acc;
}

int main() {
  const int rows = 16384, n = 4096;
  const size_t elems = (size_t)rows * n, bytes = elems * 2;
  std::vector<bf> hx(elems);
  uint64_t st = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < elems; ++i) {
    st = st * 6364136223846793005ull + 1442695040888963407ull;
    hx[i] = __float2bfloat16_rn(((st >> 40) & 0xffff) / 65536.0f * 2.f - 1.f);
  }
  std::vector<double> ref(rows);
  for (int r = 0; r < rows; ++r) { double s = 0; for (int c = 0; c < n; ++c) s += (double)__bfloat162float(hx[(size_t)r * n + c]); ref[r] = s; }
  bf *x, *out; void* cp; unsigned* sink;
  CK(cudaMalloc(&x, bytes)); CK(cudaMalloc(&out, rows * 2)); CK(cudaMalloc(&cp, bytes)); CK(cudaMalloc(&sink, 4));
  CK(cudaMemcpy(x, hx.data(), bytes, cudaMemcpyHostToDevice));
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  const double moved = bytes + rows * 2;
  auto check = [&](const char* name) {
    std::vector<bf> h(rows);
    CK(cudaMemcpy(h.data(), out, rows * 2, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int r = 0; r < rows; ++r) { double g = __bfloat162float(h[r]); if (!(fabs(g - ref[r]) <= 0.02 + fabs(ref[r]) / 128)) ++bad; }
    if (bad) printf("  %s: %d WRONG rows\n", name, bad);
  };
  auto time = [&](const char* name, double work, auto launch, bool chk) {
    CK(cudaMemset(out, 0xff, rows * 2));
    for (int i = 0; i < 5; ++i) launch();
    CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
    if (chk) check(name);
    const int S = 25, B = 20;
    std::vector<float> t;
    for (int s = 0; s < S; ++s) {
      cudaEventRecord(a); for (int i = 0; i < B; ++i) launch(); cudaEventRecord(b); cudaEventSynchronize(b);
      float ms; cudaEventElapsedTime(&ms, a, b); t.push_back(ms / B);
    }
    CK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    printf("%-34s median %7.1f GB/s  best %7.1f GB/s  (%.1f us)\n", name, work / (t[S / 2] * 1e-3) / 1e9,
           work / (t[0] * 1e-3) / 1e9, t[S / 2] * 1e3);
  };
  time("copy d2d (read+write)", 2.0 * bytes, [&] { cudaMemcpyAsync(cp, x, bytes, cudaMemcpyDeviceToDevice); }, false);
  for (int g : {sms * 8, sms * 16, sms * 32})
    time(g == sms * 8 ? "read_all grid=8/SM" : g == sms * 16 ? "read_all grid=16/SM" : "read_all grid=32/SM", (double)bytes,
         [&] { read_all<<<g, 256>>>(reinterpret_cast<const uint4*>(x), bytes / 16, sink); }, false);
  Strided rv{};
  rv.shape[0] = rows; rv.strides[0] = n; rv.offset = 0; rv.ndim = 1;
  time("nuvec reduce_warp_rows (new)", moved, [&] {
    reduce_warp_rows_sum_bf16_bf16<<<rows / 8, 256>>>(x, out, rows, 1, n, n, rv); }, true);
  time("nuvec reduce_rows block (new)", moved, [&] {
    reduce_rows_sum_bf16_bf16<<<rows, 256>>>(x, out, rows, 1, n, n, rv); }, true);
  time("warp U8 partials", moved, [&] { warp_rows<8, false><<<rows / 8, 256>>>(x, out, rows, n); }, true);
  time("warp U8 partials L2::256B", moved, [&] { warp_rows<8, true><<<rows / 8, 256>>>(x, out, rows, n); }, true);
  time("warp U4 partials L2::256B", moved, [&] { warp_rows<4, true><<<rows / 8, 256>>>(x, out, rows, n); }, true);
  time("warp U16 partials L2::256B", moved, [&] { warp_rows<16, true><<<rows / 8, 256>>>(x, out, rows, n); }, true);
  time("warp U8 L2::256B grid=wave", moved, [&] { warp_rows<8, true><<<sms * 8, 256>>>(x, out, rows, n); }, true);
#define BULK(R, S, BPS)                                                                      \
  {                                                                                          \
    int sm = R * n * 2 * S;                                                                  \
    CK(cudaFuncSetAttribute(bulk_rows<R, S>, cudaFuncAttributeMaxDynamicSharedMemorySize, sm)); \
    time("bulk R=" #R " S=" #S " blocks/SM=" #BPS, moved,                                   \
         [&] { bulk_rows<R, S><<<sms * BPS, 256, sm>>>(x, out, rows, n); }, true);         \
  }
  BULK(8, 2, 1)
  BULK(8, 3, 1)
  BULK(4, 3, 1)
  BULK(4, 4, 1)
  BULK(4, 2, 2)
  BULK(2, 4, 2)
  BULK(2, 3, 3)
  BULK(1, 4, 4)
  BULK(1, 6, 3)
  CK(cudaDeviceSynchronize());
  return 0;
}
