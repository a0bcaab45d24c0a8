//! Activation functions, as MLX's `nn` functions (composed from nuvec-core's ops, so every
//! one is differentiable). The layer wrappers are in [`crate::layers::activation`].
//!
//! ```
//! use nuvec_core::Array;
//! use nuvec_nn::activations::{relu, silu};
//!
//! # fn main() -> nuvec_nn::Result<()> {
//! let x = Array::from_slice(&[-1.0f32, 0.0, 2.0], &[3])?;
//! assert_eq!(relu(&x)?.to_vec::<f32>()?, [0.0, 0.0, 2.0]);
//! let s = silu(&x)?.to_vec::<f32>()?;
//! assert!((s[2] - 2.0 / (1.0 + (-2.0f32).exp())).abs() < 1e-6);
//! # Ok(())
//! # }
//! ```

use nuvec_core::{
    Array, abs, add, divide, erf, expm1, greater, logaddexp, logsumexp, maximum, minimum, multiply,
    negative, sigmoid as core_sigmoid, split, subtract, tanh as core_tanh, where_,
};

use crate::error::Result;

/// `max(x, 0)`.
pub fn relu(x: &Array) -> Result<Array> {
    Ok(maximum(x, 0.0)?)
}

/// `min(max(x, 0), 6)`.
pub fn relu6(x: &Array) -> Result<Array> {
    Ok(minimum(maximum(x, 0.0)?, 6.0)?)
}

/// `max(negative_slope · x, x)` (MLX's default slope is 0.01).
pub fn leaky_relu(x: &Array, negative_slope: f64) -> Result<Array> {
    Ok(maximum(multiply(x, negative_slope)?, x)?)
}

/// `x` where positive, else `alpha · (eˣ − 1)` (MLX's default `alpha` is 1).
pub fn elu(x: &Array, alpha: f64) -> Result<Array> {
    Ok(where_(greater(x, 0.0)?, x, multiply(expm1(x)?, alpha)?)?)
}

/// The scaled ELU: `λ · elu(x, α)` with `α ≈ 1.67326` and `λ ≈ 1.05070`.
pub fn selu(x: &Array) -> Result<Array> {
    const ALPHA: f64 = 1.673_263_242_354_377_3;
    const LAMBDA: f64 = 1.050_700_987_355_480_5;
    Ok(multiply(elu(x, ALPHA)?, LAMBDA)?)
}

/// `max(x, 0) + alpha · (e^(min(x, 0) / alpha) − 1)` (MLX's default `alpha` is 1).
pub fn celu(x: &Array, alpha: f64) -> Result<Array> {
    let neg = multiply(expm1(&divide(minimum(x, 0.0)?, alpha)?)?, alpha)?;
    Ok(add(maximum(x, 0.0)?, neg)?)
}

/// The Gaussian error linear unit, exactly: `x · (1 + erf(x / √2)) / 2`.
pub fn gelu(x: &Array) -> Result<Array> {
    let cdf = multiply(
        add(erf(&multiply(x, std::f64::consts::FRAC_1_SQRT_2)?)?, 1.0)?,
        0.5,
    )?;
    Ok(multiply(x, cdf)?)
}

/// GELU with the tanh approximation (MLX's `gelu_approx`, PyTorch's `approximate="tanh"`):
/// `x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³)))`.
pub fn gelu_approx(x: &Array) -> Result<Array> {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    let cube = multiply(multiply(x, x)?, x)?;
    let inner = multiply(add(x, multiply(cube, 0.044715)?)?, c)?;
    Ok(multiply(multiply(x, 0.5)?, add(core_tanh(&inner)?, 1.0)?)?)
}

/// GELU with the sigmoid approximation (MLX's `gelu_fast_approx`): `x · σ(1.702 x)`.
pub fn gelu_fast_approx(x: &Array) -> Result<Array> {
    Ok(multiply(x, core_sigmoid(&multiply(x, 1.702)?)?)?)
}

/// The sigmoid linear unit (swish): `x · σ(x)`.
pub fn silu(x: &Array) -> Result<Array> {
    Ok(multiply(x, core_sigmoid(x)?)?)
}

