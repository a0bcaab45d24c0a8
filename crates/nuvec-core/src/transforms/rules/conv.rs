//! Rules of the convolution family.
//!
//! A convolution is linear in each input, so its derivatives are convolutions too: the
//! input's cotangent is the transposed convolution of the cotangent (the cotangent dilated by
//! the stride, correlated with the flipped kernel whose channel axes are swapped per group),
//! the weight's cotangent a convolution of the input with the cotangent (batch and channel
//! axes exchanged), and the tangent `conv(tx, w) + conv(x, tw)`. Batching folds the batch
//! into the input's N, into the output channels, or (both batched) into the groups.

use super::{VjpArgs, single};
use crate::error::invalid;
use crate::ops::conv::{ConvOp, dilated};
use crate::primitive::Batched;
use crate::{Array, Result};

/// The convolution `p` of `x` and `w` with another group count.
fn conv(p: &ConvOp, x: &Array, w: &Array, groups: usize) -> Result<Array> {
    crate::conv_general(
        x,
        w,
        &p.strides,
        &p.padding_lo,
        &p.padding_hi,
        &p.kernel_dilation,
        &p.input_dilation,
        groups,
        p.flip,
    )
}

fn dims(shape: &[usize]) -> Vec<isize> {
    shape.iter().map(|&d| d as isize).collect()
}

/// `shape` with axis `axis` replaced by `parts`.
fn split_axis(shape: &[usize], axis: usize, parts: &[usize]) -> Vec<isize> {
    let mut out = dims(&shape[..axis]);
    out.extend(dims(parts));
    out.extend(dims(&shape[axis + 1..]));
    out
}

/// `shape` with axes `axis` and `axis + 1` merged.
fn merge_axes(shape: &[usize], axis: usize) -> Vec<isize> {
    let mut out = dims(&shape[..axis]);
    out.push((shape[axis] * shape[axis + 1]) as isize);
    out.extend(dims(&shape[axis + 2..]));
    out
}

pub(super) fn vjp(p: &ConvOp, call: VjpArgs<'_>) -> Result<Vec<Array>> {
    let (x, w, g) = (&call.inputs[0], &call.inputs[1], single(call.cotangents)?);
    call.argnums
        .iter()
        .map(|&a| {
            let like = &call.inputs[a.min(1)];
            if x.size() == 0 || w.size() == 0 || g.size() == 0 {
                // An empty sum on one side or the other.
                return crate::zeros_like(like);
            }
            match a {
                0 => input_cotangent(p, x, w, g),
                1 => weight_cotangent(p, x, w, g),
                _ => Err(invalid("conv_general", format!("no input {a}"))),
            }
        })
        .collect()
}

/// `x`'s cotangent: `g` dilated by the strides, correlated with the flipped kernel (its
/// channel axes swapped within each group) and sampled every `input_dilation` positions.
fn input_cotangent(p: &ConvOp, x: &Array, w: &Array, g: &Array) -> Result<Array> {
    let d = p.spatial();
    let groups = p.groups;
    let mut lo = Vec::with_capacity(d);
    let mut hi = Vec::with_capacity(d);
    for i in 0..d {
        let reach = dilated(w.shape()[i + 1], p.kernel_dilation[i]) as isize;
        let extent = dilated(x.shape()[i + 1], p.input_dilation[i]) as isize;
        let spread = dilated(g.shape()[i + 1], p.strides[i]) as isize;
        // Output position q of the dilated input met tap k of output o where
        // q = o·s + k·kd − lo; these paddings line the taps up again and give one output per
        // dilated input position.
        lo.push(reach - 1 - p.padding_lo[i]);
        hi.push(extent - spread + p.padding_lo[i]);
    }
    // [C_out, K.., Cg] -> [G, Og, K.., Cg] -> [G, Cg, K.., Og] -> [C_in, K.., Og].
    let nd = w.ndim();
    let og = w.shape()[0] / groups;
    let split = crate::reshape(w, &split_axis(w.shape(), 0, &[groups, og]))?;
    let swapped = crate::swapaxes(&split, 1, nd as isize)?;
    let wt = crate::reshape(&swapped, &merge_axes(swapped.shape(), 0))?;
    crate::conv_general(
        g,
        &wt,
        &p.input_dilation,
        &lo,
        &hi,
        &p.kernel_dilation,
        &p.strides,
        groups,
        !p.flip,
    )
}

