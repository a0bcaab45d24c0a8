//! The rules every fused operation gets unless its unit has its own: reverse mode, forward
//! mode and batching of the fallback graph, and the batching rule of the row-wise operations
//! (the fused node again, with the batch as one more leading axis).

use super::{FastOp, Fused, record_or_fallback};
use crate::primitive::Batched;
use crate::transforms::rules::{JvpArgs, VjpArgs};
pub(super) use crate::transforms::rules::{output, single};
use crate::{Array, Result};

/// `inputs` with the arrays at `at` replaced by `values`.
pub(super) fn substituted(inputs: &[Array], at: &[usize], values: &[Array]) -> Vec<Array> {
    let mut all = inputs.to_vec();
    for (&i, v) in at.iter().zip(values) {
        all[i] = v.clone();
    }
    all
}

/// The vjp of the fallback graph with respect to the inputs `argnums` (outputs without a
/// cotangent get zeros).
pub(super) fn vjp_of_fallback<F: Fused + ?Sized>(
    unit: &F,
    call: VjpArgs<'_>,
) -> Result<Vec<Array>> {
    let specs = unit.output_specs(call.inputs)?;
    let cots = call
        .cotangents
        .iter()
        .zip(&specs)
        .map(|(c, (shape, dtype))| match c {
            Some(c) => Ok(c.clone()),
            None => crate::zeros(shape, *dtype),
        })
        .collect::<Result<Vec<_>>>()?;
    let primals: Vec<Array> = call
        .argnums
        .iter()
        .map(|&i| call.inputs[i].clone())
        .collect();
    let f = |ps: &[Array]| unit.fallback(&substituted(call.inputs, call.argnums, ps));
    Ok(crate::vjp(f, &primals, &cots)?.1)
}

/// The jvp of the fallback graph (integer inputs are constants).
pub(super) fn jvp_of_fallback<F: Fused + ?Sized>(
    unit: &F,
    call: JvpArgs<'_>,
) -> Result<Vec<Array>> {
    let active: Vec<usize> = (0..call.inputs.len())
        .filter(|&i| call.tangents[i].is_some() && call.inputs[i].dtype().is_inexact())
        .collect();
    if active.is_empty() {
        return unit
            .output_specs(call.inputs)?
            .iter()
            .map(|(shape, dtype)| crate::zeros(shape, *dtype))
            .collect();
    }
    let primals: Vec<Array> = active.iter().map(|&i| call.inputs[i].clone()).collect();
    let ts: Vec<Array> = active
        .iter()
        .filter_map(|&i| call.tangents[i].clone())
        .collect();
    let f = |ps: &[Array]| unit.fallback(&substituted(call.inputs, &active, ps));
    Ok(crate::jvp(f, &primals, &ts)?.1)
}

/// The batch size: the length of the first batched input's batch axis.
fn batch_size(inputs: &[Array], axes: &[Option<usize>]) -> Result<usize> {
    inputs
        .iter()
        .zip(axes)
        .find_map(|(a, ax)| ax.map(|ax| a.shape()[ax]))
        .ok_or_else(|| crate::error::invalid("vmap", "no input of the fused node is batched"))
}

/// The fallback graph batched, every output batched along axis 0.
pub(super) fn vmap_of_fallback<F: Fused + ?Sized>(
    unit: &F,
    inputs: &[Array],
    axes: &[Option<usize>],
) -> Result<Batched> {
    batch_size(inputs, axes)?;
    let count = unit.output_count();
    let f = |xs: &[Array]| unit.fallback(xs);
    let outs = crate::vmap(f, axes, &vec![0; count])(inputs)?;
    Ok((outs, vec![Some(0); count]))
}

/// The batching rule of a row-wise operation whose inputs `rows` hold rows (the others are
/// parameters shared by every row): when only those are batched, the fused node of `op`
/// again, with the batch axis moved first (rows stay rows); otherwise the fallback batched.
pub(super) fn vmap_rows<F: Fused + ?Sized>(
    unit: &F,
    op: FastOp,
    rows: &[usize],
    inputs: &[Array],
    axes: &[Option<usize>],
) -> Result<Batched> {
    let size = batch_size(inputs, axes)?;
    let params_batched = axes
        .iter()
        .enumerate()
        .any(|(i, ax)| ax.is_some() && !rows.contains(&i));
    if params_batched {
        return vmap_of_fallback(unit, inputs, axes);
    }
    let mut all = inputs.to_vec();
    for &i in rows {
        let a = &inputs[i];
        all[i] = match axes[i] {
            Some(ax) => crate::transforms::move_axis(a, ax, 0)?,
            None => {
                // An unbatched row input is broadcast over the batch.
                let mut shape = vec![size];
                shape.extend_from_slice(a.shape());
                crate::broadcast_to(&crate::expand_dims(a, 0)?, &shape)?
            }
        };
    }
    let outs = record_or_fallback(op, all)?;
    let n = outs.len();
    Ok((outs, vec![Some(0); n]))
}
