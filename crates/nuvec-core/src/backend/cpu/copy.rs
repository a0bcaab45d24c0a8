//! Copies that change layout: any strided view to row-major.

use crate::array::ArrayData;
use crate::dtype::Element;

/// The elements of `x` in a new row-major buffer.
pub(crate) fn to_contiguous(x: &ArrayData) -> ArrayData {
    crate::with_host!(x.buffer.host(), src, T => copy_typed::<T>(src, x))
}

fn copy_typed<T: Element>(src: &[T], x: &ArrayData) -> ArrayData {
    let _ = src;
    super::elementwise::map::<T, T>(x, "copy", |v| v).expect("the buffer holds T")
}

/// `x` itself when row-major, else a row-major copy.
pub(crate) fn to_contiguous_shared(x: &ArrayData) -> ArrayData {
    if x.layout.is_row_contiguous() {
        x.clone()
    } else {
        to_contiguous(x)
    }
}
