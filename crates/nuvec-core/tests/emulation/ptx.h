// Stand-ins for the inline-PTX helpers of the kernel files (the regions marked
// `nuvec-emulation: device only` there): cp.async copies at once (so the wait counts are not
// checked), ldmatrix and mma.sync m16n8k16 as warp-collective operations with the PTX
// fragment layouts. Needs cuda.h and common.cuh first.
#pragma once

inline const void* nv_emu_addr[32][32];
inline unsigned nv_emu_a[32][32][4], nv_emu_b[32][32][2];

inline unsigned short nv_emu_u16(const void* p, int i) {
  unsigned short v;
  std::memcpy(&v, static_cast<const char*>(p) + 2 * i, 2);
  return v;
}
// ldmatrix.x4: lanes 8j..8j+7 give the rows of matrix j; lane l receives row l / 4, elements
// 2 (l % 4) and 2 (l % 4) + 1 of each matrix (transposed: column l / 4 of rows 2 (l % 4) and
// 2 (l % 4) + 1).
inline void nv_emu_ldsm4(unsigned* r, const void* p, bool trans) {
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
  nv_emu_addr[w][l] = p;
  nv_emu_warp_sync();
  for (int j = 0; j < 4; ++j) {
    if (!trans) {
      const void* row = nv_emu_addr[w][8 * j + l / 4];
      r[j] = nv_emu_u16(row, 2 * (l % 4)) | ((unsigned)nv_emu_u16(row, 2 * (l % 4) + 1) << 16);
    } else {
      const void* r0 = nv_emu_addr[w][8 * j + 2 * (l % 4)];
      const void* r1 = nv_emu_addr[w][8 * j + 2 * (l % 4) + 1];
      r[j] = nv_emu_u16(r0, l / 4) | ((unsigned)nv_emu_u16(r1, l / 4) << 16);
    }
  }
  nv_emu_warp_sync();
}
template <typename T>
inline float nv_emu_half(unsigned w, int hi) {
  T x;
  x.b = (unsigned short)(hi ? w >> 16 : w & 0xffffu);
  return nv_up<T>(x);
}
// mma.sync m16n8k16, row.col: A rows g and g + 8 (registers 0, 1 columns 2t..; 2, 3 columns
// 8 + 2t..), B columns g (registers 0, 1: rows 2t.. and 8 + 2t..), C rows g and g + 8,
// columns 2t and 2t + 1.
template <typename T>
inline void nv_emu_mma(float* c, const unsigned* a, unsigned b0, unsigned b1) {
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
  for (int i = 0; i < 4; ++i) nv_emu_a[w][l][i] = a[i];
  nv_emu_b[w][l][0] = b0;
  nv_emu_b[w][l][1] = b1;
  nv_emu_warp_sync();
  const int g = l / 4, t = l % 4;
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
    double s = 0;
    for (int k = 0; k < 16; ++k) {
      const float av = nv_emu_half<T>(
          nv_emu_a[w][(row % 8) * 4 + (k % 8) / 2][(row >= 8) + 2 * (k >= 8)], k % 2);
      const float bv = nv_emu_half<T>(nv_emu_b[w][col * 4 + (k % 8) / 2][k >= 8], k % 2);
      s += (double)av * bv;
    }
    c[e] = (float)(c[e] + s);
  }
  nv_emu_warp_sync();
}

// flash.cu's helpers.
template <typename T>
struct NvMma {
  static void run(float* c, const u32* a, u32 b0, u32 b1) { nv_emu_mma<T>(c, a, b0, b1); }
  static u32 pack(float lo, float hi) {
    const T a = nv_down<T>(lo), b = nv_down<T>(hi);
    return (u32)a.b | ((u32)b.b << 16);
  }
};
inline u32 nv_smem(const void* p) {
  return (u32)(static_cast<const unsigned char*>(p) - nv_emu_smem_base);
}
inline void nv_cp16(void* dst, const void* src, bool valid) {
  if (valid)
    std::memcpy(dst, src, 16);
  else
    std::memset(dst, 0, 16);
}
inline void nv_cp_commit() {}
template <int N>
inline void nv_cp_wait() {}
inline void nv_ldsm4(u32* r, const void* p) { nv_emu_ldsm4(r, p, false); }
inline void nv_ldsm4_t(u32* r, const void* p) { nv_emu_ldsm4(r, p, true); }
inline float nv_flash_exp2(float x) { return std::exp2(x); }
inline float nv_flash_max_nan(float x, float lo) { return x != x ? x : std::max(x, lo); }

