//! Row-wise fused operations on the GPU over [16384, 4096] bf16 (`rms_norm`,
//! `add_rms_norm`, `layer_norm`, `rms_norm_vjp`, `softmax`, `logsumexp`), `cross_entropy`,
//! `rope` on a transposed view and `norm_rope_cache` (one decode step's key written into a
//! cache).

use nuvec_core::fast::{self, Rotation};
use nuvec_core::{Array, DType, bf16};

use super::{BF16, BF16_REL, COLS, GN, ROWS, bf, bf16_input, near, read, small};
use crate::case::{Prepared, Skip};
use crate::inputs::{samples, uniform_at};

/// The norms' eps.
const EPS: f32 = 1e-5;

/// A value rounded to bf16, as a stored intermediate is.
fn round(v: f64) -> f64 {
    f64::from(bf16::from_f64(v).to_f32())
}

/// Row `r` of the [16384, 4096] input of `seed`.
fn row(seed: u64, r: usize) -> Vec<f64> {
    (0..COLS).map(|c| bf(seed, r * COLS + c)).collect()
}

/// `1 / sqrt(mean(x²) + eps)`.
fn inv_rms(x: &[f64]) -> f64 {
    1.0 / (x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64 + f64::from(EPS)).sqrt()
}

/// Checks sampled elements of output `k` ([16384, 4096] bf16) against `want(row values,
/// column)`, the row computed once per sampled row.
fn check_rows(
    out: &[Array],
    k: usize,
    input: impl Fn(usize) -> Vec<f64>,
    want: impl Fn(&[f64], usize) -> f64,
    abs: f64,
) -> Result<(), String> {
    let got = read(out, k, &[ROWS, COLS], DType::BF16)?;
    for r in samples(ROWS) {
        let x = input(r);
        for c in [0, 1, r % COLS, COLS / 2 + 7, COLS - 1] {
            let i = r * COLS + c;
            near("out", i, got[i], want(&x, c), BF16_REL, abs)?;
        }
    }
    Ok(())
}

pub(super) fn rms_norm() -> Result<Prepared, Skip> {
    let (sx, sw) = (201, 202);
    let x = bf16_input(&[ROWS, COLS], sx)?;
    let w = bf16_input(&[COLS], sw)?;
    Ok(Prepared {
        work: ((2 * GN + COLS) * BF16) as f64,
        build: Box::new(move || Ok(vec![fast::rms_norm(&x, Some(&w), EPS)?])),
        check: Box::new(move |out| {
            let want = |x: &[f64], c: usize| round(x[c] * inv_rms(x)) * bf(sw, c);
            check_rows(out, 0, |r| row(sx, r), want, 1e-2)
        }),
    })
}

pub(super) fn add_rms_norm() -> Result<Prepared, Skip> {
    let (sx, sr, sw) = (203, 204, 205);
    let x = bf16_input(&[ROWS, COLS], sx)?;
    let res = bf16_input(&[ROWS, COLS], sr)?;
    let w = bf16_input(&[COLS], sw)?;
    // The sum as stored (bf16), which the norm reads.
    let h = move |r: usize| -> Vec<f64> {
        (0..COLS)
            .map(|c| round(bf(sx, r * COLS + c) + bf(sr, r * COLS + c)))
            .collect()
    };
    Ok(Prepared {
        work: ((4 * GN + COLS) * BF16) as f64,
        build: Box::new(move || {
            let (h, y) = fast::add_rms_norm(&x, &res, Some(&w), EPS)?;
            Ok(vec![h, y])
        }),
        check: Box::new(move |out| {
            check_rows(out, 0, h, |h, c| h[c], 0.0)?;
            let want = |h: &[f64], c: usize| round(h[c] * inv_rms(h)) * bf(sw, c);
            check_rows(out, 1, h, want, 1e-2)
        }),
    })
}

