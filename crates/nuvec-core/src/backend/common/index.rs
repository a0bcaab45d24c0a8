//! Index arithmetic the CPU and CUDA scatters share.

use crate::array::row_major_strides;

/// The region of a row-major array of `shape` that a slice update from `start` by `step`
/// writes: the buffer position of its first element and its strides (one per axis).
pub(crate) fn slice_region(
    shape: &[usize],
    start: &[usize],
    step: &[isize],
) -> (usize, Vec<isize>) {
    let strides = row_major_strides(shape);
    let offset: isize = start
        .iter()
        .zip(&strides)
        .map(|(&s, &st)| s as isize * st)
        .sum();
    let region = step.iter().zip(&strides).map(|(a, b)| a * b).collect();
    (offset as usize, region)
}
