//! Scatters and `slice_update` on the CPU. The target is written in place when the evaluation
//! owns its buffer alone (donation), else a row-major copy is. Updates apply in order, on the
//! calling thread: with repeated indices, the order decides the result.

use std::sync::Arc;

use super::{Axis, BLOCK, Bounds, SKIPPED, add_bases, axis_offsets, positions, recycle, zeroed};
use crate::array::row_major_strides;
use crate::array::{ArrayData, collapse, for_each_strided};
use crate::backend::common::donation::{donatable, take_donated};
use crate::backend::common::index::slice_region;
use crate::backend::cpu::copy::{to_contiguous, to_contiguous_shared};
use crate::dtype::{Complex64, Element, bf16, f16};
use crate::ops::index::ScatterMode;
use crate::{Error, Result};

/// How an element combines with an update, for every [`ScatterMode`].
trait Combine: Element {
    fn sum(self, u: Self) -> Self;
    fn prod(self, u: Self) -> Self;
    fn max_of(self, u: Self) -> Self;
    fn min_of(self, u: Self) -> Self;
}

macro_rules! int_combine {
    ($($t:ty),*) => {$(
        impl Combine for $t {
            #[inline(always)]
            fn sum(self, u: $t) -> $t { self.wrapping_add(u) }
            #[inline(always)]
            fn prod(self, u: $t) -> $t { self.wrapping_mul(u) }
            #[inline(always)]
            fn max_of(self, u: $t) -> $t { self.max(u) }
            #[inline(always)]
            fn min_of(self, u: $t) -> $t { self.min(u) }
        }
    )*};
}
int_combine!(u8, u16, u32, u64, i8, i16, i32, i64);

macro_rules! float_combine {
    ($($t:ty),*) => {$(
        impl Combine for $t {
            #[inline(always)]
            fn sum(self, u: $t) -> $t { self + u }
            #[inline(always)]
            fn prod(self, u: $t) -> $t { self * u }
            // NaN wins, as in `maximum`/`minimum`.
            #[inline(always)]
            fn max_of(self, u: $t) -> $t { if self.is_nan() || self > u { self } else { u } }
            #[inline(always)]
            fn min_of(self, u: $t) -> $t { if self.is_nan() || self < u { self } else { u } }
        }
    )*};
}
float_combine!(f32, f64);

// Half floats compute in f32 and round once.
macro_rules! half_combine {
    ($($t:ty),*) => {$(
        impl Combine for $t {
            #[inline(always)]
            fn sum(self, u: $t) -> $t { <$t>::from_f32(self.to_f32() + u.to_f32()) }
            #[inline(always)]
            fn prod(self, u: $t) -> $t { <$t>::from_f32(self.to_f32() * u.to_f32()) }
            #[inline(always)]
            fn max_of(self, u: $t) -> $t { <$t>::from_f32(self.to_f32().max_of(u.to_f32())) }
            #[inline(always)]
            fn min_of(self, u: $t) -> $t { <$t>::from_f32(self.to_f32().min_of(u.to_f32())) }
        }
    )*};
}
half_combine!(f16, bf16);

impl Combine for bool {
    fn sum(self, u: bool) -> bool {
        self | u
    }
    fn prod(self, u: bool) -> bool {
        self & u
    }
    fn max_of(self, u: bool) -> bool {
        self | u
    }
    fn min_of(self, u: bool) -> bool {
        self & u
    }
}

impl Combine for Complex64 {
    fn sum(self, u: Complex64) -> Complex64 {
        self + u
    }
    fn prod(self, u: Complex64) -> Complex64 {
        self * u
    }
    // Complex numbers have no order: the op functions reject these modes.
    fn max_of(self, u: Complex64) -> Complex64 {
        u
    }
    fn min_of(self, u: Complex64) -> Complex64 {
        u
    }
}

/// Runs `$body` with `$f` bound to the combining function of `$mode` (one loop per mode, so
/// the choice is made once, not per element).
macro_rules! by_mode {
    ($mode:expr, $T:ty, $f:ident => $body:expr) => {
        match $mode {
            ScatterMode::Replace => {
                let $f = |_: $T, u: $T| u;
                $body
            }
            ScatterMode::Sum => {
                let $f = <$T>::sum;
                $body
            }
            ScatterMode::Prod => {
                let $f = <$T>::prod;
                $body
            }
            ScatterMode::Max => {
                let $f = <$T>::max_of;
                $body
            }
            ScatterMode::Min => {
                let $f = <$T>::min_of;
                $body
            }
        }
    };
}

