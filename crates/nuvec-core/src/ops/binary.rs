//! Two-input elementwise functions: arithmetic, comparisons, logic, bits, and `where_`.
//!
//! Every argument is an array, a reference to one or a Rust scalar (weakly typed: it takes the
//! array's type). Inputs broadcast as NumPy's do.
//!
//! ```
//! use nuvec_core::{Array, DType, add, less};
//!
//! let x = Array::from_slice(&[1i32, 2, 3], &[3]).unwrap();
//! let y = add(&x, 1).unwrap(); // int32 still
//! assert_eq!(y.dtype(), DType::I32);
//! let z = add(&x, 0.5).unwrap(); // a float scalar makes it float32
//! assert_eq!(z.to_vec::<f32>().unwrap(), [1.5, 2.5, 3.5]);
//! assert_eq!(less(&x, 2).unwrap().to_vec::<bool>().unwrap(), [true, false, false]);
//! ```

use crate::array::operand::{Typed, promote_pair, result_type};
use crate::dtype::{bf16, f16};
use crate::error::invalid;
use crate::ops::{broadcast_shapes, broadcast_to, check_errors, expect_inputs};
use crate::primitive::{OutputSpec, Primitive};
use crate::{Array, Category, DType, Error, Operand, Result};

/// The two-input elementwise primitives (inputs of one shape and type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a − b`.
    Subtract,
    /// `a · b`.
    Multiply,
    /// `a / b` (floats only; the op function makes integers float32).
    Divide,
    /// `⌊a / b⌋`.
    FloorDivide,
    /// `a − b · ⌊a / b⌋`: the remainder with the divisor's sign (Python's `%`).
    Remainder,
    /// `aᵇ`.
    Power,
    /// The larger (NaN wins).
    Maximum,
    /// The smaller (NaN wins).
    Minimum,
    /// The angle of the point `(b, a)`.
    ArcTan2,
    /// `ln(eᵃ + eᵇ)`, without overflow.
    LogAddExp,
    /// `a == b`.
    Equal,
    /// `a != b`.
    NotEqual,
    /// `a < b`.
    Less,
    /// `a <= b`.
    LessEqual,
    /// `a > b`.
    Greater,
    /// `a >= b`.
    GreaterEqual,
    /// `a && b` (of booleans).
    LogicalAnd,
    /// `a || b` (of booleans).
    LogicalOr,
    /// Bitwise and.
    BitwiseAnd,
    /// Bitwise or.
    BitwiseOr,
    /// Bitwise exclusive or.
    BitwiseXor,
    /// `a << b`.
    LeftShift,
    /// `a >> b` (arithmetic for signed types).
    RightShift,
}

impl BinaryOp {
    /// The primitive's name (MLX's function name).
    pub fn name(&self) -> &'static str {
        use BinaryOp::*;
        match self {
            Add => "add",
            Subtract => "subtract",
            Multiply => "multiply",
            Divide => "divide",
            FloorDivide => "floor_divide",
            Remainder => "remainder",
            Power => "power",
            Maximum => "maximum",
            Minimum => "minimum",
            ArcTan2 => "arctan2",
            LogAddExp => "logaddexp",
            Equal => "equal",
            NotEqual => "not_equal",
            Less => "less",
            LessEqual => "less_equal",
            Greater => "greater",
            GreaterEqual => "greater_equal",
            LogicalAnd => "logical_and",
            LogicalOr => "logical_or",
            BitwiseAnd => "bitwise_and",
            BitwiseOr => "bitwise_or",
            BitwiseXor => "bitwise_xor",
            LeftShift => "left_shift",
            RightShift => "right_shift",
        }
    }

    /// Whether the result is a boolean (comparisons and logic).
    pub fn is_predicate(self) -> bool {
        use BinaryOp::*;
        matches!(
            self,
            Equal | NotEqual | Less | LessEqual | Greater | GreaterEqual | LogicalAnd | LogicalOr
        )
    }

    /// The output type for inputs of type `dtype`, or the error when the op does not take it.
    pub fn output_dtype(self, dtype: DType) -> Result<DType> {
        use BinaryOp::*;
        let cat = dtype.category();
        let unsupported = Err(Error::UnsupportedDType {
            op: self.name(),
            dtype,
        });
        match self {
            _ if self.is_predicate() => {
                let ordered = matches!(self, Less | LessEqual | Greater | GreaterEqual);
                if ordered && cat == Category::Complex {
                    unsupported
                } else {
                    Ok(DType::Bool)
                }
            }
            Add | Subtract | Multiply | Power => Ok(dtype),
            Divide => match cat {
                Category::Float | Category::Complex => Ok(dtype),
                _ => unsupported,
            },
            ArcTan2 | LogAddExp => match cat {
                Category::Float => Ok(dtype),
                _ => unsupported,
            },
            FloorDivide | Remainder | Maximum | Minimum => match cat {
                Category::Complex => unsupported,
                _ => Ok(dtype),
            },
            BitwiseAnd | BitwiseOr | BitwiseXor => match cat {
                Category::Bool | Category::Signed | Category::Unsigned => Ok(dtype),
                _ => unsupported,
            },
            LeftShift | RightShift => match cat {
                Category::Signed | Category::Unsigned => Ok(dtype),
                _ => unsupported,
            },
            _ => unsupported,
        }
    }

    /// The output's shape and type.
    pub fn output_specs(&self, inputs: &[Array]) -> Result<Vec<OutputSpec>> {
        expect_inputs(self.name(), inputs, 2)?;
        let (a, b) = (&inputs[0], &inputs[1]);
        if a.shape() != b.shape() {
            return Err(Error::IncompatibleShapes {
                op: self.name(),
                lhs: a.shape().to_vec(),
                rhs: b.shape().to_vec(),
            });
        }
        if a.dtype() != b.dtype() {
            return Err(invalid(
                self.name(),
                format!("inputs of types {} and {}", a.dtype(), b.dtype()),
            ));
        }
        Ok(vec![(a.shape().to_vec(), self.output_dtype(a.dtype())?)])
    }
}

