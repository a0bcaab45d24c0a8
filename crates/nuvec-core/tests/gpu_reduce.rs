//! The CUDA reductions against the CPU: sums, products, extremes, truth tests, arg-reductions,
//! scans, `logsumexp` and softmax computed on `Device::gpu(0)` equal the CPU's on random
//! inputs, over every shape of walk the kernels take (contiguous rows, split long rows,
//! columns, the general copy), in several layouts and dtypes. Each test skips itself, saying
//! so, where no CUDA device answers.

mod common;

use common::Rng;
use common::gpu::{both, gpu_available, layouts, on, random};
use nuvec_core::*;

/// `f` fails on both devices (the checks run when the node is recorded).
fn both_fail(name: &str, f: impl Fn() -> Result<Vec<Array>>) {
    assert!(on(Device::cpu(), &f).is_err(), "{name} on the CPU");
    assert!(on(Device::gpu(0), &f).is_err(), "{name} on the GPU");
}

/// Random booleans, about a third of them true.
fn random_bool(rng: &mut Rng, shape: &[usize]) -> Array {
    greater(random(rng, shape, -1.0, 1.0, DType::F32), 0.3).unwrap()
}

/// Inputs of `dtype` for an operation: booleans, small integers (many ties), or values in
/// `[lo, hi)`.
fn input(rng: &mut Rng, shape: &[usize], dtype: DType, lo: f64, hi: f64) -> Array {
    match dtype {
        DType::Bool => random_bool(rng, shape),
        d if d.is_float() => random(rng, shape, lo, hi, d),
        d => random(rng, shape, -20.0, 20.0, DType::F64)
            .astype(d)
            .unwrap(),
    }
}

/// Relative tolerance of results of `dtype` (half types: a rounding of the result apart).
fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 1e-12,
        DType::F32 => 2e-5,
        DType::F16 => 2e-3,
        DType::BF16 => 1.6e-2,
        _ => 0.0,
    }
}

type Reduction = fn(&Array, &[isize], bool) -> Result<Array>;

const REDUCTIONS: &[(&str, Reduction)] = &[
    ("sum", |x, a, k| sum(x, a, k)),
    ("prod", |x, a, k| prod(x, a, k)),
    ("max", |x, a, k| max(x, a, k)),
    ("min", |x, a, k| min(x, a, k)),
    ("all", |x, a, k| all(x, a, k)),
    ("any", |x, a, k| any(x, a, k)),
];

/// Whether `name` over `axes` of `x` is refused (an extreme over an empty axis).
fn refused(name: &str, x: &Array, axes: &[isize]) -> bool {
    let nd = x.ndim() as isize;
    let reduced = |i: usize| axes.is_empty() || axes.iter().any(|&a| (a + nd) % nd == i as isize);
    matches!(name, "max" | "min") && (0..x.ndim()).any(|i| x.shape()[i] == 0 && reduced(i))
}

/// Every reduction over `axes` of `x`, with and without kept axes, on both devices.
fn check_reductions(what: &str, x: &Array, axes: &[isize]) {
    for &(name, f) in REDUCTIONS {
        for keep in [false, true] {
            let label = format!("{name} {} {what} axes {axes:?} keep {keep}", x.dtype());
            if refused(name, x, axes) {
                both_fail(&label, || Ok(vec![f(x, axes, keep)?]));
                continue;
            }
            both(&label, tol(x.dtype()), || Ok(vec![f(x, axes, keep)?]));
        }
    }
}

#[test]
fn reductions_of_2d_layouts_match_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(11);
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::I32, DType::Bool] {
        // Products of many values stay representable in [0.6, 1.4).
        let x = input(&mut rng, &[33, 20], dtype, 0.6, 1.4);
        for (layout, xl) in layouts(&x, &[-2]) {
            for axes in [&[][..], &[-1], &[0], &[0, 1]] {
                check_reductions(layout, &xl, axes);
            }
        }
    }
}