/// The target of an update as row-major data this evaluation owns alone: the input's own
/// buffer when it may be donated (held by nothing else, row-major from element 0, no spare
/// elements), else a copy.
fn target(x: &mut ArrayData) -> ArrayData {
    let spec = (x.layout.shape.clone(), x.dtype());
    if donatable(x, (&spec.0, spec.1)) {
        return take_donated(x);
    }
    to_contiguous(x)
}

/// Pushes the row starts of one block of a [`Walk`].
type Starts<'a> = Box<dyn Fn(usize, &mut Vec<[usize; 2]>) + 'a>;

/// Where an update goes: rows of `len` elements, `steps` apart in the target and in the
/// update, whose starts `[target, update]` are produced block by block by `starts` (so that
/// nothing as large as the update is materialised). Each op builds its walk once, for any
/// element type; [`apply`] is the one kernel built per element type and mode.
struct Walk<'a> {
    blocks: usize,
    starts: Starts<'a>,
    len: usize,
    steps: [isize; 2],
}

impl<'a> Walk<'a> {
    /// A walk over a layout pair: the innermost collapsed axis is the row.
    fn strided(shape: &[usize], strides: [&[isize]; 2], offsets: [usize; 2]) -> Walk<'a> {
        let (shape, cs) = collapse(shape, &strides);
        let Some((&len, outer)) = shape.split_last() else {
            return Walk {
                blocks: 1,
                starts: Box::new(move |_, out| out.push(offsets)),
                len: 1,
                steps: [1, 1],
            };
        };
        let nd = outer.len();
        let count: usize = outer.iter().product();
        let (outer, steps) = (outer.to_vec(), [cs[0][nd], cs[1][nd]]);
        Walk {
            blocks: count.div_ceil(BLOCK),
            starts: Box::new(move |b, out| {
                let first = b * BLOCK;
                let n = BLOCK.min(count - first);
                let strides = [&cs[0][..nd], &cs[1][..nd]];
                for_each_strided(&outer, strides, offsets, first, n, |pq| out.push(pq));
            }),
            len,
            steps,
        }
    }
}

/// Combines the update `src` into `dst` along `walk`.
fn apply<T: Combine>(dst: &mut [T], src: &[T], walk: &Walk<'_>, mode: ScatterMode) {
    let mut starts = Vec::with_capacity(BLOCK);
    let n = walk.len;
    if n == 0 {
        // Empty rows (an empty update): nothing to write, and their starts may lie past the
        // end of either buffer.
        return;
    }
    if mode == ScatterMode::Replace && walk.steps == [1, 1] {
        // Contiguous rows in both (a cache write): plain copies.
        for b in 0..walk.blocks {
            starts.clear();
            (walk.starts)(b, &mut starts);
            for &[p, q] in &starts {
                dst[p..p + n].copy_from_slice(&src[q..q + n]);
            }
        }
        return;
    }
    let [sp, sq] = walk.steps;
    by_mode!(mode, T, f => {
        for b in 0..walk.blocks {
            starts.clear();
            (walk.starts)(b, &mut starts);
            for &[p, q] in &starts {
                let (mut p, mut q) = (p as isize, q as isize);
                for _ in 0..n {
                    let (i, j) = (p as usize, q as usize);
                    dst[i] = f(dst[i], src[j]);
                    p += sp;
                    q += sq;
                }
            }
        }
    })
}

/// Runs [`apply`] on the target of `x` (see [`target`]) with `update`'s elements.
fn write(
    x: &mut ArrayData,
    update: &ArrayData,
    walk: &Walk<'_>,
    mode: ScatterMode,
) -> Result<ArrayData> {
    let op = "scatter";
    let mut out = target(x);
    let buffer = Arc::get_mut(&mut out.buffer)
        .ok_or_else(|| Error::Device("scatter: the target buffer is shared".into()))?;
    crate::with_host!(buffer.host_mut()?, dst, T => {
        apply(dst, update.buffer.host()?.typed::<T>(op)?, walk, mode)
    });
    Ok(out)
}

