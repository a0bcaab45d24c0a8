//! Fused operations, as MLX's `mx.fast`: [`rms_norm`], [`layer_norm`], [`rope`],
//! [`cross_entropy`], [`scaled_dot_product_attention`] and the gated delta rule
//! ([`gated_delta`], mlx-lm's Gated DeltaNet recurrence), with nuvec's own [`add_rms_norm`]
//! (a residual connection and its norm), [`norm_rope`] (norm, rotation and a cache write),
//! the paged key/value cache of vLLM ([`paged_attention`], [`paged_write`]) and a pool of
//! recurrent states addressed by slot ([`gated_delta_slots`]). [`crate::softmax`] and
//! [`crate::logsumexp`] over the last axis join them on the GPU.
//!
//! Every operation here is meant to be one GPU kernel, and each also has a *fallback*: the
//! same computation written with ordinary operations. On the CPU stream (and for dtypes or
//! shapes no kernel takes) the fallback is what gets recorded; on a GPU stream the fused
//! [`FastOp`] is recorded as [`crate::Primitive::Fast`]. The fallback also defines forward
//! derivatives and batching; reverse mode has dedicated rules where MLX has them (the norms,
//! cross entropy, the inverse rotation).
//!
//! ```
//! use nuvec_core::{Array, Result, fast};
//!
//! # fn main() -> Result<()> {
//! let x = Array::from_slice(&[3.0f32, 4.0, 0.0, 2.0], &[2, 2])?;
//! let y = fast::rms_norm(&x, None, 0.0)?; // each row over its root mean square
//! let v = y.to_vec::<f32>()?;
//! let rms = (12.5f32).sqrt();
//! assert!((v[0] - 3.0 / rms).abs() < 1e-6 && (v[3] - 2.0f32.sqrt()).abs() < 1e-6);
//! # Ok(())
//! # }
//! ```

mod attention;
pub(crate) mod conv;
mod gated_delta;
mod gather;
mod norms;
mod paged;
mod rope;
mod specs;

pub use attention::scaled_dot_product_attention;
pub use gated_delta::{gated_delta, gated_delta_slots, gated_delta_steps};
pub use gather::{gather_mm, gather_qmm};
pub use norms::{add_rms_norm, cross_entropy, layer_norm, rms_norm};
pub use paged::{paged_attention, paged_write};
pub use rope::{Rotation, norm_rope, rope};

use crate::dtype::Canon;
use crate::primitive::Primitive;
use crate::{Array, Category, DType, DeviceKind, Error, Result, default_stream};

