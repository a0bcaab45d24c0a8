//! The indexing primitives on the CPU.
//!
//! Indices are read once, in their own pass (dispatched on the index type), into buffer
//! positions: then the value kernels (dispatched on the element type) only copy, so the two
//! dispatches never nest. Gathers read any layout and fill their output in parallel chunks;
//! scatters (in [`scatter`]) write into their target's buffer when the evaluation owns it,
//! else into a row-major copy.

mod scatter;

use super::elementwise::{Walk, fill};
use crate::array::{ArrayData, HostData, Layout, collapse, for_each_strided};
use crate::dtype::Element;
use crate::ops::index::IndexOp;
use crate::primitive::OutputSpec;
use crate::{Error, Result};

/// Computes an indexing primitive.
pub(crate) fn eval(
    op: &IndexOp,
    inputs: &mut [ArrayData],
    outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    let shape = &outputs[0].0;
    let out = match op {
        IndexOp::Take { axis } => take(inputs, *axis, shape)?,
        IndexOp::Gather { axes, slice_sizes } => gather(inputs, axes, slice_sizes, shape)?,
        IndexOp::GatherAxis { axis } => gather_axis(inputs, *axis)?,
        IndexOp::Scatter { axes, mode } => scatter::scatter(inputs, axes, *mode)?,
        IndexOp::ScatterAxis { axis, mode } => scatter::scatter_axis(inputs, *axis, *mode)?,
        IndexOp::SliceUpdate { start, step, mode } => {
            scatter::slice_update(inputs, start, step, *mode)?
        }
    };
    Ok(vec![out])
}

/// What an index outside its axis does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bounds {
    /// Moved to the nearest position inside (gathers).
    Clamp,
    /// Dropped (scatters).
    Skip,
}

/// The position of a dropped index.
const SKIPPED: i64 = i64::MIN;

/// Zeroed positions from the buffer pool: fresh memory for a large index array would cost a
/// page fault per page, more than the work on it.
fn zeroed(n: usize) -> Vec<i64> {
    let mut v = crate::array::pool::alloc::<i64>(n);
    fill(&mut v, &|_, chunk| chunk.fill(0));
    v
}

/// Returns positions to the buffer pool.
fn recycle(v: Vec<i64>) {
    crate::array::pool::release(HostData::I64(v));
}

/// Where a window of `window` elements starts along an axis of `dim` for index `v`: negative
/// indices count from the end, then the window is clamped inside or dropped.
#[inline(always)]
fn resolve(v: i64, dim: usize, window: usize, bounds: Bounds) -> Option<i64> {
    let dim = dim as i64;
    let v = if v < 0 { v + dim } else { v };
    let last = dim - window as i64;
    match bounds {
        Bounds::Clamp => Some(v.clamp(0, last.max(0))),
        Bounds::Skip => (0..=last).contains(&v).then_some(v),
    }
}

/// An integer index element.
trait IndexElem: Element {
    /// The index as an `i64` (saturating: huge `u64` values stay out of range).
    fn to_i64(self) -> i64;
}

macro_rules! index_elem {
    ($($t:ty),*) => {$(
        impl IndexElem for $t {
            #[inline(always)]
            fn to_i64(self) -> i64 {
                self as i64
            }
        }
    )*};
}
index_elem!(u8, u16, u32, i8, i16, i32, i64);

impl IndexElem for u64 {
    #[inline(always)]
    fn to_i64(self) -> i64 {
        i64::try_from(self).unwrap_or(i64::MAX)
    }
}

/// Runs `$body` with `$v` bound to the elements of an integer index array (the index types
/// only, so that nothing is built for the others).
macro_rules! with_index {
    ($data:expr, $v:ident => $body:expr) => {
        match $data.buffer.host()? {
            HostData::U8($v) => $body,
            HostData::U16($v) => $body,
            HostData::U32($v) => $body,
            HostData::U64($v) => $body,
            HostData::I8($v) => $body,
            HostData::I16($v) => $body,
            HostData::I32($v) => $body,
            HostData::I64($v) => $body,
            other => {
                return Err(Error::UnsupportedDType {
                    op: "indices",
                    dtype: other.dtype(),
                });
            }
        }
    };
}

/// One indexed axis: its size, the window taken along it, the stride of one step.
#[derive(Debug, Clone, Copy)]
struct Axis {
    dim: usize,
    window: usize,
    stride: i64,
}

/// Adds `stride × start` to each base, for each index's window start along `axis` (indices
/// in row-major order of their shape). A dropped index marks its base [`SKIPPED`].
fn add_bases(idx: &ArrayData, bases: &mut [i64], axis: Axis, bounds: Bounds) -> Result<()> {
    with_index!(idx, v => add_bases_typed(v, &idx.layout, bases, axis, bounds));
    Ok(())
}

