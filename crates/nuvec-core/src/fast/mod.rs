//! Fused operations, as MLX's `mx.fast`: [`rms_norm`], [`layer_norm`], [`rope`],
//! [`cross_entropy`], [`scaled_dot_product_attention`] and the gated delta rule
//! ([`gated_delta`], mlx-lm's Gated DeltaNet recurrence), with nuvec's own [`add_rms_norm`]
//! (a residual connection and its norm), [`norm_rope`] (norm, rotation and a cache write),
//! the paged key/value cache of vLLM ([`paged_attention`], [`paged_write`]) and a pool of
//! recurrent states addressed by slot ([`gated_delta_slots`]). [`crate::softmax`] and
//! [`crate::logsumexp`] over the last axis join them on the GPU. Users write kernels of
//! their own with [`CustomKernel`] (MLX's `mx.fast.cuda_kernel`), which run on GPU streams
//! only and have no fallback.
//!
//! Every operation here is meant to be one kernel, and each also has a *fallback*: the same
//! computation written with ordinary operations. A fused node ([`FastOp`], recorded as
//! [`crate::Primitive::Fast`]) is recorded only where a kernel of the current stream's device
//! takes the inputs; everywhere else the fallback graph is recorded instead, so its ordinary
//! nodes run (and, on a GPU, are batched into CUDA graphs) like any others. The fallback also
//! defines forward derivatives and batching; reverse mode has dedicated rules where MLX has
//! them (the norms, cross entropy, the inverse rotation).
//!
//! # One operation, one unit
//!
//! Each operation is a *unit*: a type implementing the crate's `Fused` trait, with its name,
//! its input checks and output specs, its fallback, its rules (reverse and forward mode and
//! batching default to the fallback's) and its kernels. The kernels live in the backends, one
//! file per family: `backend/cpu/fast/X.rs` implements the CPU's `CpuKernel` for the unit and
//! `backend/cuda/fast/X.rs` (with `backend/cuda/kernels/fast/X.cu`) the GPU's `CudaKernel`.
//! Each kernel says in one `takes` which inputs (shapes and dtypes) it computes; the builder
//! asks it before recording a fused node, and the backend asks it again before running the
//! kernel, so the two decisions cannot disagree. To add an operation `X`:
//!
//! 1. a variant of [`FastOp`] and its arm in `FastOp::unit` (the one line of registration);
//! 2. `fast/X.rs`: the public function, the unit and its `Fused` implementation;
//! 3. where it has kernels: `backend/cpu/fast/X.rs`, `backend/cuda/fast/X.rs` and
//!    `backend/cuda/kernels/fast/X.cu`, and the unit's `cpu`/`cuda` methods returning them.
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

pub(crate) mod attention;
mod check;
pub(crate) mod conv;
pub(crate) mod custom;
pub(crate) mod gated_delta;
pub(crate) mod gather;
pub(crate) mod norm_grads;
pub(crate) mod norms;
pub(crate) mod paged;
pub(crate) mod rope;
mod rules;
pub(crate) mod softmax;

pub use attention::scaled_dot_product_attention;
pub use custom::{CustomKernel, KernelCall, KernelConfig, MetalKernel, TemplateArg};
pub use gated_delta::{gated_delta, gated_delta_slots, gated_delta_steps};
pub use gather::{gather_mm, gather_qmm};
pub use norms::{add_rms_norm, layer_norm, rms_norm};
pub use paged::{paged_attention, paged_write};
pub use rope::{Rotation, norm_rope, rope};
pub use softmax::cross_entropy;

use crate::backend::cpu::fast::CpuKernel;
use crate::backend::cuda::fast::CudaKernel;
use crate::dtype::Canon;
use crate::primitive::{Batched, OutputSpec, Primitive};
use crate::transforms::rules::{JvpArgs, VjpArgs};
use crate::{Array, Category, DType, DeviceKind, Error, Result, default_stream};
use check::Checker;

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
    /// `(inputs...)`: a user's CUDA kernel (see [`CustomKernel`]), specialised for its
    /// inputs' types and the call's outputs, launch and template arguments. It has no
    /// fallback (GPU streams only) and no derivative or batching rules.
    Custom(std::sync::Arc<KernelCall>),
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

/// One input as a kernel's `takes` sees it: its shape and element type (layouts are the
/// kernel's own business: it copies what it cannot read in place).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Arg<'a> {
    pub(crate) shape: &'a [usize],
    pub(crate) dtype: DType,
}