/// The checks of [`Primitive::Select`]: a boolean condition and two values, one shape.
pub(crate) fn select_output_specs(inputs: &[Array]) -> Result<Vec<OutputSpec>> {
    expect_inputs("where", inputs, 3)?;
    let (c, x, y) = (&inputs[0], &inputs[1], &inputs[2]);
    if c.dtype() != DType::Bool || x.dtype() != y.dtype() {
        return Err(invalid(
            "where",
            format!(
                "needs a bool condition and values of one type, got {}, {} and {}",
                c.dtype(),
                x.dtype(),
                y.dtype()
            ),
        ));
    }
    if c.shape() != x.shape() || x.shape() != y.shape() {
        return Err(Error::IncompatibleShapes {
            op: "where",
            lhs: c.shape().to_vec(),
            rhs: x.shape().to_vec(),
        });
    }
    Ok(vec![(x.shape().to_vec(), x.dtype())])
}

/// Arrays broadcast to their common shape (views).
pub fn broadcast_arrays(arrays: &[Array]) -> Result<Vec<Array>> {
    let refs: Vec<&Array> = arrays.iter().collect();
    check_errors(&refs)?;
    let mut shape: Vec<usize> = Vec::new();
    for a in arrays {
        shape = broadcast_shapes("broadcast_arrays", &shape, a.shape())?;
    }
    arrays.iter().map(|a| broadcast_to(a, &shape)).collect()
}

/// Records `op` on two operands of one type, broadcast to one shape.
fn record(op: BinaryOp, a: Typed, b: Typed) -> Result<Array> {
    let shape = broadcast_shapes(op.name(), a.shape(), b.shape())?;
    let (a, b) = (a.broadcast(&shape)?, b.broadcast(&shape)?);
    Array::op1(Primitive::Binary(op), vec![a, b])
}

fn operands(a: impl Into<Operand>, b: impl Into<Operand>) -> Result<(Operand, Operand)> {
    let (a, b) = (a.into(), b.into());
    for op in [&a, &b] {
        if let Operand::Array(x) = op {
            check_errors(&[x])?;
        }
    }
    Ok((a, b))
}

/// Records `op` after promoting both operands to their common type (made inexact first for
/// the float-only ops).
fn binary(op: BinaryOp, a: impl Into<Operand>, b: impl Into<Operand>) -> Result<Array> {
    let (a, b) = operands(a, b)?;
    let dtype = match op {
        BinaryOp::Divide | BinaryOp::ArcTan2 | BinaryOp::LogAddExp => {
            result_type(&[&a, &b]).to_inexact()
        }
        BinaryOp::LogicalAnd | BinaryOp::LogicalOr => DType::Bool,
        _ => result_type(&[&a, &b]),
    };
    record(op, a.typed(dtype)?, b.typed(dtype)?)
}

