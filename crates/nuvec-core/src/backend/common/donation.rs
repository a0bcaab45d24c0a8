//! Donation: an output written over an input's buffer in place instead of a new one. Both
//! backends decide it with [`donatable`]; each then reaches the elements its own way (the
//! host slice on the CPU, the device block on CUDA).

use std::sync::Arc;

use crate::DType;
use crate::array::{ArrayData, Buffer, HostData, Layout};

/// Whether the row-major output `(shape, dtype)` may be written over `input`'s buffer: this
/// evaluation holds the buffer alone (no other array, so nothing else can see the write),
/// the input is row-major from element 0 with no spare elements, and the output has its
/// type and its number of elements, at least one.
pub(crate) fn donatable(input: &mut ArrayData, (shape, dtype): (&[usize], DType)) -> bool {
    let n = input.layout.size();
    n > 0
        && shape.iter().product::<usize>() == n
        && dtype == input.dtype()
        && input.layout.offset == 0
        && input.layout.is_row_contiguous()
        && input.buffer.len() == n
        && Arc::get_mut(&mut input.buffer).is_some()
}

/// The buffer of a [`donatable`] input taken out as row-major data of the input's shape,
/// the output to write in place; the input is left holding an empty buffer, so that the
/// evaluation's last reference is the output's.
pub(crate) fn take_donated(input: &mut ArrayData) -> ArrayData {
    let empty = Arc::new(Buffer::from_host(HostData::Bool(Vec::new())));
    ArrayData {
        buffer: std::mem::replace(&mut input.buffer, empty),
        layout: Layout::contiguous(&input.layout.shape),
    }
}
