//! Discrete samplers: integers, coin flips, categories and permutations.

use super::{check_covers, check_key, check_size, resolve_key, uniform_impl};
use crate::error::invalid;
use crate::ops::normalize_axis;
use crate::{Array, DType, Operand, Result, Scalar};

/// An operand as an array of its own type; integer scalars become `int32`, or `int64` when
/// they do not fit.
fn own_array(x: &Operand) -> Result<Array> {
    match x {
        Operand::Scalar(Scalar::Int(v)) if i32::try_from(*v).is_err() => x.to_array(DType::I64),
        _ => Ok(x.clone().into_array()),
    }
}

/// Random integers of `shape` in `[low, high)`, of type `dtype` (an integer type or
/// `bool`). `low` and `high` are scalars or arrays broadcasting to `shape`. As MLX: a
/// `float32` uniform in `[low, high)`, rounded down and clipped to `[low, high − 1]`, so
/// ranges wider than 2²⁴ are not uniform at the last integer. Errors: float or complex
/// types, scalar bounds with `high <= low` or NaN, bounds not broadcasting to `shape`, a bad
/// key.
///
/// ```
/// use nuvec_core::{DType, random};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let dice = random::randint(1, 7, &[10], DType::I32, Some(&random::key(0)))?;
/// assert!(dice.to_vec::<i32>()?.iter().all(|v| (1..7).contains(v)));
/// # Ok(())
/// # }
/// ```
pub fn randint(
    low: impl Into<Operand>,
    high: impl Into<Operand>,
    shape: &[usize],
    dtype: DType,
    key: Option<&Array>,
) -> Result<Array> {
    const OP: &str = "randint";
    let (low, high) = (low.into(), high.into());
    if dtype.is_inexact() {
        return Err(invalid(
            OP,
            format!("samples must have an integer or bool type, got {dtype}"),
        ));
    }
    if let (Operand::Scalar(lo), Operand::Scalar(hi)) = (&low, &high) {
        let (lo, hi) = (lo.canon().as_f64(), hi.canon().as_f64());
        if lo.is_nan() || hi.is_nan() || hi <= lo {
            return Err(invalid(OP, format!("the range [{lo}, {hi}) is empty")));
        }
    }
    let (lo, hi) = (own_array(&low)?, own_array(&high)?);
    let u = uniform_impl(OP, &(&lo).into(), &(&hi).into(), shape, DType::F32, key)?;
    let out = crate::floor(&u)?.astype(dtype)?;
    // The float uniform may round onto `high`: clip to the last integer below it.
    let last = crate::subtract(&hi, 1)?.astype(dtype)?;
    crate::maximum(&crate::minimum(&out, &last)?, &lo.astype(dtype)?)
}

/// Booleans of `shape` (by default `p`'s shape), each true with probability `p` (a float
/// scalar or array broadcasting to `shape`): 32 random bits compared with `p · 2³²`, so
/// `p <= 0` is never and `p >= 1` always true, as MLX. Errors: `p` not a float, a scalar `p`
/// outside `[0, 1]`, `p` not broadcasting to `shape`, a bad key.
///
/// ```
/// use nuvec_core::random;
///
/// # fn main() -> nuvec_core::Result<()> {
/// let coins = random::bernoulli(0.5, Some(&[8]), Some(&random::key(0)))?;
/// assert_eq!(coins.shape(), [8]);
/// assert_eq!(coins.dtype(), nuvec_core::DType::Bool);
/// # Ok(())
/// # }
/// ```
pub fn bernoulli(
    p: impl Into<Operand>,
    shape: Option<&[usize]>,
    key: Option<&Array>,
) -> Result<Array> {
    const OP: &str = "bernoulli";
    let p = p.into();
    match &p {
        Operand::Scalar(Scalar::Float(v)) if !(0.0..=1.0).contains(v) => {
            return Err(invalid(OP, format!("p must be in [0, 1], got {v}")));
        }
        Operand::Scalar(Scalar::Float(_)) => {}
        Operand::Scalar(_) => {
            return Err(invalid(OP, "p must be a float"));
        }
        Operand::Array(a) => {
            crate::ops::check_errors(&[a])?;
            if !a.dtype().is_float() {
                return Err(invalid(
                    OP,
                    format!("p must have a real float type, got {}", a.dtype()),
                ));
            }
        }
    }
    let p = p.into_array();
    let shape = shape.unwrap_or(p.shape()).to_vec();
    check_covers(OP, &shape, p.shape())?;
    check_size(OP, &shape)?;
    let key = resolve_key(OP, key)?;
    // The float just above 2³² − 1 (which rounds to 2³² in float32): p = 1 beats every word.
    let upper = f32::from_bits((u32::MAX as f32).to_bits() + 1);
    let words = super::raw_bits(&shape, 4, key)?;
    crate::less(&words, &crate::multiply(&p, Array::scalar(upper))?)
}