/// `w`'s cotangent: the input (channels of a group as its batch, the batch as its channels)
/// correlated with the cotangent (output channels as its batch), strides and kernel dilation
/// exchanging roles.
fn weight_cotangent(p: &ConvOp, x: &Array, w: &Array, g: &Array) -> Result<Array> {
    let d = p.spatial();
    let groups = p.groups;
    let mut hi = Vec::with_capacity(d);
    for i in 0..d {
        let reach = dilated(w.shape()[i + 1], p.kernel_dilation[i]) as isize;
        let extent = dilated(x.shape()[i + 1], p.input_dilation[i]) as isize;
        let spread = dilated(g.shape()[i + 1], p.strides[i]) as isize;
        // Exactly K outputs, stepping by the kernel dilation.
        hi.push(reach - 1 + spread - extent - p.padding_lo[i]);
    }
    let nd = x.ndim();
    let cg = x.shape()[nd - 1] / groups;
    if cg == 1 && w.shape()[0] == groups {
        return depthwise_weight_cotangent(p, x, g, &hi);
    }
    // [N, S.., C_in] -> [N, S.., G, Cg] -> [Cg, S.., G, N] -> [Cg, S.., G·N].
    let split = crate::reshape(x, &split_axis(x.shape(), nd - 1, &[groups, cg]))?;
    let swapped = crate::swapaxes(&split, 0, nd as isize)?;
    let xt = crate::reshape(&swapped, &merge_axes(swapped.shape(), nd - 1))?;
    // [N, O.., C_out] -> [C_out, O.., N].
    let gt = crate::swapaxes(g, 0, -1)?;
    let mut out = crate::conv_general(
        &xt,
        &gt,
        &p.kernel_dilation,
        &p.padding_lo,
        &hi,
        &p.strides,
        &p.input_dilation,
        groups,
        false,
    )?;
    if p.flip {
        let spatial: Vec<isize> = (1..=d as isize).collect();
        out = crate::flip(&out, &spatial)?;
    }
    // [Cg, K.., C_out] -> [C_out, K.., Cg].
    crate::swapaxes(&out, 0, -1)
}

/// [`weight_cotangent`] of a depthwise convolution, kept depthwise: each (example, channel)
/// pair correlates its input with its cotangent alone, and the examples are summed after.
/// (The general form would make the batch the channels of a group, and run one small
/// product per channel.)
fn depthwise_weight_cotangent(p: &ConvOp, x: &Array, g: &Array, hi: &[isize]) -> Result<Array> {
    let d = p.spatial();
    let nd = x.ndim();
    let (n, c) = (x.shape()[0], x.shape()[nd - 1]);
    let move_axis = crate::transforms::move_axis;
    // [N, S.., C] -> [S.., N, C] -> [1, S.., N·C].
    let mut shape = vec![1];
    shape.extend(dims(&x.shape()[1..=d]));
    shape.push((n * c) as isize);
    let xt = crate::reshape(&move_axis(x, 0, d)?, &shape)?;
    // [N, O.., C] -> [N, C, O..] -> [N·C, O.., 1].
    let mut shape = vec![(n * c) as isize];
    shape.extend(dims(&g.shape()[1..=d]));
    shape.push(1);
    let gt = crate::reshape(&move_axis(g, nd - 1, 1)?, &shape)?;
    let out = crate::conv_general(
        &xt,
        &gt,
        &p.kernel_dilation,
        &p.padding_lo,
        hi,
        &p.strides,
        &p.input_dilation,
        n * c,
        false,
    )?;
    // [1, K.., N·C] -> [K.., N, C] -> [K.., C], summed in at least single precision.
    let mut shape = dims(&out.shape()[1..=d]);
    shape.extend([n as isize, c as isize]);
    let per_example = crate::reshape(&out, &shape)?;
    let dtype = per_example.dtype();
    let wide = if dtype.size() < 4 {
        per_example.astype(crate::DType::F32)?
    } else {
        per_example
    };
    let mut out = crate::sum(&wide, &[d as isize], false)?.astype(dtype)?;
    if p.flip {
        let spatial: Vec<isize> = (0..d as isize).collect();
        out = crate::flip(&out, &spatial)?;
    }
    // [K.., C] -> [C, K.., 1].
    crate::expand_dims(&move_axis(&out, d, 0)?, -1)
}

