//! The CPU's fused kernels (rms_norm, layer_norm and their gradients, rope, decoding
//! attention) against their fallback graphs (`FastOp::fallback`, the reference) and against
//! float64 formulas written here, over the half and single types, rows that are not
//! multiples of the vector width, and strided, sliced and broadcast inputs; and which cases
//! record a fused node at all.

use super::*;
use nuvec_core::fast::{AttentionMask, FastOp};

/// The three types the kernels take.
const KERNEL_TYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

fn fused_op(a: &Array) -> Option<FastOp> {
    match a.primitive() {
        Some(Primitive::Fast(op)) => Some(op.clone()),
        _ => None,
    }
}

/// The fallback graph of `op` on `inputs`, its one output.
fn reference(op: &FastOp, inputs: &[Array]) -> Array {
    op.fallback(inputs).unwrap().remove(0)
}

/// `x` in several layouts holding the same values: contiguous, stored transposed, a slice
/// of a wider array, and (for `x` of one row repeated) broadcast.
fn layouts(rng: &mut Rng, x: &Array) -> Vec<(&'static str, Array)> {
    let nd = x.ndim();
    let mut wide_shape = x.shape().to_vec();
    wide_shape[nd - 1] += 3;
    let wide = rand(rng, &wide_shape, x.dtype());
    // The values of `x` placed at columns 2.. of the wider array.
    let mut parts = vec![
        part(&wide, nd - 1, 0, 2),
        x.clone(),
        part(&wide, nd - 1, 2, 3),
    ];
    let holder = concatenate(&std::mem::take(&mut parts), -1).unwrap();
    holder.eval().unwrap();
    let d = x.shape()[nd - 1];
    vec![
        ("contiguous", x.clone()),
        ("strided", strided(x)),
        ("sliced", part(&holder, nd - 1, 2, 2 + d)),
    ]
}

fn rms_ref(x: &[f64], d: usize, w: Option<&[f64]>, eps: f64) -> Vec<f64> {
    x.chunks(d)
        .flat_map(|row| {
            let n = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / d as f64 + eps).sqrt();
            row.iter()
                .enumerate()
                .map(move |(i, v)| v * n * w.map_or(1.0, |w| w[i]))
        })
        .collect()
}

fn layer_ref(x: &[f64], d: usize, w: Option<&[f64]>, b: Option<&[f64]>, eps: f64) -> Vec<f64> {
    x.chunks(d)
        .flat_map(|row| {
            let mean = row.iter().sum::<f64>() / d as f64;
            let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / d as f64;
            let n = 1.0 / (var + eps).sqrt();
            row.iter().enumerate().map(move |(i, v)| {
                (v - mean) * n * w.map_or(1.0, |w| w[i]) + b.map_or(0.0, |b| b[i])
            })
        })
        .collect()
}

#[test]
fn the_kernels_cases_record_fused_nodes_and_the_rest_do_not() {
    let mut rng = Rng::new(71);
    let x = rand(&mut rng, &[4, 8], DType::F32);
    let op = fused_op(&fast::rms_norm(&x, None, 1e-5).unwrap());
    assert!(matches!(op, Some(FastOp::RmsNorm { .. })));
    let y = fast::layer_norm(&x.astype(DType::BF16).unwrap(), None, None, 1e-5).unwrap();
    assert!(matches!(fused_op(&y), Some(FastOp::LayerNorm { .. })));
    // float64 and empty inputs keep the fallback graph.
    let x64 = x.astype(DType::F64).unwrap();
    assert_eq!(fused_op(&fast::rms_norm(&x64, None, 1e-5).unwrap()), None);
    let empty = rand(&mut rng, &[0, 8], DType::F32);
    assert_eq!(fused_op(&fast::rms_norm(&empty, None, 1e-5).unwrap()), None);
    let q = rand(&mut rng, &[1, 4, 1, 8], DType::F32);
    let k = rand(&mut rng, &[1, 2, 10, 8], DType::F32);
    let v = rand(&mut rng, &[1, 2, 10, 8], DType::F32);
    let a = fast::scaled_dot_product_attention(&q, &k, &v, 0.5, AttentionMask::None, None);
    assert!(matches!(
        fused_op(&a.unwrap()),
        Some(FastOp::Attention { .. })
    ));
    // Array masks, sinks and long queries are products of matrices: the fallback.
    let m = Array::from_slice(&[true; 10], &[10]).unwrap();
    let a = fast::scaled_dot_product_attention(&q, &k, &v, 0.5, AttentionMask::Array(&m), None);
    assert_eq!(fused_op(&a.unwrap()), None);
    let long = rand(&mut rng, &[1, 4, 40, 8], DType::F32);
    let a = fast::scaled_dot_product_attention(&long, &k, &v, 0.5, AttentionMask::None, None);
    assert_eq!(fused_op(&a.unwrap()), None);
    let x3 = rand(&mut rng, &[1, 3, 8], DType::F32);
    let r = fast::rope(&x3, 8, false, Some(1e4), 1.0, &Array::scalar(2i32), None).unwrap();
    assert!(matches!(fused_op(&r), Some(FastOp::Rope { .. })));
}