// rows.cuh's: `max.NaN.f32` (NaN if either is; +0 over -0).
inline float nv_max_nan(float a, float b) {
  if (a != a || b != b) return a != a ? a : b;
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}

// rope.cu's.
inline void nv_rope_cp16(void* dst, const void* src) { std::memcpy(dst, src, 16); }
inline void nv_rope_wait() {}

// softmax.cu's.
inline float nv_exp2(float x) { return std::exp2(x); }

// quantized_tiled.cu's helpers.
template <typename T>
struct NvqMma {
  static void run(float* c, const u32* a, u32 b0, u32 b1) { nv_emu_mma<T>(c, a, b0, b1); }
};
inline u32 nvq_smem(const void*) { return 0; }
template <int V>
inline void nvq_cp(void* dst, const void* src, bool valid) {
  if (valid)
    std::memcpy(dst, src, V);
  else
    std::memset(dst, 0, V);
}
inline void nvq_cp_commit() {}
template <int N>
inline void nvq_cp_wait() {}
inline void nvq_ldsm4(u32* r, const void* p) { nv_emu_ldsm4(r, p, false); }
inline void nvq_ldsm4_t(u32* r, const void* p) { nv_emu_ldsm4(r, p, true); }

// attention.cu's.
inline void nv_attn_release_dependents() {}
inline void nv_attn_wait_primary() {}
inline float nv_attn_exp2(float x) { return std::exp2(x); }
template <typename T, bool VEC>
inline uint4 nv_attn_chunk(const T* p) {
  uint4 r;
  std::memcpy(&r, p, 16);
  return r;
}
template <typename T>
inline void nv_attn_mma16(float (&d)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
  const u32 a[4] = {a0, a1, a2, a3};
  nv_emu_mma<T>(d, a, b0, b1);
}
// mma.sync m16n8k8: A rows g and g + 8 (columns 2t, 2t + 1), B column g (rows 2t, 2t + 1).
template <typename T>
inline void nv_attn_mma8(float (&d)[4], u32 a0, u32 a1, u32 b0) {
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
  nv_emu_a[w][l][0] = a0;
  nv_emu_a[w][l][1] = a1;
  nv_emu_b[w][l][0] = b0;
  nv_emu_warp_sync();
  const int g = l / 4, t = l % 4;
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
    double s = 0;
    for (int k = 0; k < 8; ++k) {
      const float av = nv_emu_half<T>(nv_emu_a[w][(row % 8) * 4 + k / 2][row >= 8], k % 2);
      const float bv = nv_emu_half<T>(nv_emu_b[w][col * 4 + k / 2][0], k % 2);
      s += (double)av * bv;
    }
    d[e] = (float)(d[e] + s);
  }
  nv_emu_warp_sync();
}
// movmatrix.trans: lane l holds row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 of an 8 × 8
// matrix of 16-bit elements, and receives the same places of its transpose.
inline u32 nv_attn_trans(u32 x) {
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
  nv_emu_a[w][l][0] = x;
  nv_emu_warp_sync();
  auto at = [&](int r, int c) {  // element (r, c) of the matrix held
    const u32 word = nv_emu_a[w][r * 4 + c / 2][0];
    return (c % 2) ? word >> 16 : word & 0xffffu;
  };
  const int g = l / 4, t = l % 4;
  const u32 y = at(2 * t, g) | (at(2 * t + 1, g) << 16);
  nv_emu_warp_sync();
  return y;
}
template <typename T>
inline u32 nv_attn_pack2(float lo, float hi) {
  const T a = nv_down<T>(lo), b = nv_down<T>(hi);
  return (u32)a.b | ((u32)b.b << 16);
}

// quantized_mv_mma.cu's product.
template <typename T>
inline void nvqm_mma(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  nv_emu_mma<T>(c, a, b0, b1);
}

