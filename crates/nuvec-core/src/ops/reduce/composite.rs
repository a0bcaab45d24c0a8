//! Reductions built from others: `mean`, `var`, `std`, `count_nonzero`, and the stable
//! `logsumexp` and `softmax`, which move their axes last and run one fused kernel there.

use super::{ReduceOp, finish_dims, kept_shape, reduction_axes, reshape_to};
use crate::fast::FastOp;
use crate::ops::{check_errors, expect_inputs};
use crate::primitive::{OutputSpec, Primitive};
use crate::{Array, DType, Error, Result};

/// The number of elements reduced over `axes` (sorted) of `shape`.
fn reduced_count(shape: &[usize], axes: &[usize]) -> usize {
    axes.iter().map(|&a| shape[a]).product()
}

/// `a` as a float type: integers and booleans become `float32`.
fn inexact(a: &Array) -> Result<Array> {
    crate::astype(a, a.dtype().to_inexact())
}

/// `a` in the type its statistics are computed in: `float32` for integers, booleans and
/// the half types (so that sums of half values cannot overflow), else its own.
fn widened(a: &Array) -> Result<Array> {
    match a.dtype() {
        DType::F16 | DType::BF16 => crate::astype(a, DType::F32),
        _ => inexact(a),
    }
}

/// The arithmetic mean over `axes` (every axis when empty). Integers and booleans give
/// `float32`; half types are summed in `float32`. An empty mean is NaN.
///
/// ```
/// use nuvec_core::{Array, mean};
///
/// let x = Array::from_slice(&[1i32, 2, 3, 4], &[2, 2]).unwrap();
/// assert_eq!(mean(&x, &[0], false).unwrap().to_vec::<f32>().unwrap(), [2.0, 3.0]);
/// ```
pub fn mean(a: &Array, axes: &[isize], keepdims: bool) -> Result<Array> {
    check_errors(&[a])?;
    let ax = reduction_axes("mean", axes, a.ndim())?;
    let n = reduced_count(a.shape(), &ax);
    let x = widened(a)?;
    let s = crate::sum(&x, axes, keepdims)?;
    crate::astype(&crate::divide(&s, n as f64)?, a.dtype().to_inexact())
}

/// The variance over `axes` (every axis when empty): the mean squared deviation from the
/// mean, divided by `N - ddof` instead of `N` (`N` the number of elements reduced; a
/// divisor below zero counts as zero, giving infinity or NaN). Typed as [`mean`]; complex
/// inputs give the `float32` mean squared magnitude.
///
/// ```
/// use nuvec_core::{Array, var};
///
/// let x = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4]).unwrap();
/// assert_eq!(var(&x, &[], false, 0).unwrap().item::<f32>().unwrap(), 1.25);
/// assert_eq!(var(&x, &[], false, 1).unwrap().item::<f32>().unwrap(), 5.0 / 3.0);
/// ```
pub fn var(a: &Array, axes: &[isize], keepdims: bool, ddof: usize) -> Result<Array> {
    check_errors(&[a])?;
    let ax = reduction_axes("var", axes, a.ndim())?;
    let n = reduced_count(a.shape(), &ax);
    let x = widened(a)?;
    let mu = crate::mean(&x, axes, true)?;
    let d = crate::subtract(&x, &mu)?;
    let sq = if x.dtype() == DType::C64 {
        crate::real(&crate::multiply(&d, &crate::conjugate(&d)?)?)?
    } else {
        crate::multiply(&d, &d)?
    };
    let s = crate::sum(&sq, axes, keepdims)?;
    let v = crate::divide(&s, n.saturating_sub(ddof) as f64)?;
    match a.dtype() {
        DType::C64 => Ok(v),
        other => crate::astype(&v, other.to_inexact()),
    }
}

/// The standard deviation over `axes`: the square root of [`var`].
///
/// ```
/// use nuvec_core::{Array, std};
///
/// let x = Array::from_slice(&[1.0f64, 3.0], &[2]).unwrap();
/// assert_eq!(std(&x, &[0], false, 0).unwrap().item::<f64>().unwrap(), 1.0);
/// ```
pub fn std(a: &Array, axes: &[isize], keepdims: bool, ddof: usize) -> Result<Array> {
    crate::sqrt(&var(a, axes, keepdims, ddof)?)
}

/// The number of nonzero elements over `axes` (every axis when empty), as `int32`.
///
/// ```
/// use nuvec_core::{Array, count_nonzero};
///
/// let x = Array::from_slice(&[0.0f32, 1.0, -2.0, 0.0], &[2, 2]).unwrap();
/// assert_eq!(count_nonzero(&x, &[1], false).unwrap().to_vec::<i32>().unwrap(), [1, 1]);
/// ```
pub fn count_nonzero(a: &Array, axes: &[isize], keepdims: bool) -> Result<Array> {
    check_errors(&[a])?;
    crate::sum(&crate::astype(a, DType::Bool)?, axes, keepdims)
}

/// Whether the reduced axes are the last axis alone (where the fused GPU kernels work).
fn last_axis(axes: &[usize], ndim: usize) -> bool {
    axes.len() == 1 && axes[0] + 1 == ndim
}

