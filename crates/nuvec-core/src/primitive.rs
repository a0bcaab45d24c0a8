//! [`Primitive`]: the operations a graph node can hold, one variant per family.
//!
//! Each family owns its enum (in `ops/`) with the methods every primitive has: its `name` and
//! its `output_specs` (the shape and type of each output, checked when the node is built).
//! Each backend has one file per family with its evaluation. This file only dispatches.

use crate::fast::FastOp;
use crate::ops::binary::BinaryOp;
use crate::ops::conv::ConvOp;
use crate::ops::creation::CreationOp;
use crate::ops::index::IndexOp;
use crate::ops::linalg::MatmulOp;
use crate::ops::quantized::QuantizedOp;
use crate::ops::random::RandomOp;
use crate::ops::reduce::{ArgReduceOp, ReduceOp, ScanOp};
use crate::ops::shape::ShapeOp;
use crate::ops::sort::SortOp;
use crate::ops::unary::UnaryOp;
use crate::{Array, DType, Result};

/// The shape and element type of one output.
pub type OutputSpec = (Vec<usize>, DType);

/// An operation recorded in the graph.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Primitive {
    /// Arrays computed from nothing (`arange`).
    Creation(CreationOp),
    /// Conversion of every element to another type.
    AsType(DType),
    /// One-input elementwise functions.
    Unary(UnaryOp),
    /// Two-input elementwise functions (arithmetic, comparisons, logic, bits) of same-shape
    /// inputs (broadcasting happens in the op function, as views).
    Binary(BinaryOp),
    /// `where_(condition, x, y)` elementwise on same-shape inputs.
    Select,
    /// Reductions over axes, keeping them as size 1.
    Reduce {
        /// The reduction.
        op: ReduceOp,
        /// The reduced axes (non-negative, sorted, unique).
        axes: Vec<usize>,
    },
    /// The index of the largest or smallest element along an axis (kept as size 1), as `u32`.
    ArgReduce {
        /// Which extreme.
        op: ArgReduceOp,
        /// The axis (non-negative).
        axis: usize,
    },
    /// Cumulative reductions along an axis.
    Scan {
        /// The reduction.
        op: ScanOp,
        /// The axis (non-negative).
        axis: usize,
        /// From the end of the axis.
        reverse: bool,
        /// Whether element `i` includes input `i`.
        inclusive: bool,
    },
    /// `exp(x - logsumexp(x))` over the last axis, in `float32` for half types (see
    /// [`crate::softmax`], which moves other axes there).
    Softmax,
    /// Sorting and partitioning along an axis.
    Sort(SortOp),
    /// Views (reshape, transpose, broadcast, slice, split) and copies (concatenate, contiguous).
    Shape(ShapeOp),
    /// Gathers and scatters, `slice_update`.
    Index(IndexOp),
    /// Matrix products.
    Matmul(MatmulOp),
    /// Random bits from threefry keys.
    Random(RandomOp),
    /// Convolutions (channels last).
    Conv(ConvOp),
    /// Affine quantization: quantize, dequantize, quantized matrix products.
    Quantized(QuantizedOp),
    /// The input unchanged, with no derivative flowing back through it.
    StopGradient,
    /// The input unchanged (a view): how the transforms mark the inputs they trace.
    Identity,
    /// A fused operation ([`crate::fast`]), recorded where a kernel takes it.
    Fast(FastOp),
    /// A function with derivative or batching rules of its own ([`crate::custom_function`]):
    /// its inputs are the function's primals, then the outputs of its graph, handed on.
    Custom(crate::transforms::CustomOp),
}

/// What a batching rule returns: the batched outputs and each one's batch axis (`None` for
/// an output that does not vary over the batch).
pub type Batched = (Vec<Array>, Vec<Option<usize>>);