#[test]
fn reductions_widen_small_types_as_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(12);
    for dtype in [
        DType::I8,
        DType::U8,
        DType::I16,
        DType::U16,
        DType::U32,
        DType::I64,
        DType::U64,
        DType::F64,
    ] {
        let x = input(&mut rng, &[17, 40], dtype, -2.0, 2.0);
        for axes in [&[][..], &[-1], &[0]] {
            for &(name, f) in &REDUCTIONS[..4] {
                // Integer products wrap alike on both devices.
                both(&format!("{name} {dtype} axes {axes:?}"), tol(dtype), || {
                    Ok(vec![f(&x, axes, false)?])
                });
            }
        }
    }
}

#[test]
fn reductions_of_3d_axes_and_views_match_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(13);
    for dtype in [DType::F32, DType::BF16, DType::I32, DType::Bool] {
        let x = input(&mut rng, &[6, 7, 9], dtype, 0.6, 1.4);
        // A permuted view (no axis of step 1 last), and a middle axis sliced backwards with a
        // step (a start that is not 16-byte aligned).
        let perm = transpose(&x, &[2, 0, 1]).unwrap();
        let sliced = slice(
            &x,
            &[
                SliceArg::full(),
                SliceArg::new(Some(-1), None, -2),
                SliceArg::new(Some(1), None, 1),
            ],
        )
        .unwrap();
        let wide = broadcast_to(
            &slice(&x, &[SliceArg::new(Some(0), Some(1), 1)]).unwrap(),
            &[6, 7, 9],
        )
        .unwrap();
        for (what, v) in [
            ("contiguous", &x),
            ("permuted", &perm),
            ("sliced", &sliced),
            ("broadcast", &wide),
        ] {
            for axes in [
                &[1][..],
                &[0],
                &[2],
                &[0, 2],
                &[1, 2],
                &[0, 1],
                &[-1, 0, 1],
                &[],
            ] {
                check_reductions(what, v, axes);
            }
        }
    }
}

#[test]
fn long_and_short_reductions_match_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(14);
    for dtype in [DType::F32, DType::BF16, DType::I32, DType::Bool] {
        // Few long rows: split over blocks, then a second pass.
        let long = input(&mut rng, &[3, 100_000], dtype, -1.0, 1.0);
        // Rows of an odd length: most start off a 16-byte boundary.
        let odd = input(&mut rng, &[64, 4099], dtype, -1.0, 1.0);
        // Many short rows (a warp each) and long columns.
        let tall = input(&mut rng, &[100_000, 3], dtype, -1.0, 1.0);
        let square = input(&mut rng, &[700, 900], dtype, -1.0, 1.0);
        // Enough rows of a few KiB that each gets a warp instead of a block.
        let many = input(&mut rng, &[8500, 1031], dtype, -1.0, 1.0);
        for (what, x, axes) in [
            ("many mid rows", &many, &[-1][..]),
            ("long rows", &long, &[-1]),
            ("long rows", &long, &[]),
            ("odd rows", &odd, &[-1]),
            ("odd rows", &odd, &[0]),
            ("tall", &tall, &[-1]),
            ("tall columns", &tall, &[0]),
            ("tall", &tall, &[]),
            ("square columns", &square, &[0]),
            ("square", &square, &[]),
        ] {
            for &(name, f) in REDUCTIONS {
                if name == "prod" {
                    continue;
                }
                // Long float sums differ in the order of their additions: about n·ε apart
                // for n = 100,000 terms.
                let t = if dtype == DType::F32 {
                    5e-3
                } else {
                    tol(dtype)
                };
                both(&format!("{name} {dtype} {what} axes {axes:?}"), t, || {
                    Ok(vec![f(x, axes, false)?])
                });
            }
        }
    }
}

