//! The normalisations ([`rms_norm`], [`add_rms_norm`], [`layer_norm`]), [`cross_entropy`],
//! and the fallbacks of the fused softmax and log-sum-exp, with the graphs of their
//! dedicated gradients.

use super::wide;
use super::{FastOp, check_inputs, check_param, floating, one, pair, record_or_fallback, scalar};
use crate::error::invalid;
use crate::ops::reduce::ReduceOp;
use crate::primitive::Primitive;
use crate::{Array, Category, DType, Result, promote_types};
use crate::{add, arange, equal, expand_dims, less, mean, multiply, rsqrt, subtract, sum, where_};

/// Root-mean-square normalisation over the last axis, `x / sqrt(mean(x²) + eps) · weight`,
/// as MLX's `fast.rms_norm`: the statistics in float32 (or float64), the result in the
/// promoted type of `x` and `weight` (1-D, of the last axis's size), which must be a
/// floating type.
///
/// ```
/// use nuvec_core::{Array, fast};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let x = Array::from_slice(&[1.0f32, 1.0, -1.0, 1.0], &[1, 4])?;
/// let w = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4])?;
/// // The root mean square is 1: the result is x · w.
/// assert_eq!(fast::rms_norm(&x, Some(&w), 0.0)?.to_vec::<f32>()?, [1.0, 2.0, -3.0, 4.0]);
/// # Ok(())
/// # }
/// ```
pub fn rms_norm(x: &Array, weight: Option<&Array>, eps: f32) -> Result<Array> {
    const OP: &str = "rms_norm";
    check_inputs(&[x])?;
    if x.ndim() == 0 {
        return Err(invalid(OP, "the input needs at least one dimension"));
    }
    let dtype = match weight {
        Some(w) => {
            check_inputs(&[w])?;
            check_param(OP, "weight", w, x)?;
            promote_types(x.dtype(), w.dtype())
        }
        None => x.dtype(),
    };
    floating(OP, dtype)?;
    let w = match weight {
        Some(w) => w.astype(dtype)?,
        None => scalar(1.0, dtype),
    };
    one(
        FastOp::RmsNorm { eps: eps.to_bits() },
        vec![x.astype(dtype)?, w],
    )
}

/// A residual connection and its RMS normalisation in one step: `h = x + residual` and
/// [`rms_norm`]`(h, weight, eps)`, returned as `(h, normed)`. The results equal
/// [`crate::add`] followed by [`rms_norm`]; when the shapes differ, the sum is not a
/// floating type, or the weight would widen the sum's type, it runs exactly those two.
///
/// ```
/// use nuvec_core::{Array, fast};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let x = Array::from_slice(&[1.0f32, -2.0], &[1, 2])?;
/// let r = Array::from_slice(&[2.0f32, 6.0], &[1, 2])?;
/// let (h, y) = fast::add_rms_norm(&x, &r, None, 0.0)?;
/// assert_eq!(h.to_vec::<f32>()?, [3.0, 4.0]);
/// let rms = 12.5f32.sqrt();
/// assert_eq!(y.to_vec::<f32>()?, [3.0 / rms, 4.0 / rms]);
/// # Ok(())
/// # }
/// ```
pub fn add_rms_norm(
    x: &Array,
    residual: &Array,
    weight: Option<&Array>,
    eps: f32,
) -> Result<(Array, Array)> {
    check_inputs(&[x, residual])?;
    let dtype = promote_types(x.dtype(), residual.dtype());
    let weight_fits = |w: &Array| {
        w.error().is_none()
            && w.ndim() == 1
            && x.ndim() > 0
            && w.size() == x.shape()[x.ndim() - 1]
            && promote_types(dtype, w.dtype()) == dtype
    };
    let fused = x.ndim() > 0
        && x.shape() == residual.shape()
        && dtype.category() == Category::Float
        && weight.is_none_or(weight_fits);
    if !fused {
        // The two operations themselves (which also report bad arguments).
        let h = add(x, residual)?;
        let y = rms_norm(&h, weight, eps)?;
        return Ok((h, y));
    }
    let w = match weight {
        Some(w) => w.astype(dtype)?,
        None => scalar(1.0, dtype),
    };
    let inputs = vec![x.astype(dtype)?, residual.astype(dtype)?, w];
    let outs = record_or_fallback(FastOp::AddRmsNorm { eps: eps.to_bits() }, inputs)?;
    Ok(pair(outs))
}

