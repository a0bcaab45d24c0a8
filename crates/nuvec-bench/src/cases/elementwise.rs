//! Memory-bound elementwise cases on [1024, 4096] f32: `add`, `exp`, `where`, and the copy of
//! a transposed view, `transpose_copy`.

use nuvec_core::{Array, add, contiguous, exp, where_};

use super::{COLS, F32, N, ROWS};
use crate::case::{Case, Prepared, Skip, Target, Unit};
use crate::inputs::{array, expect_close, expect_shape, output_f32, samples, uniform};

const SHAPE: &str = "[1024, 4096]";

/// The CPU cases of this family.
pub fn cpu() -> Vec<Case> {
    vec![
        Case::new(
            "add",
            Target::Cpu,
            SHAPE,
            "f32",
            Unit::GBps,
            30,
            prepare_add,
        ),
        Case::new(
            "exp",
            Target::Cpu,
            SHAPE,
            "f32",
            Unit::GBps,
            30,
            prepare_exp,
        ),
        Case::new(
            "where",
            Target::Cpu,
            SHAPE,
            "f32",
            Unit::GBps,
            30,
            prepare_where,
        ),
        Case::new(
            "transpose_copy",
            Target::Cpu,
            SHAPE,
            "f32",
            Unit::GBps,
            30,
            prepare_transpose_copy,
        ),
    ]
}

/// Checks an elementwise result of the [1024, 4096] inputs against `want(i)`.
fn check_each(
    outputs: &[Array],
    shape: &[usize],
    tol: f64,
    want: impl Fn(usize) -> f64,
) -> Result<(), String> {
    expect_shape(outputs, shape)?;
    let got = output_f32(outputs)?;
    for i in samples(got.len()) {
        expect_close("out", i, got[i], want(i), tol)?;
    }
    Ok(())
}

fn prepare_add() -> Result<Prepared, Skip> {
    let (xv, yv) = (uniform(N, 1), uniform(N, 2));
    let x = array(xv.clone(), &[ROWS, COLS])?;
    let y = array(yv.clone(), &[ROWS, COLS])?;
    Ok(Prepared {
        work: (3 * N * F32) as f64,
        build: Box::new(move || Ok(vec![add(&x, &y)?])),
        check: Box::new(move |out| {
            check_each(out, &[ROWS, COLS], 1e-6, |i| {
                f64::from(xv[i]) + f64::from(yv[i])
            })
        }),
    })
}

fn prepare_exp() -> Result<Prepared, Skip> {
    let xv = uniform(N, 3);
    let x = array(xv.clone(), &[ROWS, COLS])?;
    Ok(Prepared {
        work: (2 * N * F32) as f64,
        build: Box::new(move || Ok(vec![exp(&x)?])),
        check: Box::new(move |out| {
            check_each(out, &[ROWS, COLS], 1e-6, |i| f64::from(xv[i]).exp())
        }),
    })
}

fn prepare_where() -> Result<Prepared, Skip> {
    let (xv, yv) = (uniform(N, 4), uniform(N, 5));
    let cv: Vec<bool> = uniform(N, 6).iter().map(|&v| v > 0.0).collect();
    let c = array(cv.clone(), &[ROWS, COLS])?;
    let x = array(xv.clone(), &[ROWS, COLS])?;
    let y = array(yv.clone(), &[ROWS, COLS])?;
    Ok(Prepared {
        // A one-byte condition and two f32 inputs read, one f32 output written.
        work: (N + 3 * N * F32) as f64,
        build: Box::new(move || Ok(vec![where_(&c, &x, &y)?])),
        check: Box::new(move |out| {
            check_each(out, &[ROWS, COLS], 0.0, |i| {
                f64::from(if cv[i] { xv[i] } else { yv[i] })
            })
        }),
    })
}

fn prepare_transpose_copy() -> Result<Prepared, Skip> {
    let xv = uniform(N, 7);
    let x = array(xv.clone(), &[ROWS, COLS])?;
    Ok(Prepared {
        work: (2 * N * F32) as f64,
        build: Box::new(move || Ok(vec![contiguous(&x.t()?)?])),
        check: Box::new(move |out| {
            // Output [COLS, ROWS]: element (j, i) is x[i, j].
            check_each(out, &[COLS, ROWS], 0.0, |k| {
                let (j, i) = (k / ROWS, k % ROWS);
                f64::from(xv[i * COLS + j])
            })
        }),
    })
}
