//! One-input elementwise functions (MLX's 41 unary ops) and casts.
//!
//! ```
//! use nuvec_core::{Array, exp, sqrt};
//!
//! let x = Array::from_slice(&[1.0f32, 4.0], &[2]).unwrap();
//! assert_eq!(sqrt(&x).unwrap().to_vec::<f32>().unwrap(), [1.0, 2.0]);
//! // Integers become float32 for the float functions.
//! let i = Array::from_slice(&[0i32], &[1]).unwrap();
//! assert_eq!(exp(&i).unwrap().to_vec::<f32>().unwrap(), [1.0]);
//! ```

use crate::error::invalid;
use crate::ops::{check_errors, expect_inputs};
use crate::primitive::{OutputSpec, Primitive};
use crate::{Array, Category, DType, Error, Result, add, divide, multiply, subtract};

/// Declares [`UnaryOp`] from one table: each variant with its docs and MLX's name, and
/// [`UnaryOp::ALL`], so that a new function is one line here (plus its rules below, its CPU
/// loop in `backend/cpu/unary.rs` and its CUDA functor in `kernels/unary.cu`).
macro_rules! unary_ops {
    ($($(#[$doc:meta])* $op:ident => $name:literal,)*) => {
        /// The one-input elementwise primitives.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum UnaryOp {
            $($(#[$doc])* $op,)*
        }

        impl UnaryOp {
            /// Every unary primitive, in declaration order.
            pub const ALL: &'static [UnaryOp] = &[$(UnaryOp::$op,)*];

            /// The primitive's name (MLX's function name).
            pub fn name(&self) -> &'static str {
                match self {
                    $(UnaryOp::$op => $name,)*
                }
            }
        }
    };
}

unary_ops! {
    /// `|x|` (complex: the modulus, as float32).
    Abs => "abs",
    /// `-x`.
    Negative => "negative",
    /// `-1`, `0` or `1` by the sign of `x` (floats keep NaN).
    Sign => "sign",
    /// `x²`.
    Square => "square",
    /// `√x`.
    Sqrt => "sqrt",
    /// `1 / √x`.
    Rsqrt => "rsqrt",
    /// `1 / x`.
    Reciprocal => "reciprocal",
    /// `eˣ`.
    Exp => "exp",
    /// `eˣ − 1`, accurate near 0.
    Expm1 => "expm1",
    /// The natural logarithm.
    Log => "log",
    /// `ln(1 + x)`, accurate near 0.
    Log1p => "log1p",
    /// The base-2 logarithm.
    Log2 => "log2",
    /// The base-10 logarithm.
    Log10 => "log10",
    /// Sine.
    Sin => "sin",
    /// Cosine.
    Cos => "cos",
    /// Tangent.
    Tan => "tan",
    /// Inverse sine.
    ArcSin => "arcsin",
    /// Inverse cosine.
    ArcCos => "arccos",
    /// Inverse tangent.
    ArcTan => "arctan",
    /// Hyperbolic sine.
    Sinh => "sinh",
    /// Hyperbolic cosine.
    Cosh => "cosh",
    /// Hyperbolic tangent.
    Tanh => "tanh",
    /// Inverse hyperbolic sine.
    ArcSinh => "arcsinh",
    /// Inverse hyperbolic cosine.
    ArcCosh => "arccosh",
    /// Inverse hyperbolic tangent.
    ArcTanh => "arctanh",
    /// `1 / (1 + e⁻ˣ)`.
    Sigmoid => "sigmoid",
    /// The error function.
    Erf => "erf",
    /// The inverse of the error function.
    ErfInv => "erfinv",
    /// Rounding down.
    Floor => "floor",
    /// Rounding up.
    Ceil => "ceil",
    /// Rounding to the nearest integer, ties to even.
    Round => "round",
    /// Rounding toward zero.
    Trunc => "trunc",
    /// Whether `x` is NaN.
    IsNan => "isnan",
    /// Whether `x` is infinite.
    IsInf => "isinf",
    /// Whether `x` is `+∞`.
    IsPosInf => "isposinf",
    /// Whether `x` is `−∞`.
    IsNegInf => "isneginf",
    /// Whether `x` is neither infinite nor NaN.
    IsFinite => "isfinite",
    /// Logical not (of `x != 0`).
    LogicalNot => "logical_not",
    /// Bitwise not of integers (logical not of booleans).
    BitwiseInvert => "bitwise_invert",
    /// The complex conjugate.
    Conjugate => "conjugate",
    /// The real part.
    Real => "real",
    /// The imaginary part.
    Imag => "imag",
}

/// Where the GPU computes a unary function. The CUDA backend instantiates its kernels from
/// this (no list of its own), and a test checks that `kernels/unary.cu` defines a functor
/// for each, so a new function cannot silently run on the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GpuKernel {
    /// A functor over the float types.
    Float,
    /// A boolean functor over the float types (`logical_not`: every real type).
    Predicate,
    /// None: the function runs on the host (complex parts, bitwise invert).
    Host,
}

impl UnaryOp {
    /// Where the GPU computes the function (see [`GpuKernel`]).
    pub(crate) fn gpu_kernel(self) -> GpuKernel {
        use UnaryOp::*;
        match self {
            Abs | Negative | Sign | Square | Sqrt | Rsqrt | Reciprocal | Exp | Expm1 | Log
            | Log1p | Log2 | Log10 | Sin | Cos | Tan | ArcSin | ArcCos | ArcTan | Sinh | Cosh
            | Tanh | ArcSinh | ArcCosh | ArcTanh | Sigmoid | Erf | ErfInv | Floor | Ceil
            | Round | Trunc => GpuKernel::Float,
            IsNan | IsInf | IsPosInf | IsNegInf | IsFinite | LogicalNot => GpuKernel::Predicate,
            BitwiseInvert | Conjugate | Real | Imag => GpuKernel::Host,
        }
    }

    /// `d out / d x` of a real unary function at `x` (with `out` its value), or `None` where the
    /// derivative is zero (rounding, predicates).
    pub(crate) fn derivative(self, x: &Array, out: &Array) -> Result<Option<Array>> {
        use UnaryOp::*;
        let one_minus_sq = |v: &Array| subtract(1.0, square(v)?);
        let d = match self {
            Abs => sign(x)?,
            Negative => crate::full_like(x, -1.0)?,
            Square => multiply(x, 2.0)?,
            Sqrt => divide(0.5, out)?,
            Rsqrt => divide(multiply(out, -0.5)?, x)?,
            Reciprocal => negative(&square(out)?)?,
            Exp => out.clone(),
            Expm1 => add(out, 1.0)?,
            Log => crate::reciprocal(x)?,
            Log1p => crate::reciprocal(&add(x, 1.0)?)?,
            Log2 => crate::reciprocal(&multiply(x, std::f64::consts::LN_2)?)?,
            Log10 => crate::reciprocal(&multiply(x, std::f64::consts::LN_10)?)?,
            Sin => cos(x)?,
            Cos => negative(&sin(x)?)?,
            Tan => add(square(out)?, 1.0)?,
            ArcSin => crate::rsqrt(&one_minus_sq(x)?)?,
            ArcCos => negative(&crate::rsqrt(&one_minus_sq(x)?)?)?,
            ArcTan => crate::reciprocal(&add(square(x)?, 1.0)?)?,
            Sinh => cosh(x)?,
            Cosh => sinh(x)?,
            Tanh => one_minus_sq(out)?,
            ArcSinh => crate::rsqrt(&add(square(x)?, 1.0)?)?,
            ArcCosh => crate::rsqrt(&subtract(square(x)?, 1.0)?)?,
            ArcTanh => crate::reciprocal(&one_minus_sq(x)?)?,
            Sigmoid => multiply(out, subtract(1.0, out)?)?,
            Erf => multiply(
                exp(&negative(&square(x)?)?)?,
                std::f64::consts::FRAC_2_SQRT_PI,
            )?,
            ErfInv => multiply(exp(&square(out)?)?, std::f64::consts::PI.sqrt() / 2.0)?,
            Sign | Floor | Ceil | Round | Trunc => return Ok(None),
            IsNan | IsInf | IsPosInf | IsNegInf | IsFinite | LogicalNot | BitwiseInvert => {
                return Ok(None);
            }
            Conjugate | Real | Imag => return Ok(None),
        };
        Ok(Some(d))
    }

    /// Whether the function maps into floats (integer inputs become `float32`).
    pub fn is_float_function(self) -> bool {
        use UnaryOp::*;
        matches!(
            self,
            Sqrt | Rsqrt
                | Reciprocal
                | Exp
                | Expm1
                | Log
                | Log1p
                | Log2
                | Log10
                | Sin
                | Cos
                | Tan
                | ArcSin
                | ArcCos
                | ArcTan
                | Sinh
                | Cosh
                | Tanh
                | ArcSinh
                | ArcCosh
                | ArcTanh
                | Sigmoid
                | Erf
                | ErfInv
        )
    }

    /// The output type for an input of type `dtype`, or the error when the function does not
    /// take it. Float functions of integers are given floats by the op function first.
    pub fn output_dtype(self, dtype: DType) -> Result<DType> {
        use UnaryOp::*;
        let cat = dtype.category();
        let unsupported = Err(Error::UnsupportedDType {
            op: self.name(),
            dtype,
        });
        match self {
            Abs | Real | Imag if cat == Category::Complex => Ok(DType::F32),
            Abs | Sign | Square | Conjugate | Real => Ok(dtype),
            Imag => Ok(dtype),
            Negative if dtype == DType::Bool => unsupported,
            Negative => Ok(dtype),
            IsNan | IsInf | IsPosInf | IsNegInf | IsFinite if cat == Category::Complex => {
                unsupported
            }
            IsNan | IsInf | IsPosInf | IsNegInf | IsFinite | LogicalNot => Ok(DType::Bool),
            BitwiseInvert if matches!(cat, Category::Float | Category::Complex) => unsupported,
            BitwiseInvert => Ok(dtype),
            Floor | Ceil | Round | Trunc if cat == Category::Complex => unsupported,
            Floor | Ceil | Round | Trunc => Ok(dtype),
            _ if self.is_float_function() => {
                let complex_ok = matches!(
                    self,
                    Sqrt | Exp | Log | Sin | Cos | Tan | Sinh | Cosh | Tanh | Reciprocal
                );
                match cat {
                    Category::Float => Ok(dtype),
                    Category::Complex if complex_ok => Ok(dtype),
                    _ => unsupported,
                }
            }
            _ => unsupported,
        }
    }

    /// The output's shape and type.
    pub fn output_specs(&self, inputs: &[Array]) -> Result<Vec<OutputSpec>> {
        expect_inputs(self.name(), inputs, 1)?;
        let x = &inputs[0];
        Ok(vec![(x.shape().to_vec(), self.output_dtype(x.dtype())?)])
    }
}

/// Records `op` on `a` (integers given float functions are first cast to float32).
fn unary(op: UnaryOp, a: &Array) -> Result<Array> {
    check_errors(&[a])?;
    let a = if op.is_float_function() && !a.dtype().is_inexact() {
        astype(a, DType::F32)?
    } else {
        a.clone()
    };
    Array::op1(Primitive::Unary(op), vec![a])
}

/// `a` converted to `dtype`, as C casts (floats truncate toward zero into integers, anything
/// nonzero is `true`).
pub fn astype(a: &Array, dtype: DType) -> Result<Array> {
    check_errors(&[a])?;
    if a.dtype() == dtype {
        return Ok(a.clone());
    }
    Array::op1(Primitive::AsType(dtype), vec![a.clone()])
}

macro_rules! unary_fns {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {$(
        $(#[$doc])*
        pub fn $name(a: &Array) -> Result<Array> {
            unary(UnaryOp::$op, a)
        }
    )*};
}

unary_fns! {
    /// `|a|` elementwise (the modulus for complex numbers).
    abs => Abs;
    /// `-a` elementwise.
    negative => Negative;
    /// The sign of each element: `-1`, `0` or `1`.
    sign => Sign;
    /// `a²` elementwise.
    square => Square;
    /// `√a` elementwise.
    sqrt => Sqrt;
    /// `1 / √a` elementwise.
    rsqrt => Rsqrt;
    /// `1 / a` elementwise.
    reciprocal => Reciprocal;
    /// `eᵃ` elementwise.
    exp => Exp;
    /// `eᵃ − 1` elementwise.
    expm1 => Expm1;
    /// The natural logarithm elementwise.
    log => Log;
    /// `ln(1 + a)` elementwise.
    log1p => Log1p;
    /// The base-2 logarithm elementwise.
    log2 => Log2;
    /// The base-10 logarithm elementwise.
    log10 => Log10;
    /// Sine elementwise.
    sin => Sin;
    /// Cosine elementwise.
    cos => Cos;
    /// Tangent elementwise.
    tan => Tan;
    /// Inverse sine elementwise.
    arcsin => ArcSin;
    /// Inverse cosine elementwise.
    arccos => ArcCos;
    /// Inverse tangent elementwise.
    arctan => ArcTan;
    /// Hyperbolic sine elementwise.
    sinh => Sinh;
    /// Hyperbolic cosine elementwise.
    cosh => Cosh;
    /// Hyperbolic tangent elementwise.
    tanh => Tanh;
    /// Inverse hyperbolic sine elementwise.
    arcsinh => ArcSinh;
    /// Inverse hyperbolic cosine elementwise.
    arccosh => ArcCosh;
    /// Inverse hyperbolic tangent elementwise.
    arctanh => ArcTanh;
    /// The logistic function `1 / (1 + e⁻ᵃ)` elementwise.
    sigmoid => Sigmoid;
    /// The error function elementwise.
    erf => Erf;
    /// The inverse error function elementwise.
    erfinv => ErfInv;
    /// Rounding down elementwise.
    floor => Floor;
    /// Rounding up elementwise.
    ceil => Ceil;
    /// Rounding toward zero elementwise.
    trunc => Trunc;
    /// Whether each element is NaN.
    isnan => IsNan;
    /// Whether each element is infinite.
    isinf => IsInf;
    /// Whether each element is `+∞`.
    isposinf => IsPosInf;
    /// Whether each element is `−∞`.
    isneginf => IsNegInf;
    /// Whether each element is finite.
    isfinite => IsFinite;
    /// Logical not of each element (nonzero is true).
    logical_not => LogicalNot;
    /// Bitwise not of integers (logical not of booleans).
    bitwise_invert => BitwiseInvert;
    /// The complex conjugate (real arrays are unchanged).
    conjugate => Conjugate;
    /// The real part (real arrays are unchanged).
    real => Real;
}

/// The imaginary part (zeros for real arrays).
pub fn imag(a: &Array) -> Result<Array> {
    check_errors(&[a])?;
    if a.dtype() != DType::C64 {
        return crate::zeros_like(a);
    }
    unary(UnaryOp::Imag, a)
}

/// `a` itself (MLX's `positive`).
pub fn positive(a: &Array) -> Result<Array> {
    check_errors(&[a])?;
    Ok(a.clone())
}

/// Rounds to `decimals` decimal places, ties to even (NumPy's `round`).
pub fn round(a: &Array, decimals: i32) -> Result<Array> {
    check_errors(&[a])?;
    if decimals == 0 || !a.dtype().is_float() {
        return unary(UnaryOp::Round, a);
    }
    let scale = 10f64.powi(decimals);
    let scaled = crate::multiply(a, scale)?;
    crate::divide(&unary(UnaryOp::Round, &scaled)?, scale)
}

/// Degrees from radians.
pub fn degrees(a: &Array) -> Result<Array> {
    crate::multiply(a, 180.0 / std::f64::consts::PI)
}

/// Radians from degrees.
pub fn radians(a: &Array) -> Result<Array> {
    crate::multiply(a, std::f64::consts::PI / 180.0)
}

/// NaN replaced by `nan`, `+∞` by `posinf` and `−∞` by `neginf` (the type's largest and
/// smallest finite values when `None`), as MLX's `nan_to_num`.
pub fn nan_to_num(a: &Array, nan: f64, posinf: Option<f64>, neginf: Option<f64>) -> Result<Array> {
    check_errors(&[a])?;
    if !a.dtype().is_float() {
        return Ok(a.clone());
    }
    let (lo, hi) = crate::ops::binary::finite_range(a.dtype());
    let x = crate::where_(&isnan(a)?, nan, a)?;
    let x = crate::where_(&isposinf(&x)?, posinf.unwrap_or(hi), &x)?;
    crate::where_(&isneginf(&x)?, neginf.unwrap_or(lo), &x)
}

/// `a` limited to `[min, max]` elementwise; either bound may be omitted.
pub fn clip(
    a: &Array,
    min: Option<impl Into<crate::Operand>>,
    max: Option<impl Into<crate::Operand>>,
) -> Result<Array> {
    check_errors(&[a])?;
    if min.is_none() && max.is_none() {
        return Err(invalid("clip", "at least one of min and max is needed"));
    }
    let mut x = a.clone();
    if let Some(lo) = min {
        x = crate::maximum(&x, lo)?;
    }
    if let Some(hi) = max {
        x = crate::minimum(&x, hi)?;
    }
    Ok(x)
}

/// `a` unchanged, but a constant to the derivative transforms: no gradient flows through it.
pub fn stop_gradient(a: &Array) -> Result<Array> {
    check_errors(&[a])?;
    Array::op1(Primitive::StopGradient, vec![a.clone()])
}