macro_rules! binary_fns {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {$(
        $(#[$doc])*
        pub fn $name(a: impl Into<Operand>, b: impl Into<Operand>) -> Result<Array> {
            binary(BinaryOp::$op, a, b)
        }
    )*};
}

binary_fns! {
    /// `a + b` elementwise.
    add => Add;
    /// `a − b` elementwise.
    subtract => Subtract;
    /// `a · b` elementwise.
    multiply => Multiply;
    /// `a / b` elementwise (integers become float32).
    divide => Divide;
    /// `⌊a / b⌋` elementwise.
    floor_divide => FloorDivide;
    /// The remainder of `a / b` with the sign of `b`, elementwise.
    remainder => Remainder;
    /// `aᵇ` elementwise.
    power => Power;
    /// The larger of `a` and `b` elementwise (NaN propagates).
    maximum => Maximum;
    /// The smaller of `a` and `b` elementwise (NaN propagates).
    minimum => Minimum;
    /// The angle of `(b, a)` elementwise.
    arctan2 => ArcTan2;
    /// `ln(eᵃ + eᵇ)` elementwise.
    logaddexp => LogAddExp;
    /// `a == b` elementwise.
    equal => Equal;
    /// `a != b` elementwise.
    not_equal => NotEqual;
    /// `a < b` elementwise.
    less => Less;
    /// `a <= b` elementwise.
    less_equal => LessEqual;
    /// `a > b` elementwise.
    greater => Greater;
    /// `a >= b` elementwise.
    greater_equal => GreaterEqual;
    /// `a && b` elementwise (nonzero is true).
    logical_and => LogicalAnd;
    /// `a || b` elementwise (nonzero is true).
    logical_or => LogicalOr;
    /// Bitwise and of integers or booleans.
    bitwise_and => BitwiseAnd;
    /// Bitwise or of integers or booleans.
    bitwise_or => BitwiseOr;
    /// Bitwise exclusive or of integers or booleans.
    bitwise_xor => BitwiseXor;
    /// `a << b` of integers.
    left_shift => LeftShift;
    /// `a >> b` of integers.
    right_shift => RightShift;
}

/// `a` xor `b` elementwise, as booleans (nonzero is true).
pub fn logical_xor(a: impl Into<Operand>, b: impl Into<Operand>) -> Result<Array> {
    let (a, b) = operands(a, b)?;
    not_equal(a.to_array(DType::Bool)?, b.to_array(DType::Bool)?)
}

/// `(floor_divide(a, b), remainder(a, b))`.
pub fn divmod(a: impl Into<Operand>, b: impl Into<Operand>) -> Result<(Array, Array)> {
    let (a, b) = operands(a, b)?;
    Ok((floor_divide(&a, &b)?, remainder(a, b)?))
}

/// `x` where `condition` is true, else `y`, elementwise with broadcasting; `x` and `y` are
/// promoted together (scalars weakly), the condition made boolean.
pub fn where_(
    condition: impl Into<Operand>,
    x: impl Into<Operand>,
    y: impl Into<Operand>,
) -> Result<Array> {
    let (c, x) = operands(condition, x)?;
    let (y, _) = operands(y, false)?;
    let c = c.typed(DType::Bool)?;
    let dtype = result_type(&[&x, &y]);
    let (x, y) = (x.typed(dtype)?, y.typed(dtype)?);
    let shape = broadcast_shapes("where", c.shape(), x.shape())?;
    let shape = broadcast_shapes("where", &shape, y.shape())?;
    let inputs = vec![
        c.broadcast(&shape)?,
        x.broadcast(&shape)?,
        y.broadcast(&shape)?,
    ];
    Array::op1(Primitive::Select, inputs)
}

/// The smallest and largest finite values of a float type.
pub(crate) fn finite_range(dtype: DType) -> (f64, f64) {
    match dtype {
        DType::F16 => (f64::from(f16::MIN), f64::from(f16::MAX)),
        DType::BF16 => (f64::from(bf16::MIN), f64::from(bf16::MAX)),
        DType::F64 => (f64::MIN, f64::MAX),
        _ => (f64::from(f32::MIN), f64::from(f32::MAX)),
    }
}

/// Whether `|a − b| <= atol + rtol · |b|` elementwise (NaNs equal when `equal_nan`).
pub fn isclose(
    a: impl Into<Operand>,
    b: impl Into<Operand>,
    rtol: f64,
    atol: f64,
    equal_nan: bool,
) -> Result<Array> {
    let (a, b) = operands(a, b)?;
    let (a, b) = promote_pair(&a, &b)?;
    let dtype = a.dtype().to_inexact();
    let (a, b) = (a.astype(dtype)?, b.astype(dtype)?);
    let diff = crate::abs(&subtract(&a, &b)?)?;
    let bound = add(multiply(crate::abs(&b)?, rtol)?, atol)?;
    let close = less_equal(&diff, &bound)?;
    // Equal infinities are close; `inf - inf` is NaN.
    let close = logical_or(&close, &equal(&a, &b)?)?;
    if equal_nan {
        let both_nan = logical_and(crate::isnan(&a)?, crate::isnan(&b)?)?;
        logical_or(&close, &both_nan)
    } else {
        Ok(close)
    }
}

/// Whether every element of `a` is close to `b`'s (see [`isclose`]), as a boolean scalar.
pub fn allclose(
    a: impl Into<Operand>,
    b: impl Into<Operand>,
    rtol: f64,
    atol: f64,
    equal_nan: bool,
) -> Result<Array> {
    crate::all(&isclose(a, b, rtol, atol, equal_nan)?, &[], false)
}

/// Whether `a` and `b` have the same shape and equal elements, as a boolean scalar.
pub fn array_equal(a: &Array, b: &Array, equal_nan: bool) -> Result<Array> {
    check_errors(&[a, b])?;
    if a.shape() != b.shape() {
        return Ok(Array::scalar(false));
    }
    let eq = equal(a, b)?;
    let eq = if equal_nan && a.dtype().is_float() {
        logical_or(&eq, &logical_and(crate::isnan(a)?, crate::isnan(b)?)?)?
    } else {
        eq
    };
    crate::all(&eq, &[], false)
}
