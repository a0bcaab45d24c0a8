//! Deterministic inputs and the helpers the cases' result checks share.

use nuvec_core::{Array, Element, eval};

use crate::case::Skip;

/// Uniform values in [-1, 1) from a fixed seed (splitmix64), so every run sees the same data.
pub fn uniform(n: usize, seed: u64) -> Vec<f32> {
    (0..n).map(|i| uniform_at(seed, i)).collect()
}

/// Element `i` of [`uniform`]`(_, seed)`: splitmix64 is a counter-based generator, so any
/// element can be computed on its own (and large inputs in parallel).
pub fn uniform_at(seed: u64, i: usize) -> f32 {
    const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
    let start = seed.wrapping_mul(GOLDEN) ^ 0xD1B5_4A32_D192_ED03;
    let mut z = start.wrapping_add((i as u64).wrapping_add(1).wrapping_mul(GOLDEN));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    // The top 24 bits give an exact f32 in [0, 1).
    ((z >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
}

/// `to(uniform_at(seed, i))` for `i` in `0..n`, over the host's threads (the GPU cases'
/// inputs reach 2^30 elements).
pub fn uniform_with<T: Copy + Send>(n: usize, seed: u64, to: &(dyn Fn(f32) -> T + Sync)) -> Vec<T> {
    let mut out = vec![to(0.0); n];
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let chunk = n.div_ceil(threads).max(1 << 16);
    std::thread::scope(|s| {
        for (c, part) in out.chunks_mut(chunk).enumerate() {
            s.spawn(move || {
                for (j, v) in part.iter_mut().enumerate() {
                    *v = to(uniform_at(seed, c * chunk + j));
                }
            });
        }
    });
    out
}

/// An evaluated array holding `values` with `shape`.
pub fn array<T: Element>(values: Vec<T>, shape: &[usize]) -> Result<Array, Skip> {
    let a = Array::from_vec(values, shape)?;
    eval(std::slice::from_ref(&a))?;
    Ok(a)
}

/// About 64 indices spread over `0..n`, always including the first and the last.
pub fn samples(n: usize) -> Vec<usize> {
    if n == 0 {
        return Vec::new();
    }
    let step = (n / 61).max(1);
    let mut out: Vec<usize> = (0..n).step_by(step).collect();
    if out.last() != Some(&(n - 1)) {
        out.push(n - 1);
    }
    out
}

/// The single output of a run, as f32 values.
pub fn output_f32(outputs: &[Array]) -> Result<Vec<f32>, String> {
    let out = outputs.first().ok_or("no output")?;
    out.astype(nuvec_core::DType::F32)
        .and_then(|a| a.to_vec::<f32>())
        .map_err(|e| e.to_string())
}

/// Checks `got` against `want` at index `i`: `|got - want| <= tol` (NaNs never pass).
pub fn expect_close(what: &str, i: usize, got: f32, want: f64, tol: f64) -> Result<(), String> {
    if (f64::from(got) - want).abs() <= tol {
        Ok(())
    } else {
        Err(format!(
            "{what}[{i}] = {got}, expected {want} (tolerance {tol})"
        ))
    }
}

/// Checks the output's shape.
pub fn expect_shape(outputs: &[Array], shape: &[usize]) -> Result<(), String> {
    match outputs.first() {
        Some(out) if out.shape() == shape => Ok(()),
        Some(out) => Err(format!("shape {:?}, expected {shape:?}", out.shape())),
        None => Err("no output".into()),
    }
}
