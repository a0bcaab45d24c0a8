//! [`HostData`]: an array's elements on the host, one typed vector per element type, and
//! `with_host!`, which runs code over the vector with its element type.

use super::{Complex64, DType, Element, bf16, f16};
use crate::{Error, Result};

/// Elements on the host, one vector per element type.
#[derive(Debug, Clone, PartialEq)]
pub enum HostData {
    /// `bool`
    Bool(Vec<bool>),
    /// `u8`
    U8(Vec<u8>),
    /// `u16`
    U16(Vec<u16>),
    /// `u32`
    U32(Vec<u32>),
    /// `u64`
    U64(Vec<u64>),
    /// `i8`
    I8(Vec<i8>),
    /// `i16`
    I16(Vec<i16>),
    /// `i32`
    I32(Vec<i32>),
    /// `i64`
    I64(Vec<i64>),
    /// `f16`
    F16(Vec<f16>),
    /// `bf16`
    BF16(Vec<bf16>),
    /// `f32`
    F32(Vec<f32>),
    /// `f64`
    F64(Vec<f64>),
    /// `complex64`
    C64(Vec<Complex64>),
}

/// Runs `$body` with `$v` bound to the typed vector inside host data, and `$T` to its element
/// type: the one place a kernel's element type is chosen from the data.
#[macro_export]
#[doc(hidden)]
macro_rules! with_host {
    ($data:expr, $v:ident, $T:ident => $body:expr) => {{
        use $crate::dtype::HostData as H;
        #[allow(unused_imports)]
        use $crate::dtype::{Complex64, bf16, f16};
        match $data {
            H::Bool($v) => {
                type $T = bool;
                $body
            }
            H::U8($v) => {
                type $T = u8;
                $body
            }
            H::U16($v) => {
                type $T = u16;
                $body
            }
            H::U32($v) => {
                type $T = u32;
                $body
            }
            H::U64($v) => {
                type $T = u64;
                $body
            }
            H::I8($v) => {
                type $T = i8;
                $body
            }
            H::I16($v) => {
                type $T = i16;
                $body
            }
            H::I32($v) => {
                type $T = i32;
                $body
            }
            H::I64($v) => {
                type $T = i64;
                $body
            }
            H::F16($v) => {
                type $T = f16;
                $body
            }
            H::BF16($v) => {
                type $T = bf16;
                $body
            }
            H::F32($v) => {
                type $T = f32;
                $body
            }
            H::F64($v) => {
                type $T = f64;
                $body
            }
            H::C64($v) => {
                type $T = Complex64;
                $body
            }
        }
    }};
}

impl HostData {
    /// The element type held.
    pub fn dtype(&self) -> DType {
        crate::with_host!(self, _v, T => <T as Element>::DTYPE)
    }

    /// The number of elements held.
    pub fn len(&self) -> usize {
        crate::with_host!(self, v, _T => v.len())
    }

    /// Whether no element is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `n` default (zero) elements of `dtype`.
    pub fn zeros(dtype: DType, n: usize) -> HostData {
        crate::with_dtype!(dtype, T => T::into_host(vec![T::default(); n]))
    }

    /// The typed elements, or an error naming `op` if they are not of type `T`.
    pub fn typed<T: Element>(&self, op: &'static str) -> Result<&[T]> {
        T::host_slice(self).ok_or(Error::DTypeMismatch {
            op,
            dtype: self.dtype(),
            requested: T::DTYPE,
        })
    }
}
