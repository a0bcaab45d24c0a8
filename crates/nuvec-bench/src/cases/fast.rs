//! The fused operations of `nuvec_core::fast` on the CPU: `rms_norm`, `layer_norm` ([1024,
//! 4096] f32, last axis), `rope` ([1, 8, 512, 128]) and `rope_large` ([1, 32, 1024, 128]: the
//! [1024, 4096] activations as 32 heads), `decode_4k` (one query token against a 4096-token
//! cache, grouped-query attention) and `decode_4k_bf16` (the same in bfloat16).
//!
//! Each waits for its operation (see build.rs) and says so until then.

#[allow(unused_imports)]
use super::{COLS, F32, N, ROWS};
#[allow(unused_imports)]
use crate::case::{Case, Prepared, Skip, Target, Unit, unavailable};
#[allow(unused_imports)]
use crate::inputs::{array, expect_close, expect_shape, output_f32, samples, uniform};

/// The CPU cases of this family.
pub fn cpu() -> Vec<Case> {
    let rows = "[1024, 4096]";
    vec![
        Case::new(
            "rms_norm",
            Target::Cpu,
            rows,
            "f32",
            Unit::GBps,
            20,
            prepare_rms_norm,
        ),
        Case::new(
            "layer_norm",
            Target::Cpu,
            rows,
            "f32",
            Unit::GBps,
            20,
            prepare_layer_norm,
        ),
        Case::new(
            "rope",
            Target::Cpu,
            "[1, 8, 512, 128]",
            "f32",
            Unit::GBps,
            30,
            prepare_rope,
        ),
        Case::new(
            "rope_large",
            Target::Cpu,
            "[1, 32, 1024, 128]",
            "f32",
            Unit::GBps,
            20,
            prepare_rope_large,
        ),
        Case::new(
            "decode_4k",
            Target::Cpu,
            "q [1, 32, 1, 128], k/v [1, 8, 4096, 128]",
            "f32",
            Unit::GBps,
            30,
            prepare_decode_4k,
        ),
        Case::new(
            "decode_4k_bf16",
            Target::Cpu,
            "q [1, 32, 1, 128], k/v [1, 8, 4096, 128]",
            "bf16",
            Unit::GBps,
            30,
            prepare_decode_4k_bf16,
        ),
    ]
}

/// The normalisation eps of both norm cases.
#[allow(dead_code)]
const EPS: f32 = 1e-5;

/// Checks sampled elements of a row-wise normalisation: `want(row, mean, mean of squares,
/// column)` from the f64 statistics of the row.
#[allow(dead_code)]
fn check_norm(
    out: &[nuvec_core::Array],
    xv: &[f32],
    want: impl Fn(f64, f64, f64, usize) -> f64,
) -> Result<(), String> {
    expect_shape(out, &[ROWS, COLS])?;
    let got = output_f32(out)?;
    for i in samples(N) {
        let r = i / COLS;
        let row = &xv[r * COLS..(r + 1) * COLS];
        let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / COLS as f64;
        let sq = row.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / COLS as f64;
        expect_close(
            "out",
            i,
            got[i],
            want(f64::from(xv[i]), mean, sq, i % COLS),
            1e-4,
        )?;
    }
    Ok(())
}

#[cfg(nuvec_has = "fast::rms_norm")]
fn prepare_rms_norm() -> Result<Prepared, Skip> {
    let (xv, wv) = (uniform(N, 31), uniform(COLS, 32));
    let x = array(xv.clone(), &[ROWS, COLS])?;
    let w = array(wv.clone(), &[COLS])?;
    Ok(Prepared {
        work: ((2 * N + COLS) * F32) as f64,
        build: Box::new(move || Ok(vec![nuvec_core::fast::rms_norm(&x, Some(&w), EPS)?])),
        check: Box::new(move |out| {
            check_norm(out, &xv, |x, _, sq, c| {
                x / (sq + f64::from(EPS)).sqrt() * f64::from(wv[c])
            })
        }),
    })
}

#[cfg(not(nuvec_has = "fast::rms_norm"))]
fn prepare_rms_norm() -> Result<Prepared, Skip> {
    unavailable("fast::rms_norm (the fused norms)")
}

#[cfg(nuvec_has = "fast::layer_norm")]
fn prepare_layer_norm() -> Result<Prepared, Skip> {
    let (xv, wv, bv) = (uniform(N, 33), uniform(COLS, 34), uniform(COLS, 35));
    let x = array(xv.clone(), &[ROWS, COLS])?;
    let w = array(wv.clone(), &[COLS])?;
    let b = array(bv.clone(), &[COLS])?;
    Ok(Prepared {
        work: ((2 * N + 2 * COLS) * F32) as f64,
        build: Box::new(move || {
            Ok(vec![nuvec_core::fast::layer_norm(
                &x,
                Some(&w),
                Some(&b),
                EPS,
            )?])
        }),
        check: Box::new(move |out| {
            check_norm(out, &xv, |x, mean, sq, c| {
                let var = sq - mean * mean;
                (x - mean) / (var + f64::from(EPS)).sqrt() * f64::from(wv[c]) + f64::from(bv[c])
            })
        }),
    })
}

#[cfg(not(nuvec_has = "fast::layer_norm"))]
fn prepare_layer_norm() -> Result<Prepared, Skip> {
    unavailable("fast::layer_norm (the fused norms)")
}

#[cfg(nuvec_has = "fast::rope")]
fn prepare_rope() -> Result<Prepared, Skip> {
    rope_case(8, 512)
}

#[cfg(nuvec_has = "fast::rope")]
fn prepare_rope_large() -> Result<Prepared, Skip> {
    rope_case(32, 1024)
}