/// Layer normalisation over the last axis, `(x − mean) / sqrt(var + eps) · weight + bias`,
/// as MLX's `fast.layer_norm`: the statistics in float32 (or float64), the result in the
/// promoted type of `x` and the parameters (each 1-D, of the last axis's size).
///
/// ```
/// use nuvec_core::{Array, fast};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let x = Array::from_slice(&[1.0f32, 3.0], &[1, 2])?;
/// let b = Array::from_slice(&[10.0f32, 20.0], &[2])?;
/// // Mean 2, variance 1: the normalised row is [-1, 1].
/// assert_eq!(fast::layer_norm(&x, None, Some(&b), 0.0)?.to_vec::<f32>()?, [9.0, 21.0]);
/// # Ok(())
/// # }
/// ```
pub fn layer_norm(
    x: &Array,
    weight: Option<&Array>,
    bias: Option<&Array>,
    eps: f32,
) -> Result<Array> {
    const OP: &str = "layer_norm";
    check_inputs(&[x])?;
    if x.ndim() == 0 {
        return Err(invalid(OP, "the input needs at least one dimension"));
    }
    let mut dtype = x.dtype();
    for (p, what) in [(weight, "weight"), (bias, "bias")] {
        if let Some(p) = p {
            check_inputs(&[p])?;
            check_param(OP, what, p, x)?;
            dtype = promote_types(dtype, p.dtype());
        }
    }
    floating(OP, dtype)?;
    let param = |p: Option<&Array>, absent: f64| match p {
        Some(p) => p.astype(dtype),
        None => Ok(scalar(absent, dtype)),
    };
    let inputs = vec![x.astype(dtype)?, param(weight, 1.0)?, param(bias, 0.0)?];
    one(FastOp::LayerNorm { eps: eps.to_bits() }, inputs)
}

/// Cross entropy of `logits` over their last axis against integer class indices `targets`
/// (of the logits' shape without that axis; negative indices count from the end), as
/// MLX's `fast.cross_entropy`: `logsumexp(logits) − logits[target]` per row, as float32.
///
/// ```
/// use nuvec_core::{Array, fast};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let logits = Array::from_slice(&[0.0f32, 0.0, 0.0, 0.0], &[1, 4])?;
/// let targets = Array::from_slice(&[2i32], &[1])?;
/// let loss = fast::cross_entropy(&logits, &targets)?.to_vec::<f32>()?;
/// assert!((loss[0] - 4f32.ln()).abs() < 1e-6);
/// # Ok(())
/// # }
/// ```
pub fn cross_entropy(logits: &Array, targets: &Array) -> Result<Array> {
    const OP: &str = "cross_entropy";
    check_inputs(&[logits, targets])?;
    if logits.ndim() == 0 || targets.shape() != &logits.shape()[..logits.ndim() - 1] {
        return Err(invalid(
            OP,
            format!(
                "targets of shape {:?} do not match logits of shape {:?}",
                targets.shape(),
                logits.shape()
            ),
        ));
    }
    floating(OP, logits.dtype())?;
    if !super::integral(targets.dtype()) {
        return Err(invalid(
            OP,
            format!(
                "targets must be integer class indices, got {}",
                targets.dtype()
            ),
        ));
    }
    let inputs = vec![logits.clone(), targets.astype(DType::I32)?];
    one(FastOp::CrossEntropy, inputs)
}

