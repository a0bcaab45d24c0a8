//! Random numbers from splittable keys, with MLX's conventions: the same key gives the same
//! bits and (up to the last bit of the float functions) the same values as `mlx.core.random`.
//!
//! A key is a `uint32` array of shape `[2]`, made by [`key`] from a seed and divided into
//! independent keys by [`split`]. Every sampler takes `key: Option<&Array>`: with `None` it
//! draws a fresh key from a process-wide sequence (seeded by [`seed`], or from the clock),
//! splitting it as MLX does. The generator is threefry-2x32 with 20 rounds
//! ([`threefry2x32`]), counter-based, so sampling is lazy like every other operation and
//! [`crate::vmap`] maps a sampler over a batch of keys in one computation.
//!
//! ```
//! use nuvec_core::{DType, random};
//!
//! # fn main() -> nuvec_core::Result<()> {
//! let k = random::key(0);
//! let keys = random::split(&k, 2)?;
//! let sub = keys.reshape(&[-1])?.to_vec::<u32>()?;
//! assert_eq!(sub, [4146024105, 967050713, 2718843009, 1272950319]);
//! let x = random::uniform(0.0, 1.0, &[3], DType::F32, Some(&k))?;
//! assert!(x.to_vec::<f32>()?.iter().all(|v| (0.0..1.0).contains(v)));
//! # Ok(())
//! # }
//! ```

mod discrete;

use std::sync::Mutex;

pub use discrete::{bernoulli, categorical, permutation, permutation_of, randint};

use crate::error::invalid;
use crate::ops::random::{RandomOp, bits_dtype};
use crate::primitive::Primitive;
use crate::{Array, DType, Error, Operand, Result, Scalar};

/// The threefry-2x32 block function with 20 rounds (Salmon et al., "Parallel random numbers:
/// as easy as 1, 2, 3", as in Random123, JAX and MLX): the two words of `counter` encrypted
/// under `key`.
///
/// ```
/// use nuvec_core::random::threefry2x32;
///
/// assert_eq!(threefry2x32([0, 0], [0, 0]), [0x6b20_0159, 0x99ba_4efe]);
/// ```
#[inline]
pub fn threefry2x32(key: [u32; 2], counter: [u32; 2]) -> [u32; 2] {
    const ROTATIONS: [[u32; 4]; 2] = [[13, 15, 26, 6], [17, 29, 16, 24]];
    // The third key word makes the schedule's parity constant.
    let ks = [key[0], key[1], key[0] ^ key[1] ^ 0x1BD1_1BDA];
    let mut x0 = counter[0].wrapping_add(ks[0]);
    let mut x1 = counter[1].wrapping_add(ks[1]);
    for i in 0..5 {
        for r in ROTATIONS[i % 2] {
            x0 = x0.wrapping_add(x1);
            x1 = x1.rotate_left(r) ^ x0;
        }
        // A key injection after every four rounds.
        x0 = x0.wrapping_add(ks[(i + 1) % 3]);
        x1 = x1.wrapping_add(ks[(i + 2) % 3]).wrapping_add(i as u32 + 1);
    }
    [x0, x1]
}

/// The process-wide key that samplers given no key draw from (`None` until first used).
static GLOBAL_KEY: Mutex<Option<[u32; 2]>> = Mutex::new(None);

/// The words of [`key`]`(seed)`.
fn key_words(seed: u64) -> [u32; 2] {
    [(seed >> 32) as u32, seed as u32]
}

/// Seeds the process-wide key that samplers use when given no key (as `mlx.random.seed`).
/// Until this is called, that key is seeded from the clock.
///
/// ```
/// use nuvec_core::{DType, random};
///
/// # fn main() -> nuvec_core::Result<()> {
/// random::seed(7);
/// let a = random::uniform(0.0, 1.0, &[4], DType::F32, None)?.to_vec::<f32>()?;
/// random::seed(7);
/// let b = random::uniform(0.0, 1.0, &[4], DType::F32, None)?.to_vec::<f32>()?;
/// assert_eq!(a, b);
/// # Ok(())
/// # }
/// ```
pub fn seed(seed: u64) {
    *GLOBAL_KEY.lock().unwrap_or_else(|e| e.into_inner()) = Some(key_words(seed));
}

