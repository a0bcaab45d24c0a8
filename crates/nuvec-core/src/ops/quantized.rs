//! Affine quantization, as MLX's: [`quantize`], [`dequantize`] and [`quantized_matmul`].
//!
//! A matrix's last axis is cut into groups of `group_size` values (32, 64 or 128). Each group
//! keeps a scale `s` and a bias `b` (in the matrix's own float type) and each value an
//! unsigned integer `q` of `bits` bits (2, 3, 4, 5, 6 or 8), standing for `s · q + b`. The
//! integers are packed into `uint32` words as one little-endian stream of bits: value `i` of a
//! row occupies bits `i · bits ..` of the row, lowest bits first, so with 3, 5 or 6 bits a
//! value may straddle two words. This is MLX's layout, bit for bit.
//!
//! ```
//! use nuvec_core::{Array, dequantize, quantize};
//!
//! # fn main() -> nuvec_core::Result<()> {
//! let v: Vec<f32> = (0..64).map(|i| (i as f32 * 0.1).sin()).collect();
//! let w = Array::from_slice(&v, &[2, 32])?;
//! let (wq, scales, biases) = quantize(&w, 32, 4)?;
//! assert_eq!(wq.shape(), [2, 4]); // 32 values of 4 bits: 4 words per row
//! assert_eq!(scales.shape(), [2, 1]);
//! let back = dequantize(&wq, &scales, &biases, 32, 4)?.to_vec::<f32>()?;
//! let step = scales.to_vec::<f32>()?.iter().fold(0.0f32, |m, s| m.max(s.abs()));
//! assert!(back.iter().zip(&v).all(|(a, b)| (a - b).abs() <= step));
//! # Ok(())
//! # }
//! ```

use crate::error::invalid;
use crate::ops::{broadcast_shapes, broadcast_to, check_errors, check_matrices, expect_inputs};
use crate::primitive::{OutputSpec, Primitive};
use crate::{Array, DType, Error, Result, promote_types};

/// The quantization primitives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuantizedOp {
    /// `w` (float, at least 2-D) to `(wq, scales, biases)`, group by group along the last axis.
    Quantize {
        /// Values per scale and bias.
        group_size: usize,
        /// Bits per value.
        bits: u32,
    },
    /// `(wq, scales, biases)` back to floats of the scales' type.
    Dequantize {
        /// Values per scale and bias.
        group_size: usize,
        /// Bits per value.
        bits: u32,
    },
    /// `(x, wq, scales, biases)` to `x · wᵀ` (or `x · w`) for the dequantized `w`. `x`, the
    /// scales and the biases share one float type. A 2-D `w` takes any `x` of at least one
    /// axis; a batched `w` (`[..., rows, words]`) takes an `x` of `[..., m, k]` with the same
    /// batch axes (the op function broadcasts them as views first).
    Matmul {
        /// Values per scale and bias.
        group_size: usize,
        /// Bits per value.
        bits: u32,
        /// Whether the product is with `wᵀ` (`w` is `[n, k]`, packed along `k`) rather than
        /// with `w` (`[k, n]`, packed along `n`).
        transpose: bool,
    },
}

/// The group sizes MLX supports.
const GROUP_SIZES: [usize; 3] = [32, 64, 128];
/// The widths MLX supports.
const BITS: [u32; 6] = [2, 3, 4, 5, 6, 8];

/// Checks `group_size` and `bits` against what MLX supports.
fn check_params(op: &'static str, group_size: usize, bits: u32) -> Result<()> {
    if !GROUP_SIZES.contains(&group_size) {
        return Err(invalid(
            op,
            format!("group size {group_size} is not supported (32, 64 or 128)"),
        ));
    }
    if !BITS.contains(&bits) {
        return Err(invalid(
            op,
            format!("{bits} bits are not supported (2, 3, 4, 5, 6 or 8)"),
        ));
    }
    Ok(())
}

/// The number of values that `words` packed words of `bits` bits hold, if they hold a whole
/// number of them.
fn unpacked_len(words: usize, bits: u32) -> Option<usize> {
    let total = words * 32;
    total
        .is_multiple_of(bits as usize)
        .then_some(total / bits as usize)
}

