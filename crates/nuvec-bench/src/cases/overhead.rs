//! `tiny_op_chain`: 1,000 adds of one-element arrays, built and evaluated; the figure is the
//! time per op, i.e. the cost of recording and scheduling a node, not of computing it.
//! `tiny_scalar_chain`: the same chain adding a Rust scalar (`y + 1.0`) instead of an array,
//! so that what a weakly typed scalar operand costs beyond an array operand shows.

use nuvec_core::add;

use crate::case::{Case, Prepared, Skip, Target, Unit};
use crate::inputs::{array, expect_close, expect_shape, output_f32};

/// Adds in one chain.
const OPS: usize = 1000;

/// The CPU cases of this family.
pub fn cpu() -> Vec<Case> {
    let mut c = Case::new(
        "tiny_op_chain",
        Target::Cpu,
        "1000 x ([1] + [1])",
        "f32",
        Unit::UsPerOp,
        50,
        prepare_tiny_op_chain,
    );
    c.warmup = 5;
    let mut s = Case::new(
        "tiny_scalar_chain",
        Target::Cpu,
        "1000 x ([1] + 1.0)",
        "f32",
        Unit::UsPerOp,
        50,
        prepare_tiny_scalar_chain,
    );
    s.warmup = 5;
    vec![c, s]
}

fn prepare_tiny_op_chain() -> Result<Prepared, Skip> {
    let a = array(vec![1.0f32], &[1])?;
    let b = array(vec![1.0f32], &[1])?;
    Ok(Prepared {
        work: OPS as f64,
        build: Box::new(move || {
            let mut y = a.clone();
            for _ in 0..OPS {
                y = add(&y, &b)?;
            }
            Ok(vec![y])
        }),
        check: Box::new(|out| {
            expect_shape(out, &[1])?;
            // Integers below 2^24 are exact in f32.
            expect_close("out", 0, output_f32(out)?[0], (OPS + 1) as f64, 0.0)
        }),
    })
}

fn prepare_tiny_scalar_chain() -> Result<Prepared, Skip> {
    let a = array(vec![1.0f32], &[1])?;
    Ok(Prepared {
        work: OPS as f64,
        build: Box::new(move || {
            let mut y = a.clone();
            for _ in 0..OPS {
                y = add(&y, 1.0f32)?;
            }
            Ok(vec![y])
        }),
        check: Box::new(|out| {
            expect_shape(out, &[1])?;
            // Integers below 2^24 are exact in f32.
            expect_close("out", 0, output_f32(out)?[0], (OPS + 1) as f64, 0.0)
        }),
    })
}