/// A fused operation: the payload of [`Primitive::Fast`]. Float parameters are kept as
/// `f32::to_bits` so that the enum can be compared and hashed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FastOp {
    /// `(x, w)`: `x / sqrt(mean(x²) + eps) · w` over the last axis; `w` is 1-D, or a 0-D
    /// array standing for no weight.
    RmsNorm {
        /// Epsilon, as `f32::to_bits`.
        eps: u32,
    },
    /// `(x, r, w)`: the sum `h = x + r` and [`FastOp::RmsNorm`] of `h` (see
    /// [`add_rms_norm`]); two outputs.
    AddRmsNorm {
        /// Epsilon, as `f32::to_bits`.
        eps: u32,
    },
    /// `(x, w, g)`: the cotangents of [`FastOp::RmsNorm`]'s `x` and `w` for output
    /// cotangent `g`.
    RmsNormVjp {
        /// Epsilon, as `f32::to_bits`.
        eps: u32,
    },
    /// `(x, w, b)`: `(x − mean) / sqrt(var + eps) · w + b` over the last axis; a 0-D `w` or
    /// `b` stands for no weight or no bias.
    LayerNorm {
        /// Epsilon, as `f32::to_bits`.
        eps: u32,
    },
    /// `(x, w, b, g)`: the cotangents of [`FastOp::LayerNorm`]'s `x`, `w` and `b`.
    LayerNormVjp {
        /// Epsilon, as `f32::to_bits`.
        eps: u32,
    },
    /// `(x, offset[, freqs])`: rotary position embeddings of the first `dims` features (see
    /// [`rope`]).
    Rope {
        /// How many leading features rotate (even).
        dims: usize,
        /// Interleaved pairs `(2i, 2i + 1)` instead of the halves `(i, i + dims/2)`.
        traditional: bool,
        /// The frequency base, as `f32::to_bits` (ignored when `freqs` is an input).
        base: u32,
        /// The position scale, as `f32::to_bits`.
        scale: u32,
        /// The rotation itself (`false`: its inverse, which is its gradient).
        forward: bool,
    },
    /// `([cache,] x, w[, freqs])`: [`norm_rope`]. Each row of `x` (`[B, H, L, D]`)
    /// RMS-normalised (when `eps` is set) and rotated as [`FastOp::Rope`] at position
    /// `offset + l`, returned as a new array or written into the cache at those positions.
    NormRope {
        /// Epsilon as `f32::to_bits`, or `None` for no normalisation.
        eps: Option<u32>,
        /// How many leading features rotate (even).
        dims: usize,
        /// Interleaved pairs instead of halves.
        traditional: bool,
        /// The frequency base, as `f32::to_bits` (ignored with `freqs`).
        base: u32,
        /// The position scale, as `f32::to_bits`.
        scale: u32,
        /// The position of the first row.
        offset: usize,
        /// Whether the first input is a cache the rows are written into.
        cache: bool,
    },
    /// `(x, w)`: a depthwise [`crate::conv1d`] (`groups` equal to the channels), `x` as
    /// `[N, L, C]` and `w` as `[C, K, 1]`.
    DepthwiseConv1d {
        /// Input positions between consecutive outputs.
        stride: usize,
        /// Zeros added before and after the input.
        padding: usize,
        /// Input positions between consecutive taps.
        dilation: usize,
    },
    /// `(x)`: softmax over the last axis, accumulated in float32.
    Softmax,
    /// `(x)`: `log(sum(exp(x)))` over the last axis, which is kept with size 1.
    LogSumExp,
    /// `(logits, targets)`: `logsumexp(logits) − logits[target]` per row, as float32.
    CrossEntropy,
    /// `(logits, targets, loss, g)`: the cotangent of [`FastOp::CrossEntropy`]'s logits.
    CrossEntropyVjp,
    /// `(q, k, v[, mask][, sinks])`: [`scaled_dot_product_attention`].
    Attention {
        /// The score scale, as `f32::to_bits`.
        scale: u32,
        /// Causal masking, the queries aligned with the last keys (with a mask too, both
        /// apply).
        causal: bool,
        /// Whether a mask (bool or additive, `[B, Hq, Lq, Lk]`) is the fourth input.
        mask: bool,
        /// Whether per-head sinks (`[Hq]`) are the last input.
        sinks: bool,
    },
    /// `(q, k, v, g, beta, state)`: the gated delta rule (see [`gated_delta`]); outputs
    /// `y` and the final state, or every step's state.
    GatedDelta {
        /// Every step's state (`[B, T, Hv, Dv, Dk]`) instead of the last one.
        steps: bool,
    },
    /// `(q, k, v, g, beta, pool, slots)`: the gated delta rule with each sequence's state
    /// read from and written back to a pool (see [`gated_delta_slots`]); outputs `y` and
    /// the new pool.
    GatedDeltaSlots,
    /// `(q, k_cache, v_cache, block_table, lengths)`: attention over a paged cache (see
    /// [`paged_attention`]).
    PagedAttention {
        /// The score scale, as `f32::to_bits`.
        scale: u32,
    },
    /// `(cache, new, slots)`: rows written into a paged cache (see [`paged_write`]).
    PagedWrite,
    /// `(a, b, lhs_indices, rhs_indices[, offsets])`: matrix products of gathered batches
    /// (see [`gather_mm`]); the indices are uint32 of one shape. `offsets` (int32, one per
    /// batch of `b`) is where each batch's rows start when the rows are sorted by it.
    GatherMm,
    /// `(x, w, scales, biases, lhs_indices, rhs_indices[, offsets])`: quantized matrix
    /// products of gathered batches (see [`gather_qmm`]); the indices are uint32 of one
    /// shape, `offsets` as for [`FastOp::GatherMm`].
    GatherQmm {
        /// Values per scale and bias.
        group_size: usize,
        /// Bits per value.
        bits: u8,
        /// `x · wᵀ` (else `x · w`).
        transpose: bool,
    },
}

/// The mask of [`scaled_dot_product_attention`].
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum AttentionMask<'a> {
    /// Every query sees every key.
    None,
    /// Query `i` sees keys `0..=i + Lk − Lq` (the queries are the last `Lq` positions).
    Causal,
    /// A boolean mask (true: seen) or an additive one, broadcastable to `[B, Hq, Lq, Lk]`.
    Array(&'a Array),
}

