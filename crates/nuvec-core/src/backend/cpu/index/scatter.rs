//! Scatters and `slice_update` on the CPU. The target is written in place when the evaluation
//! owns its buffer alone (donation), else a row-major copy is. Updates apply in order, on the
//! calling thread: with repeated indices, the order decides the result.

use std::sync::Arc;

use super::{Axis, Bounds, SKIPPED, add_bases, axis_offsets, positions};
use crate::array::row_major_strides;
use crate::array::{ArrayData, Buffer, HostData, Layout, collapse, for_each_strided};
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
    let n = x.layout.size();
    let fits = x.layout.offset == 0 && x.layout.is_row_contiguous() && x.buffer.host().len() == n;
    if fits && Arc::get_mut(&mut x.buffer).is_some() {
        let empty = Arc::new(Buffer::from_host(HostData::Bool(Vec::new())));
        let buffer = std::mem::replace(&mut x.buffer, empty);
        return ArrayData {
            buffer,
            layout: Layout::contiguous(&x.layout.shape),
        };
    }
    to_contiguous(x)
}

/// Writes into the target of `x` (see [`target`]) with `write`, returning it.
fn write_target(
    x: &mut ArrayData,
    write: impl FnOnce(&mut HostData) -> Result<()>,
) -> Result<ArrayData> {
    let mut out = target(x);
    let buffer = Arc::get_mut(&mut out.buffer)
        .ok_or_else(|| Error::Device("scatter: the target buffer is shared".into()))?;
    write(buffer.host_mut())?;
    Ok(out)
}

/// The elements of row-major data as `T`.
fn elements<'a, T: Element>(data: &'a ArrayData, op: &'static str) -> Result<&'a [T]> {
    // (An empty layout may not count as row-major: its strides are arbitrary.)
    let found = match data.layout.size() {
        0 => T::host_slice(data.buffer.host()).map(|_| &[][..]),
        _ => data.contiguous_slice::<T>(),
    };
    found.ok_or(Error::DTypeMismatch {
        op,
        dtype: data.dtype(),
        requested: T::DTYPE,
    })
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
    let mut bases = vec![0isize; n];
    for (idx, &axis) in indices.iter().zip(axes) {
        let along = Axis {
            dim: shape[axis],
            window: window[axis],
            stride: strides[axis],
        };
        add_bases(idx, &mut bases, along, Bounds::Skip)?;
    }
    // Each window element's offset from the window's start, computed once.
    let within = positions(window, &strides, 0);
    write_target(a, |host| {
        crate::with_host!(host, dst, T => {
            let u = elements::<T>(&updates, "scatter")?;
            scatter_windows(dst, &bases, &within, u, mode);
        });
        Ok(())
    })
}

fn scatter_windows<T: Combine>(
    dst: &mut [T],
    bases: &[isize],
    within: &[isize],
    updates: &[T],
    mode: ScatterMode,
) {
    if within.is_empty() {
        return;
    }
    by_mode!(mode, T, f => {
        for (&base, u) in bases.iter().zip(updates.chunks_exact(within.len())) {
            if base == SKIPPED {
                continue;
            }
            for (&w, &v) in within.iter().zip(u) {
                let t = (base + w) as usize;
                dst[t] = f(dst[t], v);
            }
        }
    })
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
    let offsets = axis_offsets(idx, &strides, 0, axis, shape[axis], Bounds::Skip)?;
    write_target(a, |host| {
        crate::with_host!(host, dst, T => {
            let v = elements::<T>(&values, "scatter")?;
            scatter_points(dst, &offsets, v, mode);
        });
        Ok(())
    })
}

fn scatter_points<T: Combine>(dst: &mut [T], offsets: &[isize], values: &[T], mode: ScatterMode) {
    by_mode!(mode, T, f => {
        for (&o, &v) in offsets.iter().zip(values) {
            if o != SKIPPED {
                let o = o as usize;
                dst[o] = f(dst[o], v);
            }
        }
    })
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
    let strides = row_major_strides(&src.layout.shape);
    let offset: isize = start
        .iter()
        .zip(&strides)
        .map(|(&s, &st)| s as isize * st)
        .sum();
    let region: Vec<isize> = step.iter().zip(&strides).map(|(a, b)| a * b).collect();
    let ul = &update.layout;
    let rows = Rows::new(
        &ul.shape,
        [&region, &ul.strides],
        [offset as usize, ul.offset],
    );
    write_target(src, |host| {
        crate::with_host!(host, dst, T => {
            let u = update.buffer.host().typed::<T>("slice_update")?;
            update_region(dst, &rows, u, mode);
        });
        Ok(())
    })
}

/// A two-layout walk split into rows along the innermost (collapsed) axis: where each row
/// starts in both buffers, its length and both strides along it. The walk over the outer
/// axes is done once here, for any element type and mode.
struct Rows {
    starts: Vec<[usize; 2]>,
    len: usize,
    steps: [isize; 2],
}

impl Rows {
    fn new(shape: &[usize], strides: [&[isize]; 2], offsets: [usize; 2]) -> Rows {
        let (shape, cs) = collapse(shape, &strides);
        let Some((&len, outer)) = shape.split_last() else {
            return Rows {
                starts: vec![offsets],
                len: 1,
                steps: [0, 0],
            };
        };
        let nd = outer.len();
        let count = outer.iter().product();
        let mut starts = Vec::with_capacity(count);
        let (outer0, outer1) = (&cs[0][..nd], &cs[1][..nd]);
        for_each_strided(outer, [outer0, outer1], offsets, 0, count, |pq| {
            starts.push(pq)
        });
        Rows {
            starts,
            len,
            steps: [cs[0][nd], cs[1][nd]],
        }
    }
}

fn update_region<T: Combine>(dst: &mut [T], rows: &Rows, update: &[T], mode: ScatterMode) {
    let n = rows.len;
    if mode == ScatterMode::Replace && rows.steps == [1, 1] {
        // Contiguous rows in both (the cache write): plain copies.
        for &[p, q] in &rows.starts {
            dst[p..p + n].copy_from_slice(&update[q..q + n]);
        }
        return;
    }
    let [sp, sq] = rows.steps;
    by_mode!(mode, T, f => {
        for &[p, q] in &rows.starts {
            let (mut p, mut q) = (p as isize, q as isize);
            for _ in 0..n {
                let (i, j) = (p as usize, q as usize);
                dst[i] = f(dst[i], update[j]);
                p += sp;
                q += sq;
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
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
