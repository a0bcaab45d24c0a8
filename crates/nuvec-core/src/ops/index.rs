//! Indexing: `take`, `take_along_axis`, MLX's general `gather`, the scatters
//! (`put_along_axis`, `scatter_add_axis`, `scatter`, `scatter_add`, ...) and `slice_update`.
//!
//! Indices may have any integer type (not `bool`); negative indices count from the end of
//! their axis. Indices still out of range after that never fault: **gathers clamp** them into
//! the axis (the window of a [`gather`] slice is moved to fit), **scatters skip** them (an
//! update whose window does not fit entirely is dropped).
//!
//! ```
//! use nuvec_core::{Array, take};
//!
//! let a = Array::from_slice(&[10.0f32, 11.0, 12.0, 20.0, 21.0, 22.0], &[2, 3]).unwrap();
//! let i = Array::from_slice(&[2i32, -3], &[2]).unwrap();
//! let rows = take(&a, &i, Some(1)).unwrap(); // columns 2 and 0 of each row
//! assert_eq!(rows.to_vec::<f32>().unwrap(), [12.0, 10.0, 22.0, 20.0]);
//! ```

use crate::error::invalid;
use crate::ops::shape::SliceArg;
use crate::ops::{broadcast_shapes, broadcast_to, check_errors, expect_inputs, normalize_axis};
use crate::primitive::{OutputSpec, Primitive};
use crate::{Array, Category, DType, Error, Result};

/// How a scatter combines an update with the element already there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScatterMode {
    /// The update replaces the element (for repeated indices, the last update wins).
    Replace,
    /// The element plus the update.
    Sum,
    /// The element times the update.
    Prod,
    /// The larger of the two (NaN wins).
    Max,
    /// The smaller of the two (NaN wins).
    Min,
}

impl ScatterMode {
    /// Whether element type `dtype` can be combined this way (complex numbers have no order).
    fn check(self, op: &'static str, dtype: DType) -> Result<()> {
        let ordered = matches!(self, ScatterMode::Max | ScatterMode::Min);
        if ordered && dtype.category() == Category::Complex {
            return Err(Error::UnsupportedDType { op, dtype });
        }
        Ok(())
    }
}

/// The indexing primitives. Their inputs are checked, cast and broadcast by the op functions;
/// [`IndexOp::output_specs`] checks them again for anyone building nodes directly.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum IndexOp {
    /// `(a, indices)`: whole slices of `a` at `indices` along `axis`; the output's shape is
    /// `a`'s with that axis replaced by the indices' shape.
    Take {
        /// The indexed axis (non-negative).
        axis: usize,
    },
    /// `(a, indices_0, .., indices_k)`, the indices of one shape: MLX's gather. For each index
    /// position, the window of shape `slice_sizes` that starts at `indices_j` on axis
    /// `axes[j]` (and at 0 on the other axes); the output's shape is the indices' shape
    /// followed by `slice_sizes`.
    Gather {
        /// The axis each index array indexes (non-negative, distinct).
        axes: Vec<usize>,
        /// The window's size on every axis of `a`.
        slice_sizes: Vec<usize>,
    },
    /// `(a, indices)` of one rank and equal shapes except on `axis`:
    /// `out[.., j, ..] = a[.., indices[.., j, ..], ..]` (`take_along_axis`).
    GatherAxis {
        /// The indexed axis (non-negative).
        axis: usize,
    },
    /// `(a, indices_0, .., indices_k, updates)`: MLX's scatter, the converse of
    /// [`IndexOp::Gather`]; `updates` has the indices' shape followed by one window shape
    /// (of `a`'s rank). The output has `a`'s shape.
    Scatter {
        /// The axis each index array indexes (non-negative, distinct).
        axes: Vec<usize>,
        /// How updates combine with `a`.
        mode: ScatterMode,
    },
    /// `(a, indices, values)`, indices and values of one shape, equal to `a`'s except on
    /// `axis`: `out[.., indices[.., j, ..], ..] ⊕= values[.., j, ..]` (`put_along_axis`).
    ScatterAxis {
        /// The indexed axis (non-negative).
        axis: usize,
        /// How values combine with `a`.
        mode: ScatterMode,
    },
    /// `(src, update)`: `src` with the strided region `start[d] + k · step[d]`,
    /// `k < update.shape[d]`, combined with `update`.
    SliceUpdate {
        /// The region's first index on each axis.
        start: Vec<usize>,
        /// The region's step on each axis (never 0).
        step: Vec<isize>,
        /// How the update combines with `src`.
        mode: ScatterMode,
    },
}

