//! One-input elementwise kernels and casts on the CPU.

use num_traits::{Float, Zero};

use super::elementwise::{map, map_same, map_same_wide};
use super::math::{AccFloat, FloatElem, IntElem};
use crate::array::ArrayData;
use crate::dtype::{Canon, Complex64, Element};
use crate::ops::unary::UnaryOp;
use crate::{DType, Error, Result};

/// `x` converted to `dtype` elementwise. Float-to-float casts convert directly; the rest go
/// through [`Canon`] in chunks, so that the kernel is built once per source type and once
/// per destination type rather than once per pair.
pub(crate) fn astype(x: &mut ArrayData, dtype: DType) -> ArrayData {
    use crate::dtype::{bf16, f16};
    macro_rules! direct {
        ($($s:ty => $d:ty: $f:expr;)*) => {
            $(if x.dtype() == <$s as Element>::DTYPE && dtype == <$d as Element>::DTYPE {
                return map::<$s, $d>(x, "astype", $f).expect("typed by the buffer");
            })*
        };
    }
    direct! {
        f32 => f16: f16::from_f32;
        f32 => bf16: bf16::from_f32;
        f16 => f32: f16::to_f32;
        bf16 => f32: bf16::to_f32;
        f32 => f64: f64::from;
        f64 => f32: |v| v as f32;
    }
    let source = super::copy::to_contiguous_shared(x);
    let offset = source.layout.offset;
    let read: Box<CanonReader<'_>> = crate::with_host!(source.buffer.resident_host(), v, _S => {
        Box::new(move |start: usize, out: &mut [Canon]| {
            for (o, s) in out.iter_mut().zip(&v[offset + start..]) {
                *o = s.to_canon();
            }
        })
    });
    crate::with_dtype!(dtype, D => write_canon::<D>(&*read, &x.layout.shape))
}

/// Reads the source's elements from a position into a chunk of canonical values.
type CanonReader<'a> = dyn Fn(usize, &mut [Canon]) + Sync + 'a;

/// A new array of `D` filled from `read(start, canon_values)`.
fn write_canon<D: Element>(
    read: &(dyn Fn(usize, &mut [Canon]) + Sync),
    shape: &[usize],
) -> ArrayData {
    let n = shape.iter().product();
    let mut out = crate::array::pool::alloc::<D>(n);
    super::elementwise::fill(&mut out, &|start, chunk| {
        let mut tmp = [Canon::Bool(false); 1024];
        for (i, part) in chunk.chunks_mut(tmp.len()).enumerate() {
            let tmp = &mut tmp[..part.len()];
            read(start + i * 1024, tmp);
            for (o, &c) in part.iter_mut().zip(tmp.iter()) {
                *o = D::from_canon(c);
            }
        }
    });
    ArrayData::from_vec(out, shape)
}

/// Computes `op` on `x`, whose output type is `out` (checked when the node was built).
pub(crate) fn eval(op: UnaryOp, x: &mut ArrayData, out: DType) -> Result<ArrayData> {
    match x.dtype() {
        DType::F16 => float::<crate::dtype::f16>(op, x),
        DType::BF16 => float::<crate::dtype::bf16>(op, x),
        DType::F32 => float::<f32>(op, x),
        DType::F64 => float::<f64>(op, x),
        DType::C64 => complex(op, x, out),
        DType::Bool => boolean(op, x),
        DType::U8 => integer::<u8>(op, x, out),
        DType::U16 => integer::<u16>(op, x, out),
        DType::U32 => integer::<u32>(op, x, out),
        DType::U64 => integer::<u64>(op, x, out),
        DType::I8 => integer::<i8>(op, x, out),
        DType::I16 => integer::<i16>(op, x, out),
        DType::I32 => integer::<i32>(op, x, out),
        DType::I64 => integer::<i64>(op, x, out),
    }
}