/// MLX's scatter: `(a, indices.., updates)`.
pub(super) fn scatter(
    inputs: &mut [ArrayData],
    axes: &[usize],
    mode: ScatterMode,
) -> Result<ArrayData> {
    let (first, rest) = inputs.split_at_mut(1);
    let a = &mut first[0];
    let (indices, updates) = rest.split_at(axes.len());
    let updates = to_contiguous_shared(&updates[0]);
    let shape = a.layout.shape.clone();
    let strides = row_major_strides(&shape);
    let index_nd = updates.layout.shape.len() - shape.len();
    let window = &updates.layout.shape[index_nd..];
    let n = indices.first().map_or(1, |i| i.layout.size());
    let mut bases = zeroed(n);
    for (idx, &axis) in indices.iter().zip(axes) {
        let along = Axis {
            dim: shape[axis],
            window: window[axis],
            stride: strides[axis] as i64,
        };
        add_bases(idx, &mut bases, along, Bounds::Skip)?;
    }
    // The rows of one window (the same for every index position): their starts in the
    // target, relative to the window's, and in the window's row-major updates.
    let (wshape, ws) = collapse(window, &[&strides]);
    let (len, step, rows) = match wshape.split_last() {
        Some((&len, outer)) => (
            len,
            ws[0][outer.len()],
            positions(outer, &ws[0][..outer.len()], 0),
        ),
        None => (1, 1, vec![0]),
    };
    let (wn, from) = (window.iter().product::<usize>(), updates.layout.offset);
    let walk = Walk {
        blocks: if wn == 0 { 0 } else { n },
        starts: Box::new(|p, out| {
            if bases[p] != SKIPPED {
                for (r, &w) in rows.iter().enumerate() {
                    out.push([(bases[p] + w) as usize, from + p * wn + r * len]);
                }
            }
        }),
        len,
        steps: [step, 1],
    };
    let out = write(a, &updates, &walk, mode);
    drop(walk);
    recycle(bases);
    out
}

/// `put_along_axis` and friends: `(a, indices, values)`.
pub(super) fn scatter_axis(
    inputs: &mut [ArrayData],
    axis: usize,
    mode: ScatterMode,
) -> Result<ArrayData> {
    let (first, rest) = inputs.split_at_mut(1);
    let a = &mut first[0];
    let (idx, values) = (&rest[0], to_contiguous_shared(&rest[1]));
    let shape = a.layout.shape.clone();
    let strides = row_major_strides(&shape);
    let offsets_of = axis_offsets(idx, &strides, 0, axis, shape[axis], Bounds::Skip)?;
    let (n, from) = (idx.layout.size(), values.layout.offset);
    let walk = Walk {
        blocks: n.div_ceil(BLOCK),
        starts: Box::new(|b, out| {
            let first = b * BLOCK;
            let mut offsets = [0i64; BLOCK];
            let offsets = &mut offsets[..BLOCK.min(n - first)];
            offsets_of(first, offsets);
            for (k, &o) in offsets.iter().enumerate() {
                if o != SKIPPED {
                    out.push([o as usize, from + first + k]);
                }
            }
        }),
        len: 1,
        steps: [1, 1],
    };
    write(a, &values, &walk, mode)
}

