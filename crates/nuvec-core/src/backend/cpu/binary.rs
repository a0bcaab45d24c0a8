//! Two-input elementwise kernels and `where_` on the CPU.

use num_traits::{Float, Zero};

use super::elementwise::{zip, zip_f32_streamed, zip_same, zip3};
use super::math::{FloatElem, IntElem};
use super::stream::Arith;
use crate::array::ArrayData;
use crate::dtype::{Complex64, Element};
use crate::ops::binary::BinaryOp;
use crate::{DType, Error, Result};

/// Computes `op` on two inputs of one shape and type; `out` is the checked output type.
pub(crate) fn eval(op: BinaryOp, inputs: &mut [ArrayData], out: DType) -> Result<ArrayData> {
    match inputs[0].dtype() {
        DType::F16 => float::<crate::dtype::f16>(op, inputs),
        DType::BF16 => float::<crate::dtype::bf16>(op, inputs),
        DType::F32 => {
            let fast = match op {
                BinaryOp::Add => Some(Arith::Add),
                BinaryOp::Subtract => Some(Arith::Sub),
                BinaryOp::Multiply => Some(Arith::Mul),
                BinaryOp::Divide => Some(Arith::Div),
                _ => None,
            };
            if let Some(out) = fast.and_then(|a| zip_f32_streamed(inputs, a)) {
                return Ok(out);
            }
            float::<f32>(op, inputs)
        }
        DType::F64 => float::<f64>(op, inputs),
        DType::U8 => integer::<u8>(op, inputs),
        DType::U16 => integer::<u16>(op, inputs),
        DType::U32 => integer::<u32>(op, inputs),
        DType::U64 => integer::<u64>(op, inputs),
        DType::I8 => integer::<i8>(op, inputs),
        DType::I16 => integer::<i16>(op, inputs),
        DType::I32 => integer::<i32>(op, inputs),
        DType::I64 => integer::<i64>(op, inputs),
        DType::Bool => boolean(op, inputs),
        DType::C64 => complex(op, inputs, out),
    }
}

/// `where_`: the condition, then the two values.
pub(crate) fn select(inputs: &mut [ArrayData]) -> Result<ArrayData> {
    let (c, x, y) = (&inputs[0], &inputs[1], &inputs[2]);
    crate::with_host!(x.buffer.host()?, _v, T => {
        zip3::<bool, T, T, T>(c, x, y, "where", |c, a, b| if c { a } else { b })
    })
}

/// Comparisons and logic, the same for every type with an order.
fn predicate<T: Element + PartialOrd>(
    op: BinaryOp,
    inputs: &mut [ArrayData],
) -> Option<Result<ArrayData>> {
    use BinaryOp::*;
    let (a, b, name) = (&inputs[0], &inputs[1], op.name());
    let z = T::default();
    Some(match op {
        Equal => zip::<T, T, bool>(a, b, name, |x, y| x == y),
        NotEqual => zip::<T, T, bool>(a, b, name, |x, y| x != y),
        Less => zip::<T, T, bool>(a, b, name, |x, y| x < y),
        LessEqual => zip::<T, T, bool>(a, b, name, |x, y| x <= y),
        Greater => zip::<T, T, bool>(a, b, name, |x, y| x > y),
        GreaterEqual => zip::<T, T, bool>(a, b, name, |x, y| x >= y),
        LogicalAnd => zip::<T, T, bool>(a, b, name, |x, y| x != z && y != z),
        LogicalOr => zip::<T, T, bool>(a, b, name, |x, y| x != z || y != z),
        _ => return None,
    })
}

fn unsupported(op: BinaryOp, dtype: DType) -> Error {
    Error::UnsupportedDType {
        op: op.name(),
        dtype,
    }
}

fn float<T: FloatElem + PartialOrd>(op: BinaryOp, inputs: &mut [ArrayData]) -> Result<ArrayData> {
    use BinaryOp::*;
    if let Some(r) = predicate::<T>(op, inputs) {
        return r;
    }
    let name = op.name();
    macro_rules! same {
        ($f:expr) => {
            zip_same::<T>(inputs, name, |x, y| T::down(($f)(x.up(), y.up())))
        };
    }
    type A<T> = <T as FloatElem>::Acc;
    match op {
        Add => same!(|x: A<T>, y: A<T>| x + y),
        Subtract => same!(|x: A<T>, y: A<T>| x - y),
        Multiply => same!(|x: A<T>, y: A<T>| x * y),
        Divide => same!(|x: A<T>, y: A<T>| x / y),
        FloorDivide => same!(|x: A<T>, y: A<T>| (x / y).floor()),
        Remainder => same!(|x: A<T>, y: A<T>| {
            let r = x % y;
            if r != A::<T>::zero() && (r < A::<T>::zero()) != (y < A::<T>::zero()) {
                r + y
            } else {
                r
            }
        }),
        Power => same!(|x: A<T>, y: A<T>| x.powf(y)),
        Maximum => same!(|x: A<T>, y: A<T>| if x.is_nan() || x > y { x } else { y }),
        Minimum => same!(|x: A<T>, y: A<T>| if x.is_nan() || x < y { x } else { y }),
        ArcTan2 => same!(|x: A<T>, y: A<T>| x.atan2(y)),
        LogAddExp => same!(|x: A<T>, y: A<T>| {
            if x.is_nan() || y.is_nan() {
                return x + y;
            }
            let m = x.max(y);
            if m == A::<T>::neg_infinity() || m == A::<T>::infinity() {
                return m;
            }
            m + (-(x - y).abs()).exp().ln_1p()
        }),
        _ => Err(unsupported(op, T::DTYPE)),
    }
}

