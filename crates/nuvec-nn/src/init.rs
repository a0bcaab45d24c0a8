//! Parameter initialisers, as MLX's `nn.init`. Each returns a new array of the given shape
//! and dtype; the random ones draw from nuvec-core's global key (seed it with
//! [`nuvec_core::random::seed`]).
//!
//! ```
//! use nuvec_core::DType;
//! use nuvec_nn::init;
//!
//! # fn main() -> nuvec_nn::Result<()> {
//! let w = init::glorot_uniform(&[64, 32], 1.0, DType::F32)?;
//! let limit = (6.0f32 / 96.0).sqrt();
//! assert!(w.to_vec::<f32>()?.iter().all(|v| v.abs() <= limit));
//! # Ok(())
//! # }
//! ```

use nuvec_core::{Array, DType, random};

use crate::error::{Result, invalid};

/// An array of `shape` filled with `value`.
pub fn constant(value: f64, shape: &[usize], dtype: DType) -> Result<Array> {
    Ok(nuvec_core::full(shape, value, dtype)?)
}

/// Samples from the uniform distribution on `[low, high)`.
pub fn uniform(low: f64, high: f64, shape: &[usize], dtype: DType) -> Result<Array> {
    Ok(random::uniform(low, high, shape, dtype, None)?)
}

/// Samples from the normal distribution of mean `mean` and standard deviation `std`.
pub fn normal(mean: f64, std: f64, shape: &[usize], dtype: DType) -> Result<Array> {
    Ok(random::normal(shape, dtype, mean, std, None)?)
}

/// The `n × n` identity matrix.
pub fn identity(n: usize, dtype: DType) -> Result<Array> {
    Ok(nuvec_core::identity(n, dtype)?)
}

/// Which fan [`he_normal`] and [`he_uniform`] scale by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FanMode {
    /// The number of inputs (MLX's default `"fan_in"`).
    #[default]
    FanIn,
    /// The number of outputs (`"fan_out"`).
    FanOut,
}

/// `(fan_in, fan_out)` of a weight of `shape`, as MLX computes them: `[out, in]` for a
/// matrix; for more axes `[out, ..., in]` with the middle axes (a convolution's kernel)
/// multiplying both. At least 2 dimensions.
pub fn fans(shape: &[usize]) -> Result<(usize, usize)> {
    match shape.len() {
        0 | 1 => Err(invalid(
            "init",
            format!("Glorot and He initialisation need at least 2 dimensions, got {shape:?}"),
        )),
        2 => Ok((shape[1], shape[0])),
        n => {
            let receptive: usize = shape[1..n - 1].iter().product();
            Ok((shape[n - 1] * receptive, shape[0] * receptive))
        }
    }
}

/// Glorot (Xavier) normal: standard deviation `gain · √(2 / (fan_in + fan_out))`.
pub fn glorot_normal(shape: &[usize], gain: f64, dtype: DType) -> Result<Array> {
    let (fan_in, fan_out) = fans(shape)?;
    let std = gain * (2.0 / (fan_in + fan_out) as f64).sqrt();
    normal(0.0, std, shape, dtype)
}

/// Glorot (Xavier) uniform: `[-limit, limit)` with `limit = gain · √(6 / (fan_in +
/// fan_out))`.
pub fn glorot_uniform(shape: &[usize], gain: f64, dtype: DType) -> Result<Array> {
    let (fan_in, fan_out) = fans(shape)?;
    let limit = gain * (6.0 / (fan_in + fan_out) as f64).sqrt();
    uniform(-limit, limit, shape, dtype)
}

fn fan(shape: &[usize], mode: FanMode) -> Result<usize> {
    let (fan_in, fan_out) = fans(shape)?;
    Ok(match mode {
        FanMode::FanIn => fan_in,
        FanMode::FanOut => fan_out,
    })
}

/// He (Kaiming) normal: standard deviation `gain / √fan`.
pub fn he_normal(shape: &[usize], mode: FanMode, gain: f64, dtype: DType) -> Result<Array> {
    let std = gain / (fan(shape, mode)? as f64).sqrt();
    normal(0.0, std, shape, dtype)
}

/// He (Kaiming) uniform: `[-limit, limit)` with `limit = gain · √(3 / fan)`.
pub fn he_uniform(shape: &[usize], mode: FanMode, gain: f64, dtype: DType) -> Result<Array> {
    let limit = gain * (3.0 / fan(shape, mode)? as f64).sqrt();
    uniform(-limit, limit, shape, dtype)
}
