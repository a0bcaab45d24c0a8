//! Rules of the shape family. Every shape primitive is linear, so its forward rule is the
//! primitive itself applied to the tangents; the reverse rules are the transposes (a slice
//! for a pad, a split for a concatenation, a scatter for a strided view, ...).

use super::{JvpArgs, VjpArgs, all_or_zeros, single};
use crate::ops::shape::{ShapeOp, split_pieces};
use crate::primitive::{Batched, Primitive};
use crate::transforms::move_axis;
use crate::{Array, DType, Error, Result};

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

pub(super) fn vjp(op: &ShapeOp, call: VjpArgs<'_>) -> Result<Vec<Array>> {
    // The primitives of several inputs or outputs first; the rest have one of each.
    match op {
        ShapeOp::Split { axis, indices } => {
            return Ok(vec![split_vjp(
                &call.inputs[0],
                *axis,
                indices,
                call.cotangents,
            )?]);
        }
        ShapeOp::Concatenate(axis) => {
            return concatenate_vjp(call.inputs, *axis, single(call.cotangents)?, call.argnums);
        }
        ShapeOp::Pad(widths) => {
            return pad_vjp(call.inputs, widths, single(call.cotangents)?, call.argnums);
        }
        _ => {}
    }
    let (x, g) = (&call.inputs[0], single(call.cotangents)?);
    let dx = match op {
        ShapeOp::Reshape(_) => crate::reshape(g, &as_isize(x.shape()))?,
        ShapeOp::Transpose(perm) => {
            let mut inverse = vec![0; perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                inverse[p] = i;
            }
            crate::transpose(g, &inverse)?
        }
        ShapeOp::Contiguous | ShapeOp::Copy => g.clone(),
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
        ShapeOp::Diagonal {
            offset,
            axis1,
            axis2,
        } => diagonal_vjp(x, g, *offset, *axis1, *axis2)?,
        ShapeOp::AsStrided {
            shape,
            strides,
            offset,
        } => as_strided_vjp(x, g, shape, strides, *offset)?,
        _ => return Err(unsupported(op, "vjp")),
    };
    Ok(vec![dx])
}

/// The cotangent of a split: the pieces' cotangents put back where the pieces came from
/// (zeros for pieces without one).
fn split_vjp(
    x: &Array,
    axis: usize,
    indices: &[usize],
    cotangents: &[Option<Array>],
) -> Result<Array> {
    let dim = x.shape()[axis];
    let pieces = split_pieces(dim, indices);
    let mut end = 0;
    let in_order = pieces.iter().all(|&(start, len)| {
        let next = start == end;
        end = start + len;
        next
    }) && end == dim;
    if in_order {
        // The pieces tile the axis: join their cotangents.
        let parts = pieces
            .iter()
            .zip(cotangents)
            .map(|(&(_, len), c)| match c {
                Some(c) => Ok(c.clone()),
                None => {
                    let mut shape = x.shape().to_vec();
                    shape[axis] = len;
                    crate::zeros(&shape, x.dtype())
                }
            })
            .collect::<Result<Vec<_>>>()?;
        return crate::concatenate(&parts, axis as isize);
    }
    // Split points out of order make pieces overlap: pad each cotangent to the whole axis
    // and add them up.
    let mut total: Option<Array> = None;
    for (&(start, len), c) in pieces.iter().zip(cotangents) {
        let Some(c) = c else { continue };
        let mut widths = vec![(0, 0); x.ndim()];
        widths[axis] = (start, dim - start - len);
        let placed = crate::pad(c, &widths, 0)?;
        total = Some(match total {
            Some(t) => crate::add(&t, &placed)?,
            None => placed,
        });
    }
    match total {
        Some(t) => Ok(t),
        None => crate::zeros_like(x),
    }
}

/// The cotangents of joined inputs: the output's cotangent cut where they were joined.
fn concatenate_vjp(
    inputs: &[Array],
    axis: usize,
    g: &Array,
    argnums: &[usize],
) -> Result<Vec<Array>> {
    let mut points = Vec::with_capacity(inputs.len());
    let mut at = 0;
    for x in &inputs[..inputs.len() - 1] {
        at += x.shape()[axis];
        points.push(at);
    }
    let parts = crate::split_at(g, &points, axis as isize)?;
    Ok(argnums.iter().map(|&i| parts[i].clone()).collect())
}

