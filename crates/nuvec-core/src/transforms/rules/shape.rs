//! Rules of the shape family.

use super::single;
use crate::ops::shape::ShapeOp;
use crate::primitive::{Batched, Primitive};
use crate::{Array, Error, Result};

fn unsupported(op: &ShapeOp, what: &str) -> Error {
    Error::Unsupported {
        op: op.name(),
        what: what.into(),
    }
}

/// The shape primitive applied to a cotangent or tangent: the same linear map.
fn linear(op: &ShapeOp, v: &Array) -> Result<Array> {
    Array::op1(Primitive::Shape(op.clone()), vec![v.clone()])
}

pub(super) fn vjp(
    op: &ShapeOp,
    inputs: &[Array],
    cotangents: &[Option<Array>],
) -> Result<Vec<Array>> {
    let (x, g) = (&inputs[0], single(cotangents)?);
    let dx = match op {
        ShapeOp::Reshape(_) => crate::reshape(g, &as_isize(x.shape()))?,
        ShapeOp::Transpose(perm) => {
            let mut inverse = vec![0; perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                inverse[p] = i;
            }
            crate::transpose(g, &inverse)?
        }
        ShapeOp::Contiguous => g.clone(),
        ShapeOp::Broadcast(shape) => {
            // Sum over the axes the broadcast added or stretched.
            let lead = shape.len() - x.ndim();
            let axes: Vec<isize> = (0..shape.len())
                .filter(|&i| i < lead || (x.shape()[i - lead] == 1 && shape[i] != 1))
                .map(|i| i as isize)
                .collect();
            let summed = if axes.is_empty() {
                g.clone()
            } else {
                crate::sum(g, &axes, true)?
            };
            crate::reshape(&summed, &as_isize(x.shape()))?
        }
        ShapeOp::Slice(ranges) => {
            // The slice's transpose: the cotangent written into zeros of the input's shape.
            let args: Vec<crate::SliceArg> = ranges
                .iter()
                .map(|&(start, step, len)| {
                    let stop = start as isize + step * len as isize;
                    crate::SliceArg::new(Some(start as isize), (stop >= 0).then_some(stop), step)
                })
                .collect();
            crate::slice_update(&crate::zeros_like(x)?, g, &args)?
        }
        #[allow(unreachable_patterns)]
        _ => return Err(unsupported(op, "vjp")),
    };
    Ok(vec![dx])
}

pub(super) fn jvp(
    op: &ShapeOp,
    inputs: &[Array],
    tangents: &[Option<Array>],
) -> Result<Vec<Array>> {
    let t = match &tangents[0] {
        Some(t) => t.clone(),
        None => crate::zeros_like(&inputs[0])?,
    };
    Ok(vec![linear(op, &t)?])
}

fn as_isize(shape: &[usize]) -> Vec<isize> {
    shape.iter().map(|&d| d as isize).collect()
}

pub(super) fn vmap(op: &ShapeOp, inputs: &[Array], axes: &[Option<usize>]) -> Result<Batched> {
    let Some(ax) = axes[0] else {
        return Ok((vec![linear(op, &inputs[0])?], vec![None]));
    };
    let x = crate::transforms::move_axis(&inputs[0], ax, 0)?;
    let b = x.shape()[0];
    let out = match op {
        ShapeOp::Reshape(shape) => {
            let mut s = vec![b as isize];
            s.extend(as_isize(shape));
            crate::reshape(&x, &s)?
        }
        ShapeOp::Transpose(perm) => {
            let mut p = vec![0];
            p.extend(perm.iter().map(|&i| i + 1));
            crate::transpose(&x, &p)?
        }
        ShapeOp::Broadcast(shape) => {
            // Align the example's axes to the right of the target shape, after the batch.
            let lead = shape.len() + 1 - x.ndim();
            let mut s = vec![b as isize];
            s.extend(std::iter::repeat_n(1, lead));
            s.extend(as_isize(&x.shape()[1..]));
            let mut target = vec![b];
            target.extend(shape);
            crate::broadcast_to(&crate::reshape(&x, &s)?, &target)?
        }
        ShapeOp::Contiguous => linear(op, &x)?,
        ShapeOp::Slice(ranges) => {
            let mut r = vec![(0, 1, b)];
            r.extend(ranges.iter().copied());
            linear(&ShapeOp::Slice(r), &x)?
        }
        #[allow(unreachable_patterns)]
        _ => return Err(unsupported(op, "vmap")),
    };
    Ok((vec![out], vec![Some(0)]))
}