/// The next key of the process-wide sequence: the sequence's key is split in two, the first
/// half kept for next time and the second returned (MLX's order). Computed here rather than
/// recorded, so that the sequence never grows a graph.
fn next_key() -> Array {
    let mut state = GLOBAL_KEY.lock().unwrap_or_else(|e| e.into_inner());
    let current = *state.get_or_insert_with(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        key_words(nanos)
    });
    // `split(key, 2)`: four words from the counters (0, 2) and (1, 3).
    let a = threefry2x32(current, [0, 2]);
    let b = threefry2x32(current, [1, 3]);
    *state = Some([a[0], b[0]]);
    Array::from_slice(&[a[1], b[1]], &[2]).expect("two words fill shape [2]")
}

/// A key from a seed: `uint32` `[seed >> 32, seed & 0xffff_ffff]`.
///
/// ```
/// use nuvec_core::random;
///
/// let k = random::key((1 << 32) + 5);
/// assert_eq!(k.to_vec::<u32>().unwrap(), [1, 5]);
/// ```
pub fn key(seed: u64) -> Array {
    Array::from_slice(&key_words(seed), &[2]).expect("two words fill shape [2]")
}

/// Checks that `key` is one key: `uint32` of shape `[2]`.
pub(crate) fn check_key(op: &'static str, key: &Array) -> Result<()> {
    crate::ops::check_errors(&[key])?;
    if key.dtype() != DType::U32 || key.shape() != [2] {
        return Err(invalid(
            op,
            format!(
                "expected a uint32 key of shape [2], got {} of shape {:?}",
                key.dtype(),
                key.shape()
            ),
        ));
    }
    Ok(())
}

/// The given key (checked), or the next one of the process-wide sequence. Called once the
/// other arguments are checked, so that an error does not advance the sequence.
pub(crate) fn resolve_key(op: &'static str, key: Option<&Array>) -> Result<Array> {
    match key {
        Some(k) => {
            check_key(op, k)?;
            Ok(k.clone())
        }
        None => Ok(next_key()),
    }
}

/// Checks that `shape`'s element count fits in memory's address range.
pub(crate) fn check_size(op: &'static str, shape: &[usize]) -> Result<()> {
    shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .map(|_| ())
        .ok_or_else(|| invalid(op, format!("shape {shape:?} has too many elements")))
}

/// Checks that `shape` is what it and `other` broadcast to (samplers never grow their output
/// beyond the requested shape).
pub(crate) fn check_covers(op: &'static str, shape: &[usize], other: &[usize]) -> Result<()> {
    let joint = crate::broadcast_shapes(op, shape, other)?;
    if joint != shape {
        return Err(Error::IncompatibleShapes {
            op,
            lhs: shape.to_vec(),
            rhs: other.to_vec(),
        });
    }
    Ok(())
}

/// Records the bits primitive for a checked key.
fn raw_bits(shape: &[usize], width: usize, key: Array) -> Result<Array> {
    let op = RandomOp::Bits {
        shape: shape.to_vec(),
        width,
    };
    Array::op1(Primitive::Random(op), vec![key])
}

/// Random bits of `shape`: `width` bytes each (1, 2 or 4, giving `uint8`, `uint16` or
/// `uint32`). The key's stream of 32-bit words is cut into elements in little-endian order,
/// as MLX does, so narrower widths give the same bytes as `uint32` bits of the same size.
///
/// ```
/// use nuvec_core::random;
///
/// # fn main() -> nuvec_core::Result<()> {
/// let k = random::key(42);
/// let words = random::bits(&[2], 4, Some(&k))?.to_vec::<u32>()?;
/// assert_eq!(words, [64467757, 2916123636]);
/// let bytes = random::bits(&[8], 1, Some(&k))?.to_vec::<u8>()?;
/// assert_eq!(bytes[..4], 64467757u32.to_le_bytes());
/// # Ok(())
/// # }
/// ```
pub fn bits(shape: &[usize], width: usize, key: Option<&Array>) -> Result<Array> {
    const OP: &str = "bits";
    bits_dtype(OP, width)?;
    check_size(OP, shape)?;
    raw_bits(shape, width, resolve_key(OP, key)?)
}

