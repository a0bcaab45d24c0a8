//! Quantized products on the GPU, 4-bit weights in groups of 64 with bf16 scales, biases and
//! activations: a linear layer's weight [14336, 4096] while decoding (`qmv_14336x4096`, GB/s
//! of the packed words, scales and biases read) and in prefill (`qmm_512x14336x4096`,
//! `qmm_1024x14336x4096`, `qmm_4096x14336x4096`, TFLOP/s of `2 · m · n · k`), and a mixture
//! of experts' layer while decoding, 8 of 128 experts of [768, 2048] for 1 and 64 tokens
//! (`moe_qmv_1`, `moe_qmv_64`, `gather_qmm`; GB/s of the distinct experts' bytes).
//!
//! The weights are quantized on the device when the case is prepared; the checks recompute
//! sampled outputs in f64 from the packed words, scales and biases read back once.

use nuvec_core::{Array, DType, bf16, gather_mm, gather_qmm, quantize, quantized_matmul};

use super::{BF16, BF16_REL, bf, bf16_input, near, read, small};
use crate::case::{Prepared, Skip};

/// Values a scale and bias, and bits a value.
const GROUP: usize = 64;
const BITS: usize = 4;

/// The linear layer: outputs and inputs.
const N: usize = 14336;
const K: usize = 4096;

/// The experts: how many, each one's outputs and inputs, and how many each token takes.
const EXPERTS: usize = 128;
const EN: usize = 768;
const EK: usize = 2048;
const TOP: usize = 8;

/// The bytes of a packed `[n, k]` weight with its bf16 scales and biases.
pub(crate) const fn weight_bytes(n: usize, k: usize) -> usize {
    n * k * BITS / 8 + 2 * n * (k / GROUP) * BF16
}

/// A quantized weight: its device arrays and their host copies for the checks.
struct Packed {
    wq: Array,
    scales: Array,
    biases: Array,
    words: Vec<u32>,
    s: Vec<f64>,
    b: Vec<f64>,
    /// Rows of every matrix together, and values a row.
    k: usize,
}

impl Packed {
    /// The bf16 weight of `shape` (`[..., n, k]`) from seed `seed`, quantized on the device.
    fn new(shape: &[usize], seed: u64) -> Result<Packed, Skip> {
        let w = bf16_input(shape, seed)?;
        let (wq, scales, biases) = quantize(&w, GROUP, BITS as u32)?;
        nuvec_core::eval(&[wq.clone(), scales.clone(), biases.clone()])?;
        let host = |a: &Array| -> Result<Vec<f64>, Skip> {
            Ok(a.to_vec::<bf16>()?.into_iter().map(f64::from).collect())
        };
        Ok(Packed {
            words: wq.to_vec::<u32>()?,
            s: host(&scales)?,
            b: host(&biases)?,
            k: shape[shape.len() - 1],
            wq,
            scales,
            biases,
        })
    }

    /// Weight `(row, c)`, the rows of every matrix counted together.
    fn at(&self, row: usize, c: usize) -> f64 {
        let per_row = self.k * BITS / 32;
        let word = self.words[row * per_row + c * BITS / 32];
        let q = (word >> (c * BITS % 32)) & 0xf;
        let g = row * (self.k / GROUP) + c / GROUP;
        self.s[g] * f64::from(q) + self.b[g]
    }
}

/// `near` for a sum of `k` products of values below 1: the tensor cores take each weight
/// rounded to bf16 (the reference keeps it exact), an error that grows like `√k`.
fn near_sum(what: &str, i: usize, got: f32, want: f64, k: usize) -> Result<(), String> {
    near(what, i, got, want, BF16_REL, 4e-3 * (k as f64).sqrt())
}

/// `x [m, 4096] · wᵀ` for the quantized `w [14336, 4096]`; `work` as the unit wants it.
fn linear(m: usize, work: f64) -> Result<Prepared, Skip> {
    let (sx, sw) = (141, 142);
    let x = bf16_input(&[m, K], sx)?;
    let w = Packed::new(&[N, K], sw)?;
    let (wq, scales, biases) = (w.wq.clone(), w.scales.clone(), w.biases.clone());
    Ok(Prepared {
        work,
        build: Box::new(move || {
            Ok(vec![quantized_matmul(
                &x,
                &wq,
                &scales,
                &biases,
                true,
                GROUP,
                BITS as u32,
            )?])
        }),
        check: Box::new(move |out| {
            let got = read(out, 0, &[m, N], DType::BF16)?;
            for t in 0..16 {
                let (i, j) = ((t * 131 + 7) % m, (t * 977 + 3) % N);
                let want: f64 = (0..K).map(|c| bf(sx, i * K + c) * w.at(j, c)).sum();
                near_sum("qmm", i * N + j, got[i * N + j], want, K)?;
            }
            Ok(())
        }),
    })
}

pub(super) fn qmv() -> Result<Prepared, Skip> {
    linear(1, weight_bytes(N, K) as f64)
}

