//! The GPU cases of BENCH-CASES.md (bf16 unless noted), in its table's order, with the
//! peers' work figures (bench/peers/harness.py's `GPU_SPECS`). Each runs on the default
//! stream of `gpu(0)`: operations without a CUDA kernel yet run through the CPU bridge and
//! are measured as they are.
//!
//! Inputs come from [`uniform_at`], which gives any element directly, so the checks
//! recompute the few input rows they need instead of keeping gigabytes of host copies.

mod attention;
mod basic;
mod fused;
mod quantized;

use nuvec_core::{Array, DType, Element, bf16};

use crate::case::{Case, Prepared, Skip, Target, Unit};
use crate::inputs::{array, uniform_at, uniform_with};

/// Rows of the [16384, 4096] cases.
pub(crate) const ROWS: usize = 16384;
/// Columns of the [16384, 4096] cases.
pub(crate) const COLS: usize = 4096;
/// Elements of a [16384, 4096] array.
pub(crate) const GN: usize = ROWS * COLS;
/// Bytes of a bf16.
pub(crate) const BF16: usize = 2;
/// Bytes of an f32.
pub(crate) const F32: usize = 4;

/// Every GPU case, in the order of BENCH-CASES.md's GPU table, with the issues' own cases
/// beside their kin (`copy_32mib`, `gated_delta_prefill_16k`, the quantized products).
pub fn gpu() -> Vec<Case> {
    use Unit::{GBps, TFlops, TokensPerS, Us, UsPerOp};
    type Row = (
        &'static str,
        &'static str,
        &'static str,
        Unit,
        usize,
        usize,
        fn() -> Result<Prepared, Skip>,
    );
    let rows: Vec<Row> = vec![
        (
            "copy",
            "[2^30] device to device",
            "bf16",
            GBps,
            50,
            3,
            basic::copy,
        ),
        (
            "copy_32mib",
            "[2^23] device to device (32 MiB moved)",
            "bf16",
            GBps,
            200,
            5,
            basic::copy_32mib,
        ),
        (
            "copy_8mib",
            "[2^21] device to device (8 MiB moved)",
            "bf16",
            GBps,
            200,
            5,
            basic::copy_8mib,
        ),
        ("add", "[2^28] + [2^28]", "bf16", GBps, 50, 3, basic::add),
        (
            "cast_f32_bf16",
            "[2^28] f32 to bf16",
            "f32",
            GBps,
            50,
            3,
            basic::cast_f32_bf16,
        ),
        (
            "cast_bf16_f32",
            "[2^28] bf16 to f32",
            "bf16",
            GBps,
            50,
            3,
            basic::cast_bf16_f32,
        ),
        (
            "sum_rows",
            "[16384, 4096] last axis",
            "bf16",
            GBps,
            50,
            3,
            basic::sum_rows_bf16,
        ),
        (
            "sum_rows_f32",
            "[16384, 4096] last axis",
            "f32",
            GBps,
            50,
            3,
            basic::sum_rows_f32,
        ),
        (
            "matmul_8192",
            "[8192, 8192] x [8192, 8192]",
            "bf16",
            TFlops,
            30,
            3,
            basic::matmul_8192,
        ),
        (
            "gemv_4096_14336",
            "[1, 4096] x [4096, 14336]",
            "bf16",
            GBps,
            100,
            3,
            basic::gemv,
        ),
        (
            "linear_m16",
            "[16, 4096] x [4096, 14336]",
            "bf16",
            TFlops,
            100,
            3,
            basic::linear_m16,
        ),
        (
            "linear_m64",
            "[64, 4096] x [4096, 14336]",
            "bf16",
            TFlops,
            100,
            3,
            basic::linear_m64,
        ),
        (
            "linear_m256",
            "[256, 4096] x [4096, 14336]",
            "bf16",
            TFlops,
            100,
            3,
            basic::linear_m256,
        ),
        (
            "qmv_14336x4096",
            "[1, 4096] x [14336, 4096]ᵀ 4-bit g64",
            "bf16",
            GBps,
            100,
            5,
            quantized::qmv,
        ),
        (
            "qmm_512x14336x4096",
            "[512, 4096] x [14336, 4096]ᵀ 4-bit g64",
            "bf16",
            TFlops,
            50,
            3,
            quantized::qmm_512,
        ),
        (
            "qmm_1024x14336x4096",
            "[1024, 4096] x [14336, 4096]ᵀ 4-bit g64",
            "bf16",
            TFlops,
            40,
            3,
            quantized::qmm_1024,
        ),
        (
            "qmm_4096x14336x4096",
            "[4096, 4096] x [14336, 4096]ᵀ 4-bit g64",
            "bf16",
            TFlops,
            30,
            3,
            quantized::qmm_4096,
        ),
        (
            "moe_qmv_1",
            "1 token, 8 of 128 experts [768, 2048] 4-bit g64",
            "bf16",
            GBps,
            100,
            5,
            quantized::moe_qmv_1,
        ),
        (
            "moe_qmv_64",
            "64 tokens, 8 of 128 experts [768, 2048] 4-bit g64",
            "bf16",
            GBps,
            100,
            5,
            quantized::moe_qmv_64,
        ),
        (
            "moe_mm_64",
            "64 tokens, 8 of 128 bf16 experts [768, 2048]",
            "bf16",
            GBps,
            50,
            5,
            quantized::moe_mm_64,
        ),
        (
            "rms_norm",
            "[16384, 4096], weight [4096]",
            "bf16",
            GBps,
            50,
            3,
            fused::rms_norm,
        ),
        (
            "add_rms_norm",
            "[16384, 4096] x 2, weight",
            "bf16",
            GBps,
            50,
            3,
            fused::add_rms_norm,
        ),
        (
            "layer_norm",
            "[16384, 4096], weight, bias",
            "bf16",
            GBps,
            50,
            3,
            fused::layer_norm,
        ),
        (
            "rms_norm_vjp",
            "[16384, 4096]: x, w, g in; dx, dw out",
            "bf16",
            GBps,
            50,
            3,
            fused::rms_norm_vjp,
        ),
        (
            "softmax",
            "[16384, 4096] last axis",
            "bf16",
            GBps,
            50,
            3,
            fused::softmax,
        ),
        (
            "logsumexp",
            "[16384, 4096] last axis",
            "bf16",
            GBps,
            50,
            3,
            fused::logsumexp,
        ),
        (
            "cross_entropy",
            "logits [4096, 151936], int targets",
            "bf16",
            GBps,
            50,
            3,
            fused::cross_entropy,
        ),
        (
            "rope",
            "[4, 32, 2048, 128] transposed view",
            "bf16",
            GBps,
            50,
            3,
            fused::rope,
        ),
        (
            "norm_rope_cache",
            "[1, 8, 1, 128] into [1, 8, 4096, 128]",
            "bf16",
            Us,
            200,
            5,
            fused::norm_rope_cache,
        ),
        (
            "rms_norm_decode",
            "[1, 4096], weight [4096]",
            "bf16",
            Us,
            500,
            20,
            fused::rms_norm_decode,
        ),
        (
            "rope_decode",
            "[1, 32, 1, 128] at position 2000",
            "bf16",
            Us,
            500,
            20,
            fused::rope_decode,
        ),
        (
            "launch_floor",
            "[1] + [1]",
            "f32",
            Us,
            500,
            20,
            basic::launch_floor,
        ),
        (
            "sdpa_causal_4k",
            "B4 H32 L4096 D128 causal",
            "bf16",
            TFlops,
            30,
            3,
            attention::sdpa_causal_4k,
        ),
        (
            "sdpa_full_4k",
            "B4 H32 L4096 D128",
            "bf16",
            TFlops,
            30,
            3,
            attention::sdpa_full_4k,
        ),
        (
            "sdpa_causal_8k_d64",
            "B2 H16 L8192 D64 causal",
            "bf16",
            TFlops,
            30,
            3,
            attention::sdpa_causal_8k_d64,
        ),
        (
            "sdpa_causal_16k",
            "B1 H32 L16384 D128 causal",
            "bf16",
            TFlops,
            30,
            3,
            attention::sdpa_causal_16k,
        ),
        (
            "decode_d512_b8_4k",
            "q [8, 16, 1, 512], k/v [8, 2, 4096, 512]",
            "bf16",
            GBps,
            100,
            5,
            attention::decode_d512_b8_4k,
        ),
        (
            "decode_b1_8k",
            "q [1, 32, 1, 128], k/v [1, 8, 8192, 128]",
            "bf16",
            GBps,
            100,
            5,
            attention::decode_b1_8k,
        ),
        (
            "decode_b8_8k",
            "q [8, 32, 1, 128], k/v [8, 8, 8192, 128]",
            "bf16",
            GBps,
            100,
            5,
            attention::decode_b8_8k,
        ),
        (
            "decode_b64_4k",
            "q [64, 32, 1, 128], k/v [64, 8, 4096, 128]",
            "bf16",
            GBps,
            100,
            5,
            attention::decode_b64_4k,
        ),
        (
            "decode_b1_128k",
            "q [1, 32, 1, 128], k/v [1, 8, 131072, 128]",
            "bf16",
            GBps,
            100,
            5,
            attention::decode_b1_128k,
        ),
        (
            "paged_decode_b1_8k",
            "decode_b1_8k, blocks of 16",
            "bf16",
            GBps,
            100,
            5,
            attention::paged_decode_b1_8k,
        ),
        (
            "paged_decode_b8_8k",
            "decode_b8_8k, blocks of 16",
            "bf16",
            GBps,
            100,
            5,
            attention::paged_decode_b8_8k,
        ),
        (
            "paged_decode_b64_4k",
            "decode_b64_4k, blocks of 16",
            "bf16",
            GBps,
            100,
            5,
            attention::paged_decode_b64_4k,
        ),
        (
            "gated_delta_decode",
            "B64 T1 Hk16 Hv32 D128, f32 state",
            "bf16",
            GBps,
            100,
            5,
            attention::gated_delta_decode,
        ),
        (
            "gated_delta_prefill",
            "B1 T4096 Hk16 Hv32 D128",
            "bf16",
            TokensPerS,
            20,
            3,
            attention::gated_delta_prefill,
        ),
        (
            "gated_delta_prefill_16k",
            "B1 T16384 Hk16 Hv32 D128",
            "bf16",
            TokensPerS,
            20,
            3,
            attention::gated_delta_prefill_16k,
        ),
        (
            "tiny_op_chain",
            "1000 x ([1] + [1])",
            "f32",
            UsPerOp,
            50,
            5,
            basic::tiny_op_chain,
        ),
        (
            "train_step",
            super::train::SHAPE,
            "f32",
            TokensPerS,
            30,
            3,
            super::train::prepare,
        ),
    ];
    rows.into_iter()
        .map(|(name, shape, dtype, unit, runs, warmup, prepare)| {
            let mut c = Case::new(name, Target::Gpu, shape, dtype, unit, runs, prepare);
            c.warmup = warmup;
            c
        })
        .collect()
}

