//! [`Operand`]: what an argument that takes an array also takes (an array, a reference to
//! one, or a Rust scalar), and the weak typing of scalars.

use super::Array;
use crate::dtype::{Canon, bf16, f16};
use crate::{DType, Result, promote_types};

/// A Rust scalar given where an array is expected. Scalars are weakly typed, as in MLX: they
/// take the other operand's type (a float scalar with an integer array gives `float32`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    /// `true` or `false`.
    Bool(bool),
    /// Any Rust integer.
    Int(i128),
    /// Any Rust float.
    Float(f64),
}

impl Scalar {
    /// The scalar's value.
    pub fn canon(self) -> Canon {
        match self {
            Scalar::Bool(b) => Canon::Bool(b),
            Scalar::Int(i) => Canon::Int(i),
            Scalar::Float(f) => Canon::Float(f),
        }
    }

    /// The type this scalar gives next to an array of type `dtype`.
    pub fn with(self, dtype: DType) -> DType {
        match self {
            Scalar::Bool(_) => dtype,
            Scalar::Int(_) if dtype == DType::Bool => DType::I32,
            Scalar::Int(_) => dtype,
            Scalar::Float(_) if dtype.is_inexact() => dtype,
            Scalar::Float(_) => DType::F32,
        }
    }

    /// The type of the scalar alone: `bool`, `int32` or `float32`.
    pub fn default_dtype(self) -> DType {
        match self {
            Scalar::Bool(_) => DType::Bool,
            Scalar::Int(_) => DType::I32,
            Scalar::Float(_) => DType::F32,
        }
    }
}

/// An argument that is an array or a weakly typed Rust scalar.
#[derive(Clone)]
pub enum Operand {
    /// An array (its type is strong).
    Array(Array),
    /// A Rust scalar (its type is weak).
    Scalar(Scalar),
}

impl Operand {
    /// The element type this operand has alone.
    pub fn dtype(&self) -> DType {
        match self {
            Operand::Array(a) => a.dtype(),
            Operand::Scalar(s) => s.default_dtype(),
        }
    }

    /// The operand as an array of type `dtype` (a scalar becomes a 0-D array).
    pub fn to_array(&self, dtype: DType) -> Result<Array> {
        match self {
            Operand::Array(a) if a.dtype() == dtype => Ok(a.clone()),
            Operand::Array(a) => crate::ops::astype(a, dtype),
            Operand::Scalar(s) => Ok(Array::scalar_of(s.canon(), dtype)),
        }
    }

    /// The operand as an array of its own type.
    pub fn into_array(self) -> Array {
        match self {
            Operand::Array(a) => a,
            Operand::Scalar(s) => Array::scalar_of(s.canon(), s.default_dtype()),
        }
    }
}

/// An operand given its type: an array converted to it, or a scalar not made an array yet, so
/// that it can become a constant of the shape it meets (with no broadcast node).
pub(crate) enum Typed {
    /// An array of the type.
    Array(Array),
    /// A scalar's value and the type it takes.
    Scalar(Canon, DType),
}

impl Typed {
    /// The shape (a scalar's is `[]`).
    pub(crate) fn shape(&self) -> &[usize] {
        match self {
            Typed::Array(a) => a.shape(),
            Typed::Scalar(..) => &[],
        }
    }

    /// The operand broadcast to `shape` (which its shape must broadcast to).
    pub(crate) fn broadcast(&self, shape: &[usize]) -> Result<Array> {
        match self {
            Typed::Array(a) => crate::ops::broadcast_to(a, shape),
            Typed::Scalar(value, dtype) => Ok(Array::constant(*value, *dtype, shape)),
        }
    }
}

impl Operand {
    /// The operand converted to `dtype`; a scalar stays a value (see [`Typed`]).
    pub(crate) fn typed(&self, dtype: DType) -> Result<Typed> {
        match self {
            Operand::Scalar(s) => Ok(Typed::Scalar(s.canon(), dtype)),
            array => array.to_array(dtype).map(Typed::Array),
        }
    }
}

/// The common type of operands, scalars weakly typed: the promoted type of the arrays, which
/// each scalar may widen from integer to float (or bool to integer).
pub fn result_type(operands: &[&Operand]) -> DType {
    let mut strong: Option<DType> = None;
    for op in operands {
        if let Operand::Array(a) = op {
            strong = Some(match strong {
                Some(d) => promote_types(d, a.dtype()),
                None => a.dtype(),
            });
        }
    }
    let scalars = operands.iter().filter_map(|op| match op {
        Operand::Scalar(s) => Some(*s),
        Operand::Array(_) => None,
    });
    match strong {
        Some(mut d) => {
            for s in scalars {
                d = s.with(d);
            }
            d
        }
        None => {
            let mut d = DType::Bool;
            for s in scalars {
                d = promote_types(d, s.default_dtype());
            }
            d
        }
    }
}

/// Both operands as arrays of their common type (see [`result_type`]).
pub fn promote_pair(a: &Operand, b: &Operand) -> Result<(Array, Array)> {
    let dtype = result_type(&[a, b]);
    Ok((a.to_array(dtype)?, b.to_array(dtype)?))
}

impl From<Array> for Operand {
    fn from(a: Array) -> Operand {
        Operand::Array(a)
    }
}

impl From<&Array> for Operand {
    fn from(a: &Array) -> Operand {
        Operand::Array(a.clone())
    }
}

impl From<&&Array> for Operand {
    fn from(a: &&Array) -> Operand {
        Operand::Array((*a).clone())
    }
}

impl From<&Operand> for Operand {
    fn from(a: &Operand) -> Operand {
        a.clone()
    }
}

impl From<bool> for Operand {
    fn from(v: bool) -> Operand {
        Operand::Scalar(Scalar::Bool(v))
    }
}

macro_rules! int_operand {
    ($($t:ty),*) => {$(
        impl From<$t> for Operand {
            fn from(v: $t) -> Operand {
                Operand::Scalar(Scalar::Int(v as i128))
            }
        }
    )*};
}
int_operand!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);

impl From<f32> for Operand {
    fn from(v: f32) -> Operand {
        Operand::Scalar(Scalar::Float(f64::from(v)))
    }
}

impl From<f64> for Operand {
    fn from(v: f64) -> Operand {
        Operand::Scalar(Scalar::Float(v))
    }
}

impl From<f16> for Operand {
    fn from(v: f16) -> Operand {
        Operand::Scalar(Scalar::Float(v.to_f64()))
    }
}

impl From<bf16> for Operand {
    fn from(v: bf16) -> Operand {
        Operand::Scalar(Scalar::Float(v.to_f64()))
    }
}