pub(super) fn qmm_512() -> Result<Prepared, Skip> {
    linear(512, 2.0 * (512 * N * K) as f64)
}

pub(super) fn qmm_1024() -> Result<Prepared, Skip> {
    linear(1024, 2.0 * (1024 * N * K) as f64)
}

pub(super) fn qmm_4096() -> Result<Prepared, Skip> {
    linear(4096, 2.0 * (4096 * N * K) as f64)
}

/// The expert of token `t`'s pick `j`: 8 distinct a token, and every expert among the picks
/// of 16 tokens or more (`37 t` runs through every residue mod 16, `16 j` through the rest).
pub(crate) const fn expert(t: usize, j: usize) -> usize {
    (37 * t + 16 * j) % EXPERTS
}

/// The distinct experts `tokens` tokens pick.
pub(crate) const fn distinct_experts(tokens: usize) -> usize {
    if tokens >= 16 { EXPERTS } else { TOP * tokens }
}

/// `gather_qmm` of `tokens` tokens (`x [tokens, 1, 1, 2048]`), each through its 8 experts
/// (`rhs_indices [tokens, 8]`, unsorted), out `[tokens, 8, 1, 768]`.
fn moe(tokens: usize) -> Result<Prepared, Skip> {
    let (sx, sw) = (151, 152);
    let x = bf16_input(&[tokens, 1, 1, EK], sx)?;
    let w = Packed::new(&[EXPERTS, EN, EK], sw)?;
    let picks: Vec<u32> = (0..tokens * TOP)
        .map(|p| expert(p / TOP, p % TOP) as u32)
        .collect();
    let idx = small(picks, &[tokens, TOP])?;
    let (wq, scales, biases) = (w.wq.clone(), w.scales.clone(), w.biases.clone());
    Ok(Prepared {
        work: (distinct_experts(tokens) * weight_bytes(EN, EK)) as f64,
        build: Box::new(move || {
            Ok(vec![gather_qmm(
                &x,
                &wq,
                &scales,
                &biases,
                None,
                Some(&idx),
                true,
                GROUP,
                BITS as u32,
                false,
            )?])
        }),
        check: Box::new(move |out| {
            let got = read(out, 0, &[tokens, TOP, 1, EN], DType::BF16)?;
            for s in 0..16 {
                let (t, j, n) = (
                    (s * 13 + 1) % tokens,
                    (s * 5 + 2) % TOP,
                    (s * 389 + 11) % EN,
                );
                let row = expert(t, j) * EN + n;
                let want: f64 = (0..EK).map(|c| bf(sx, t * EK + c) * w.at(row, c)).sum();
                let at = (t * TOP + j) * EN + n;
                near_sum("moe", at, got[at], want, EK)?;
            }
            Ok(())
        }),
    })
}

pub(super) fn moe_qmv_1() -> Result<Prepared, Skip> {
    moe(1)
}

pub(super) fn moe_qmv_64() -> Result<Prepared, Skip> {
    moe(64)
}

/// `gather_mm` of 64 tokens (`x [64, 1, 1, 2048]`), each through its 8 of 128 bf16 experts
/// stored as a linear layer's (`[128, 768, 2048]`, read as its transpose `[128, 2048, 768]`),
/// indices unsorted (the device groups them by expert first): GB/s of the distinct experts'
/// bytes, out `[64, 8, 1, 768]`.
pub(super) fn moe_mm_64() -> Result<Prepared, Skip> {
    const TOKENS: usize = 64;
    let (sx, sw) = (153, 154);
    let x = bf16_input(&[TOKENS, 1, 1, EK], sx)?;
    let stored = bf16_input(&[EXPERTS, EN, EK], sw)?;
    let w = nuvec_core::swapaxes(&stored, -1, -2)?;
    let picks: Vec<u32> = (0..TOKENS * TOP)
        .map(|p| expert(p / TOP, p % TOP) as u32)
        .collect();
    let idx = small(picks, &[TOKENS, TOP])?;
    Ok(Prepared {
        work: (distinct_experts(TOKENS) * EN * EK * BF16) as f64,
        build: Box::new(move || Ok(vec![gather_mm(&x, &w, None, Some(&idx), false)?])),
        check: Box::new(move |out| {
            let got = read(out, 0, &[TOKENS, TOP, 1, EN], DType::BF16)?;
            for s in 0..16 {
                let (t, j, n) = (
                    (s * 13 + 1) % TOKENS,
                    (s * 5 + 2) % TOP,
                    (s * 389 + 11) % EN,
                );
                let row = (expert(t, j) * EN + n) * EK;
                let want: f64 = (0..EK).map(|c| bf(sx, t * EK + c) * bf(sw, row + c)).sum();
                let at = (t * TOP + j) * EN + n;
                near_sum("moe_mm", at, got[at], want, EK)?;
            }
            Ok(())
        }),
    })
}
