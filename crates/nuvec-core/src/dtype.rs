//! Element types: [`DType`], its [`Category`], MLX's promotion lattice ([`promote_types`]) and
//! the Rust types that hold each one ([`Element`]).

mod host;

use std::fmt;

pub use host::HostData;

pub use half::{bf16, f16};
/// The element type of [`DType::C64`]: two `f32`s.
pub type Complex64 = num_complex::Complex<f32>;

/// The element type of an array: MLX's 14 types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// Booleans, one byte each.
    Bool,
    /// Unsigned 8-bit integers.
    U8,
    /// Unsigned 16-bit integers.
    U16,
    /// Unsigned 32-bit integers.
    U32,
    /// Unsigned 64-bit integers.
    U64,
    /// Signed 8-bit integers.
    I8,
    /// Signed 16-bit integers.
    I16,
    /// Signed 32-bit integers.
    I32,
    /// Signed 64-bit integers.
    I64,
    /// IEEE half precision.
    F16,
    /// Brain floating point (8 exponent bits, 7 mantissa bits).
    BF16,
    /// IEEE single precision.
    F32,
    /// IEEE double precision.
    F64,
    /// Complex numbers of two `f32`s.
    C64,
}

/// The kind of values a [`DType`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Category {
    /// `bool`.
    Bool,
    /// `u8` to `u64`.
    Unsigned,
    /// `i8` to `i64`.
    Signed,
    /// `f16`, `bf16`, `f32`, `f64`.
    Float,
    /// `complex64`.
    Complex,
}

impl DType {
    /// Every element type, in promotion order.
    pub const ALL: [DType; 14] = [
        DType::Bool,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::C64,
    ];

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::U16 | DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 | DType::C64 => 8,
        }
    }

    /// The kind of values this type holds.
    pub fn category(self) -> Category {
        match self {
            DType::Bool => Category::Bool,
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => Category::Unsigned,
            DType::I8 | DType::I16 | DType::I32 | DType::I64 => Category::Signed,
            DType::F16 | DType::BF16 | DType::F32 | DType::F64 => Category::Float,
            DType::C64 => Category::Complex,
        }
    }

    /// Whether this is a real floating-point type.
    pub fn is_float(self) -> bool {
        self.category() == Category::Float
    }

    /// Whether this is a signed or unsigned integer type.
    pub fn is_integer(self) -> bool {
        matches!(self.category(), Category::Signed | Category::Unsigned)
    }

    /// Whether this is a floating-point or complex type.
    pub fn is_inexact(self) -> bool {
        matches!(self.category(), Category::Float | Category::Complex)
    }

    /// MLX's name for the type (`float32`, `bfloat16`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::C64 => "complex64",
        }
    }

    /// The type that ops which always produce floats (divide, sqrt, exp, mean, ...) give for
    /// inputs of this type: itself when inexact, else `float32`.
    pub fn to_inexact(self) -> DType {
        if self.is_inexact() { self } else { DType::F32 }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The type two arrays of types `a` and `b` combine into, MLX's table (JAX's lattice): the
/// wider of two like types; a signed type holding both for mixed integers (`float32` when one
/// is `uint64`); the float for an integer and a float; `float32` for `float16` with `bfloat16`.
pub fn promote_types(a: DType, b: DType) -> DType {
    use Category::{Complex, Float, Signed, Unsigned};
    use DType::*;
    if a == b {
        return a;
    }
    let (ca, cb) = (a.category(), b.category());
    match (ca, cb) {
        (Category::Bool, _) => b,
        (_, Category::Bool) => a,
        (Complex, _) | (_, Complex) => C64,
        (Float, Float) => match (a, b) {
            (F64, _) | (_, F64) => F64,
            (F32, _) | (_, F32) => F32,
            _ => F32, // f16 with bf16
        },
        (Float, _) => a,
        (_, Float) => b,
        (Unsigned, Unsigned) | (Signed, Signed) => a.max(b),
        (Unsigned, Signed) | (Signed, Unsigned) => {
            let (u, s) = if ca == Unsigned { (a, b) } else { (b, a) };
            if u == U64 {
                return F32;
            }
            // The smallest signed type wider than the unsigned one and at least as wide as
            // the signed one.
            let need = (u.size() * 2).max(s.size());
            match need {
                1 => I8,
                2 => I16,
                4 => I32,
                _ => I64,
            }
        }
    }
}

/// A value of any element type, in the widest type of its category: how values cross
/// between element types (casts, scalars, fills).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Canon {
    /// A boolean.
    Bool(bool),
    /// Any integer (wide enough for `u64` and `i64`).
    Int(i128),
    /// Any real float.
    Float(f64),
    /// A complex number.
    Complex(f64, f64),
}