/// Samples from the categorical distributions whose unnormalised log-probabilities lie
/// along `axis` of `logits`, as indices (`uint32`). The output's shape is `shape` when
/// given (it must be a broadcast of `logits`' shape without `axis`), else `logits`' shape
/// without `axis`, with `num_samples` draws appended as a last axis when that is given
/// (MLX's three forms; giving both is an error). As MLX: the Gumbel-max trick, or for a
/// single distribution with a sample shape, the inverse of its cumulative distribution.
/// Errors: complex logits, an axis out of range or of length 0, shapes that do not fit, a
/// bad key.
///
/// ```
/// use nuvec_core::{Array, random};
///
/// # fn main() -> nuvec_core::Result<()> {
/// // Category 1 is certain.
/// let logits = Array::from_slice(&[f32::NEG_INFINITY, 0.0, f32::NEG_INFINITY], &[3])?;
/// let draws = random::categorical(&logits, -1, None, Some(4), Some(&random::key(0)))?;
/// assert_eq!(draws.to_vec::<u32>()?, [1, 1, 1, 1]);
/// # Ok(())
/// # }
/// ```
pub fn categorical(
    logits: &Array,
    axis: isize,
    shape: Option<&[usize]>,
    num_samples: Option<usize>,
    key: Option<&Array>,
) -> Result<Array> {
    const OP: &str = "categorical";
    crate::ops::check_errors(&[logits])?;
    if logits.dtype() == DType::C64 {
        return Err(invalid(OP, "logits must be real"));
    }
    let ax = normalize_axis(OP, axis, logits.ndim())?;
    if logits.shape()[ax] == 0 {
        return Err(invalid(OP, format!("axis {axis} has no categories")));
    }
    let mut reduced = logits.shape().to_vec();
    reduced.remove(ax);
    match (shape, num_samples) {
        (Some(_), Some(_)) => Err(invalid(OP, "give shape or num_samples, not both")),
        (Some(shape), None) => {
            check_covers(OP, shape, &reduced)?;
            categorical_impl(logits, ax, shape, key)
        }
        (None, Some(n)) => {
            let expanded = crate::expand_dims(logits, -1)?;
            reduced.push(n);
            categorical_impl(&expanded, ax, &reduced, key)
        }
        (None, None) => categorical_impl(logits, ax, &reduced, key),
    }
}

/// [`categorical`] with checked arguments.
fn categorical_impl(
    logits: &Array,
    axis: usize,
    shape: &[usize],
    key: Option<&Array>,
) -> Result<Array> {
    const OP: &str = "categorical";
    let n = logits.shape()[axis];
    if logits.size() == n && !shape.is_empty() {
        let flat = logits.reshape(&[n as isize])?;
        return inverse_cdf(&flat, shape, key);
    }
    // The categories' axis in the samples' shape: aligned with `axis` from the end.
    let at = axis + shape.len() + 1 - logits.ndim();
    let mut noise_shape = shape.to_vec();
    noise_shape.insert(at, n);
    let g = super::gumbel_impl(OP, &noise_shape, DType::F32, key)?;
    crate::argmax(&crate::add(&g, logits)?, at as isize, false)
}

/// Draws of shape `shape` from one distribution (1-D logits) by inverting its cumulative
/// weights: memory linear in the categories plus the samples.
fn inverse_cdf(logits: &Array, shape: &[usize], key: Option<&Array>) -> Result<Array> {
    const OP: &str = "categorical";
    let dtype = crate::promote_types(logits.dtype(), DType::F32);
    let x = logits.astype(dtype)?;
    let m = crate::max(&x, &[], false)?;
    // With an infinite maximum `exp(x − m)` is NaN: the draw is uniform over the maxima.
    let w = crate::where_(
        &crate::isinf(&m)?,
        &crate::equal(&x, &m)?.astype(dtype)?,
        &crate::exp(&crate::subtract(&x, &m)?)?,
    )?;
    let cdf = crate::cumsum(&w, 0, false, false)?;
    let u = uniform_impl(OP, &0.0.into(), &1.0.into(), shape, DType::F32, key)?;
    let u = crate::multiply(&u, &crate::sum(&w, &[], false)?)?;
    crate::subtract(&crate::searchsorted(&cdf, &u, true)?, 1u32)
}

/// A random permutation of `0..n` (`uint32`): the order that sorts `n` random words.
///
/// ```
/// use nuvec_core::random;
///
/// # fn main() -> nuvec_core::Result<()> {
/// let mut p = random::permutation(5, Some(&random::key(0)))?.to_vec::<u32>()?;
/// p.sort();
/// assert_eq!(p, [0, 1, 2, 3, 4]);
/// # Ok(())
/// # }
/// ```
pub fn permutation(n: usize, key: Option<&Array>) -> Result<Array> {
    const OP: &str = "permutation";
    if n > u32::MAX as usize {
        return Err(invalid(
            OP,
            format!("{n} elements do not fit uint32 indices"),
        ));
    }
    let key = resolve_key(OP, key)?;
    crate::argsort(&super::raw_bits(&[n], 4, key)?, Some(-1))
}

/// `x` with its slices along `axis` in a random order ([`permutation`] of that axis' length
/// taken from `x`).
///
/// ```
/// use nuvec_core::{Array, random};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let x = Array::from_slice(&[1i32, 2, 3, 4, 5, 6], &[3, 2])?;
/// let y = random::permutation_of(&x, 0, Some(&random::key(0)))?;
/// let mut rows: Vec<i32> = y.to_vec::<i32>()?;
/// rows.sort();
/// assert_eq!(rows, [1, 2, 3, 4, 5, 6]);
/// # Ok(())
/// # }
/// ```
pub fn permutation_of(x: &Array, axis: isize, key: Option<&Array>) -> Result<Array> {
    const OP: &str = "permutation";
    crate::ops::check_errors(&[x])?;
    let ax = normalize_axis(OP, axis, x.ndim())?;
    if let Some(k) = key {
        check_key(OP, k)?;
    }
    let order = permutation(x.shape()[ax], key)?;
    crate::take(x, &order, Some(ax as isize))
}
