//! Sorting: `sort`, `argsort`, `partition`, `argpartition`, `topk`.

use crate::primitive::OutputSpec;
use crate::{Array, Result, error::invalid};

/// The sorting primitives.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SortOp {}

impl SortOp {
    /// The primitive's name.
    pub fn name(&self) -> &'static str {
        match *self {}
    }

    /// The outputs' shapes and types.
    pub fn output_specs(&self, _inputs: &[Array]) -> Result<Vec<OutputSpec>> {
        Err(invalid(self.name(), "no sort primitive yet"))
    }
}
