//! Convolutions on the GPU: the input's patches gathered into a matrix (`kernels/im2col.cu`),
//! one row per output position and one column per (group, tap, channel), then multiplied by
//! the weights with cuBLASLt, every group at once as a strided batch.
//!
//! Every [`ConvOp`] runs here, for `f32`, `f16`, `bf16` (`f32` accumulation) and `f64`:
//! strides, padding (negative padding crops), kernel and input dilation, groups and the
//! flipped kernel, so the transposed convolutions (input dilation plus a flip) and the
//! derivatives run on the GPU too, if with work spent on the zeros between dilated inputs.
//! Other types return `None` (the CPU bridge). The input is read through its strides (no
//! copy); the weights are made row-major first (they are small). A 1×1 kernel at stride 1
//! without padding or dilation over a row-major input multiplies the input in place. The
//! patch matrix is built [`PATCH_ELEMENTS`] at a time, so its memory stays bounded. A
//! depthwise convolution (`groups = C_in = C_out`) becomes a batch of tiny products here:
//! correct, not fast.

use cudarc::driver::DeviceRepr;

use super::Place;
use super::elementwise::{convert, launch_config, type_names};
use super::launch::symbol;
use super::matmul::{Gemm, Side, run_gemm};
use crate::array::ArrayData;
use crate::ops::conv::{ConvOp, dilated};
use crate::primitive::OutputSpec;
use crate::{DType, Error, Result};

const COMMON: &str = include_str!("kernels/common.cuh");
const IM2COL: &str = include_str!("kernels/im2col.cu");

/// Patch-matrix elements built at a time (256 MiB of `f32`).
const PATCH_ELEMENTS: usize = 1 << 26;

/// The types with a kernel.
const TYPES: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];

/// A convolution's geometry as the kernel takes it (`ConvGeom` in `im2col.cu`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct ConvGeom {
    out_sp: [i64; 3],
    k_sp: [i64; 3],
    extent: [i64; 3],
    stride: [i64; 3],
    kdil: [i64; 3],
    idil: [i64; 3],
    lo: [i64; 3],
    x_strides: [i64; 5],
    x_offset: i64,
    groups: i64,
    cg: i64,
    taps: i64,
    row0: i64,
    rows: i64,
    flip: i32,
}

// SAFETY: `ConvGeom` is `repr(C)` plain data with the field order, types and alignment of the
// CUDA struct it mirrors, so passing its bytes as a kernel parameter is what the kernel reads.
unsafe impl DeviceRepr for ConvGeom {}

/// The module holding the patch kernel of every type.
fn im2col_source() -> String {
    let mut src = format!("{COMMON}\n{IM2COL}\n");
    for dtype in TYPES {
        let (ct, tn) = type_names(dtype).expect("float types have kernels");
        src.push_str(&format!("NV_IM2COL({ct}, {tn})\n"));
    }
    src
}

/// The geometry of `op` over input `x` (`[N, *spatial, C_in]`) for the output `out`, every
/// problem seen as 3-D with leading axes of size 1; `row0`/`rows` are set per block.
fn geometry(op: &ConvOp, x: &ArrayData, w_shape: &[usize], out: &[usize]) -> ConvGeom {
    let d = op.spatial();
    let lead = 3 - d;
    let (xs, st) = (&x.layout.shape, &x.layout.strides);
    let mut g = ConvGeom {
        out_sp: [1; 3],
        k_sp: [1; 3],
        extent: [1; 3],
        stride: [1; 3],
        kdil: [1; 3],
        idil: [1; 3],
        lo: [0; 3],
        x_strides: [st[0] as i64, 0, 0, 0, st[d + 1] as i64],
        x_offset: x.layout.offset as i64,
        groups: op.groups as i64,
        cg: (xs[d + 1] / op.groups) as i64,
        taps: 1,
        row0: 0,
        rows: 0,
        flip: i32::from(op.flip),
    };
    for i in 0..d {
        let a = lead + i;
        g.out_sp[a] = out[i + 1] as i64;
        g.k_sp[a] = w_shape[i + 1] as i64;
        g.extent[a] = dilated(xs[i + 1], op.input_dilation[i]) as i64;
        g.stride[a] = op.strides[i] as i64;
        g.kdil[a] = op.kernel_dilation[i] as i64;
        g.idil[a] = op.input_dilation[i] as i64;
        g.lo[a] = op.padding_lo[i] as i64;
        g.x_strides[a + 1] = st[i + 1] as i64;
    }
    g.taps = g.k_sp.iter().product();
    g
}