#[test]
fn norm_kernels_match_the_fallback_and_the_formula() {
    let mut rng = Rng::new(72);
    let eps = 1e-5;
    for shape in [vec![3, 37], vec![2, 5, 100], vec![17, 1], vec![2, 1030]] {
        let d = *shape.last().unwrap();
        for dtype in KERNEL_TYPES {
            let x = rand(&mut rng, &shape, dtype);
            let w = rand(&mut rng, &[d], dtype);
            let b = rand(&mut rng, &[d], dtype);
            let (wv, bv) = (values(&w), values(&b));
            let xv = values(&x);
            let one = Array::scalar(1.0f32).astype(dtype).unwrap();
            let zero = Array::scalar(0.0f32).astype(dtype).unwrap();
            let e = eps.to_bits_f32();
            let t = tol(dtype);
            for (layout, xl) in layouts(&mut rng, &x) {
                let name = |what: &str| format!("{what} {shape:?} {dtype} {layout}");
                // RMS, with and without the weight.
                let got = fast::rms_norm(&xl, Some(&w), eps as f32).unwrap();
                let fb = reference(&FastOp::RmsNorm { eps: e }, &[xl.clone(), w.clone()]);
                check_same(&name("rms vs fallback"), &got, &fb, t);
                let want = rms_ref(&xv, d, Some(&wv), eps);
                check(&name("rms"), &got, &shape, dtype, &want, t);
                let got = fast::rms_norm(&xl, None, eps as f32).unwrap();
                let fb = reference(&FastOp::RmsNorm { eps: e }, &[xl.clone(), one.clone()]);
                check_same(&name("rms bare vs fallback"), &got, &fb, t);
                check(
                    &name("rms bare"),
                    &got,
                    &shape,
                    dtype,
                    &rms_ref(&xv, d, None, eps),
                    t,
                );
                // Layer norms with every combination of parameters.
                for (wp, bp) in [(true, true), (true, false), (false, true), (false, false)] {
                    let got = fast::layer_norm(&xl, wp.then_some(&w), bp.then_some(&b), eps as f32)
                        .unwrap();
                    let inputs = [
                        xl.clone(),
                        if wp { w.clone() } else { one.clone() },
                        if bp { b.clone() } else { zero.clone() },
                    ];
                    let fb = reference(&FastOp::LayerNorm { eps: e }, &inputs);
                    let what = format!("layer w={wp} b={bp}");
                    check_same(&name(&format!("{what} vs fallback")), &got, &fb, t);
                    let want = layer_ref(&xv, d, wp.then_some(&wv[..]), bp.then_some(&bv[..]), eps);
                    // A constant row (d = 1) has no variance: eps alone scales it.
                    check(&name(&what), &got, &shape, dtype, &want, 2.0 * t);
                }
            }
        }
    }
    // One row broadcast to many (leading stride 0).
    let row = rand(&mut rng, &[1, 33], DType::F32);
    let x = broadcast_to(&row, &[5, 33]).unwrap();
    let got = fast::rms_norm(&x, None, 1e-5).unwrap();
    let want = rms_ref(&values(&x), 33, None, 1e-5);
    check(
        "rms broadcast",
        &got,
        &[5, 33],
        DType::F32,
        &want,
        tol(DType::F32),
    );
}