impl IndexOp {
    /// The primitive's name (the MLX function that makes it).
    pub fn name(&self) -> &'static str {
        use ScatterMode::*;
        match self {
            IndexOp::Take { .. } => "take",
            IndexOp::Gather { .. } => "gather",
            IndexOp::GatherAxis { .. } => "take_along_axis",
            IndexOp::Scatter { mode, .. } => match mode {
                Replace => "scatter",
                Sum => "scatter_add",
                Prod => "scatter_prod",
                Max => "scatter_max",
                Min => "scatter_min",
            },
            IndexOp::ScatterAxis { mode, .. } => match mode {
                Replace => "put_along_axis",
                Sum => "scatter_add_axis",
                Prod => "scatter_prod_axis",
                Max => "scatter_max_axis",
                Min => "scatter_min_axis",
            },
            IndexOp::SliceUpdate { mode, .. } => match mode {
                Replace => "slice_update",
                Sum => "slice_update_add",
                Prod => "slice_update_prod",
                Max => "slice_update_max",
                Min => "slice_update_min",
            },
        }
    }

    /// The output's shape and type, after checking the inputs.
    pub fn output_specs(&self, inputs: &[Array]) -> Result<Vec<OutputSpec>> {
        let op = self.name();
        let spec = match self {
            IndexOp::Take { axis } => {
                expect_inputs(op, inputs, 2)?;
                let (a, indices) = (&inputs[0], &inputs[1]);
                check_indices(op, &[indices])?;
                check_axis(op, *axis, a.ndim())?;
                nonempty_axis(op, a.shape()[*axis], indices.size())?;
                let mut shape = a.shape()[..*axis].to_vec();
                shape.extend_from_slice(indices.shape());
                shape.extend_from_slice(&a.shape()[axis + 1..]);
                (shape, a.dtype())
            }
            IndexOp::Gather { axes, slice_sizes } => {
                expect_inputs(op, inputs, axes.len() + 1)?;
                let a = &inputs[0];
                let indices: Vec<&Array> = inputs[1..].iter().collect();
                let index_shape = check_indexing(op, a, &indices, axes)?;
                if slice_sizes.len() != a.ndim() {
                    return Err(invalid(
                        op,
                        format!(
                            "{} slice sizes for an array of {} dimensions",
                            slice_sizes.len(),
                            a.ndim()
                        ),
                    ));
                }
                if slice_sizes.iter().zip(a.shape()).any(|(s, d)| s > d) {
                    return Err(invalid(
                        op,
                        format!(
                            "slice sizes {slice_sizes:?} exceed the array's shape {:?}",
                            a.shape()
                        ),
                    ));
                }
                let mut shape = index_shape;
                shape.extend_from_slice(slice_sizes);
                (shape, a.dtype())
            }
            IndexOp::GatherAxis { axis } => {
                expect_inputs(op, inputs, 2)?;
                let (a, indices) = (&inputs[0], &inputs[1]);
                check_indices(op, &[indices])?;
                check_axis(op, *axis, a.ndim())?;
                same_except(op, a.shape(), indices.shape(), *axis)?;
                nonempty_axis(op, a.shape()[*axis], indices.size())?;
                (indices.shape().to_vec(), a.dtype())
            }
            IndexOp::Scatter { axes, mode } => {
                expect_inputs(op, inputs, axes.len() + 2)?;
                let (a, updates) = (&inputs[0], &inputs[inputs.len() - 1]);
                let indices: Vec<&Array> = inputs[1..inputs.len() - 1].iter().collect();
                let index_shape = check_indexing(op, a, &indices, axes)?;
                same_dtype(op, a, updates)?;
                mode.check(op, a.dtype())?;
                check_updates(op, a.shape(), &index_shape, updates.shape())?;
                (a.shape().to_vec(), a.dtype())
            }
            IndexOp::ScatterAxis { axis, mode } => {
                expect_inputs(op, inputs, 3)?;
                let (a, indices, values) = (&inputs[0], &inputs[1], &inputs[2]);
                check_indices(op, &[indices])?;
                check_axis(op, *axis, a.ndim())?;
                same_dtype(op, a, values)?;
                mode.check(op, a.dtype())?;
                if indices.shape() != values.shape() {
                    return Err(Error::IncompatibleShapes {
                        op,
                        lhs: indices.shape().to_vec(),
                        rhs: values.shape().to_vec(),
                    });
                }
                same_except(op, a.shape(), indices.shape(), *axis)?;
                (a.shape().to_vec(), a.dtype())
            }
            IndexOp::SliceUpdate { start, step, mode } => {
                expect_inputs(op, inputs, 2)?;
                let (src, update) = (&inputs[0], &inputs[1]);
                same_dtype(op, src, update)?;
                mode.check(op, src.dtype())?;
                let nd = src.ndim();
                if start.len() != nd || step.len() != nd || update.ndim() != nd {
                    return Err(invalid(
                        op,
                        format!(
                            "a region of {} starts, {} steps and an update of {} dimensions \
                             for an array of {nd}",
                            start.len(),
                            step.len(),
                            update.ndim()
                        ),
                    ));
                }
                for d in 0..nd {
                    let (dim, len) = (src.shape()[d] as isize, update.shape()[d] as isize);
                    let first = start[d] as isize;
                    let last = first + (len - 1) * step[d];
                    let inside = |i: isize| (0..dim).contains(&i);
                    if step[d] == 0 || (len > 0 && !(inside(first) && inside(last))) {
                        return Err(invalid(
                            op,
                            format!(
                                "region {start:?} step {step:?} of shape {:?} does not fit in \
                                 shape {:?}",
                                update.shape(),
                                src.shape()
                            ),
                        ));
                    }
                }
                (src.shape().to_vec(), src.dtype())
            }
        };
        Ok(vec![spec])
    }
}

