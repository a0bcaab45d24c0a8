//! Matrix products: `matmul_2048` in f32, bf16 and f16 (2 · 2048³ useful FLOPs a run).

#[allow(unused_imports)]
use nuvec_core::{Element, bf16, f16};

#[allow(unused_imports)]
use crate::case::{Case, Prepared, Skip, Target, Unit, unavailable};
#[allow(unused_imports)]
use crate::inputs::{array, expect_close, expect_shape, output_f32, uniform};

#[allow(dead_code)]
const M: usize = 2048;
const SHAPE: &str = "[2048, 2048] x [2048, 2048]";

/// The CPU cases of this family.
pub fn cpu() -> Vec<Case> {
    let case = |name, dtype, prepare| {
        let mut c = Case::new(name, Target::Cpu, SHAPE, dtype, Unit::GFlops, 5, prepare);
        c.warmup = 1;
        c
    };
    vec![
        case("matmul_2048", "f32", prepare_f32 as fn() -> _),
        case("matmul_2048_bf16", "bf16", prepare_bf16),
        case("matmul_2048_f16", "f16", prepare_f16),
    ]
}

/// Inputs of type `T` (rounded from uniform f32 values), the product, and a check of sampled
/// entries against an f64 dot product of the rounded inputs; `rel` is the output's rounding.
#[cfg(nuvec_has = "matmul")]
fn prepare<T: Element>(to: fn(f32) -> T, back: fn(T) -> f32, rel: f64) -> Result<Prepared, Skip> {
    let av: Vec<T> = uniform(M * M, 21).into_iter().map(to).collect();
    let bv: Vec<T> = uniform(M * M, 22).into_iter().map(to).collect();
    let a = array(av.clone(), &[M, M])?;
    let b = array(bv.clone(), &[M, M])?;
    Ok(Prepared {
        work: 2.0 * (M as f64).powi(3),
        build: Box::new(move || Ok(vec![nuvec_core::matmul(&a, &b)?])),
        check: Box::new(move |out| {
            expect_shape(out, &[M, M])?;
            let got = output_f32(out)?;
            for s in 0..16 {
                let (i, j) = ((s * 131 + 7) % M, (s * 977 + 3) % M);
                let want: f64 = (0..M)
                    .map(|k| f64::from(back(av[i * M + k])) * f64::from(back(bv[k * M + j])))
                    .sum();
                expect_close(
                    "out",
                    i * M + j,
                    got[i * M + j],
                    want,
                    rel * want.abs() + 1e-2,
                )?;
            }
            Ok(())
        }),
    })
}

#[cfg(nuvec_has = "matmul")]
fn prepare_f32() -> Result<Prepared, Skip> {
    prepare::<f32>(|v| v, |v| v, 1e-5)
}

#[cfg(nuvec_has = "matmul")]
fn prepare_bf16() -> Result<Prepared, Skip> {
    prepare::<bf16>(bf16::from_f32, bf16::to_f32, 1.0 / 128.0)
}

#[cfg(nuvec_has = "matmul")]
fn prepare_f16() -> Result<Prepared, Skip> {
    prepare::<f16>(f16::from_f32, f16::to_f32, 1.0 / 1024.0)
}

#[cfg(not(nuvec_has = "matmul"))]
fn prepare_f32() -> Result<Prepared, Skip> {
    unavailable("nuvec_core::matmul (the linalg family)")
}

#[cfg(not(nuvec_has = "matmul"))]
fn prepare_bf16() -> Result<Prepared, Skip> {
    unavailable("nuvec_core::matmul (the linalg family)")
}

#[cfg(not(nuvec_has = "matmul"))]
fn prepare_f16() -> Result<Prepared, Skip> {
    unavailable("nuvec_core::matmul (the linalg family)")
}
