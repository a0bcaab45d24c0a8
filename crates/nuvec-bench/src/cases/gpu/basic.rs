//! Memory-bound basics and matrix products on the GPU: `copy` (the bandwidth ceiling, and at
//! the decoding cases' sizes `copy_32mib` and `copy_8mib`),
//! `add`, the two casts, `sum_rows` (bf16 and f32), `matmul_8192`, the linear layers
//! (`gemv_4096_14336`, `linear_m*`) and the per-operation overhead `tiny_op_chain`.

use nuvec_core::{Array, DType, bf16};

use super::{BF16, COLS, F32, GN, ROWS, bf, bf16_input, f32_input, fl, near, read};
use crate::case::{Prepared, Skip};
use crate::inputs::{array, samples};

/// Elements of the `add` and cast inputs.
const N28: usize = 1 << 28;
/// Elements of the `copy` input.
const N30: usize = 1 << 30;

pub(super) fn copy() -> Result<Prepared, Skip> {
    copy_of(N30)
}

/// A copy that moves 32 MiB: the bandwidth ceiling at the size of the decoding cases
/// (`qmv_14336x4096` reads 33 MB, `decode_b1_8k` 34 MB), where a launch's start and end weigh.
pub(super) fn copy_32mib() -> Result<Prepared, Skip> {
    copy_of(1 << 23)
}

/// A copy that moves 8 MiB: `moe_qmv_1`'s size (7 MB of experts).
pub(super) fn copy_8mib() -> Result<Prepared, Skip> {
    copy_of(1 << 21)
}

/// A device-to-device copy of `n` bf16 values.
fn copy_of(n: usize) -> Result<Prepared, Skip> {
    let x = bf16_input(&[n], 101)?;
    Ok(Prepared {
        work: (2 * n * BF16) as f64,
        // `x` is held here, so the copy cannot take over its buffer: a real copy each run.
        build: Box::new(move || Ok(vec![nuvec_core::copy(&x)?])),
        check: Box::new(move |out| {
            let got = read(out, 0, &[n], DType::BF16)?;
            for i in samples(n) {
                near("copy", i, got[i], bf(101, i), 0.0, 0.0)?;
            }
            Ok(())
        }),
    })
}

pub(super) fn add() -> Result<Prepared, Skip> {
    let a = bf16_input(&[N28], 102)?;
    let b = bf16_input(&[N28], 103)?;
    Ok(Prepared {
        work: (3 * N28 * BF16) as f64,
        build: Box::new(move || Ok(vec![nuvec_core::add(&a, &b)?])),
        check: Box::new(|out| {
            let got = read(out, 0, &[N28], DType::BF16)?;
            for i in samples(N28) {
                // One rounding of the exact sum.
                near("add", i, got[i], bf(102, i) + bf(103, i), 1.0 / 256.0, 0.0)?;
            }
            Ok(())
        }),
    })
}

pub(super) fn cast_f32_bf16() -> Result<Prepared, Skip> {
    let x = f32_input(&[N28], 104)?;
    Ok(Prepared {
        work: (N28 * (F32 + BF16)) as f64,
        build: Box::new(move || Ok(vec![x.astype(DType::BF16)?])),
        check: Box::new(|out| {
            let got = read(out, 0, &[N28], DType::BF16)?;
            for i in samples(N28) {
                // Round to nearest even, as the host's conversion.
                let want = f64::from(bf16::from_f64(fl(104, i)).to_f32());
                near("cast", i, got[i], want, 0.0, 0.0)?;
            }
            Ok(())
        }),
    })
}

pub(super) fn cast_bf16_f32() -> Result<Prepared, Skip> {
    let x = bf16_input(&[N28], 105)?;
    Ok(Prepared {
        work: (N28 * (F32 + BF16)) as f64,
        build: Box::new(move || Ok(vec![x.astype(DType::F32)?])),
        check: Box::new(|out| {
            let got = read(out, 0, &[N28], DType::F32)?;
            for i in samples(N28) {
                near("cast", i, got[i], bf(105, i), 0.0, 0.0)?;
            }
            Ok(())
        }),
    })
}