/// The gradients of an RMS norm (`centre == false`) or layer norm of rows of `d` with
/// weight `w` (none: 1), in float64: `(dx, dw, db)`.
fn norm_grad_ref(
    x: &[f64],
    g: &[f64],
    d: usize,
    w: Option<&[f64]>,
    centre: bool,
    eps: f64,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (mut dx, mut dw, mut db) = (Vec::new(), vec![0.0; d], vec![0.0; d]);
    for (row, gr) in x.chunks(d).zip(g.chunks(d)) {
        let mean = if centre {
            row.iter().sum::<f64>() / d as f64
        } else {
            0.0
        };
        let c: Vec<f64> = row.iter().map(|v| v - mean).collect();
        let n = 1.0 / (c.iter().map(|v| v * v).sum::<f64>() / d as f64 + eps).sqrt();
        let wg: Vec<f64> = (0..d).map(|i| gr[i] * w.map_or(1.0, |w| w[i])).collect();
        let wg_mean = if centre {
            wg.iter().sum::<f64>() / d as f64
        } else {
            0.0
        };
        let proj = (0..d).map(|i| wg[i] * c[i]).sum::<f64>() / d as f64;
        for i in 0..d {
            dx.push((wg[i] - wg_mean) * n - c[i] * proj * n.powi(3));
            dw[i] += gr[i] * c[i] * n;
            db[i] += gr[i];
        }
    }
    (dx, dw, db)
}

#[test]
fn norm_gradient_kernels_match_the_fallback_and_the_formula() {
    let mut rng = Rng::new(74);
    let eps = 1e-5;
    let e = eps.to_bits_f32();
    for shape in [vec![3, 37], vec![2, 5, 100], vec![17, 1], vec![40, 130]] {
        let d = *shape.last().unwrap();
        for dtype in KERNEL_TYPES {
            let x = rand(&mut rng, &shape, dtype);
            let g = rand(&mut rng, &shape, dtype);
            let w = rand(&mut rng, &[d], dtype);
            let b = rand(&mut rng, &[d], dtype);
            let (xv, gv, wv) = (values(&x), values(&g), values(&w));
            let one = Array::scalar(1.0f32).astype(dtype).unwrap();
            let zero = Array::scalar(0.0f32).astype(dtype).unwrap();
            // Sums over rows round once at the end: allow a little more than one value.
            let t = 2.0 * tol(dtype);
            // x and g in different layouts: the kernel reads each through its own rows.
            for ((layout, xl), (_, gl)) in layouts(&mut rng, &x)
                .into_iter()
                .zip(layouts(&mut rng, &g).into_iter().rev())
            {
                let name = |what: &str| format!("{what} {shape:?} {dtype} {layout}");
                for weighted in [true, false] {
                    let wl = if weighted { w.clone() } else { one.clone() };
                    let op = FastOp::RmsNormVjp { eps: e };
                    let inputs = vec![xl.clone(), wl.clone(), gl.clone()];
                    let got = Array::from_op(Primitive::Fast(op.clone()), inputs.clone()).unwrap();
                    let fb = op.fallback(&inputs).unwrap();
                    let (dx, dw, _) =
                        norm_grad_ref(&xv, &gv, d, weighted.then_some(&wv[..]), false, eps);
                    let what = format!("rms grad w={weighted}");
                    check_same(&name(&format!("{what} dx vs fallback")), &got[0], &fb[0], t);
                    check(&name(&format!("{what} dx")), &got[0], &shape, dtype, &dx, t);
                    check_same(&name(&format!("{what} dw vs fallback")), &got[1], &fb[1], t);
                    if weighted {
                        check(&name(&format!("{what} dw")), &got[1], &[d], dtype, &dw, t);
                    }
                    let op = FastOp::LayerNormVjp { eps: e };
                    let bl = if weighted { b.clone() } else { zero.clone() };
                    let inputs = vec![xl.clone(), wl, bl, gl.clone()];
                    let got = Array::from_op(Primitive::Fast(op.clone()), inputs.clone()).unwrap();
                    let fb = op.fallback(&inputs).unwrap();
                    let (dx, dw, db) =
                        norm_grad_ref(&xv, &gv, d, weighted.then_some(&wv[..]), true, eps);
                    let what = format!("layer grad w={weighted}");
                    for (i, part) in ["dx", "dw", "db"].iter().enumerate() {
                        let label = format!("{what} {part} vs fallback");
                        check_same(&name(&label), &got[i], &fb[i], t);
                    }
                    check(&name(&format!("{what} dx")), &got[0], &shape, dtype, &dx, t);
                    if weighted {
                        check(&name(&format!("{what} dw")), &got[1], &[d], dtype, &dw, t);
                        check(&name(&format!("{what} db")), &got[2], &[d], dtype, &db, t);
                    }
                }
            }
        }
    }
    // The norms' reverse mode records the gradient node on the CPU.
    let x = rand(&mut rng, &[4, 8], DType::F32);
    let w = rand(&mut rng, &[8], DType::F32);
    let g = rand(&mut rng, &[4, 8], DType::F32);
    let (_, grads) = nuvec_core::vjp(
        |p| Ok(vec![fast::rms_norm(&p[0], Some(&p[1]), 1e-5)?]),
        &[x, w],
        &[g],
    )
    .unwrap();
    for grad in &grads {
        assert!(matches!(
            grad.primitive(),
            Some(Primitive::Fast(FastOp::RmsNormVjp { .. }))
        ));
    }
}

