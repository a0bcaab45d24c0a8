//! The dedicated gradients of the normalisations: [`FastOp::RmsNormVjp`] and
//! [`FastOp::LayerNormVjp`], the nodes the norms' reverse-mode rules record.

use super::check::{Checker, like};
use super::norms::inverse_rms;
use super::{Fused, scalar, wide};
use crate::backend::cpu::fast::CpuKernel;
use crate::backend::cuda::fast::CudaKernel;
use crate::primitive::OutputSpec;
use crate::{Array, Result};
use crate::{mean, multiply, subtract, sum};

/// [`FastOp::RmsNormVjp`]: `(x, w, g)` to `(dx, dw)`.
pub(crate) struct RmsNormVjp {
    pub(crate) eps: f32,
}

/// [`FastOp::LayerNormVjp`]: `(x, w, b, g)` to `(dx, dw, db)`.
pub(crate) struct LayerNormVjp {
    pub(crate) eps: f32,
}

/// The checks of a gradient node with `params` parameters: `(x, params.., g)`; the
/// outputs are like `x` and each parameter.
fn grad_specs(c: &Checker<'_>, params: usize) -> Result<Vec<OutputSpec>> {
    c.count(params + 2, params + 2)?;
    let x = c.rank(0, None)?;
    c.float(0)?;
    let d = x.shape()[x.ndim() - 1];
    for i in 1..=params {
        c.param(i, d)?;
    }
    c.shape(params + 1, x.shape())?;
    c.float(params + 1)?;
    Ok((0..=params).map(|i| like(&c.inputs[i])).collect())
}

/// The unit of a norm's gradient node: `unit` takes `(x, params.., g)` and falls back to
/// `graph`, with one cotangent output for `x` and each parameter. The two gradients differ
/// in nothing else.
macro_rules! grad_unit {
    ($unit:ident, $name:literal, params: $params:literal, graph: $graph:ident) => {
        impl Fused for $unit {
            fn name(&self) -> &'static str {
                $name
            }

            fn output_count(&self) -> usize {
                $params + 1
            }

            fn specs(&self, c: &Checker<'_>) -> Result<Vec<OutputSpec>> {
                grad_specs(c, $params)
            }

            fn fallback(&self, inputs: &[Array]) -> Result<Vec<Array>> {
                $graph(inputs, self.eps)
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

grad_unit!(RmsNormVjp, "rms_norm_vjp", params: 1, graph: rms_vjp_graph);
grad_unit!(LayerNormVjp, "layer_norm_vjp", params: 2, graph: layer_vjp_graph);

/// `g` summed over every axis but the last.
fn sum_rows(g: &Array) -> Result<Array> {
    if g.ndim() <= 1 {
        return Ok(g.clone());
    }
    let axes: Vec<isize> = (0..g.ndim() as isize - 1).collect();
    sum(g, &axes, false)
}

/// `x · n³`.
fn times_cube(x: &Array, n: &Array) -> Result<Array> {
    multiply(x, multiply(&multiply(n, n)?, n)?)
}

/// [`FastOp::RmsNormVjp`]'s fallback, `(x, w, g)` to `(dx, dw)`, computed in float32 for
/// the half types. A 0-D weight (no weight) gets a zero cotangent: it does not enter the
/// forward computation.
fn rms_vjp_graph(inputs: &[Array], eps: f32) -> Result<Vec<Array>> {
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
fn layer_vjp_graph(inputs: &[Array], eps: f32) -> Result<Vec<Array>> {
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
