//! Shape and layout: views that copy nothing (reshape where strides allow, transpose,
//! broadcast, squeeze, expand) and the copies that change layout.

use crate::error::invalid;
use crate::ops::{check_errors, expect_inputs, normalize_axis};
use crate::primitive::{OutputSpec, Primitive};
use crate::{Array, Error, Result};

/// The shape and layout primitives.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ShapeOp {
    /// The same elements in row-major order with another shape (a view where the strides
    /// allow).
    Reshape(Vec<usize>),
    /// Axes permuted: output axis `i` is input axis `perm[i]` (a view).
    Transpose(Vec<usize>),
    /// Broadcast to a shape (a view with zero strides).
    Broadcast(Vec<usize>),
    /// A row-major copy.
    Contiguous,
    /// A strided window, one `(first index, step, length)` per axis (a view; steps may be
    /// negative). See [`slice`].
    Slice(Vec<(usize, isize, usize)>),
}

impl ShapeOp {
    /// The primitive's name.
    pub fn name(&self) -> &'static str {
        match self {
            ShapeOp::Reshape(_) => "reshape",
            ShapeOp::Transpose(_) => "transpose",
            ShapeOp::Broadcast(_) => "broadcast_to",
            ShapeOp::Contiguous => "contiguous",
            ShapeOp::Slice(_) => "slice",
        }
    }

    /// The output's shape and type.
    pub fn output_specs(&self, inputs: &[Array]) -> Result<Vec<OutputSpec>> {
        let op = self.name();
        expect_inputs(op, inputs, 1)?;
        let x = &inputs[0];
        let shape = match self {
            ShapeOp::Reshape(shape) => {
                if shape.iter().product::<usize>() != x.size() {
                    return Err(invalid(
                        op,
                        format!("cannot reshape {:?} to {shape:?}", x.shape()),
                    ));
                }
                shape.clone()
            }
            ShapeOp::Transpose(perm) => {
                let mut seen = vec![false; x.ndim()];
                if perm.len() != x.ndim()
                    || perm
                        .iter()
                        .any(|&p| p >= x.ndim() || std::mem::replace(&mut seen[p], true))
                {
                    return Err(invalid(
                        op,
                        format!("{perm:?} is not a permutation of {} axes", x.ndim()),
                    ));
                }
                perm.iter().map(|&p| x.shape()[p]).collect()
            }
            ShapeOp::Broadcast(shape) => {
                let out = crate::ops::broadcast_shapes(op, x.shape(), shape)?;
                if out != *shape {
                    return Err(Error::IncompatibleShapes {
                        op,
                        lhs: x.shape().to_vec(),
                        rhs: shape.clone(),
                    });
                }
                out
            }
            ShapeOp::Contiguous => x.shape().to_vec(),
            ShapeOp::Slice(ranges) => check_ranges(op, x.shape(), ranges)?,
        };
        Ok(vec![(shape, x.dtype())])
    }
}

/// The output shape of a resolved slice, checking that every index it reaches is inside the
/// input (the primitive can be built by hand, so its arguments are not trusted).
fn check_ranges(
    op: &'static str,
    shape: &[usize],
    ranges: &[(usize, isize, usize)],
) -> Result<Vec<usize>> {
    if ranges.len() != shape.len() {
        return Err(invalid(
            op,
            format!(
                "{} ranges for an array of {} dimensions",
                ranges.len(),
                shape.len()
            ),
        ));
    }
    for (axis, (&(start, step, len), &dim)) in ranges.iter().zip(shape).enumerate() {
        if len == 0 {
            continue;
        }
        let last = start as i128 + (len as i128 - 1) * step as i128;
        if step == 0 || start >= dim || last < 0 || last >= dim as i128 {
            return Err(invalid(
                op,
                format!("range ({start}, {step}, {len}) is outside axis {axis} of size {dim}"),
            ));
        }
    }
    Ok(ranges.iter().map(|r| r.2).collect())
}

/// `shape` with one `-1` entry inferred from `size`.
fn infer_shape(
    op: &'static str,
    shape: &[isize],
    size: usize,
    from: &[usize],
) -> Result<Vec<usize>> {
    let mut infer = None;
    let mut known = 1usize;
    for (i, &d) in shape.iter().enumerate() {
        match d {
            -1 if infer.is_none() => infer = Some(i),
            d if d >= 0 => known *= d as usize,
            _ => return Err(invalid(op, format!("invalid shape {shape:?}"))),
        }
    }
    let mut out: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
    if let Some(i) = infer {
        if known == 0 || !size.is_multiple_of(known) {
            return Err(invalid(op, format!("cannot reshape {from:?} to {shape:?}")));
        }
        out[i] = size / known;
    }
    if out.iter().product::<usize>() != size {
        return Err(invalid(op, format!("cannot reshape {from:?} to {shape:?}")));
    }
    Ok(out)
}

