//! The transforms' cases, `vjp_chain` (reverse-mode cost as a ratio to the forward pass) and
//! `vmap_mlp` (a vmapped MLP as a ratio to the hand-batched call). `vjp` and `vmap` exist;
//! the cases wait for their graphs, which the transforms issue defines.

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
            || unavailable("the case's graph, which the transforms issue defines"),
        ),
        Case::new(
            "vmap_mlp",
            Target::Cpu,
            "defined by the transforms issue",
            "f32",
            Unit::Ratio,
            10,
            || unavailable("the case's graph, which the transforms issue defines"),
        ),
    ]
}
