//! Rules of the quantization family, as MLX's.
//!
//! `quantized_matmul` is linear in `x`, and the dequantized matrix `s · q + b` is linear in the
//! scales and biases together, so every derivative is another product: with respect to `x`,
//! the quantized product with the other orientation; with respect to the scales and biases,
//! the full-precision product `xᵀ · g` (or `gᵀ · x`) summed over each group, weighted by `q`
//! for the scales. The packed integers have none (the transforms never ask for integer
//! inputs). Quantizing is not differentiable, as in MLX.

use super::{JvpArgs, VjpArgs, or_zeros, single};
use crate::ops::quantized::QuantizedOp;
use crate::primitive::Batched;
use crate::transforms::move_axis;
use crate::{Array, Error, Result};

fn unsupported(op: &QuantizedOp, what: &str) -> Error {
    Error::Unsupported {
        op: op.name(),
        what: what.into(),
    }
}

/// `a` with its last axis cut into groups of `group_size`: `[..., groups, group_size]`.
fn grouped(a: &Array, group_size: usize) -> Result<Array> {
    crate::unflatten(a, -1, &[-1, group_size as isize])
}

/// The quantized integers of `wq` as floats of the scales' type (`1 · q + 0`).
fn integers(
    wq: &Array,
    scales: &Array,
    biases: &Array,
    group_size: usize,
    bits: u32,
) -> Result<Array> {
    crate::dequantize(
        wq,
        &crate::ones_like(scales)?,
        &crate::zeros_like(biases)?,
        group_size,
        bits,
    )
}

/// The cotangents of the scales and biases (`which` 1 or 2 of `[wq, scales, biases]`), given
/// the cotangent of the dequantized matrix.
fn scale_bias_cotangent(
    which: usize,
    dw: &Array,
    inputs: &[Array],
    group_size: usize,
    bits: u32,
) -> Result<Array> {
    let dw = grouped(dw, group_size)?;
    if which == 2 {
        return crate::sum(&dw, &[-1], false);
    }
    let q = integers(&inputs[0], &inputs[1], &inputs[2], group_size, bits)?;
    crate::sum(
        &crate::multiply(&dw, &grouped(&q, group_size)?)?,
        &[-1],
        false,
    )
}

/// Dispatches a reverse-mode rule.
pub(super) fn vjp(op: &QuantizedOp, call: VjpArgs<'_>) -> Result<Vec<Array>> {
    let inputs = call.inputs;
    match *op {
        QuantizedOp::Quantize { .. } => Err(unsupported(op, "vjp")),
        QuantizedOp::Dequantize { group_size, bits } => {
            let g = single(call.cotangents)?;
            call.argnums
                .iter()
                .map(|&i| match i {
                    1 | 2 => scale_bias_cotangent(i, g, inputs, group_size, bits),
                    _ => Err(unsupported(op, "vjp with respect to the packed integers")),
                })
                .collect()
        }
        QuantizedOp::Matmul {
            group_size,
            bits,
            transpose,
        } => {
            let g = single(call.cotangents)?;
            let (x, w, scales, biases) = (&inputs[0], &inputs[1], &inputs[2], &inputs[3]);
            // The cotangent of the dequantized matrix, built once for the scales and biases.
            let mut dw: Option<Array> = None;
            let mut matrix = || -> Result<Array> {
                if let Some(dw) = &dw {
                    return Ok(dw.clone());
                }
                let (xs, gs) = if w.ndim() == 2 {
                    let k = x.shape()[x.ndim() - 1] as isize;
                    let n = g.shape()[g.ndim() - 1] as isize;
                    (x.reshape(&[-1, k])?, g.reshape(&[-1, n])?)
                } else {
                    (x.clone(), g.clone())
                };
                let made = if transpose {
                    crate::matmul(&crate::swapaxes(&gs, -1, -2)?, &xs)?
                } else {
                    crate::matmul(&crate::swapaxes(&xs, -1, -2)?, &gs)?
                };
                dw = Some(made.clone());
                Ok(made)
            };
            call.argnums
                .iter()
                .map(|&i| match i {
                    0 => {
                        crate::quantized_matmul(g, w, scales, biases, !transpose, group_size, bits)
                    }
                    2 | 3 => {
                        scale_bias_cotangent(i - 1, &matrix()?, &inputs[1..], group_size, bits)
                    }
                    _ => Err(unsupported(op, "vjp with respect to the packed integers")),
                })
                .collect()
        }
    }
}

/// The dequantized matrix's tangent, `ts · q + tb` (zero where a tangent is missing), or
/// `None` when both are.
fn matrix_tangent(
    inputs: &[Array],
    ts: &Option<Array>,
    tb: &Option<Array>,
    group_size: usize,
    bits: u32,
) -> Result<Option<Array>> {
    if ts.is_none() && tb.is_none() {
        return Ok(None);
    }
    let ts = or_zeros(ts, &inputs[1])?;
    let tb = or_zeros(tb, &inputs[2])?;
    Ok(Some(crate::dequantize(
        &inputs[0], &ts, &tb, group_size, bits,
    )?))
}

