//! The index primitives on the CPU.

use crate::Result;
use crate::array::ArrayData;
use crate::ops::index::IndexOp;
use crate::primitive::OutputSpec;

/// Computes a index primitive.
pub(crate) fn eval(
    op: &IndexOp,
    _inputs: &mut [ArrayData],
    _outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    match *op {}
}