/// `num` new keys from `key`, as a `uint32` array of shape `[num, 2]` (take row `i` for key
/// `i`). The same key always splits the same way.
///
/// ```
/// use nuvec_core::{random, take, Array};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let keys = random::split(&random::key(0), 3)?;
/// assert_eq!(keys.shape(), [3, 2]);
/// let second = take(&keys, &Array::scalar(1u32), Some(0))?;
/// let x = random::normal(&[2], nuvec_core::DType::F32, 0.0, 1.0, Some(&second))?;
/// assert_eq!(x.shape(), [2]);
/// # Ok(())
/// # }
/// ```
pub fn split(key: &Array, num: usize) -> Result<Array> {
    const OP: &str = "split";
    check_key(OP, key)?;
    check_size(OP, &[num, 2])?;
    raw_bits(&[num, 2], 4, key.clone())
}

/// The largest value below one in a float type, as `float32` (uniforms never reach `high`).
fn below_one(dtype: DType) -> f32 {
    match dtype {
        DType::F16 => crate::f16::from_bits(crate::f16::ONE.to_bits() - 1).to_f32(),
        DType::BF16 => crate::bf16::from_bits(crate::bf16::ONE.to_bits() - 1).to_f32(),
        _ => f32::from_bits(1.0f32.to_bits() - 1),
    }
}

/// An error unless the samples' `dtype` is a real floating type, as the continuous
/// distributions need.
fn check_real_float(op: &'static str, dtype: DType) -> Result<()> {
    if !dtype.is_float() {
        return Err(invalid(
            op,
            format!("samples must have a real float type, got {dtype}"),
        ));
    }
    Ok(())
}

/// An error when a Rust scalar bound is NaN or infinite (array bounds are data, not checked).
fn check_finite(op: &'static str, name: &str, value: &Operand) -> Result<()> {
    if let Operand::Scalar(Scalar::Float(v)) = value
        && !v.is_finite()
    {
        return Err(invalid(op, format!("{name} must be finite, got {v}")));
    }
    Ok(())
}

/// Uniform samples of `shape` in `[low, high)`, of float type `dtype` (`float32` usually).
/// `low` and `high` are scalars or arrays that broadcast to `shape`. As MLX: 32 random bits
/// divided by `2³² − 1` in `float32`, capped just below one for `dtype`, converted, then
/// scaled as `low + (high − low) · u`. In `float16`/`bfloat16` that last rounding can land
/// on `high` (as in MLX). `float64` samples are accepted (MLX refuses them) and have
/// `float32` resolution. Errors: a type that is not a real float, bounds that do not
/// broadcast to `shape`, NaN or infinite scalar bounds, a bad key.
///
/// ```
/// use nuvec_core::{DType, random};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let k = random::key(0);
/// let x = random::uniform(-1.0, 1.0, &[2, 3], DType::F32, Some(&k))?;
/// assert!(x.to_vec::<f32>()?.iter().all(|v| (-1.0..1.0).contains(v)));
/// # Ok(())
/// # }
/// ```
pub fn uniform(
    low: impl Into<Operand>,
    high: impl Into<Operand>,
    shape: &[usize],
    dtype: DType,
    key: Option<&Array>,
) -> Result<Array> {
    const OP: &str = "uniform";
    let (low, high) = (low.into(), high.into());
    check_real_float(OP, dtype)?;
    check_finite(OP, "low", &low)?;
    check_finite(OP, "high", &high)?;
    uniform_impl(OP, &low, &high, shape, dtype, key)
}

/// [`uniform`] after the checks of its type and scalar bounds, `op` naming the caller.
pub(crate) fn uniform_impl(
    op: &'static str,
    low: &Operand,
    high: &Operand,
    shape: &[usize],
    dtype: DType,
    key: Option<&Array>,
) -> Result<Array> {
    for b in [low, high] {
        if let Operand::Array(a) = b {
            crate::ops::check_errors(&[a])?;
        }
    }
    check_size(op, shape)?;
    let lo = low.to_array(dtype)?;
    let hi = high.to_array(dtype)?;
    let range = crate::subtract(&hi, &lo)?;
    check_covers(op, shape, range.shape())?;
    let key = resolve_key(op, key)?;
    let words = raw_bits(shape, 4, key)?;
    let unit = crate::divide(&words, Array::scalar(u32::MAX as f32))?;
    let unit = crate::minimum(&unit, Array::scalar(below_one(dtype)))?.astype(dtype)?;
    crate::add(&crate::multiply(&range, &unit)?, &lo)
}

/// Whether an operand is the Rust scalar `value` (so that multiplying or adding it can be
/// left out without changing a bit).
fn is_scalar(x: &Operand, value: f64) -> bool {
    match x {
        Operand::Scalar(Scalar::Float(v)) => *v == value,
        Operand::Scalar(Scalar::Int(v)) => *v as f64 == value,
        _ => false,
    }
}

