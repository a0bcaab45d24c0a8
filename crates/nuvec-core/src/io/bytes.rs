//! Elements to and from bytes, in either byte order, shared by every format.

use std::io::Write;

use crate::dtype::{Complex64, Element, HostData, bf16, f16};
use crate::{Array, DType};

/// An element type with a fixed-size byte representation.
pub(crate) trait Bytes: Element {
    /// Bytes per element.
    const SIZE: usize;
    /// The element in `b` (exactly [`Bytes::SIZE`] bytes), little or big endian.
    fn read(b: &[u8], little: bool) -> Self;
    /// Appends the element's little-endian bytes to `out`.
    fn write_le(self, out: &mut Vec<u8>);
}

macro_rules! bytes_num {
    ($($t:ty),*) => {$(
        impl Bytes for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            #[inline]
            fn read(b: &[u8], little: bool) -> Self {
                let mut raw = [0u8; std::mem::size_of::<$t>()];
                raw.copy_from_slice(b);
                if little { <$t>::from_le_bytes(raw) } else { <$t>::from_be_bytes(raw) }
            }
            #[inline]
            fn write_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}

bytes_num!(u8, u16, u32, u64, i8, i16, i32, i64, f16, bf16, f32, f64);

impl Bytes for bool {
    const SIZE: usize = 1;
    #[inline]
    fn read(b: &[u8], _little: bool) -> Self {
        b[0] != 0
    }
    #[inline]
    fn write_le(self, out: &mut Vec<u8>) {
        out.push(u8::from(self));
    }
}

impl Bytes for Complex64 {
    const SIZE: usize = 8;
    #[inline]
    fn read(b: &[u8], little: bool) -> Self {
        Complex64::new(f32::read(&b[..4], little), f32::read(&b[4..], little))
    }
    #[inline]
    fn write_le(self, out: &mut Vec<u8>) {
        self.re.write_le(out);
        self.im.write_le(out);
    }
}

/// The elements of `dtype` in `bytes`, whose length must be a multiple of the element size
/// (callers check it against the shape first).
pub(crate) fn decode(dtype: DType, bytes: &[u8], little: bool) -> HostData {
    fn typed<T: Bytes>(bytes: &[u8], little: bool) -> HostData {
        let v: Vec<T> = bytes
            .chunks_exact(T::SIZE)
            .map(|c| T::read(c, little))
            .collect();
        T::into_host(v)
    }
    crate::with_dtype!(dtype, T => typed::<T>(bytes, little))
}

/// The elements of `array` in row-major order, as host data (evaluating it first).
pub(crate) fn host_elements(array: &Array) -> crate::Result<HostData> {
    crate::with_dtype!(array.dtype(), T => Ok(T::into_host(array.to_vec::<T>()?)))
}

/// Elements encoded per write, so that writing a large array needs little extra memory.
const CHUNK: usize = 1 << 16;

/// Writes the elements of `data` to `w` little endian, in chunks.
pub(crate) fn write_le<W: Write>(w: &mut W, data: &HostData) -> std::io::Result<()> {
    fn typed<T: Bytes, W: Write>(w: &mut W, v: &[T]) -> std::io::Result<()> {
        let mut buf = Vec::with_capacity(CHUNK.min(v.len()) * T::SIZE);
        for chunk in v.chunks(CHUNK) {
            buf.clear();
            for &x in chunk {
                x.write_le(&mut buf);
            }
            w.write_all(&buf)?;
        }
        Ok(())
    }
    crate::with_host!(data, v, T => typed::<T, W>(w, v))
}

/// The little-endian bytes of the elements of `data`.
pub(crate) fn to_le_bytes(data: &HostData) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() * data.dtype().size());
    // Writing to a vector cannot fail.
    let _ = write_le(&mut out, data);
    out
}

/// The number of elements of `shape`, if it fits in `usize`.
pub(crate) fn element_count(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

/// The number of bytes of `shape` elements of `dtype`, if it fits in `usize`.
pub(crate) fn byte_count(shape: &[usize], dtype: DType) -> Option<usize> {
    element_count(shape)?.checked_mul(dtype.size())
}