/// `rope` over `[1, H, T, 128]` at offset 0, base 1e4, every feature rotated.
#[cfg(nuvec_has = "fast::rope")]
#[allow(non_snake_case)]
fn rope_case(H: usize, T: usize) -> Result<Prepared, Skip> {
    const D: usize = 128;
    let n = H * T * D;
    let xv = uniform(n, 36);
    let x = array(xv.clone(), &[1, H, T, D])?;
    let offset = array(vec![0i32], &[])?;
    Ok(Prepared {
        work: (2 * n * F32) as f64,
        build: Box::new(move || {
            Ok(vec![nuvec_core::fast::rope(
                &x,
                D,
                false,
                Some(10000.0),
                1.0,
                &offset,
                None,
            )?])
        }),
        check: Box::new(move |out| {
            expect_shape(out, &[1, H, T, D])?;
            let got = output_f32(out)?;
            let half = D / 2;
            for i in samples(n) {
                let (t, d) = ((i / D) % T, i % D);
                let pair = d % half;
                let base = i - d;
                let theta = 10000f64.powf(-2.0 * pair as f64 / D as f64);
                let (s, c) = (t as f64 * theta).sin_cos();
                let first = f64::from(xv[base + pair]);
                let second = f64::from(xv[base + pair + half]);
                let want = if d < half {
                    first * c - second * s
                } else {
                    first * s + second * c
                };
                expect_close("out", i, got[i], want, 1e-4)?;
            }
            Ok(())
        }),
    })
}

#[cfg(not(nuvec_has = "fast::rope"))]
fn prepare_rope() -> Result<Prepared, Skip> {
    unavailable("fast::rope (the fused rotary embedding)")
}

#[cfg(not(nuvec_has = "fast::rope"))]
fn prepare_rope_large() -> Result<Prepared, Skip> {
    unavailable("fast::rope (the fused rotary embedding)")
}

#[cfg(nuvec_has = "fast::scaled_dot_product_attention")]
fn prepare_decode_4k() -> Result<Prepared, Skip> {
    decode_case(nuvec_core::DType::F32)
}

#[cfg(nuvec_has = "fast::scaled_dot_product_attention")]
fn prepare_decode_4k_bf16() -> Result<Prepared, Skip> {
    decode_case(nuvec_core::DType::BF16)
}

/// One query token of 32 heads against 4096 keys and values of 8 heads, in `dtype` (the
/// values rounded to it first; the reference reads the rounded values).
#[cfg(nuvec_has = "fast::scaled_dot_product_attention")]
fn decode_case(dtype: nuvec_core::DType) -> Result<Prepared, Skip> {
    use nuvec_core::fast::{AttentionMask, scaled_dot_product_attention};
    const HQ: usize = 32;
    const HKV: usize = 8;
    const L: usize = 4096;
    const D: usize = 128;
    let (qv, kv, vv) = (
        uniform(HQ * D, 41),
        uniform(HKV * L * D, 42),
        uniform(HKV * L * D, 43),
    );
    let rounded =
        |values: Vec<f32>, shape: &[usize]| -> Result<(nuvec_core::Array, Vec<f32>), Skip> {
            let a = array(values, shape)?.astype(dtype)?;
            a.eval()?;
            let back = output_f32(std::slice::from_ref(&a)).map_err(Skip::Failed)?;
            Ok((a, back))
        };
    let (q, qv) = rounded(qv, &[1, HQ, 1, D])?;
    let (k, kv) = rounded(kv, &[1, HKV, L, D])?;
    let (v, vv) = rounded(vv, &[1, HKV, L, D])?;
    let scale = 1.0 / (D as f32).sqrt();
    let (bytes, tol) = match dtype {
        nuvec_core::DType::F32 => (F32, 1e-4),
        _ => (2, 1e-2),
    };
    Ok(Prepared {
        work: ((2 * HQ * D + 2 * HKV * L * D) * bytes) as f64,
        build: Box::new(move || {
            Ok(vec![scaled_dot_product_attention(
                &q,
                &k,
                &v,
                scale,
                AttentionMask::None,
                None,
            )?])
        }),
        check: Box::new(move |out| {
            expect_shape(out, &[1, HQ, 1, D])?;
            let got = output_f32(out)?;
            for h in [0, 13, HQ - 1] {
                let g = h / (HQ / HKV);
                let qh = &qv[h * D..(h + 1) * D];
                let scores: Vec<f64> = (0..L)
                    .map(|j| {
                        let kj = &kv[(g * L + j) * D..(g * L + j + 1) * D];
                        let dot: f64 = qh
                            .iter()
                            .zip(kj)
                            .map(|(&a, &b)| f64::from(a) * f64::from(b))
                            .sum();
                        dot * f64::from(scale)
                    })
                    .collect();
                let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let p: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
                let z: f64 = p.iter().sum();
                for d in 0..D {
                    let want: f64 = (0..L)
                        .map(|j| p[j] * f64::from(vv[(g * L + j) * D + d]))
                        .sum::<f64>()
                        / z;
                    expect_close("out", h * D + d, got[h * D + d], want, tol)?;
                }
            }
            Ok(())
        }),
    })
}

#[cfg(not(nuvec_has = "fast::scaled_dot_product_attention"))]
fn prepare_decode_4k() -> Result<Prepared, Skip> {
    unavailable("fast::scaled_dot_product_attention (the fused attention)")
}

#[cfg(not(nuvec_has = "fast::scaled_dot_product_attention"))]
fn prepare_decode_4k_bf16() -> Result<Prepared, Skip> {
    unavailable("fast::scaled_dot_product_attention (the fused attention)")
}
