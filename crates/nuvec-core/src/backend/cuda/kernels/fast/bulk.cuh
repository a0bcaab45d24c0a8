// Hopper's shared-memory barriers, and the tensor copies (TMA) that complete on them. A barrier
// (mbarrier) counts arrivals and the bytes still to land; its phase completes when both reach
// zero, and a waiter names the parity of the phase it waits out. The copy engine's writes (the
// tensor copies of flash_tma.cu and quantized_wgmma.cu) count down the bytes. Needs
// common.cuh first; the kernels that use these are built for sm_90 on (the bodies are empty
// below it, where nothing calls them).

// The tensor map the host encodes (`CUtensorMap`, `tensor_map.rs`): opaque, 128 bytes.
struct alignas(64) NvTmap {
  u64 v[16];
};

// nuvec-emulation: device only (tests/emulation/ptx.h stands in for this region) {
__device__ __forceinline__ void nv_bar_init(u32 bar, u32 count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#endif
}
// Makes the initialised barriers visible to the copy engine (before the first copy).
__device__ __forceinline__ void nv_bar_init_fence() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void nv_bar_arrive(u32 bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(bar)
               : "memory");
#endif
}
// Arrives and expects `bytes` of asynchronous copies to complete the phase.
__device__ __forceinline__ void nv_bar_expect(u32 bar, u32 bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n" ::"r"(bar),
               "r"(bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void nv_bar_wait(u32 bar, u32 parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n.reg .pred done;\nWAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#endif
}
// One box of a 4-D tensor map (feature, row, head, batch) into shared memory, completing on
// barrier `bar`.
__device__ __forceinline__ void nv_tma4(u32 dst, const NvTmap* map, int c0, int c1, int c2, int c3,
                                        u32 bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3, %4, %5}], [%6];\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
#endif
}
// One box of a 2-D tensor map (column, row) into shared memory, completing on barrier `bar`.
__device__ __forceinline__ void nv_tma2(u32 dst, const NvTmap* map, int c0, int c1, u32 bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3}], [%4];\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
#endif
}
// } nuvec-emulation
