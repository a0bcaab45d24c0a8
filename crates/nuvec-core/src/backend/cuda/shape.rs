//! Shape primitives on the GPU. Views (transpose, broadcast, slices, splits, diagonals, and
//! reshapes that strides allow) only rewrite the layout, exactly as on the CPU, so they share
//! the CPU backend's code; where a row-major copy is needed, the GPU makes it first.

use super::Place;
use super::elementwise::convert;
use crate::Result;
use crate::array::ArrayData;
use crate::backend::cpu::shape::reshaped_strides;
use crate::ops::shape::ShapeOp;
use crate::primitive::OutputSpec;

/// A shape primitive on the GPU, or `None` where it runs on the host (joins).
pub(crate) fn eval(
    place: &Place,
    op: &ShapeOp,
    inputs: &mut [ArrayData],
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    if matches!(op, ShapeOp::Concatenate(_) | ShapeOp::Pad(_)) {
        return Ok(None);
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
