//! Row reductions on [1024, 4096] f32 over the last axis: `sum_rows`, `softmax`, `logsumexp`.
//!
//! Each waits for its operation in nuvec-core (see build.rs) and says so until then.

#[allow(unused_imports)]
use super::{COLS, F32, N, ROWS};
#[allow(unused_imports)]
use crate::case::{Case, Prepared, Skip, Target, Unit, unavailable};
#[allow(unused_imports)]
use crate::inputs::{array, expect_close, expect_shape, output_f32, samples, uniform};

const SHAPE: &str = "[1024, 4096]";

/// The CPU cases of this family.
pub fn cpu() -> Vec<Case> {
    vec![
        Case::new(
            "sum_rows",
            Target::Cpu,
            SHAPE,
            "f32",
            Unit::GBps,
            30,
            prepare_sum_rows,
        ),
        Case::new(
            "softmax",
            Target::Cpu,
            SHAPE,
            "f32",
            Unit::GBps,
            20,
            prepare_softmax,
        ),
        Case::new(
            "logsumexp",
            Target::Cpu,
            SHAPE,
            "f32",
            Unit::GBps,
            20,
            prepare_logsumexp,
        ),
    ]
}

/// Per-row reference values of `f` over the input rows, checked at sampled rows.
#[allow(dead_code)]
fn check_rows(got: &[f32], xv: &[f32], tol: f64, f: impl Fn(&[f64]) -> f64) -> Result<(), String> {
    for r in samples(ROWS) {
        let row: Vec<f64> = xv[r * COLS..(r + 1) * COLS]
            .iter()
            .map(|&v| f64::from(v))
            .collect();
        expect_close("out", r, got[r], f(&row), tol)?;
    }
    Ok(())
}

#[cfg(nuvec_has = "sum")]
fn prepare_sum_rows() -> Result<Prepared, Skip> {
    let xv = uniform(N, 11);
    let x = array(xv.clone(), &[ROWS, COLS])?;
    Ok(Prepared {
        work: ((N + ROWS) * F32) as f64,
        build: Box::new(move || Ok(vec![nuvec_core::sum(&x, &[-1], false)?])),
        check: Box::new(move |out| {
            expect_shape(out, &[ROWS])?;
            check_rows(&output_f32(out)?, &xv, 1e-3, |row| row.iter().sum())
        }),
    })
}

#[cfg(not(nuvec_has = "sum"))]
fn prepare_sum_rows() -> Result<Prepared, Skip> {
    unavailable("nuvec_core::sum (the reductions)")
}

#[cfg(nuvec_has = "logsumexp")]
fn row_logsumexp(row: &[f64]) -> f64 {
    let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    m + row.iter().map(|v| (v - m).exp()).sum::<f64>().ln()
}

#[cfg(nuvec_has = "softmax")]
fn prepare_softmax() -> Result<Prepared, Skip> {
    let xv = uniform(N, 12);
    let x = array(xv.clone(), &[ROWS, COLS])?;
    Ok(Prepared {
        work: (2 * N * F32) as f64,
        build: Box::new(move || Ok(vec![nuvec_core::softmax(&x, &[-1])?])),
        check: Box::new(move |out| {
            expect_shape(out, &[ROWS, COLS])?;
            let got = output_f32(out)?;
            for i in samples(N) {
                let r = i / COLS;
                let row = &xv[r * COLS..(r + 1) * COLS];
                let m = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
                let z: f64 = row.iter().map(|&v| f64::from(v - m).exp()).sum();
                let want = f64::from(xv[i] - m).exp() / z;
                expect_close("out", i, got[i], want, 1e-6)?;
            }
            Ok(())
        }),
    })
}

#[cfg(not(nuvec_has = "softmax"))]
fn prepare_softmax() -> Result<Prepared, Skip> {
    unavailable("nuvec_core::softmax (the reductions)")
}

#[cfg(nuvec_has = "logsumexp")]
fn prepare_logsumexp() -> Result<Prepared, Skip> {
    let xv = uniform(N, 13);
    let x = array(xv.clone(), &[ROWS, COLS])?;
    Ok(Prepared {
        work: ((N + ROWS) * F32) as f64,
        build: Box::new(move || Ok(vec![nuvec_core::logsumexp(&x, &[-1], false)?])),
        check: Box::new(move |out| {
            expect_shape(out, &[ROWS])?;
            check_rows(&output_f32(out)?, &xv, 1e-4, row_logsumexp)
        }),
    })
}

#[cfg(not(nuvec_has = "logsumexp"))]
fn prepare_logsumexp() -> Result<Prepared, Skip> {
    unavailable("nuvec_core::logsumexp (the reductions)")
}
