//! Rust's arithmetic operators on arrays. An operator cannot return a `Result`: a failure
//! becomes an array in an error state (see [`Array::error`]) that the next operation or
//! evaluation reports.

use std::ops::{Add, BitAnd, BitOr, BitXor, Div, Mul, Neg, Not, Rem, Sub};

use super::{Array, Operand};
use crate::dtype::{bf16, f16};

fn or_error(r: crate::Result<Array>) -> Array {
    r.unwrap_or_else(Array::from_error)
}

macro_rules! binary_operator {
    ($trait:ident, $method:ident, $op:path) => {
        impl<R: Into<Operand>> $trait<R> for Array {
            type Output = Array;
            fn $method(self, rhs: R) -> Array {
                or_error($op(self, rhs))
            }
        }
        impl<R: Into<Operand>> $trait<R> for &Array {
            type Output = Array;
            fn $method(self, rhs: R) -> Array {
                or_error($op(self, rhs))
            }
        }
        binary_operator!(@scalars $trait, $method, $op, f32, f64, f16, bf16, i8, i16, i32, i64, u8, u16, u32, u64);
    };
    (@scalars $trait:ident, $method:ident, $op:path, $($t:ty),*) => {$(
        impl $trait<Array> for $t {
            type Output = Array;
            fn $method(self, rhs: Array) -> Array {
                or_error($op(self, rhs))
            }
        }
        impl $trait<&Array> for $t {
            type Output = Array;
            fn $method(self, rhs: &Array) -> Array {
                or_error($op(self, rhs))
            }
        }
    )*};
}

binary_operator!(Add, add, crate::ops::add);
binary_operator!(Sub, sub, crate::ops::subtract);
binary_operator!(Mul, mul, crate::ops::multiply);
binary_operator!(Div, div, crate::ops::divide);
binary_operator!(Rem, rem, crate::ops::remainder);
binary_operator!(BitAnd, bitand, crate::ops::bitwise_and);
binary_operator!(BitOr, bitor, crate::ops::bitwise_or);
binary_operator!(BitXor, bitxor, crate::ops::bitwise_xor);

impl Neg for Array {
    type Output = Array;
    fn neg(self) -> Array {
        or_error(crate::ops::negative(&self))
    }
}

impl Neg for &Array {
    type Output = Array;
    fn neg(self) -> Array {
        or_error(crate::ops::negative(self))
    }
}

impl Not for Array {
    type Output = Array;
    /// Logical not for booleans, bitwise not for integers.
    fn not(self) -> Array {
        !&self
    }
}

impl Not for &Array {
    type Output = Array;
    fn not(self) -> Array {
        or_error(if self.dtype() == crate::DType::Bool {
            crate::ops::logical_not(self)
        } else {
            crate::ops::bitwise_invert(self)
        })
    }
}