/// Normal samples of `shape` with mean `loc` and standard deviation `scale` (scalars or
/// arrays broadcasting to `shape`), of type `dtype`: a real float type, or `complex64`
/// (real and imaginary parts each of variance ½, before `scale`). As MLX: uniforms in
/// `(−1, 1)` in `float32`, mapped through `√2 · erfinv`. Errors: other types, `loc` or
/// `scale` not broadcasting to `shape`, a bad key.
///
/// ```
/// use nuvec_core::{DType, random};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let x = random::normal(&[1000], DType::F32, 10.0, 0.5, Some(&random::key(1)))?;
/// let v = x.to_vec::<f32>()?;
/// let mean = v.iter().sum::<f32>() / 1000.0;
/// assert!((mean - 10.0).abs() < 0.1);
/// # Ok(())
/// # }
/// ```
pub fn normal(
    shape: &[usize],
    dtype: DType,
    loc: impl Into<Operand>,
    scale: impl Into<Operand>,
    key: Option<&Array>,
) -> Result<Array> {
    const OP: &str = "normal";
    let (loc, scale) = (loc.into(), scale.into());
    if !dtype.is_float() && dtype != DType::C64 {
        return Err(invalid(
            OP,
            format!("samples must have a float or complex64 type, got {dtype}"),
        ));
    }
    let loc_a = loc.to_array(dtype)?;
    let scale_a = scale.to_array(dtype)?;
    check_covers(OP, shape, loc_a.shape())?;
    check_covers(OP, shape, scale_a.shape())?;
    check_size(OP, shape)?;
    // Uniforms in (−1, 1): erfinv is finite on them.
    let low = Operand::from(-below_one(DType::F32));
    let high = Operand::from(1.0f32);
    let mut samples = if dtype == DType::C64 {
        let mut pairs_shape = shape.to_vec();
        pairs_shape.push(2);
        let u = uniform_impl(OP, &low, &high, &pairs_shape, DType::F32, key)?;
        let parts = crate::split(&crate::erfinv(&u)?, 2, -1)?;
        let re = crate::squeeze(&parts[0], &[-1])?.astype(DType::C64)?;
        let im = crate::squeeze(&parts[1], &[-1])?.astype(DType::C64)?;
        let i = Array::scalar(crate::Complex64::new(0.0, 1.0));
        crate::add(&re, &crate::multiply(&im, &i)?)?
    } else {
        let u = uniform_impl(OP, &low, &high, shape, DType::F32, key)?;
        let sqrt2 = Array::scalar_of(crate::dtype::Canon::Float(std::f64::consts::SQRT_2), dtype);
        let applied = if is_scalar(&scale, 1.0) {
            sqrt2
        } else {
            crate::multiply(&sqrt2, &scale_a)?
        };
        crate::multiply(&applied, &crate::erfinv(&u)?.astype(dtype)?)?
    };
    if dtype == DType::C64 && !is_scalar(&scale, 1.0) {
        samples = crate::multiply(&scale_a, &samples)?;
    }
    if !is_scalar(&loc, 0.0) {
        samples = crate::add(&loc_a, &samples)?;
    }
    Ok(samples)
}