#[test]
fn extremes_propagate_nan_as_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(15);
    let n = 3000;
    let mut v: Vec<f64> = (0..4 * n).map(|_| rng.range(-5.0, 5.0)).collect();
    v[7] = f64::NAN; // row 0, early
    v[n + n - 1] = f64::NAN; // row 1, last
    v[2 * n + 5] = f64::INFINITY;
    v[3 * n + 9] = f64::NEG_INFINITY;
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let x = Array::from_slice(&v, &[4, n])
            .unwrap()
            .astype(dtype)
            .unwrap();
        let xt = transpose(&x, &[1, 0]).unwrap();
        for axes in [&[-1][..], &[], &[0]] {
            for &(name, f) in &REDUCTIONS[..4] {
                both(&format!("{name} {dtype} nan {axes:?}"), tol(dtype), || {
                    Ok(vec![f(&x, axes, false)?, f(&xt, axes, false)?])
                });
            }
        }
        for axis in [-1, 0] {
            both(&format!("arg {dtype} nan {axis}"), 0.0, || {
                Ok(vec![
                    argmax(&x, axis, false)?,
                    argmin(&x, axis, false)?,
                    argmax(&xt, axis, false)?,
                    argmin(&xt, axis, false)?,
                ])
            });
        }
        both(&format!("softmax {dtype} nan"), tol(dtype), || {
            Ok(vec![softmax(&x, &[0])?, logsumexp(&x, &[0], false)?])
        });
    }
}

#[test]
fn arg_reductions_match_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(16);
    for dtype in [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::U8,
        DType::Bool,
    ] {
        let x = input(&mut rng, &[33, 20], dtype, -3.0, 3.0);
        for (layout, xl) in layouts(&x, &[-2]) {
            for axis in [0, 1, -1] {
                for keep in [false, true] {
                    let label = format!("arg {dtype} {layout} axis {axis} keep {keep}");
                    let f = || Ok(vec![argmax(&xl, axis, keep)?, argmin(&xl, axis, keep)?]);
                    if xl.shape()[((axis + 2) % 2) as usize] == 0 {
                        both_fail(&label, f);
                    } else {
                        both(&label, 0.0, f);
                    }
                }
            }
        }
        // Long rows (a block each), columns of many outputs (a thread each), a middle axis,
        // and ties everywhere (a constant input).
        let long = input(&mut rng, &[3, 100_000], dtype, -3.0, 3.0);
        let cols = input(&mut rng, &[50, 3000], dtype, -3.0, 3.0);
        let cube = input(&mut rng, &[5, 40, 6], dtype, -3.0, 3.0);
        let flat = zeros(&[7, 2000], dtype).unwrap();
        for (what, v, axis) in [
            ("long", &long, -1),
            ("long", &long, 0),
            ("columns", &cols, 0),
            ("middle", &cube, 1),
            ("first", &cube, 0),
            ("constant", &flat, -1),
            ("constant", &flat, 0),
        ] {
            both(&format!("arg {dtype} {what} {axis}"), 0.0, || {
                Ok(vec![argmax(v, axis, false)?, argmin(v, axis, false)?])
            });
        }
    }
}

type ScanFn = fn(&Array, isize, bool, bool) -> Result<Array>;

const SCANS: &[(&str, ScanFn)] = &[
    ("cumsum", |x, a, r, i| cumsum(x, a, r, i)),
    ("cumprod", |x, a, r, i| cumprod(x, a, r, i)),
    ("cummax", |x, a, r, i| cummax(x, a, r, i)),
    ("cummin", |x, a, r, i| cummin(x, a, r, i)),
    ("logcumsumexp", |x, a, r, i| logcumsumexp(x, a, r, i)),
];

