// Hopper's shared-memory barriers, on which the copy engine's writes complete. A barrier
// (mbarrier) counts arrivals and the bytes still to land; its phase completes when both reach
// zero, and a waiter names the parity of the phase it waits out. The copy engine's writes (the
// tensor copies of flash_tma.cu) count down the bytes. Needs common.cuh first; the
// kernels that use these are built for sm_90 on (the bodies are empty below it, where nothing
// calls them).

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
// } nuvec-emulation
