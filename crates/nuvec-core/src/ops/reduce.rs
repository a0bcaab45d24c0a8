//! Reductions (`sum`, `prod`, `max`, `min`, `all`, `any`), arg-reductions (`argmax`,
//! `argmin`), their composites (`mean`, `var`, `std`, `logsumexp`, `softmax`,
//! `count_nonzero`, in [`composite`]) and scans (`cumsum`, ..., in [`scan`]).
//!
//! Reductions take `axes: &[isize]` (negative axes count from the end; an empty list reduces
//! every axis) and `keepdims` (keep the reduced axes as size 1). Types follow MLX: `sum` and
//! `prod` widen booleans and small integers (`bool`, `int8`, `int16` to `int32`; `uint8`,
//! `uint16` to `uint32`), `all` and `any` give booleans, `max` and `min` keep the type, and
//! `float16`/`bfloat16` accumulate in `float32`.
//!
//! ```
//! use nuvec_core::{Array, DType, max, sum};
//!
//! let x = Array::from_slice(&[1i8, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
//! let rows = sum(&x, &[-1], false).unwrap();
//! assert_eq!(rows.dtype(), DType::I32);
//! assert_eq!(rows.to_vec::<i32>().unwrap(), [6, 15]);
//! let all = max(&x, &[], true).unwrap(); // every axis, kept as size 1
//! assert_eq!(all.shape(), [1, 1]);
//! assert_eq!(all.item::<i8>().unwrap(), 6);
//! ```

pub(crate) mod composite;
pub(crate) mod scan;

pub use composite::*;
pub use scan::*;

use crate::error::invalid;
use crate::ops::{check_errors, expect_inputs, normalize_axes, normalize_axis};
use crate::primitive::{OutputSpec, Primitive};
use crate::{Array, Category, DType, Error, Result};

/// The reductions over a set of axes (kept as size 1 in the output).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReduceOp {
    /// The sum (booleans and small integers widen, see [`sum`]).
    Sum,
    /// The product (widens as `Sum`).
    Prod,
    /// The largest element (NaN wins).
    Max,
    /// The smallest element (NaN wins).
    Min,
    /// Whether every element is true, of booleans ([`all`] compares other types with 0).
    All,
    /// Whether some element is true, of booleans ([`any`] compares other types with 0).
    Any,
    /// `log(sum(exp(x)))` without overflow, of floats, over the last axis only (see
    /// [`logsumexp`], which moves the reduced axes there).
    LogSumExp,
}

impl ReduceOp {
    /// The primitive's name (MLX's function name).
    pub fn name(&self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::All => "all",
            ReduceOp::Any => "any",
            ReduceOp::LogSumExp => "logsumexp",
        }
    }

    /// Whether reducing nothing has no answer (no identity element), which is an error.
    pub fn needs_elements(self) -> bool {
        matches!(self, ReduceOp::Max | ReduceOp::Min | ReduceOp::LogSumExp)
    }

    /// The output type for an input of type `dtype`, or the error when the reduction does
    /// not take it.
    pub fn output_dtype(self, dtype: DType) -> Result<DType> {
        let unsupported = Err(Error::UnsupportedDType {
            op: self.name(),
            dtype,
        });
        match self {
            ReduceOp::Sum | ReduceOp::Prod => Ok(accumulation_dtype(dtype)),
            ReduceOp::All | ReduceOp::Any if dtype == DType::Bool => Ok(DType::Bool),
            ReduceOp::All | ReduceOp::Any => unsupported,
            ReduceOp::Max | ReduceOp::Min if dtype == DType::C64 => unsupported,
            ReduceOp::Max | ReduceOp::Min => Ok(dtype),
            ReduceOp::LogSumExp if dtype.is_float() => Ok(dtype),
            ReduceOp::LogSumExp => unsupported,
        }
    }

    /// The output's shape (the reduced axes as size 1) and type; `axes` must be sorted,
    /// unique and in range.
    pub fn output_specs(&self, axes: &[usize], inputs: &[Array]) -> Result<Vec<OutputSpec>> {
        let op = self.name();
        expect_inputs(op, inputs, 1)?;
        let x = &inputs[0];
        check_sorted_axes(op, axes, x.ndim())?;
        if *self == ReduceOp::LogSumExp && axes != [x.ndim().wrapping_sub(1)] {
            return Err(invalid(
                op,
                format!("the primitive reduces the last axis only, got axes {axes:?}"),
            ));
        }
        let dtype = self.output_dtype(x.dtype())?;
        if self.needs_elements() {
            check_nonempty(op, axes, x.shape())?;
        }
        Ok(vec![(kept_shape(x.shape(), axes), dtype)])
    }
}

/// The type `sum`, `prod` and `cumsum` give for inputs of type `dtype` (MLX's rule):
/// `bool`, `int8` and `int16` become `int32`, `uint8` and `uint16` become `uint32`, the
/// rest stay.
pub(crate) fn accumulation_dtype(dtype: DType) -> DType {
    match dtype {
        DType::Bool | DType::I8 | DType::I16 => DType::I32,
        DType::U8 | DType::U16 => DType::U32,
        other => other,
    }
}

