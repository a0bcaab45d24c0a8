//! Shape and layout. Views that copy nothing: reshape (where the strides allow), transpose,
//! broadcast, squeeze and expand, [`slice`] (any step), [`split_at`], [`diagonal`],
//! [`as_strided`]. Copies: [`contiguous`], [`copy`], [`concatenate`], [`pad`]. Operations
//! built from these (stack, flatten, flip, roll, tile, ...) are in `compose`.

mod compose;

pub use compose::*;

use crate::error::invalid;
use crate::ops::{check_errors, expect_inputs, normalize_axis};
use crate::primitive::{OutputSpec, Primitive};
use crate::{Array, Error, Operand, Result};

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
    /// A row-major copy (the input itself when it is row-major already).
    Contiguous,
    /// A strided window, one `(first index, step, length)` per axis (a view; steps may be
    /// negative). See [`slice()`].
    Slice(Vec<(usize, isize, usize)>),
    /// Pieces along `axis` (views), one more than there are split points: piece `i` runs
    /// from point `i - 1` (0 for the first) to point `i` (the end for the last), points past
    /// the end clamped to it, and a piece that would end before it starts is empty (NumPy's
    /// rule). See [`split_at`].
    Split {
        /// The axis cut.
        axis: usize,
        /// The split points.
        indices: Vec<usize>,
    },
    /// Inputs of one type joined along an axis (a copy). See [`concatenate`].
    Concatenate(usize),
    /// `(x, value)`: `x` with `(before, after)` copies of the one-element `value` around
    /// each axis (a copy). See [`pad`].
    Pad(Vec<(usize, usize)>),
    /// The elements `(i, i + offset)` of two axes as a new last axis (a view). See
    /// [`diagonal`].
    Diagonal {
        /// Above (positive) or below (negative) the main diagonal.
        offset: isize,
        /// The axis of the row index.
        axis1: usize,
        /// The axis of the column index.
        axis2: usize,
    },
    /// A view of the input's elements, in row-major order, with any shape, strides (in
    /// elements) and offset. See [`as_strided`].
    AsStrided {
        /// The output's shape.
        shape: Vec<usize>,
        /// The step along each axis.
        strides: Vec<isize>,
        /// The element of index zero.
        offset: usize,
    },
    /// A row-major copy in a buffer of its own. See [`copy`].
    Copy,
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
            ShapeOp::Split { .. } => "split",
            ShapeOp::Concatenate(_) => "concatenate",
            ShapeOp::Pad(_) => "pad",
            ShapeOp::Diagonal { .. } => "diagonal",
            ShapeOp::AsStrided { .. } => "as_strided",
            ShapeOp::Copy => "copy",
        }
    }

    /// The shape and type of each output.
    pub fn output_specs(&self, inputs: &[Array]) -> Result<Vec<OutputSpec>> {
        let op = self.name();
        match self {
            ShapeOp::Concatenate(axis) => return concatenate_spec(*axis, inputs),
            ShapeOp::Pad(widths) => return pad_spec(widths, inputs),
            _ => expect_inputs(op, inputs, 1)?,
        }
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
            ShapeOp::Contiguous | ShapeOp::Copy => x.shape().to_vec(),
            ShapeOp::Slice(ranges) => check_ranges(op, x.shape(), ranges)?,
            ShapeOp::Split { axis, indices } => {
                if *axis >= x.ndim() {
                    return Err(Error::AxisOutOfRange {
                        op,
                        axis: *axis as isize,
                        ndim: x.ndim(),
                    });
                }
                let specs = split_pieces(x.shape()[*axis], indices)
                    .into_iter()
                    .map(|(_, len)| {
                        let mut shape = x.shape().to_vec();
                        shape[*axis] = len;
                        (shape, x.dtype())
                    })
                    .collect();
                return Ok(specs);
            }
            ShapeOp::Diagonal {
                offset,
                axis1,
                axis2,
            } => {
                let (a1, a2) = (*axis1, *axis2);
                if a1 >= x.ndim() || a2 >= x.ndim() || a1 == a2 {
                    return Err(invalid(
                        op,
                        format!("axes {a1} and {a2} of an array of {} dimensions", x.ndim()),
                    ));
                }
                let mut shape: Vec<usize> = (0..x.ndim())
                    .filter(|&d| d != a1 && d != a2)
                    .map(|d| x.shape()[d])
                    .collect();
                shape.push(diagonal_len(x.shape()[a1], x.shape()[a2], *offset));
                shape
            }
            ShapeOp::AsStrided {
                shape,
                strides,
                offset,
            } => {
                check_strided(shape, strides, *offset, x.size())?;
                shape.clone()
            }
            ShapeOp::Concatenate(_) | ShapeOp::Pad(_) => unreachable!("handled above"),
        };
        Ok(vec![(shape, x.dtype())])
    }
}