pub(super) fn layer_norm() -> Result<Prepared, Skip> {
    let (sx, sw, sb) = (206, 207, 208);
    let x = bf16_input(&[ROWS, COLS], sx)?;
    let w = bf16_input(&[COLS], sw)?;
    let b = bf16_input(&[COLS], sb)?;
    Ok(Prepared {
        work: ((2 * GN + 2 * COLS) * BF16) as f64,
        build: Box::new(move || Ok(vec![fast::layer_norm(&x, Some(&w), Some(&b), EPS)?])),
        check: Box::new(move |out| {
            let want = |x: &[f64], c: usize| {
                let mean = x.iter().sum::<f64>() / COLS as f64;
                let centred: Vec<f64> = x.iter().map(|v| v - mean).collect();
                round(centred[c] * inv_rms(&centred)) * bf(sw, c) + bf(sb, c)
            };
            check_rows(out, 0, |r| row(sx, r), want, 2e-2)
        }),
    })
}

pub(super) fn rms_norm_vjp() -> Result<Prepared, Skip> {
    let (sx, sw, sg) = (209, 210, 211);
    let x = bf16_input(&[ROWS, COLS], sx)?;
    let w = bf16_input(&[COLS], sw)?;
    let g = bf16_input(&[ROWS, COLS], sg)?;
    Ok(Prepared {
        // x and g read, dx written; w read, dw written.
        work: ((3 * GN + 2 * COLS) * BF16) as f64,
        build: Box::new(move || {
            let f = |p: &[Array]| Ok(vec![fast::rms_norm(&p[0], Some(&p[1]), EPS)?]);
            let (_, grads) = nuvec_core::vjp(f, &[x.clone(), w.clone()], std::slice::from_ref(&g))?;
            Ok(grads)
        }),
        check: Box::new(move |out| {
            // dx = g·w·n − x·n³·mean(g·w·x) per row, n the row's inverse RMS.
            let want_dx = |r: usize| -> Vec<f64> {
                let xr = row(sx, r);
                let n = inv_rms(&xr);
                let gw: Vec<f64> = (0..COLS)
                    .map(|c| bf(sg, r * COLS + c) * bf(sw, c))
                    .collect();
                let proj = gw.iter().zip(&xr).map(|(a, b)| a * b).sum::<f64>() / COLS as f64;
                (0..COLS)
                    .map(|c| gw[c] * n - xr[c] * n.powi(3) * proj)
                    .collect()
            };
            check_rows(out, 0, want_dx, |dx, c| dx[c], 2e-2)?;
            // dw = Σ over rows of g·x·n, at sampled columns.
            let got = read(out, 1, &[COLS], DType::BF16)?;
            let cols = samples(COLS);
            let mut want = vec![0.0f64; cols.len()];
            for r in 0..ROWS {
                let n = inv_rms(&row(sx, r));
                for (j, &c) in cols.iter().enumerate() {
                    want[j] += bf(sg, r * COLS + c) * bf(sx, r * COLS + c) * n;
                }
            }
            for (j, &c) in cols.iter().enumerate() {
                // Sums of 16384 terms of size ~1: bf16 rounding plus the order of additions.
                near("dw", c, got[c], want[j], BF16_REL, 0.5)?;
            }
            Ok(())
        }),
    })
}

pub(super) fn softmax() -> Result<Prepared, Skip> {
    let sx = 212;
    let x = bf16_input(&[ROWS, COLS], sx)?;
    Ok(Prepared {
        work: (2 * GN * BF16) as f64,
        build: Box::new(move || Ok(vec![nuvec_core::softmax(&x, &[-1])?])),
        check: Box::new(move |out| {
            let probs = |r: usize| -> Vec<f64> {
                let x = row(sx, r);
                let m = x.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let z: f64 = x.iter().map(|v| (v - m).exp()).sum();
                x.iter().map(|v| (v - m).exp() / z).collect()
            };
            check_rows(out, 0, probs, |p, c| p[c], 1e-6)
        }),
    })
}

/// `log Σ exp` of a row, in f64.
fn lse(x: &[f64]) -> f64 {
    let m = x.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    m + x.iter().map(|v| (v - m).exp()).sum::<f64>().ln()
}

