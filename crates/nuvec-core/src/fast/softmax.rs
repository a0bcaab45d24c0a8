//! Softmax and log-sum-exp over the last axis ([`FastOp::Softmax`], [`FastOp::LogSumExp`],
//! which [`crate::softmax`] and [`crate::logsumexp`] record where a kernel takes them), and
//! [`cross_entropy`] with its dedicated gradient ([`FastOp::CrossEntropy`],
//! [`FastOp::CrossEntropyVjp`]).

use super::check::{Checker, like};
use super::rules::{output, single, vmap_rows};
use super::{FastOp, Fused, check_inputs, floating, one, wide};
use crate::backend::cuda::fast::CudaKernel;
use crate::error::invalid;
use crate::ops::reduce::ReduceOp;
use crate::primitive::{Batched, OutputSpec, Primitive};
use crate::transforms::rules::VjpArgs;
use crate::{Array, DType, Result};
use crate::{add, arange, equal, expand_dims, less, multiply, subtract, sum, where_};

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

/// [`FastOp::Softmax`]: `(x)`.
pub(crate) struct Softmax;

/// [`FastOp::LogSumExp`]: `(x)`, the last axis kept with size 1.
pub(crate) struct LogSumExp;

/// [`FastOp::CrossEntropy`]: `(logits, targets)`.
pub(crate) struct CrossEntropy;

/// [`FastOp::CrossEntropyVjp`]: `(logits, targets, loss, g)`.
pub(crate) struct CrossEntropyVjp;

/// The checks of softmax and log-sum-exp: one floating input of at least one axis; the
/// output keeps its shape, with the last axis 1 when `reduced`.
fn last_axis_specs(c: &Checker<'_>, reduced: bool) -> Result<Vec<OutputSpec>> {
    c.count(1, 1)?;
    let x = c.rank(0, None)?;
    c.float(0)?;
    let mut shape = x.shape().to_vec();
    if reduced {
        let last = shape.len() - 1;
        c.holds(shape[last] > 0, || "cannot reduce an empty axis".into())?;
        shape[last] = 1;
    }
    Ok(vec![(shape, x.dtype())])
}

impl Fused for Softmax {
    fn name(&self) -> &'static str {
        "softmax"
    }

    fn specs(&self, c: &Checker<'_>) -> Result<Vec<OutputSpec>> {
        last_axis_specs(c, false)
    }

    fn fallback(&self, inputs: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![softmax_graph(&inputs[0])?])
    }

    fn vjp(&self, call: VjpArgs<'_>) -> Result<Vec<Array>> {
        let (s, g) = (output(call.outputs)?, single(call.cotangents)?);
        let sg = multiply(s, g)?;
        Ok(vec![subtract(&sg, multiply(s, sum(&sg, &[-1], true)?)?)?])
    }

    fn vmap(&self, inputs: &[Array], axes: &[Option<usize>]) -> Result<Batched> {
        vmap_rows(self, FastOp::Softmax, &[0], inputs, axes)
    }

    fn cuda(&self) -> Option<&dyn CudaKernel> {
        Some(self)
    }
}

impl Fused for LogSumExp {
    fn name(&self) -> &'static str {
        "logsumexp"
    }

    fn specs(&self, c: &Checker<'_>) -> Result<Vec<OutputSpec>> {
        last_axis_specs(c, true)
    }

    fn fallback(&self, inputs: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![logsumexp_graph(&inputs[0])?])
    }

    /// The cotangent times the softmax (fused itself where a kernel takes it).
    fn vjp(&self, call: VjpArgs<'_>) -> Result<Vec<Array>> {
        let s = one(FastOp::Softmax, vec![call.inputs[0].clone()])?;
        Ok(vec![multiply(single(call.cotangents)?, &s)?])
    }

    fn vmap(&self, inputs: &[Array], axes: &[Option<usize>]) -> Result<Batched> {
        vmap_rows(self, FastOp::LogSumExp, &[0], inputs, axes)
    }

    fn cuda(&self) -> Option<&dyn CudaKernel> {
        Some(self)
    }
}

/// The checks of cross entropy's nodes: float logits, integer targets of the rows' shape,
/// and for the gradient the float loss and cotangent of that shape too.
fn cross_entropy_specs(c: &Checker<'_>, vjp: bool) -> Result<Vec<OutputSpec>> {
    let n = if vjp { 4 } else { 2 };
    c.count(n, n)?;
    let x = c.rank(0, None)?;
    c.float(0)?;
    c.integer(1)?;
    let rows = &x.shape()[..x.ndim() - 1];
    c.shape(1, rows)?;
    if vjp {
        for i in 2..4 {
            c.shape(i, rows)?;
            c.float(i)?;
        }
        return Ok(vec![like(x)]);
    }
    Ok(vec![(rows.to_vec(), DType::F32)])
}

impl Fused for CrossEntropy {
    fn name(&self) -> &'static str {
        "cross_entropy"
    }

    fn specs(&self, c: &Checker<'_>) -> Result<Vec<OutputSpec>> {
        cross_entropy_specs(c, false)
    }

    fn fallback(&self, inputs: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![cross_entropy_graph(inputs)?])
    }

    /// The dedicated gradient node for the logits (the targets are integers).
    fn vjp(&self, call: VjpArgs<'_>) -> Result<Vec<Array>> {
        if call.argnums != [0] {
            return super::rules::vjp_of_fallback(self, call);
        }
        let node = vec![
            call.inputs[0].clone(),
            call.inputs[1].clone(),
            output(call.outputs)?.clone(),
            single(call.cotangents)?.clone(),
        ];
        Ok(vec![one(FastOp::CrossEntropyVjp, node)?])
    }

    fn vmap(&self, inputs: &[Array], axes: &[Option<usize>]) -> Result<Batched> {
        vmap_rows(self, FastOp::CrossEntropy, &[0, 1], inputs, axes)
    }

    fn cuda(&self) -> Option<&dyn CudaKernel> {
        Some(self)
    }
}

impl Fused for CrossEntropyVjp {
    fn name(&self) -> &'static str {
        "cross_entropy_vjp"
    }

    fn specs(&self, c: &Checker<'_>) -> Result<Vec<OutputSpec>> {
        cross_entropy_specs(c, true)
    }

    fn fallback(&self, inputs: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![cross_entropy_vjp_graph(inputs)?])
    }

    fn cuda(&self) -> Option<&dyn CudaKernel> {
        Some(self)
    }
}

/// [`FastOp::Softmax`]'s fallback: the crate's own softmax primitive over the last axis
/// (accumulating half types in float32). Not [`crate::softmax`], which on a GPU stream
/// records [`FastOp::Softmax`] again.
fn softmax_graph(x: &Array) -> Result<Array> {
    if x.size() == 0 {
        return Ok(x.clone());
    }
    Array::op1(Primitive::Softmax, vec![x.clone()])
}

/// [`FastOp::LogSumExp`]'s fallback: the crate's log-sum-exp reduction of the last axis
/// (kept with size 1).
fn logsumexp_graph(x: &Array) -> Result<Array> {
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
fn cross_entropy_graph(inputs: &[Array]) -> Result<Array> {
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
fn cross_entropy_vjp_graph(inputs: &[Array]) -> Result<Array> {
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