/// Checks that every index array has an integer type.
fn check_indices(op: &'static str, indices: &[&Array]) -> Result<()> {
    for idx in indices {
        if !idx.dtype().is_integer() {
            return Err(invalid(
                op,
                format!("indices must be integers, got {}", idx.dtype()),
            ));
        }
    }
    Ok(())
}

fn check_axis(op: &'static str, axis: usize, ndim: usize) -> Result<()> {
    if axis >= ndim {
        return Err(Error::AxisOutOfRange {
            op,
            axis: axis as isize,
            ndim,
        });
    }
    Ok(())
}

/// An axis of size 0 has nothing to take: only an empty set of indices may index it.
fn nonempty_axis(op: &'static str, dim: usize, count: usize) -> Result<()> {
    if dim == 0 && count > 0 {
        return Err(invalid(op, "cannot take from an empty axis"));
    }
    Ok(())
}

fn same_dtype(op: &'static str, a: &Array, b: &Array) -> Result<()> {
    if a.dtype() != b.dtype() {
        return Err(invalid(
            op,
            format!("values of type {} for an array of {}", b.dtype(), a.dtype()),
        ));
    }
    Ok(())
}

/// Checks that two shapes of one rank agree on every axis but `axis`.
fn same_except(op: &'static str, a: &[usize], b: &[usize], axis: usize) -> Result<()> {
    let agree = a.len() == b.len()
        && a.iter()
            .zip(b)
            .enumerate()
            .all(|(d, (x, y))| d == axis || x == y);
    if !agree {
        return Err(Error::IncompatibleShapes {
            op,
            lhs: a.to_vec(),
            rhs: b.to_vec(),
        });
    }
    Ok(())
}

