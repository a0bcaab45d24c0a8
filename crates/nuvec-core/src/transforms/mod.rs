//! Transformations of computations: evaluation (the scheduler), reverse-mode derivatives
//! ([`vjp`], [`grad`], [`value_and_grad`]), forward mode ([`jvp`]), batching ([`vmap`]) and
//! functions with rules of their own ([`custom_function`], [`custom_vjp`]).
//!
//! The derivative and batching transforms trace the function: they call it on stand-ins for
//! its inputs, then walk the recorded graph and apply each primitive's rule (its `vjp`,
//! `jvp` or `vmap`). The rules build ordinary operations, so transforms nest.

mod custom;
mod eval;
mod graph;
mod jvp;
pub(crate) mod rules;
mod vjp;
mod vmap;

use std::cell::Cell;

pub use custom::{
    CustomFunction, CustomOp, Function, JvpFunction, VjpFunction, VmapFunction, custom_function,
    custom_vjp,
};
pub(crate) use custom::{jvp as custom_jvp, vjp as custom_vjp_rule, vmap as custom_vmap};
pub(crate) use eval::synchronize;
pub use eval::{async_eval, eval};
pub use jvp::jvp;
pub use vjp::{grad, value_and_grad, vjp};
pub(crate) use vmap::move_axis;
pub use vmap::vmap;

thread_local! {
    static TRACING: Cell<usize> = const { Cell::new(0) };
}

/// Whether a transform is tracing on this thread (evaluation then keeps graphs whole).
pub(crate) fn tracing() -> bool {
    TRACING.with(Cell::get) > 0
}

/// Marks this thread as tracing while it lives.
pub(crate) struct TraceGuard;

impl TraceGuard {
    pub(crate) fn new() -> TraceGuard {
        TRACING.with(|t| t.set(t.get() + 1));
        TraceGuard
    }
}

impl Drop for TraceGuard {
    fn drop(&mut self) {
        TRACING.with(|t| t.set(t.get() - 1));
    }
}