/// The arg-reductions: the index of an extreme element along one axis, as `uint32`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ArgReduceOp {
    /// The index of the first largest element (a NaN counts as the largest).
    ArgMax,
    /// The index of the first smallest element (a NaN counts as the smallest).
    ArgMin,
}

impl ArgReduceOp {
    /// The primitive's name (MLX's function name).
    pub fn name(&self) -> &'static str {
        match self {
            ArgReduceOp::ArgMax => "argmax",
            ArgReduceOp::ArgMin => "argmin",
        }
    }

    /// The output's shape (the axis as size 1) and type (`uint32`).
    pub fn output_specs(&self, axis: usize, inputs: &[Array]) -> Result<Vec<OutputSpec>> {
        let op = self.name();
        expect_inputs(op, inputs, 1)?;
        let x = &inputs[0];
        check_sorted_axes(op, &[axis], x.ndim())?;
        if x.dtype() == DType::C64 {
            return Err(Error::UnsupportedDType {
                op,
                dtype: x.dtype(),
            });
        }
        check_nonempty(op, &[axis], x.shape())?;
        Ok(vec![(kept_shape(x.shape(), &[axis]), DType::U32)])
    }
}

/// Checks that primitive axes are in range, sorted and unique.
pub(crate) fn check_sorted_axes(op: &'static str, axes: &[usize], ndim: usize) -> Result<()> {
    if let Some(&bad) = axes.iter().find(|&&a| a >= ndim) {
        return Err(Error::AxisOutOfRange {
            op,
            axis: bad as isize,
            ndim,
        });
    }
    if axes.windows(2).any(|w| w[0] >= w[1]) {
        return Err(invalid(
            op,
            format!("axes {axes:?} must be sorted and unique"),
        ));
    }
    Ok(())
}

/// The error for reducing an axis of size 0 with an operation that has no identity.
fn check_nonempty(op: &'static str, axes: &[usize], shape: &[usize]) -> Result<()> {
    match axes.iter().find(|&&a| shape[a] == 0) {
        Some(&a) => Err(invalid(
            op,
            format!("cannot reduce over axis {a} of size 0 (shape {shape:?})"),
        )),
        None => Ok(()),
    }
}

/// `shape` with the (sorted) `axes` as size 1.
pub(crate) fn kept_shape(shape: &[usize], axes: &[usize]) -> Vec<usize> {
    let mut out = shape.to_vec();
    for &a in axes {
        out[a] = 1;
    }
    out
}

/// The axes of a reduction: normalised, sorted, unique; every axis when `axes` is empty.
pub(crate) fn reduction_axes(op: &'static str, axes: &[isize], ndim: usize) -> Result<Vec<usize>> {
    if axes.is_empty() {
        return Ok((0..ndim).collect());
    }
    normalize_axes(op, axes, ndim)
}

/// `a` reshaped to `shape` (usize dims).
pub(crate) fn reshape_to(a: &Array, shape: &[usize]) -> Result<Array> {
    let dims: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
    crate::reshape(a, &dims)
}

/// The result of a reduction whose output keeps the reduced axes as size 1, without them
/// unless `keepdims`.
pub(crate) fn finish_dims(out: Array, axes: &[usize], keepdims: bool) -> Result<Array> {
    if keepdims {
        return Ok(out);
    }
    let shape: Vec<usize> = (0..out.ndim())
        .filter(|i| !axes.contains(i))
        .map(|i| out.shape()[i])
        .collect();
    reshape_to(&out, &shape)
}

/// Records `op` over `axes` of `a`.
fn reduce(op: ReduceOp, a: &Array, axes: &[isize], keepdims: bool) -> Result<Array> {
    check_errors(&[a])?;
    let a = &match op {
        ReduceOp::All | ReduceOp::Any if a.dtype() != DType::Bool => crate::not_equal(a, 0)?,
        _ => a.clone(),
    };
    let name = op.name();
    let axes = reduction_axes(name, axes, a.ndim())?;
    let dtype = op.output_dtype(a.dtype())?;
    if op.needs_elements() {
        check_nonempty(name, &axes, a.shape())?;
    }
    // Reducing axes of size 1 changes nothing but the type (as MLX, no kernel runs).
    let out = if axes.iter().all(|&i| a.shape()[i] == 1) {
        crate::astype(a, dtype)?
    } else {
        Array::op1(
            Primitive::Reduce {
                op,
                axes: axes.clone(),
            },
            vec![a.clone()],
        )?
    };
    finish_dims(out, &axes, keepdims)
}

/// The sum over `axes` (every axis when empty). `bool`, `int8` and `int16` give `int32`;
/// `uint8` and `uint16` give `uint32`; the rest keep their type. An empty sum is 0.
///
/// ```
/// use nuvec_core::{Array, sum};
///
/// let x = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
/// assert_eq!(sum(&x, &[0], false).unwrap().to_vec::<f32>().unwrap(), [4.0, 6.0]);
/// assert_eq!(sum(&x, &[], false).unwrap().item::<f32>().unwrap(), 10.0);
/// ```
pub fn sum(a: &Array, axes: &[isize], keepdims: bool) -> Result<Array> {
    reduce(ReduceOp::Sum, a, axes, keepdims)
}

