//! The sort primitives on the GPU: `sort`/`argsort`, `partition`/`argpartition` (and so
//! `topk`) and `searchsorted`, with the CPU backend's order (NumPy's: stable, NaN last,
//! `-0.0` equal to `0.0`) and the same output layout (each lane contiguous).
//!
//! Elements are compared as (key, index) pairs, the key being the CPU's order-preserving
//! unsigned integer, so every pair is distinct and any correct sort is the stable one. Lanes
//! of at most [`TILE`] elements are sorted one per block in shared memory; longer lanes are
//! sorted a tile per block, then merged pairwise in global memory until one run is left.
//! `partition` is that full sort: it satisfies the partition contract, and position `kth`
//! holds exactly the CPU's element (the CPU selects on the same pairs).
//!
//! Cases left to the CPU (`Ok(None)`): complex inputs (no kernels), and inputs whose view,
//! with the sorted axis moved last, keeps more than eight axes after merging.

use cudarc::driver::{DeviceRepr, LaunchConfig};

use super::Place;
use super::elementwise::{Strided, launch_config, type_names};
use super::launch::symbol;
use crate::array::{ArrayData, Layout};
use crate::backend::cpu::sort::lane_layout;
use crate::ops::sort::SortOp;
use crate::primitive::OutputSpec;
use crate::{DType, Result};

const COMMON: &str = include_str!("kernels/common.cuh");
const SORT: &str = include_str!("kernels/sort.cu");

/// Lanes up to this length are sorted by one block; longer ones in tiles of it
/// (`NV_SORT_TILE` in `sort.cu`).
const TILE: usize = 4096;

/// The CUDA type of the sort key of `dtype`: 64 bits for 8-byte types, else 32.
fn key_type(dtype: DType) -> (&'static str, usize) {
    if dtype.size() == 8 {
        ("u64", 8)
    } else {
        ("u32", 4)
    }
}

/// The module of every sort kernel of one element type.
fn sort_source(dtype: DType) -> String {
    let (ct, tn) = type_names(dtype).expect("sortable types have kernels");
    format!(
        "{COMMON}\n{SORT}\nNV_SORT({ct}, {}, {tn})\n",
        key_type(dtype).0
    )
}

/// A sort primitive on the GPU, or `None` where it runs on the host (see the module doc).
pub(crate) fn eval(
    place: &Place,
    op: &SortOp,
    inputs: &[ArrayData],
    _outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    match *op {
        SortOp::Sort { axis } | SortOp::Partition { axis, .. } => lanes(place, &inputs[0], axis),
        SortOp::SearchSorted { right } => search(place, &inputs[0], &inputs[1], right),
        #[allow(unreachable_patterns)] // the enum is non-exhaustive
        _ => Ok(None),
    }
}

/// The view of `layout` with `axis` moved last, merged into at most eight axes, or `None`.
fn axis_last(layout: &Layout, axis: usize) -> Option<Strided> {
    let mut shape = layout.shape.clone();
    let mut strides = layout.strides.clone();
    let n = shape.remove(axis);
    let s = strides.remove(axis);
    shape.push(n);
    strides.push(s);
    Strided::of(&Layout {
        shape,
        strides,
        offset: layout.offset,
    })
    .ok()
}

