//! The registry of cases, one module per family.

mod elementwise;
mod fast;
mod gpu;
mod linalg;
mod overhead;
mod quantized;
mod reduce;
mod train;
mod transforms;

use crate::case::{Case, Target};

/// Rows of the [1024, 4096] CPU cases.
pub(crate) const ROWS: usize = 1024;
/// Columns of the [1024, 4096] CPU cases.
pub(crate) const COLS: usize = 4096;
/// Elements of a [1024, 4096] array.
pub(crate) const N: usize = ROWS * COLS;
/// Bytes of an f32.
pub(crate) const F32: usize = 4;

/// The CPU table's order in BENCH-CASES.md.
const CPU_ORDER: [&str; 23] = [
    "matmul_2048",
    "matmul_2048_bf16",
    "matmul_2048_f16",
    "add",
    "exp",
    "where",
    "sum_rows",
    "transpose_copy",
    "rms_norm",
    "layer_norm",
    "softmax",
    "logsumexp",
    "rope",
    "rope_large",
    "decode_4k",
    "decode_4k_bf16",
    "qmm_decode",
    "qmm_prefill",
    "tiny_op_chain",
    "tiny_scalar_chain",
    "vjp_chain",
    "vmap_mlp",
    "train_step",
];

/// Every case on `target`, in the order of BENCH-CASES.md.
pub fn all(target: Target) -> Vec<Case> {
    let mut cases: Vec<Case> = match target {
        Target::Cpu => [
            linalg::cpu(),
            elementwise::cpu(),
            reduce::cpu(),
            fast::cpu(),
            overhead::cpu(),
            transforms::cpu(),
            quantized::cpu(),
            train::cpu(),
        ]
        .into_iter()
        .flatten()
        .collect(),
        Target::Gpu => gpu::gpu(),
    };
    if target == Target::Cpu {
        cases.sort_by_key(|c| CPU_ORDER.iter().position(|&n| n == c.name));
    }
    cases
}