pub(super) fn jvp(p: &ConvOp, inputs: &[Array], tangents: &[Option<Array>]) -> Result<Vec<Array>> {
    let (x, w) = (&inputs[0], &inputs[1]);
    let parts = [
        tangents[0]
            .as_ref()
            .map(|tx| conv(p, tx, w, p.groups))
            .transpose()?,
        tangents[1]
            .as_ref()
            .map(|tw| conv(p, x, tw, p.groups))
            .transpose()?,
    ];
    let out = match parts {
        [Some(a), Some(b)] => crate::add(&a, &b)?,
        [Some(a), None] | [None, Some(a)] => a,
        [None, None] => {
            let shape = p.out_shape("conv_general", x.shape(), w.shape())?;
            crate::zeros(&shape, x.dtype())?
        }
    };
    Ok(vec![out])
}

pub(super) fn vmap(p: &ConvOp, inputs: &[Array], axes: &[Option<usize>]) -> Result<Batched> {
    let (x, w) = (&inputs[0], &inputs[1]);
    let d = p.spatial();
    let groups = p.groups;
    let move_axis = crate::transforms::move_axis;
    match (axes[0], axes[1]) {
        (None, None) => Ok((vec![conv(p, x, w, groups)?], vec![None])),
        (Some(ax), None) => {
            // The batch joins N.
            let xb = move_axis(x, ax, 0)?;
            let b = xb.shape()[0];
            let folded = crate::reshape(&xb, &merge_axes(xb.shape(), 0))?;
            let out = conv(p, &folded, w, groups)?;
            let n = xb.shape()[1];
            let out = crate::reshape(&out, &split_axis(out.shape(), 0, &[b, n]))?;
            Ok((vec![out], vec![Some(0)]))
        }
        (None, Some(aw)) => {
            // The batch joins the output channels, inside each group so that every group
            // keeps its own input channels: [B, G·Og, ..] -> [G, B, Og, ..] -> [G·B·Og, ..].
            let wb = move_axis(w, aw, 0)?;
            let (b, c_out) = (wb.shape()[0], wb.shape()[1]);
            let og = c_out / groups;
            let split = crate::reshape(&wb, &split_axis(wb.shape(), 1, &[groups, og]))?;
            let grouped = crate::swapaxes(&split, 0, 1)?;
            let merged = crate::reshape(&grouped, &merge_axes(grouped.shape(), 0))?;
            let folded = crate::reshape(&merged, &merge_axes(merged.shape(), 0))?;
            let out = conv(p, x, &folded, groups)?;
            // [N, O.., G·B·Og] -> [N, O.., G, B, Og] -> [N, O.., B, G, Og] -> [N, O.., B, C_out].
            let last = d + 1;
            let split = crate::reshape(&out, &split_axis(out.shape(), last, &[groups, b, og]))?;
            let swapped = crate::swapaxes(&split, last as isize, last as isize + 1)?;
            let out = crate::reshape(&swapped, &merge_axes(swapped.shape(), last + 1))?;
            Ok((vec![out], vec![Some(last)]))
        }
        (Some(ax), Some(aw)) => {
            // Each example its own set of groups: the batch joins the input channels (in
            // front of them) and the output channels, and the groups multiply by B.
            let last = d + 1;
            let xb = move_axis(x, ax, last)?;
            let b = xb.shape()[last];
            let xf = crate::reshape(&xb, &merge_axes(xb.shape(), last))?;
            let wb = move_axis(w, aw, 0)?;
            let c_out = wb.shape()[1];
            let wf = crate::reshape(&wb, &merge_axes(wb.shape(), 0))?;
            let out = conv(p, &xf, &wf, groups * b)?;
            let out = crate::reshape(&out, &split_axis(out.shape(), last, &[b, c_out]))?;
            Ok((vec![out], vec![Some(last)]))
        }
    }
}
