//! The CPU backend: one file per primitive family. Large arrays are split over the rayon
//! pool; small ones run on the calling thread.

mod binary;
mod conv;
pub(crate) mod copy;
mod creation;
pub(crate) mod elementwise;
pub(crate) mod fast;
mod index;
mod linalg;
pub(crate) mod math;
mod quantized;
mod random;
mod reduce;
pub(crate) mod shape;
mod simd;
pub(crate) mod sort;
mod stream;
mod transpose;
mod unary;

use crate::Result;
use crate::array::ArrayData;
use crate::primitive::{OutputSpec, Primitive};

/// Computes one node's outputs on the CPU.
pub(crate) fn eval(
    primitive: &Primitive,
    inputs: &mut [ArrayData],
    outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    match primitive {
        Primitive::Creation(op) => creation::eval(op, outputs),
        Primitive::AsType(dtype) => Ok(vec![unary::astype(&mut inputs[0], *dtype)]),
        Primitive::Unary(op) => Ok(vec![unary::eval(*op, &mut inputs[0], outputs[0].1)?]),
        Primitive::Binary(op) => Ok(vec![binary::eval(*op, inputs, outputs[0].1)?]),
        Primitive::Select => Ok(vec![binary::select(inputs)?]),
        Primitive::Reduce { op, axes } => reduce::eval(*op, axes, inputs, outputs),
        Primitive::ArgReduce { op, axis } => reduce::eval_arg(*op, *axis, inputs, outputs),
        Primitive::Scan {
            op,
            axis,
            reverse,
            inclusive,
        } => reduce::eval_scan(*op, *axis, *reverse, *inclusive, inputs, outputs),
        Primitive::Softmax => reduce::eval_softmax(inputs),
        Primitive::Sort(op) => sort::eval(op, inputs, outputs),
        Primitive::Shape(op) => shape::eval(op, inputs, outputs),
        Primitive::Index(op) => index::eval(op, inputs, outputs),
        Primitive::Matmul(op) => linalg::eval(op, inputs, outputs),
        Primitive::Random(op) => random::eval(op, inputs, outputs),
        Primitive::Conv(op) => conv::eval(op, inputs, outputs),
        Primitive::Quantized(op) => quantized::eval(op, inputs, outputs),
        Primitive::StopGradient | Primitive::Identity => Ok(vec![inputs[0].clone()]),
        Primitive::Fast(op) => fast::eval(op, inputs, outputs),
        Primitive::Custom(op) => Ok(op.forward(inputs)),
    }
}