impl Canon {
    /// The value as an `f64` (the real part of a complex number).
    pub fn as_f64(self) -> f64 {
        match self {
            Canon::Bool(b) => f64::from(u8::from(b)),
            Canon::Int(i) => i as f64,
            Canon::Float(f) => f,
            Canon::Complex(re, _) => re,
        }
    }

    /// The value as an `i128`: floats truncate toward zero (saturating; NaN is 0).
    pub fn as_i128(self) -> i128 {
        match self {
            Canon::Bool(b) => i128::from(b),
            Canon::Int(i) => i,
            Canon::Float(f) => f as i128,
            Canon::Complex(re, _) => re as i128,
        }
    }

    /// Whether the value is nonzero.
    pub fn as_bool(self) -> bool {
        match self {
            Canon::Bool(b) => b,
            Canon::Int(i) => i != 0,
            Canon::Float(f) => f != 0.0,
            Canon::Complex(re, im) => re != 0.0 || im != 0.0,
        }
    }
}

/// Runs `$body` with `$T` bound to the Rust type of a [`DType`].
#[macro_export]
#[doc(hidden)]
macro_rules! with_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {{
        use $crate::DType as D;
        #[allow(unused_imports)]
        use $crate::dtype::{Complex64, bf16, f16};
        match $dtype {
            D::Bool => {
                type $T = bool;
                $body
            }
            D::U8 => {
                type $T = u8;
                $body
            }
            D::U16 => {
                type $T = u16;
                $body
            }
            D::U32 => {
                type $T = u32;
                $body
            }
            D::U64 => {
                type $T = u64;
                $body
            }
            D::I8 => {
                type $T = i8;
                $body
            }
            D::I16 => {
                type $T = i16;
                $body
            }
            D::I32 => {
                type $T = i32;
                $body
            }
            D::I64 => {
                type $T = i64;
                $body
            }
            D::F16 => {
                type $T = f16;
                $body
            }
            D::BF16 => {
                type $T = bf16;
                $body
            }
            D::F32 => {
                type $T = f32;
                $body
            }
            D::F64 => {
                type $T = f64;
                $body
            }
            D::C64 => {
                type $T = Complex64;
                $body
            }
        }
    }};
}

/// A Rust type that holds the elements of one [`DType`].
pub trait Element:
    Copy + Send + Sync + fmt::Debug + PartialEq + Default + 'static + private::Sealed
{
    /// The element type this Rust type holds.
    const DTYPE: DType;
    /// The value in its category's widest type.
    fn to_canon(self) -> Canon;
    /// The value converted from another type's, as a C cast would (integers wrap, floats
    /// truncate toward zero, anything nonzero is `true`).
    fn from_canon(v: Canon) -> Self;
    /// Wraps a vector of elements as host data.
    fn into_host(v: Vec<Self>) -> HostData;
    /// The vector inside host data of this type, or the data back.
    fn from_host(d: HostData) -> Result<Vec<Self>, HostData>;
    /// The elements of host data of this type.
    fn host_slice(d: &HostData) -> Option<&[Self]>;
    /// The elements of host data of this type, mutably.
    fn host_slice_mut(d: &mut HostData) -> Option<&mut [Self]>;
}

mod private {
    pub trait Sealed {}
}

macro_rules! element {
    ($t:ty, $dtype:ident, $to:expr, $from:expr) => {
        impl private::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$dtype;
            #[inline(always)]
            fn to_canon(self) -> Canon {
                #[allow(clippy::redundant_closure_call)]
                ($to)(self)
            }
            #[inline(always)]
            fn from_canon(v: Canon) -> Self {
                #[allow(clippy::redundant_closure_call)]
                ($from)(v)
            }
            fn into_host(v: Vec<Self>) -> HostData {
                HostData::$dtype(v)
            }
            fn from_host(d: HostData) -> Result<Vec<Self>, HostData> {
                match d {
                    HostData::$dtype(v) => Ok(v),
                    other => Err(other),
                }
            }
            fn host_slice(d: &HostData) -> Option<&[Self]> {
                match d {
                    HostData::$dtype(v) => Some(v),
                    _ => None,
                }
            }
            fn host_slice_mut(d: &mut HostData) -> Option<&mut [Self]> {
                match d {
                    HostData::$dtype(v) => Some(v),
                    _ => None,
                }
            }
        }
    };
}

macro_rules! int_element {
    ($t:ty, $dtype:ident) => {
        element!(
            $t,
            $dtype,
            |x: $t| Canon::Int(x as i128),
            |v: Canon| match v {
                Canon::Int(i) => i as $t,
                Canon::Float(f) => f as i128 as $t,
                Canon::Bool(b) => b as $t,
                Canon::Complex(re, _) => re as i128 as $t,
            }
        );
    };
}

