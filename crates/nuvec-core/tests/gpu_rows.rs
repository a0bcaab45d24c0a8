//! The GPU's row kernels beyond the norms' forward passes (`backend/cuda/fast/norm_grads.rs`,
//! `backend/cuda/fast/softmax.rs`) against the CPU: the norms' gradients, softmax and
//! log-sum-exp over the last axis, cross entropy and its gradient, over float32, float16 and
//! bfloat16, at row lengths that take each path (a warp, a block of registers, the longest
//! rows the registers hold, rows past them) and lengths that are not multiples of a pack, on
//! contiguous, transposed and sliced inputs, with rows of infinities and NaNs. Each test skips
//! itself, saying so, where no CUDA device answers.

mod common;

use common::Rng;
use common::gpu::{both, gpu_available, on, random};
use nuvec_core::*;

const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// Tolerances of a row result accumulated in float32 and rounded to `dtype`.
fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 2e-5,
        DType::F16 => 4e-3,
        _ => 5e-2,
    }
}

/// `(rows, n)`: a warp (1, 7, 127; 264 over many rows, so that each group of the gradient
/// kernel sums several), one block in registers (1000, 4096, 6656, 8192, 16384), the longest
/// rows the gradient kernel holds (16384), the forward's longest in float32 (16384) and past
/// them (20000).
const ROWS: [(usize, usize); 10] = [
    (3, 1),
    (9, 7),
    (5, 127),
    (1200, 264),
    (6, 1000),
    (4, 4096),
    (3, 6656),
    (2, 8192),
    (2, 16384),
    (2, 20000),
];

#[test]
fn norm_gradients_match_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(21);
    for dtype in FLOATS {
        for (rows, n) in ROWS {
            let x = random(&mut rng, &[rows, n], -2.0, 2.0, dtype);
            let w = random(&mut rng, &[n], 0.5, 1.5, dtype);
            let b = random(&mut rng, &[n], -1.0, 1.0, dtype);
            let g = random(&mut rng, &[rows, n], -1.0, 1.0, dtype);
            let name = format!("rms_norm vjp {dtype} [{rows}, {n}]");
            // The weight's cotangent sums over the rows: a looser tolerance for the halves.
            both(&name, 2.0 * tol(dtype), || {
                let f = |xs: &[Array]| Ok(vec![fast::rms_norm(&xs[0], Some(&xs[1]), 1e-5)?]);
                let (_, grads) = vjp(f, &[x.clone(), w.clone()], std::slice::from_ref(&g))?;
                Ok(grads)
            });
            let name = format!("layer_norm vjp {dtype} [{rows}, {n}]");
            both(&name, 2.0 * tol(dtype), || {
                let f = |xs: &[Array]| {
                    Ok(vec![fast::layer_norm(
                        &xs[0],
                        Some(&xs[1]),
                        Some(&xs[2]),
                        1e-5,
                    )?])
                };
                let inputs = [x.clone(), w.clone(), b.clone()];
                let (_, grads) = vjp(f, &inputs, std::slice::from_ref(&g))?;
                Ok(grads)
            });
            // No bias: the gradient node gets a 0-D one.
            let name = format!("layer_norm vjp without bias {dtype} [{rows}, {n}]");
            both(&name, 2.0 * tol(dtype), || {
                let f =
                    |xs: &[Array]| Ok(vec![fast::layer_norm(&xs[0], Some(&xs[1]), None, 1e-5)?]);
                let (_, grads) = vjp(f, &[x.clone(), w.clone()], std::slice::from_ref(&g))?;
                Ok(grads)
            });
        }
    }
}

#[test]
fn norm_gradients_of_a_transposed_input_match_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(22);
    let x = transpose(&random(&mut rng, &[64, 6], -2.0, 2.0, DType::F32), &[1, 0]).unwrap();
    let w = random(&mut rng, &[64], 0.5, 1.5, DType::F32);
    let g = random(&mut rng, &[6, 64], -1.0, 1.0, DType::F32);
    both("rms_norm vjp transposed", 4e-5, || {
        let f = |xs: &[Array]| Ok(vec![fast::rms_norm(&xs[0], Some(&xs[1]), 1e-5)?]);
        Ok(vjp(f, &[x.clone(), w.clone()], std::slice::from_ref(&g))?.1)
    });
}

#[test]
fn softmax_and_logsumexp_match_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(23);
    for dtype in FLOATS {
        for (rows, n) in ROWS {
            let x = random(&mut rng, &[rows, n], -8.0, 8.0, dtype);
            let xt = transpose(&random(&mut rng, &[n, rows], -8.0, 8.0, dtype), &[1, 0]).unwrap();
            // Rows from the second of a larger array (whole packs when n is), and rows that
            // start one element in (never aligned: the element-by-element kernels).
            let below = random(&mut rng, &[rows + 1, n], -8.0, 8.0, dtype);
            let below =
                slice(&below, &[SliceArg::new(Some(1), None, 1), SliceArg::full()]).unwrap();
            let shifted = random(&mut rng, &[rows, n + 1], -8.0, 8.0, dtype);
            let shifted = slice(
                &shifted,
                &[SliceArg::full(), SliceArg::new(Some(1), None, 1)],
            )
            .unwrap();
            for (layout, x) in [
                ("contiguous", &x),
                ("transposed", &xt),
                ("offset rows", &below),
                ("misaligned", &shifted),
            ] {
                let name = format!("softmax/logsumexp {dtype} [{rows}, {n}] {layout}");
                both(&name, tol(dtype), || {
                    Ok(vec![softmax(x, &[-1])?, logsumexp(x, &[-1], false)?])
                });
            }
        }
    }
}