trait Bits {
    fn to_bits_f32(self) -> u32;
}

impl Bits for f64 {
    fn to_bits_f32(self) -> u32 {
        (self as f32).to_bits()
    }
}

/// The rotation in float64 (see rope.rs's reference, here with the inverse too).
#[allow(clippy::too_many_arguments)]
fn rope_ref(
    x: &[f64],
    shape: &[usize],
    dims: usize,
    traditional: bool,
    inv_freq: &[f64],
    scale: f64,
    offsets: &[f64],
    forward: bool,
) -> Vec<f64> {
    let nd = shape.len();
    let (t_len, d) = (shape[nd - 2], shape[nd - 1]);
    let per_batch: usize = shape[1..].iter().product();
    let half = dims / 2;
    let mut out = x.to_vec();
    for (row, chunk) in x.chunks(d).enumerate() {
        let b = row * d / per_batch;
        let offset = if offsets.len() == 1 {
            offsets[0]
        } else {
            offsets[b]
        };
        for (i, inv) in inv_freq.iter().enumerate() {
            let (p, q) = if traditional {
                (2 * i, 2 * i + 1)
            } else {
                (i, i + half)
            };
            let theta = (offset + (row % t_len) as f64) * scale * inv;
            let (c, s) = (
                theta.cos(),
                if forward { theta.sin() } else { -theta.sin() },
            );
            out[row * d + p] = chunk[p] * c - chunk[q] * s;
            out[row * d + q] = chunk[p] * s + chunk[q] * c;
        }
    }
    out
}

