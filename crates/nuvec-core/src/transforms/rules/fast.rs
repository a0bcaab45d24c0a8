//! Rules of the fused operations ([`FastOp`]). Reverse mode has dedicated rules where MLX
//! has them (the norms' own gradient nodes, cross entropy's, the inverse rotation, softmax
//! and log-sum-exp); everything else, and forward mode, differentiates the fallback graph.
//! Batching keeps the fused node for the row-wise operations (batch axis moved first) and
//! batches the fallback graph otherwise.

use super::{output, single};
use crate::fast::{FastOp, one, record_or_fallback};
use crate::primitive::Batched;
use crate::{Array, Result};

/// How many outputs a fused node has.
fn output_count(op: &FastOp) -> usize {
    match op {
        FastOp::AddRmsNorm { .. }
        | FastOp::RmsNormVjp { .. }
        | FastOp::GatedDelta { .. }
        | FastOp::GatedDeltaSlots => 2,
        FastOp::LayerNormVjp { .. } => 3,
        _ => 1,
    }
}

/// `inputs` with the arrays at `at` replaced by `values`.
fn substituted(inputs: &[Array], at: &[usize], values: &[Array]) -> Vec<Array> {
    let mut all = inputs.to_vec();
    for (&i, v) in at.iter().zip(values) {
        all[i] = v.clone();
    }
    all
}

pub(super) fn vjp(
    op: &FastOp,
    inputs: &[Array],
    outputs: &[Option<Array>],
    cotangents: &[Option<Array>],
    argnums: &[usize],
) -> Result<Vec<Array>> {
    let pick = |all: Vec<Array>| argnums.iter().map(|&i| all[i].clone()).collect();
    match op {
        FastOp::RmsNorm { eps } => {
            let g = single(cotangents)?;
            let node = vec![inputs[0].clone(), inputs[1].clone(), g.clone()];
            Ok(pick(record_or_fallback(
                FastOp::RmsNormVjp { eps: *eps },
                node,
            )?))
        }
        FastOp::LayerNorm { eps } => {
            let mut node = inputs.to_vec();
            node.push(single(cotangents)?.clone());
            Ok(pick(record_or_fallback(
                FastOp::LayerNormVjp { eps: *eps },
                node,
            )?))
        }
        // The rotation is orthogonal: its transpose is the rotation backwards.
        FastOp::Rope {
            dims,
            traditional,
            base,
            scale,
            forward,
        } if argnums == [0] => {
            let inverse = FastOp::Rope {
                dims: *dims,
                traditional: *traditional,
                base: *base,
                scale: *scale,
                forward: !forward,
            };
            let node = substituted(inputs, &[0], std::slice::from_ref(single(cotangents)?));
            Ok(vec![one(inverse, node)?])
        }
        FastOp::Softmax => {
            let (s, g) = (output(outputs)?, single(cotangents)?);
            let sg = crate::multiply(s, g)?;
            let dx = crate::subtract(&sg, crate::multiply(s, crate::sum(&sg, &[-1], true)?)?)?;
            Ok(vec![dx])
        }
        FastOp::LogSumExp => {
            let s = one(FastOp::Softmax, vec![inputs[0].clone()])?;
            Ok(vec![crate::multiply(single(cotangents)?, &s)?])
        }
        // Only the logits are differentiable (the targets are integers).
        FastOp::CrossEntropy if argnums == [0] => {
            let node = vec![
                inputs[0].clone(),
                inputs[1].clone(),
                output(outputs)?.clone(),
                single(cotangents)?.clone(),
            ];
            Ok(vec![one(FastOp::CrossEntropyVjp, node)?])
        }
        _ => through_fallback(op, inputs, cotangents, argnums),
    }
}

/// The vjp of the fallback graph with respect to the inputs `argnums` (outputs without a
/// cotangent get zeros).
fn through_fallback(
    op: &FastOp,
    inputs: &[Array],
    cotangents: &[Option<Array>],
    argnums: &[usize],
) -> Result<Vec<Array>> {
    let specs = op.output_specs(inputs)?;
    let cots = cotangents
        .iter()
        .zip(&specs)
        .map(|(c, (shape, dtype))| match c {
            Some(c) => Ok(c.clone()),
            None => crate::zeros(shape, *dtype),
        })
        .collect::<Result<Vec<_>>>()?;
    let primals: Vec<Array> = argnums.iter().map(|&i| inputs[i].clone()).collect();
    let f = |ps: &[Array]| op.fallback(&substituted(inputs, argnums, ps));
    Ok(crate::vjp(f, &primals, &cots)?.1)
}

pub(super) fn jvp(op: &FastOp, inputs: &[Array], tangents: &[Option<Array>]) -> Result<Vec<Array>> {
    let active: Vec<usize> = (0..inputs.len())
        .filter(|&i| tangents[i].is_some() && inputs[i].dtype().is_inexact())
        .collect();
    if active.is_empty() {
        return op
            .output_specs(inputs)?
            .iter()
            .map(|(shape, dtype)| crate::zeros(shape, *dtype))
            .collect();
    }
    let primals: Vec<Array> = active.iter().map(|&i| inputs[i].clone()).collect();
    let ts: Vec<Array> = active.iter().filter_map(|&i| tangents[i].clone()).collect();
    let f = |ps: &[Array]| op.fallback(&substituted(inputs, &active, ps));
    Ok(crate::jvp(f, &primals, &ts)?.1)
}

pub(super) fn vmap(op: &FastOp, inputs: &[Array], axes: &[Option<usize>]) -> Result<Batched> {
    let size = inputs
        .iter()
        .zip(axes)
        .find_map(|(a, ax)| ax.map(|ax| a.shape()[ax]))
        .ok_or_else(|| crate::error::invalid("vmap", "no input of the fused node is batched"))?;
    // Input `i` with the batch first (an unbatched one broadcast over it).
    let front = |i: usize| -> Result<Array> {
        let a = &inputs[i];
        match axes[i] {
            Some(ax) => crate::transforms::move_axis(a, ax, 0),
            None => {
                let mut shape = vec![size];
                shape.extend_from_slice(a.shape());
                crate::broadcast_to(&crate::expand_dims(a, 0)?, &shape)
            }
        }
    };
    let rest_unbatched = axes[1..].iter().all(Option::is_none);
    let row_wise = match op {
        FastOp::RmsNorm { .. } | FastOp::LayerNorm { .. } | FastOp::Softmax | FastOp::LogSumExp => {
            rest_unbatched
        }
        FastOp::Rope { .. } => rest_unbatched && inputs[1].size() == 1,
        FastOp::CrossEntropy => true,
        _ => false,
    };
    let outs = if row_wise {
        // Rows stay rows with the batch as one more leading axis.
        let mut all = inputs.to_vec();
        all[0] = front(0)?;
        if *op == FastOp::CrossEntropy {
            all[1] = front(1)?;
        }
        record_or_fallback(op.clone(), all)?
    } else {
        let f = |xs: &[Array]| op.fallback(xs);
        crate::vmap(f, axes, &vec![0; output_count(op)])(inputs)?
    };
    let n = outs.len();
    Ok((outs, vec![Some(0); n]))
}
