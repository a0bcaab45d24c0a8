// The patch matrix of a convolution (im2col), for the matrix product that computes it.
// Every problem is seen as 3-D (unused leading spatial axes have size 1). Row `r` of the
// matrix is output position `row0 + r` (batch, then spatial axes, row-major); its columns are
// `[groups][taps][cg]`, so that group `g`'s patches are a `taps · cg` wide block in the
// weight's (tap, channel) order. A tap that falls on padding, or between the elements of a
// dilated input, reads zero. Mirrors `ConvGeom` in conv.rs.

struct ConvGeom {
  i64 out_sp[3];     // output positions per spatial axis
  i64 k_sp[3];       // kernel taps per spatial axis
  i64 extent[3];     // the dilated input's extent per spatial axis
  i64 stride[3];
  i64 kdil[3];       // kernel dilation
  i64 idil[3];       // input dilation
  i64 lo[3];         // padding before (negative crops)
  i64 x_strides[5];  // the input's strides: batch, three spatial axes, channel
  i64 x_offset;
  i64 groups;
  i64 cg;            // input channels per group
  i64 taps;          // k_sp[0] · k_sp[1] · k_sp[2]
  i64 row0;          // the first output position of this block
  i64 rows;          // output positions in this block
  i32 flip;          // reversed kernel (a true convolution)
};

template <typename T>
__device__ __forceinline__ void nv_im2col(const T* __restrict__ x, T* __restrict__ p, const ConvGeom& g) {
  const i64 n_el = g.rows * g.groups * g.taps * g.cg;
  NV_FOR_EACH(i, n_el) {
    const i64 c = i % g.cg;
    i64 rest = i / g.cg;
    const i64 t = rest % g.taps;
    rest /= g.taps;
    const i64 grp = rest % g.groups;
    i64 r = rest / g.groups + g.row0;
    i64 o[3], k[3];
    o[2] = r % g.out_sp[2]; r /= g.out_sp[2];
    o[1] = r % g.out_sp[1]; r /= g.out_sp[1];
    o[0] = r % g.out_sp[0];
    const i64 batch = r / g.out_sp[0];
    k[2] = t % g.k_sp[2];
    k[1] = (t / g.k_sp[2]) % g.k_sp[1];
    k[0] = t / (g.k_sp[2] * g.k_sp[1]);
    i64 at = g.x_offset + batch * g.x_strides[0] + (grp * g.cg + c) * g.x_strides[4];
    bool inside = true;
    for (int a = 0; a < 3; ++a) {
      const i64 tap = g.flip ? g.k_sp[a] - 1 - k[a] : k[a];
      const i64 q = o[a] * g.stride[a] + tap * g.kdil[a] - g.lo[a];
      if (q < 0 || q >= g.extent[a] || q % g.idil[a] != 0) { inside = false; break; }
      at += (q / g.idil[a]) * g.x_strides[a + 1];
    }
    p[i] = inside ? x[at] : T(0.0f);
  }
}

#define NV_IM2COL(T, tn) \
  extern "C" __global__ void im2col_##tn(const T* x, T* p, ConvGeom g) { nv_im2col<T>(x, p, g); }