fn add_bases_typed<T: IndexElem>(
    src: &[T],
    layout: &Layout,
    bases: &mut [i64],
    axis: Axis,
    bounds: Bounds,
) {
    let walk = Walk::new(src, layout);
    fill(bases, &|start, chunk| {
        walk.each(start, chunk, |b, v| {
            if *b == SKIPPED {
                return;
            }
            *b = match resolve(v.to_i64(), axis.dim, axis.window, bounds) {
                Some(i) => *b + i * axis.stride,
                None => SKIPPED,
            };
        })
    });
}

/// Positions are made in blocks of this many, on the stack, as a kernel consumes them.
const BLOCK: usize = 1024;

/// Writes the positions of `out.len()` consecutive indices starting at the given one (see
/// [`axis_offsets`]). A trait object, so that value kernels take it without being built once
/// per index type; it is called once per [`BLOCK`] elements, not per element.
type Offsets<'a> = Box<dyn Fn(usize, &mut [i64]) + Sync + 'a>;

/// For each index (row-major in the index array's shape), the buffer position of the element
/// it addresses in an array laid out by `strides` from `offset`: the index's own position on
/// every axis but `axis`, the resolved index on `axis` (`SKIPPED` when dropped).
fn axis_offsets<'a>(
    idx: &'a ArrayData,
    strides: &[isize],
    offset: usize,
    axis: usize,
    dim: usize,
    bounds: Bounds,
) -> Result<Offsets<'a>> {
    Ok(with_index!(idx, v => {
        axis_offsets_typed(v, &idx.layout, strides, offset, axis, dim, bounds)
    }))
}

fn axis_offsets_typed<'a, T: IndexElem>(
    src: &'a [T],
    idx: &'a Layout,
    strides: &[isize],
    offset: usize,
    axis: usize,
    dim: usize,
    bounds: Bounds,
) -> Offsets<'a> {
    let along = strides[axis] as i64;
    let mut others = strides.to_vec();
    others[axis] = 0;
    let (shape, cs) = collapse(&idx.shape, &[&idx.strides, &others]);
    Box::new(move |start, out: &mut [i64]| {
        let mut k = 0;
        for_each_strided(
            &shape,
            [&cs[0], &cs[1]],
            [idx.offset, offset],
            start,
            out.len(),
            |[p, q]| {
                out[k] = match resolve(src[p].to_i64(), dim, 1, bounds) {
                    Some(i) => q as i64 + i * along,
                    None => SKIPPED,
                };
                k += 1;
            },
        );
    })
}

/// A gather of blocks: output element `(o, p, b)` (row-major) is the source element at
/// `outer[o] + bases[p]` plus block element `b`'s offset.
struct Blocks {
    /// Buffer positions of the outer index (the source's offset included).
    outer: Vec<i64>,
    /// The offset of each indexed block.
    bases: Vec<i64>,
    /// The block's shape and strides, collapsed.
    shape: Vec<usize>,
    strides: Vec<isize>,
}

/// The buffer positions of every element of a strided view, in row-major order.
fn positions(shape: &[usize], strides: &[isize], offset: usize) -> Vec<i64> {
    let n = shape.iter().product();
    let (cshape, cs) = collapse(shape, &[strides]);
    let mut out = Vec::with_capacity(n);
    for_each_strided(&cshape, [&cs[0]], [offset], 0, n, |[p]| out.push(p as i64));
    out
}

fn gather_blocks<T: Element>(src: &[T], plan: &Blocks) -> Vec<T> {
    let bn: usize = plan.shape.iter().product();
    let np = plan.bases.len();
    let total = plan.outer.len() * np * bn;
    let mut out = crate::array::pool::alloc::<T>(total);
    if total == 0 {
        return out;
    }
    if bn == 1 {
        // One element per (outer, index) pair: runs along the indices, no block copies.
        fill(&mut out, &|start, chunk| {
            let (mut o, mut p) = (start / np, start % np);
            let mut k = 0;
            while k < chunk.len() {
                let run = (np - p).min(chunk.len() - k);
                let at = plan.outer[o];
                for (v, &b) in chunk[k..k + run].iter_mut().zip(&plan.bases[p..p + run]) {
                    *v = src[(at + b) as usize];
                }
                k += run;
                p = 0;
                o += 1;
            }
        });
        return out;
    }
    let contiguous = plan.shape.is_empty() || (plan.shape.len() == 1 && plan.strides[0] == 1);
    fill(&mut out, &|start, chunk| {
        let mut w = start % bn;
        let (mut o, mut p) = ((start / bn) / np, (start / bn) % np);
        let mut k = 0;
        while k < chunk.len() {
            let run = (bn - w).min(chunk.len() - k);
            let base = (plan.outer[o] + plan.bases[p]) as usize;
            let dst = &mut chunk[k..k + run];
            if contiguous {
                dst.copy_from_slice(&src[base + w..base + w + run]);
            } else {
                let mut j = 0;
                for_each_strided(&plan.shape, [&plan.strides], [base], w, run, |[q]| {
                    dst[j] = src[q];
                    j += 1;
                });
            }
            k += run;
            w = 0;
            p += 1;
            if p == np {
                p = 0;
                o += 1;
            }
        }
    });
    out
}