/// The checks shared by gathers and scatters: the axes, the index types, one index shape.
/// Returns that shape.
fn check_indexing(
    op: &'static str,
    a: &Array,
    indices: &[&Array],
    axes: &[usize],
) -> Result<Vec<usize>> {
    if indices.len() != axes.len() {
        return Err(invalid(
            op,
            format!("{} index arrays for {} axes", indices.len(), axes.len()),
        ));
    }
    let mut seen = vec![false; a.ndim()];
    for &axis in axes {
        check_axis(op, axis, a.ndim())?;
        if std::mem::replace(&mut seen[axis], true) {
            return Err(invalid(op, format!("repeated axis in {axes:?}")));
        }
    }
    check_indices(op, indices)?;
    let shape = indices.first().map_or(Vec::new(), |i| i.shape().to_vec());
    if let Some(other) = indices.iter().find(|i| i.shape() != shape) {
        return Err(Error::IncompatibleShapes {
            op,
            lhs: shape,
            rhs: other.shape().to_vec(),
        });
    }
    Ok(shape)
}

/// Checks a scatter's updates: the index shape, then one window no larger than `a`.
fn check_updates(op: &'static str, a: &[usize], index: &[usize], updates: &[usize]) -> Result<()> {
    let fits = updates.len() == index.len() + a.len()
        && updates[..index.len()] == *index
        && updates[index.len()..].iter().zip(a).all(|(u, d)| u <= d);
    if !fits {
        return Err(invalid(
            op,
            format!(
                "updates of shape {updates:?} do not match indices of shape {index:?} followed \
                 by a window within {a:?}"
            ),
        ));
    }
    Ok(())
}

/// Rejects index arrays that are not integers, with the op's name.
fn integer_indices(op: &'static str, indices: &[&Array]) -> Result<()> {
    check_errors(indices)?;
    check_indices(op, indices)
}

/// `a` flattened to one axis, with that axis, when `axis` is `None`; else `a` and the axis.
fn flat_or_axis(op: &'static str, a: &Array, axis: Option<isize>) -> Result<(Array, usize)> {
    match axis {
        None => Ok((a.reshape(&[-1])?, 0)),
        Some(axis) => Ok((a.clone(), normalize_axis(op, axis, a.ndim())?)),
    }
}

/// Shapes broadcast together on every axis but `axis`, where each keeps its own size.
fn broadcast_except(op: &'static str, shapes: &[&[usize]], axis: usize) -> Result<Vec<Vec<usize>>> {
    let mut common: Vec<usize> = Vec::new();
    for s in shapes {
        let mut s = s.to_vec();
        s[axis] = 1;
        common = broadcast_shapes(op, &common, &s)?;
    }
    Ok(shapes
        .iter()
        .map(|s| {
            let mut out = common.clone();
            out[axis] = s[axis];
            out
        })
        .collect())
}

/// The slices of `a` at `indices` along `axis`, NumPy's `take`: the output has `a`'s shape
/// with that axis replaced by the indices' shape (a 0-D index removes it). With `axis`
/// `None`, `a` is flattened first. Negative indices count from the end; indices still out of
/// range are clamped to the axis.
///
/// ```
/// use nuvec_core::{Array, take};
///
/// let a = Array::from_slice(&[1i32, 2, 3, 4, 5, 6], &[3, 2]).unwrap();
/// let i = Array::from_slice(&[2u32, 0], &[2, 1]).unwrap();
/// let t = take(&a, &i, Some(0)).unwrap();
/// assert_eq!(t.shape(), [2, 1, 2]);
/// assert_eq!(t.to_vec::<i32>().unwrap(), [5, 6, 1, 2]);
/// let flat = take(&a, &Array::scalar(-1i64), None).unwrap();
/// assert_eq!(flat.item::<i32>().unwrap(), 6);
/// ```
pub fn take(a: &Array, indices: &Array, axis: Option<isize>) -> Result<Array> {
    check_errors(&[a])?;
    integer_indices("take", &[indices])?;
    let (a, axis) = flat_or_axis("take", a, axis)?;
    Array::op1(
        Primitive::Index(IndexOp::Take { axis }),
        vec![a, indices.clone()],
    )
}