int_element!(u8, U8);
int_element!(u16, U16);
int_element!(u32, U32);
int_element!(u64, U64);
int_element!(i8, I8);
int_element!(i16, I16);
int_element!(i32, I32);
int_element!(i64, I64);
element!(bool, Bool, Canon::Bool, |v: Canon| v.as_bool());
element!(
    f32,
    F32,
    |x: f32| Canon::Float(f64::from(x)),
    |v: Canon| v.as_f64() as f32
);
element!(f64, F64, Canon::Float, |v: Canon| v.as_f64());
element!(f16, F16, |x: f16| Canon::Float(x.to_f64()), |v: Canon| {
    f16::from_f32(to_f32_odd(v.as_f64()))
});
element!(
    bf16,
    BF16,
    |x: bf16| Canon::Float(x.to_f64()),
    |v: Canon| bf16::from_f32(to_f32_odd(v.as_f64()))
);

/// `x` rounded to `f32` towards zero, its last bit set when that loses anything ("rounding
/// to odd"). Rounding the result once more, to nearest, into a type at least two bits
/// narrower (`f16`, `bf16`) gives what rounding `x` itself would: the narrow conversion is
/// then rounded once. (`half`'s `from_f64` rounds twice: through `f32` where the CPU
/// converts halves in hardware, and without the mantissa's low 32 bits in software.)
#[inline]
fn to_f32_odd(x: f64) -> f32 {
    let r = x as f32;
    if x.is_nan() || f64::from(r) == x {
        return r;
    }
    let mut bits = r.to_bits();
    if f64::from(r).abs() > x.abs() {
        // Rounded away from zero (maybe to infinity): the neighbour towards zero.
        bits -= 1;
    }
    f32::from_bits(bits | 1)
}
element!(
    Complex64,
    C64,
    |x: Complex64| Canon::Complex(f64::from(x.re), f64::from(x.im)),
    |v: Canon| match v {
        Canon::Complex(re, im) => Complex64::new(re as f32, im as f32),
        other => Complex64::new(other.as_f64() as f32, 0.0),
    }
);

#[cfg(test)]
mod tests {
    use super::*;
    use DType::*;

    #[test]
    fn promotion_follows_mlx_table() {
        assert_eq!(promote_types(Bool, I8), I8);
        assert_eq!(promote_types(U8, I8), I16);
        assert_eq!(promote_types(U32, I8), I64);
        assert_eq!(promote_types(U16, I32), I32);
        assert_eq!(promote_types(U64, I8), F32);
        assert_eq!(promote_types(I64, F16), F16);
        assert_eq!(promote_types(F16, BF16), F32);
        assert_eq!(promote_types(F32, F64), F64);
        assert_eq!(promote_types(C64, F64), C64);
        assert_eq!(promote_types(U8, U32), U32);
        for a in DType::ALL {
            for b in DType::ALL {
                assert_eq!(promote_types(a, b), promote_types(b, a), "{a} {b}");
            }
        }
    }

    #[test]
    fn casts_behave_like_c() {
        assert_eq!(u8::from_canon((-1i32).to_canon()), 255);
        assert_eq!(i32::from_canon(2.9f32.to_canon()), 2);
        assert_eq!(i32::from_canon((-2.9f32).to_canon()), -2);
        assert!(bool::from_canon(0.5f32.to_canon()));
        assert_eq!(f16::from_canon(1.5f64.to_canon()), f16::from_f32(1.5));
        assert_eq!(u64::from_canon(u64::MAX.to_canon()), u64::MAX);
    }

    #[test]
    fn rounding_to_odd_keeps_the_side_of_a_halfway_point() {
        // Just above 1 + 2⁻²⁴, halfway between f32 neighbours: rounds towards zero, odd.
        let x = 1.0 + 2f64.powi(-24) + 2f64.powi(-40);
        assert_eq!(to_f32_odd(x).to_bits(), 1f32.to_bits() | 1);
        assert_eq!(to_f32_odd(-x).to_bits(), (-1f32).to_bits() | 1);
        // Exact values, infinities and NaN are kept; beyond f32's range is the largest odd.
        assert_eq!(to_f32_odd(0.375), 0.375);
        assert_eq!(to_f32_odd(f64::INFINITY), f32::INFINITY);
        assert!(to_f32_odd(f64::NAN).is_nan());
        assert_eq!(to_f32_odd(1e300), f32::MAX);
        assert_eq!(to_f32_odd(-1e-300).to_bits(), (-0f32).to_bits() | 1);
    }
}