/// Runs a block gather over `a`'s elements, giving data of `shape`.
fn run_blocks(a: &ArrayData, plan: Blocks, shape: &[usize]) -> ArrayData {
    let out = crate::with_host!(a.buffer.resident_host(), src, T => {
        ArrayData::from_vec(gather_blocks::<T>(src, &plan), shape)
    });
    recycle(plan.bases);
    out
}

/// `take`: blocks of `a`'s trailing axes at each index, for each position of its leading axes.
fn take(inputs: &[ArrayData], axis: usize, shape: &[usize]) -> Result<ArrayData> {
    let (a, idx) = (&inputs[0], &inputs[1]);
    let l = &a.layout;
    let mut bases = zeroed(idx.layout.size());
    let along = Axis {
        dim: l.shape[axis],
        window: 1,
        stride: l.strides[axis] as i64,
    };
    add_bases(idx, &mut bases, along, Bounds::Clamp)?;
    let (bshape, bstrides) = collapse(&l.shape[axis + 1..], &[&l.strides[axis + 1..]]);
    let plan = Blocks {
        outer: positions(&l.shape[..axis], &l.strides[..axis], l.offset),
        bases,
        shape: bshape,
        strides: bstrides[0].clone(),
    };
    Ok(run_blocks(a, plan, shape))
}

/// MLX's gather: one window of `slice_sizes` per index position.
fn gather(
    inputs: &[ArrayData],
    axes: &[usize],
    slice_sizes: &[usize],
    shape: &[usize],
) -> Result<ArrayData> {
    let (a, indices) = (&inputs[0], &inputs[1..]);
    let l = &a.layout;
    let n = indices.first().map_or(1, |i| i.layout.size());
    let mut bases = zeroed(n);
    for (idx, &axis) in indices.iter().zip(axes) {
        let along = Axis {
            dim: l.shape[axis],
            window: slice_sizes[axis],
            stride: l.strides[axis] as i64,
        };
        add_bases(idx, &mut bases, along, Bounds::Clamp)?;
    }
    let (bshape, bstrides) = collapse(slice_sizes, &[&l.strides]);
    let plan = Blocks {
        outer: vec![l.offset as i64],
        bases,
        shape: bshape,
        strides: bstrides[0].clone(),
    };
    Ok(run_blocks(a, plan, shape))
}

/// `take_along_axis`: one element per index.
fn gather_axis(inputs: &[ArrayData], axis: usize) -> Result<ArrayData> {
    let (a, idx) = (&inputs[0], &inputs[1]);
    let l = &a.layout;
    let offsets_of = axis_offsets(
        idx,
        &l.strides,
        l.offset,
        axis,
        l.shape[axis],
        Bounds::Clamp,
    )?;
    let n = idx.layout.size();
    Ok(crate::with_host!(a.buffer.host()?, src, T => {
        let mut out = crate::array::pool::alloc::<T>(n);
        fill(&mut out, &|start, chunk| {
            let mut offsets = [0i64; BLOCK];
            for (b, part) in chunk.chunks_mut(BLOCK).enumerate() {
                let offsets = &mut offsets[..part.len()];
                offsets_of(start + b * BLOCK, offsets);
                for (v, &o) in part.iter_mut().zip(offsets.iter()) {
                    *v = src[o as usize];
                }
            }
        });
        ArrayData::from_vec(out, &idx.layout.shape)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_wraps_then_clamps_or_skips() {
        assert_eq!(resolve(-1, 5, 1, Bounds::Clamp), Some(4));
        assert_eq!(resolve(-7, 5, 1, Bounds::Clamp), Some(0));
        assert_eq!(resolve(9, 5, 2, Bounds::Clamp), Some(3));
        assert_eq!(resolve(4, 5, 2, Bounds::Skip), None);
        assert_eq!(resolve(-2, 5, 2, Bounds::Skip), Some(3));
        assert_eq!(resolve(-6, 5, 1, Bounds::Skip), None);
        assert_eq!(resolve(i64::MIN, 5, 1, Bounds::Skip), None);
        assert_eq!(u64::MAX.to_i64(), i64::MAX);
    }
}
