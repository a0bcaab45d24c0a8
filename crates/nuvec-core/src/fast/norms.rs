//! The normalisations over the last axis: [`rms_norm`], [`add_rms_norm`] and [`layer_norm`],
//! and their units ([`FastOp::RmsNorm`], [`FastOp::AddRmsNorm`], [`FastOp::LayerNorm`]); their
//! gradients' units are in `norm_grads.rs`.

use super::check::{Checker, like};
use super::rules::{single, vmap_rows};
use super::{FastOp, Fused, check_inputs, check_param, floating, one, pair, record_or_fallback};
use super::{scalar, wide};
use crate::backend::cpu::fast::CpuKernel;
use crate::backend::cuda::fast::CudaKernel;
use crate::error::invalid;
use crate::primitive::{Batched, OutputSpec};
use crate::transforms::rules::VjpArgs;
use crate::{Array, Category, Result, promote_types};
use crate::{add, mean, multiply, rsqrt, subtract};

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

/// [`FastOp::RmsNorm`]: `(x, w)`.
pub(crate) struct RmsNorm {
    pub(crate) eps: f32,
}

/// [`FastOp::AddRmsNorm`]: `(x, r, w)` to `(x + r, rms_norm(x + r))`.
pub(crate) struct AddRmsNorm {
    pub(crate) eps: f32,
}

/// [`FastOp::LayerNorm`]: `(x, w, b)`.
pub(crate) struct LayerNorm {
    pub(crate) eps: f32,
}

/// The checks of a normalisation's node: `x` (at least 1-D, floating), then `residual`
/// inputs of its shape and type, then `params` parameters of the last axis. One output like
/// `x` per `outputs`.
pub(super) fn norm_specs(
    c: &Checker<'_>,
    residual: usize,
    params: usize,
    outputs: usize,
) -> Result<Vec<OutputSpec>> {
    c.count(1 + residual + params, 1 + residual + params)?;
    let x = c.rank(0, None)?;
    c.float(0)?;
    let d = x.shape()[x.ndim() - 1];
    for i in 1..=residual {
        c.shape(i, x.shape())?;
        c.same_dtype(0, i)?;
    }
    for i in 1 + residual..=residual + params {
        c.param(i, d)?;
    }
    Ok(vec![like(x); outputs])
}

/// The cotangents of a norm's inputs `argnums` from its gradient node `op`, which takes the
/// norm's inputs and the output's cotangent.
fn gradient_node(op: FastOp, call: VjpArgs<'_>) -> Result<Vec<Array>> {
    let mut node = call.inputs.to_vec();
    node.push(single(call.cotangents)?.clone());
    let all = record_or_fallback(op, node)?;
    Ok(call.argnums.iter().map(|&i| all[i].clone()).collect())
}

/// The unit of a normalisation of rows with a dedicated gradient node: `unit` takes `x` and
/// `params` parameters of the last axis, falls back to `graph` and records the node
/// `FastOp::grad` for its reverse mode. RMS and layer norm differ in nothing else.
macro_rules! norm_unit {
    ($unit:ident, $name:literal, params: $params:literal, graph: $graph:ident, grad: $grad:ident) => {
        impl Fused for $unit {
            fn name(&self) -> &'static str {
                $name
            }

            fn specs(&self, c: &Checker<'_>) -> Result<Vec<OutputSpec>> {
                norm_specs(c, 0, $params, 1)
            }

            fn fallback(&self, inputs: &[Array]) -> Result<Vec<Array>> {
                Ok(vec![$graph(inputs, self.eps)?])
            }

            /// The dedicated gradient node.
            fn vjp(&self, call: VjpArgs<'_>) -> Result<Vec<Array>> {
                let eps = self.eps.to_bits();
                gradient_node(FastOp::$grad { eps }, call)
            }

            fn vmap(&self, inputs: &[Array], axes: &[Option<usize>]) -> Result<Batched> {
                let eps = self.eps.to_bits();
                vmap_rows(self, FastOp::$unit { eps }, &[0], inputs, axes)
            }

            fn cpu(&self) -> Option<&dyn CpuKernel> {
                Some(self)
            }

            fn cuda(&self) -> Option<&dyn CudaKernel> {
                Some(self)
            }
        }
    };
}

norm_unit!(RmsNorm, "rms_norm", params: 1, graph: rms_graph, grad: RmsNormVjp);
norm_unit!(LayerNorm, "layer_norm", params: 2, graph: layer_graph, grad: LayerNormVjp);

impl Fused for AddRmsNorm {
    fn name(&self) -> &'static str {
        "add_rms_norm"
    }

    fn output_count(&self) -> usize {
        2
    }

    fn specs(&self, c: &Checker<'_>) -> Result<Vec<OutputSpec>> {
        norm_specs(c, 1, 1, 2)
    }

    /// The sum, and its norm (fused itself where a kernel takes it).
    fn fallback(&self, inputs: &[Array]) -> Result<Vec<Array>> {
        let h = add(&inputs[0], &inputs[1])?;
        let norm = FastOp::RmsNorm {
            eps: self.eps.to_bits(),
        };
        let y = one(norm, vec![h.clone(), inputs[2].clone()])?;
        Ok(vec![h, y])
    }

    fn cuda(&self) -> Option<&dyn CudaKernel> {
        Some(self)
    }
}

/// `1 / sqrt(mean(x²) + eps)` over the last axis, kept.
pub(super) fn inverse_rms(x: &Array, eps: f32) -> Result<Array> {
    rsqrt(&add(mean(&multiply(x, x)?, &[-1], true)?, f64::from(eps))?)
}

/// [`FastOp::RmsNorm`]'s fallback, `(x, w)`.
fn rms_graph(inputs: &[Array], eps: f32) -> Result<Array> {
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

/// [`FastOp::LayerNorm`]'s fallback, `(x, w, b)`.
fn layer_graph(inputs: &[Array], eps: f32) -> Result<Array> {
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
