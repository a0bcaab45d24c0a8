// Tiled attention over many query rows on Hopper's warpgroup tensor cores (wgmma, sm_90a);
// `flash.rs` says which cases come here, and `flash.cu` (included before this file) holds the
// cp.async helpers and the portable kernel that every other case runs.
//
// One block of two warpgroups takes BM = 128 query rows of one (batch, query head); each
// warpgroup owns 64 of them. Queries, two stages of key tiles and three of value tiles of
// BN = 128 rows sit in shared memory in the 128-byte swizzled layout wgmma reads (rows of 64 elements, the
// 16-byte chunk c of row r stored at chunk c ^ (r mod 8), so that a 1,024-byte atom holds 8
// rows; a head of 128 is two such column blocks). Per tile a warpgroup forms its 64 × BN
// scores with wgmma (queries and keys from shared memory), applies the scale, masks and the
// online softmax in registers exactly as the portable kernel does, and adds weights × values
// with wgmma taking the weights from registers and the values (rows of keys, so N-major)
// from shared memory. Loads are cp.async into the other stage while a tile computes; a proxy
// fence makes them visible to the tensor cores.

#define NV_H_THREADS 256
#define NV_H_BM 128
// Key rows a tile: 128, or (the TMA form, where the host asks) 176, FlashAttention-3's tile
// for head size 128 without causality: fewer tiles a row of blocks, each a longer product.
#ifndef NV_H_BN
#define NV_H_BN 128
#endif

// nuvec-emulation: device only (tests/emulation/ptx.h stands in for this region) {
// Matrix descriptor of a 128-byte swizzled operand at shared address `addr`: `lbo` bytes
// between column blocks of 64 elements (N-major operands), `sbo` bytes between groups of 8
// rows.
__device__ __forceinline__ u64 nv_wg_desc(u32 addr, u32 lbo, u32 sbo) {
  return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(lbo >> 4) << 16) | ((u64)(sbo >> 4) << 32) |
         (1ull << 62);
}
__device__ __forceinline__ void nv_wg_arrive() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void nv_wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void nv_wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving reads or writes of accumulator registers across the
// asynchronous products (it does not know they are in flight).
template <int N> __device__ __forceinline__ void nv_wg_pin(float* r) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
__device__ __forceinline__ void nv_proxy_fence() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// The warpgroup products, D += A·B with f32 accumulation (the predicate p, always true, keeps
// D): `ss` takes A and B from shared memory through descriptors, `rs` takes A (four registers a
// thread, the m16n8k16 fragment of each warp's 16 rows) from registers and B N-major. Inline
// PTX names every accumulator register, so each N is written out.
__device__ __forceinline__ void nv_wgmma_ss_bf16_n64(float* d, u64 da, u64 db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db));
}

__device__ __forceinline__ void nv_wgmma_rs_bf16_n64(float* d, const u32* a, u64 db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

__device__ __forceinline__ void nv_wgmma_ss_bf16_n128(float* d, u64 da, u64 db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db));
}

__device__ __forceinline__ void nv_wgmma_rs_bf16_n128(float* d, const u32* a, u64 db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

__device__ __forceinline__ void nv_wgmma_ss_f16_n64(float* d, u64 da, u64 db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db));
}

__device__ __forceinline__ void nv_wgmma_rs_f16_n64(float* d, const u32* a, u64 db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

__device__ __forceinline__ void nv_wgmma_ss_f16_n128(float* d, u64 da, u64 db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db));
}

__device__ __forceinline__ void nv_wgmma_rs_f16_n128(float* d, const u32* a, u64 db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

// The scores of FlashAttention-3's 176-key tiles (head size 128 without causality or a mask).
__device__ __forceinline__ void nv_wgmma_ss_bf16_n176(float* d, u64 da, u64 db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n176k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87}, %88, %89, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87])
      : "l"(da), "l"(db));
}

__device__ __forceinline__ void nv_wgmma_ss_f16_n176(float* d, u64 da, u64 db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n176k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87}, %88, %89, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87])
      : "l"(da), "l"(db));
}

// The products by operand type and N (a template cannot spell out inline PTX operands).
template <typename T> struct NvWg;
template <> struct NvWg<bf16> {
  template <int N> static __device__ __forceinline__ void ss(float* d, u64 a, u64 b) {
    if (N == 64) nv_wgmma_ss_bf16_n64(d, a, b);
    else if (N == 128) nv_wgmma_ss_bf16_n128(d, a, b);
    else nv_wgmma_ss_bf16_n176(d, a, b);
  }
  template <int N> static __device__ __forceinline__ void rs(float* d, const u32* a, u64 b) {
    if (N == 64) nv_wgmma_rs_bf16_n64(d, a, b); else nv_wgmma_rs_bf16_n128(d, a, b);
  }
};
template <> struct NvWg<f16> {
  template <int N> static __device__ __forceinline__ void ss(float* d, u64 a, u64 b) {
    if (N == 64) nv_wgmma_ss_f16_n64(d, a, b);
    else if (N == 128) nv_wgmma_ss_f16_n128(d, a, b);
    else nv_wgmma_ss_f16_n176(d, a, b);
  }
  template <int N> static __device__ __forceinline__ void rs(float* d, const u32* a, u64 b) {
    if (N == 64) nv_wgmma_rs_f16_n64(d, a, b); else nv_wgmma_rs_f16_n128(d, a, b);
  }
};
// } nuvec-emulation

