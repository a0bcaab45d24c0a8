//! The random family's primitive: raw bits from threefry keys. The samplers built on it
//! (uniform, normal, ...) are ordinary operations in [`crate::random`].

use crate::error::invalid;
use crate::ops::expect_inputs;
use crate::primitive::OutputSpec;
use crate::{Array, DType, Result};

/// The primitives of the random family.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RandomOp {
    /// Random bits from a batch of threefry-2x32 keys (`uint32`, shape `[..., 2]`): the output
    /// has shape `shape`, whose leading axes are the key's batch axes; each key fills its own
    /// contiguous block of the rest with MLX's layout.
    Bits {
        /// The output's shape (the key's batch axes first).
        shape: Vec<usize>,
        /// Bytes per element: 1, 2 or 4 (`uint8`, `uint16`, `uint32`).
        width: usize,
    },
}

impl RandomOp {
    /// The primitive's name.
    pub fn name(&self) -> &'static str {
        match self {
            RandomOp::Bits { .. } => "random_bits",
        }
    }

    /// The output's shape and type: the key checked against the shape's batch axes.
    pub fn output_specs(&self, inputs: &[Array]) -> Result<Vec<OutputSpec>> {
        let op = self.name();
        expect_inputs(op, inputs, 1)?;
        match self {
            RandomOp::Bits { shape, width } => {
                let key = &inputs[0];
                let dtype = bits_dtype(op, *width)?;
                let nd = key.ndim();
                if key.dtype() != DType::U32 || nd == 0 || key.shape()[nd - 1] != 2 {
                    return Err(invalid(
                        op,
                        format!(
                            "expected uint32 keys of shape [..., 2], got {} of shape {:?}",
                            key.dtype(),
                            key.shape()
                        ),
                    ));
                }
                let batch = &key.shape()[..nd - 1];
                if !shape.starts_with(batch) {
                    return Err(invalid(
                        op,
                        format!("shape {shape:?} does not start with the key batch {batch:?}"),
                    ));
                }
                Ok(vec![(shape.clone(), dtype)])
            }
        }
    }
}

/// The unsigned type of `width`-byte random bits.
pub(crate) fn bits_dtype(op: &str, width: usize) -> Result<DType> {
    match width {
        1 => Ok(DType::U8),
        2 => Ok(DType::U16),
        4 => Ok(DType::U32),
        _ => Err(invalid(
            op,
            format!("the bit width must be 1, 2 or 4 bytes, got {width}"),
        )),
    }
}
