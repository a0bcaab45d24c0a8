//! Quantized linear layers: `qmm_decode` (x [1, 4096] against a 4-bit [4096, 4096] weight,
//! groups of 64, as a linear layer `x · wᵀ`) and `qmm_prefill` (x [512, 4096], same weight).
//!
//! Decoding reads the packed weight once per token: its figure is GB/s of the bytes that must
//! move (the packed words, the f32 scales and biases, x and the output). Prefill is a product:
//! GFLOP/s of `2 · m · n · k`.

use nuvec_core::{Array, eval, quantize, quantized_matmul};

use crate::case::{Case, Prepared, Skip, Target, Unit};
use crate::inputs::{array, expect_close, expect_shape, output_f32, uniform};

const K: usize = 4096;
const N: usize = 4096;
const GROUP: usize = 64;
const BITS: u32 = 4;

/// The CPU cases of this family.
pub fn cpu() -> Vec<Case> {
    vec![
        Case::new(
            "qmm_decode",
            Target::Cpu,
            "[1, 4096] x [4096, 4096]ᵀ 4-bit g64",
            "f32",
            Unit::GBps,
            50,
            prepare_decode,
        ),
        Case::new(
            "qmm_prefill",
            Target::Cpu,
            "[512, 4096] x [4096, 4096]ᵀ 4-bit g64",
            "f32",
            Unit::GFlops,
            5,
            prepare_prefill,
        ),
    ]
}

/// The bytes of the packed weight with its f32 scales and biases.
pub const WEIGHT_BYTES: usize = N * K * BITS as usize / 8 + 2 * N * (K / GROUP) * 4;

fn prepare_decode() -> Result<Prepared, Skip> {
    prepare(1, (WEIGHT_BYTES + (K + N) * 4) as f64)
}

fn prepare_prefill() -> Result<Prepared, Skip> {
    prepare(512, 2.0 * 512.0 * (N * K) as f64)
}

/// `x [m, K]` against the quantized weight; the check recomputes sampled outputs in f64 from
/// the packed words.
fn prepare(m: usize, work: f64) -> Result<Prepared, Skip> {
    let w = array(uniform(N * K, 61), &[N, K])?;
    let (wq, scales, biases) = quantize(&w, GROUP, BITS)?;
    eval(&[wq.clone(), scales.clone(), biases.clone()])?;
    let xv = uniform(m * K, 62);
    let x = array(xv.clone(), &[m, K])?;
    let words = wq.to_vec::<u32>()?;
    let (s, b) = (scales.to_vec::<f32>()?, biases.to_vec::<f32>()?);
    let build = {
        let (wq, scales, biases) = (wq.clone(), scales.clone(), biases.clone());
        move || -> nuvec_core::Result<Vec<Array>> {
            Ok(vec![quantized_matmul(
                &x, &wq, &scales, &biases, true, GROUP, BITS,
            )?])
        }
    };
    Ok(Prepared {
        work,
        build: Box::new(build),
        check: Box::new(move |out| {
            expect_shape(out, &[m, N])?;
            let got = output_f32(out)?;
            let per_row = K * BITS as usize / 32;
            for t in 0..16 {
                let (i, j) = ((t * 37) % m, (t * 977 + 5) % N);
                let want: f64 = (0..K)
                    .map(|k| {
                        let word = words[j * per_row + k * BITS as usize / 32];
                        let q = (word >> (k * BITS as usize % 32)) & 0xf;
                        let g = j * (K / GROUP) + k / GROUP;
                        let wv = f64::from(s[g]) * f64::from(q) + f64::from(b[g]);
                        f64::from(xv[i * K + k]) * wv
                    })
                    .sum();
                expect_close(
                    "out",
                    i * N + j,
                    got[i * N + j],
                    want,
                    1e-4 * (1.0 + want.abs()),
                )?;
            }
            Ok(())
        }),
    })
}
