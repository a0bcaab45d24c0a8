//! The GPU kernels of the fused norms and the rotary embedding (`backend/cuda/fast/norms.rs`,
//! `backend/cuda/fast/rope.rs`) against the CPU: `fast::rms_norm`, `fast::add_rms_norm`,
//! `fast::layer_norm` and `fast::rope` (forward, and inverse through its gradient) on
//! random inputs over float32, float16 and bfloat16, rows of 1, 33, 4096 and 10000
//! elements (warp rows, block rows cached in registers, rows read in several passes),
//! contiguous, transposed, reversed, broadcast, misaligned and empty inputs, with and
//! without parameters. Each test skips itself, saying so, where no CUDA device answers.

mod common;

use common::Rng;
use common::gpu::{both, gpu_available, random};
use nuvec_core::*;

fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 2e-5,
        DType::F16 => 4e-3,
        _ => 5e-2,
    }
}

const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// `rows × n` values as inputs of several layouts (each `[rows, n]`): contiguous,
/// transposed (last axis not unit-stride), reversed rows, one row broadcast, rows starting
/// one element in (not 16-byte aligned), and no rows.
fn layouts(rng: &mut Rng, rows: usize, n: usize, dtype: DType) -> Vec<(&'static str, Array)> {
    let x = random(rng, &[rows, n], -2.0, 2.0, dtype);
    let t = transpose(&random(rng, &[n, rows], -2.0, 2.0, dtype), &[1, 0]).unwrap();
    let rev = slice(
        &random(rng, &[2 * rows, n], -2.0, 2.0, dtype),
        &[SliceArg::new(None, None, -2), SliceArg::full()],
    )
    .unwrap();
    let wide = broadcast_to(&random(rng, &[1, n], -2.0, 2.0, dtype), &[rows, n]).unwrap();
    let shifted = slice(
        &random(rng, &[rows, n + 1], -2.0, 2.0, dtype),
        &[SliceArg::full(), SliceArg::new(Some(1), None, 1)],
    )
    .unwrap();
    let empty = slice(&x, &[SliceArg::new(Some(0), Some(0), 1), SliceArg::full()]).unwrap();
    vec![
        ("contiguous", x),
        ("transposed", t),
        ("reversed", rev),
        ("broadcast", wide),
        ("misaligned", shifted),
        ("empty", empty),
    ]
}

/// Row lengths that take each path: a warp (1, 33; 96 over many rows, many blocks), a block
/// in registers (4096, 10000), a block in several passes (40000). Fewer rows for the long
/// ones.
const ROWS: [(usize, usize); 6] = [
    (7, 1),
    (9, 33),
    (1100, 96),
    (5, 4096),
    (3, 10000),
    (2, 40000),
];

#[test]
fn rms_norm_matches_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(11);
    for dtype in FLOATS {
        for (rows, n) in ROWS {
            let w = random(&mut rng, &[n], 0.5, 1.5, dtype);
            // A weight read with a step of -1.
            let w_rev = slice(&w, &[SliceArg::new(None, None, -1)]).unwrap();
            for (layout, x) in layouts(&mut rng, rows, n, dtype) {
                for (wname, weight) in [("none", None), ("weight", Some(&w)), ("rev", Some(&w_rev))]
                {
                    let name = format!("rms_norm {dtype} [{rows}, {n}] {layout} {wname}");
                    both(&name, tol(dtype), || {
                        Ok(vec![fast::rms_norm(&x, weight, 1e-5)?])
                    });
                }
            }
        }
    }
}

#[test]
fn add_rms_norm_matches_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(12);
    for dtype in FLOATS {
        for (rows, n) in ROWS {
            let w = random(&mut rng, &[n], 0.5, 1.5, dtype);
            let xs = layouts(&mut rng, rows, n, dtype);
            let rs = layouts(&mut rng, rows, n, dtype);
            // Every x layout with the contiguous residual, and every residual layout with
            // the contiguous x.
            let pairs = xs
                .iter()
                .map(|(l, x)| (*l, x.clone(), rs[0].1.clone()))
                .chain(rs.iter().map(|(l, r)| (*l, xs[0].1.clone(), r.clone())))
                .filter(|(_, x, r)| x.shape() == r.shape());
            for (layout, x, r) in pairs {
                for weight in [None, Some(&w)] {
                    let name = format!(
                        "add_rms_norm {dtype} [{rows}, {n}] {layout} weight {}",
                        weight.is_some()
                    );
                    both(&name, tol(dtype), || {
                        let (h, y) = fast::add_rms_norm(&x, &r, weight, 1e-5)?;
                        Ok(vec![h, y])
                    });
                }
            }
        }
    }
}

#[test]
fn layer_norm_matches_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(13);
    for dtype in FLOATS {
        for (rows, n) in ROWS {
            let w = random(&mut rng, &[n], 0.5, 1.5, dtype);
            let b = random(&mut rng, &[n], -1.0, 1.0, dtype);
            for (layout, x) in layouts(&mut rng, rows, n, dtype) {
                // An offset mean, so that centring matters.
                let x = add(&x, 3.0).unwrap();
                for (weight, bias) in [
                    (None, None),
                    (Some(&w), None),
                    (None, Some(&b)),
                    (Some(&w), Some(&b)),
                ] {
                    let name = format!(
                        "layer_norm {dtype} [{rows}, {n}] {layout} weight {} bias {}",
                        weight.is_some(),
                        bias.is_some()
                    );
                    both(&name, tol(dtype), || {
                        Ok(vec![fast::layer_norm(&x, weight, bias, 1e-5)?])
                    });
                }
            }
        }
    }
}