/// `out[.., j, ..] = a[.., indices[.., j, ..], ..]` along `axis`, NumPy's `take_along_axis`:
/// `indices` has `a`'s rank, and the two broadcast against each other on every other axis.
/// With `axis` `None`, `a` is flattened (and `indices` must be 1-D). Out-of-range indices
/// are clamped, negative ones count from the end.
///
/// ```
/// use nuvec_core::{Array, take_along_axis};
///
/// let a = Array::from_slice(&[3.0f32, 1.0, 2.0, 9.0, 7.0, 8.0], &[2, 3]).unwrap();
/// let i = Array::from_slice(&[1i32, 2, 0, 1], &[2, 2]).unwrap();
/// let t = take_along_axis(&a, &i, Some(-1)).unwrap();
/// assert_eq!(t.to_vec::<f32>().unwrap(), [1.0, 2.0, 9.0, 7.0]);
/// ```
pub fn take_along_axis(a: &Array, indices: &Array, axis: Option<isize>) -> Result<Array> {
    let op = "take_along_axis";
    check_errors(&[a])?;
    integer_indices(op, &[indices])?;
    let (a, axis) = flat_or_axis(op, a, axis)?;
    if indices.ndim() != a.ndim() {
        return Err(invalid(
            op,
            format!(
                "indices of {} dimensions for an array of {}",
                indices.ndim(),
                a.ndim()
            ),
        ));
    }
    let shapes = broadcast_except(op, &[a.shape(), indices.shape()], axis)?;
    let inputs = vec![
        broadcast_to(&a, &shapes[0])?,
        broadcast_to(indices, &shapes[1])?,
    ];
    Array::op1(Primitive::Index(IndexOp::GatherAxis { axis }), inputs)
}

/// The scatter along an axis behind [`put_along_axis`] and [`scatter_add_axis`].
fn scatter_axis(
    mode: ScatterMode,
    a: &Array,
    indices: &Array,
    values: &Array,
    axis: Option<isize>,
) -> Result<Array> {
    let op = IndexOp::ScatterAxis { axis: 0, mode }.name();
    check_errors(&[a, values])?;
    integer_indices(op, &[indices])?;
    mode.check(op, a.dtype())?;
    let (flat, axis_n) = flat_or_axis(op, a, axis)?;
    if indices.ndim() != flat.ndim() {
        return Err(invalid(
            op,
            format!(
                "indices of {} dimensions for an array of {}",
                indices.ndim(),
                flat.ndim()
            ),
        ));
    }
    if flat.size() == 0 {
        return Ok(a.clone());
    }
    let mut values = values.astype(a.dtype())?;
    if values.ndim() > indices.ndim() {
        // Leading axes of size 1 beyond the indices' rank are dropped, as MLX does.
        let extra = values.ndim() - indices.ndim();
        if values.shape()[..extra].iter().any(|&d| d != 1) {
            return Err(Error::IncompatibleShapes {
                op,
                lhs: indices.shape().to_vec(),
                rhs: values.shape().to_vec(),
            });
        }
        let rest: Vec<isize> = values.shape()[extra..]
            .iter()
            .map(|&d| d as isize)
            .collect();
        values = values.reshape(&rest)?;
    }
    let joint = broadcast_shapes(op, indices.shape(), values.shape())?;
    let shapes = broadcast_except(op, &[flat.shape(), &joint], axis_n)?;
    let inputs = vec![
        broadcast_to(&flat, &shapes[0])?,
        broadcast_to(indices, &shapes[1])?,
        broadcast_to(&values, &shapes[1])?,
    ];
    let out = Array::op1(
        Primitive::Index(IndexOp::ScatterAxis { axis: axis_n, mode }),
        inputs,
    )?;
    match axis {
        None => {
            let shape: Vec<isize> = a.shape().iter().map(|&d| d as isize).collect();
            out.reshape(&shape)
        }
        Some(_) => Ok(out),
    }
}