// quantized_wgmma.cu's: shared addresses are offsets into its dynamic array (cuda.h, 1,024
// aligned, so the swizzle sees the address bits the device does), the asynchronous products
// run at once (the kernel reads no accumulator and writes no operand between a product and
// its wait), and wgmma's register form as a warpgroup-collective operation.
inline u32 nvqw_smem(const void* p) {
  return (u32)(static_cast<const unsigned char*>(p) - nvqw_raw);
}
inline u64 nvqw_desc(u32 addr, u32 lbo, u32 sbo) {
  return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(lbo >> 4) << 16) | ((u64)(sbo >> 4) << 32) |
         (1ull << 62);
}
inline void nvqw_fence() {}
inline void nvqw_commit() {}
template <int N>
inline void nvqw_wait() {}
template <int N>
inline void nvqw_pin(float*) {}
inline void nvqw_pin_frags(u32 (&)[4][4]) {}
template <typename P>
inline P nvqw_as(u32 u) {
  P p;
  std::memcpy(&p, &u, 4);
  return p;
}
template <typename P>
inline u32 nvqw_bits(P p) {
  u32 u;
  std::memcpy(&u, &p, 4);
  return u;
}
inline u32 nv_emu_wg_a[8][128][4];
// D (64 × N, f32) += A (64 × 16 from the warpgroup's registers, each warp's 16 rows in the
// m16n8k16 A layout) · Bᵀ, B (N × 16) K-major in 128-byte swizzled shared memory through the
// descriptor: element (n, k) at start + (n / 8) SBO + (n % 8) 128 + 2 k, bits 4-6 of the
// address XOR-ed with bits 7-9. Thread (warp w, lane 4g + t) holds D rows 16 w + g and
// 16 w + g + 8, columns 8 j + 2 t and 8 j + 2 t + 1 in d[4 j ..].
template <typename T, int N>
inline void nv_emu_wgmma_rs(float* d, const u32* a, u64 desc) {
  const int wg = threadIdx.x >> 7, me = threadIdx.x & 127;
  for (int i = 0; i < 4; ++i) nv_emu_wg_a[wg][me][i] = a[i];
  nv_emu_wg[wg]->arrive_and_wait();
  const u32 start = (u32)(desc & 0x3FFF) << 4, sbo = (u32)((desc >> 32) & 0x3FFF) << 4;
  const int w = me >> 5, l = me & 31, g = l / 4, t = l % 4;
  auto b_at = [&](int n, int k) {
    u32 addr = start + (n / 8) * sbo + (n % 8) * 128 + 2 * k;
    addr ^= ((addr >> 7) & 7) << 4;
    T v;
    std::memcpy(&v.b, nvqw_raw + addr, 2);
    return nv_up<T>(v);
  };
  for (int j = 0; j < N / 8; ++j)
    for (int e = 0; e < 4; ++e) {
      const int r = g + 8 * (e >> 1), col = 8 * j + 2 * t + (e & 1);
      double s = 0;
      for (int k = 0; k < 16; ++k) {
        const u32 word =
            nv_emu_wg_a[wg][w * 32 + (r % 8) * 4 + (k % 8) / 2][(r >= 8) + 2 * (k >= 8)];
        s += (double)nv_emu_half<T>(word, k % 2) * b_at(col, k);
      }
      d[4 * j + e] = (float)(d[4 * j + e] + s);
    }
  nv_emu_wg[wg]->arrive_and_wait();
}
template <typename T>
struct NvqwT;
template <>
struct NvqwT<bf16> {
  typedef __nv_bfloat162 P;
  static constexpr u32 magic = 0x43004300u;
  template <int N>
  static void rs(float* d, const u32* a, u64 b) {
    nv_emu_wgmma_rs<bf16, N>(d, a, b);
  }
};
template <>
struct NvqwT<f16> {
  typedef __half2 P;
  static constexpr u32 magic = 0x64006400u;
  template <int N>
  static void rs(float* d, const u32* a, u64 b) {
    nv_emu_wgmma_rs<f16, N>(d, a, b);
  }
};