impl Primitive {
    /// The cotangents of the inputs listed in `argnums`, given the cotangent of each output
    /// (`None` where an output has none) and the outputs themselves (`None` where dropped).
    pub fn vjp(
        &self,
        inputs: &[Array],
        outputs: &[Option<Array>],
        cotangents: &[Option<Array>],
        argnums: &[usize],
    ) -> Result<Vec<Array>> {
        let call = crate::transforms::rules::VjpArgs {
            inputs,
            outputs,
            cotangents,
            argnums,
        };
        crate::transforms::rules::vjp(self, call)
    }

    /// The tangent of each output, given each input's tangent (`None` for constants).
    pub fn jvp(
        &self,
        inputs: &[Array],
        outputs: &[Option<Array>],
        tangents: &[Option<Array>],
    ) -> Result<Vec<Array>> {
        let call = crate::transforms::rules::JvpArgs {
            inputs,
            outputs,
            tangents,
        };
        crate::transforms::rules::jvp(self, call)
    }

    /// The primitive applied to batched inputs: `axes[i]` is input `i`'s batch axis (`None`
    /// for an input shared by the whole batch).
    pub fn vmap(&self, inputs: &[Array], axes: &[Option<usize>]) -> Result<Batched> {
        crate::transforms::rules::vmap(self, inputs, axes)
    }

    /// The primitive's name, as errors and graph dumps show it.
    pub fn name(&self) -> &'static str {
        match self {
            Primitive::Creation(op) => op.name(),
            Primitive::AsType(_) => "astype",
            Primitive::Unary(op) => op.name(),
            Primitive::Binary(op) => op.name(),
            Primitive::Select => "where",
            Primitive::Reduce { op, .. } => op.name(),
            Primitive::ArgReduce { op, .. } => op.name(),
            Primitive::Scan { op, .. } => op.name(),
            Primitive::Softmax => "softmax",
            Primitive::Sort(op) => op.name(),
            Primitive::Shape(op) => op.name(),
            Primitive::Index(op) => op.name(),
            Primitive::Matmul(op) => op.name(),
            Primitive::Random(op) => op.name(),
            Primitive::Conv(op) => op.name(),
            Primitive::Quantized(op) => op.name(),
            Primitive::StopGradient => "stop_gradient",
            Primitive::Identity => "identity",
            Primitive::Fast(op) => op.name(),
            Primitive::Custom(op) => op.name(),
        }
    }

    /// The shape and type of each output for these inputs, or the error that makes them
    /// invalid.
    pub fn output_specs(&self, inputs: &[Array]) -> Result<Vec<OutputSpec>> {
        match self {
            Primitive::Creation(op) => op.output_specs(inputs),
            Primitive::AsType(dtype) => {
                crate::ops::expect_inputs("astype", inputs, 1)?;
                Ok(vec![(inputs[0].shape().to_vec(), *dtype)])
            }
            Primitive::Unary(op) => op.output_specs(inputs),
            Primitive::Binary(op) => op.output_specs(inputs),
            Primitive::Select => crate::ops::binary::select_output_specs(inputs),
            Primitive::Reduce { op, axes } => op.output_specs(axes, inputs),
            Primitive::ArgReduce { op, axis } => op.output_specs(*axis, inputs),
            Primitive::Scan { op, axis, .. } => op.output_specs(*axis, inputs),
            Primitive::Softmax => crate::ops::reduce::softmax_output_specs(inputs),
            Primitive::Sort(op) => op.output_specs(inputs),
            Primitive::Shape(op) => op.output_specs(inputs),
            Primitive::Index(op) => op.output_specs(inputs),
            Primitive::Matmul(op) => op.output_specs(inputs),
            Primitive::Random(op) => op.output_specs(inputs),
            Primitive::Conv(op) => op.output_specs(inputs),
            Primitive::Quantized(op) => op.output_specs(inputs),
            Primitive::StopGradient | Primitive::Identity => {
                crate::ops::expect_inputs(self.name(), inputs, 1)?;
                Ok(vec![(inputs[0].shape().to_vec(), inputs[0].dtype())])
            }
            Primitive::Fast(op) => op.output_specs(inputs),
            Primitive::Custom(op) => op.output_specs(inputs),
        }
    }
}