/// Input element `i` of seed `seed`, rounded to bf16 as the inputs are, in f64.
pub(crate) fn bf(seed: u64, i: usize) -> f64 {
    f64::from(bf16::from_f32(uniform_at(seed, i)).to_f32())
}

/// Input element `i` of seed `seed` as an f32 input holds it, in f64.
pub(crate) fn fl(seed: u64, i: usize) -> f64 {
    f64::from(uniform_at(seed, i))
}

/// A bf16 input of `shape` holding `bf(seed, i)` at flat index `i`, evaluated (on the host:
/// the first run copies it to the device, in the warm-up).
pub(crate) fn bf16_input(shape: &[usize], seed: u64) -> Result<Array, Skip> {
    let n = shape.iter().product();
    array(uniform_with(n, seed, &bf16::from_f32), shape)
}

/// An f32 input of `shape` holding `fl(seed, i)`.
pub(crate) fn f32_input(shape: &[usize], seed: u64) -> Result<Array, Skip> {
    let n = shape.iter().product();
    array(uniform_with(n, seed, &|v| v), shape)
}

/// Inputs of uniform values in `[shift − scale, shift + scale)`: [`Affine::input`] makes
/// the array, [`Affine::at`] gives its element `i` as stored, in f64.
#[derive(Clone, Copy)]
pub(crate) struct Affine {
    pub(crate) seed: u64,
    pub(crate) scale: f32,
    pub(crate) shift: f32,
    /// bf16 when true, else f32.
    pub(crate) half: bool,
}

