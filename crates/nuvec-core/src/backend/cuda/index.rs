//! Indexing on the GPU: `take`, `gather`, `take_along_axis`, the scatters and
//! `slice_update`, with the CPU backend's semantics (negative indices count from the end;
//! gathers clamp indices still out of range, scatters drop them). Also the strided copy into
//! an offset and the fill that the shape family's joins use.
//!
//! As on the CPU, indices become buffer positions first (`index_pos_<index type>` modules),
//! then the value kernels (`index_<element type>` modules) only move elements. Scatters write
//! into their target's device block when the evaluation owns it alone, row-major from
//! element 0, already on this device and stream (or only on the host: then it is uploaded
//! once); otherwise into a copy. Repeated scatter indices combine atomically; with
//! `Replace`, one of the updates wins (the CPU's: the last one).
//!
//! Cases left to the CPU bridge (`Ok(None)`): complex elements, and a view (input, index
//! array, update or target region) whose axes do not merge into at most eight.

use std::sync::Arc;

use cudarc::driver::{DeviceRepr, result};

use super::elementwise::{Strided, launch_config, type_names};
use super::launch::{Kernel, symbol};
use super::{DeviceBuffer, DeviceCopy, Place};
use crate::array::{ArrayData, Layout, row_major_strides};
use crate::backend::common::donation::{donatable, take_donated};
use crate::backend::common::index::slice_region;
use crate::ops::index::{IndexOp, ScatterMode};
use crate::primitive::OutputSpec;
use crate::{DType, Error, Result};

const COMMON: &str = include_str!("kernels/common.cuh");
const INDEX: &str = include_str!("kernels/index.cu");

/// The module of every value kernel of one element type.
fn value_source(dtype: DType) -> String {
    let (ct, tn) = type_names(dtype).expect("complex has no kernels");
    format!("{COMMON}\n{INDEX}\nNV_INDEX({ct}, {tn})\n")
}

/// The module of the position kernels of one index type.
fn pos_source(dtype: DType) -> String {
    let (ct, tn) = type_names(dtype).expect("index types have kernels");
    format!("{COMMON}\n{INDEX}\nNV_INDEX_POS({ct}, {tn})\n")
}

/// Kernel `<stem>_<type>` of `dtype` in module `<family>_<type>`, whose source `source`
/// gives.
fn kernel_of(
    place: &Place,
    (family, source): (&'static str, fn(DType) -> String),
    dtype: DType,
    stem: &str,
) -> Result<Kernel> {
    let tn = super::dtype::suffix(dtype)?;
    place
        .gpu
        .kernel_of(family, Some(dtype), symbol!("{stem}_{tn}")?, || {
            source(dtype)
        })
}

/// Value kernel `<stem>_<type>` of element type `dtype`.
fn value_kernel(place: &Place, dtype: DType, stem: &str) -> Result<Kernel> {
    kernel_of(place, ("index", value_source), dtype, stem)
}

/// Position kernel `<stem>_<type>` of index type `dtype`.
fn pos_kernel(place: &Place, dtype: DType, stem: &str) -> Result<Kernel> {
    kernel_of(place, ("index_pos", pos_source), dtype, stem)
}

/// The kernel-name part of a combining mode.
fn mode_name(mode: ScatterMode) -> &'static str {
    match mode {
        ScatterMode::Replace => "replace",
        ScatterMode::Sum => "sum",
        ScatterMode::Prod => "prod",
        ScatterMode::Max => "max",
        ScatterMode::Min => "min",
    }
}

/// `layout` as a kernel view, or `None` past eight axes that do not merge.
fn view(layout: &Layout) -> Option<Strided> {
    Strided::of(layout).ok()
}

/// The views of several layouts, or `None` if any has no view.
fn views(layouts: &[&Layout]) -> Option<Vec<Strided>> {
    layouts.iter().map(|l| view(l)).collect()
}

