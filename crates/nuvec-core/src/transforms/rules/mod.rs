//! The derivative and batching rules of every primitive, one file per family. Each rule
//! builds ordinary operations, so the transforms compose (grad of grad, vmap of grad).

mod conv;
mod elementwise;
mod index;
mod linalg;
mod quantized;
mod random;
mod reduce;
mod shape;
mod sort;

use crate::primitive::{Batched, Primitive};
use crate::{Array, Result};

/// The single output's cotangent (rules are only called when one is present).
pub(crate) fn single(cotangents: &[Option<Array>]) -> Result<&Array> {
    cotangents
        .first()
        .and_then(Option::as_ref)
        .ok_or_else(|| crate::error::invalid("vjp", "a rule was called without a cotangent"))
}

/// The single output (alive whenever it has a cotangent).
pub(crate) fn output(outputs: &[Option<Array>]) -> Result<&Array> {
    outputs
        .first()
        .and_then(Option::as_ref)
        .ok_or_else(|| crate::error::invalid("vjp", "a rule needs an output that was dropped"))
}

/// Dispatches a reverse-mode rule.
pub(crate) fn vjp(
    p: &Primitive,
    inputs: &[Array],
    outputs: &[Option<Array>],
    cotangents: &[Option<Array>],
    argnums: &[usize],
) -> Result<Vec<Array>> {
    match p {
        Primitive::Unary(op) => elementwise::unary_vjp(*op, inputs, outputs, cotangents),
        Primitive::Binary(op) => elementwise::binary_vjp(*op, inputs, outputs, cotangents, argnums),
        Primitive::Select => elementwise::select_vjp(inputs, cotangents, argnums),
        Primitive::AsType(_) => Ok(vec![single(cotangents)?.astype(inputs[0].dtype())?]),
        Primitive::Identity => Ok(vec![single(cotangents)?.clone()]),
        Primitive::StopGradient => argnums
            .iter()
            .map(|&i| crate::zeros_like(&inputs[i]))
            .collect(),
        Primitive::Shape(op) => shape::vjp(op, inputs, cotangents, argnums),
        Primitive::Matmul(op) => linalg::vjp(op, inputs, cotangents, argnums),
        // No inputs, so nothing to differentiate.
        Primitive::Creation(_) => Ok(Vec::new()),
        Primitive::Reduce { op, axes } => {
            reduce::reduce_vjp(*op, axes, inputs, outputs, cotangents, argnums)
        }
        // Integer outputs: no cotangent reaches them, so nothing flows back.
        Primitive::ArgReduce { .. } => argnums
            .iter()
            .map(|&i| crate::zeros_like(&inputs[i]))
            .collect(),
        Primitive::Scan {
            op,
            axis,
            reverse,
            inclusive,
        } => reduce::scan_vjp(
            (*op, *axis, *reverse, *inclusive),
            inputs,
            outputs,
            cotangents,
        ),
        Primitive::Softmax => reduce::softmax_vjp(outputs, cotangents),
        Primitive::Index(op) => index::vjp(op, inputs, outputs, cotangents, argnums),
        Primitive::Sort(op) => sort::vjp(op, inputs, outputs, cotangents, argnums),
        Primitive::Random(_) => random::vjp(inputs, argnums),
        Primitive::Fast(op) => op.unit().vjp(inputs, outputs, cotangents, argnums),
        Primitive::Conv(op) => conv::vjp(op, inputs, cotangents, argnums),
        Primitive::Custom(op) => {
            crate::transforms::custom_vjp_rule(op, inputs, cotangents, argnums)
        }
        Primitive::Quantized(op) => quantized::vjp(op, inputs, cotangents, argnums),
    }
}

