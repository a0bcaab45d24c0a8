//! Transformations of computations: reverse-mode derivatives ([`vjp`], [`grad`],
//! [`value_and_grad`]), forward mode ([`jvp`]), batching ([`vmap`]) and functions with rules
//! of their own ([`custom_function`], [`custom_vjp`]). Evaluation ([`eval`]) is re-exported
//! here from the scheduler below them.
//!
//! The derivative and batching transforms trace the function: they call it on stand-ins for
//! its inputs, then walk the recorded graph and apply each primitive's rule (its `vjp`,
//! `jvp` or `vmap`). The rules build ordinary operations, so transforms nest.

mod custom;
mod graph;
mod jvp;
pub(crate) mod rules;
mod vjp;
mod vmap;

pub(crate) use crate::scheduler::TraceGuard;
pub use crate::scheduler::{async_eval, eval};
pub use custom::{
    CustomFunction, CustomOp, Function, JvpFunction, VjpFunction, VmapFunction, custom_function,
    custom_vjp,
};
pub(crate) use custom::{jvp as custom_jvp, vjp as custom_vjp_rule, vmap as custom_vmap};
pub use jvp::jvp;
pub use vjp::{grad, value_and_grad, vjp};
pub(crate) use vmap::move_axis;
pub use vmap::vmap;