pub(super) fn logsumexp() -> Result<Prepared, Skip> {
    let sx = 213;
    let x = bf16_input(&[ROWS, COLS], sx)?;
    Ok(Prepared {
        work: ((GN + ROWS) * BF16) as f64,
        build: Box::new(move || Ok(vec![nuvec_core::logsumexp(&x, &[-1], false)?])),
        check: Box::new(move |out| {
            let got = read(out, 0, &[ROWS], DType::BF16)?;
            for r in samples(ROWS) {
                near("logsumexp", r, got[r], lse(&row(sx, r)), 1.0 / 128.0, 1e-2)?;
            }
            Ok(())
        }),
    })
}

/// Rows of the cross-entropy logits.
const CE_ROWS: usize = 4096;
/// Its vocabulary.
const VOCAB: usize = 151_936;

pub(super) fn cross_entropy() -> Result<Prepared, Skip> {
    let sx = 214;
    let logits = bf16_input(&[CE_ROWS, VOCAB], sx)?;
    let target = |r: usize| ((uniform_at(215, r) + 1.0) / 2.0 * VOCAB as f32) as usize % VOCAB;
    let targets = small(
        (0..CE_ROWS).map(|r| target(r) as i32).collect::<Vec<i32>>(),
        &[CE_ROWS],
    )?;
    Ok(Prepared {
        // The logits and the int32 targets read, the f32 losses written.
        work: (CE_ROWS * VOCAB * BF16 + CE_ROWS * 4 + CE_ROWS * 4) as f64,
        build: Box::new(move || Ok(vec![fast::cross_entropy(&logits, &targets)?])),
        check: Box::new(move |out| {
            let got = read(out, 0, &[CE_ROWS], DType::F32)?;
            for r in samples(CE_ROWS) {
                let x: Vec<f64> = (0..VOCAB).map(|c| bf(sx, r * VOCAB + c)).collect();
                near("loss", r, got[r], lse(&x) - x[target(r)], 1e-3, 1e-3)?;
            }
            Ok(())
        }),
    })
}

/// The angle of pair `pair` at position `t` (base 1e4, 128 dims), in f64.
fn angle(t: usize, pair: usize, dims: usize) -> f64 {
    t as f64 * 1e4f64.powf(-2.0 * pair as f64 / dims as f64)
}

/// Feature `d` of a row `x` (`D` features, all rotating in halves) at position `t`.
fn rotated(x: &[f64], d: usize, t: usize) -> f64 {
    let half = x.len() / 2;
    let (s, c) = angle(t, d % half, x.len()).sin_cos();
    let (s, c) = (round(s), round(c));
    if d < half {
        x[d] * c - x[d + half] * s
    } else {
        x[d - half] * s + x[d] * c
    }
}

pub(super) fn rope() -> Result<Prepared, Skip> {
    const B: usize = 4;
    const T: usize = 2048;
    const H: usize = 32;
    const D: usize = 128;
    let sx = 216;
    let stored = bf16_input(&[B, T, H, D], sx)?;
    // [4, 32, 2048, 128], a view of the projection's layout.
    let x = nuvec_core::swapaxes(&stored, 1, 2)?;
    nuvec_core::eval(std::slice::from_ref(&x))?;
    let offset = small(vec![0i32], &[])?;
    let n = B * H * T * D;
    Ok(Prepared {
        work: (2 * n * BF16) as f64,
        build: Box::new(move || {
            Ok(vec![fast::rope(
                &x,
                D,
                false,
                Some(1e4),
                1.0,
                &offset,
                None,
            )?])
        }),
        check: Box::new(move |out| {
            let got = read(out, 0, &[B, H, T, D], DType::BF16)?;
            for i in samples(n) {
                let (b, h, t, d) = (i / (H * T * D), (i / (T * D)) % H, (i / D) % T, i % D);
                let base = ((b * T + t) * H + h) * D;
                let x: Vec<f64> = (0..D).map(|e| bf(sx, base + e)).collect();
                near("rope", i, got[i], rotated(&x, d, t), BF16_REL, 1e-2)?;
            }
            Ok(())
        }),
    })
}