/// `a` with `values` written at `indices` along `axis`, NumPy's `put_along_axis` (as a new
/// array): `out[.., indices[.., j, ..], ..] = values[.., j, ..]`. The indices have `a`'s
/// rank; indices and values broadcast together, then with `a` on every other axis. With
/// `axis` `None`, `a` is flattened for the indexing and keeps its shape. Negative indices
/// count from the end; out-of-range ones are skipped; for repeated ones the last value wins.
///
/// ```
/// use nuvec_core::{Array, put_along_axis};
///
/// let a = Array::from_slice(&[0i32; 6], &[2, 3]).unwrap();
/// let i = Array::from_slice(&[2i32, -3], &[2, 1]).unwrap();
/// let v = Array::from_slice(&[7i32, 8], &[2, 1]).unwrap();
/// let p = put_along_axis(&a, &i, &v, Some(1)).unwrap();
/// assert_eq!(p.to_vec::<i32>().unwrap(), [0, 0, 7, 8, 0, 0]);
/// ```
pub fn put_along_axis(
    a: &Array,
    indices: &Array,
    values: &Array,
    axis: Option<isize>,
) -> Result<Array> {
    scatter_axis(ScatterMode::Replace, a, indices, values, axis)
}

/// As [`put_along_axis`], but the values are added (repeated indices add up).
pub fn scatter_add_axis(
    a: &Array,
    indices: &Array,
    values: &Array,
    axis: Option<isize>,
) -> Result<Array> {
    scatter_axis(ScatterMode::Sum, a, indices, values, axis)
}

/// Normalised axes and the index arrays broadcast to one shape.
fn prepare_indexing(
    op: &'static str,
    a: &Array,
    indices: &[Array],
    axes: &[isize],
) -> Result<(Vec<usize>, Vec<Array>)> {
    let refs: Vec<&Array> = indices.iter().collect();
    check_errors(&[a])?;
    integer_indices(op, &refs)?;
    if indices.len() > a.ndim() {
        return Err(invalid(
            op,
            format!(
                "{} index arrays for an array of {} dimensions",
                indices.len(),
                a.ndim()
            ),
        ));
    }
    let axes = axes
        .iter()
        .map(|&ax| normalize_axis(op, ax, a.ndim()))
        .collect::<Result<Vec<_>>>()?;
    let mut shape = Vec::new();
    for idx in indices {
        shape = broadcast_shapes(op, &shape, idx.shape())?;
    }
    let indices = indices
        .iter()
        .map(|i| broadcast_to(i, &shape))
        .collect::<Result<Vec<_>>>()?;
    Ok((axes, indices))
}