impl Arg<'_> {
    /// The number of elements.
    pub(crate) fn size(&self) -> usize {
        self.shape.iter().product()
    }

    /// The length of the last axis (1 for a 0-D input).
    pub(crate) fn last(&self) -> usize {
        self.shape.last().copied().unwrap_or(1)
    }

    /// Whether the element type is one the fused kernels compute (f32, f16, bf16).
    pub(crate) fn kernel_float(&self) -> bool {
        matches!(self.dtype, DType::F32 | DType::F16 | DType::BF16)
    }
}

/// The inputs of a node as [`Arg`]s.
pub(crate) fn args_of(inputs: &[Array]) -> Vec<Arg<'_>> {
    inputs
        .iter()
        .map(|a| Arg {
            shape: a.shape(),
            dtype: a.dtype(),
        })
        .collect()
}

/// Whether the first input is a non-empty array of a kernel type with fewer than 2³²
/// elements: what every fused kernel asks of its main input.
pub(crate) fn kernel_sized(args: &[Arg<'_>]) -> bool {
    args.first()
        .is_some_and(|x| x.kernel_float() && x.size() > 0 && x.size() < u32::MAX as usize)
}

/// One fused operation: everything the crate needs to know about it, in one place (see the
/// [module documentation](self)). Reverse mode, forward mode and batching default to the
/// fallback graph's.
pub(crate) trait Fused {
    /// The operation's name, as errors and graph dumps show it.
    fn name(&self) -> &'static str;

    /// The checks a node's inputs (`c.inputs`) must pass (the public functions check and
    /// convert their arguments first; these keep a node built by hand from reaching a
    /// fallback that cannot take it), and the shape and type of each output.
    fn specs(&self, c: &Checker<'_>) -> Result<Vec<OutputSpec>>;

    /// [`Fused::specs`] of `inputs`, its errors named after the operation.
    fn output_specs(&self, inputs: &[Array]) -> Result<Vec<OutputSpec>> {
        self.specs(&Checker {
            op: self.name(),
            inputs,
        })
    }

    /// The same computation from ordinary operations, recorded on the current stream.
    fn fallback(&self, inputs: &[Array]) -> Result<Vec<Array>>;

    /// How many outputs a node has (what batching needs before any shape is known).
    fn output_count(&self) -> usize {
        1
    }

    /// The cotangents of the inputs `argnums`.
    fn vjp(&self, call: VjpArgs<'_>) -> Result<Vec<Array>> {
        rules::vjp_of_fallback(self, call)
    }

    /// The tangent of each output.
    fn jvp(&self, call: JvpArgs<'_>) -> Result<Vec<Array>> {
        rules::jvp_of_fallback(self, call)
    }

    /// The operation over batched inputs.
    fn vmap(&self, inputs: &[Array], axes: &[Option<usize>]) -> Result<Batched> {
        rules::vmap_of_fallback(self, inputs, axes)
    }

    /// The CPU kernel, where there is one.
    fn cpu(&self) -> Option<&dyn CpuKernel> {
        None
    }

    /// The CUDA kernel, where there is one.
    fn cuda(&self) -> Option<&dyn CudaKernel> {
        None
    }
}

/// Whether a kernel of `device` computes `unit` on inputs like `args`.
pub(crate) fn kernel_takes(unit: &dyn Fused, device: DeviceKind, args: &[Arg<'_>]) -> bool {
    match device {
        DeviceKind::Cpu => unit.cpu().is_some_and(|k| k.takes(args)),
        DeviceKind::Gpu => unit.cuda().is_some_and(|k| k.takes(args)),
    }
}

impl FastOp {
    /// The operation's unit: the one place that maps each variant to its code.
    pub(crate) fn unit(&self) -> Box<dyn Fused> {
        match *self {
            FastOp::RmsNorm { eps } => Box::new(norms::RmsNorm { eps: float(eps) }),
            FastOp::AddRmsNorm { eps } => Box::new(norms::AddRmsNorm { eps: float(eps) }),
            FastOp::RmsNormVjp { eps } => Box::new(norm_grads::RmsNormVjp { eps: float(eps) }),
            FastOp::LayerNorm { eps } => Box::new(norms::LayerNorm { eps: float(eps) }),
            FastOp::LayerNormVjp { eps } => Box::new(norm_grads::LayerNormVjp { eps: float(eps) }),
            FastOp::Rope {
                dims,
                traditional,
                base,
                scale,
                forward,
            } => Box::new(rope::Rope {
                angles: rope::Angles::new(dims, traditional, base, scale),
                forward,
            }),
            FastOp::NormRope {
                eps,
                dims,
                traditional,
                base,
                scale,
                offset,
                cache,
            } => Box::new(rope::NormRope {
                eps: eps.map(float),
                angles: rope::Angles::new(dims, traditional, base, scale),
                offset,
                cache,
            }),
            FastOp::DepthwiseConv1d {
                stride,
                padding,
                dilation,
            } => Box::new(conv::DepthwiseConv1d {
                stride,
                padding,
                dilation,
            }),
            FastOp::Softmax => Box::new(softmax::Softmax),
            FastOp::LogSumExp => Box::new(softmax::LogSumExp),
            FastOp::CrossEntropy => Box::new(softmax::CrossEntropy),
            FastOp::CrossEntropyVjp => Box::new(softmax::CrossEntropyVjp),
            FastOp::Attention {
                scale,
                causal,
                mask,
                sinks,
            } => Box::new(attention::Attention {
                scale: float(scale),
                causal,
                mask,
                sinks,
            }),
            FastOp::GatedDelta { steps } => Box::new(gated_delta::GatedDelta { steps }),
            FastOp::GatedDeltaSlots => Box::new(gated_delta::GatedDeltaSlots),
            FastOp::PagedAttention { scale } => Box::new(paged::PagedAttention {
                scale: float(scale),
            }),
            FastOp::PagedWrite => Box::new(paged::PagedWrite),
            FastOp::GatherMm => Box::new(gather::GatherMm),
            FastOp::GatherQmm {
                group_size,
                bits,
                transpose,
            } => Box::new(gather::GatherQmm {
                group_size,
                bits: u32::from(bits),
                transpose,
            }),
            FastOp::Custom(ref call) => Box::new(custom::Custom(std::sync::Arc::clone(call))),
        }
    }

    /// The operation's name, as errors and graph dumps show it.
    pub fn name(&self) -> &'static str {
        self.unit().name()
    }

    /// The shape and type of each output for these inputs, or the error that makes them
    /// invalid.
    pub fn output_specs(&self, inputs: &[Array]) -> Result<Vec<OutputSpec>> {
        self.unit().output_specs(inputs)
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
        self.unit().fallback(inputs)
    }

    /// Whether a kernel of `device` computes this operation on these inputs: what decides
    /// between recording the fused node and its fallback.
    pub(crate) fn takes(&self, device: DeviceKind, inputs: &[Array]) -> bool {
        kernel_takes(&*self.unit(), device, &args_of(inputs))
    }
}

thread_local! {
    /// Fused nodes that ran their fallback graph inside the node in this thread's evaluations.
    static NESTED_FALLBACKS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How many fused nodes have run their fallback graph inside the node (as a nested
/// evaluation) in evaluations on this thread (evaluation runs on the thread that asks for it,
/// so tests running side by side do not see each other's). The public functions record a fused node only where a kernel
/// takes it, so this grows only for nodes built by hand ([`Array::from_op`]) for inputs no
/// kernel takes, and for attention in f32 beyond the decoding kernel's shapes, whose GPU
/// kernel is still pending (the seeds record it as a fused node on the GPU). Tests read it to
/// check that the kernels really ran.
pub fn nested_fallbacks() -> usize {
    NESTED_FALLBACKS.with(|n| n.get())
}

/// Counts one nested fallback run (see [`nested_fallbacks`]).
pub(crate) fn count_nested_fallback() {
    NESTED_FALLBACKS.with(|n| n.set(n.get() + 1));
}

/// An `f32` parameter stored as its bits.
pub(crate) fn float(bits: u32) -> f32 {
    f32::from_bits(bits)
}

/// A 0-D array of `value` in `dtype`.
pub(crate) fn scalar(value: f64, dtype: DType) -> Array {
    Array::scalar_of(Canon::Float(value), dtype)
}

/// Records `op` as one fused node where a kernel of the current stream's device takes the
/// inputs, else builds its fallback graph.
pub(crate) fn record_or_fallback(op: FastOp, inputs: Vec<Array>) -> Result<Vec<Array>> {
    let unit = op.unit();
    let device = default_stream().device.kind;
    if kernel_takes(&*unit, device, &args_of(&inputs)) {
        Array::from_op(Primitive::Fast(op), inputs)
    } else {
        unit.fallback(&inputs)
    }
}

/// [`record_or_fallback`] for single-output operations.
pub(crate) fn one(op: FastOp, inputs: Vec<Array>) -> Result<Array> {
    Ok(record_or_fallback(op, inputs)?.swap_remove(0))
}

/// The fused node of `op` where a kernel of the current stream's device takes the inputs,
/// else `None` (for operations whose callers have another graph to record).
pub(crate) fn fused_here(op: FastOp, inputs: Vec<Array>) -> Result<Option<Array>> {
    if op.takes(default_stream().device.kind, &inputs) {
        Ok(Some(Array::op1(Primitive::Fast(op), inputs)?))
    } else {
        Ok(None)
    }
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
