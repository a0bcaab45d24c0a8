// Random bits: threefry-2x32 with 20 rounds, bit for bit the CPU backend's (`threefry2x32`
// in `random/mod.rs`) with its layout (`backend/cpu/random.rs`): each key owns `per_key`
// consecutive elements, i.e. W = ceil(per_key * sizeof(T) / 4) words; with h = ceil(W / 2),
// the block of counter (j, j + h) gives words j and j + h, except that for odd W the block
// of word h - 1 has counter (h - 1, 0) (its second word is past the end). Counters are
// 32-bit and wrap as on the CPU. Elements narrower than a word take its bytes from the least
// significant.

__device__ __forceinline__ u32 nv_rotl(u32 x, int r) { return (x << r) | (x >> (32 - r)); }

__device__ __forceinline__ void nv_threefry(u32 k0, u32 k1, u32 c0, u32 c1, u32& y0, u32& y1) {
  const int rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  const u32 ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
  u32 x0 = c0 + ks[0];
  u32 x1 = c1 + ks[1];
#pragma unroll
  for (int i = 0; i < 5; ++i) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      x0 += x1;
      x1 = nv_rotl(x1, rot[i % 2][q]) ^ x0;
    }
    // A key injection after every four rounds.
    x0 += ks[(i + 1) % 3];
    x1 += ks[(i + 2) % 3] + (u32)(i + 1);
  }
  y0 = x0;
  y1 = x1;
}

// Word `word` of a key's stream into its elements (those of index below per_key).
template <typename T>
__device__ __forceinline__ void nv_put_word(T* out, i64 per_key, i64 word, u32 w) {
  const int per = 4 / (int)sizeof(T);
#pragma unroll
  for (int b = 0; b < per; ++b) {
    const i64 e = word * per + b;
    if (e < per_key) out[e] = (T)(w >> (8 * (int)sizeof(T) * b));
  }
}

// One thread per block (key k, counter j < half): keys are the row-major pairs of the view.
template <typename T>
__device__ void nv_random_bits(const u32* keys, Strided sk, T* out, i64 num_keys, i64 per_key,
                               i64 half, int odd) {
  NV_FOR_EACH(t, num_keys * half) {
    const i64 k = t / half;
    const i64 j = t - k * half;
    const u32 k0 = keys[nv_locate(sk, 2 * k)];
    const u32 k1 = keys[nv_locate(sk, 2 * k + 1)];
    T* mine = out + k * per_key;
    u32 y0, y1;
    if (odd && j == half - 1) {
      nv_threefry(k0, k1, (u32)(half - 1), 0u, y0, y1);
      nv_put_word<T>(mine, per_key, j, y0);
    } else {
      nv_threefry(k0, k1, (u32)j, (u32)j + (u32)half, y0, y1);
      nv_put_word<T>(mine, per_key, j, y0);
      nv_put_word<T>(mine, per_key, j + half, y1);
    }
  }
}

#define NV_RANDOM_BITS(T, tn) \
  extern "C" __global__ void random_bits_##tn(const u32* keys, Strided sk, T* out, i64 num_keys, \
                                              i64 per_key, i64 half, int odd) { \
    nv_random_bits<T>(keys, sk, out, num_keys, per_key, half, odd); }
