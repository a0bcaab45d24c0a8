//! The GPU cases of BENCH-CASES.md (bf16 unless noted). They are listed so that names and
//! figures are fixed; each reports "unavailable" until the CUDA backend and its event timer
//! exist (see `timer::for_target`), when they get preparers like the CPU families'.

use crate::case::{Case, Prepared, Skip, Target, Unit};

/// Every GPU case; the timer seam turns them away while there is no CUDA backend.
pub fn gpu() -> Vec<Case> {
    use Unit::{GBps, TFlops, TokensPerS, Us, UsPerOp};
    let table: [(&'static str, &'static str, &'static str, Unit); 32] = [
        ("copy", "[2^30] device to device", "bf16", GBps),
        ("add", "[2^28] + [2^28]", "bf16", GBps),
        ("cast_f32_bf16", "[2^28] f32 to bf16", "f32", GBps),
        ("sum_rows", "[16384, 4096] last axis", "bf16", GBps),
        ("matmul_8192", "[8192, 8192] x [8192, 8192]", "bf16", TFlops),
        ("gemv_4096_14336", "[1, 4096] x [4096, 14336]", "bf16", GBps),
        ("linear_m16", "[16, 4096] x [4096, 14336]", "bf16", TFlops),
        ("linear_m64", "[64, 4096] x [4096, 14336]", "bf16", TFlops),
        ("linear_m256", "[256, 4096] x [4096, 14336]", "bf16", TFlops),
        ("rms_norm", "[16384, 4096], weight [4096]", "bf16", GBps),
        ("add_rms_norm", "[16384, 4096] x 2, weight", "bf16", GBps),
        ("layer_norm", "[16384, 4096], weight, bias", "bf16", GBps),
        (
            "rms_norm_vjp",
            "[16384, 4096]: x, w, g in; dx, dw out",
            "bf16",
            GBps,
        ),
        ("softmax", "[16384, 4096] last axis", "bf16", GBps),
        ("logsumexp", "[16384, 4096] last axis", "bf16", GBps),
        (
            "cross_entropy",
            "logits [4096, 151936], int targets",
            "bf16",
            GBps,
        ),
        ("rope", "[4, 32, 2048, 128] transposed view", "bf16", GBps),
        (
            "norm_rope_cache",
            "[1, 8, 1, 128] into [1, 8, 4096, 128]",
            "bf16",
            Us,
        ),
        ("sdpa_causal_4k", "B4 H32 L4096 D128 causal", "bf16", TFlops),
        ("sdpa_full_4k", "B4 H32 L4096 D128", "bf16", TFlops),
        (
            "sdpa_causal_8k_d64",
            "B2 H16 L8192 D64 causal",
            "bf16",
            TFlops,
        ),
        (
            "sdpa_causal_16k",
            "B1 H32 L16384 D128 causal",
            "bf16",
            TFlops,
        ),
        (
            "decode_b1_8k",
            "q [1, 32, 1, 128], k/v [1, 8, 8192, 128]",
            "bf16",
            GBps,
        ),
        (
            "decode_b8_8k",
            "q [8, 32, 1, 128], k/v [8, 8, 8192, 128]",
            "bf16",
            GBps,
        ),
        (
            "decode_b64_4k",
            "q [64, 32, 1, 128], k/v [64, 8, 4096, 128]",
            "bf16",
            GBps,
        ),
        (
            "decode_b1_128k",
            "q [1, 32, 1, 128], k/v [1, 8, 131072, 128]",
            "bf16",
            GBps,
        ),
        (
            "paged_decode_b1_8k",
            "decode_b1_8k, blocks of 16",
            "bf16",
            GBps,
        ),
        (
            "paged_decode_b8_8k",
            "decode_b8_8k, blocks of 16",
            "bf16",
            GBps,
        ),
        (
            "paged_decode_b64_4k",
            "decode_b64_4k, blocks of 16",
            "bf16",
            GBps,
        ),
        (
            "gated_delta_decode",
            "B64 T1 Hk16 Hv32 D128, f32 state",
            "bf16",
            GBps,
        ),
        (
            "gated_delta_prefill",
            "B1 T4096 Hk16 Hv32 D128",
            "bf16",
            TokensPerS,
        ),
        ("tiny_op_chain", "1000 x ([1] + [1])", "f32", UsPerOp),
    ];
    table
        .into_iter()
        .map(|(name, shape, dtype, unit)| {
            Case::new(name, Target::Gpu, shape, dtype, unit, 50, no_gpu)
        })
        .collect()
}

fn no_gpu() -> Result<Prepared, Skip> {
    Err(Skip::Unavailable("needs the CUDA backend".into()))
}