/// `a` with the axes not in `axes` (sorted) first, in order, and `axes` after them, merged
/// into one last axis: the layout the fused kernels take. Returns the moved array, the
/// shape before merging, and the permutation.
fn axes_last(a: &Array, axes: &[usize]) -> Result<(Array, Vec<usize>, Vec<usize>)> {
    let mut perm: Vec<usize> = (0..a.ndim()).filter(|i| !axes.contains(i)).collect();
    let lead = perm.len();
    perm.extend_from_slice(axes);
    let moved = crate::transpose(a, &perm)?;
    let moved_shape = moved.shape().to_vec();
    let mut flat: Vec<usize> = moved_shape[..lead].to_vec();
    flat.push(moved_shape[lead..].iter().product());
    Ok((reshape_to(&moved, &flat)?, moved_shape, perm))
}

/// `log(sum(exp(a)))` over `axes` (every axis when empty), computed stably (the largest
/// element is factored out): a row of `-∞` gives `-∞`, one holding `+∞` gives `+∞`, NaN
/// propagates. Integers and booleans give `float32`; half types compute in `float32`.
/// Reducing an axis of size 0 is an error.
///
/// ```
/// use nuvec_core::{Array, logsumexp};
///
/// let x = Array::from_slice(&[1000.0f32, 1000.0], &[2]).unwrap();
/// let y = logsumexp(&x, &[], false).unwrap().item::<f32>().unwrap();
/// assert!((y - (1000.0 + 2f32.ln())).abs() < 1e-3);
/// ```
pub fn logsumexp(a: &Array, axes: &[isize], keepdims: bool) -> Result<Array> {
    check_errors(&[a])?;
    let op = ReduceOp::LogSumExp;
    let ax = reduction_axes(op.name(), axes, a.ndim())?;
    let x = inexact(a)?;
    op.output_dtype(x.dtype())?;
    if let Some(&bad) = ax.iter().find(|&&i| a.shape()[i] == 0) {
        return Err(crate::error::invalid(
            op.name(),
            format!(
                "cannot reduce over axis {bad} of size 0 (shape {:?})",
                a.shape()
            ),
        ));
    }
    if reduced_count(a.shape(), &ax) == 1 {
        return finish_dims(reshape_to(&x, &kept_shape(a.shape(), &ax))?, &ax, keepdims);
    }
    if last_axis(&ax, x.ndim())
        && let Some(out) = crate::fast::fused_here(FastOp::LogSumExp, vec![x.clone()])?
    {
        // One fused kernel for the common case.
        return finish_dims(out, &ax, keepdims);
    }
    let (flat, _, _) = axes_last(&x, &ax)?;
    let last = flat.ndim() - 1;
    let out = Array::op1(
        Primitive::Reduce {
            op,
            axes: vec![last],
        },
        vec![flat],
    )?;
    let out = reshape_to(&out, &kept_shape(a.shape(), &ax))?;
    finish_dims(out, &ax, keepdims)
}

/// `exp(a - logsumexp(a))` over `axes` (every axis when empty): the values normalised to sum
/// to 1, computed stably and, for half types, in `float32` (MLX's precise softmax).
/// Integers and booleans give `float32`.
///
/// ```
/// use nuvec_core::{Array, softmax};
///
/// let x = Array::from_slice(&[0.0f32, 0.0, 1.0, 1.0], &[2, 2]).unwrap();
/// assert_eq!(softmax(&x, &[-1]).unwrap().to_vec::<f32>().unwrap(), [0.5; 4]);
/// ```
pub fn softmax(a: &Array, axes: &[isize]) -> Result<Array> {
    check_errors(&[a])?;
    let ax = reduction_axes("softmax", axes, a.ndim())?;
    let x = inexact(a)?;
    if x.dtype() == DType::C64 {
        return Err(Error::UnsupportedDType {
            op: "softmax",
            dtype: x.dtype(),
        });
    }
    if x.size() == 0 {
        return Ok(x);
    }
    if last_axis(&ax, x.ndim())
        && let Some(out) = crate::fast::fused_here(FastOp::Softmax, vec![x.clone()])?
    {
        return Ok(out);
    }
    let (flat, moved_shape, perm) = axes_last(&x, &ax)?;
    let y = Array::op1(Primitive::Softmax, vec![flat])?;
    let y = reshape_to(&y, &moved_shape)?;
    let mut inverse = vec![0; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inverse[p] = i;
    }
    crate::transpose(&y, &inverse)
}

/// The checks of [`Primitive::Softmax`]: one float input of at least one axis; the output
/// has its shape and type.
pub(crate) fn softmax_output_specs(inputs: &[Array]) -> Result<Vec<OutputSpec>> {
    expect_inputs("softmax", inputs, 1)?;
    let x = &inputs[0];
    if !x.dtype().is_float() {
        return Err(Error::UnsupportedDType {
            op: "softmax",
            dtype: x.dtype(),
        });
    }
    if x.ndim() == 0 {
        return Err(crate::error::invalid(
            "softmax",
            "the primitive needs an axis to normalise over",
        ));
    }
    Ok(vec![(x.shape().to_vec(), x.dtype())])
}