pub(super) fn norm_rope_cache() -> Result<Prepared, Skip> {
    const H: usize = 8;
    const C: usize = 4096;
    const D: usize = 128;
    const AT: usize = 2000;
    const NORM_EPS: f32 = 1e-6;
    let (sx, sw, sc) = (217, 218, 219);
    let x = bf16_input(&[1, H, 1, D], sx)?;
    let w = bf16_input(&[D], sw)?;
    // The cache goes into each run's graph and its result comes back as the next run's
    // cache, so that nothing else holds it and the write may happen in place (as in a
    // decoding loop).
    let mut cache = Some(bf16_input(&[1, H, C, D], sc)?);
    let mut result: Option<Array> = None;
    Ok(Prepared {
        work: 1.0,
        build: Box::new(move || {
            let previous = result.take().or_else(|| cache.take());
            let c = previous.expect("each run hands the cache on to the next");
            let rotation = Rotation {
                dims: D,
                traditional: false,
                base: Some(1e4),
                scale: 1.0,
                freqs: None,
            };
            let out = fast::norm_rope(&x, Some((&w, NORM_EPS)), rotation, AT, Some(&c))?;
            drop(c);
            result = Some(out.clone());
            Ok(vec![out])
        }),
        check: Box::new(move |out| {
            let got = read(out, 0, &[1, H, C, D], DType::BF16)?;
            for h in 0..H {
                let xr: Vec<f64> = (0..D).map(|d| bf(sx, h * D + d)).collect();
                let n = 1.0
                    / (xr.iter().map(|v| v * v).sum::<f64>() / D as f64 + f64::from(NORM_EPS))
                        .sqrt();
                let normed: Vec<f64> = (0..D)
                    .map(|d| round(round(xr[d] * n) * bf(sw, d)))
                    .collect();
                for d in 0..D {
                    let i = (h * C + AT) * D + d;
                    near(
                        "written",
                        i,
                        got[i],
                        rotated(&normed, d, AT),
                        2.0 * BF16_REL,
                        2e-2,
                    )?;
                }
                // Other positions keep the cache's values.
                for t in [0, AT - 1, AT + 1, C - 1] {
                    let i = (h * C + t) * D + h;
                    near("kept", i, got[i], bf(sc, i), 0.0, 0.0)?;
                }
            }
            Ok(())
        }),
    })
}

/// `rms_norm` of one decoding step's row (`[1, 4096]`): a decode-sized call's latency, to set
/// beside `launch_floor`.
pub(super) fn rms_norm_decode() -> Result<Prepared, Skip> {
    let (sx, sw) = (220, 221);
    let x = bf16_input(&[1, COLS], sx)?;
    let w = bf16_input(&[COLS], sw)?;
    Ok(Prepared {
        work: 1.0,
        build: Box::new(move || Ok(vec![fast::rms_norm(&x, Some(&w), EPS)?])),
        check: Box::new(move |out| {
            let got = read(out, 0, &[1, COLS], DType::BF16)?;
            let x = row(sx, 0);
            let n = inv_rms(&x);
            for c in 0..COLS {
                let want = round(x[c] * n) * bf(sw, c);
                near("rms_norm_decode", c, got[c], want, BF16_REL, 1e-2)?;
            }
            Ok(())
        }),
    })
}

/// `rope` of one decoding step's queries (`[1, 32, 1, 128]` at position 2000): a decode-sized
/// call's latency.
pub(super) fn rope_decode() -> Result<Prepared, Skip> {
    const H: usize = 32;
    const D: usize = 128;
    const AT: usize = 2000;
    let sx = 222;
    let x = bf16_input(&[1, H, 1, D], sx)?;
    let offset = small(vec![AT as i32], &[])?;
    Ok(Prepared {
        work: 1.0,
        build: Box::new(move || {
            Ok(vec![fast::rope(
                &x,
                D,
                false,
                Some(1e4),
                1.0,
                &offset,
                None,
            )?])
        }),
        check: Box::new(move |out| {
            let got = read(out, 0, &[1, H, 1, D], DType::BF16)?;
            for h in 0..H {
                let x: Vec<f64> = (0..D).map(|e| bf(sx, h * D + e)).collect();
                for d in 0..D {
                    let i = h * D + d;
                    near("rope_decode", i, got[i], rotated(&x, d, AT), BF16_REL, 1e-2)?;
                }
            }
            Ok(())
        }),
    })
}
