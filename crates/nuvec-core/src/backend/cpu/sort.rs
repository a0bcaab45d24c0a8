//! The sort primitives on the CPU.

use crate::Result;
use crate::array::ArrayData;
use crate::ops::sort::SortOp;
use crate::primitive::OutputSpec;

/// Computes a sort primitive.
pub(crate) fn eval(
    op: &SortOp,
    _inputs: &mut [ArrayData],
    _outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    match *op {}
}