/// An `f32` parameter stored as its bits.
pub(crate) fn float(bits: u32) -> f32 {
    f32::from_bits(bits)
}

/// A 0-D array of `value` in `dtype`.
pub(crate) fn scalar(value: f64, dtype: DType) -> Array {
    Array::scalar_of(Canon::Float(value), dtype)
}

/// Whether fused kernels take work of this dtype and size on the current stream.
pub(crate) fn on_gpu(dtype: DType, size: usize) -> bool {
    default_stream().device.kind == DeviceKind::Gpu
        && matches!(dtype, DType::F16 | DType::BF16 | DType::F32)
        && size > 0
        && size < u32::MAX as usize
}

/// Whether a CPU kernel takes `op` on these inputs on the current stream (see
/// [`crate::backend::cpu::fast::takes`]).
pub(crate) fn on_cpu(op: &FastOp, inputs: &[Array]) -> bool {
    if default_stream().device.kind != DeviceKind::Cpu {
        return false;
    }
    let shapes: Vec<&[usize]> = inputs.iter().map(Array::shape).collect();
    let dtypes: Vec<DType> = inputs.iter().map(Array::dtype).collect();
    crate::backend::cpu::fast::takes(op, &shapes, &dtypes)
}

/// Records `op` as one fused node when a kernel takes it (a GPU stream, a supported dtype,
/// a non-empty first input; or a CPU kernel's cases), else builds its fallback graph.
pub(crate) fn record_or_fallback(op: FastOp, inputs: Vec<Array>) -> Result<Vec<Array>> {
    if on_gpu(inputs[0].dtype(), inputs[0].size()) || on_cpu(&op, &inputs) {
        Array::from_op(Primitive::Fast(op), inputs)
    } else {
        op.fallback(&inputs)
    }
}

/// [`record_or_fallback`] for single-output operations.
pub(crate) fn one(op: FastOp, inputs: Vec<Array>) -> Result<Array> {
    Ok(record_or_fallback(op, inputs)?.swap_remove(0))
}

/// The first two outputs as a pair.
pub(crate) fn pair(mut outs: Vec<Array>) -> (Array, Array) {
    let second = outs.swap_remove(1);
    (outs.swap_remove(0), second)
}

/// The error of the first input in an error state.
pub(crate) fn check_inputs(inputs: &[&Array]) -> Result<()> {
    crate::ops::check_errors(inputs)
}

/// An error unless `dtype` is a real floating type.
pub(crate) fn floating(op: &'static str, dtype: DType) -> Result<()> {
    if dtype.category() == Category::Float {
        Ok(())
    } else {
        Err(Error::UnsupportedDType { op, dtype })
    }
}

/// Whether `dtype` holds integers.
pub(crate) fn integral(dtype: DType) -> bool {
    matches!(dtype.category(), Category::Signed | Category::Unsigned)
}

/// An error unless `p` is 1-D with as many elements as `x`'s last axis.
pub(crate) fn check_param(op: &'static str, what: &str, p: &Array, x: &Array) -> Result<()> {
    let d = x.shape()[x.ndim() - 1];
    if p.ndim() != 1 || p.size() != d {
        return Err(crate::error::invalid(
            op,
            format!(
                "{what} must be 1-D with {d} elements, got shape {:?}",
                p.shape()
            ),
        ));
    }
    Ok(())
}

/// `x` in the type statistics are computed in: float32 for the half types, else its own.
pub(crate) fn wide(x: &Array) -> Result<Array> {
    match x.dtype() {
        DType::F16 | DType::BF16 => x.astype(DType::F32),
        _ => Ok(x.clone()),
    }
}

/// A shape as the signed dimensions `reshape` takes.
pub(crate) fn dims(shape: &[usize]) -> Vec<isize> {
    shape.iter().map(|&d| d as isize).collect()
}

/// The range `start..stop` of one axis as a slice argument.
pub(crate) fn span(start: usize, stop: usize) -> crate::SliceArg {
    crate::SliceArg::new(Some(start as isize), Some(stop as isize), 1)
}