/// `slice_update` and friends: `(src, update)`, the update of the region's shape.
pub(super) fn slice_update(
    inputs: &mut [ArrayData],
    start: &[usize],
    step: &[isize],
    mode: ScatterMode,
) -> Result<ArrayData> {
    let (first, rest) = inputs.split_at_mut(1);
    let (src, update) = (&mut first[0], &rest[0]);
    let (offset, region) = slice_region(&src.layout.shape, start, step);
    let ul = &update.layout;
    let walk = Walk::strided(&ul.shape, [&region, &ul.strides], [offset, ul.offset]);
    write(src, update, &walk, mode)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::{Buffer, Layout};
    use crate::ops::index::IndexOp;

    fn update_op() -> IndexOp {
        IndexOp::SliceUpdate {
            start: vec![1],
            step: vec![1],
            mode: ScatterMode::Replace,
        }
    }

    fn run(inputs: &mut [ArrayData]) -> ArrayData {
        let specs = vec![(vec![4usize], crate::DType::F32)];
        super::super::eval(&update_op(), inputs, &specs)
            .unwrap()
            .swap_remove(0)
    }

    #[test]
    fn owned_target_is_written_in_place() {
        let src = ArrayData::from_vec(vec![0.0f32; 4], &[4]);
        let upd = ArrayData::from_vec(vec![5.0f32, 6.0], &[2]);
        let before = Arc::as_ptr(&src.buffer);
        let out = run(&mut [src, upd]);
        assert!(std::ptr::eq(Arc::as_ptr(&out.buffer), before));
        assert_eq!(out.to_vec::<f32>("test").unwrap(), [0.0, 5.0, 6.0, 0.0]);
    }

    #[test]
    fn shared_target_is_copied() {
        let src = ArrayData::from_vec(vec![0.0f32; 4], &[4]);
        let held = src.clone();
        let upd = ArrayData::from_vec(vec![5.0f32, 6.0], &[2]);
        let out = run(&mut [src, upd]);
        assert!(!Arc::ptr_eq(&out.buffer, &held.buffer));
        assert_eq!(held.to_vec::<f32>("test").unwrap(), [0.0; 4]);
        assert_eq!(out.to_vec::<f32>("test").unwrap(), [0.0, 5.0, 6.0, 0.0]);
    }

    /// The buffer behind an evaluated array.
    fn buffer_of(a: &crate::Array) -> *const Buffer {
        a.eval().unwrap();
        Arc::as_ptr(&a.data().expect("evaluated").buffer)
    }

    #[test]
    fn graphs_donate_targets_nobody_else_holds() {
        use crate::{Array, SliceArg};
        let a = Array::from_vec(vec![1i32; 6], &[2, 3]).unwrap();
        let before = buffer_of(&a);
        let u = Array::from_slice(&[7i32, 8, 9], &[3]).unwrap();
        let b = crate::slice_update(&a, &u, &[SliceArg::index(-1)]).unwrap();
        drop(a);
        assert!(std::ptr::eq(buffer_of(&b), before));
        assert_eq!(b.to_vec::<i32>().unwrap(), [1, 1, 1, 7, 8, 9]);
        // Then a scatter into the same buffer.
        let idx = Array::from_slice(&[1u32, 1], &[2]).unwrap();
        let upd = Array::from_slice(&[5i32, 6, 7, 8, 9, 10], &[2, 1, 3]).unwrap();
        let c = crate::scatter_add(&b, std::slice::from_ref(&idx), &upd, &[0]).unwrap();
        drop(b);
        assert!(std::ptr::eq(buffer_of(&c), before));
        assert_eq!(c.to_vec::<i32>().unwrap(), [1, 1, 1, 20, 23, 26]);
        // A held target is copied, and keeps its values.
        let idx2 = Array::from_slice(&[0i64, -1, 0], &[1, 3]).unwrap();
        let e = crate::put_along_axis(&c, &idx2, &Array::scalar(0i32), Some(0)).unwrap();
        assert!(!std::ptr::eq(buffer_of(&e), before));
        assert_eq!(e.to_vec::<i32>().unwrap(), [0, 1, 0, 20, 0, 26]);
        assert_eq!(c.to_vec::<i32>().unwrap(), [1, 1, 1, 20, 23, 26]);
    }

    #[test]
    fn offset_view_is_copied() {
        // Owned alone, but a view from element 1: not donatable as is.
        let base = ArrayData::from_vec(vec![9.0f32, 0.0, 0.0, 0.0, 0.0], &[5]);
        let view = base.view(Layout {
            shape: vec![4],
            strides: vec![1],
            offset: 1,
        });
        drop(base);
        let upd = ArrayData::from_vec(vec![5.0f32, 6.0], &[2]);
        let out = run(&mut [view, upd]);
        assert_eq!(out.layout.offset, 0);
        assert_eq!(out.to_vec::<f32>("test").unwrap(), [0.0, 5.0, 6.0, 0.0]);
    }
}
