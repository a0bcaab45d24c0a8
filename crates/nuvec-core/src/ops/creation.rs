//! Creating arrays: `zeros`, `ones`, `full`, `arange`, `linspace`, `eye`, `tri`, ...

use crate::primitive::OutputSpec;
use crate::{Array, DType, Result, error::invalid};

/// The primitives that compute arrays from nothing.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CreationOp {
    /// `start + i · step` for `i` in `0..n`, in `dtype`.
    Arange {
        /// The first value.
        start: f64,
        /// The difference between neighbours.
        step: f64,
        /// How many values.
        n: usize,
        /// The element type.
        dtype: DType,
    },
}

impl CreationOp {
    /// The primitive's name.
    pub fn name(&self) -> &'static str {
        match self {
            CreationOp::Arange { .. } => "arange",
        }
    }

    /// The output's shape and type.
    pub fn output_specs(&self, inputs: &[Array]) -> Result<Vec<OutputSpec>> {
        if !inputs.is_empty() {
            return Err(invalid(self.name(), "takes no inputs"));
        }
        match self {
            CreationOp::Arange { n, dtype, .. } => Ok(vec![(vec![*n], *dtype)]),
        }
    }
}

/// An array of `shape` filled with `value` converted to `dtype` (a view of one element until
/// something writes it).
pub fn full(shape: &[usize], value: impl Into<crate::Operand>, dtype: DType) -> Result<Array> {
    let value = value.into().to_array(dtype)?;
    crate::broadcast_to(&value, shape)
}

/// Zeros of `shape` and `dtype`.
pub fn zeros(shape: &[usize], dtype: DType) -> Result<Array> {
    full(shape, 0, dtype)
}

/// Ones of `shape` and `dtype`.
pub fn ones(shape: &[usize], dtype: DType) -> Result<Array> {
    full(shape, 1, dtype)
}

/// Zeros of `a`'s shape and type.
pub fn zeros_like(a: &Array) -> Result<Array> {
    crate::ops::check_errors(&[a])?;
    zeros(a.shape(), a.dtype())
}

/// Ones of `a`'s shape and type.
pub fn ones_like(a: &Array) -> Result<Array> {
    crate::ops::check_errors(&[a])?;
    ones(a.shape(), a.dtype())
}

/// `value` in `a`'s shape and type.
pub fn full_like(a: &Array, value: impl Into<crate::Operand>) -> Result<Array> {
    crate::ops::check_errors(&[a])?;
    full(a.shape(), value, a.dtype())
}
