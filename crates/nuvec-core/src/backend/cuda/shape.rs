//! Shape primitives on the GPU. Views (transpose, broadcast, slices, splits, diagonals, and
//! reshapes that strides allow) only rewrite the layout, exactly as on the CPU, so they share
//! the CPU backend's code; where a row-major copy is needed, the GPU makes it first. Joins
//! (`concatenate`, `pad`) copy each input into its place in the output with the strided
//! copy of the indexing kernels. Left to the CPU bridge (`Ok(None)`): complex elements and
//! views whose axes do not merge into at most eight.

use super::Place;
use super::elementwise::{Strided, convert, type_names};
use super::index::{fill, update_into};
use crate::Result;
use crate::array::{ArrayData, Layout, row_major_strides};
use crate::backend::cpu::shape::reshaped_strides;
use crate::ops::index::ScatterMode;
use crate::ops::shape::ShapeOp;
use crate::primitive::OutputSpec;

/// A shape primitive on the GPU, or `None` where it runs on the host (see the module doc).
pub(crate) fn eval(
    place: &Place,
    op: &ShapeOp,
    inputs: &mut [ArrayData],
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    match op {
        ShapeOp::Concatenate(axis) => {
            return Ok(concatenate(place, inputs, *axis, &outputs[0].0)?.map(|d| vec![d]));
        }
        ShapeOp::Pad(widths) => {
            return Ok(pad(place, inputs, widths, &outputs[0].0)?.map(|d| vec![d]));
        }
        _ => {}
    }
    let x = &inputs[0];
    let contiguous = x.layout.is_row_contiguous();
    let copy_first = match op {
        ShapeOp::Reshape(shape) => reshaped_strides(&x.layout, shape).is_none(),
        ShapeOp::Contiguous | ShapeOp::AsStrided { .. } => !contiguous,
        ShapeOp::Copy => !(contiguous && x.is_donatable()),
        _ => false,
    };
    if copy_first {
        let Some(copy) = convert(place, x, x.dtype())? else {
            return Ok(None);
        };
        inputs[0] = copy;
    }
    // Only layouts change from here on: the CPU backend's code never reads the elements.
    crate::backend::cpu::shape::eval(op, inputs, outputs).map(Some)
}

/// The view of `x`'s elements placed at element `offset` of a
/// row-major output with `strides`, and the input's own view; `None` past eight axes.
fn placed(x: &ArrayData, strides: &[isize], offset: usize) -> Option<(Strided, Strided)> {
    let dst = Layout {
        shape: x.layout.shape.clone(),
        strides: strides.to_vec(),
        offset,
    };
    Some((Strided::of(&dst).ok()?, Strided::of(&x.layout).ok()?))
}

/// Inputs of one type joined along `axis` into a new row-major array of `shape`.
fn concatenate(
    place: &Place,
    inputs: &[ArrayData],
    axis: usize,
    shape: &[usize],
) -> Result<Option<ArrayData>> {
    let dtype = inputs[0].dtype();
    if type_names(dtype).is_none() {
        return Ok(None);
    }
    let strides = row_major_strides(shape);
    let mut parts = Vec::with_capacity(inputs.len());
    let mut at = 0usize;
    for x in inputs {
        let Some(views) = placed(x, &strides, at * strides[axis] as usize) else {
            return Ok(None);
        };
        parts.push(views);
        at += x.layout.shape[axis];
    }
    let (out, out_ptr) = place.output(dtype, shape)?;
    for (x, (dv, sv)) in inputs.iter().zip(&parts) {
        let n = x.layout.size();
        update_into(place, out_ptr, dv, x, sv, n, ScatterMode::Replace)?;
    }
    Ok(Some(out))
}

/// `(x, value)`: `x` surrounded by copies of the one-element `value`, as a new row-major
/// array of `shape`: the value everywhere, then `x` copied into the interior.
fn pad(
    place: &Place,
    inputs: &[ArrayData],
    widths: &[(usize, usize)],
    shape: &[usize],
) -> Result<Option<ArrayData>> {
    let (x, value) = (&inputs[0], &inputs[1]);
    if type_names(x.dtype()).is_none() {
        return Ok(None);
    }
    let strides = row_major_strides(shape);
    let offset: usize = widths
        .iter()
        .zip(&strides)
        .map(|(&(before, _), &st)| before * st as usize)
        .sum();
    let Some((dv, sv)) = placed(x, &strides, offset) else {
        return Ok(None);
    };
    let (out, out_ptr) = place.output(x.dtype(), shape)?;
    let n: usize = shape.iter().product();
    if x.layout.size() < n {
        fill(place, out_ptr, n, value)?;
    }
    update_into(
        place,
        out_ptr,
        &dv,
        x,
        &sv,
        x.layout.size(),
        ScatterMode::Replace,
    )?;
    Ok(Some(out))
}