// Rows [0, ROWS) × D elements of a tile (rows past `valid` zeros) into the swizzled layout at
// shared byte address `base` (1,024-aligned): column block c of ROWS × 128 bytes each.
template <typename T, int ROWS, int D>
__device__ __forceinline__ void nv_h_tile(unsigned char* base, const T* g, i64 gs, int valid) {
  constexpr int CH = D / 8;  // 16-byte chunks a row
  for (int u = threadIdx.x; u < ROWS * CH; u += NV_H_THREADS) {
    const int r = u / CH, cc = u % CH;
    const int c = cc >> 3, ch = cc & 7;
    const bool ok = r < valid;
    unsigned char* dst = base + c * (ROWS * 128) + r * 128 + ((ch ^ (r & 7)) << 4);
    nv_cp16(dst, ok ? (const void*)(g + r * gs + cc * 8) : (const void*)g, ok);
  }
}

// What a consumer warpgroup keeps for its 64 query rows: the scores of one tile, the output
// accumulator, and the online softmax of `flash.cu` (NvFlashRows: each warp's part of a
// wgmma accumulator is laid out as mma.sync's), with the three steps of a tile. D and DV are
// 64 or 128.
template <typename T, int D, int DV, int MASK, bool CAUSAL, bool SINKS, int BN_,
          int BM_ = NV_H_BM>
struct NvHRows {
  static constexpr int BM = BM_, BN = BN_;
  static constexpr int NT = BN / 8;  // score tiles of 8 keys
  static constexpr int OT = DV / 8;  // output tiles of 8 features
  typedef u32 Weights[NT / 2][4];

  float s[NT * 4];
  float o[OT * 4];
  NvFlashRows<T, NT, MASK, CAUSAL, SINKS> st;
  u32 qa;  // this warpgroup's 64 query rows in shared memory

  __device__ __forceinline__ NvHRows(const NvFlash& a, const void* mask, const T* sinks, i64 b,
                                     i64 h, int m0, int wg, u32 q_addr) {
    const int lane = threadIdx.x & 31, w4 = (threadIdx.x >> 5) & 3;
    st.init(a, mask, sinks, b, h, m0, m0 + wg * 64 + w4 * 16 + (lane >> 2));
    qa = q_addr + wg * 64 * 128;
#pragma unroll
    for (int i = 0; i < OT * 4; ++i) o[i] = 0.0f;
  }

  // Issues the scores against the keys at shared address `kt` (one wgmma group).
  __device__ __forceinline__ void scores(u32 kt) {
#pragma unroll
    for (int i = 0; i < NT * 4; ++i) s[i] = 0.0f;
    nv_wg_pin<NT * 4>(s);
    nv_wg_arrive();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      // Steps of 16 elements: 32 bytes into the column block of 64.
      const u32 sub = (kk & 3) * 32;
      const u64 da = nv_wg_desc(qa + (kk >> 2) * (BM * 128) + sub, 16, 1024);
      const u64 db = nv_wg_desc(kt + (kk >> 2) * (BN * 128) + sub, 16, 1024);
      NvWg<T>::template ss<BN>(s, da, db);
    }
    nv_wg_commit();
  }

  // Issues output += weights p · the values at shared address `vt` (one wgmma group; values
  // N-major, 16 keys a step are 2,048 bytes on).
  __device__ __forceinline__ void product(Weights& p, u32 vt) {
    nv_wg_pin<OT * 4>(o);
    nv_wg_arrive();
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      const u64 db = nv_wg_desc(vt + kk * 16 * 128, BN * 128, 1024);
      NvWg<T>::template rs<DV>(o, p[kk], db);
    }
    nv_wg_commit();
  }

  // Scales and masks tile t's scores (in s), updates the running statistics (alpha: the
  // factor the output takes) and writes the weights into p.
  __device__ __forceinline__ void softmax(Weights& p, int t) {
    exponentials(t);
    pack(p);
  }

  // Scales and masks tile t's scores, updates the running statistics and leaves the weights,
  // in f32, in s.
  __device__ __forceinline__ void exponentials(int t) { st.exponentials(s, t * BN); }

  // The weights in s, rounded to T and packed as the A fragments of the value product.
  __device__ __forceinline__ void pack(Weights& p) { st.pack(p, s); }

  __device__ __forceinline__ void rescale() { st.template rescale<OT>(o); }

  // The row sums, the sink's weight, and the output rows.
  __device__ __forceinline__ void store(T* out, i64 b, i64 h, int hq) {
    st.template store<DV, OT>(o, out, b, h, hq);
  }
};

