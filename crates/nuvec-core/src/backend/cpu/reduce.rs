//! Reductions, arg-reductions, scans and softmax on the CPU.
//!
//! Each entry point picks the element type once and the fold that goes with it (the
//! accumulator and output types of MLX's rules); [`plan`] decides how the input is walked,
//! [`fold`] what happens to each element, [`softmax`] holds the fused exponential kernels
//! and [`scan`] the kernels that keep positions.

mod fold;
mod plan;
mod scan;
use super::simd;
mod softmax;

use fold::{All, Any, LogAdd, Max, Min, Prod, Sum};
use plan::{Plan, run};

use crate::array::{ArrayData, HostData};
use crate::backend::cpu::copy::to_contiguous_shared;
use crate::dtype::{Canon, Complex64, Element, bf16, f16};
use crate::ops::reduce::{ArgReduceOp, ReduceOp, ScanOp};
use crate::primitive::OutputSpec;
use crate::{DType, Error, Result};

/// Runs `$kernel::<T, Fold>(v, ...)` for the input's element type, with the fold listed for
/// it; types not listed are an error (the op's checks have rejected them already).
macro_rules! by_type {
    ($host:expr, $op:expr, |$v:ident: $T:ident, $F:ident| $call:expr, {
        $($variant:ident => $t:ty, $fold:ty;)*
    }) => {{
        match $host {
            $(HostData::$variant($v) => {
                type $T = $t;
                type $F = $fold;
                Ok($call)
            })*
            #[allow(unreachable_patterns)]
            other => Err(Error::UnsupportedDType { op: $op, dtype: other.dtype() }),
        }
    }};
}

/// Calls `$go!` with the element types of a sum or product and its fold `$F<element,
/// accumulator, output>`: bool and small integers widened (MLX's rule), half floats
/// accumulated in `f32`.
macro_rules! widening {
    ($go:ident, $F:ident) => {
        $go!({
            Bool => bool, $F<bool, i32, i32>;
            U8 => u8, $F<u8, u32, u32>;
            U16 => u16, $F<u16, u32, u32>;
            U32 => u32, $F<u32, u32, u32>;
            U64 => u64, $F<u64, u64, u64>;
            I8 => i8, $F<i8, i32, i32>;
            I16 => i16, $F<i16, i32, i32>;
            I32 => i32, $F<i32, i32, i32>;
            I64 => i64, $F<i64, i64, i64>;
            F16 => f16, $F<f32, f32, f16>;
            BF16 => bf16, $F<f32, f32, bf16>;
            F32 => f32, $F<f32, f32, f32>;
            F64 => f64, $F<f64, f64, f64>;
            C64 => Complex64, $F<Complex64, Complex64, Complex64>;
        })
    };
}

/// Calls `$go!` with the ordered element types and the extreme fold `$F<element, output>`
/// (half floats compared in `f32`).
macro_rules! ordered {
    ($go:ident, $F:ident) => {
        $go!({
            Bool => bool, $F<bool, bool>;
            U8 => u8, $F<u8, u8>;
            U16 => u16, $F<u16, u16>;
            U32 => u32, $F<u32, u32>;
            U64 => u64, $F<u64, u64>;
            I8 => i8, $F<i8, i8>;
            I16 => i16, $F<i16, i16>;
            I32 => i32, $F<i32, i32>;
            I64 => i64, $F<i64, i64>;
            F16 => f16, $F<f32, f16>;
            BF16 => bf16, $F<f32, bf16>;
            F32 => f32, $F<f32, f32>;
            F64 => f64, $F<f64, f64>;
        })
    };
}

/// Computes a reduction.
pub(crate) fn eval(
    op: ReduceOp,
    axes: &[usize],
    inputs: &mut [ArrayData],
    outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    let x = &inputs[0];
    let (shape, dtype) = (&outputs[0].0, outputs[0].1);
    if op == ReduceOp::LogSumExp {
        return Ok(vec![softmax::logsumexp(x, shape)?]);
    }
    if x.layout.size() == 0 {
        return Ok(vec![identity(op, dtype, shape)]);
    }
    let idempotent = !matches!(op, ReduceOp::Sum | ReduceOp::Prod);
    let plan = Plan::new(&x.layout, axes, idempotent, true);
    let host = x.buffer.host()?;
    let name = op.name();
    let done = |h: HostData| ArrayData::from_host(h, shape);
    macro_rules! go {
        ({ $($body:tt)* }) => {
            by_type!(host, name, |v: T, F| done(<F as fold::Fold>::Out::into_host(run::<T, F>(v, &plan))), { $($body)* })
        };
    }
    let out = match op {
        ReduceOp::Sum => widening!(go, Sum),
        ReduceOp::Prod => widening!(go, Prod),
        ReduceOp::Max => ordered!(go, Max),
        ReduceOp::Min => ordered!(go, Min),
        ReduceOp::All => go!({
            Bool => bool, All<bool>;
        }),
        ReduceOp::Any => go!({
            Bool => bool, Any<bool>;
        }),
        ReduceOp::LogSumExp => unreachable!("handled above"),
    }?;
    Ok(vec![out])
}

