//! The transforms' cases, `vjp_chain` (reverse-mode cost as a ratio to the forward pass) and
//! `vmap_mlp` (a vmapped MLP as a ratio to the hand-batched call). Both wait for the
//! transforms issue, which defines their graphs.

use crate::case::{Case, Target, Unit, unavailable};

/// The CPU cases of this family.
pub fn cpu() -> Vec<Case> {
    vec![
        Case::new(
            "vjp_chain",
            Target::Cpu,
            "defined by the transforms issue",
            "f32",
            Unit::Ratio,
            10,
            || unavailable("vjp (the transforms issue, which also defines the case)"),
        ),
        Case::new(
            "vmap_mlp",
            Target::Cpu,
            "defined by the transforms issue",
            "f32",
            Unit::Ratio,
            10,
            || unavailable("vmap (the transforms issue, which also defines the case)"),
        ),
    ]
}