/// MLX's general gather. `indices[j]` indexes axis `axes[j]` of `a`; the index arrays
/// broadcast to one shape. For each index position, the window of shape `slice_sizes` (one
/// size per axis of `a`) starting there (and at 0 on axes without indices) is taken: the
/// output's shape is the broadcast index shape followed by `slice_sizes`. Negative indices
/// count from the end; a window that would run past its axis is moved back inside (clamped).
///
/// ```
/// use nuvec_core::{Array, gather};
///
/// let a = Array::from_slice(&(0..12).collect::<Vec<i32>>(), &[3, 4]).unwrap();
/// let rows = Array::from_slice(&[2i32, 0], &[2]).unwrap();
/// let cols = Array::from_slice(&[1i32, 3], &[2]).unwrap();
/// // Elements (2, 1) and (0, 3), each as a 1x1 window.
/// let g = gather(&a, &[rows, cols], &[0, 1], &[1, 1]).unwrap();
/// assert_eq!(g.shape(), [2, 1, 1]);
/// assert_eq!(g.to_vec::<i32>().unwrap(), [9, 3]);
/// ```
pub fn gather(
    a: &Array,
    indices: &[Array],
    axes: &[isize],
    slice_sizes: &[usize],
) -> Result<Array> {
    let (axes, indices) = prepare_indexing("gather", a, indices, axes)?;
    let mut inputs = vec![a.clone()];
    inputs.extend(indices);
    Array::op1(
        Primitive::Index(IndexOp::Gather {
            axes,
            slice_sizes: slice_sizes.to_vec(),
        }),
        inputs,
    )
}

/// The scatter behind [`scatter`] and its reducing forms.
fn scatter_with(
    mode: ScatterMode,
    a: &Array,
    indices: &[Array],
    updates: &Array,
    axes: &[isize],
) -> Result<Array> {
    let op = IndexOp::Scatter {
        axes: Vec::new(),
        mode,
    }
    .name();
    check_errors(&[updates])?;
    let (axes, indices) = prepare_indexing(op, a, indices, axes)?;
    let mut inputs = vec![a.clone()];
    inputs.extend(indices);
    inputs.push(updates.astype(a.dtype())?);
    Array::op1(Primitive::Index(IndexOp::Scatter { axes, mode }), inputs)
}

/// MLX's general scatter, the converse of [`gather`]: `a` with windows replaced by
/// `updates`. `indices[j]` indexes axis `axes[j]`; the index arrays broadcast to one shape,
/// and `updates` has that shape followed by one window shape of `a`'s rank (each size at
/// most `a`'s). Each window is placed at its index position (0 on axes without indices).
/// Updates are cast to `a`'s type. Negative indices count from the end; a window that does
/// not fit inside `a` is skipped; for repeated indices the last update wins.
///
/// ```
/// use nuvec_core::{Array, scatter};
///
/// let a = Array::from_slice(&[0.0f32; 6], &[3, 2]).unwrap();
/// let rows = Array::from_slice(&[2i32, 0], &[2]).unwrap();
/// // Two windows of shape [1, 2]: whole rows.
/// let u = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 1, 2]).unwrap();
/// let s = scatter(&a, &[rows], &u, &[0]).unwrap();
/// assert_eq!(s.to_vec::<f32>().unwrap(), [3.0, 4.0, 0.0, 0.0, 1.0, 2.0]);
/// ```
pub fn scatter(a: &Array, indices: &[Array], updates: &Array, axes: &[isize]) -> Result<Array> {
    scatter_with(ScatterMode::Replace, a, indices, updates, axes)
}

/// As [`scatter`], but the updates are added (repeated indices add up).
pub fn scatter_add(a: &Array, indices: &[Array], updates: &Array, axes: &[isize]) -> Result<Array> {
    scatter_with(ScatterMode::Sum, a, indices, updates, axes)
}

/// As [`scatter`], but the elements are multiplied by the updates.
pub fn scatter_prod(
    a: &Array,
    indices: &[Array],
    updates: &Array,
    axes: &[isize],
) -> Result<Array> {
    scatter_with(ScatterMode::Prod, a, indices, updates, axes)
}

/// As [`scatter`], but each element becomes the largest of itself and its updates.
pub fn scatter_max(a: &Array, indices: &[Array], updates: &Array, axes: &[isize]) -> Result<Array> {
    scatter_with(ScatterMode::Max, a, indices, updates, axes)
}

/// As [`scatter`], but each element becomes the smallest of itself and its updates.
pub fn scatter_min(a: &Array, indices: &[Array], updates: &Array, axes: &[isize]) -> Result<Array> {
    scatter_with(ScatterMode::Min, a, indices, updates, axes)
}