/// The result of reducing no elements: 0 for sums, 1 for products, `true` for `all`,
/// `false` for `any` (max, min and logsumexp refuse empty reductions when recorded).
fn identity(op: ReduceOp, dtype: DType, shape: &[usize]) -> ArrayData {
    let value = match op {
        ReduceOp::Prod | ReduceOp::All => Canon::Int(1),
        _ => Canon::Int(0),
    };
    let n = shape.iter().product();
    crate::with_dtype!(dtype, T => ArrayData::from_vec(vec![T::from_canon(value); n], shape))
}

/// Computes an arg-reduction.
pub(crate) fn eval_arg(
    op: ArgReduceOp,
    axis: usize,
    inputs: &mut [ArrayData],
    outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    let x = &inputs[0];
    let shape = &outputs[0].0;
    if x.layout.size() == 0 {
        let n = shape.iter().product();
        return Ok(vec![ArrayData::from_vec(vec![0u32; n], shape)]);
    }
    let plan = Plan::new(&x.layout, &[axis], true, false);
    let host = x.buffer.host()?;
    macro_rules! typed {
        ($max:expr) => {
            match host {
                HostData::Bool(v) => scan::arg::<bool, $max>(v, &plan),
                HostData::U8(v) => scan::arg::<u8, $max>(v, &plan),
                HostData::U16(v) => scan::arg::<u16, $max>(v, &plan),
                HostData::U32(v) => scan::arg::<u32, $max>(v, &plan),
                HostData::U64(v) => scan::arg::<u64, $max>(v, &plan),
                HostData::I8(v) => scan::arg::<i8, $max>(v, &plan),
                HostData::I16(v) => scan::arg::<i16, $max>(v, &plan),
                HostData::I32(v) => scan::arg::<i32, $max>(v, &plan),
                HostData::I64(v) => scan::arg::<i64, $max>(v, &plan),
                HostData::F16(v) => scan::arg::<f16, $max>(v, &plan),
                HostData::BF16(v) => scan::arg::<bf16, $max>(v, &plan),
                HostData::F32(v) => scan::arg::<f32, $max>(v, &plan),
                HostData::F64(v) => scan::arg::<f64, $max>(v, &plan),
                HostData::C64(_) => {
                    return Err(Error::UnsupportedDType {
                        op: op.name(),
                        dtype: DType::C64,
                    });
                }
            }
        };
    }
    let out = match op {
        ArgReduceOp::ArgMax => typed!(true),
        ArgReduceOp::ArgMin => typed!(false),
    };
    Ok(vec![ArrayData::from_vec(out, shape)])
}

/// Computes a scan.
pub(crate) fn eval_scan(
    op: ScanOp,
    axis: usize,
    reverse: bool,
    inclusive: bool,
    inputs: &mut [ArrayData],
    outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    let x = to_contiguous_shared(&inputs[0]);
    let shape = &outputs[0].0;
    let len = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let (lo, hi) = (x.layout.offset, x.layout.offset + x.layout.size());
    let name = op.name();
    let done = |h: HostData| ArrayData::from_host(h, shape);
    macro_rules! go {
        ({ $($body:tt)* }) => {
            by_type!(x.buffer.host()?, name, |v: T, F| done(<F as fold::Fold>::Out::into_host(
                scan::scan::<T, F>(&v[lo..hi], len, inner, reverse, inclusive)
            )), { $($body)* })
        };
    }
    let out = match op {
        ScanOp::Sum => widening!(go, Sum),
        ScanOp::Prod => go!({
            Bool => bool, Prod<bool, bool, bool>;
            U8 => u8, Prod<u8, u8, u8>;
            U16 => u16, Prod<u16, u16, u16>;
            U32 => u32, Prod<u32, u32, u32>;
            U64 => u64, Prod<u64, u64, u64>;
            I8 => i8, Prod<i8, i8, i8>;
            I16 => i16, Prod<i16, i16, i16>;
            I32 => i32, Prod<i32, i32, i32>;
            I64 => i64, Prod<i64, i64, i64>;
            F16 => f16, Prod<f32, f32, f16>;
            BF16 => bf16, Prod<f32, f32, bf16>;
            F32 => f32, Prod<f32, f32, f32>;
            F64 => f64, Prod<f64, f64, f64>;
            C64 => Complex64, Prod<Complex64, Complex64, Complex64>;
        }),
        ScanOp::Max => ordered!(go, Max),
        ScanOp::Min => ordered!(go, Min),
        ScanOp::LogAddExp => go!({
            F16 => f16, LogAdd<f32, f16>;
            BF16 => bf16, LogAdd<f32, bf16>;
            F32 => f32, LogAdd<f32, f32>;
            F64 => f64, LogAdd<f64, f64>;
        }),
    }?;
    Ok(vec![out])
}

/// Computes a softmax over the last axis.
pub(crate) fn eval_softmax(inputs: &mut [ArrayData]) -> Result<Vec<ArrayData>> {
    Ok(vec![softmax::softmax(inputs)?])
}