/// Every lane of `x` along `axis` sorted: (values, `u32` indices), lanes contiguous.
fn lanes(place: &Place, x: &ArrayData, axis: usize) -> Result<Option<Vec<ArrayData>>> {
    let dtype = x.dtype();
    let Some((_, tn)) = type_names(dtype) else {
        return Ok(None);
    };
    let Some(view) = axis_last(&x.layout, axis) else {
        return Ok(None);
    };
    let shape = &x.layout.shape;
    let size = x.layout.size();
    let layout = lane_layout(shape, axis);
    let (values, vals_ptr) = place.output(dtype, &[size])?;
    let (indices, inds_ptr) = place.output(DType::U32, &[size])?;
    let done = |values: ArrayData, indices: ArrayData| {
        Ok(Some(vec![
            values.view(layout.clone()),
            indices.view(layout.clone()),
        ]))
    };
    if size == 0 {
        return done(values, indices);
    }
    let n = shape[axis];
    let rows = size / n;
    let src = place.input(x)?;
    let (n64, rows64) = (n as i64, rows as i64);
    let function = |name: &str| {
        place
            .gpu
            .kernel_of("sort", Some(dtype), symbol!("{name}_{tn}")?, || {
                sort_source(dtype)
            })
    };
    let key_bytes = key_type(dtype).1;
    if n <= TILE {
        let p = n.next_power_of_two();
        let f = function("sort_rows")?;
        let cfg = block_config(rows, p, key_bytes);
        let p64 = p as i64;
        let params: [&dyn DeviceRepr; 7] = [&src, &view, &rows64, &n64, &p64, &vals_ptr, &inds_ptr];
        // SAFETY: the view addresses `rows · n` elements inside the input's block (alive
        // until the stream passes this work); both outputs are fresh blocks of `rows · n`
        // elements; the shared memory holds `p` keys and `p` indices, as the kernel uses;
        // the arguments match `sort_rows_<type>`.
        unsafe { f.launch(&place.stream, cfg, &params) }?;
        return done(values, indices);
    }
    // Long lanes: tiles, then merge passes between two scratch (key, index) arrays.
    let alloc = |bytes: usize| place.gpu.alloc.alloc(bytes, place.stream_id);
    let scratch = [
        (alloc(size * key_bytes)?, alloc(size * 4)?),
        (alloc(size * key_bytes)?, alloc(size * 4)?),
    ];
    let tiles = rows * n.div_ceil(TILE);
    {
        let f = function("sort_tiles")?;
        let (keys, ids) = (scratch[0].0.ptr(), scratch[0].1.ptr());
        let params: [&dyn DeviceRepr; 6] = [&src, &view, &rows64, &n64, &keys, &ids];
        // SAFETY: as for `sort_rows`; the scratch blocks hold `rows · n` keys and indices,
        // the shared memory `TILE` of each.
        unsafe { f.launch(&place.stream, block_config(tiles, TILE, key_bytes), &params) }?;
    }
    let mut from = 0;
    let mut w = TILE as i64;
    let merge = function("sort_merge")?;
    while w < n64 {
        let (ks, is) = (scratch[from].0.ptr(), scratch[from].1.ptr());
        let (kd, id) = (scratch[1 - from].0.ptr(), scratch[1 - from].1.ptr());
        let params: [&dyn DeviceRepr; 7] = [&ks, &is, &kd, &id, &rows64, &n64, &w];
        // SAFETY: the four scratch blocks hold `rows · n` keys or indices each; the kernel
        // reads one pair and writes the other, which are distinct blocks.
        unsafe { merge.launch(&place.stream, launch_config(size), &params) }?;
        from = 1 - from;
        w *= 2;
    }
    let f = function("sort_gather")?;
    let ids = scratch[from].1.ptr();
    let params: [&dyn DeviceRepr; 7] = [&src, &view, &rows64, &n64, &ids, &vals_ptr, &inds_ptr];
    // SAFETY: the indices are below `n`, so the view addresses elements inside the input's
    // block; the outputs hold `rows · n` elements. The scratch blocks are dropped after the
    // launch is queued; the allocator hands them out again only in stream order.
    unsafe { f.launch(&place.stream, launch_config(size), &params) }?;
    done(values, indices)
}

/// One block per lane or tile (`count` of them, looped over past the grid's cap), threads
/// for `p` elements, shared memory for `p` keys of `key_bytes` and `p` indices.
fn block_config(count: usize, p: usize, key_bytes: usize) -> LaunchConfig {
    let threads = (p / 2).clamp(32, 512) as u32;
    LaunchConfig {
        grid_dim: (count.clamp(1, 1 << 16) as u32, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: (p * (key_bytes + 4)) as u32,
    }
}

/// `searchsorted` of `v` in the sorted 1-D `a` (both of one type): `u32`, `v`'s shape.
fn search(
    place: &Place,
    a: &ArrayData,
    v: &ArrayData,
    right: bool,
) -> Result<Option<Vec<ArrayData>>> {
    let dtype = a.dtype();
    let Some((_, tn)) = type_names(dtype) else {
        return Ok(None);
    };
    let Ok(sv) = Strided::of(&v.layout) else {
        return Ok(None);
    };
    let (out, out_ptr) = place.output(DType::U32, &v.layout.shape)?;
    let nv = v.layout.size();
    if nv == 0 {
        return Ok(Some(vec![out]));
    }
    let (pa, pv) = (place.input(a)?, place.input(v)?);
    let na = a.layout.size() as i64;
    let a_off = a.layout.offset as i64;
    let a_step = a.layout.strides.first().copied().unwrap_or(0) as i64;
    let (nv64, right32) = (nv as i64, i32::from(right));
    let f = place
        .gpu
        .kernel_of("sort", Some(dtype), symbol!("searchsorted_{tn}")?, || {
            sort_source(dtype)
        })?;
    let params: [&dyn DeviceRepr; 9] = [
        &pa, &na, &a_off, &a_step, &pv, &sv, &nv64, &out_ptr, &right32,
    ];
    // SAFETY: `a` is 1-D, its `na` elements at `a_off + i · a_step` lie in its block; the
    // view addresses `v`'s elements inside its block; the output holds `nv` indices; the
    // arguments match `searchsorted_<type>`.
    unsafe { f.launch(&place.stream, launch_config(nv), &params) }?;
    Ok(Some(vec![out]))
}

/// Every kernel source of this family, complete, for compiling ahead of time (CI).
#[cfg(test)]
pub(crate) fn all_sources() -> Vec<(String, String)> {
    // Every element type with kernels (all but complex).
    super::dtype::kernel_types()
        .filter_map(|d| Some((format!("sort_{}", type_names(d)?.1), sort_source(d))))
        .collect()
}
