/* The ceiling of the GPU `sum_rows` case: how fast simple row-sum kernels read a bf16
 * [16384, 4096] tensor on this GPU (a warp per row with U 16-byte loads in flight and NACC
 * accumulators, over all rows at once or one wave of warps; a block per row), beside a
 * device-to-device copy. BENCHMARKS.md quotes these figures beside nuvec's and PyTorch's.
 *
 *   nvcc -O3 -arch=sm_90 -o /tmp/gpu_row_sum bench/ceiling/gpu_row_sum.cu && /tmp/gpu_row_sum
 *
 * Each line: the best and the mean of 50 launches, each timed alone with two events, after 5
 * untimed ones; GB/s counts the bytes read (the copy's line too: double it for reads and
 * writes). */
#include <cuda_bf16.h>
#include <cstdio>
#include <cstdint>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)
typedef __nv_bfloat16 bf;
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  return v;
}
// Warp per row, U vectors in flight, NACC accumulators.
template <int U, int NACC>
__global__ void __launch_bounds__(256) warp_rows(const bf* x, float* out, int rows, int n) {
  int warp = (blockIdx.x * 256 + threadIdx.x) / 32, lane = threadIdx.x % 32;
  int nw = gridDim.x * 8;
  for (int r = warp; r < rows; r += nw) {
    const uint4* p = reinterpret_cast<const uint4*>(x + (size_t)r * n);
    int nvec = n / 8;
    float acc[NACC];
#pragma unroll
    for (int a = 0; a < NACC; ++a) acc[a] = 0.f;
    for (int i = lane; i < nvec; i += U * 32) {
      uint4 v[U];
#pragma unroll
      for (int k = 0; k < U; ++k) if (i + k * 32 < nvec) v[k] = __ldg(p + i + k * 32); else v[k] = make_uint4(0,0,0,0);
#pragma unroll
      for (int k = 0; k < U; ++k) {
        const __nv_bfloat162* e = reinterpret_cast<const __nv_bfloat162*>(&v[k]);
#pragma unroll
        for (int j = 0; j < 4; ++j) { float2 f = __bfloat1622float2(e[j]); acc[(k * 4 + j) % NACC] += f.x + f.y; }
      }
    }
    float s = 0.f;
#pragma unroll
    for (int a = 0; a < NACC; ++a) s += acc[a];
    s = warp_sum(s);
    if (lane == 0) out[r] = s;
  }
}
// Block (256) per row.
template <int NACC>
__global__ void __launch_bounds__(256) block_rows(const bf* x, float* out, int rows, int n) {
  __shared__ float part[8];
  for (int r = blockIdx.x; r < rows; r += gridDim.x) {
    const uint4* p = reinterpret_cast<const uint4*>(x + (size_t)r * n);
    int nvec = n / 8;
    float acc[NACC];
    for (int a = 0; a < NACC; ++a) acc[a] = 0.f;
    for (int i = threadIdx.x; i < nvec; i += 256) {
      uint4 v = __ldg(p + i);
      const __nv_bfloat162* e = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
      for (int j = 0; j < 4; ++j) { float2 f = __bfloat1622float2(e[j]); acc[j % NACC] += f.x + f.y; }
    }
    float s = 0.f;
    for (int a = 0; a < NACC; ++a) s += acc[a];
    s = warp_sum(s);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x < 32) { float t = threadIdx.x < 8 ? part[threadIdx.x] : 0.f; t = warp_sum(t); if (threadIdx.x == 0) out[r] = t; }
    __syncthreads();
  }
}
int main() {
  const int rows = 16384, n = 4096;
  size_t bytes = (size_t)rows * n * 2;
  bf* x; float* out; void* cp;
  CK(cudaMalloc(&x, bytes)); CK(cudaMalloc(&out, rows * 4)); CK(cudaMalloc(&cp, bytes));
  CK(cudaMemset(x, 0x3f, bytes));
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  auto time = [&](const char* name, auto launch) {
    for (int i = 0; i < 5; ++i) launch();
    float best = 1e9, tot = 0; const int R = 50;
    for (int i = 0; i < R; ++i) { cudaEventRecord(a); launch(); cudaEventRecord(b); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b); best = fminf(best, ms); tot += ms; }
    printf("%-28s best %7.1f GB/s  mean %7.1f GB/s\n", name, bytes / (best * 1e-3) / 1e9, bytes / (tot / R * 1e-3) / 1e9);
  };
  time("copy d2d (bytes read only)", [&] { cudaMemcpyAsync(cp, x, bytes, cudaMemcpyDeviceToDevice); });
  // The copy's line counts its reads only: double it for reads and writes.
  int g_all = rows / 8;            // one warp per row, all at once
  int g_wave = sms * 8;            // one wave of 8 blocks/SM
  time("warp U8 acc1 grid=all", [&] { warp_rows<8, 1><<<g_all, 256>>>(x, out, rows, n); });
  time("warp U8 acc4 grid=all", [&] { warp_rows<8, 4><<<g_all, 256>>>(x, out, rows, n); });
  time("warp U4 acc4 grid=all", [&] { warp_rows<4, 4><<<g_all, 256>>>(x, out, rows, n); });
  time("warp U16 acc4 grid=all", [&] { warp_rows<16, 4><<<g_all, 256>>>(x, out, rows, n); });
  time("warp U8 acc4 grid=wave", [&] { warp_rows<8, 4><<<g_wave, 256>>>(x, out, rows, n); });
  time("warp U16 acc8 grid=wave", [&] { warp_rows<16, 8><<<g_wave, 256>>>(x, out, rows, n); });
  time("block acc4 grid=rows", [&] { block_rows<4><<<rows, 256>>>(x, out, rows, n); });
  time("block acc4 grid=wave", [&] { block_rows<4><<<g_wave, 256>>>(x, out, rows, n); });
  CK(cudaDeviceSynchronize());
  return 0;
}
