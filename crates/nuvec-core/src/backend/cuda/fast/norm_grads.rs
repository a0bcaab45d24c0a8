//! [`FastOp::RmsNormVjp`](crate::fast::FastOp::RmsNormVjp) and
//! [`FastOp::LayerNormVjp`](crate::fast::FastOp::LayerNormVjp) on the GPU
//! (`{rms,layer}_vjp_*` and `norm_parts_*` in `kernels/fast/norms.cu`): the input's cotangent
//! row by row in one pass with the row in registers (the forward kernels' packs), and the
//! parameters' cotangents as float32 partial sums (one row of them per group of rows, kept in
//! shared memory while the group runs) that a second kernel adds in a fixed order, so that
//! every run gives the same bits (no atomics).
//!
//! The kernels take float32, float16 and bfloat16 inputs of one type, rows of at most 512
//! threads of 4 packs of 16 bytes (16,384 bf16 elements), parameters 0-D (none: a zero
//! cotangent) or 1-D of the row's length; other inputs record the fallback graph. Inputs that
//! are not row-major are copied first.

use cudarc::driver::{DeviceRepr, LaunchConfig};

use super::norms::{THREADS, block_of, full_mode, pack_mode, packs, rows_view};
use super::{CudaKernel, Place, with_copies};
use crate::array::ArrayData;
use crate::array::Layout;
use crate::backend::cuda::elementwise::{Strided, type_names};
use crate::backend::cuda::launch::symbol;
use crate::fast::norm_grads::{LayerNormVjp, RmsNormVjp};
use crate::fast::{Arg, kernel_sized};
use crate::primitive::OutputSpec;
use crate::{DType, Error, Result};

/// The most packs a thread of the gradient kernel holds (`NV_NORMS_*_vjp` in `norms.cu`).
pub(super) const VJP_PACKS: usize = 4;

/// Whether the kernel takes `(x, params.., g)`: one kernel type, `g` of `x`'s shape,
/// parameters 0-D or 1-D of the row's length, rows the registers hold.
fn takes_vjp(args: &[Arg<'_>], params: usize) -> bool {
    if !kernel_sized(args) || args.len() != params + 2 {
        return false;
    }
    let x = args[0];
    let n = x.last();
    args.iter().all(|a| a.dtype == x.dtype)
        && args[params + 1].shape == x.shape
        && args[1..=params]
            .iter()
            .all(|p| p.shape.is_empty() || p.shape == [n])
        && packs(n, x.dtype.size(), VJP_PACKS).is_some()
}

impl CudaKernel for RmsNormVjp {
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        takes_vjp(inputs, 1)
    }

    fn eval(
        &self,
        place: &Place,
        inputs: &mut [ArrayData],
        _: &[OutputSpec],
    ) -> Result<Vec<ArrayData>> {
        with_copies(place, "rms_norm_vjp", inputs, |i| {
            norm_vjp(place, &i[0], &i[1], None, &i[2], self.eps)
        })
    }
}

impl CudaKernel for LayerNormVjp {
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        takes_vjp(inputs, 2)
    }

    fn eval(
        &self,
        place: &Place,
        inputs: &mut [ArrayData],
        _: &[OutputSpec],
    ) -> Result<Vec<ArrayData>> {
        with_copies(place, "layer_norm_vjp", inputs, |i| {
            norm_vjp(place, &i[0], &i[1], Some(&i[2]), &i[3], self.eps)
        })
    }
}

/// A parameter's address (null for a 0-D one: absent), or `None` unless 0-D or 1-D with
/// step 1 (the gradient kernel reads it as a row).
fn row_param(place: &Place, p: &ArrayData) -> Result<Option<u64>> {
    match (p.layout.shape.as_slice(), p.layout.strides.as_slice()) {
        ([], _) => Ok(Some(0)),
        ([_], [1]) | ([1], _) => Ok(Some(
            place.input(p)? + (p.layout.offset * p.dtype().size()) as u64,
        )),
        _ => Ok(None),
    }
}

/// A fresh output of `dtype` and `shape`, all zeros (the cotangent of an absent parameter).
fn zeros(place: &Place, dtype: DType, shape: &[usize]) -> Result<ArrayData> {
    let (out, ptr) = place.output(dtype, shape)?;
    let bytes = out.layout.size() * dtype.size();
    // SAFETY: the block was just allocated with (at least) `bytes` bytes on this stream.
    unsafe { cudarc::driver::result::memset_d8_async(ptr, 0, bytes, place.stream.cu_stream()) }
        .map_err(|e| Error::Device(format!("cuda: norm vjp: zero-filling: {e}")))?;
    Ok(out)
}