/// Checks that `wq` is a `uint32` matrix (at least 2-D) whose scales and biases have one
/// shape and one float type, one scale per group of each row; returns the unpacked length of
/// a row.
fn check_packed(
    op: &'static str,
    wq: &Array,
    scales: &Array,
    biases: &Array,
    group_size: usize,
    bits: u32,
) -> Result<usize> {
    if wq.dtype() != DType::U32 {
        return Err(invalid(
            op,
            format!("the packed matrix must be uint32, got {}", wq.dtype()),
        ));
    }
    check_matrices(op, "the packed matrix", wq)?;
    if scales.shape() != biases.shape() {
        return Err(invalid(
            op,
            format!(
                "scales and biases must have one shape, got {:?} and {:?}",
                scales.shape(),
                biases.shape()
            ),
        ));
    }
    if !scales.dtype().is_float() || scales.dtype() != biases.dtype() {
        return Err(invalid(
            op,
            format!(
                "scales and biases must share a float type, got {} and {}",
                scales.dtype(),
                biases.dtype()
            ),
        ));
    }
    let nd = wq.ndim();
    let words = wq.shape()[nd - 1];
    let fits = scales.ndim() == nd
        && scales.shape()[..nd - 1] == wq.shape()[..nd - 1]
        && unpacked_len(words, bits) == Some(scales.shape()[nd - 1] * group_size);
    if !fits {
        return Err(invalid(
            op,
            format!(
                "scales of shape {:?} do not fit a packed matrix of shape {:?} with \
                 group_size={group_size} and bits={bits}",
                scales.shape(),
                wq.shape()
            ),
        ));
    }
    Ok(scales.shape()[nd - 1] * group_size)
}

impl QuantizedOp {
    /// The primitive's name.
    pub fn name(&self) -> &'static str {
        match self {
            QuantizedOp::Quantize { .. } => "quantize",
            QuantizedOp::Dequantize { .. } => "dequantize",
            QuantizedOp::Matmul { .. } => "quantized_matmul",
        }
    }

    /// The shape and type of each output.
    pub fn output_specs(&self, inputs: &[Array]) -> Result<Vec<OutputSpec>> {
        let op = self.name();
        match *self {
            QuantizedOp::Quantize { group_size, bits } => {
                expect_inputs(op, inputs, 1)?;
                check_params(op, group_size, bits)?;
                let w = &inputs[0];
                check_quantizable(w, group_size)?;
                let nd = w.ndim();
                let k = w.shape()[nd - 1];
                let mut packed = w.shape().to_vec();
                packed[nd - 1] = k * bits as usize / 32;
                let mut groups = w.shape().to_vec();
                groups[nd - 1] = k / group_size;
                Ok(vec![
                    (packed, DType::U32),
                    (groups.clone(), w.dtype()),
                    (groups, w.dtype()),
                ])
            }
            QuantizedOp::Dequantize { group_size, bits } => {
                expect_inputs(op, inputs, 3)?;
                check_params(op, group_size, bits)?;
                let (wq, scales) = (&inputs[0], &inputs[1]);
                let k = check_packed(op, wq, scales, &inputs[2], group_size, bits)?;
                let mut shape = wq.shape().to_vec();
                *shape.last_mut().expect("at least 2-D") = k;
                Ok(vec![(shape, scales.dtype())])
            }
            QuantizedOp::Matmul {
                group_size,
                bits,
                transpose,
            } => {
                expect_inputs(op, inputs, 4)?;
                check_params(op, group_size, bits)?;
                let (x, w, scales) = (&inputs[0], &inputs[1], &inputs[2]);
                let (k, n) = matmul_dims(w, scales, &inputs[3], transpose, group_size, bits)?;
                if x.dtype() != scales.dtype() {
                    return Err(invalid(
                        op,
                        format!(
                            "x ({}) must have the type of the scales ({}) in the primitive",
                            x.dtype(),
                            scales.dtype()
                        ),
                    ));
                }
                check_x(x, w, k)?;
                if w.ndim() > 2 && x.shape()[..x.ndim() - 2] != w.shape()[..w.ndim() - 2] {
                    return Err(invalid(
                        op,
                        format!(
                            "the primitive needs equal batch axes, got x of shape {:?} and w \
                             of shape {:?}",
                            x.shape(),
                            w.shape()
                        ),
                    ));
                }
                let mut shape = x.shape().to_vec();
                *shape.last_mut().expect("at least 1-D") = n;
                Ok(vec![(shape, x.dtype())])
            }
        }
    }
}

/// Checks that `w` can be quantized with `group_size`: a float matrix whose rows are whole
/// groups.
fn check_quantizable(w: &Array, group_size: usize) -> Result<()> {
    const OP: &str = "quantize";
    if !w.dtype().is_float() {
        return Err(invalid(
            OP,
            format!(
                "only real floating types can be quantized, got {}",
                w.dtype()
            ),
        ));
    }
    check_matrices(OP, "the matrix", w)?;
    let k = w.shape()[w.ndim() - 1];
    if !k.is_multiple_of(group_size) {
        return Err(invalid(
            OP,
            format!(
                "the last axis ({k}) of shape {:?} is not a multiple of the group size \
                 {group_size}",
                w.shape()
            ),
        ));
    }
    Ok(())
}