#[test]
fn softmax_and_logsumexp_keep_infinities_and_nans() {
    if !gpu_available() {
        return;
    }
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    #[rustfmt::skip]
    let v = [
        1.0, 2.0, 3.0, 4.0,
        -inf, -inf, -inf, -inf,
        0.0, inf, 1.0, 2.0,
        nan, 0.0, 1.0, 2.0,
        -inf, 0.0, 1.0, -inf,
    ];
    let x = Array::from_slice(&v, &[5, 4]).unwrap();
    for dtype in FLOATS {
        let x = x.astype(dtype).unwrap();
        both(
            &format!("softmax of infinities {dtype}"),
            tol(dtype),
            || Ok(vec![softmax(&x, &[-1])?, logsumexp(&x, &[-1], true)?]),
        );
    }
}

/// Enough rows longer than a warp holds for log-sum-exp to stream each through one warp
/// (`logsumexp_warp_*`: at least 16 rows a multiprocessor), in whole packs and misaligned,
/// rows 0 to 3 holding a +inf, a NaN, only -inf and some -inf.
#[test]
fn logsumexp_of_many_long_rows_matches_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(25);
    // Rows of 1,504 (whole 16-byte packs in every type), and the same less their first
    // element (1,503, never aligned).
    let (rows, n) = (3000, 1504);
    let mut v: Vec<f32> = (0..rows * n).map(|_| rng.range(-8.0, 8.0) as f32).collect();
    v[700] = f32::INFINITY;
    v[n + 1499] = f32::NAN;
    v[2 * n..3 * n].fill(f32::NEG_INFINITY);
    for c in (0..n).step_by(3) {
        v[3 * n + c] = f32::NEG_INFINITY;
    }
    let all = Array::from_slice(&v, &[rows, n]).unwrap();
    for dtype in FLOATS {
        let packed = all.astype(dtype).unwrap();
        let shifted = slice(
            &packed,
            &[SliceArg::full(), SliceArg::new(Some(1), None, 1)],
        )
        .unwrap();
        for (layout, x) in [("whole packs", &packed), ("misaligned", &shifted)] {
            let cols = x.shape()[1];
            both(
                &format!("logsumexp {dtype} [{rows}, {cols}] {layout}"),
                tol(dtype),
                || Ok(vec![logsumexp(x, &[-1], false)?]),
            );
        }
    }
}

#[test]
fn cross_entropy_and_its_gradient_match_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(24);
    // Rows of a vocabulary and few rows (split over blocks), and small ones.
    let cases = [
        (4, 1),
        (7, 33),
        (5, 1000),
        (3, 151_936),
        (1, 100_003),
        (260, 4100),
    ];
    for dtype in FLOATS {
        for (rows, n) in cases {
            let x = random(&mut rng, &[rows, n], -4.0, 4.0, dtype);
            // Targets inside, negative (from the end) and one past the row (no hit).
            let t: Vec<i32> = (0..rows)
                .map(|r| match r % 3 {
                    0 => (r * 7919 % n) as i32,
                    1 => -1 - (r % n) as i32,
                    _ => n as i32,
                })
                .collect();
            let t = Array::from_slice(&t, &[rows]).unwrap();
            let g = random(&mut rng, &[rows], 0.5, 1.5, DType::F32);
            let name = format!("cross_entropy {dtype} [{rows}, {n}]");
            both(&name, tol(dtype), || {
                let loss = fast::cross_entropy(&x, &t)?;
                let f = |xs: &[Array]| Ok(vec![fast::cross_entropy(&xs[0], &t)?]);
                let (_, grads) = vjp(f, std::slice::from_ref(&x), std::slice::from_ref(&g))?;
                Ok(vec![loss, grads[0].clone()])
            });
        }
    }
}

#[test]
fn the_row_kernels_record_fused_nodes() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(25);
    let x = random(&mut rng, &[4, 512], -1.0, 1.0, DType::BF16);
    let w = random(&mut rng, &[512], -1.0, 1.0, DType::BF16);
    let t = Array::from_slice(&[1i32, 2, 3, 4], &[4]).unwrap();
    on(Device::gpu(0), || {
        let fused = |a: &Array, name: &str| {
            let hit = |a: &Array| matches!(a.primitive(), Some(Primitive::Fast(op)) if format!("{op:?}").starts_with(name));
            assert!(
                hit(a) || a.inputs().iter().any(hit),
                "{name}: {:?}",
                a.primitive()
            );
        };
        let rms = |xs: &[Array]| Ok(vec![fast::rms_norm(&xs[0], Some(&xs[1]), 1e-5)?]);
        let (_, grads) = vjp(rms, &[x.clone(), w.clone()], std::slice::from_ref(&x)).unwrap();
        fused(&grads[0], "RmsNormVjp");
        let ce = |xs: &[Array]| Ok(vec![fast::cross_entropy(&xs[0], &t)?]);
        let loss = fast::cross_entropy(&x, &t).unwrap();
        fused(&loss, "CrossEntropy");
        let ones = ones(&[4], DType::F32).unwrap();
        let (_, grads) = vjp(ce, std::slice::from_ref(&x), std::slice::from_ref(&ones)).unwrap();
        fused(&grads[0], "CrossEntropyVjp");
    });
}
