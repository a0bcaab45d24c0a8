//! Rules of the random family. Random bits are integers of an integer key: no derivative
//! flows through them. A batch of keys is a key array with one more batch axis, which the
//! primitive takes as it is, so batching adds that axis to the output shape (no loop).

use crate::ops::random::RandomOp;
use crate::primitive::{Batched, Primitive};
use crate::{Array, Result};

/// Zero cotangents for the (integer) key.
pub(super) fn vjp(inputs: &[Array], argnums: &[usize]) -> Result<Vec<Array>> {
    argnums
        .iter()
        .map(|&i| crate::zeros_like(&inputs[i]))
        .collect()
}

/// Zero tangents of the bits' type.
pub(super) fn jvp(op: &RandomOp, inputs: &[Array]) -> Result<Vec<Array>> {
    op.output_specs(inputs)?
        .into_iter()
        .map(|(shape, dtype)| crate::zeros(&shape, dtype))
        .collect()
}

/// The bits of a batch of keys whose batch axis is `axes[0]`: the key keeps its pair axis
/// last, and the batch becomes an axis of the output at the same place among the key axes.
pub(super) fn vmap(op: &RandomOp, inputs: &[Array], axes: &[Option<usize>]) -> Result<Batched> {
    let RandomOp::Bits { shape, width } = op;
    let key = &inputs[0];
    let Some(mut ax) = axes[0] else {
        let out = Array::op1(Primitive::Random(op.clone()), vec![key.clone()])?;
        return Ok((vec![out], vec![None]));
    };
    let mut key = key.clone();
    let last = key.ndim() - 1;
    if ax == last {
        // The batch sits where the key pairs should: move it just before them.
        if last == 0 {
            return Err(crate::error::invalid(
                op.name(),
                "a batched key needs a pair axis",
            ));
        }
        key = crate::transforms::move_axis(&key, ax, last - 1)?;
        ax = last - 1;
    }
    let mut batched_shape = shape.clone();
    batched_shape.insert(ax, key.shape()[ax]);
    let batched = RandomOp::Bits {
        shape: batched_shape,
        width: *width,
    };
    let out = Array::op1(Primitive::Random(batched), vec![key])?;
    Ok((vec![out], vec![Some(ax)]))
}