/// `a` with a new shape of the same size; one entry may be `-1`. A view when the layout
/// allows, else a copy.
pub fn reshape(a: &Array, shape: &[isize]) -> Result<Array> {
    check_errors(&[a])?;
    let shape = infer_shape("reshape", shape, a.size(), a.shape())?;
    if shape == a.shape() {
        return Ok(a.clone());
    }
    Array::op1(Primitive::Shape(ShapeOp::Reshape(shape)), vec![a.clone()])
}

/// `a` with its axes permuted: output axis `i` is axis `axes[i]` of `a`. A view.
pub fn transpose(a: &Array, axes: &[usize]) -> Result<Array> {
    check_errors(&[a])?;
    if axes.iter().enumerate().all(|(i, &p)| i == p) && axes.len() == a.ndim() {
        return Ok(a.clone());
    }
    Array::op1(
        Primitive::Shape(ShapeOp::Transpose(axes.to_vec())),
        vec![a.clone()],
    )
}

/// `a` broadcast to `shape` (NumPy's rules). A view.
pub fn broadcast_to(a: &Array, shape: &[usize]) -> Result<Array> {
    check_errors(&[a])?;
    if a.shape() == shape {
        return Ok(a.clone());
    }
    Array::op1(
        Primitive::Shape(ShapeOp::Broadcast(shape.to_vec())),
        vec![a.clone()],
    )
}

/// `a` with row-major layout (a copy unless it is row-major already).
pub fn contiguous(a: &Array) -> Result<Array> {
    check_errors(&[a])?;
    Array::op1(Primitive::Shape(ShapeOp::Contiguous), vec![a.clone()])
}

/// `a` with a new axis of size 1 at `axis` (counted in the result's axes). A view.
pub fn expand_dims(a: &Array, axis: isize) -> Result<Array> {
    check_errors(&[a])?;
    let axis = normalize_axis("expand_dims", axis, a.ndim() + 1)?;
    let mut shape: Vec<isize> = a.shape().iter().map(|&d| d as isize).collect();
    shape.insert(axis, 1);
    reshape(a, &shape)
}

/// `a` without the given axes of size 1 (every size-1 axis when `axes` is empty). A view.
pub fn squeeze(a: &Array, axes: &[isize]) -> Result<Array> {
    check_errors(&[a])?;
    let drop: Vec<usize> = if axes.is_empty() {
        (0..a.ndim()).filter(|&i| a.shape()[i] == 1).collect()
    } else {
        let axes = crate::ops::normalize_axes("squeeze", axes, a.ndim())?;
        if let Some(&bad) = axes.iter().find(|&&i| a.shape()[i] != 1) {
            return Err(invalid(
                "squeeze",
                format!("axis {bad} has size {}, not 1", a.shape()[bad]),
            ));
        }
        axes
    };
    let shape: Vec<isize> = (0..a.ndim())
        .filter(|i| !drop.contains(i))
        .map(|i| a.shape()[i] as isize)
        .collect();
    reshape(a, &shape)
}

/// The view of `a` that Python's `a[s0, s1, ...]` selects with slices: one [`SliceArg`] per
/// leading axis, any step (negative steps walk backwards); axes without an argument are kept
/// whole. Errors for more arguments than axes and for a zero step. A view: nothing is copied.
///
/// ```
/// use nuvec_core::{Array, SliceArg, slice};
///
/// let a = Array::from_slice(&[0i32, 1, 2, 3, 4, 5], &[2, 3]).unwrap();
/// // a[:, ::-2]
/// let b = slice(&a, &[SliceArg::full(), SliceArg::new(None, None, -2)]).unwrap();
/// assert_eq!(b.shape(), [2, 2]);
/// assert_eq!(b.to_vec::<i32>().unwrap(), [2, 0, 5, 3]);
/// ```
pub fn slice(a: &Array, args: &[SliceArg]) -> Result<Array> {
    check_errors(&[a])?;
    if args.len() > a.ndim() {
        return Err(invalid(
            "slice",
            format!(
                "{} slices for an array of {} dimensions",
                args.len(),
                a.ndim()
            ),
        ));
    }
    let mut ranges = Vec::with_capacity(a.ndim());
    for (axis, &dim) in a.shape().iter().enumerate() {
        let arg = args.get(axis).copied().unwrap_or_else(SliceArg::full);
        ranges.push(arg.resolve("slice", dim)?);
    }
    let identity = ranges
        .iter()
        .zip(a.shape())
        .all(|(&(_, step, len), &dim)| step > 0 && len == dim);
    if identity {
        return Ok(a.clone());
    }
    Array::op1(Primitive::Shape(ShapeOp::Slice(ranges)), vec![a.clone()])
}