/// The cotangents of a pad: the interior for `x`, the sum over the border for the value.
fn pad_vjp(
    inputs: &[Array],
    widths: &[(usize, usize)],
    g: &Array,
    argnums: &[usize],
) -> Result<Vec<Array>> {
    let (x, value) = (&inputs[0], &inputs[1]);
    argnums
        .iter()
        .map(|&i| {
            if i == 0 {
                let ranges = widths
                    .iter()
                    .zip(x.shape())
                    .map(|(&(before, _), &n)| (before, 1, n))
                    .collect();
                linear(&ShapeOp::Slice(ranges), g)
            } else {
                // The border as a mask (a pad of zeros with ones), so that the sum adds only
                // the border's cotangents.
                let border = Array::op1(
                    Primitive::Shape(ShapeOp::Pad(widths.to_vec())),
                    vec![crate::zeros_like(x)?, crate::ones_like(value)?],
                )?;
                let total = crate::sum(&crate::multiply(g, &border)?, &[], false)?;
                crate::reshape(&total, &as_isize(value.shape()))
            }
        })
        .collect()
}

/// The cotangent of a diagonal: zeros but for the diagonal, which gets `g`'s last axis.
fn diagonal_vjp(x: &Array, g: &Array, offset: isize, a1: usize, a2: usize) -> Result<Array> {
    let (rows, cols) = (x.shape()[a1], x.shape()[a2]);
    let len = g.shape()[g.ndim() - 1];
    if len == 0 {
        return crate::zeros_like(x);
    }
    // Element `l` of the diagonal is at row `first + l`: place it on that row of a column,
    // then keep it only in the diagonal's column (`col == row + offset`).
    let first = if offset < 0 { offset.unsigned_abs() } else { 0 };
    let mut widths = vec![(0, 0); g.ndim()];
    widths[g.ndim() - 1] = (first, rows - first - len);
    let column = crate::expand_dims(&crate::pad(g, &widths, 0)?, -1)?;
    let mask = crate::eye(rows, Some(cols), offset, DType::Bool)?;
    let core = crate::where_(&mask, &column, &crate::zeros(&[], g.dtype())?)?;
    // `core` holds the other axes in order, then the two matrix axes: put those back.
    let nd = x.ndim();
    let mut others = 0;
    let perm: Vec<usize> = (0..nd)
        .map(|d| {
            if d == a1 {
                nd - 2
            } else if d == a2 {
                nd - 1
            } else {
                others += 1;
                others - 1
            }
        })
        .collect();
    crate::transpose(&core, &perm)
}

/// The flat (row-major) position in the input of each element of a strided view.
fn strided_positions(shape: &[usize], strides: &[isize], offset: usize) -> Result<Array> {
    let mut positions = crate::full(&[], offset as i64, DType::I64)?;
    for (d, (&n, &s)) in shape.iter().zip(strides).enumerate() {
        let mut along = vec![1isize; shape.len()];
        along[d] = n as isize;
        let steps = crate::arange(0.0, n as f64, 1.0, DType::I64)?.reshape(&along)?;
        positions = crate::add(&positions, &crate::multiply(&steps, s as i64)?)?;
    }
    Ok(positions)
}

/// The cotangent of a strided view: each element's cotangent added at the position it was
/// read from (positions read more than once collect several).
fn as_strided_vjp(
    x: &Array,
    g: &Array,
    shape: &[usize],
    strides: &[isize],
    offset: usize,
) -> Result<Array> {
    if g.size() == 0 {
        return crate::zeros_like(x);
    }
    let positions = strided_positions(shape, strides, offset)?;
    let mut windows = as_isize(shape);
    windows.push(1);
    let flat = crate::scatter_add(
        &crate::zeros(&[x.size()], g.dtype())?,
        &[positions],
        &crate::reshape(g, &windows)?,
        &[0],
    )?;
    crate::reshape(&flat, &as_isize(x.shape()))
}

pub(super) fn jvp(op: &ShapeOp, call: JvpArgs<'_>) -> Result<Vec<Array>> {
    let tans = all_or_zeros(call.tangents, call.inputs)?;
    Array::from_op(Primitive::Shape(op.clone()), tans)
}

