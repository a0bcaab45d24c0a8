//! What the CPU and CUDA backends decide alike: the layout plan of a reduction, the rule
//! for writing an output over an input's buffer and the region of a slice update. Each backend adds its own kernel choices on
//! top.

pub(crate) mod donation;
pub(crate) mod index;
pub(crate) mod reduce_plan;
