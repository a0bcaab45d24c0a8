//! Linear algebra: `matmul`, `addmm`, `outer`, `inner`, `tensordot`.

use crate::primitive::OutputSpec;
use crate::{Array, Result, error::invalid};

/// The matrix-product primitives.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum MatmulOp {}

impl MatmulOp {
    /// The primitive's name.
    pub fn name(&self) -> &'static str {
        match *self {}
    }

    /// The output's shape and type.
    pub fn output_specs(&self, _inputs: &[Array]) -> Result<Vec<OutputSpec>> {
        Err(invalid(self.name(), "no matmul primitive yet"))
    }
}
