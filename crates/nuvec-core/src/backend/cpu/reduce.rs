//! Reductions, arg-reductions and scans on the CPU.

use crate::Result;
use crate::array::ArrayData;
use crate::ops::reduce::{ArgReduceOp, ReduceOp, ScanOp};
use crate::primitive::OutputSpec;

/// Computes a reduction.
pub(crate) fn eval(
    op: ReduceOp,
    _axes: &[usize],
    _inputs: &mut [ArrayData],
    _outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    match op {}
}

/// Computes an arg-reduction.
pub(crate) fn eval_arg(
    op: ArgReduceOp,
    _axis: usize,
    _inputs: &mut [ArrayData],
    _outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    match op {}
}

/// Computes a scan.
pub(crate) fn eval_scan(
    op: ScanOp,
    _axis: usize,
    _reverse: bool,
    _inclusive: bool,
    _inputs: &mut [ArrayData],
    _outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    match op {}
}
