//! Scans: cumulative reductions along one axis (`cumsum`, `cumprod`, `cummax`, `cummin`,
//! `logcumsumexp`), forwards or from the end (`reverse`), with element `i` included in its
//! own result or not (`inclusive`; an exclusive scan starts from the reduction's identity).
//!
//! ```
//! use nuvec_core::{Array, cumsum};
//!
//! let x = Array::from_slice(&[1i32, 2, 3, 4], &[4]).unwrap();
//! assert_eq!(cumsum(&x, 0, false, true).unwrap().to_vec::<i32>().unwrap(), [1, 3, 6, 10]);
//! assert_eq!(cumsum(&x, 0, true, true).unwrap().to_vec::<i32>().unwrap(), [10, 9, 7, 4]);
//! assert_eq!(cumsum(&x, 0, false, false).unwrap().to_vec::<i32>().unwrap(), [0, 1, 3, 6]);
//! ```

use super::{accumulation_dtype, check_sorted_axes};
use crate::ops::{check_errors, expect_inputs, normalize_axis};
use crate::primitive::{OutputSpec, Primitive};
use crate::{Array, DType, Error, Result};

/// The scans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ScanOp {
    /// Running sums (booleans and small integers widen as [`crate::sum`]).
    Sum,
    /// Running products (the type is kept, as MLX).
    Prod,
    /// Running maxima (NaN propagates).
    Max,
    /// Running minima (NaN propagates).
    Min,
    /// Running `log(sum(exp(x)))`, of floats.
    LogAddExp,
}

impl ScanOp {
    /// The primitive's name (MLX's function name).
    pub fn name(&self) -> &'static str {
        match self {
            ScanOp::Sum => "cumsum",
            ScanOp::Prod => "cumprod",
            ScanOp::Max => "cummax",
            ScanOp::Min => "cummin",
            ScanOp::LogAddExp => "logcumsumexp",
        }
    }

    /// The output type for an input of type `dtype`, or the error when the scan does not
    /// take it.
    pub fn output_dtype(self, dtype: DType) -> Result<DType> {
        let unsupported = Err(Error::UnsupportedDType {
            op: self.name(),
            dtype,
        });
        match self {
            ScanOp::Sum => Ok(accumulation_dtype(dtype)),
            ScanOp::Prod => Ok(dtype),
            ScanOp::Max | ScanOp::Min if dtype == DType::C64 => unsupported,
            ScanOp::Max | ScanOp::Min => Ok(dtype),
            ScanOp::LogAddExp if dtype.is_float() => Ok(dtype),
            ScanOp::LogAddExp => unsupported,
        }
    }

    /// The output's shape (the input's) and type.
    pub fn output_specs(&self, axis: usize, inputs: &[Array]) -> Result<Vec<OutputSpec>> {
        let op = self.name();
        expect_inputs(op, inputs, 1)?;
        let x = &inputs[0];
        check_sorted_axes(op, &[axis], x.ndim())?;
        Ok(vec![(x.shape().to_vec(), self.output_dtype(x.dtype())?)])
    }
}

/// Records a scan of `a` along `axis`.
fn scan(op: ScanOp, a: &Array, axis: isize, reverse: bool, inclusive: bool) -> Result<Array> {
    check_errors(&[a])?;
    let axis = normalize_axis(op.name(), axis, a.ndim())?;
    let x = if op == ScanOp::LogAddExp {
        crate::astype(a, a.dtype().to_inexact())?
    } else {
        a.clone()
    };
    op.output_dtype(x.dtype())?;
    scan_node(op, &x, axis, reverse, inclusive)
}

/// The scan primitive itself on `x`, unchecked: what [`scan`] records once it has checked
/// and converted its input, and what the derivative rules record on values of a known type.
pub(crate) fn scan_node(
    op: ScanOp,
    x: &Array,
    axis: usize,
    reverse: bool,
    inclusive: bool,
) -> Result<Array> {
    let scan = Primitive::Scan {
        op,
        axis,
        reverse,
        inclusive,
    };
    Array::op1(scan, vec![x.clone()])
}

/// The running sum along `axis` (from the end when `reverse`; element `i` left out of its
/// own result unless `inclusive`). Typed as [`crate::sum`].
///
/// ```
/// use nuvec_core::{Array, DType, cumsum};
///
/// let x = Array::from_slice(&[true, true, false, true], &[4]).unwrap();
/// let c = cumsum(&x, -1, false, true).unwrap();
/// assert_eq!(c.dtype(), DType::I32);
/// assert_eq!(c.to_vec::<i32>().unwrap(), [1, 2, 2, 3]);
/// ```
pub fn cumsum(a: &Array, axis: isize, reverse: bool, inclusive: bool) -> Result<Array> {
    scan(ScanOp::Sum, a, axis, reverse, inclusive)
}

/// The running product along `axis` (see [`cumsum`] for the flags); the type is kept.
///
/// ```
/// use nuvec_core::{Array, cumprod};
///
/// let x = Array::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
/// assert_eq!(cumprod(&x, 0, false, true).unwrap().to_vec::<f32>().unwrap(), [1.0, 2.0, 6.0]);
/// ```
pub fn cumprod(a: &Array, axis: isize, reverse: bool, inclusive: bool) -> Result<Array> {
    scan(ScanOp::Prod, a, axis, reverse, inclusive)
}

/// The running maximum along `axis` (see [`cumsum`] for the flags; an exclusive scan
/// starts from the type's lowest value). NaN propagates.
///
/// ```
/// use nuvec_core::{Array, cummax};
///
/// let x = Array::from_slice(&[1i32, 3, 2, 5], &[4]).unwrap();
/// assert_eq!(cummax(&x, 0, false, true).unwrap().to_vec::<i32>().unwrap(), [1, 3, 3, 5]);
/// ```
pub fn cummax(a: &Array, axis: isize, reverse: bool, inclusive: bool) -> Result<Array> {
    scan(ScanOp::Max, a, axis, reverse, inclusive)
}

/// The running minimum along `axis` (see [`cumsum`] for the flags; an exclusive scan
/// starts from the type's highest value). NaN propagates.
///
/// ```
/// use nuvec_core::{Array, cummin};
///
/// let x = Array::from_slice(&[4i32, 3, 5, 1], &[4]).unwrap();
/// assert_eq!(cummin(&x, 0, false, true).unwrap().to_vec::<i32>().unwrap(), [4, 3, 3, 1]);
/// ```
pub fn cummin(a: &Array, axis: isize, reverse: bool, inclusive: bool) -> Result<Array> {
    scan(ScanOp::Min, a, axis, reverse, inclusive)
}

/// The running `log(sum(exp(a)))` along `axis` (see [`cumsum`] for the flags; an exclusive
/// scan starts from `-∞`), computed stably. Integers and booleans give `float32`; half
/// types accumulate in `float32`.
///
/// ```
/// use nuvec_core::{Array, logcumsumexp};
///
/// let x = Array::from_slice(&[0.0f64, 0.0], &[2]).unwrap();
/// let y = logcumsumexp(&x, 0, false, true).unwrap().to_vec::<f64>().unwrap();
/// assert_eq!(y[0], 0.0);
/// assert!((y[1] - 2f64.ln()).abs() < 1e-15);
/// ```
pub fn logcumsumexp(a: &Array, axis: isize, reverse: bool, inclusive: bool) -> Result<Array> {
    scan(ScanOp::LogAddExp, a, axis, reverse, inclusive)
}