fn float<T: FloatElem>(op: UnaryOp, x: &mut ArrayData) -> Result<ArrayData> {
    use UnaryOp::*;
    let name = op.name();
    macro_rules! same {
        ($f:expr) => {
            map_same::<T>(x, name, |v| T::down(($f)(v.up())))
        };
    }
    macro_rules! pred {
        ($f:expr) => {
            map::<T, bool>(x, name, |v| ($f)(v.up()))
        };
    }
    let one = <T::Acc as AccFloat>::c(1.0);
    match op {
        Abs => same!(|a: T::Acc| a.abs()),
        Negative => same!(|a: T::Acc| -a),
        Sign => same!(|a: T::Acc| if a > T::Acc::zero() {
            one
        } else if a < T::Acc::zero() {
            -one
        } else {
            a
        }),
        Square => same!(|a: T::Acc| a * a),
        Sqrt => same!(|a: T::Acc| a.sqrt()),
        Rsqrt => same!(|a: T::Acc| one / a.sqrt()),
        Reciprocal => same!(|a: T::Acc| one / a),
        Exp => map_same_wide::<T>(x, name, |v| T::down(v.up().exp_simd())),
        Expm1 => same!(|a: T::Acc| a.exp_m1()),
        Log => same!(|a: T::Acc| a.ln()),
        Log1p => same!(|a: T::Acc| a.ln_1p()),
        Log2 => same!(|a: T::Acc| a.log2()),
        Log10 => same!(|a: T::Acc| a.log10()),
        Sin => same!(|a: T::Acc| a.sin()),
        Cos => same!(|a: T::Acc| a.cos()),
        Tan => same!(|a: T::Acc| a.tan()),
        ArcSin => same!(|a: T::Acc| a.asin()),
        ArcCos => same!(|a: T::Acc| a.acos()),
        ArcTan => same!(|a: T::Acc| a.atan()),
        Sinh => same!(|a: T::Acc| a.sinh()),
        Cosh => same!(|a: T::Acc| a.cosh()),
        Tanh => same!(|a: T::Acc| a.tanh()),
        ArcSinh => same!(|a: T::Acc| a.asinh()),
        ArcCosh => same!(|a: T::Acc| a.acosh()),
        ArcTanh => same!(|a: T::Acc| a.atanh()),
        Sigmoid => map_same_wide::<T>(x, name, |v| T::down(one / (one + (-v.up()).exp_simd()))),
        Erf => same!(|a: T::Acc| a.erf()),
        ErfInv => same!(|a: T::Acc| a.erfinv()),
        Floor => same!(|a: T::Acc| a.floor()),
        Ceil => same!(|a: T::Acc| a.ceil()),
        Round => same!(|a: T::Acc| a.round_even()),
        Trunc => same!(|a: T::Acc| a.trunc()),
        IsNan => pred!(|a: T::Acc| a.is_nan()),
        IsInf => pred!(|a: T::Acc| a.is_infinite()),
        IsPosInf => pred!(|a: T::Acc| a == T::Acc::infinity()),
        IsNegInf => pred!(|a: T::Acc| a == T::Acc::neg_infinity()),
        IsFinite => pred!(|a: T::Acc| a.is_finite()),
        LogicalNot => pred!(|a: T::Acc| a == T::Acc::zero()),
        Conjugate | Real => Ok(x.clone()),
        Imag | BitwiseInvert => Err(Error::UnsupportedDType {
            op: name,
            dtype: T::DTYPE,
        }),
    }
}

fn integer<T: IntElem>(op: UnaryOp, x: &mut ArrayData, out: DType) -> Result<ArrayData> {
    use UnaryOp::*;
    let name = op.name();
    match op {
        Abs if T::SIGNED => {
            map_same::<T>(
                x,
                name,
                |v| if v < T::zero() { v.wrapping_neg() } else { v },
            )
        }
        Negative => map_same::<T>(x, name, |v| v.wrapping_neg()),
        Sign => map_same::<T>(x, name, |v| {
            if v > T::zero() {
                T::one()
            } else if v < T::zero() {
                T::zero().wrapping_sub(&T::one())
            } else {
                T::zero()
            }
        }),
        Square => map_same::<T>(x, name, |v| v.wrapping_mul(&v)),
        BitwiseInvert => map_same::<T>(x, name, |v| !v),
        Abs | Floor | Ceil | Round | Trunc | Conjugate | Real => Ok(x.clone()),
        IsNan | IsInf | IsPosInf | IsNegInf => map::<T, bool>(x, name, |_| false),
        IsFinite => map::<T, bool>(x, name, |_| true),
        LogicalNot => map::<T, bool>(x, name, |v| v == T::zero()),
        _ => Err(Error::UnsupportedDType {
            op: name,
            dtype: out,
        }),
    }
}

fn boolean(op: UnaryOp, x: &mut ArrayData) -> Result<ArrayData> {
    use UnaryOp::*;
    let name = op.name();
    match op {
        LogicalNot | BitwiseInvert => map_same::<bool>(x, name, |v| !v),
        Abs | Sign | Square | Floor | Ceil | Round | Trunc | Conjugate | Real => Ok(x.clone()),
        IsNan | IsInf | IsPosInf | IsNegInf => map::<bool, bool>(x, name, |_| false),
        IsFinite => map::<bool, bool>(x, name, |_| true),
        _ => Err(Error::UnsupportedDType {
            op: name,
            dtype: DType::Bool,
        }),
    }
}

fn complex(op: UnaryOp, x: &mut ArrayData, out: DType) -> Result<ArrayData> {
    use UnaryOp::*;
    let name = op.name();
    type C = Complex64;
    match op {
        Abs => map::<C, f32>(x, name, |z| z.norm()),
        Real => map::<C, f32>(x, name, |z| z.re),
        Imag => map::<C, f32>(x, name, |z| z.im),
        Negative => map_same::<C>(x, name, |z| -z),
        Sign => map_same::<C>(x, name, |z| if z.is_zero() { z } else { z / z.norm() }),
        Square => map_same::<C>(x, name, |z| z * z),
        Sqrt => map_same::<C>(x, name, |z| z.sqrt()),
        Reciprocal => map_same::<C>(x, name, |z| z.inv()),
        Exp => map_same::<C>(x, name, |z| z.exp()),
        Log => map_same::<C>(x, name, |z| z.ln()),
        Sin => map_same::<C>(x, name, |z| z.sin()),
        Cos => map_same::<C>(x, name, |z| z.cos()),
        Tan => map_same::<C>(x, name, |z| z.tan()),
        Sinh => map_same::<C>(x, name, |z| z.sinh()),
        Cosh => map_same::<C>(x, name, |z| z.cosh()),
        Tanh => map_same::<C>(x, name, |z| z.tanh()),
        Conjugate => map_same::<C>(x, name, |z| z.conj()),
        LogicalNot => map::<C, bool>(x, name, |z| z.is_zero()),
        _ => Err(Error::UnsupportedDType {
            op: name,
            dtype: out,
        }),
    }
}