/// The region update behind [`slice_update`] and its reducing forms.
fn slice_update_with(
    mode: ScatterMode,
    src: &Array,
    update: &Array,
    slices: &[SliceArg],
) -> Result<Array> {
    let op = IndexOp::SliceUpdate {
        start: Vec::new(),
        step: Vec::new(),
        mode,
    }
    .name();
    check_errors(&[src, update])?;
    mode.check(op, src.dtype())?;
    if slices.len() > src.ndim() {
        return Err(invalid(
            op,
            format!(
                "{} slices for an array of {} dimensions",
                slices.len(),
                src.ndim()
            ),
        ));
    }
    let full = SliceArg::full();
    let (mut start, mut step, mut shape) = (Vec::new(), Vec::new(), Vec::new());
    for (d, &dim) in src.shape().iter().enumerate() {
        let (first, st, len) = slices.get(d).unwrap_or(&full).resolve(op, dim)?;
        start.push(first);
        step.push(st);
        shape.push(len);
    }
    if broadcast_shapes(op, update.shape(), &shape)? != shape {
        return Err(Error::IncompatibleShapes {
            op,
            lhs: update.shape().to_vec(),
            rhs: shape,
        });
    }
    let update = broadcast_to(&update.astype(src.dtype())?, &shape)?;
    let whole = shape
        .iter()
        .zip(src.shape())
        .zip(&step)
        .all(|((len, dim), st)| len == dim && (*st > 0 || *dim <= 1));
    if mode == ScatterMode::Replace && whole {
        // The region is all of `src`, in order: the result is the update itself.
        return Ok(update);
    }
    Array::op1(
        Primitive::Index(IndexOp::SliceUpdate { start, step, mode }),
        vec![src.clone(), update],
    )
}

/// `src` with the region `slices` selects replaced by `update` (as a new array; MLX's
/// `slice_update`). The slices follow Python's rules (any step, negative included); axes
/// past the last slice are taken whole. `update` is cast to `src`'s type and broadcast to
/// the region's shape. When evaluation owns `src`'s buffer alone, the region is written in
/// place; otherwise `src` is copied first (an array still held elsewhere never changes).
///
/// ```
/// use nuvec_core::{Array, SliceArg, slice_update};
///
/// let a = Array::from_slice(&[0i32; 6], &[2, 3]).unwrap();
/// let u = Array::from_slice(&[1i32, 2], &[2]).unwrap();
/// // Row 1, columns 2 and 0 (step -2).
/// let region = [SliceArg::index(1), SliceArg::new(None, None, -2)];
/// let b = slice_update(&a, &u, &region).unwrap();
/// assert_eq!(b.to_vec::<i32>().unwrap(), [0, 0, 0, 2, 0, 1]);
/// ```
pub fn slice_update(src: &Array, update: &Array, slices: &[SliceArg]) -> Result<Array> {
    slice_update_with(ScatterMode::Replace, src, update, slices)
}

/// As [`slice_update`], but the update is added to the region.
pub fn slice_update_add(src: &Array, update: &Array, slices: &[SliceArg]) -> Result<Array> {
    slice_update_with(ScatterMode::Sum, src, update, slices)
}

/// As [`slice_update`], but the region is multiplied by the update.
pub fn slice_update_prod(src: &Array, update: &Array, slices: &[SliceArg]) -> Result<Array> {
    slice_update_with(ScatterMode::Prod, src, update, slices)
}

/// As [`slice_update`], but the region becomes the larger of itself and the update.
pub fn slice_update_max(src: &Array, update: &Array, slices: &[SliceArg]) -> Result<Array> {
    slice_update_with(ScatterMode::Max, src, update, slices)
}

/// As [`slice_update`], but the region becomes the smaller of itself and the update.
pub fn slice_update_min(src: &Array, update: &Array, slices: &[SliceArg]) -> Result<Array> {
    slice_update_with(ScatterMode::Min, src, update, slices)
}