/// `(start, length)` of each piece of an axis of size `dim` cut at `indices`.
pub(crate) fn split_pieces(dim: usize, indices: &[usize]) -> Vec<(usize, usize)> {
    let mut pieces = Vec::with_capacity(indices.len() + 1);
    let mut start = 0;
    for &i in indices.iter().chain(std::iter::once(&dim)) {
        let (from, to) = (start.min(dim), i.min(dim));
        pieces.push((from, to.saturating_sub(from)));
        start = i;
    }
    pieces
}

/// The length of the diagonal `offset` of a `rows × cols` matrix.
pub(crate) fn diagonal_len(rows: usize, cols: usize, offset: isize) -> usize {
    let (skip_rows, skip_cols) = if offset >= 0 {
        (0, offset.unsigned_abs())
    } else {
        (offset.unsigned_abs(), 0)
    };
    rows.saturating_sub(skip_rows)
        .min(cols.saturating_sub(skip_cols))
}

/// Checks that a strided view of `shape`, `strides` and `offset` reads only elements
/// `0..size`.
fn check_strided(shape: &[usize], strides: &[isize], offset: usize, size: usize) -> Result<()> {
    let op = "as_strided";
    if shape.len() != strides.len() {
        return Err(invalid(
            op,
            format!("{} strides for {} dimensions", strides.len(), shape.len()),
        ));
    }
    if shape.contains(&0) {
        return Ok(());
    }
    let (mut lo, mut hi) = (offset as i128, offset as i128);
    for (&n, &s) in shape.iter().zip(strides) {
        let reach = (n as i128 - 1) * s as i128;
        if reach < 0 {
            lo += reach;
        } else {
            hi += reach;
        }
    }
    if lo < 0 || hi >= size as i128 {
        return Err(invalid(
            op,
            format!(
                "shape {shape:?}, strides {strides:?} and offset {offset} reach elements \
                 {lo}..={hi} of an array of {size}"
            ),
        ));
    }
    Ok(())
}

/// The output of [`ShapeOp::Concatenate`]: inputs of one type and rank, equal but along
/// `axis`.
fn concatenate_spec(axis: usize, inputs: &[Array]) -> Result<Vec<OutputSpec>> {
    let op = "concatenate";
    let Some(first) = inputs.first() else {
        return Err(invalid(op, "no arrays to join"));
    };
    if axis >= first.ndim() {
        return Err(Error::AxisOutOfRange {
            op,
            axis: axis as isize,
            ndim: first.ndim(),
        });
    }
    let mut shape = first.shape().to_vec();
    shape[axis] = 0;
    for x in inputs {
        if x.dtype() != first.dtype() {
            return Err(invalid(
                op,
                format!("inputs of types {} and {}", first.dtype(), x.dtype()),
            ));
        }
        let fits = x.ndim() == first.ndim()
            && (0..x.ndim()).all(|d| d == axis || x.shape()[d] == first.shape()[d]);
        if !fits {
            return Err(Error::IncompatibleShapes {
                op,
                lhs: first.shape().to_vec(),
                rhs: x.shape().to_vec(),
            });
        }
        shape[axis] = shape[axis]
            .checked_add(x.shape()[axis])
            .ok_or_else(|| invalid(op, "the result is too large"))?;
    }
    Ok(vec![(shape, first.dtype())])
}