/// Normal samples (mean 0, deviation 1) conditioned to lie in `[lower, upper]` (scalars or
/// arrays), of shape `shape` (by default the bounds' broadcast shape) and float type
/// `dtype`: uniforms between `erf(lower / √2)` and `erf(upper / √2)` mapped back by
/// `√2 · erfinv`, clipped to the bounds, as MLX and JAX. Infinite bounds are allowed.
/// Errors: non-float types, NaN scalar bounds or `lower > upper` for scalars, bounds not
/// broadcasting to `shape`, a bad key.
///
/// ```
/// use nuvec_core::{DType, random};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let x = random::truncated_normal(-0.5, 1.0, Some(&[100]), DType::F32, Some(&random::key(3)))?;
/// assert!(x.to_vec::<f32>()?.iter().all(|v| (-0.5..=1.0).contains(v)));
/// # Ok(())
/// # }
/// ```
pub fn truncated_normal(
    lower: impl Into<Operand>,
    upper: impl Into<Operand>,
    shape: Option<&[usize]>,
    dtype: DType,
    key: Option<&Array>,
) -> Result<Array> {
    const OP: &str = "truncated_normal";
    let (lower, upper) = (lower.into(), upper.into());
    check_real_float(OP, dtype)?;
    let scalar = |x: &Operand| match x {
        Operand::Scalar(s) => Some(s.canon().as_f64()),
        Operand::Array(_) => None,
    };
    for (name, b) in [("lower", &lower), ("upper", &upper)] {
        if scalar(b).is_some_and(f64::is_nan) {
            return Err(invalid(OP, format!("{name} must not be NaN")));
        }
    }
    if let (Some(lo), Some(hi)) = (scalar(&lower), scalar(&upper))
        && lo > hi
    {
        return Err(invalid(
            OP,
            format!("lower ({lo}) must not exceed upper ({hi})"),
        ));
    }
    let lower_t = lower.to_array(dtype)?;
    let upper_t = upper.to_array(dtype)?;
    let bounds = crate::broadcast_shapes(OP, lower_t.shape(), upper_t.shape())?;
    let shape = shape.unwrap_or(&bounds);
    let sqrt2 = Array::scalar_of(crate::dtype::Canon::Float(std::f64::consts::SQRT_2), dtype);
    let a = crate::erf(&crate::divide(&lower_t, &sqrt2)?)?;
    let b = crate::erf(&crate::divide(&upper_t, &sqrt2)?)?;
    let u = uniform_impl(OP, &a.into(), &b.into(), shape, dtype, key)?;
    let out = crate::multiply(&sqrt2, &crate::erfinv(&u)?)?;
    crate::maximum(&crate::minimum(&upper_t, &out)?, &lower_t)
}

/// Samples of the standard Gumbel distribution, `−ln(−ln(u))` for uniform `u`, of `shape`
/// and float type `dtype`.
///
/// ```
/// use nuvec_core::{DType, random};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let g = random::gumbel(&[3], DType::F32, Some(&random::key(0)))?;
/// assert_eq!(g.shape(), [3]);
/// # Ok(())
/// # }
/// ```
pub fn gumbel(shape: &[usize], dtype: DType, key: Option<&Array>) -> Result<Array> {
    const OP: &str = "gumbel";
    check_real_float(OP, dtype)?;
    gumbel_impl(OP, shape, dtype, key)
}

/// [`gumbel`] of a checked type, `op` naming the caller.
pub(crate) fn gumbel_impl(
    op: &'static str,
    shape: &[usize],
    dtype: DType,
    key: Option<&Array>,
) -> Result<Array> {
    let u = uniform_impl(op, &0.0.into(), &1.0.into(), shape, dtype, key)?;
    crate::negative(&crate::log(&crate::negative(&crate::log(&u)?)?)?)
}

/// Samples of the Laplace distribution with location `loc` and scale `scale`, of `shape`
/// and float type `dtype`, by the inverse of its distribution function (as MLX).
///
/// ```
/// use nuvec_core::{DType, random};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let x = random::laplace(&[4], DType::F32, 0.0, 2.0, Some(&random::key(0)))?;
/// assert_eq!(x.shape(), [4]);
/// # Ok(())
/// # }
/// ```
pub fn laplace(
    shape: &[usize],
    dtype: DType,
    loc: f64,
    scale: f64,
    key: Option<&Array>,
) -> Result<Array> {
    const OP: &str = "laplace";
    check_real_float(OP, dtype)?;
    if !loc.is_finite() || !scale.is_finite() {
        return Err(invalid(
            OP,
            format!("loc and scale must be finite, got {loc} and {scale}"),
        ));
    }
    let low = Operand::from(-below_one(DType::F32));
    let u = uniform_impl(OP, &low, &1.0f32.into(), shape, DType::F32, key)?;
    let minus_one = Array::scalar_of(crate::dtype::Canon::Float(-1.0), dtype);
    let tail = crate::log1p(&crate::multiply(&minus_one, &crate::abs(&u)?)?)?;
    let mut out = crate::multiply(&crate::sign(&u)?, &tail)?.astype(dtype)?;
    if scale != 1.0 {
        out = crate::multiply(
            Array::scalar_of(crate::dtype::Canon::Float(scale), dtype),
            &out,
        )?;
    }
    if loc != 0.0 {
        out = crate::add(
            Array::scalar_of(crate::dtype::Canon::Float(loc), dtype),
            &out,
        )?;
    }
    Ok(out)
}