/// One axis of a slice, as Python's `start:stop:step`: `None` bounds mean the whole axis in
/// the step's direction, negative bounds count from the end, and bounds past either end are
/// clamped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SliceArg {
    /// The first index (default: the start, or the end for a negative step).
    pub start: Option<isize>,
    /// One past the last index (default: past the end, or before the start for a negative
    /// step).
    pub stop: Option<isize>,
    /// The step between indices; never 0.
    pub step: isize,
}

impl SliceArg {
    /// `start:stop:step`.
    pub const fn new(start: Option<isize>, stop: Option<isize>, step: isize) -> SliceArg {
        SliceArg { start, stop, step }
    }

    /// `:` (the whole axis).
    pub const fn full() -> SliceArg {
        SliceArg::new(None, None, 1)
    }

    /// The single index `i` kept as an axis of size 1 (`i:i+1`, negative `i` from the end).
    pub const fn index(i: isize) -> SliceArg {
        SliceArg::new(Some(i), if i == -1 { None } else { Some(i + 1) }, 1)
    }

    /// `(first index, step, length)` of this slice over an axis of size `dim`, with Python's
    /// clamping; an error for a zero step.
    pub fn resolve(&self, op: &'static str, dim: usize) -> Result<(usize, isize, usize)> {
        let step = self.step;
        if step == 0 {
            return Err(invalid(op, "slice step cannot be zero"));
        }
        let n = dim as isize;
        let clamp = |v: isize, lo: isize, hi: isize| v.max(lo).min(hi);
        let norm = |v: isize| if v < 0 { v + n } else { v };
        let (start, stop) = if step > 0 {
            (
                self.start.map_or(0, |s| clamp(norm(s), 0, n)),
                self.stop.map_or(n, |s| clamp(norm(s), 0, n)),
            )
        } else {
            (
                self.start.map_or(n - 1, |s| clamp(norm(s), -1, n - 1)),
                self.stop.map_or(-1, |s| clamp(norm(s), -1, n - 1)),
            )
        };
        let len = if step > 0 {
            if stop > start {
                (stop - start + step - 1) / step
            } else {
                0
            }
        } else if start > stop {
            (start - stop + (-step) - 1) / (-step)
        } else {
            0
        };
        // An empty slice starts anywhere valid.
        let first = if len == 0 { 0 } else { start as usize };
        Ok((first, step, len as usize))
    }
}

#[cfg(test)]
mod slice_arg_tests {
    use super::SliceArg;

    /// Python's `range(dim)[start:stop:step]`, by brute force.
    fn python(dim: isize, s: SliceArg) -> Vec<isize> {
        let idx: Vec<isize> = (0..dim).collect();
        let norm = |v: isize| if v < 0 { v + dim } else { v };
        let mut out = Vec::new();
        if s.step > 0 {
            let start = s.start.map_or(0, |v| norm(v).clamp(0, dim));
            let stop = s.stop.map_or(dim, |v| norm(v).clamp(0, dim));
            let mut i = start;
            while i < stop {
                out.push(idx[i as usize]);
                i += s.step;
            }
        } else {
            let start = s.start.map_or(dim - 1, |v| norm(v).clamp(-1, dim - 1));
            let stop = s.stop.map_or(-1, |v| norm(v).clamp(-1, dim - 1));
            let mut i = start;
            while i > stop {
                out.push(idx[i as usize]);
                i += s.step;
            }
        }
        out
    }

    #[test]
    fn resolve_matches_python_slices() {
        let bounds = [None, Some(-7), Some(-2), Some(0), Some(1), Some(3), Some(9)];
        for dim in [0isize, 1, 5] {
            for &start in &bounds {
                for &stop in &bounds {
                    for step in [-3isize, -1, 1, 2] {
                        let s = SliceArg::new(start, stop, step);
                        let (first, st, len) = s.resolve("test", dim as usize).unwrap();
                        let got: Vec<isize> =
                            (0..len as isize).map(|k| first as isize + k * st).collect();
                        assert_eq!(got, python(dim, s), "{dim} {s:?}");
                    }
                }
            }
        }
        assert!(SliceArg::new(None, None, 0).resolve("test", 3).is_err());
    }
}