// The 1,024-aligned start of the dynamic shared memory (the swizzle repeats every 1,024 bytes).
__device__ __forceinline__ unsigned char* nv_h_base(unsigned char* smem) {
  const u32 raw = nv_smem(smem);
  return smem + (((raw + 1023) & ~1023u) - raw);
}

// Both warpgroups load and compute: keys in two stages, values in three (the product of a
// tile's values runs while the next tile's scores are formed).
template <typename T, int D, int DV, int MASK, bool CAUSAL, bool SINKS>
__device__ void nv_flash_sm90(const T* __restrict__ q, const T* __restrict__ k,
                              const T* __restrict__ v, const void* __restrict__ mask,
                              const T* __restrict__ sinks, T* __restrict__ out, const NvFlash a) {
  constexpr int BM = NV_H_BM, BN = NV_H_BN;
  typedef NvHRows<T, D, DV, MASK, CAUSAL, SINKS, BN> Rows;
  constexpr int KT = BN * D * 2, VT = BN * DV * 2;  // bytes a key and a value stage
  extern __shared__ __align__(16) unsigned char nv_h_smem[];
  unsigned char* qs = nv_h_base(nv_h_smem);
  unsigned char* ks = qs + BM * D * 2;
  unsigned char* vs = ks + 2 * KT;
  const u32 ka = nv_smem(ks), va = nv_smem(vs);
  const NvFlashBlock blk = nv_flash_block<CAUSAL, BN, BM>(a, (D + DV) * (int)sizeof(T));
  const int ntiles = blk.ntiles;
  const T* qg = q + a.q_offset + blk.b * a.q_strides[0] + blk.h * a.q_strides[1] +
                (i64)blk.m0 * a.q_strides[2];
  const T* kg = k + a.k_offset + blk.b * a.k_strides[0] + blk.kvh * a.k_strides[1];
  const T* vg = v + a.v_offset + blk.b * a.v_strides[0] + blk.kvh * a.v_strides[1];
  Rows rows(a, mask, sinks, blk.b, blk.h, blk.m0, threadIdx.x >> 7, nv_smem(qs));
  typename Rows::Weights pa, pb;

  auto load = [&](int t) {
    const int n = t * BN;
    nv_h_tile<T, BN, D>(ks + (t & 1) * KT, kg + (i64)n * a.k_strides[2], a.k_strides[2], a.lk - n);
    nv_h_tile<T, BN, DV>(vs + (t % 3) * VT, vg + (i64)n * a.v_strides[2], a.v_strides[2], a.lk - n);
    nv_cp_commit();
  };
  // Tile t: its scores formed while the previous tile's weights `prev` multiply their
  // values; the new weights into `next`.
  auto step = [&](typename Rows::Weights& prev, typename Rows::Weights& next, int t) {
    nv_cp_wait<0>();
    nv_proxy_fence();
    __syncthreads();  // tile t is in; every warpgroup is done with tiles t − 1 and t − 2
    if (t + 1 < ntiles) load(t + 1);
    rows.scores(ka + (t & 1) * KT);
    rows.product(prev, va + ((t - 1) % 3) * VT);
    nv_wg_wait<1>();
    nv_wg_pin<Rows::NT * 4>(rows.s);
    rows.softmax(next, t);
    nv_wg_wait<0>();
    nv_wg_pin<Rows::OT * 4>(rows.o);
    nv_wg_pin<Rows::NT * 2>(reinterpret_cast<float*>(prev));
    rows.rescale();
  };

  nv_h_tile<T, BM, D>(qs, qg, a.q_strides[2], a.lq - blk.m0);
  load(0);
  nv_cp_wait<0>();
  nv_proxy_fence();
  __syncthreads();
  if (ntiles > 1) load(1);
  rows.scores(ka);
  nv_wg_wait<0>();
  nv_wg_pin<Rows::NT * 4>(rows.s);
  rows.softmax(pa, 0);
  int t = 1;
  for (; t + 1 < ntiles; t += 2) {
    step(pa, pb, t);
    step(pb, pa, t + 1);
  }
  if (t < ntiles) {
    step(pa, pb, t);
    rows.product(pb, va + (t % 3) * VT);
  } else {
    rows.product(pa, va + ((t - 1) % 3) * VT);
  }
  nv_wg_wait<0>();
  nv_wg_pin<Rows::OT * 4>(rows.o);
  rows.store(out, blk.b, blk.h, a.hq);
}

// One kernel: type, head sizes, mask kind, causal, sinks.
#define NV_FLASH_SM90(T, TN, D, DV, MASK, CAUSAL, SINKS)                                        \
  extern "C" __global__ void __launch_bounds__(NV_H_THREADS, 1)                                 \
      flash90_##TN##_##D##_##DV##_m##MASK##_c##CAUSAL##_s##SINKS(                               \
          const T* q, const T* k, const T* v, const void* mask, const T* sinks, T* out,         \
          NvFlash a) {                                                                          \
    nv_flash_sm90<T, D, DV, MASK, (bool)CAUSAL, (bool)SINKS>(q, k, v, mask, sinks, out, a);    \
  }
