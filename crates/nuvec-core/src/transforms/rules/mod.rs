//! The derivative and batching rules of every primitive, one file per family. Each rule
//! builds ordinary operations, so the transforms compose (grad of grad, vmap of grad).

mod elementwise;
mod quantized;
mod shape;

use crate::primitive::{Batched, Primitive};
use crate::{Array, Error, Result};

fn unsupported(p: &Primitive, what: &str) -> Error {
    Error::Unsupported {
        op: p.name(),
        what: what.into(),
    }
}

/// The single output's cotangent (rules are only called when one is present).
pub(super) fn single(cotangents: &[Option<Array>]) -> Result<&Array> {
    cotangents
        .first()
        .and_then(Option::as_ref)
        .ok_or_else(|| crate::error::invalid("vjp", "a rule was called without a cotangent"))
}

/// The single output (alive whenever it has a cotangent).
pub(super) fn output(outputs: &[Option<Array>]) -> Result<&Array> {
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
        Primitive::Shape(op) => shape::vjp(op, inputs, cotangents),
        Primitive::Quantized(op) => quantized::vjp(op, inputs, cotangents, argnums),
        _ => Err(unsupported(p, "vjp")),
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
        Primitive::Quantized(op) => quantized::jvp(op, inputs, tangents),
        _ => Err(unsupported(p, "jvp")),
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
        Primitive::Quantized(op) => quantized::vmap(op, inputs, axes),
        _ => Err(unsupported(p, "vmap")),
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