/// `sum(x, -1)` over [16384, 4096] of `dtype`; the f64 sums of sampled rows as reference.
fn sum_rows(dtype: DType, seed: u64) -> Result<Prepared, Skip> {
    let (x, size, value): (Array, usize, fn(u64, usize) -> f64) = match dtype {
        DType::BF16 => (bf16_input(&[ROWS, COLS], seed)?, BF16, bf),
        _ => (f32_input(&[ROWS, COLS], seed)?, F32, fl),
    };
    // bf16 results are rounded once; f32 ones carry the accumulation's error.
    let (rel, abs) = if dtype == DType::BF16 {
        (1.0 / 128.0, 0.02)
    } else {
        (1e-5, 5e-3)
    };
    Ok(Prepared {
        work: ((GN + ROWS) * size) as f64,
        build: Box::new(move || Ok(vec![nuvec_core::sum(&x, &[-1], false)?])),
        check: Box::new(move |out| {
            let got = read(out, 0, &[ROWS], dtype)?;
            for r in samples(ROWS) {
                let want: f64 = (0..COLS).map(|c| value(seed, r * COLS + c)).sum();
                near("sum", r, got[r], want, rel, abs)?;
            }
            Ok(())
        }),
    })
}

pub(super) fn sum_rows_bf16() -> Result<Prepared, Skip> {
    sum_rows(DType::BF16, 106)
}

pub(super) fn sum_rows_f32() -> Result<Prepared, Skip> {
    sum_rows(DType::F32, 107)
}

/// `x [m, k] @ w [n, k]ᵀ` in bf16 (a linear layer's weight, transposed as a view), checked
/// at 16 entries against f64 dot products; the work is FLOPs, or bytes for `bytes`.
fn product(m: usize, k: usize, n: usize, transposed: bool, bytes: bool) -> Result<Prepared, Skip> {
    let (sx, sw) = (111, 112);
    let x = bf16_input(&[m, k], sx)?;
    let w = if transposed {
        bf16_input(&[n, k], sw)?
    } else {
        bf16_input(&[k, n], sw)?
    };
    // Element (kk, j) of the right operand.
    let right = move |kk: usize, j: usize| {
        if transposed {
            bf(sw, j * k + kk)
        } else {
            bf(sw, kk * n + j)
        }
    };
    let work = if bytes {
        ((m * k + k * n + m * n) * BF16) as f64
    } else {
        2.0 * (m * k * n) as f64
    };
    Ok(Prepared {
        work,
        build: Box::new(move || {
            let rhs = if transposed { w.t()? } else { w.clone() };
            Ok(vec![nuvec_core::matmul(&x, &rhs)?])
        }),
        check: Box::new(move |out| {
            let got = read(out, 0, &[m, n], DType::BF16)?;
            for s in 0..16 {
                let (i, j) = ((s * 131 + 7) % m, (s * 977 + 3) % n);
                let want: f64 = (0..k).map(|kk| bf(sx, i * k + kk) * right(kk, j)).sum();
                // The output's rounding, and f32 accumulation over k terms of size ~1.
                let abs = 1e-6 * k as f64;
                near("matmul", i * n + j, got[i * n + j], want, 1.0 / 128.0, abs)?;
            }
            Ok(())
        }),
    })
}

pub(super) fn matmul_8192() -> Result<Prepared, Skip> {
    product(8192, 8192, 8192, false, false)
}

pub(super) fn gemv() -> Result<Prepared, Skip> {
    product(1, 4096, 14336, true, true)
}

pub(super) fn linear_m16() -> Result<Prepared, Skip> {
    product(16, 4096, 14336, true, false)
}

pub(super) fn linear_m64() -> Result<Prepared, Skip> {
    product(64, 4096, 14336, true, false)
}

pub(super) fn linear_m256() -> Result<Prepared, Skip> {
    product(256, 4096, 14336, true, false)
}

/// Adds in one chain.
const OPS: usize = 1000;

pub(super) fn tiny_op_chain() -> Result<Prepared, Skip> {
    let a = array(vec![1.0f32], &[1])?;
    let b = array(vec![1.0f32], &[1])?;
    Ok(Prepared {
        work: OPS as f64,
        build: Box::new(move || {
            let mut y = a.clone();
            for _ in 0..OPS {
                y = nuvec_core::add(&y, &b)?;
            }
            Ok(vec![y])
        }),
        check: Box::new(|out| {
            let got = read(out, 0, &[1], DType::F32)?;
            // Integers below 2^24 are exact in f32.
            near("chain", 0, got[0], (OPS + 1) as f64, 0.0, 0.0)
        }),
    })
}

/// One elementwise kernel on one element (`[1] + [1]`), built and evaluated: the floor a
/// decode-sized call is measured against (a launch and the graph's bookkeeping).
pub(super) fn launch_floor() -> Result<Prepared, Skip> {
    let a = array(vec![1.0f32], &[1])?;
    let b = array(vec![2.0f32], &[1])?;
    Ok(Prepared {
        work: 1.0,
        build: Box::new(move || Ok(vec![nuvec_core::add(&a, &b)?])),
        check: Box::new(|out| {
            let got = read(out, 0, &[1], DType::F32)?;
            near("launch_floor", 0, got[0], 3.0, 0.0, 0.0)
        }),
    })
}
