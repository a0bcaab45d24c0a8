//! Element traits the kernels compute with: floats through an accumulation type (`f16` and
//! `bf16` compute in `f32`, as MLX's kernels do) and integers with wrapping arithmetic.

use num_traits::{Float, PrimInt, WrappingAdd, WrappingMul, WrappingNeg, WrappingSub};

use crate::dtype::{Element, bf16, f16};

/// A real float element and the type it computes in.
pub(crate) trait FloatElem: Element {
    /// `f32` for `f16`, `bf16` and `f32`; `f64` for `f64`.
    type Acc: AccFloat;
    /// The value in the computing type.
    fn up(self) -> Self::Acc;
    /// A computed value rounded to the element type.
    fn down(a: Self::Acc) -> Self;
}

/// The computing float types, with the special functions the kernels need.
pub(crate) trait AccFloat:
    Float + Send + Sync + Default + std::fmt::Debug + 'static
{
    /// The error function.
    fn erf(self) -> Self;
    /// The inverse error function.
    fn erfinv(self) -> Self;
    /// Rounding half to even.
    fn round_even(self) -> Self;
    /// From an `f64` constant.
    fn c(v: f64) -> Self;
}

impl AccFloat for f32 {
    fn erf(self) -> f32 {
        libm::erff(self)
    }
    fn erfinv(self) -> f32 {
        f64::from(self).erfinv() as f32
    }
    fn round_even(self) -> f32 {
        self.round_ties_even()
    }
    fn c(v: f64) -> f32 {
        v as f32
    }
}

impl AccFloat for f64 {
    fn erf(self) -> f64 {
        libm::erf(self)
    }
    /// Giles' approximation refined by two Newton steps on `erf`.
    fn erfinv(self) -> f64 {
        let x = self;
        if x.is_nan() || !(-1.0..=1.0).contains(&x) {
            return f64::NAN;
        }
        if x == 1.0 {
            return f64::INFINITY;
        }
        if x == -1.0 {
            return f64::NEG_INFINITY;
        }
        let w = -((1.0 - x) * (1.0 + x)).ln();
        let mut y = if w < 5.0 {
            let w = w - 2.5;
            let mut p = 2.810_226_36e-08;
            for c in [
                3.432_739_39e-07,
                -3.523_387_7e-06,
                -4.391_506_54e-06,
                0.000_218_580_87,
                -0.001_253_725_03,
                -0.004_177_681_64,
                0.246_640_727,
                1.501_409_41,
            ] {
                p = c + p * w;
            }
            p * x
        } else {
            let w = w.sqrt() - 3.0;
            let mut p = -0.000_200_214_257;
            for c in [
                0.000_100_950_558,
                0.001_349_343_22,
                -0.003_673_428_44,
                0.005_739_507_73,
                -0.007_622_461_3,
                0.009_438_870_47,
                1.001_674_06,
                2.832_976_82,
            ] {
                p = c + p * w;
            }
            p * x
        };
        // Newton on erf(y) = x: erf'(y) = 2/√π · e^(−y²).
        for _ in 0..2 {
            let err = libm::erf(y) - x;
            y -= err / (std::f64::consts::FRAC_2_SQRT_PI * (-y * y).exp());
        }
        y
    }
    fn round_even(self) -> f64 {
        self.round_ties_even()
    }
    fn c(v: f64) -> f64 {
        v
    }
}

macro_rules! float_elem {
    ($t:ty, $acc:ty, $up:expr, $down:expr) => {
        impl FloatElem for $t {
            type Acc = $acc;
            #[inline(always)]
            fn up(self) -> $acc {
                #[allow(clippy::redundant_closure_call)]
                ($up)(self)
            }
            #[inline(always)]
            fn down(a: $acc) -> $t {
                #[allow(clippy::redundant_closure_call)]
                ($down)(a)
            }
        }
    };
}

float_elem!(f32, f32, |x| x, |a| a);
float_elem!(f64, f64, |x| x, |a| a);
float_elem!(f16, f32, f16::to_f32, f16::from_f32);
float_elem!(bf16, f32, bf16::to_f32, bf16::from_f32);

/// An integer element, with the wrapping arithmetic of C's unsigned types (and two's
/// complement for signed ones), as MLX's kernels behave.
pub(crate) trait IntElem:
    Element + PrimInt + WrappingAdd + WrappingSub + WrappingMul + WrappingNeg + Send + Sync
{
    /// Whether the type is signed.
    const SIGNED: bool;
    /// The number of bits.
    const BITS: u32;
}

macro_rules! int_elem {
    ($($t:ty: $signed:expr),*) => {$(
        impl IntElem for $t {
            const SIGNED: bool = $signed;
            const BITS: u32 = <$t>::BITS;
        }
    )*};
}

int_elem!(u8: false, u16: false, u32: false, u64: false, i8: true, i16: true, i32: true, i64: true);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erfinv_inverts_erf() {
        for x in [-0.999, -0.5, -1e-3, 0.0, 0.3, 0.9, 0.999_999] {
            let y = AccFloat::erfinv(x);
            assert!((libm::erf(y) - x).abs() < 1e-14, "{x}");
        }
    }
}