/// The device address of element `layout.offset` of `data` (its first element in a
/// row-major layout).
fn start_of(place: &Place, data: &ArrayData) -> Result<u64> {
    Ok(place.input(data)? + (data.layout.offset * data.dtype().size()) as u64)
}

/// An indexing primitive on the GPU, or `None` where the CPU bridge runs it (see the module
/// doc).
pub(crate) fn eval(
    place: &Place,
    op: &IndexOp,
    inputs: &mut [ArrayData],
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    if type_names(inputs[0].dtype()).is_none() {
        return Ok(None);
    }
    let shape = &outputs[0].0;
    let out = match op {
        IndexOp::Take { axis } => take(place, inputs, *axis, shape)?,
        IndexOp::Gather { axes, slice_sizes } => gather(place, inputs, axes, slice_sizes, shape)?,
        IndexOp::GatherAxis { axis } => gather_axis(place, inputs, *axis)?,
        IndexOp::Scatter { axes, mode } => scatter(place, inputs, axes, *mode)?,
        IndexOp::ScatterAxis { axis, mode } => scatter_axis(place, inputs, *axis, *mode)?,
        IndexOp::SliceUpdate { start, step, mode } => {
            slice_update(place, inputs, start, step, *mode)?
        }
    };
    Ok(out.map(|d| vec![d]))
}

/// One index array of a window gather or scatter: its view and the axis it indexes (size,
/// window along it, stride of one step in the indexed array).
struct IndexArg<'a> {
    data: &'a ArrayData,
    view: Strided,
    dim: usize,
    window: usize,
    stride: isize,
}

/// The views of index arrays, or `None` if one has none (or an index type is not an integer).
fn index_views(indices: &[ArrayData]) -> Option<Vec<Strided>> {
    if indices.iter().any(|i| !i.dtype().is_integer()) {
        return None;
    }
    indices.iter().map(|i| view(&i.layout)).collect()
}