/// Dispatches a forward-mode rule.
pub(super) fn jvp(op: &QuantizedOp, call: JvpArgs<'_>) -> Result<Vec<Array>> {
    let inputs = call.inputs;
    match *op {
        QuantizedOp::Quantize { .. } => Err(unsupported(op, "jvp")),
        QuantizedOp::Dequantize { group_size, bits } => {
            match matrix_tangent(
                inputs,
                &call.tangents[1],
                &call.tangents[2],
                group_size,
                bits,
            )? {
                Some(t) => Ok(vec![t]),
                None => {
                    let zero = crate::zeros_like(&inputs[1])?;
                    Ok(vec![crate::dequantize(
                        &inputs[0], &zero, &zero, group_size, bits,
                    )?])
                }
            }
        }
        QuantizedOp::Matmul {
            group_size,
            bits,
            transpose,
        } => {
            let (x, w, scales, biases) = (&inputs[0], &inputs[1], &inputs[2], &inputs[3]);
            let mut out: Option<Array> = None;
            if let Some(t) = &call.tangents[0] {
                out = Some(crate::quantized_matmul(
                    t, w, scales, biases, transpose, group_size, bits,
                )?);
            }
            let dw = matrix_tangent(
                &inputs[1..],
                &call.tangents[2],
                &call.tangents[3],
                group_size,
                bits,
            )?;
            if let Some(dw) = dw {
                let dw = if transpose {
                    crate::swapaxes(&dw, -1, -2)?
                } else {
                    dw
                };
                let term = crate::matmul(x, &dw)?;
                out = Some(match out {
                    Some(o) => crate::add(&o, &term)?,
                    None => term,
                });
            }
            match out {
                Some(o) => Ok(vec![o]),
                None => {
                    let zero = crate::zeros_like(x)?;
                    Ok(vec![crate::quantized_matmul(
                        &zero, w, scales, biases, transpose, group_size, bits,
                    )?])
                }
            }
        }
    }
}

/// `a` with its batch axis first, or with a new leading axis of size 1 when unbatched.
fn front(a: &Array, axis: Option<usize>) -> Result<Array> {
    match axis {
        Some(ax) => move_axis(a, ax, 0),
        None => crate::expand_dims(a, 0),
    }
}

/// Dispatches a batching rule.
pub(super) fn vmap(op: &QuantizedOp, inputs: &[Array], axes: &[Option<usize>]) -> Result<Batched> {
    match *op {
        QuantizedOp::Quantize { group_size, bits } => {
            // Row by row along the last axis: any other axis can carry the batch.
            let w = front(&inputs[0], axes[0])?;
            let (wq, scales, biases) = crate::quantize(&w, group_size, bits)?;
            Ok((vec![wq, scales, biases], vec![Some(0); 3]))
        }
        QuantizedOp::Dequantize { group_size, bits } => {
            let all = super::batch_front(inputs, axes)?;
            let out = crate::dequantize(&all[0], &all[1], &all[2], group_size, bits)?;
            Ok((vec![out], vec![Some(0)]))
        }
        QuantizedOp::Matmul {
            group_size,
            bits,
            transpose,
        } => {
            let x = front(&inputs[0], axes[0])?;
            let weights_batched = axes[1..].iter().any(Option::is_some);
            if !weights_batched {
                // `x`'s batch axis is one more leading axis of the product.
                let out = crate::quantized_matmul(
                    &x, &inputs[1], &inputs[2], &inputs[3], transpose, group_size, bits,
                )?;
                return Ok((vec![out], vec![Some(0)]));
            }
            let w = front(&inputs[1], axes[1])?;
            let scales = front(&inputs[2], axes[2])?;
            let biases = front(&inputs[3], axes[3])?;
            let per_example_w = inputs[1].ndim() - usize::from(axes[1].is_some());
            if per_example_w > 2 {
                // Batches of matrices on both sides: the new axis leads both.
                let out =
                    crate::quantized_matmul(&x, &w, &scales, &biases, transpose, group_size, bits)?;
                return Ok((vec![out], vec![Some(0)]));
            }
            // One matrix per example against all of that example's rows of `x`.
            let shape = x.shape().to_vec();
            let (lead, k) = (&shape[1..shape.len() - 1], shape[shape.len() - 1]);
            let rows: usize = lead.iter().product();
            let x = x.reshape(&[shape[0] as isize, rows as isize, k as isize])?;
            let out =
                crate::quantized_matmul(&x, &w, &scales, &biases, transpose, group_size, bits)?;
            let mut target: Vec<isize> = vec![out.shape()[0] as isize];
            target.extend(lead.iter().map(|&d| d as isize));
            target.push(out.shape()[2] as isize);
            Ok((vec![out.reshape(&target)?], vec![Some(0)]))
        }
    }
}