#[test]
fn rope_kernel_matches_the_fallback_and_the_formula() {
    let mut rng = Rng::new(73);
    // (shape, dims, traditional, per-batch offsets, explicit frequencies)
    let cases = [
        (vec![1, 3, 20, 16], 16, false, false, false),
        (vec![2, 2, 7, 38], 30, true, true, false),
        (vec![2, 5, 24], 24, false, true, true),
        (vec![1, 2, 3, 9, 12], 8, true, false, true),
    ];
    for (shape, dims, traditional, per_batch, with_freqs) in cases {
        let half = dims / 2;
        let offsets: Vec<i32> = if per_batch {
            (0..shape[0] as i32).map(|b| 3 + 5 * b).collect()
        } else {
            vec![7]
        };
        let offset = if per_batch {
            Array::from_slice(&offsets, &[shape[0]]).unwrap()
        } else {
            Array::scalar(offsets[0])
        };
        let freqs_v: Vec<f64> = (0..half).map(|i| 1.5 + i as f64 * 0.75).collect();
        let freqs = Array::from_slice(&freqs_v, &[half])
            .unwrap()
            .astype(DType::F32)
            .unwrap();
        let (base, scale) = (1e4f64, 0.5f64);
        let inv: Vec<f64> = if with_freqs {
            values(&freqs).iter().map(|f| 1.0 / f).collect()
        } else {
            (0..half)
                .map(|i| base.powf(-(2.0 * i as f64) / dims as f64))
                .collect()
        };
        let off_f: Vec<f64> = offsets.iter().map(|&o| f64::from(o)).collect();
        for dtype in KERNEL_TYPES {
            let x = rand(&mut rng, &shape, dtype);
            let xv = values(&x);
            for forward in [true, false] {
                let op = FastOp::Rope {
                    dims,
                    traditional,
                    // The public operation keeps 1 when the frequencies are given.
                    base: if with_freqs { 1.0f32 } else { base as f32 }.to_bits(),
                    scale: (scale as f32).to_bits(),
                    forward,
                };
                for (layout, xl) in layouts(&mut rng, &x) {
                    let name = format!("rope {shape:?} {dtype} {layout} forward={forward}");
                    let mut inputs = vec![xl.clone(), offset.clone()];
                    if with_freqs {
                        inputs.push(freqs.clone());
                    }
                    let got = if forward {
                        let f = with_freqs.then_some(&freqs);
                        let b = (!with_freqs).then_some(base as f32);
                        fast::rope(&xl, dims, traditional, b, scale as f32, &offset, f).unwrap()
                    } else {
                        Array::from_op(Primitive::Fast(op.clone()), inputs.clone())
                            .unwrap()
                            .remove(0)
                    };
                    assert_eq!(fused_op(&got).as_ref(), Some(&op), "{name}: fused");
                    let fb = reference(&op, &inputs);
                    // The fallback rounds its cosines and sines to the element type first.
                    let t = tol(dtype) * if dtype == DType::F32 { 1.0 } else { 2.0 };
                    check_same(&format!("{name} vs fallback"), &got, &fb, t);
                    let want =
                        rope_ref(&xv, &shape, dims, traditional, &inv, scale, &off_f, forward);
                    check(&name, &got, &shape, dtype, &want, t);
                }
            }
        }
    }
    // Positions laid out across heads ([B, T, H, D] viewed as [B, H, T, D]).
    let x = rand(&mut rng, &[2, 9, 3, 16], DType::F32);
    let xt = swapaxes(&x, 1, 2).unwrap();
    let got = fast::rope(&xt, 16, false, Some(1e4), 1.0, &Array::scalar(0i32), None).unwrap();
    let inv: Vec<f64> = (0..8)
        .map(|i| 1e4f64.powf(-(2.0 * i as f64) / 16.0))
        .collect();
    let want = rope_ref(
        &values(&xt),
        &[2, 3, 9, 16],
        16,
        false,
        &inv,
        1.0,
        &[0.0],
        true,
    );
    check(
        "rope transposed",
        &got,
        &[2, 3, 9, 16],
        DType::F32,
        &want,
        tol(DType::F32),
    );
}

