//! Rules of the sorting family: `sort` and `partition` (values and indices) and
//! `searchsorted`.
//!
//! A sort's values are its input permuted along the axis by the indices output: their
//! tangent is the input's tangent taken along the axis, and their cotangent goes back to
//! the places the indices name. Indices and `searchsorted`'s positions are integers, with
//! zero derivatives.

use super::{JvpArgs, VjpArgs};
use crate::ops::index::{IndexOp, ScatterMode};
use crate::ops::sort::SortOp;
use crate::primitive::{Batched, Primitive};
use crate::{Array, DType, Result};
use crate::{argsort, concatenate, zeros, zeros_like};

/// The indices output of a sort or partition: the recorded one, or the node again if that
/// one was dropped (only the values were used).
fn indices(op: &SortOp, inputs: &[Array], outputs: &[Option<Array>]) -> Result<Array> {
    if let Some(Some(i)) = outputs.get(1) {
        return Ok(i.clone());
    }
    let mut fresh = Array::from_op(Primitive::Sort(op.clone()), inputs.to_vec())?;
    Ok(fresh.swap_remove(1))
}

pub(super) fn vjp(op: &SortOp, call: VjpArgs<'_>) -> Result<Vec<Array>> {
    match op {
        SortOp::Sort { axis } | SortOp::Partition { axis, .. } => {
            let x = &call.inputs[0];
            let Some(g) = call.cotangents.first().and_then(Option::as_ref) else {
                // Only the (integer) indices were used.
                return call
                    .argnums
                    .iter()
                    .map(|&i| zeros_like(&call.inputs[i]))
                    .collect();
            };
            // The indices are a permutation of each lane: adding equals writing.
            let put = IndexOp::ScatterAxis {
                axis: *axis,
                mode: ScatterMode::Sum,
            };
            let args = vec![
                zeros_like(x)?,
                indices(op, call.inputs, call.outputs)?,
                g.clone(),
            ];
            let dx = Array::op1(Primitive::Index(put), args)?;
            Ok(call.argnums.iter().map(|_| dx.clone()).collect())
        }
        // Piecewise constant: no derivative.
        SortOp::SearchSorted { .. } => call
            .argnums
            .iter()
            .map(|&i| zeros_like(&call.inputs[i]))
            .collect(),
    }
}

pub(super) fn jvp(op: &SortOp, call: JvpArgs<'_>) -> Result<Vec<Array>> {
    match op {
        SortOp::Sort { axis } | SortOp::Partition { axis, .. } => {
            let x = &call.inputs[0];
            let t = match &call.tangents[0] {
                Some(t) => t.clone(),
                None => zeros_like(x)?,
            };
            let idx = indices(op, call.inputs, call.outputs)?;
            let take = IndexOp::GatherAxis { axis: *axis };
            let dv = Array::op1(Primitive::Index(take), vec![t, idx])?;
            Ok(vec![dv, zeros(x.shape(), DType::U32)?])
        }
        SortOp::SearchSorted { .. } => Ok(vec![zeros(call.inputs[1].shape(), DType::U32)?]),
    }
}

pub(super) fn vmap(op: &SortOp, inputs: &[Array], axes: &[Option<usize>]) -> Result<Batched> {
    match *op {
        SortOp::Sort { axis } | SortOp::Partition { axis, .. } => {
            let Some(ax) = axes[0] else {
                let out = Array::from_op(Primitive::Sort(op.clone()), inputs.to_vec())?;
                return Ok((out, vec![None, None]));
            };
            // The lanes' axis in the batched input; the batch stays where it is.
            let along = if ax <= axis { axis + 1 } else { axis };
            let shifted = match *op {
                SortOp::Partition { kth, .. } => SortOp::Partition { kth, axis: along },
                _ => SortOp::Sort { axis: along },
            };
            let out = Array::from_op(Primitive::Sort(shifted), inputs.to_vec())?;
            Ok((out, vec![Some(ax), Some(ax)]))
        }
        SortOp::SearchSorted { right } => searchsorted_vmap(right, inputs, axes),
    }
}

/// `searchsorted` over a batch. With one sorted array for all examples the primitive takes
/// the batched values as they are. With a sorted array per example (the primitive wants a
/// 1-D one), each example's positions come from sorting: in a stable sort of the values
/// followed by the sorted array (or the other way round for `right`), a value's rank minus
/// its rank among the values alone is the number of sorted elements placed before it, which
/// is its position. The sort's order is the one `searchsorted` uses (NaN last, stable).
fn searchsorted_vmap(right: bool, inputs: &[Array], axes: &[Option<usize>]) -> Result<Batched> {
    let (a, v) = (&inputs[0], &inputs[1]);
    let Some(a_ax) = axes[0] else {
        let op = SortOp::SearchSorted { right };
        let out = Array::op1(Primitive::Sort(op), inputs.to_vec())?;
        return Ok((vec![out], vec![axes[1]]));
    };
    let a = crate::transforms::move_axis(a, a_ax, 0)?;
    let size = a.shape()[0];
    let v = match axes[1] {
        Some(ax) => crate::transforms::move_axis(v, ax, 0)?,
        None => {
            let mut shape = vec![size];
            shape.extend_from_slice(v.shape());
            crate::broadcast_to(&crate::expand_dims(v, 0)?, &shape)?
        }
    };
    let example: Vec<isize> = v.shape().iter().map(|&d| d as isize).collect();
    let flat = v.reshape(&[size as isize, -1])?;
    let (n, m) = (a.shape()[1] as isize, flat.shape()[1] as isize);
    let rank = |x: &Array| argsort(&argsort(x, Some(1))?, Some(1));
    let (merged, from) = if right {
        (concatenate(&[a, flat.clone()], 1)?, n)
    } else {
        (concatenate(&[flat.clone(), a], 1)?, 0)
    };
    let in_merged = crate::slice(
        &rank(&merged)?,
        &[
            crate::SliceArg::full(),
            crate::SliceArg::new(Some(from), Some(from + m), 1),
        ],
    )?;
    let out = crate::subtract(&in_merged, &rank(&flat)?)?.reshape(&example)?;
    Ok((vec![out], vec![Some(0)]))
}
