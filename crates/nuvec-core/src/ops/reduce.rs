//! Reductions (`sum`, `max`, `mean`, ...), arg-reductions and scans.

use crate::primitive::OutputSpec;
use crate::{Array, Result, error::invalid};

/// The reductions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReduceOp {}

impl ReduceOp {
    /// The primitive's name.
    pub fn name(&self) -> &'static str {
        match *self {}
    }

    /// The output's shape and type.
    pub fn output_specs(&self, _axes: &[usize], _inputs: &[Array]) -> Result<Vec<OutputSpec>> {
        Err(invalid(self.name(), "no reduction yet"))
    }
}

/// The arg-reductions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ArgReduceOp {}

impl ArgReduceOp {
    /// The primitive's name.
    pub fn name(&self) -> &'static str {
        match *self {}
    }

    /// The output's shape and type.
    pub fn output_specs(&self, _axis: usize, _inputs: &[Array]) -> Result<Vec<OutputSpec>> {
        Err(invalid(self.name(), "no arg-reduction yet"))
    }
}

/// The scans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ScanOp {}

impl ScanOp {
    /// The primitive's name.
    pub fn name(&self) -> &'static str {
        match *self {}
    }

    /// The output's shape and type.
    pub fn output_specs(&self, _axis: usize, _inputs: &[Array]) -> Result<Vec<OutputSpec>> {
        Err(invalid(self.name(), "no scan yet"))
    }
}

/// Whether every element is nonzero, over `axes` (every axis when empty).
pub fn all(a: &Array, axes: &[isize], keepdims: bool) -> Result<Array> {
    let _ = (axes, keepdims);
    Err(invalid(
        "all",
        format!("not yet available for {:?}", a.shape()),
    ))
}