/// For each of `n` index positions (`n` > 0), the sum over the index arrays of stride ×
/// window start, in a fresh device block; `None` without index arrays (one position, at 0:
/// the kernels read a null pointer so).
fn window_bases(
    place: &Place,
    args: &[IndexArg<'_>],
    n: usize,
    skip: bool,
) -> Result<Option<DeviceBuffer>> {
    if args.is_empty() {
        return Ok(None);
    }
    let bases = place.gpu.alloc.alloc(n * 8, place.stream_id)?;
    let ptr = bases.ptr();
    let n64 = n as i64;
    for (k, arg) in args.iter().enumerate() {
        let f = pos_kernel(place, arg.data.dtype(), "index_bases")?;
        let src = place.input(arg.data)?;
        let (dim, window, stride) = (arg.dim as i64, arg.window as i64, arg.stride as i64);
        let (skip, first) = (i32::from(skip), i32::from(k == 0));
        let params: [&dyn DeviceRepr; 9] = [
            &src, &arg.view, &ptr, &n64, &dim, &window, &stride, &skip, &first,
        ];
        // SAFETY: the view addresses the index array's `n` elements inside its block; the
        // positions block holds `n` i64 values (written by the first launch before any
        // later one reads it: one stream); the arguments match `index_bases_<type>`.
        unsafe { f.launch(&place.stream, launch_config(n), &params) }?;
    }
    Ok(Some(bases))
}

/// For each of the `n` (> 0) elements of index array `idx` (viewed as `iview`), the buffer
/// position it addresses along `axis`: `others` gives the position of every other axis
/// (the indexed array's strides over the indices' shape, 0 on `axis`), `along` the stride
/// of one step on `axis`, `dim` its size.
#[allow(clippy::too_many_arguments)]
fn axis_positions(
    place: &Place,
    idx: &ArrayData,
    iview: &Strided,
    others: &Strided,
    n: usize,
    dim: usize,
    along: isize,
    skip: bool,
) -> Result<DeviceBuffer> {
    let pos = place.gpu.alloc.alloc(n * 8, place.stream_id)?;
    let ptr = pos.ptr();
    let f = pos_kernel(place, idx.dtype(), "index_axis")?;
    let src = place.input(idx)?;
    let (n64, dim, along, skip) = (n as i64, dim as i64, along as i64, i32::from(skip));
    let params: [&dyn DeviceRepr; 8] = [&src, iview, others, &ptr, &n64, &dim, &along, &skip];
    // SAFETY: the index view addresses `n` elements inside the index block; the positions
    // block holds `n` i64 values; the arguments match `index_axis_<type>`.
    unsafe { f.launch(&place.stream, launch_config(n), &params) }?;
    Ok(pos)
}

/// A window gather into `out_ptr`: `no · np · nb` elements (`total`, > 0), element
/// `(o, p, b)` read at `outer(o) + bases[p] + block(b)` in `a`'s buffer.
#[allow(clippy::too_many_arguments)]
fn gather_blocks(
    place: &Place,
    a: &ArrayData,
    out_ptr: u64,
    bases: Option<&DeviceBuffer>,
    np: usize,
    nb: usize,
    total: usize,
    outer: &Strided,
    block: &Strided,
) -> Result<()> {
    let f = value_kernel(place, a.dtype(), "gather_blocks")?;
    let src = place.input(a)?;
    let bases = bases.map_or(0, |b| b.ptr());
    let (np, nb, total64) = (np as i64, nb as i64, total as i64);
    let params: [&dyn DeviceRepr; 8] = [&src, &out_ptr, &bases, &np, &nb, &total64, outer, block];
    // SAFETY: every position read is an element of `a`'s view (gathers clamp their windows
    // inside the axes), inside its block; the output block holds `total` elements; the
    // positions block (or null, for one position at 0) holds `np` values; the arguments
    // match `gather_blocks_<type>`.
    unsafe { f.launch(&place.stream, launch_config(total), &params) }?;
    Ok(())
}

/// A window gather of `a` into new data of `shape`: for each position of `outer` (whose
/// offset is `a`'s), a `block` at each of the `np` positions `args` give; `None` where a
/// view has no kernel form.
fn gather_windows(
    place: &Place,
    a: &ArrayData,
    shape: &[usize],
    (outer, block): (&Layout, &Layout),
    args: &[IndexArg<'_>],
    np: usize,
) -> Result<Option<ArrayData>> {
    let Some(v) = views(&[outer, block]) else {
        return Ok(None);
    };
    let (out, out_ptr) = place.output(a.dtype(), shape)?;
    let nb = block.size();
    let total = outer.size() * np * nb;
    if total == 0 {
        return Ok(Some(out));
    }
    let bases = window_bases(place, args, np, false)?;
    gather_blocks(
        place,
        a,
        out_ptr,
        bases.as_ref(),
        np,
        nb,
        total,
        &v[0],
        &v[1],
    )?;
    Ok(Some(out))
}

/// `take`: blocks of `a`'s trailing axes at each index, for each position of its leading
/// axes.
fn take(
    place: &Place,
    inputs: &[ArrayData],
    axis: usize,
    shape: &[usize],
) -> Result<Option<ArrayData>> {
    let (a, idx) = (&inputs[0], &inputs[1]);
    let l = &a.layout;
    let outer = Layout {
        shape: l.shape[..axis].to_vec(),
        strides: l.strides[..axis].to_vec(),
        offset: l.offset,
    };
    let block = Layout {
        shape: l.shape[axis + 1..].to_vec(),
        strides: l.strides[axis + 1..].to_vec(),
        offset: 0,
    };
    let Some(iv) = index_views(std::slice::from_ref(idx)) else {
        return Ok(None);
    };
    let arg = IndexArg {
        data: idx,
        view: iv[0],
        dim: l.shape[axis],
        window: 1,
        stride: l.strides[axis],
    };
    gather_windows(place, a, shape, (&outer, &block), &[arg], idx.layout.size())
}

/// MLX's gather: one window of `slice_sizes` per index position.
fn gather(
    place: &Place,
    inputs: &[ArrayData],
    axes: &[usize],
    slice_sizes: &[usize],
    shape: &[usize],
) -> Result<Option<ArrayData>> {
    let (a, indices) = (&inputs[0], &inputs[1..]);
    let l = &a.layout;
    let outer = Layout {
        shape: Vec::new(),
        strides: Vec::new(),
        offset: l.offset,
    };
    let block = Layout {
        shape: slice_sizes.to_vec(),
        strides: l.strides.clone(),
        offset: 0,
    };
    let Some(iv) = index_views(indices) else {
        return Ok(None);
    };
    let np = indices.first().map_or(1, |i| i.layout.size());
    let args: Vec<IndexArg<'_>> = indices
        .iter()
        .zip(axes)
        .zip(iv)
        .map(|((data, &axis), view)| IndexArg {
            data,
            view,
            dim: l.shape[axis],
            window: slice_sizes[axis],
            stride: l.strides[axis],
        })
        .collect();
    gather_windows(place, a, shape, (&outer, &block), &args, np)
}

/// `take_along_axis`: one element per index.
fn gather_axis(place: &Place, inputs: &[ArrayData], axis: usize) -> Result<Option<ArrayData>> {
    let (a, idx) = (&inputs[0], &inputs[1]);
    let l = &a.layout;
    let mut strides = l.strides.clone();
    strides[axis] = 0;
    let others = Layout {
        shape: idx.layout.shape.clone(),
        strides,
        offset: l.offset,
    };
    let (Some(ov), Some(iv)) = (view(&others), index_views(std::slice::from_ref(idx))) else {
        return Ok(None);
    };
    let (out, out_ptr) = place.output(a.dtype(), &idx.layout.shape)?;
    let n = idx.layout.size();
    if n == 0 {
        return Ok(Some(out));
    }
    let pos = axis_positions(
        place,
        idx,
        &iv[0],
        &ov,
        n,
        l.shape[axis],
        l.strides[axis],
        false,
    )?;
    let f = value_kernel(place, a.dtype(), "gather_pos")?;
    let src = place.input(a)?;
    let (pos_ptr, n64) = (pos.ptr(), n as i64);
    let params: [&dyn DeviceRepr; 4] = [&src, &pos_ptr, &out_ptr, &n64];
    // SAFETY: the positions are elements of `a`'s view (clamped), inside its block; both the
    // positions and the output hold `n` elements; the arguments match `gather_pos_<type>`.
    unsafe { f.launch(&place.stream, launch_config(n), &params) }?;
    Ok(Some(out))
}

/// Copies the `n` elements of `src` (viewed as `sv`) into the view `dv` of the block at
/// `dst`, combining them with `mode`: the view's positions must be distinct. `Replace` is
/// the strided copy into an offset that joins use.
pub(crate) fn update_into(
    place: &Place,
    dst: u64,
    dv: &Strided,
    src: &ArrayData,
    sv: &Strided,
    n: usize,
    mode: ScatterMode,
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    let stem = format!("update_{}", mode_name(mode));
    let f = value_kernel(place, src.dtype(), &stem)?;
    let sp = place.input(src)?;
    let n64 = n as i64;
    let params: [&dyn DeviceRepr; 5] = [&dst, dv, &sp, sv, &n64];
    // SAFETY: the caller's destination view addresses `n` distinct elements inside the block
    // at `dst`, which this stream writes; the source view addresses elements inside the
    // source's block; the arguments match `update_<mode>_<type>`.
    unsafe { f.launch(&place.stream, launch_config(n), &params) }?;
    Ok(())
}

/// Fills the `n` elements at `dst` with the element at `value`'s offset.
pub(crate) fn fill(place: &Place, dst: u64, n: usize, value: &ArrayData) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    let f = value_kernel(place, value.dtype(), "fill")?;
    let v = start_of(place, value)?;
    let n64 = n as i64;
    let params: [&dyn DeviceRepr; 3] = [&dst, &n64, &v];
    // SAFETY: the block at `dst` holds `n` elements of the value's type; `v` is an element
    // inside the value's block; the arguments match `fill_<type>`.
    unsafe { f.launch(&place.stream, launch_config(n), &params) }?;
    Ok(())
}

/// The target of a scatter as row-major data of its own on this device, and its address:
/// `x`'s block itself when it may be written in place (see the module doc), else a copy.
/// `None` (with `x` untouched) when `x` has no kernel view.
pub(crate) fn target(place: &Place, x: &mut ArrayData) -> Result<Option<(ArrayData, u64)>> {
    let Some(xv) = view(&x.layout) else {
        return Ok(None);
    };
    let n = x.layout.size();
    // A block produced on another stream stays with that stream: copy rather than write it.
    let here = x
        .buffer
        .device::<DeviceCopy>()
        .is_none_or(|c| c.ordinal == place.gpu.ordinal && c.stream_id == place.stream_id);
    let spec = (x.layout.shape.clone(), x.dtype());
    if here && donatable(x, (&spec.0, spec.1)) {
        place.input(x)?;
        let ptr = Arc::get_mut(&mut x.buffer)
            .and_then(|b| b.device_for_write::<DeviceCopy>())
            .map(DeviceCopy::ptr);
        if let Some(ptr) = ptr {
            return Ok(Some((take_donated(x), ptr)));
        }
    }
    let (out, out_ptr) = place.output(x.dtype(), &x.layout.shape)?;
    if n == 0 {
        return Ok(Some((out, out_ptr)));
    }
    if x.layout.is_row_contiguous() {
        let src = start_of(place, x)?;
        let bytes = n * x.dtype().size();
        // SAFETY: both blocks hold `n` elements from these addresses (the source's from its
        // offset, row-major); the copy is queued on this stream, after the source's writer.
        unsafe { result::memcpy_dtod_async(out_ptr, src, bytes, place.stream.cu_stream()) }
            .map_err(|e| Error::Device(format!("cuda: copying a scatter target: {e}")))?;
    } else {
        let dv = view(&Layout::contiguous(&x.layout.shape)).expect("row-major views merge");
        update_into(place, out_ptr, &dv, x, &xv, n, ScatterMode::Replace)?;
    }
    Ok(Some((out, out_ptr)))
}

/// MLX's scatter: `(a, indices.., updates)`.
fn scatter(
    place: &Place,
    inputs: &mut [ArrayData],
    axes: &[usize],
    mode: ScatterMode,
) -> Result<Option<ArrayData>> {
    let (first, rest) = inputs.split_at_mut(1);
    let a = &mut first[0];
    let (indices, updates) = rest.split_at(axes.len());
    let updates = &updates[0];
    let shape = a.layout.shape.clone();
    let strides = row_major_strides(&shape);
    let index_nd = updates.layout.shape.len() - shape.len();
    let window = Layout {
        shape: updates.layout.shape[index_nd..].to_vec(),
        strides: strides.clone(),
        offset: 0,
    };
    let (Some(v), Some(iv)) = (views(&[&window, &updates.layout]), index_views(indices)) else {
        return Ok(None);
    };
    let Some((out, out_ptr)) = target(place, a)? else {
        return Ok(None);
    };
    let np = indices.first().map_or(1, |i| i.layout.size());
    let nw = window.size();
    if np * nw == 0 {
        return Ok(Some(out));
    }
    let args: Vec<IndexArg<'_>> = indices
        .iter()
        .zip(axes)
        .zip(iv)
        .map(|((data, &axis), view)| IndexArg {
            data,
            view,
            dim: shape[axis],
            window: window.shape[axis],
            stride: strides[axis],
        })
        .collect();
    let bases = window_bases(place, &args, np, true)?;
    let stem = format!("scatter_{}", mode_name(mode));
    let f = value_kernel(place, out.dtype(), &stem)?;
    let up = place.input(updates)?;
    let bases_ptr = bases.as_ref().map_or(0, |b| b.ptr());
    let (np64, nw64) = (np as i64, nw as i64);
    let params: [&dyn DeviceRepr; 7] = [&out_ptr, &up, &v[1], &bases_ptr, &np64, &nw64, &v[0]];
    // SAFETY: positions not dropped place whole windows inside the target (scatters drop
    // windows that do not fit), a row-major block of `a`'s size that this stream writes;
    // the updates view addresses `np · nw` elements inside their block; the arguments
    // match `scatter_<mode>_<type>`.
    unsafe { f.launch(&place.stream, launch_config(np * nw), &params) }?;
    Ok(Some(out))
}

/// `put_along_axis` and friends: `(a, indices, values)`.
fn scatter_axis(
    place: &Place,
    inputs: &mut [ArrayData],
    axis: usize,
    mode: ScatterMode,
) -> Result<Option<ArrayData>> {
    let (first, rest) = inputs.split_at_mut(1);
    let a = &mut first[0];
    let (idx, values) = (&rest[0], &rest[1]);
    let shape = a.layout.shape.clone();
    let strides = row_major_strides(&shape);
    let mut zeroed = strides.clone();
    zeroed[axis] = 0;
    let others = Layout {
        shape: idx.layout.shape.clone(),
        strides: zeroed,
        offset: 0,
    };
    let (Some(v), Some(iv)) = (
        views(&[&others, &values.layout]),
        index_views(std::slice::from_ref(idx)),
    ) else {
        return Ok(None);
    };
    let Some((out, out_ptr)) = target(place, a)? else {
        return Ok(None);
    };
    let n = idx.layout.size();
    if n == 0 {
        return Ok(Some(out));
    }
    let pos = axis_positions(
        place,
        idx,
        &iv[0],
        &v[0],
        n,
        shape[axis],
        strides[axis],
        true,
    )?;
    let stem = format!("scatter_pos_{}", mode_name(mode));
    let f = value_kernel(place, out.dtype(), &stem)?;
    let vp = place.input(values)?;
    let (pos_ptr, n64) = (pos.ptr(), n as i64);
    let params: [&dyn DeviceRepr; 5] = [&out_ptr, &pos_ptr, &vp, &v[1], &n64];
    // SAFETY: positions not dropped are elements of the row-major target of `a`'s shape,
    // which this stream writes; the values view addresses `n` elements inside their block;
    // the arguments match `scatter_pos_<mode>_<type>`.
    unsafe { f.launch(&place.stream, launch_config(n), &params) }?;
    Ok(Some(out))
}

/// `slice_update` and friends: `(src, update)`, the update of the region's shape.
fn slice_update(
    place: &Place,
    inputs: &mut [ArrayData],
    start: &[usize],
    step: &[isize],
    mode: ScatterMode,
) -> Result<Option<ArrayData>> {
    let (first, rest) = inputs.split_at_mut(1);
    let (src, update) = (&mut first[0], &rest[0]);
    let (offset, strides) = slice_region(&src.layout.shape, start, step);
    let region = Layout {
        shape: update.layout.shape.clone(),
        strides,
        offset,
    };
    let Some(v) = views(&[&region, &update.layout]) else {
        return Ok(None);
    };
    let Some((out, out_ptr)) = target(place, src)? else {
        return Ok(None);
    };
    // The region's positions are distinct (no step is 0): no atomics needed.
    update_into(
        place,
        out_ptr,
        &v[0],
        update,
        &v[1],
        update.layout.size(),
        mode,
    )?;
    Ok(Some(out))
}

/// Every kernel source of this family, complete, for compiling ahead of time (CI).
#[cfg(test)]
pub(crate) fn all_sources() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for d in DType::ALL {
        let Some((_, tn)) = type_names(d) else {
            continue;
        };
        out.push((format!("index_{tn}"), value_source(d)));
        if d.is_integer() {
            out.push((format!("index_pos_{tn}"), pos_source(d)));
        }
    }
    out
}