/// The inner and outer sizes `(k, n)` of the product with a packed `w` (checked against its
/// scales and biases).
fn matmul_dims(
    w: &Array,
    scales: &Array,
    biases: &Array,
    transpose: bool,
    group_size: usize,
    bits: u32,
) -> Result<(usize, usize)> {
    let unpacked = check_packed("quantized_matmul", w, scales, biases, group_size, bits)?;
    let rows = w.shape()[w.ndim() - 2];
    Ok(if transpose {
        (unpacked, rows)
    } else {
        (rows, unpacked)
    })
}

/// Checks that `x` has an inner axis of `k` (and, for a batched `w`, a row axis).
fn check_x(x: &Array, w: &Array, k: usize) -> Result<()> {
    let ok = match x.shape().last() {
        Some(&last) => last == k && (w.ndim() == 2 || x.ndim() >= 2),
        None => false,
    };
    if !ok {
        return Err(Error::IncompatibleShapes {
            op: "quantized_matmul",
            lhs: x.shape().to_vec(),
            rhs: w.shape().to_vec(),
        });
    }
    Ok(())
}

/// Quantizes `w` along its last axis, as MLX's affine mode does: each group of `group_size`
/// values (32, 64 or 128) gets a scale and a bias of `w`'s type, each value an integer of
/// `bits` bits (2, 3, 4, 5, 6 or 8), packed into `uint32` words (see the module's documentation).
/// Returns `(wq, scales, biases)`: `wq` has the last axis `k · bits / 32`, the others `k /
/// group_size`. `w` must be a float array of at least 2 dimensions whose last axis is a
/// multiple of `group_size`.
///
/// A group's extreme of larger magnitude is represented exactly (it is the bias, or the scale
/// is fitted to it); every value is then within one scale of its dequantized value, within half
/// of one unless it lies at the clipped end of the range.
///
/// ```
/// use nuvec_core::{Array, quantize};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let v: Vec<f32> = (0..32).map(|i| i as f32 / 31.0).collect();
/// let (wq, scales, biases) = quantize(&Array::from_slice(&v, &[1, 32])?, 32, 8)?;
/// assert_eq!(wq.shape(), [1, 8]);
/// assert_eq!(scales.shape(), [1, 1]);
/// // The group spans [0, 1]: 1 is the extreme of larger magnitude, so it is the bias and the
/// // scale (negative) counts down from it to 0 in 255 steps.
/// assert_eq!(biases.item::<f32>()?, 1.0);
/// assert!((scales.item::<f32>()? + 1.0 / 255.0).abs() < 1e-7);
/// # Ok(())
/// # }
/// ```
pub fn quantize(w: &Array, group_size: usize, bits: u32) -> Result<(Array, Array, Array)> {
    check_errors(&[w])?;
    check_params("quantize", group_size, bits)?;
    check_quantizable(w, group_size)?;
    let op = QuantizedOp::Quantize { group_size, bits };
    let mut out = Array::from_op(Primitive::Quantized(op), vec![w.clone()])?.into_iter();
    match (out.next(), out.next(), out.next()) {
        (Some(wq), Some(scales), Some(biases)) => Ok((wq, scales, biases)),
        _ => Err(invalid(
            "quantize",
            "the primitive did not give three outputs",
        )),
    }
}

/// The values that [`quantize`]'s `(wq, scales, biases)` stand for: `scales · q + biases`
/// group by group, of the scales' type (biases of another float type are converted to it
/// first). `wq` must be `uint32` with at least 2 dimensions, and the scales and biases of one
/// shape: `wq`'s but for the last axis, which holds one entry per group.
///
/// ```
/// use nuvec_core::{Array, dequantize};
///
/// # fn main() -> nuvec_core::Result<()> {
/// // 32 values of 8 bits: 0, 1, 2, ..., 31, four to a word, lowest byte first.
/// let words: Vec<u32> = (0..8u32).map(|i| u32::from_le_bytes([0, 1, 2, 3].map(|b| 4 * i as u8 + b))).collect();
/// let wq = Array::from_slice(&words, &[1, 8])?;
/// let scales = Array::from_slice(&[0.5f32], &[1, 1])?;
/// let biases = Array::from_slice(&[-1.0f32], &[1, 1])?;
/// let w = dequantize(&wq, &scales, &biases, 32, 8)?.to_vec::<f32>()?;
/// assert_eq!(&w[..4], [-1.0, -0.5, 0.0, 0.5]);
/// # Ok(())
/// # }
/// ```
pub fn dequantize(
    wq: &Array,
    scales: &Array,
    biases: &Array,
    group_size: usize,
    bits: u32,
) -> Result<Array> {
    check_errors(&[wq, scales, biases])?;
    check_params("dequantize", group_size, bits)?;
    let biases = match scales.dtype().is_float() && biases.dtype().is_float() {
        true => biases.astype(scales.dtype())?,
        false => biases.clone(),
    };
    let op = QuantizedOp::Dequantize { group_size, bits };
    Array::op1(
        Primitive::Quantized(op),
        vec![wq.clone(), scales.clone(), biases],
    )
}

