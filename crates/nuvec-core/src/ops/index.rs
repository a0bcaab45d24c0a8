//! Indexing: slices, `slice_update`, `take`, gathers and scatters.

use crate::primitive::OutputSpec;
use crate::{Array, Result, error::invalid};

/// The indexing primitives.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum IndexOp {}

impl IndexOp {
    /// The primitive's name.
    pub fn name(&self) -> &'static str {
        match *self {}
    }

    /// The outputs' shapes and types.
    pub fn output_specs(&self, _inputs: &[Array]) -> Result<Vec<OutputSpec>> {
        Err(invalid(self.name(), "no indexing primitive yet"))
    }
}