// flash_sm90.cu's: the asynchronous products run at once; A and B K-major through
// descriptors (the `ss` form) or A from the warpgroup's registers and B N-major (the `rs` form
// with B transposed: element (k, n) at start + (n / 64) LBO + (k / 8) SBO + (k % 8) 128 + 2 (n %
// 64)), every address swizzled as in quantized_wgmma's stand-in.
inline u64 nv_wg_desc(u32 addr, u32 lbo, u32 sbo) {
  return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(lbo >> 4) << 16) | ((u64)(sbo >> 4) << 32) |
         (1ull << 62);
}
inline void nv_wg_arrive() {}
inline void nv_wg_commit() {}
template <int N>
inline void nv_wg_wait() {}
template <int N>
inline void nv_wg_pin(float*) {}
inline void nv_proxy_fence() {}
template <typename T>
inline float nv_emu_smem_at(u32 addr) {
  addr ^= ((addr >> 7) & 7) << 4;
  T v;
  std::memcpy(&v.b, nv_emu_smem_base + addr, 2);
  return nv_up<T>(v);
}
inline u32 nv_emu_start(u64 d) { return (u32)(d & 0x3FFF) << 4; }
inline u32 nv_emu_lbo(u64 d) { return (u32)((d >> 16) & 0x3FFF) << 4; }
inline u32 nv_emu_sbo(u64 d) { return (u32)((d >> 32) & 0x3FFF) << 4; }
// D (64 × N) += A (64 × 16) · B (16 × N) for the calling warpgroup; `a_of(m, k)` and
// `b_of(k, n)` give the operands.
template <int N, typename FA, typename FB>
inline void nv_emu_wgmma(float* d, FA a_of, FB b_of) {
  const int wg = threadIdx.x >> 7, me = threadIdx.x & 127;
  nv_emu_wg[wg]->arrive_and_wait();
  const int w = me >> 5, l = me & 31, g = l / 4, t = l % 4;
  for (int j = 0; j < N / 8; ++j)
    for (int e = 0; e < 4; ++e) {
      const int m = 16 * w + g + 8 * (e >> 1), n = 8 * j + 2 * t + (e & 1);
      double s = 0;
      for (int k = 0; k < 16; ++k) s += (double)a_of(m, k) * b_of(k, n);
      d[4 * j + e] = (float)(d[4 * j + e] + s);
    }
  nv_emu_wg[wg]->arrive_and_wait();
}
template <typename T>
struct NvWg {
  template <int N>
  static void ss(float* d, u64 da, u64 db) {
    const u32 sa = nv_emu_start(da), ba = nv_emu_sbo(da), sb = nv_emu_start(db),
              bb = nv_emu_sbo(db);
    nv_emu_wgmma<N>(
        d,
        [&](int m, int k) { return nv_emu_smem_at<T>(sa + (m / 8) * ba + (m % 8) * 128 + 2 * k); },
        [&](int k, int n) { return nv_emu_smem_at<T>(sb + (n / 8) * bb + (n % 8) * 128 + 2 * k); });
  }
  template <int N>
  static void rs(float* d, const u32* a, u64 db) {
    const int wg = threadIdx.x >> 7, me = threadIdx.x & 127;
    for (int i = 0; i < 4; ++i) nv_emu_wg_a[wg][me][i] = a[i];
    const u32 sb = nv_emu_start(db), lb = nv_emu_lbo(db), bb = nv_emu_sbo(db);
    nv_emu_wgmma<N>(
        d,
        [&](int m, int k) {
          const u32 word = nv_emu_wg_a[wg][(m / 16) * 32 + (m % 8) * 4 + (k % 8) / 2]
                                      [(m % 16 >= 8) + 2 * (k >= 8)];
          return nv_emu_half<T>(word, k % 2);
        },
        [&](int k, int n) {
          return nv_emu_smem_at<T>(sb + (n / 64) * lb + (k / 8) * bb + (k % 8) * 128 +
                                   2 * (n % 64));
        });
  }
};

