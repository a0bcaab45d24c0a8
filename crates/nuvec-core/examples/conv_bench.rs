//! Times two convolutions: a depthwise conv1d (the short convolution of Mamba-style models)
//! and a 3×3 conv2d, in f32 (and the depthwise one in bf16), reporting GFLOP/s from the median
//! of several runs.
//!
//! `cargo run --release -p nuvec-core --example conv_bench`

use std::time::Instant;

use nuvec_core::{Array, DType, Result, conv1d, conv2d, vjp};

fn filled(shape: &[usize], dtype: DType) -> Result<Array> {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5)
        .collect();
    let a = Array::from_vec(v, shape)?.astype(dtype)?;
    a.eval()?;
    Ok(a)
}

/// The median time in seconds of `f` (evaluated), after a warm-up.
fn median(runs: usize, f: &dyn Fn() -> Result<Array>) -> Result<f64> {
    f()?.eval()?;
    let mut times = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        f()?.eval()?;
        times.push(start.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Ok(times[runs / 2])
}

fn main() -> Result<()> {
    for dtype in [DType::F32, DType::BF16] {
        let (n, l, c, k) = (1, 4096, 2048, 4);
        let x = filled(&[n, l, c], dtype)?;
        let w = filled(&[c, k, 1], dtype)?;
        // Causal: k − 1 zeros of padding on both sides, as the models slice the first L.
        let t = median(21, &|| conv1d(&x, &w, 1, k - 1, 1, c))?;
        let out_len = l + k - 1;
        let flops = 2.0 * (n * out_len * c * k) as f64;
        println!(
            "conv1d depthwise [{n}, {l}, {c}] k={k} pad={} {dtype}: {:.3} ms, {:.2} GFLOP/s",
            k - 1,
            t * 1e3,
            flops / t / 1e9
        );
    }
    // The backward pass of a batched depthwise convolution (both cotangents).
    let (n, l, c, k) = (4, 1024, 2048, 4);
    let x = filled(&[n, l, c], DType::F32)?;
    let w = filled(&[c, k, 1], DType::F32)?;
    let g = filled(&[n, l + k - 1, c], DType::F32)?;
    let t = median(5, &|| {
        let f = |v: &[Array]| Ok(vec![conv1d(&v[0], &v[1], 1, k - 1, 1, c)?]);
        let (_, grads) = vjp(f, &[x.clone(), w.clone()], std::slice::from_ref(&g))?;
        grads[1].eval()?;
        Ok(grads[0].clone())
    })?;
    let flops = 2.0 * 2.0 * (n * (l + k - 1) * c * k) as f64;
    println!(
        "conv1d depthwise [{n}, {l}, {c}] k={k} vjp (x and w) f32: {:.3} ms, {:.2} GFLOP/s",
        t * 1e3,
        flops / t / 1e9
    );
    let (n, h, wd, ci, co, k) = (8, 64, 64, 64, 64, 3);
    let x = filled(&[n, h, wd, ci], DType::F32)?;
    let w = filled(&[co, k, k, ci], DType::F32)?;
    let t = median(11, &|| conv2d(&x, &w, 1, 1, 1, 1))?;
    let flops = 2.0 * (n * h * wd * co * k * k * ci) as f64;
    println!(
        "conv2d [{n}, {h}, {wd}, {ci}] 3x3 x {co} pad=1 f32: {:.3} ms, {:.2} GFLOP/s",
        t * 1e3,
        flops / t / 1e9
    );
    Ok(())
}