/// Attention in float64 over `[B, H, L, D]` row-major values, grouped heads, causal
/// alignment at the end.
#[allow(clippy::too_many_arguments)]
fn attention_ref(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    (b, hq, hkv, lq, lk, d, dv): (usize, usize, usize, usize, usize, usize, usize),
    scale: f64,
    causal: bool,
) -> Vec<f64> {
    let mut out = vec![0.0; b * hq * lq * dv];
    for bi in 0..b {
        for h in 0..hq {
            let g = h / (hq / hkv);
            for i in 0..lq {
                let qr = &q[((bi * hq + h) * lq + i) * d..][..d];
                let seen = if causal { i + lk - lq + 1 } else { lk };
                let scores: Vec<f64> = (0..seen)
                    .map(|j| {
                        let kr = &k[((bi * hkv + g) * lk + j) * d..][..d];
                        qr.iter().zip(kr).map(|(a, b)| a * b).sum::<f64>() * scale
                    })
                    .collect();
                let top = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let p: Vec<f64> = scores.iter().map(|s| (s - top).exp()).collect();
                let z: f64 = p.iter().sum();
                let o = &mut out[((bi * hq + h) * lq + i) * dv..][..dv];
                for (j, pj) in p.iter().enumerate() {
                    let vr = &v[((bi * hkv + g) * lk + j) * dv..][..dv];
                    for (o, x) in o.iter_mut().zip(vr) {
                        *o += pj / z * x;
                    }
                }
            }
        }
    }
    out
}

#[test]
fn decode_attention_kernel_matches_the_fallback_and_the_formula() {
    let mut rng = Rng::new(74);
    // (B, Hq, Hkv, Lq, Lk, D, Dv, causal): one query row, grouped heads, keys not a multiple
    // of the key block, a head split over many keys, short causal windows.
    let cases = [
        (2, 8, 2, 1, 300, 32, 32, false),
        (1, 4, 4, 1, 77, 20, 12, true),
        (1, 2, 1, 1, 2000, 16, 16, false),
        (2, 4, 2, 3, 70, 24, 24, true),
        (1, 6, 3, 5, 5, 8, 8, true),
    ];
    for (b, hq, hkv, lq, lk, d, dv, causal) in cases {
        let scale = 1.0 / (d as f64).sqrt();
        for dtype in KERNEL_TYPES {
            let q = rand(&mut rng, &[b, hq, lq, d], dtype);
            let k = rand(&mut rng, &[b, hkv, lk, d], dtype);
            let v = rand(&mut rng, &[b, hkv, lk, dv], dtype);
            let want = attention_ref(
                &values(&q),
                &values(&k),
                &values(&v),
                (b, hq, hkv, lq, lk, d, dv),
                scale,
                causal,
            );
            let mask = if causal {
                AttentionMask::Causal
            } else {
                AttentionMask::None
            };
            let op = FastOp::Attention {
                scale: (scale as f32).to_bits(),
                causal,
                mask: false,
                sinks: false,
            };
            // Keys and values stored as [B, L, H, D] (a cache) and viewed as [B, H, L, D].
            let as_cache = |a: &Array| {
                let stored = contiguous(&swapaxes(a, 1, 2).unwrap()).unwrap();
                swapaxes(&stored, 1, 2).unwrap()
            };
            let kinds = [
                ("contiguous", k.clone(), v.clone()),
                ("cache view", as_cache(&k), as_cache(&v)),
                ("strided", strided(&k), strided(&v)),
            ];
            for (layout, kl, vl) in kinds {
                let name = format!(
                    "attention {:?} {dtype} {layout}",
                    (b, hq, hkv, lq, lk, d, dv, causal)
                );
                let got =
                    fast::scaled_dot_product_attention(&q, &kl, &vl, scale as f32, mask, None)
                        .unwrap();
                assert_eq!(fused_op(&got).as_ref(), Some(&op), "{name}: fused");
                // The fallback rounds its scores and probabilities to the element type.
                let t = tol(dtype) * if dtype == DType::F32 { 1.0 } else { 2.0 };
                let fb = reference(&op, &[q.clone(), kl.clone(), vl.clone()]);
                check_same(&format!("{name} vs fallback"), &got, &fb, t);
                check(&name, &got, &[b, hq, lq, dv], dtype, &want, tol(dtype));
            }
        }
    }
}
