//! Transformations of computations: evaluation (the scheduler), and later the derivatives and
//! batching.

mod eval;

pub(crate) use eval::synchronize;
pub use eval::{async_eval, eval};