impl FastOp {
    /// The operation's name, as errors and graph dumps show it.
    pub fn name(&self) -> &'static str {
        match self {
            FastOp::RmsNorm { .. } => "rms_norm",
            FastOp::AddRmsNorm { .. } => "add_rms_norm",
            FastOp::RmsNormVjp { .. } => "rms_norm_vjp",
            FastOp::LayerNorm { .. } => "layer_norm",
            FastOp::LayerNormVjp { .. } => "layer_norm_vjp",
            FastOp::Rope { .. } => "rope",
            FastOp::NormRope { .. } => "norm_rope",
            FastOp::DepthwiseConv1d { .. } => "conv1d",
            FastOp::Softmax => "softmax",
            FastOp::LogSumExp => "logsumexp",
            FastOp::CrossEntropy => "cross_entropy",
            FastOp::CrossEntropyVjp => "cross_entropy_vjp",
            FastOp::Attention { .. } => "scaled_dot_product_attention",
            FastOp::GatedDelta { .. } => "gated_delta",
            FastOp::GatedDeltaSlots => "gated_delta_slots",
            FastOp::PagedAttention { .. } => "paged_attention",
            FastOp::PagedWrite => "paged_write",
            FastOp::GatherMm => "gather_mm",
            FastOp::GatherQmm { .. } => "gather_qmm",
        }
    }

    /// The same computation from ordinary operations, recorded on the current stream: what
    /// runs where no kernel does, and what defines forward derivatives and batching (and
    /// the reference the kernels are tested against).
    ///
    /// ```
    /// use nuvec_core::{Array, fast::FastOp};
    ///
    /// # fn main() -> nuvec_core::Result<()> {
    /// let x = Array::from_slice(&[3.0f32, 4.0], &[1, 2])?;
    /// let op = FastOp::RmsNorm { eps: 0.0f32.to_bits() };
    /// let y = op.fallback(&[x, Array::scalar(1.0f32)])?.remove(0);
    /// let rms = 12.5f32.sqrt();
    /// assert_eq!(y.to_vec::<f32>()?, [3.0 / rms, 4.0 / rms]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn fallback(&self, inputs: &[Array]) -> Result<Vec<Array>> {
        match self {
            FastOp::RmsNorm { eps } => Ok(vec![norms::rms_graph(inputs, float(*eps))?]),
            FastOp::AddRmsNorm { eps } => norms::add_rms_graph(inputs, *eps),
            FastOp::RmsNormVjp { eps } => norms::rms_vjp_graph(inputs, float(*eps)),
            FastOp::LayerNorm { eps } => Ok(vec![norms::layer_graph(inputs, float(*eps))?]),
            FastOp::LayerNormVjp { eps } => norms::layer_vjp_graph(inputs, float(*eps)),
            FastOp::Softmax => Ok(vec![norms::softmax_graph(&inputs[0])?]),
            FastOp::LogSumExp => Ok(vec![norms::logsumexp_graph(&inputs[0])?]),
            FastOp::CrossEntropy => Ok(vec![norms::cross_entropy_graph(inputs)?]),
            FastOp::CrossEntropyVjp => Ok(vec![norms::cross_entropy_vjp_graph(inputs)?]),
            FastOp::Rope {
                dims,
                traditional,
                base,
                scale,
                forward,
            } => {
                let angles = rope::Angles {
                    dims: *dims,
                    traditional: *traditional,
                    base: float(*base),
                    scale: float(*scale),
                };
                Ok(vec![rope::rope_graph(inputs, angles, *forward)?])
            }
            FastOp::NormRope { .. } => Ok(vec![rope::norm_rope_fallback(self, inputs)?]),
            FastOp::DepthwiseConv1d {
                stride,
                padding,
                dilation,
            } => Ok(vec![conv::depthwise_graph(
                &inputs[0], &inputs[1], *stride, *padding, *dilation,
            )?]),
            FastOp::Attention {
                scale,
                causal,
                mask,
                sinks,
            } => {
                let form = attention::Form {
                    scale: float(*scale),
                    causal: *causal,
                    mask: *mask,
                    sinks: *sinks,
                };
                Ok(vec![attention::attention_graph(inputs, form)?])
            }
            FastOp::GatedDelta { steps } => gated_delta::gated_delta_graph(inputs, *steps),
            FastOp::GatedDeltaSlots => gated_delta::slots_graph(inputs),
            FastOp::PagedAttention { scale } => {
                Ok(vec![paged::paged_attention_graph(inputs, float(*scale))?])
            }
            FastOp::PagedWrite => Ok(vec![paged::paged_write_graph(inputs)?]),
            FastOp::GatherMm => Ok(vec![gather::gather_mm_graph(inputs)?]),
            FastOp::GatherQmm {
                group_size,
                bits,
                transpose,
            } => Ok(vec![gather::gather_qmm_graph(
                inputs,
                *group_size,
                u32::from(*bits),
                *transpose,
            )?]),
        }
    }
}