/// The cotangents of a norm over the last axis of `x` for cotangent `g`: RMS (`bias` `None`)
/// or layer (`bias` given, possibly 0-D); the outputs are `[dx, dw]` or `[dx, dw, db]`.
/// `None` for layouts the kernels cannot read (then `with_copies` copies).
fn norm_vjp(
    place: &Place,
    x: &ArrayData,
    w: &ArrayData,
    bias: Option<&ArrayData>,
    g: &ArrayData,
    eps: f32,
) -> Result<Option<Vec<ArrayData>>> {
    let dtype = x.dtype();
    let shape = x.layout.shape.clone();
    let Some(&n) = shape.last() else {
        return Ok(None);
    };
    if !x.layout.is_row_contiguous() || !g.layout.is_row_contiguous() {
        return Ok(None);
    }
    let (Some(wp), Some(bp)) = (
        row_param(place, w)?,
        match bias {
            Some(b) => row_param(place, b)?,
            None => Some(0),
        },
    ) else {
        return Ok(None);
    };
    let Some((lanes, p)) = packs(n, dtype.size(), VJP_PACKS) else {
        return Ok(None);
    };
    let nrows: usize = shape[..shape.len() - 1].iter().product();
    let (dx, dxp) = place.output(dtype, &shape)?;
    let tn = type_names(dtype).expect("a float type").1;
    let xp = place.input(x)? + (x.layout.offset * dtype.size()) as u64;
    let gp = place.input(g)? + (g.layout.offset * dtype.size()) as u64;
    // Row-major rows: aligned wherever the first is and the row is whole packs.
    let (rows, _) = rows_view(&Layout::contiguous(&[nrows.max(1), n]))
        .ok_or_else(|| Error::Device("cuda: norm vjp: a row-major view".into()))?;
    let one = Strided::of(&Layout::contiguous(&[1]))?;
    let mut views = vec![(xp, &rows, 1), (gp, &rows, 1)];
    if wp != 0 {
        views.push((wp, &one, 1));
    }
    // The symbol's kind and its module's; layer norm's mode may be `full`.
    let (kind, module, mode) = match bias {
        Some(_) => (
            "layer",
            "layer_vjp",
            full_mode(n, dtype, &views, (lanes, p)),
        ),
        None => ("rms", "rms_vjp", pack_mode(n, dtype, &views)),
    };
    let symbol = symbol!("{kind}_vjp_{mode}_{tn}_{p}")?;
    let f = super::norms::kernel(place, dtype, module, p, symbol)?;
    // Shared memory: a float row of the group's span (lanes * P packs) for the weight's sums,
    // and another for the bias's.
    let block = block_of(lanes);
    let groups = block / lanes;
    let span = lanes * p * (16 / dtype.size());
    let shared = groups * span * 4 * if bias.is_some() { 2 } else { 1 };
    if shared > 48 << 10 {
        f.allow_shared(place.gpu.props.shared_per_block)?;
    }
    // One wave of blocks, each looping over its rows: one partial row per group.
    let per_sm = f.resident(block, shared)?;
    let grid = nrows
        .div_ceil(groups)
        .min(place.gpu.props.sms as usize * per_sm);
    let parts = grid * groups;
    let alloc = |on: bool| -> Result<Option<crate::backend::cuda::DeviceBuffer>> {
        if !on {
            return Ok(None);
        }
        Ok(Some(
            place
                .gpu
                .alloc
                .alloc((parts * n).max(1) * 4, place.stream_id)?,
        ))
    };
    let (pw, pb) = (alloc(wp != 0)?, alloc(bp != 0)?);
    let ptr = |b: &Option<crate::backend::cuda::DeviceBuffer>| b.as_ref().map_or(0, |b| b.ptr());
    let (pwp, pbp) = (ptr(&pw), ptr(&pb));
    if grid > 0 && n > 0 {
        let (nr, n64, lanes32) = (nrows as i64, n as i64, lanes as i32);
        let params: [&dyn DeviceRepr; 10] =
            [&xp, &wp, &gp, &dxp, &pwp, &pbp, &nr, &n64, &eps, &lanes32];
        let cfg = LaunchConfig {
            grid_dim: (grid as u32, 1, 1),
            block_dim: (block as u32, 1, 1),
            shared_mem_bytes: shared as u32,
        };
        // SAFETY: x, g and dx are row-major blocks of `nrows · n` elements of one type (x and
        // g from their offsets); `wp` is null or the first of `n` contiguous weights; the
        // packed kernels get only rows that start aligned (`packable`), the `full` one only
        // rows of `lanes · p` packs; the partial blocks (or
        // null where a parameter is absent) hold `grid · groups` rows of `n` floats, one row
        // per group of the grid; `shared` bytes hold each group's sums (the kernel's limit
        // raised above 48 KiB first); the arguments match `{rms,layer}_vjp_*`.
        unsafe { f.launch(&place.stream, cfg, &params) }?;
    }
    let param_grad = |p: &ArrayData, part: u64| -> Result<ArrayData> {
        if part == 0 {
            return zeros(place, p.dtype(), &[]);
        }
        let (out, outp) = place.output(dtype, &[n])?;
        let f = super::norms::kernel(place, dtype, "rows", 0, symbol!("norm_parts_{tn}")?)?;
        let (parts64, n64) = (parts as i64, n as i64);
        let params: [&dyn DeviceRepr; 4] = [&part, &parts64, &n64, &outp];
        let cfg = LaunchConfig {
            grid_dim: (n.div_ceil(32).max(1) as u32, 1, 1),
            block_dim: (THREADS as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: `part` holds `parts` rows of `n` floats, written by the launch before on
        // this stream (every row: each group writes its own, rows or not); `outp` is a fresh
        // block of `n` elements; the arguments match `norm_parts_*`.
        unsafe { f.launch(&place.stream, cfg, &params) }?;
        Ok(out)
    };
    let mut outs = vec![dx, param_grad(w, pwp)?];
    if let Some(b) = bias {
        outs.push(param_grad(b, pbp)?);
    }
    // The partial blocks go back to the cache; only this stream may take them before the
    // queued kernels that read them have run, which stream order makes safe.
    drop((pw, pb));
    Ok(Some(outs))
}