/// `g` summed over every axis but the last.
fn sum_rows(g: &Array) -> Result<Array> {
    if g.ndim() <= 1 {
        return Ok(g.clone());
    }
    let axes: Vec<isize> = (0..g.ndim() as isize - 1).collect();
    sum(g, &axes, false)
}

/// `1 / sqrt(mean(x²) + eps)` over the last axis, kept.
fn inverse_rms(x: &Array, eps: f32) -> Result<Array> {
    rsqrt(&add(mean(&multiply(x, x)?, &[-1], true)?, f64::from(eps))?)
}

/// `x · n³`.
fn times_cube(x: &Array, n: &Array) -> Result<Array> {
    multiply(x, multiply(&multiply(n, n)?, n)?)
}

/// [`FastOp::RmsNorm`]'s fallback, `(x, w)`.
pub(super) fn rms_graph(inputs: &[Array], eps: f32) -> Result<Array> {
    let (x, w) = (&inputs[0], &inputs[1]);
    let xf = wide(x)?;
    // Rounded to the input's type before the weight, as MLX's kernels do.
    let y = multiply(&xf, inverse_rms(&xf, eps)?)?.astype(x.dtype())?;
    if w.ndim() == 0 {
        Ok(y)
    } else {
        multiply(&y, w)
    }
}

/// [`FastOp::AddRmsNorm`]'s fallback, `(x, r, w)`: the sum and its norm.
pub(super) fn add_rms_graph(inputs: &[Array], eps: u32) -> Result<Vec<Array>> {
    let h = add(&inputs[0], &inputs[1])?;
    let y = one(FastOp::RmsNorm { eps }, vec![h.clone(), inputs[2].clone()])?;
    Ok(vec![h, y])
}

/// [`FastOp::LayerNorm`]'s fallback, `(x, w, b)`.
pub(super) fn layer_graph(inputs: &[Array], eps: f32) -> Result<Array> {
    let (x, w, b) = (&inputs[0], &inputs[1], &inputs[2]);
    let xf = wide(x)?;
    let centred = subtract(&xf, mean(&xf, &[-1], true)?)?;
    let n = inverse_rms(&centred, eps)?;
    let mut y = multiply(&centred, &n)?.astype(x.dtype())?;
    if w.ndim() != 0 {
        y = multiply(&y, w)?;
    }
    if b.ndim() != 0 {
        y = add(&y, b)?;
    }
    Ok(y)
}

/// [`FastOp::RmsNormVjp`]'s fallback, `(x, w, g)` to `(dx, dw)`, computed in float32 for
/// the half types. A 0-D weight (no weight) gets a zero cotangent: it does not enter the
/// forward computation.
pub(super) fn rms_vjp_graph(inputs: &[Array], eps: f32) -> Result<Vec<Array>> {
    let (x, w, g) = (&inputs[0], &inputs[1], &inputs[2]);
    let xf = wide(x)?;
    let gf = g.astype(xf.dtype())?;
    let n = inverse_rms(&xf, eps)?;
    let gw = if w.ndim() == 0 {
        gf.clone()
    } else {
        multiply(&gf, w.astype(xf.dtype())?)?
    };
    let proj = mean(&multiply(&gw, &xf)?, &[-1], true)?;
    let dx = subtract(multiply(&gw, &n)?, times_cube(&multiply(&xf, &proj)?, &n)?)?;
    let dw = if w.ndim() == 0 {
        scalar(0.0, w.dtype())
    } else {
        sum_rows(&multiply(&gf, multiply(&xf, &n)?)?)?.astype(w.dtype())?
    };
    Ok(vec![dx.astype(x.dtype())?, dw])
}