/// `x · wᵀ` (`transpose`) or `x · w` for the matrix `w` that [`quantize`]'s `(w, scales,
/// biases)` stand for, without forming it: the product behind quantized linear layers.
///
/// With `transpose`, `w` is `[n, k · bits / 32]` (each row quantized along `k`), otherwise
/// `[k, n · bits / 32]`; `x` is `[..., k]` and the result `[..., n]`. A `w` with batch axes
/// (`[..., rows, words]`, its scales and biases alike) multiplies an `x` of `[..., m, k]`,
/// batch axes broadcasting as in [`crate::matmul`] (a 1-D `x` is one row, whose axis the result
/// drops). The result has the promoted type of `x`, the scales and the biases, which must be a
/// real float type; it is computed in `f32` for the half types (in `f64` for `f64`).
///
/// ```
/// use nuvec_core::{Array, dequantize, matmul, quantize, quantized_matmul};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let v: Vec<f32> = (0..8 * 64).map(|i| (i as f32 * 0.37).sin()).collect();
/// let w = Array::from_slice(&v, &[8, 64])?; // a linear layer: 64 inputs, 8 outputs
/// let (wq, scales, biases) = quantize(&w, 64, 4)?;
/// let x = Array::from_slice(&[0.5f32; 64], &[1, 64])?;
/// let y = quantized_matmul(&x, &wq, &scales, &biases, true, 64, 4)?;
/// assert_eq!(y.shape(), [1, 8]);
/// // The same as the product with the dequantized weights.
/// let w_hat = dequantize(&wq, &scales, &biases, 64, 4)?;
/// let want = matmul(&x, &w_hat.t()?)?.to_vec::<f32>()?;
/// for (a, b) in y.to_vec::<f32>()?.iter().zip(&want) {
///     assert!((a - b).abs() < 1e-4);
/// }
/// # Ok(())
/// # }
/// ```
pub fn quantized_matmul(
    x: &Array,
    w: &Array,
    scales: &Array,
    biases: &Array,
    transpose: bool,
    group_size: usize,
    bits: u32,
) -> Result<Array> {
    const OP: &str = "quantized_matmul";
    check_errors(&[x, w, scales, biases])?;
    check_params(OP, group_size, bits)?;
    let dtype = promote_types(promote_types(x.dtype(), scales.dtype()), biases.dtype());
    if !dtype.is_float() {
        return Err(invalid(
            OP,
            format!(
                "only real floating types are supported, got x of {}, scales of {} and biases \
                 of {}",
                x.dtype(),
                scales.dtype(),
                biases.dtype()
            ),
        ));
    }
    let (x, scales, biases) = (
        x.astype(dtype)?,
        scales.astype(dtype)?,
        biases.astype(dtype)?,
    );
    if x.ndim() == 0 {
        return Err(invalid(OP, "x needs at least one dimension"));
    }
    let op = Primitive::Quantized(QuantizedOp::Matmul {
        group_size,
        bits,
        transpose,
    });
    let batched = [w, &scales, &biases].iter().any(|a| a.ndim() > 2);
    if !batched {
        return Array::op1(op, vec![x, w.clone(), scales, biases]);
    }
    // A batched product: `x` as `[..., m, k]`, every batch axis broadcast as a view (the
    // primitive then checks the shapes).
    if let Some(a) = [w, &scales, &biases].into_iter().find(|a| a.ndim() < 2) {
        return Err(invalid(
            OP,
            format!(
                "w, scales and biases need at least 2 dimensions, got shape {:?}",
                a.shape()
            ),
        ));
    }
    let row = x.ndim() == 1;
    let x = if row { crate::expand_dims(&x, 0)? } else { x };
    let lead = |a: &Array| a.shape()[..a.ndim() - 2].to_vec();
    let mut batch = broadcast_shapes(OP, &lead(&x), &lead(w))?;
    for a in [&scales, &biases] {
        batch = broadcast_shapes(OP, &batch, &lead(a))?;
    }
    let widen = |a: &Array| -> Result<Array> {
        let mut shape = batch.clone();
        shape.extend_from_slice(&a.shape()[a.ndim() - 2..]);
        broadcast_to(a, &shape)
    };
    let inputs = vec![widen(&x)?, widen(w)?, widen(&scales)?, widen(&biases)?];
    let out = Array::op1(op, inputs)?;
    if row {
        crate::squeeze(&out, &[-2])
    } else {
        Ok(out)
    }
}