fn as_isize(shape: &[usize]) -> Vec<isize> {
    shape.iter().map(|&d| d as isize).collect()
}

pub(super) fn vmap(op: &ShapeOp, inputs: &[Array], axes: &[Option<usize>]) -> Result<Batched> {
    match op {
        ShapeOp::Concatenate(axis) => {
            let front = super::batch_front(inputs, axes)?;
            let out = Array::op1(Primitive::Shape(ShapeOp::Concatenate(axis + 1)), front)?;
            return Ok((vec![out], vec![Some(0)]));
        }
        ShapeOp::Pad(widths) => return pad_vmap(widths, inputs, axes),
        _ => {}
    }
    let Some(ax) = axes[0] else {
        let outs = Array::from_op(Primitive::Shape(op.clone()), inputs.to_vec())?;
        let none = vec![None; outs.len()];
        return Ok((outs, none));
    };
    let x = move_axis(&inputs[0], ax, 0)?;
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
        ShapeOp::Contiguous | ShapeOp::Copy => linear(op, &x)?,
        ShapeOp::Slice(ranges) => {
            let mut r = vec![(0, 1, b)];
            r.extend(ranges.iter().copied());
            linear(&ShapeOp::Slice(r), &x)?
        }
        ShapeOp::Split { axis, indices } => {
            let split = ShapeOp::Split {
                axis: axis + 1,
                indices: indices.clone(),
            };
            let outs = Array::from_op(Primitive::Shape(split), vec![x])?;
            let zero = vec![Some(0); outs.len()];
            return Ok((outs, zero));
        }
        ShapeOp::Diagonal {
            offset,
            axis1,
            axis2,
        } => {
            // The batch axis is not one of the pair, so it stays first among the others.
            let diagonal = ShapeOp::Diagonal {
                offset: *offset,
                axis1: axis1 + 1,
                axis2: axis2 + 1,
            };
            linear(&diagonal, &x)?
        }
        ShapeOp::AsStrided {
            shape,
            strides,
            offset,
        } => {
            // The primitive reads its input in row-major order, where example `i` starts at
            // `i · size`: one more axis with that stride views every example at once.
            let size: usize = x.shape()[1..].iter().product();
            let mut batched_shape = vec![b];
            batched_shape.extend(shape);
            let mut batched_strides = vec![size as isize];
            batched_strides.extend(strides);
            let view = ShapeOp::AsStrided {
                shape: batched_shape,
                strides: batched_strides,
                offset: *offset,
            };
            linear(&view, &x)?
        }
        _ => return Err(unsupported(op, "vmap")),
    };
    Ok((vec![out], vec![Some(0)]))
}

/// A pad of a batch. A shared value pads the batch with the batch axis left alone; a value
/// that varies is written over a zero pad through the border's mask.
fn pad_vmap(
    widths: &[(usize, usize)],
    inputs: &[Array],
    axes: &[Option<usize>],
) -> Result<Batched> {
    let (x, value) = (&inputs[0], &inputs[1]);
    let x = match axes[0] {
        Some(ax) => move_axis(x, ax, 0)?,
        None => x.clone(),
    };
    let mut all = widths.to_vec();
    if axes[0].is_some() {
        all.insert(0, (0, 0));
    }
    let Some(value_axis) = axes[1] else {
        let op = Primitive::Shape(ShapeOp::Pad(all));
        let out = Array::op1(op, vec![x, value.clone()])?;
        return Ok((vec![out], vec![axes[0].map(|_| 0)]));
    };
    let padded = crate::pad(&x, &all, 0)?;
    // One value per example, as `[batch, 1, 1, ...]` against the example's axes.
    let example: Vec<usize> = x.shape()[x.ndim() - widths.len()..].to_vec();
    let values = move_axis(value, value_axis, 0)?;
    let mut column = vec![values.shape()[0] as isize];
    column.extend(std::iter::repeat_n(1, example.len()));
    let values = crate::reshape(&values, &column)?;
    let border = crate::pad(&crate::zeros(&example, DType::Bool)?, widths, true)?;
    let out = crate::where_(&border, &values, &padded)?;
    Ok((vec![out], vec![Some(0)]))
}