fn integer<T: IntElem>(op: BinaryOp, inputs: &mut [ArrayData]) -> Result<ArrayData> {
    use BinaryOp::*;
    if let Some(r) = predicate::<T>(op, inputs) {
        return r;
    }
    let name = op.name();
    let zero = T::zero();
    match op {
        Add => zip_same::<T>(inputs, name, |x, y| x.wrapping_add(&y)),
        Subtract => zip_same::<T>(inputs, name, |x, y| x.wrapping_sub(&y)),
        Multiply => zip_same::<T>(inputs, name, |x, y| x.wrapping_mul(&y)),
        // Division by zero gives 0 rather than a fault.
        FloorDivide => zip_same::<T>(inputs, name, |x, y| {
            if y == zero {
                return zero;
            }
            let q = q_of(x, y);
            let r = x.wrapping_sub(&q.wrapping_mul(&y));
            if T::SIGNED && r != zero && ((r < zero) != (y < zero)) {
                q.wrapping_sub(&T::one())
            } else {
                q
            }
        }),
        Remainder => zip_same::<T>(inputs, name, |x, y| {
            if y == zero {
                return zero;
            }
            let r = x.wrapping_sub(&q_of(x, y).wrapping_mul(&y));
            if T::SIGNED && r != zero && ((r < zero) != (y < zero)) {
                r.wrapping_add(&y)
            } else {
                r
            }
        }),
        Power => zip_same::<T>(inputs, name, |x, y| int_pow(x, y)),
        Maximum => zip_same::<T>(inputs, name, |x, y| if x > y { x } else { y }),
        Minimum => zip_same::<T>(inputs, name, |x, y| if x < y { x } else { y }),
        BitwiseAnd => zip_same::<T>(inputs, name, |x, y| x & y),
        BitwiseOr => zip_same::<T>(inputs, name, |x, y| x | y),
        BitwiseXor => zip_same::<T>(inputs, name, |x, y| x ^ y),
        LeftShift => zip_same::<T>(inputs, name, |x, y| {
            shift_amount::<T>(y).map_or(zero, |s| x << s)
        }),
        RightShift => zip_same::<T>(inputs, name, |x, y| match shift_amount::<T>(y) {
            Some(s) => x >> s,
            None if T::SIGNED && x < zero => zero.wrapping_sub(&T::one()),
            None => zero,
        }),
        _ => Err(unsupported(op, T::DTYPE)),
    }
}

/// `x / y` truncated, with `MIN / -1` wrapping instead of overflowing (`y` is nonzero).
fn q_of<T: IntElem>(x: T, y: T) -> T {
    x.checked_div(&y).unwrap_or(x)
}

/// A shift count in range, or `None` when every bit shifts out (or the count is negative).
fn shift_amount<T: IntElem>(y: T) -> Option<usize> {
    let s = y.to_i128()?;
    (0..i128::from(T::BITS)).contains(&s).then_some(s as usize)
}

/// `x^y` by squaring, wrapping; negative exponents give `1 / x^|y|` truncated.
fn int_pow<T: IntElem>(x: T, y: T) -> T {
    let zero = T::zero();
    let one = T::one();
    if y < zero {
        return if x == one {
            one
        } else if T::SIGNED && x == zero.wrapping_sub(&one) {
            // (-1)^y: the parity of y.
            if (y & one) == zero { one } else { x }
        } else {
            zero
        };
    }
    let (mut base, mut e, mut acc) = (x, y, one);
    while e > zero {
        if (e & one) == one {
            acc = acc.wrapping_mul(&base);
        }
        base = base.wrapping_mul(&base);
        e = e >> 1;
    }
    acc
}

fn boolean(op: BinaryOp, inputs: &mut [ArrayData]) -> Result<ArrayData> {
    use BinaryOp::*;
    if let Some(r) = predicate::<bool>(op, inputs) {
        return r;
    }
    let name = op.name();
    match op {
        Add | Maximum | BitwiseOr => zip_same::<bool>(inputs, name, |x, y| x | y),
        Multiply | Minimum | BitwiseAnd => zip_same::<bool>(inputs, name, |x, y| x & y),
        BitwiseXor => zip_same::<bool>(inputs, name, |x, y| x ^ y),
        _ => Err(unsupported(op, DType::Bool)),
    }
}

fn complex(op: BinaryOp, inputs: &mut [ArrayData], out: DType) -> Result<ArrayData> {
    use BinaryOp::*;
    type C = Complex64;
    let (name, zero) = (op.name(), C::zero());
    match op {
        Add => zip_same::<C>(inputs, name, |x, y| x + y),
        Subtract => zip_same::<C>(inputs, name, |x, y| x - y),
        Multiply => zip_same::<C>(inputs, name, |x, y| x * y),
        Divide => zip_same::<C>(inputs, name, |x, y| x / y),
        Power => zip_same::<C>(inputs, name, |x, y| x.powc(y)),
        Equal => zip::<C, C, bool>(&inputs[0], &inputs[1], name, |x, y| x == y),
        NotEqual => zip::<C, C, bool>(&inputs[0], &inputs[1], name, |x, y| x != y),
        LogicalAnd => {
            zip::<C, C, bool>(&inputs[0], &inputs[1], name, |x, y| x != zero && y != zero)
        }
        LogicalOr => zip::<C, C, bool>(&inputs[0], &inputs[1], name, |x, y| x != zero || y != zero),
        _ => Err(unsupported(op, out)),
    }
}