/// [`FastOp::LayerNormVjp`]'s fallback, `(x, w, b, g)` to `(dx, dw, db)`.
pub(super) fn layer_vjp_graph(inputs: &[Array], eps: f32) -> Result<Vec<Array>> {
    let (x, w, b, g) = (&inputs[0], &inputs[1], &inputs[2], &inputs[3]);
    let xf = wide(x)?;
    let gf = g.astype(xf.dtype())?;
    let centred = subtract(&xf, mean(&xf, &[-1], true)?)?;
    let n = inverse_rms(&centred, eps)?;
    let wg = if w.ndim() == 0 {
        gf.clone()
    } else {
        multiply(&gf, w.astype(xf.dtype())?)?
    };
    let wg_mean = mean(&wg, &[-1], true)?;
    let proj = mean(&multiply(&wg, &centred)?, &[-1], true)?;
    let dx = subtract(
        multiply(subtract(&wg, &wg_mean)?, &n)?,
        times_cube(&multiply(&centred, &proj)?, &n)?,
    )?;
    let dw = if w.ndim() == 0 {
        scalar(0.0, w.dtype())
    } else {
        sum_rows(&multiply(&gf, multiply(&centred, &n)?)?)?.astype(w.dtype())?
    };
    let db = if b.ndim() == 0 {
        scalar(0.0, b.dtype())
    } else {
        sum_rows(&gf)?.astype(b.dtype())?
    };
    Ok(vec![dx.astype(x.dtype())?, dw, db])
}

/// [`FastOp::Softmax`]'s fallback: the crate's own softmax primitive over the last axis
/// (accumulating half types in float32). Not [`crate::softmax`], which on a GPU stream
/// records [`FastOp::Softmax`] again.
pub(super) fn softmax_graph(x: &Array) -> Result<Array> {
    if x.size() == 0 {
        return Ok(x.clone());
    }
    Array::op1(Primitive::Softmax, vec![x.clone()])
}

/// [`FastOp::LogSumExp`]'s fallback: the crate's log-sum-exp reduction of the last axis
/// (kept with size 1).
pub(super) fn logsumexp_graph(x: &Array) -> Result<Array> {
    let reduce = Primitive::Reduce {
        op: ReduceOp::LogSumExp,
        axes: vec![x.ndim() - 1],
    };
    Array::op1(reduce, vec![x.clone()])
}

/// Class indices `t` (int32) with negative ones counted from the end, and the boolean
/// `[..., classes]` rows marking each.
fn hits(t: &Array, classes: usize) -> Result<(Array, Array)> {
    let t = where_(less(t, 0)?, add(t, classes)?, t)?;
    let all = arange(0.0, classes as f64, 1.0, DType::I32)?;
    let hit = equal(expand_dims(&t, -1)?, &all)?;
    Ok((t, hit))
}

/// [`FastOp::CrossEntropy`]'s fallback, `(logits, targets)`, in float32 for the half types.
pub(super) fn cross_entropy_graph(inputs: &[Array]) -> Result<Array> {
    let x = wide(&inputs[0])?;
    let classes = x.shape()[x.ndim() - 1];
    let (_, hit) = hits(&inputs[1], classes)?;
    let picked = sum(&where_(&hit, &x, 0.0)?, &[-1], false)?;
    let lse = crate::logsumexp(&x, &[-1], false)?;
    subtract(&lse, &picked)?.astype(DType::F32)
}

/// [`FastOp::CrossEntropyVjp`]'s fallback, `(logits, targets, loss, g)`:
/// `g · (softmax(logits) − onehot(target))`. The log-sum-exp is computed again rather than
/// recovered from the float32 loss, so float64 logits keep their precision.
pub(super) fn cross_entropy_vjp_graph(inputs: &[Array]) -> Result<Array> {
    let (logits, g) = (&inputs[0], &inputs[3]);
    let x = wide(logits)?;
    let classes = x.shape()[x.ndim() - 1];
    let (_, hit) = hits(&inputs[1], classes)?;
    let lse = crate::logsumexp(&x, &[-1], true)?;
    let p = crate::exp(&subtract(&x, &lse)?)?;
    let target = hit.astype(x.dtype())?;
    let gx = multiply(
        expand_dims(&g.astype(x.dtype())?, -1)?,
        subtract(&p, &target)?,
    )?;
    gx.astype(logits.dtype())
}
