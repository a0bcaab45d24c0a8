//! Times `quantized_matmul` for a [4096, 4096] weight quantized in groups of 64 (4 bits unless
//! told; as a linear layer, `x · wᵀ`): decoding (x [1, 4096]) and prefill (x [512, 4096]).
//!
//! ```text
//! cargo run --release -p nuvec-core --example qmm_timing [decode|prefill|both] [runs] [bits]
//! ```
//!
//! Prints the median time with GB/s of the packed weight and its f32 scales and biases, and
//! GFLOP/s of `2 · m · n · k`.

use std::time::Instant;

use nuvec_core::{Array, Result, eval, quantize, quantized_matmul};

const K: usize = 4096;
const N: usize = 4096;

fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        })
        .collect()
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let which = args.get(1).map_or("both", String::as_str);
    let runs: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(0);
    let bits: u32 = args.get(3).and_then(|r| r.parse().ok()).unwrap_or(4);
    let w = Array::from_vec(values(N * K, 1), &[N, K])?;
    let (wq, scales, biases) = quantize(&w, 64, bits)?;
    eval(&[wq.clone(), scales.clone(), biases.clone()])?;
    let weight_bytes = (wq.nbytes() + scales.nbytes() + biases.nbytes()) as f64;
    for (name, m) in [("decode", 1usize), ("prefill", 512)] {
        if which != "both" && which != name {
            continue;
        }
        let x = Array::from_vec(values(m * K, 2), &[m, K])?;
        let runs = if runs > 0 {
            runs
        } else if m == 1 {
            200
        } else {
            5
        };
        quantized_matmul(&x, &wq, &scales, &biases, true, 64, bits)?.eval()?;
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t = Instant::now();
            quantized_matmul(&x, &wq, &scales, &biases, true, 64, bits)?.eval()?;
            times.push(t.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        let med = times[runs / 2];
        println!(
            "{name}: x [{m}, {K}] · w [{N}, {K}]ᵀ {bits}-bit g64: median {:.3} ms over {runs} \
             runs, {:.2} GB/s of weights, {:.1} GFLOP/s",
            med * 1e3,
            weight_bytes / med / 1e9,
            2.0 * (m * N * K) as f64 / med / 1e9
        );
    }
    Ok(())
}