impl Affine {
    /// bf16 values `shift + scale · u`.
    pub(crate) const fn bf16(seed: u64, scale: f32, shift: f32) -> Affine {
        Affine {
            seed,
            scale,
            shift,
            half: true,
        }
    }

    /// f32 values `shift + scale · u`.
    pub(crate) const fn f32(seed: u64, scale: f32, shift: f32) -> Affine {
        Affine {
            seed,
            scale,
            shift,
            half: false,
        }
    }

    fn raw(self, u: f32) -> f32 {
        self.shift + self.scale * u
    }

    /// Element `i` as the input holds it.
    pub(crate) fn at(self, i: usize) -> f64 {
        let v = self.raw(uniform_at(self.seed, i));
        if self.half {
            f64::from(bf16::from_f32(v).to_f32())
        } else {
            f64::from(v)
        }
    }

    /// The evaluated input of `shape`.
    pub(crate) fn input(self, shape: &[usize]) -> Result<Array, Skip> {
        let n = shape.iter().product();
        if self.half {
            array(
                uniform_with(n, self.seed, &|u| bf16::from_f32(self.raw(u))),
                shape,
            )
        } else {
            array(uniform_with(n, self.seed, &|u| self.raw(u)), shape)
        }
    }
}

/// The values of output `k` in row-major order as f32, read in its own type (no
/// conversion on the device, which would double a large output), after checking its
/// shape and dtype.
pub(crate) fn read(
    outputs: &[Array],
    k: usize,
    shape: &[usize],
    dtype: DType,
) -> Result<Vec<f32>, String> {
    let out = outputs.get(k).ok_or(format!("no output #{k}"))?;
    if out.shape() != shape || out.dtype() != dtype {
        return Err(format!(
            "output #{k} is {:?} {}, expected {shape:?} {dtype}",
            out.shape(),
            out.dtype()
        ));
    }
    let err = |e: nuvec_core::Error| e.to_string();
    match dtype {
        DType::BF16 => Ok(out
            .to_vec::<bf16>()
            .map_err(err)?
            .into_iter()
            .map(bf16::to_f32)
            .collect()),
        DType::F32 => out.to_vec::<f32>().map_err(err),
        _ => out
            .astype(DType::F32)
            .and_then(|a| a.to_vec::<f32>())
            .map_err(err),
    }
}

/// `|got − want| ≤ rel · |want| + abs` (NaNs never pass).
pub(crate) fn near(
    what: &str,
    i: usize,
    got: f32,
    want: f64,
    rel: f64,
    abs: f64,
) -> Result<(), String> {
    let tol = rel * want.abs() + abs;
    if (f64::from(got) - want).abs() <= tol {
        Ok(())
    } else {
        Err(format!(
            "{what}[{i}] = {got}, expected {want} (tolerance {tol:.3e})"
        ))
    }
}

/// An evaluated array of `values` (small inputs: indices, tables).
pub(crate) fn small<T: Element>(values: Vec<T>, shape: &[usize]) -> Result<Array, Skip> {
    array(values, shape)
}

/// bf16's relative rounding (half an ulp is 2^-9; a result rounded twice, or computed from
/// rounded intermediates, stays within a few).
pub(crate) const BF16_REL: f64 = 1.0 / 64.0;