#[test]
fn norms_of_higher_rank_views_match_the_cpu() {
    if !gpu_available() {
        return;
    }
    // [2, 3, 4, 64] as a transposed view of [2, 4, 3, 64]: rows located through two
    // unmerged leading axes.
    let mut rng = Rng::new(14);
    for dtype in FLOATS {
        let x = swapaxes(&random(&mut rng, &[2, 4, 3, 64], -2.0, 2.0, dtype), 1, 2).unwrap();
        let w = random(&mut rng, &[64], 0.5, 1.5, dtype);
        both(&format!("norms {dtype} 4-D view"), tol(dtype), || {
            Ok(vec![
                fast::rms_norm(&x, Some(&w), 1e-6)?,
                fast::layer_norm(&x, Some(&w), Some(&w), 1e-6)?,
            ])
        });
    }
}

/// Offsets of each kind for batch size `b`: int32 and uint32 scalars, per-entry int32 and
/// uint32, and per-entry read with a step of 2.
fn offsets(b: usize) -> Vec<(&'static str, Array)> {
    let per: Vec<i32> = (0..b as i32).map(|i| 3 * i + 1).collect();
    let per_u: Vec<u32> = per.iter().map(|&o| o as u32 + 2).collect();
    let spaced: Vec<i32> = (0..2 * b as i32).map(|i| 7 * i).collect();
    let spaced = Array::from_slice(&spaced, &[2 * b]).unwrap();
    vec![
        ("scalar i32", Array::scalar(5i32)),
        ("scalar u32", Array::scalar(9u32)),
        ("per-batch i32", Array::from_slice(&per, &[b]).unwrap()),
        ("per-batch u32", Array::from_slice(&per_u, &[b]).unwrap()),
        (
            "per-batch strided",
            slice(&spaced, &[SliceArg::new(None, None, 2)]).unwrap(),
        ),
    ]
}

#[test]
fn rope_matches_the_cpu_in_every_mode() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(15);
    // (shape, dims): whole heads, part of a head, a 3-D and a 5-D input.
    let cases: &[(&[usize], usize)] = &[
        (&[2, 3, 5, 8], 8),
        (&[2, 3, 5, 16], 6),
        (&[2, 7, 32], 32),
        (&[2, 2, 3, 4, 12], 4),
    ];
    for &(shape, dims) in cases {
        for dtype in FLOATS {
            let x = random(&mut rng, shape, -2.0, 2.0, dtype);
            let g = random(&mut rng, shape, -2.0, 2.0, dtype);
            let f: Vec<f32> = (0..dims / 2).map(|i| 1.0 + i as f32 * 2.5).collect();
            let freqs = Array::from_slice(&f, &[dims / 2]).unwrap();
            for (oname, offset) in offsets(shape[0]) {
                for traditional in [false, true] {
                    for with_freqs in [false, true] {
                        let name = format!(
                            "rope {dtype} {shape:?} dims {dims} {oname} trad {traditional} \
                             freqs {with_freqs}"
                        );
                        let (base, fr) = if with_freqs {
                            (None, Some(&freqs))
                        } else {
                            (Some(10000.0), None)
                        };
                        let rot = |xs: &[Array]| {
                            Ok(vec![fast::rope(
                                &xs[0],
                                dims,
                                traditional,
                                base,
                                1.5,
                                &offset,
                                fr,
                            )?])
                        };
                        // Forward, and the inverse rotation (the gradient).
                        both(&name, tol(dtype), || {
                            let (out, grads) =
                                vjp(rot, std::slice::from_ref(&x), std::slice::from_ref(&g))?;
                            Ok(vec![out[0].clone(), grads[0].clone()])
                        });
                    }
                }
            }
        }
    }
}

#[test]
fn rope_reads_transposed_and_strided_views() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(16);
    for dtype in FLOATS {
        // [B, H, L, D] as a view of [B, L, H, D] (the benchmark's layout, smaller).
        let blhd = random(&mut rng, &[2, 6, 4, 16], -2.0, 2.0, dtype);
        let x = swapaxes(&blhd, 1, 2).unwrap();
        // The same from its second position on (a view with an offset).
        let later = swapaxes(
            &slice(
                &blhd,
                &[
                    SliceArg::full(),
                    SliceArg::new(Some(1), None, 1),
                    SliceArg::full(),
                    SliceArg::full(),
                ],
            )
            .unwrap(),
            1,
            2,
        )
        .unwrap();
        // The feature axis reversed, and a broadcast batch.
        let y = random(&mut rng, &[2, 3, 5, 8], -2.0, 2.0, dtype);
        let rev = slice(
            &y,
            &[
                SliceArg::full(),
                SliceArg::full(),
                SliceArg::full(),
                SliceArg::new(None, None, -1),
            ],
        )
        .unwrap();
        let wide = broadcast_to(
            &random(&mut rng, &[1, 3, 5, 8], -2.0, 2.0, dtype),
            &[4, 3, 5, 8],
        )
        .unwrap();
        let empty = random(&mut rng, &[2, 0, 5, 8], -2.0, 2.0, dtype);
        for (layout, v) in [
            ("transposed", x),
            ("transposed from position 1", later),
            ("reversed", rev),
            ("broadcast", wide),
            ("empty", empty),
        ] {
            for traditional in [false, true] {
                let name = format!("rope {dtype} {layout} trad {traditional}");
                let offset = Array::from_slice(&vec![2i32; v.shape()[0]], &[v.shape()[0]]).unwrap();
                both(&name, tol(dtype), || {
                    let d = v.shape()[3];
                    Ok(vec![fast::rope(
                        &v,
                        d,
                        traditional,
                        Some(500.0),
                        1.0,
                        &offset,
                        None,
                    )?])
                });
            }
        }
    }
}