// bulk.cuh's and flash_tma.cu's: shared-memory barriers with their phases and transaction
// counts, TMA as an immediate copy of the box (the tensor map here is the test's own: base,
// sizes and byte strides of [B, H, L, D], the box's rows), named barriers for the consumers'
// turns.
struct NvEmuMbar {
  int count = 0, pending = 0;
  long tx = 0;
  unsigned phase = 0;
};
inline std::map<u32, NvEmuMbar> nv_emu_mbars;
inline void nv_emu_mbar_done(NvEmuMbar& m) {
  ++nv_emu_progress;
  if (m.pending == 0 && m.tx == 0) {
    ++m.phase;
    m.pending = m.count;
  }
}
inline void nv_bar_init(u32 bar, u32 count) {
  nv_emu_mbars[bar] = NvEmuMbar{(int)count, (int)count, 0, 0};
}
inline void nv_bar_arrive(u32 bar) {
  NvEmuMbar& m = nv_emu_mbars[bar];
  --m.pending;
  nv_emu_mbar_done(m);
}
inline void nv_bar_expect(u32 bar, u32 bytes) {
  NvEmuMbar& m = nv_emu_mbars[bar];
  m.tx += bytes;
  --m.pending;
  nv_emu_mbar_done(m);
}
inline void nv_bar_wait(u32 bar, u32 parity) {
  while ((nv_emu_mbars[bar].phase & 1u) == parity) nv_emu_yield();
}
inline void nv_bar_init_fence() {}
// (Templates, so that the tensor map's type, defined later in bulk.cuh, is complete where they
// are used.)
template <typename Map>
inline void nv_tma4(u32 dst, const Map* map, int c0, int c1, int c2, int c3, u32 bar) {
  const u64* v = map->v;
  const unsigned char* base = reinterpret_cast<const unsigned char*>(v[0]);
  const int d = (int)v[1], len = (int)v[2], rows = (int)v[8];
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < 8; ++j) {
      unsigned char* to = nv_emu_smem_base + dst + r * 128 + ((j ^ (r % 8)) << 4);
      if (c1 + r < len && c0 + 8 * j < d)
        std::memcpy(to, base + (c1 + r) * v[5] + c2 * v[6] + c3 * v[7] + 2 * (c0 + 8 * j), 16);
      else
        std::memset(to, 0, 16);
    }
  NvEmuMbar& m = nv_emu_mbars[bar];
  m.tx -= 128l * rows;
  nv_emu_mbar_done(m);
}
// A test's 2-D tensor map, in the fields nv_tma2 reads.
template <typename Map>
inline Map nv_emu_map2(const void* base, long cols, long rows, long pitch, int box_cols,
                       int box_rows, int size, bool swizzle) {
  Map m{};
  m.v[0] = (u64)base;
  m.v[1] = (u64)cols;
  m.v[2] = (u64)rows;
  m.v[3] = (u64)pitch;
  m.v[4] = (u64)box_cols;
  m.v[5] = (u64)box_rows;
  m.v[6] = (u64)size;
  m.v[7] = swizzle ? 1 : 0;
  return m;
}
// A 2-D box (the test's map: base, columns, rows, bytes between rows, the box's columns and
// rows, bytes a value, 1 for the 128-byte swizzle), 16 bytes at a time, zeros past the edges.
template <typename Map>
inline void nv_tma2(u32 dst, const Map* map, int c0, int c1, u32 bar) {
  const u64* v = map->v;
  const unsigned char* base = reinterpret_cast<const unsigned char*>(v[0]);
  const long cols = (long)v[1], rows = (long)v[2], pitch = (long)v[3];
  const int box_cols = (int)v[4], box_rows = (int)v[5], size = (int)v[6];
  const bool swizzle = v[7] != 0;
  const int row_bytes = box_cols * size, per_chunk = 16 / size;
  for (int r = 0; r < box_rows; ++r)
    for (int j = 0; j < row_bytes / 16; ++j) {
      unsigned char* to = nv_emu_smem_base + dst + r * row_bytes + ((swizzle ? j ^ (r % 8) : j) << 4);
      if (c1 + r < rows && c0 + per_chunk * j < cols)
        std::memcpy(to, base + (c1 + r) * pitch + (long)size * (c0 + per_chunk * j), 16);
      else
        std::memset(to, 0, 16);
    }
  NvEmuMbar& m = nv_emu_mbars[bar];
  m.tx -= (long)row_bytes * box_rows;
  nv_emu_mbar_done(m);
}
// quantized_wgmma.cu's barrier of its two consumer warpgroups, and its stream-K slots and
// flags (plain memory and atomics: blocks run one at a time in order, and a block waits only
// on earlier blocks' flags, so a flag still down is a fault of the walk).
inline void nvqw_consumers_sync() { nv_emu_named[1]->arrive_and_wait(); }
inline void nvqw_part_store(float* p, float v) { *p = v; }
inline float nvqw_part_load(const float* p) { return *p; }
inline void nvqw_flag_raise(u32* f) { __atomic_store_n(f, 1u, __ATOMIC_RELEASE); }
inline void nvqw_flag_wait(const u32* f) {
  if (__atomic_load_n(f, __ATOMIC_ACQUIRE) == 0) {
    std::fprintf(stderr, "a stream-K flag waited on before it was raised\n");
    std::abort();
  }
}
inline void nvqw_flag_clear(u32* f) { __atomic_store_n(f, 0u, __ATOMIC_RELAXED); }
inline void nvqw_fence_gpu() { std::atomic_thread_fence(std::memory_order_seq_cst); }
// The knob flash_tma.cu reads (the command line may set it first).
#ifndef NV_T_PINGPONG
#define NV_T_PINGPONG 0
#endif
inline void nv_turn_wait(int consumer) {
  if (NV_T_PINGPONG) nv_emu_named[1 + consumer]->arrive_and_wait();
}
inline void nv_turn_pass(int consumer, int consumers) {
  if (NV_T_PINGPONG) (void)nv_emu_named[1 + (consumer + 1) % consumers]->arrive();
}
