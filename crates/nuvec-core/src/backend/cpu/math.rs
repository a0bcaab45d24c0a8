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
    /// `eˣ` in a form the compiler turns into SIMD code for `f32`.
    fn exp_simd(self) -> Self;
}

/// `eˣ` for `f32` without branches or calls, so that loops over it vectorise: `x = n·ln 2 +
/// r` with `|r| <= ln 2 / 2`, a degree-7 Taylor polynomial for `eʳ` (error below 1e-8
/// relative, under one ulp), and `2ⁿ` applied in two halves so that results between the
/// smallest normal and the smallest subnormal round correctly. NaN propagates; `±∞` give
/// `∞` and `0`. The polynomial uses fused multiply-adds: the callers' hot loops are compiled
/// with FMA enabled (a build without it pays a library call per step).
#[inline(always)]
pub(crate) fn exp_f32(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split so that `n · LN2_HI` is exact for |n| < 2^9.
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Adding and subtracting 1.5 · 2^23 rounds to the nearest integer.
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(-104.0, 89.0);
    // `t`'s low mantissa bits hold n itself: no float-to-int conversion, which would not
    // vectorise with its saturation.
    let t = x * LOG2E + ROUND;
    let n = t - ROUND;
    let ni = (t.to_bits() as i32).wrapping_sub(ROUND.to_bits() as i32);
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let mut p: f32 = 1.0 / 5040.0;
    p = p.mul_add(r, 1.0 / 720.0);
    p = p.mul_add(r, 1.0 / 120.0);
    p = p.mul_add(r, 1.0 / 24.0);
    p = p.mul_add(r, 1.0 / 6.0);
    p = p.mul_add(r, 0.5);
    p = p.mul_add(r, 1.0);
    p = p.mul_add(r, 1.0);
    let half = ni >> 1;
    let s1 = f32::from_bits(((half + 127) << 23) as u32);
    let s2 = f32::from_bits(((ni - half + 127) << 23) as u32);
    p * s1 * s2
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
    fn exp_simd(self) -> f32 {
        exp_f32(self)
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
    fn exp_simd(self) -> f64 {
        self.exp()
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
    fn simd_exp_is_within_two_ulp_everywhere() {
        let mut worst = 0.0f64;
        let mut x = -110.0f32;
        while x < 90.0 {
            let want = f64::from(x).exp();
            let got = f64::from(exp_f32(x));
            if want > f64::from(f32::MIN_POSITIVE) && want < f64::from(f32::MAX) {
                worst = worst.max(((got - want) / want).abs());
            } else if want < 1e-45 {
                assert!(got < 1.5e-45, "{x}: {got}");
            } else if want > f64::from(f32::MAX) {
                assert!(got.is_infinite(), "{x}");
            }
            x += 0.0137;
        }
        assert!(worst < 2.4e-7, "worst relative error {worst}");
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
        assert!(exp_f32(f32::NAN).is_nan());
    }

    #[test]
    fn erfinv_inverts_erf() {
        for x in [-0.999, -0.5, -1e-3, 0.0, 0.3, 0.9, 0.999_999] {
            let y = AccFloat::erfinv(x);
            assert!((libm::erf(y) - x).abs() < 1e-14, "{x}");
        }
    }
}
