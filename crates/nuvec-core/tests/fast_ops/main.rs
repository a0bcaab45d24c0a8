//! The fused operations (`nuvec_core::fast`) on the CPU against direct float64 formulas
//! written here: several shapes, dtypes and layouts per operation, grouped-query attention,
//! masks and sinks, the paged cache against contiguous attention, slots against
//! per-sequence recurrences, fused nodes built by hand (evaluated through their fallback),
//! and one test per argument error. This file holds the helpers; the tests are in its
//! modules.

#[path = "../common/mod.rs"]
mod common;

mod attention;
mod cpu_kernels;
mod errors;
mod gated_delta;
mod gather_conv;
mod gather_qmm;
mod gpu_stream;
mod nodes;
mod norms;
mod paged;
mod rope;

pub use common::Rng;
pub use nuvec_core::*;

/// The floating types every operation takes.
pub const FLOATS: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];

/// The tolerance of a result rounded to `dtype` against a float64 reference (relative to
/// the larger of 1 and the reference).
pub fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 1e-12,
        DType::F32 => 2e-5,
        DType::F16 => 4e-3,
        _ => 3e-2,
    }
}

/// The elements as f64, row-major.
pub fn values(a: &Array) -> Vec<f64> {
    a.astype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

/// Uniform values in `[lo, hi)` of `shape`, rounded to `dtype`.
pub fn uniform(rng: &mut Rng, shape: &[usize], lo: f64, hi: f64, dtype: DType) -> Array {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|_| rng.range(lo, hi)).collect();
    Array::from_slice(&v, shape).unwrap().astype(dtype).unwrap()
}

/// Uniform values in `[-1, 1)`.
pub fn rand(rng: &mut Rng, shape: &[usize], dtype: DType) -> Array {
    uniform(rng, shape, -1.0, 1.0, dtype)
}

/// The same values as `x` in a strided layout: stored with the axes reversed and viewed
/// back through a transpose.
pub fn strided(x: &Array) -> Array {
    let rev: Vec<usize> = (0..x.ndim()).rev().collect();
    let stored = contiguous(&transpose(x, &rev).unwrap()).unwrap();
    stored.eval().unwrap();
    transpose(&stored, &rev).unwrap()
}

/// Checks shape, dtype and every element against a reference.
pub fn check(name: &str, got: &Array, shape: &[usize], dtype: DType, want: &[f64], tol: f64) {
    assert_eq!(got.shape(), shape, "{name}: shape");
    assert_eq!(got.dtype(), dtype, "{name}: dtype");
    let g = values(got);
    assert_eq!(g.len(), want.len(), "{name}: element count");
    for (i, (a, b)) in g.iter().zip(want).enumerate() {
        let ok = (a - b).abs() <= tol * b.abs().max(1.0) || (a.is_nan() && b.is_nan());
        assert!(ok, "{name}: element {i}: {a} vs {b}");
    }
}

/// Checks two arrays for equal shape, dtype and elements (within `tol`).
pub fn check_same(name: &str, got: &Array, want: &Array, tol: f64) {
    check(name, got, want.shape(), want.dtype(), &values(want), tol);
}

/// `a` evaluated, with the error's message when it fails.
pub fn expect_err<T>(r: Result<T>, op: &str) {
    match r {
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains(op), "{msg:?} should name {op}");
        }
        Ok(_) => panic!("{op}: expected an error"),
    }
}

/// The slice `[start, stop)` of axis `axis`.
pub fn part(a: &Array, axis: usize, start: usize, stop: usize) -> Array {
    let mut args = vec![SliceArg::full(); a.ndim()];
    args[axis] = SliceArg::new(Some(start as isize), Some(stop as isize), 1);
    slice(a, &args).unwrap()
}

/// Row-major strides of `shape`, in elements.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// The flat index of `index` in a row-major array of `shape`.
pub fn flat(shape: &[usize], index: &[usize]) -> usize {
    strides(shape).iter().zip(index).map(|(s, i)| s * i).sum()
}