/// The SwiGLU gating of gated feed-forward layers: `silu(gate) · up`.
pub fn swiglu(gate: &Array, up: &Array) -> Result<Array> {
    Ok(multiply(silu(gate)?, up)?)
}

/// `ln(1 + eˣ)`, without overflow.
pub fn softplus(x: &Array) -> Result<Array> {
    Ok(logaddexp(x, 0.0)?)
}

/// `x / (1 + |x|)`.
pub fn softsign(x: &Array) -> Result<Array> {
    Ok(divide(x, add(abs(x)?, 1.0)?)?)
}

/// `x · tanh(softplus(x))`.
pub fn mish(x: &Array) -> Result<Array> {
    Ok(multiply(x, core_tanh(&softplus(x)?)?)?)
}

/// `x · min(max(x + 3, 0), 6) / 6`.
pub fn hardswish(x: &Array) -> Result<Array> {
    let gate = minimum(maximum(add(x, 3.0)?, 0.0)?, 6.0)?;
    Ok(divide(multiply(x, gate)?, 6.0)?)
}

/// `x` clipped to `[min_val, max_val]` (MLX's defaults are −1 and 1).
pub fn hard_tanh(x: &Array, min_val: f64, max_val: f64) -> Result<Array> {
    Ok(minimum(maximum(x, min_val)?, max_val)?)
}

/// `x` where `|x| > lambda`, else 0 (MLX's default `lambda` is 0.5).
pub fn hard_shrink(x: &Array, lambda: f64) -> Result<Array> {
    Ok(where_(greater(abs(x)?, lambda)?, x, 0.0)?)
}

/// `x − lambda` above `lambda`, `x + lambda` below `−lambda`, else 0.
pub fn soft_shrink(x: &Array, lambda: f64) -> Result<Array> {
    let shrunk = subtract(x, multiply(nuvec_core::sign(x)?, lambda)?)?;
    Ok(where_(greater(abs(x)?, lambda)?, shrunk, 0.0)?)
}

/// The logistic function `1 / (1 + e⁻ˣ)`.
pub fn sigmoid(x: &Array) -> Result<Array> {
    Ok(core_sigmoid(x)?)
}

/// The hyperbolic tangent.
pub fn tanh(x: &Array) -> Result<Array> {
    Ok(core_tanh(x)?)
}

/// `ln σ(x) = −softplus(−x)`.
pub fn log_sigmoid(x: &Array) -> Result<Array> {
    Ok(negative(&softplus(&negative(x)?)?)?)
}

/// `x − logsumexp(x)` along `axis` (MLX's default is −1).
pub fn log_softmax(x: &Array, axis: isize) -> Result<Array> {
    Ok(subtract(x, logsumexp(x, &[axis], true)?)?)
}

/// `eˣ / Σ eˣ` along `axis` (MLX's default is −1).
pub fn softmax(x: &Array, axis: isize) -> Result<Array> {
    Ok(nuvec_core::softmax(x, &[axis])?)
}

/// `softmax(−x)` along `axis`.
pub fn softmin(x: &Array, axis: isize) -> Result<Array> {
    softmax(&negative(x)?, axis)
}

/// The gated linear unit: `x` split in two halves `a, b` along `axis` (MLX's default is −1),
/// `a · σ(b)`.
pub fn glu(x: &Array, axis: isize) -> Result<Array> {
    let halves = split(x, 2, axis)?;
    Ok(multiply(&halves[0], core_sigmoid(&halves[1])?)?)
}

/// The parametric ReLU: `max(x, 0) + alpha · min(x, 0)`, `alpha` broadcasting against `x`.
pub fn prelu(x: &Array, alpha: &Array) -> Result<Array> {
    Ok(add(maximum(x, 0.0)?, multiply(alpha, minimum(x, 0.0)?)?)?)
}

/// The binary step: 1 where `x > threshold`, else 0 (of `x`'s type).
pub fn step(x: &Array, threshold: f64) -> Result<Array> {
    Ok(where_(greater(x, threshold)?, 1.0, 0.0)?.astype(x.dtype())?)
}