/// The output of [`ShapeOp::Pad`]: one width pair per axis and a one-element value of `x`'s
/// type.
fn pad_spec(widths: &[(usize, usize)], inputs: &[Array]) -> Result<Vec<OutputSpec>> {
    let op = "pad";
    expect_inputs(op, inputs, 2)?;
    let (x, value) = (&inputs[0], &inputs[1]);
    if widths.len() != x.ndim() {
        return Err(invalid(
            op,
            format!(
                "{} width pairs for an array of {} dimensions",
                widths.len(),
                x.ndim()
            ),
        ));
    }
    if value.size() != 1 || value.dtype() != x.dtype() {
        return Err(invalid(
            op,
            format!(
                "the value must be one element of {}, not {:?} of {}",
                x.dtype(),
                value.shape(),
                value.dtype()
            ),
        ));
    }
    let shape = x
        .shape()
        .iter()
        .zip(widths)
        .map(|(&n, &(lo, hi))| n.checked_add(lo)?.checked_add(hi))
        .collect::<Option<Vec<usize>>>()
        .filter(|s| {
            s.iter()
                .try_fold(1usize, |acc, &d| acc.checked_mul(d))
                .is_some_and(|n| n <= isize::MAX as usize)
        })
        .ok_or_else(|| invalid(op, format!("widths {widths:?} make the result too large")))?;
    Ok(vec![(shape, x.dtype())])
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

/// `a` cut along `axis` into `sections` pieces of equal size (views); an error unless the
/// axis divides evenly.
///
/// ```
/// use nuvec_core::{Array, split};
///
/// let a = Array::from_slice(&[0i32, 1, 2, 3, 4, 5], &[2, 3]).unwrap();
/// let cols = split(&a, 3, -1).unwrap();
/// assert_eq!(cols[1].to_vec::<i32>().unwrap(), [1, 4]);
/// ```
pub fn split(a: &Array, sections: usize, axis: isize) -> Result<Vec<Array>> {
    check_errors(&[a])?;
    let ax = normalize_axis("split", axis, a.ndim())?;
    let dim = a.shape()[ax];
    if sections == 0 || !dim.is_multiple_of(sections) {
        return Err(invalid(
            "split",
            format!("an axis of size {dim} does not split into {sections} equal pieces"),
        ));
    }
    let size = dim / sections;
    let indices: Vec<usize> = (1..sections).map(|i| i * size).collect();
    split_at(a, &indices, axis)
}

/// `a` cut along `axis` at the given points (views), as NumPy's `split` with a list: piece
/// `i` runs from point `i - 1` (0 for the first) to point `i` (the end for the last); points
/// past the end are clamped, and a piece ending before it starts is empty.
///
/// ```
/// use nuvec_core::{Array, split_at};
///
/// let a = Array::from_slice(&[0i32, 1, 2, 3, 4], &[5]).unwrap();
/// let parts = split_at(&a, &[1, 3], 0).unwrap();
/// assert_eq!(parts[1].to_vec::<i32>().unwrap(), [1, 2]);
/// assert_eq!(parts[2].to_vec::<i32>().unwrap(), [3, 4]);
/// ```
pub fn split_at(a: &Array, indices: &[usize], axis: isize) -> Result<Vec<Array>> {
    check_errors(&[a])?;
    let axis = normalize_axis("split", axis, a.ndim())?;
    if indices.is_empty() {
        return Ok(vec![a.clone()]);
    }
    Array::from_op(
        Primitive::Shape(ShapeOp::Split {
            axis,
            indices: indices.to_vec(),
        }),
        vec![a.clone()],
    )
}

/// The arrays joined along `axis` (a copy). Their types are promoted to a common one, as
/// MLX does; their shapes must be equal except along `axis`.
///
/// ```
/// use nuvec_core::{Array, DType, concatenate};
///
/// let a = Array::from_slice(&[1i32, 2], &[1, 2]).unwrap();
/// let b = Array::from_slice(&[3.5f32, 4.5, 5.5, 6.5], &[2, 2]).unwrap();
/// let c = concatenate(&[a, b], 0).unwrap();
/// assert_eq!(c.dtype(), DType::F32);
/// assert_eq!(c.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.5, 4.5, 5.5, 6.5]);
/// ```
pub fn concatenate(arrays: &[Array], axis: isize) -> Result<Array> {
    let op = "concatenate";
    check_errors(&arrays.iter().collect::<Vec<_>>())?;
    let Some(first) = arrays.first() else {
        return Err(invalid(op, "no arrays to join"));
    };
    let axis = normalize_axis(op, axis, first.ndim())?;
    if arrays.len() == 1 {
        return Ok(first.clone());
    }
    let dtype = arrays[1..]
        .iter()
        .fold(first.dtype(), |d, a| crate::promote_types(d, a.dtype()));
    let inputs = arrays
        .iter()
        .map(|a| a.astype(dtype))
        .collect::<Result<Vec<_>>>()?;
    Array::op1(Primitive::Shape(ShapeOp::Concatenate(axis)), inputs)
}

/// `a` padded with `value` (constant mode): `widths` holds `(before, after)` per axis, or
/// one pair for every axis. The value is converted to `a`'s type, as MLX does.
///
/// ```
/// use nuvec_core::{Array, pad};
///
/// let a = Array::from_slice(&[1i32, 2], &[1, 2]).unwrap();
/// let p = pad(&a, &[(1, 0), (0, 2)], 9).unwrap();
/// assert_eq!(p.shape(), [2, 4]);
/// assert_eq!(p.to_vec::<i32>().unwrap(), [9, 9, 9, 9, 1, 2, 9, 9]);
/// ```
pub fn pad(a: &Array, widths: &[(usize, usize)], value: impl Into<Operand>) -> Result<Array> {
    check_errors(&[a])?;
    let value = value.into();
    if let Operand::Array(v) = &value {
        check_errors(&[v])?;
        if v.size() != 1 {
            return Err(invalid(
                "pad",
                format!("the value must have one element, not shape {:?}", v.shape()),
            ));
        }
    }
    let widths = match widths.len() {
        1 => vec![widths[0]; a.ndim()],
        n if n == a.ndim() => widths.to_vec(),
        n => {
            return Err(invalid(
                "pad",
                format!("{n} width pairs for an array of {} dimensions", a.ndim()),
            ));
        }
    };
    let value = reshape(&value.to_array(a.dtype())?, &[])?;
    if widths.iter().all(|&w| w == (0, 0)) {
        return Ok(a.clone());
    }
    Array::op1(
        Primitive::Shape(ShapeOp::Pad(widths)),
        vec![a.clone(), value],
    )
}

/// The diagonal `offset` (above the main one when positive) of the matrices that axes
/// `axis1` (rows) and `axis2` (columns) of `a` hold, as a new last axis; the other axes keep
/// their order. A view.
///
/// ```
/// use nuvec_core::{Array, diagonal};
///
/// let a = Array::from_slice(&[0i32, 1, 2, 3, 4, 5], &[2, 3]).unwrap();
/// assert_eq!(diagonal(&a, 0, 0, 1).unwrap().to_vec::<i32>().unwrap(), [0, 4]);
/// assert_eq!(diagonal(&a, 1, 0, 1).unwrap().to_vec::<i32>().unwrap(), [1, 5]);
/// ```
pub fn diagonal(a: &Array, offset: isize, axis1: isize, axis2: isize) -> Result<Array> {
    let op = "diagonal";
    check_errors(&[a])?;
    if a.ndim() < 2 {
        return Err(invalid(
            op,
            format!("needs two dimensions, the array has {}", a.ndim()),
        ));
    }
    let axis1 = normalize_axis(op, axis1, a.ndim())?;
    let axis2 = normalize_axis(op, axis2, a.ndim())?;
    if axis1 == axis2 {
        return Err(invalid(op, format!("axis1 and axis2 are both {axis1}")));
    }
    Array::op1(
        Primitive::Shape(ShapeOp::Diagonal {
            offset,
            axis1,
            axis2,
        }),
        vec![a.clone()],
    )
}

/// A view of `a`'s elements, taken in row-major order, with any `shape`, `strides` (in
/// elements, possibly zero or negative) and `offset` (MLX's `as_strided`; `a` is copied
/// first when it is not row-major). Errors when the view would reach outside `a`.
///
/// ```
/// use nuvec_core::{Array, as_strided};
///
/// let a = Array::from_slice(&[0i32, 1, 2, 3, 4], &[5]).unwrap();
/// // Sliding windows of three.
/// let w = as_strided(&a, &[3, 3], &[1, 1], 0).unwrap();
/// assert_eq!(w.to_vec::<i32>().unwrap(), [0, 1, 2, 1, 2, 3, 2, 3, 4]);
/// ```
pub fn as_strided(a: &Array, shape: &[usize], strides: &[isize], offset: usize) -> Result<Array> {
    check_errors(&[a])?;
    Array::op1(
        Primitive::Shape(ShapeOp::AsStrided {
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            offset,
        }),
        vec![a.clone()],
    )
}

/// A new array with `a`'s values in a buffer of its own.
///
/// ```
/// use nuvec_core::{Array, copy};
///
/// let a = Array::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
/// assert_eq!(copy(&a).unwrap().to_vec::<f32>().unwrap(), [1.0, 2.0]);
/// ```
pub fn copy(a: &Array) -> Result<Array> {
    check_errors(&[a])?;
    Array::op1(Primitive::Shape(ShapeOp::Copy), vec![a.clone()])
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