/// The product over `axes` (every axis when empty), typed as [`sum`]. An empty product is 1.
///
/// ```
/// use nuvec_core::{Array, prod};
///
/// let x = Array::from_slice(&[1i32, 2, 3, 4], &[2, 2]).unwrap();
/// assert_eq!(prod(&x, &[-1], false).unwrap().to_vec::<i32>().unwrap(), [2, 12]);
/// ```
pub fn prod(a: &Array, axes: &[isize], keepdims: bool) -> Result<Array> {
    reduce(ReduceOp::Prod, a, axes, keepdims)
}

/// The largest element over `axes` (every axis when empty), of `a`'s type. NaN propagates;
/// reducing an axis of size 0 is an error.
///
/// ```
/// use nuvec_core::{Array, max};
///
/// let x = Array::from_slice(&[1.0f32, 5.0, 3.0, 2.0], &[2, 2]).unwrap();
/// assert_eq!(max(&x, &[1], false).unwrap().to_vec::<f32>().unwrap(), [5.0, 3.0]);
/// ```
pub fn max(a: &Array, axes: &[isize], keepdims: bool) -> Result<Array> {
    reduce(ReduceOp::Max, a, axes, keepdims)
}

/// The smallest element over `axes` (every axis when empty), of `a`'s type. NaN propagates;
/// reducing an axis of size 0 is an error.
///
/// ```
/// use nuvec_core::{Array, min};
///
/// let x = Array::from_slice(&[1.0f32, 5.0, 3.0, 2.0], &[2, 2]).unwrap();
/// assert_eq!(min(&x, &[0], false).unwrap().to_vec::<f32>().unwrap(), [1.0, 2.0]);
/// ```
pub fn min(a: &Array, axes: &[isize], keepdims: bool) -> Result<Array> {
    reduce(ReduceOp::Min, a, axes, keepdims)
}

/// Whether every element over `axes` (every axis when empty) is nonzero, as `bool`. True
/// for an empty reduction.
///
/// ```
/// use nuvec_core::{Array, all};
///
/// let x = Array::from_slice(&[1i32, 0, 3, 4], &[2, 2]).unwrap();
/// assert_eq!(all(&x, &[1], false).unwrap().to_vec::<bool>().unwrap(), [false, true]);
/// ```
pub fn all(a: &Array, axes: &[isize], keepdims: bool) -> Result<Array> {
    reduce(ReduceOp::All, a, axes, keepdims)
}

/// Whether some element over `axes` (every axis when empty) is nonzero, as `bool`. False
/// for an empty reduction.
///
/// ```
/// use nuvec_core::{Array, any};
///
/// let x = Array::from_slice(&[0.0f32, 0.0, 0.0, 2.0], &[2, 2]).unwrap();
/// assert_eq!(any(&x, &[1], false).unwrap().to_vec::<bool>().unwrap(), [false, true]);
/// ```
pub fn any(a: &Array, axes: &[isize], keepdims: bool) -> Result<Array> {
    reduce(ReduceOp::Any, a, axes, keepdims)
}

/// Records an arg-reduction along `axis`.
fn arg_reduce(op: ArgReduceOp, a: &Array, axis: isize, keepdims: bool) -> Result<Array> {
    check_errors(&[a])?;
    let name = op.name();
    let axis = normalize_axis(name, axis, a.ndim())?;
    if a.dtype().category() == Category::Complex {
        return Err(Error::UnsupportedDType {
            op: name,
            dtype: a.dtype(),
        });
    }
    check_nonempty(name, &[axis], a.shape())?;
    let out = Array::op1(Primitive::ArgReduce { op, axis }, vec![a.clone()])?;
    finish_dims(out, &[axis], keepdims)
}

/// The index (`uint32`) of the first largest element along `axis`; a NaN counts as larger
/// than anything (as NumPy). An axis of size 0 is an error.
///
/// ```
/// use nuvec_core::{Array, argmax};
///
/// let x = Array::from_slice(&[1.0f32, 7.0, 7.0, 9.0, 2.0, 3.0], &[2, 3]).unwrap();
/// assert_eq!(argmax(&x, -1, false).unwrap().to_vec::<u32>().unwrap(), [1, 0]);
/// ```
pub fn argmax(a: &Array, axis: isize, keepdims: bool) -> Result<Array> {
    arg_reduce(ArgReduceOp::ArgMax, a, axis, keepdims)
}

/// The index (`uint32`) of the first smallest element along `axis`; a NaN counts as
/// smaller than anything (as NumPy). An axis of size 0 is an error.
///
/// ```
/// use nuvec_core::{Array, argmin};
///
/// let x = Array::from_slice(&[4i32, 1, 1, 0], &[2, 2]).unwrap();
/// assert_eq!(argmin(&x, 0, false).unwrap().to_vec::<u32>().unwrap(), [1, 1]);
/// ```
pub fn argmin(a: &Array, axis: isize, keepdims: bool) -> Result<Array> {
    arg_reduce(ArgReduceOp::ArgMin, a, axis, keepdims)
}