#[test]
fn scans_match_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(17);
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::I32, DType::Bool] {
        let x = input(&mut rng, &[33, 20], dtype, 0.7, 1.3);
        let cube = input(&mut rng, &[4, 50, 6], dtype, 0.7, 1.3);
        let mut cases: Vec<(String, Array, isize)> = Vec::new();
        for (layout, xl) in layouts(&x, &[-2]) {
            for axis in [0, 1, -1] {
                cases.push((layout.to_string(), xl.clone(), axis));
            }
        }
        for axis in [0, 1, 2] {
            cases.push(("cube".into(), cube.clone(), axis));
        }
        for (what, v, axis) in &cases {
            for &(name, f) in SCANS {
                for reverse in [false, true] {
                    for inclusive in [true, false] {
                        // Long products of half types round at every step on both sides;
                        // logcumsumexp of integers is computed in float32.
                        let out = if name == "logcumsumexp" && !dtype.is_float() {
                            DType::F32
                        } else {
                            dtype
                        };
                        let t = tol(out) * 4.0;
                        both(
                            &format!(
                                "{name} {dtype} {what} axis {axis} rev {reverse} inc {inclusive}"
                            ),
                            t,
                            || Ok(vec![f(v, *axis, reverse, inclusive)?]),
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn long_scans_match_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(18);
    for dtype in [DType::F32, DType::I32, DType::Bool] {
        // Many tiles per row, and one long column scan.
        let x = input(&mut rng, &[3, 100_000], dtype, -1.0, 1.0);
        for axis in [-1, 0] {
            for reverse in [false, true] {
                for &(name, f) in [&SCANS[0], &SCANS[2], &SCANS[3]] {
                    both(
                        &format!("{name} {dtype} long {axis} rev {reverse}"),
                        // Sums of up to 100,000 terms in another order: about n·ε apart.
                        5e-3,
                        || {
                            Ok(vec![
                                f(&x, axis, reverse, true)?,
                                f(&x, axis, reverse, false)?,
                            ])
                        },
                    );
                }
            }
        }
    }
}

#[test]
fn softmax_and_logsumexp_match_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(19);
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        let x = random(&mut rng, &[33, 20], -4.0, 4.0, dtype);
        let cube = random(&mut rng, &[5, 6, 70], -4.0, 4.0, dtype);
        let long = random(&mut rng, &[3, 5000], -4.0, 4.0, dtype);
        let t = tol(dtype) * 4.0;
        for (layout, xl) in layouts(&x, &[-2]) {
            // Other axes than the last go through the primitive (moved last) on every type;
            // the last axis of float64 too.
            for axes in [&[0][..], &[-1], &[0, 1]] {
                both(&format!("softmax {dtype} {layout} {axes:?}"), t, || {
                    Ok(vec![softmax(&xl, axes)?])
                });
                let label = format!("logsumexp {dtype} {layout} {axes:?}");
                let f = || {
                    Ok(vec![
                        logsumexp(&xl, axes, false)?,
                        logsumexp(&xl, axes, true)?,
                    ])
                };
                let nd = xl.ndim() as isize;
                if axes
                    .iter()
                    .any(|&a| xl.shape()[((a + nd) % nd) as usize] == 0)
                {
                    both_fail(&label, f);
                } else {
                    both(&label, t, f);
                }
            }
        }
        for axes in [&[0][..], &[1], &[0, 2], &[-1]] {
            both(&format!("softmax {dtype} cube {axes:?}"), t, || {
                Ok(vec![softmax(&cube, axes)?, logsumexp(&cube, axes, false)?])
            });
        }
        for axes in [&[0][..], &[-1], &[0, 1]] {
            both(&format!("softmax {dtype} long {axes:?}"), t, || {
                Ok(vec![softmax(&long, axes)?, logsumexp(&long, axes, false)?])
            });
        }
    }
    // Rows of -inf only, and rows holding +inf.
    let v = [
        f64::NEG_INFINITY,
        f64::NEG_INFINITY,
        1.0,
        f64::INFINITY,
        0.5,
        f64::NEG_INFINITY,
    ];
    for dtype in [DType::F32, DType::F64] {
        let x = Array::from_slice(&v, &[2, 3])
            .unwrap()
            .astype(dtype)
            .unwrap();
        both(&format!("softmax {dtype} infinities"), tol(dtype), || {
            Ok(vec![
                softmax(&x, &[0])?,
                softmax(&x, &[-1])?,
                logsumexp(&x, &[0], false)?,
                logsumexp(&x, &[-1], false)?,
            ])
        });
    }
}
