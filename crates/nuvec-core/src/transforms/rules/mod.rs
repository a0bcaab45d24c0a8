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

/// What a reverse-mode rule is given: one node's call, passed along whole because every
/// rule takes the same four slices (and most pass them on to a rule of their family).
#[derive(Clone, Copy)]
pub(crate) struct VjpArgs<'a> {
    /// The node's inputs.
    pub(crate) inputs: &'a [Array],
    /// Its outputs (`None` where dropped).
    pub(crate) outputs: &'a [Option<Array>],
    /// Each output's cotangent (`None` where it has none).
    pub(crate) cotangents: &'a [Option<Array>],
    /// The inputs whose cotangents are wanted.
    pub(crate) argnums: &'a [usize],
}

/// What a forward-mode rule is given: one node's call (see [`VjpArgs`]).
#[derive(Clone, Copy)]
pub(crate) struct JvpArgs<'a> {
    /// The node's inputs.
    pub(crate) inputs: &'a [Array],
    /// Its outputs (`None` where dropped).
    pub(crate) outputs: &'a [Option<Array>],
    /// Each input's tangent (`None` for constants).
    pub(crate) tangents: &'a [Option<Array>],
}

/// `value`, or zeros like `like` where there is none: a missing tangent or cotangent is zero.
pub(crate) fn or_zeros(value: &Option<Array>, like: &Array) -> Result<Array> {
    match value {
        Some(v) => Ok(v.clone()),
        None => crate::zeros_like(like),
    }
}

/// [`or_zeros`] of each value against the array at its position.
pub(crate) fn all_or_zeros(values: &[Option<Array>], like: &[Array]) -> Result<Vec<Array>> {
    like.iter()
        .zip(values)
        .map(|(l, v)| or_zeros(v, l))
        .collect()
}

/// Dispatches a reverse-mode rule.
pub(crate) fn vjp(p: &Primitive, call: VjpArgs<'_>) -> Result<Vec<Array>> {
    // Zero cotangents for every input asked about.
    let zeros = || -> Result<Vec<Array>> {
        call.argnums
            .iter()
            .map(|&i| crate::zeros_like(&call.inputs[i]))
            .collect()
    };
    match p {
        Primitive::Unary(op) => elementwise::unary_vjp(*op, call),
        Primitive::Binary(op) => elementwise::binary_vjp(*op, call),
        Primitive::Select => elementwise::select_vjp(call),
        Primitive::AsType(_) => Ok(vec![
            single(call.cotangents)?.astype(call.inputs[0].dtype())?,
        ]),
        Primitive::Identity => Ok(vec![single(call.cotangents)?.clone()]),
        Primitive::StopGradient => zeros(),
        Primitive::Shape(op) => shape::vjp(op, call),
        Primitive::Matmul(op) => linalg::vjp(op, call),
        // No inputs, so nothing to differentiate.
        Primitive::Creation(_) => Ok(Vec::new()),
        Primitive::Reduce { op, axes } => reduce::reduce_vjp(*op, axes, call),
        // Integer outputs: no cotangent reaches them, so nothing flows back.
        Primitive::ArgReduce { .. } => zeros(),
        Primitive::Scan {
            op,
            axis,
            reverse,
            inclusive,
        } => reduce::scan_vjp((*op, *axis, *reverse, *inclusive), call),
        Primitive::Softmax => reduce::softmax_vjp(call.outputs, call.cotangents),
        Primitive::Index(op) => index::vjp(op, call),
        Primitive::Sort(op) => sort::vjp(op, call),
        Primitive::Random(_) => random::vjp(call.inputs, call.argnums),
        Primitive::Fast(op) => op.unit().vjp(call),
        Primitive::Conv(op) => conv::vjp(op, call),
        Primitive::Custom(op) => crate::transforms::custom_vjp_rule(op, call),
        Primitive::Quantized(op) => quantized::vjp(op, call),
    }
}

/// Dispatches a forward-mode rule.
pub(crate) fn jvp(p: &Primitive, call: JvpArgs<'_>) -> Result<Vec<Array>> {
    match p {
        Primitive::Unary(op) => elementwise::unary_jvp(*op, call),
        Primitive::Binary(op) => elementwise::binary_jvp(*op, call),
        Primitive::Select => elementwise::select_jvp(call.inputs, call.tangents),
        Primitive::AsType(dtype) => match &call.tangents[0] {
            Some(t) => Ok(vec![t.astype(*dtype)?]),
            None => Ok(vec![crate::zeros(call.inputs[0].shape(), *dtype)?]),
        },
        Primitive::Identity => match &call.tangents[0] {
            Some(t) => Ok(vec![t.clone()]),
            None => Ok(vec![crate::zeros_like(&call.inputs[0])?]),
        },
        Primitive::StopGradient => Ok(vec![crate::zeros_like(&call.inputs[0])?]),
        Primitive::Shape(op) => shape::jvp(op, call),
        Primitive::Matmul(op) => linalg::jvp(op, call),
        Primitive::Creation(_) => p
            .output_specs(call.inputs)?
            .into_iter()
            .map(|(shape, dtype)| crate::zeros(&shape, dtype))
            .collect(),
        Primitive::Reduce { op, axes } => reduce::reduce_jvp(*op, axes, call),
        Primitive::ArgReduce { .. } => Ok(vec![crate::zeros_like(output(call.outputs)?)?]),
        Primitive::Scan {
            op,
            axis,
            reverse,
            inclusive,
        } => reduce::scan_jvp((*op, *axis, *reverse, *inclusive), call),
        Primitive::Softmax => reduce::softmax_jvp(call.outputs, call.tangents),
        Primitive::Index(op) => index::jvp(op, call),
        Primitive::Sort(op) => sort::jvp(op, call),
        Primitive::Random(op) => random::jvp(op, call.inputs),
        Primitive::Fast(op) => op.unit().jvp(call),
        Primitive::Conv(op) => conv::jvp(op, call.inputs, call.tangents),
        Primitive::Custom(op) => crate::transforms::custom_jvp(op, call),
        Primitive::Quantized(op) => quantized::jvp(op, call),
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