/// A convolution on the GPU, or `None` for types without a kernel.
pub(crate) fn eval(
    place: &Place,
    op: &ConvOp,
    inputs: &mut [ArrayData],
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    let (shape, dtype) = (&outputs[0].0, outputs[0].1);
    if !TYPES.contains(&dtype) {
        return Ok(None);
    }
    let (out, out_ptr) = place.output(dtype, shape)?;
    if out.layout.size() == 0 {
        return Ok(Some(vec![out]));
    }
    let x = &inputs[0];
    let w = if inputs[1].layout.is_row_contiguous() {
        inputs[1].clone()
    } else {
        convert(place, &inputs[1], dtype)?
            .ok_or_else(|| Error::Device(format!("cuda: conv: no copy kernel for {dtype}")))?
    };
    let mut geo = geometry(op, x, &w.layout.shape, shape);
    let (groups, cg) = (op.groups, geo.cg as usize);
    let c_out = *shape.last().expect("the output has a channel axis");
    let og = c_out / groups;
    let kc = geo.taps as usize * cg;
    let rows = out.layout.size() / c_out;
    let size = dtype.size() as u64;
    if kc == 0 {
        // No input channels or taps: every output is an empty sum.
        let bytes = out.layout.size() * dtype.size();
        // SAFETY: the output block was just allocated with `bytes` bytes on this stream.
        unsafe {
            cudarc::driver::result::memset_d8_async(out_ptr, 0, bytes, place.stream.cu_stream())
        }
        .map_err(|e| Error::Device(format!("cuda: conv: zero-filling: {e}")))?;
        return Ok(Some(vec![out]));
    }
    let w_ptr = place.input(&w)? + w.layout.offset as u64 * size;
    let x_ptr = place.input(x)?;
    // Group `g`'s weights as `A`: the row-major `[og, kc]` block at `g·og·kc`, transposed.
    let a = Side {
        trans: true,
        ld: kc as i64,
        stride: (og * kc) as i64,
    };
    let gemm = |n: usize, b: Side| Gemm {
        m: og as u64,
        n: n as u64,
        k: kc as u64,
        a,
        b,
        d_ld: c_out as i64,
        d_stride: og as i64,
        batch: i32::try_from(groups).unwrap_or(i32::MAX),
    };
    if groups > i32::MAX as usize {
        return Err(Error::Unsupported {
            op: "conv_general",
            what: format!("{groups} groups on the GPU"),
        });
    }
    let in_place = geo.taps == 1
        && op.strides.iter().all(|&s| s == 1)
        && op.input_dilation.iter().all(|&s| s == 1)
        && op.padding_lo.iter().chain(&op.padding_hi).all(|&p| p == 0)
        && x.layout.is_row_contiguous();
    if in_place {
        // The input's rows are the patches: group `g` reads channels `g·cg..` of each row.
        let c_in = groups * cg;
        let b = Side {
            trans: false,
            ld: c_in as i64,
            stride: cg as i64,
        };
        let start = x_ptr + x.layout.offset as u64 * size;
        run_gemm(
            place,
            dtype,
            gemm(rows, b),
            &[[w_ptr, start, out_ptr]],
            1.0,
            0.0,
        )?;
        return Ok(Some(vec![out]));
    }
    let width = groups * kc;
    let block = (PATCH_ELEMENTS / width).clamp(1, rows);
    let patches = place
        .gpu
        .alloc
        .alloc(block * width * dtype.size(), place.stream_id)?;
    let (_, tn) = type_names(dtype).expect("float types have kernels");
    let f = place
        .gpu
        .kernel_of("im2col", None, symbol!("im2col_{tn}")?, im2col_source)?;
    let b = Side {
        trans: false,
        ld: width as i64,
        stride: kc as i64,
    };
    let mut row0 = 0;
    while row0 < rows {
        let n = block.min(rows - row0);
        geo.row0 = row0 as i64;
        geo.rows = n as i64;
        let p_ptr = patches.ptr();
        let params: [&dyn DeviceRepr; 3] = [&x_ptr, &p_ptr, &geo];
        // SAFETY: the kernel writes `n · width` elements of the patch block, which holds
        // `block · width >= n · width`; it reads the input only at positions that the
        // geometry places inside the input's layout (taps outside read nothing), within its
        // live block; the arguments match `im2col_<type>`.
        unsafe { f.launch(&place.stream, launch_config(n * width), &params) }?;
        let d_ptr = out_ptr + (row0 * c_out) as u64 * size;
        run_gemm(place, dtype, gemm(n, b), &[[w_ptr, p_ptr, d_ptr]], 1.0, 0.0)?;
        row0 += n;
    }
    // The patch block goes back to the cache; only this stream may take it before the queued
    // work that reads it has run, which stream order makes safe.
    drop(patches);
    Ok(Some(vec![out]))
}

/// Every kernel source of this family, complete, for compiling ahead of time (CI).
#[cfg(test)]
pub(crate) fn all_sources() -> Vec<(String, String)> {
    vec![("im2col".to_string(), im2col_source())]
}