/// Dispatches a forward-mode rule.
pub(crate) fn jvp(
    p: &Primitive,
    inputs: &[Array],
    outputs: &[Option<Array>],
    tangents: &[Option<Array>],
) -> Result<Vec<Array>> {
    match p {
        Primitive::Unary(op) => elementwise::unary_jvp(*op, inputs, outputs, tangents),
        Primitive::Binary(op) => elementwise::binary_jvp(*op, inputs, outputs, tangents),
        Primitive::Select => elementwise::select_jvp(inputs, tangents),
        Primitive::AsType(dtype) => match &tangents[0] {
            Some(t) => Ok(vec![t.astype(*dtype)?]),
            None => Ok(vec![crate::zeros(inputs[0].shape(), *dtype)?]),
        },
        Primitive::Identity => match &tangents[0] {
            Some(t) => Ok(vec![t.clone()]),
            None => Ok(vec![crate::zeros_like(&inputs[0])?]),
        },
        Primitive::StopGradient => Ok(vec![crate::zeros_like(&inputs[0])?]),
        Primitive::Shape(op) => shape::jvp(op, inputs, tangents),
        Primitive::Matmul(op) => linalg::jvp(op, inputs, outputs, tangents),
        Primitive::Creation(_) => p
            .output_specs(inputs)?
            .into_iter()
            .map(|(shape, dtype)| crate::zeros(&shape, dtype))
            .collect(),
        Primitive::Reduce { op, axes } => reduce::reduce_jvp(*op, axes, inputs, outputs, tangents),
        Primitive::ArgReduce { .. } => Ok(vec![crate::zeros_like(output(outputs)?)?]),
        Primitive::Scan {
            op,
            axis,
            reverse,
            inclusive,
        } => reduce::scan_jvp(
            (*op, *axis, *reverse, *inclusive),
            inputs,
            outputs,
            tangents,
        ),
        Primitive::Softmax => reduce::softmax_jvp(outputs, tangents),
        Primitive::Index(op) => index::jvp(op, inputs, outputs, tangents),
        Primitive::Sort(op) => sort::jvp(op, inputs, outputs, tangents),
        Primitive::Random(op) => random::jvp(op, inputs),
        Primitive::Fast(op) => op.unit().jvp(inputs, tangents),
        Primitive::Conv(op) => conv::jvp(op, inputs, tangents),
        Primitive::Custom(op) => crate::transforms::custom_jvp(op, inputs, tangents),
        Primitive::Quantized(op) => quantized::jvp(op, inputs, tangents),
    }
}

/// Dispatches a batching rule.
pub(crate) fn vmap(p: &Primitive, inputs: &[Array], axes: &[Option<usize>]) -> Result<Batched> {
    match p {
        Primitive::Unary(_)
        | Primitive::AsType(_)
        | Primitive::StopGradient
        | Primitive::Identity => {
            let out = Array::op1(p.clone(), vec![inputs[0].clone()])?;
            Ok((vec![out], vec![axes[0]]))
        }
        Primitive::Binary(_) | Primitive::Select => elementwise::vmap(p, inputs, axes),
        Primitive::Shape(op) => shape::vmap(op, inputs, axes),
        Primitive::Matmul(op) => linalg::vmap(op, inputs, axes),
        // Nothing to batch: the same array for every example.
        Primitive::Creation(_) => Ok((vec![Array::op1(p.clone(), Vec::new())?], vec![None])),
        Primitive::Reduce { op, axes: reduced } => reduce::reduce_vmap(*op, reduced, inputs, axes),
        Primitive::ArgReduce { op, axis } => reduce::arg_reduce_vmap(*op, *axis, inputs, axes),
        Primitive::Scan {
            op,
            axis,
            reverse,
            inclusive,
        } => reduce::scan_vmap((*op, *axis, *reverse, *inclusive), inputs, axes),
        Primitive::Softmax => reduce::softmax_vmap(inputs, axes),
        Primitive::Index(op) => index::vmap(op, inputs, axes),
        Primitive::Sort(op) => sort::vmap(op, inputs, axes),
        Primitive::Random(op) => random::vmap(op, inputs, axes),
        Primitive::Fast(op) => op.unit().vmap(inputs, axes),
        Primitive::Conv(op) => conv::vmap(op, inputs, axes),
        Primitive::Custom(op) => crate::transforms::custom_vmap(op, inputs, axes),
        Primitive::Quantized(op) => quantized::vmap(op, inputs, axes),
    }
}

/// Each input with its batch axis moved to the front (unbatched inputs get a leading axis of
/// size 1), all broadcast to `[batch] + shape`, for elementwise primitives of one shape.
pub(super) fn batch_front(inputs: &[Array], axes: &[Option<usize>]) -> Result<Vec<Array>> {
    let size = inputs
        .iter()
        .zip(axes)
        .find_map(|(x, ax)| ax.map(|a| x.shape()[a]))
        .unwrap_or(1);
    inputs
        .iter()
        .zip(axes)
        .map(|(x, ax)| {
            let front = match ax {
                Some(a) => crate::transforms::move_axis(x, *a, 0)?,
                None => crate::expand_dims(x, 0)?,
            };
            let mut shape = front.shape().to_vec();
            shape[0] = size;
            crate::broadcast_to(&front, &shape)
        })
        .collect()
}
