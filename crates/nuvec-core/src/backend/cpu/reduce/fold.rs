//! Folds: what a reduction does with one element ([`Fold`]), the element and accumulator
//! types it works in, and the lane-parallel loops that run it over a contiguous run.
//!
//! The loops keep many independent accumulators, so that LLVM turns them into vector code,
//! and combine runs longer than [`BLOCK`] pairwise: float sums are then both fast and more
//! accurate than a single running total.

use std::marker::PhantomData;

use half::slice::HalfFloatSliceExt;

use crate::DType;
use crate::dtype::{Complex64, Element, bf16, f16};

/// Elements folded before partial results are combined pairwise.
pub(super) const BLOCK: usize = 2048;

/// How kernels read elements of a type: half floats become `f32` first (in batches, where
/// the CPU converts several at once); every other type is read as it is.
pub(super) trait Load: Element {
    /// The type the kernels compute on.
    type In: Copy + Send + Sync + Default + PartialEq + 'static;
    /// Whether a slice of `Self` is already a slice of `In` (no conversion).
    const DIRECT: bool;
    /// One element, converted.
    fn up(self) -> Self::In;
    /// The slice as `In` when no conversion is needed.
    fn direct(s: &[Self]) -> Option<&[Self::In]>;
    /// Converts `s` into `out` (same length).
    fn load(s: &[Self], out: &mut [Self::In]);
}

macro_rules! load_same {
    ($($t:ty),*) => {$(
        impl Load for $t {
            type In = $t;
            const DIRECT: bool = true;
            #[inline(always)]
            fn up(self) -> $t {
                self
            }
            #[inline(always)]
            fn direct(s: &[$t]) -> Option<&[$t]> {
                Some(s)
            }
            fn load(s: &[$t], out: &mut [$t]) {
                out.copy_from_slice(s);
            }
        }
    )*};
}

load_same!(
    bool, u8, u16, u32, u64, i8, i16, i32, i64, f32, f64, Complex64
);

macro_rules! load_half {
    ($($t:ty),*) => {$(
        impl Load for $t {
            type In = f32;
            const DIRECT: bool = false;
            #[inline(always)]
            fn up(self) -> f32 {
                self.to_f32()
            }
            #[inline(always)]
            fn direct(_: &[$t]) -> Option<&[f32]> {
                None
            }
            fn load(s: &[$t], out: &mut [f32]) {
                s.convert_to_f32_slice(out);
            }
        }
    )*};
}

load_half!(f16, bf16);

/// A conversion between the element, accumulator and output types of a fold (identity,
/// widening of small integers, rounding of `f32` to a half type).
pub(super) trait To<O> {
    /// The converted value.
    fn to(self) -> O;
}

impl<T> To<T> for T {
    #[inline(always)]
    fn to(self) -> T {
        self
    }
}

macro_rules! to_from {
    ($($s:ty => $d:ty),*) => {$(
        impl To<$d> for $s {
            #[inline(always)]
            fn to(self) -> $d {
                <$d>::from(self)
            }
        }
    )*};
}

to_from!(bool => i32, i8 => i32, i16 => i32, u8 => u32, u16 => u32);

impl To<f16> for f32 {
    #[inline(always)]
    fn to(self) -> f16 {
        f16::from_f32(self)
    }
}

impl To<bf16> for f32 {
    #[inline(always)]
    fn to(self) -> bf16 {
        bf16::from_f32(self)
    }
}

/// Accumulator arithmetic for sums and products: wrapping for integers (as C), `or` and
/// `and` for booleans.
pub(super) trait Num: Copy + Send + Sync + 'static {
    /// The identity of `add`.
    const ZERO: Self;
    /// The identity of `mul`.
    const ONE: Self;
    /// `self + o`.
    fn add(self, o: Self) -> Self;
    /// `self · o`.
    fn mul(self, o: Self) -> Self;
}

macro_rules! num_int {
    ($($t:ty),*) => {$(
        impl Num for $t {
            const ZERO: $t = 0;
            const ONE: $t = 1;
            #[inline(always)]
            fn add(self, o: $t) -> $t {
                self.wrapping_add(o)
            }
            #[inline(always)]
            fn mul(self, o: $t) -> $t {
                self.wrapping_mul(o)
            }
        }
    )*};
}

num_int!(u8, u16, u32, u64, i8, i16, i32, i64);

macro_rules! num_field {
    ($($t:ty: $zero:expr, $one:expr),*) => {$(
        impl Num for $t {
            const ZERO: $t = $zero;
            const ONE: $t = $one;
            #[inline(always)]
            fn add(self, o: $t) -> $t {
                self + o
            }
            #[inline(always)]
            fn mul(self, o: $t) -> $t {
                self * o
            }
        }
    )*};
}

num_field!(
    f32: 0.0, 1.0,
    f64: 0.0, 1.0,
    Complex64: Complex64 { re: 0.0, im: 0.0 }, Complex64 { re: 1.0, im: 0.0 }
);

impl Num for bool {
    const ZERO: bool = false;
    const ONE: bool = true;
    #[inline(always)]
    fn add(self, o: bool) -> bool {
        self | o
    }
    #[inline(always)]
    fn mul(self, o: bool) -> bool {
        self & o
    }
}

/// Ordered element types with the bounds that start a maximum or a minimum.
pub(super) trait Bounded: Copy + Send + Sync + PartialOrd + 'static {
    /// The lowest value (`-∞` for floats).
    const LOWEST: Self;
    /// The highest value (`+∞` for floats).
    const HIGHEST: Self;
}

macro_rules! bounded {
    ($($t:ty: $lo:expr, $hi:expr),*) => {$(
        impl Bounded for $t {
            const LOWEST: $t = $lo;
            const HIGHEST: $t = $hi;
        }
    )*};
}

bounded!(
    bool: false, true,
    u8: u8::MIN, u8::MAX,
    u16: u16::MIN, u16::MAX,
    u32: u32::MIN, u32::MAX,
    u64: u64::MIN, u64::MAX,
    i8: i8::MIN, i8::MAX,
    i16: i16::MIN, i16::MAX,
    i32: i32::MIN, i32::MAX,
    i64: i64::MIN, i64::MAX,
    f32: f32::NEG_INFINITY, f32::INFINITY,
    f64: f64::NEG_INFINITY, f64::INFINITY
);

/// Whether the fold's element type gains from wider vector units chosen at run time (the
/// float types; other types keep the baseline code, to keep compile times short).
const fn wide(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F64)
}

/// One reduction: its accumulator, how an element enters it, how two partial results
/// combine, and how the result is written.
pub(super) trait Fold: Send + Sync + 'static {
    /// The element type read (after [`Load`]).
    type In: Copy + Send + Sync + Default + PartialEq + 'static;
    /// The accumulator.
    type Acc: Copy + Send + Sync + 'static;
    /// The output element type.
    type Out: Element;
    /// Whether the kernels should be compiled for wider vector units too.
    const WIDE: bool;
    /// The accumulator of no elements.
    fn init() -> Self::Acc;
    /// One element more.
    fn step(a: Self::Acc, x: Self::In) -> Self::Acc;
    /// Two partial results combined.
    fn merge(a: Self::Acc, b: Self::Acc) -> Self::Acc;
    /// The output value of an accumulator.
    fn finish(a: Self::Acc) -> Self::Out;
}

/// A marker that names its type parameters without holding them.
type Marker<T> = PhantomData<fn() -> T>;

/// Sums of `I` accumulated in `A`, written as `O`.
pub(super) struct Sum<I, A, O>(Marker<(I, A, O)>);
/// Products of `I` accumulated in `A`, written as `O`.
pub(super) struct Prod<I, A, O>(Marker<(I, A, O)>);
/// Maxima of `I` written as `O` (NaN wins).
pub(super) struct Max<I, O>(Marker<(I, O)>);
/// Minima of `I` written as `O` (NaN wins).
pub(super) struct Min<I, O>(Marker<(I, O)>);
/// Whether every `I` is nonzero.
pub(super) struct All<I>(Marker<I>);
/// Whether some `I` is nonzero.
pub(super) struct Any<I>(Marker<I>);

/// The [`Fold`] of an arithmetic reduction: the accumulator starts at `Num::$init` and takes
/// each element (widened to it) and each partial result with `Num::$op`.
macro_rules! num_fold {
    ($name:ident, $init:ident, $op:ident) => {
        impl<I, A, O> Fold for $name<I, A, O>
        where
            I: Element + To<A> + Default,
            A: Num + To<O>,
            O: Element,
        {
            type In = I;
            type Acc = A;
            type Out = O;
            const WIDE: bool = wide(I::DTYPE);
            #[inline(always)]
            fn init() -> A {
                A::$init
            }
            #[inline(always)]
            fn step(a: A, x: I) -> A {
                a.$op(x.to())
            }
            #[inline(always)]
            fn merge(a: A, b: A) -> A {
                a.$op(b)
            }
            #[inline(always)]
            fn finish(a: A) -> O {
                a.to()
            }
        }
    };
}

num_fold!(Sum, ZERO, add);
num_fold!(Prod, ONE, mul);

/// `x` when it is larger than `a` or NaN, else `a`: a maximum that NaN sticks to, written
/// as a compare and a select so that it vectorises.
#[inline(always)]
#[allow(clippy::eq_op)]
pub(super) fn max_nan<T: PartialOrd + Copy>(a: T, x: T) -> T {
    if x > a || x != x { x } else { a }
}

/// The minimum counterpart of [`max_nan`].
#[inline(always)]
#[allow(clippy::eq_op)]
pub(super) fn min_nan<T: PartialOrd + Copy>(a: T, x: T) -> T {
    if x < a || x != x { x } else { a }
}

/// The [`Fold`] of an extreme: the accumulator starts at `Bounded::$init` and keeps the
/// winner of `$pick` (elements and partial results alike).
macro_rules! extreme_fold {
    ($name:ident, $init:ident, $pick:ident) => {
        impl<I, O> Fold for $name<I, O>
        where
            I: Element + Bounded + To<O> + Default,
            O: Element,
        {
            type In = I;
            type Acc = I;
            type Out = O;
            const WIDE: bool = wide(I::DTYPE);
            #[inline(always)]
            fn init() -> I {
                I::$init
            }
            #[inline(always)]
            fn step(a: I, x: I) -> I {
                $pick(a, x)
            }
            #[inline(always)]
            fn merge(a: I, b: I) -> I {
                $pick(a, b)
            }
            #[inline(always)]
            fn finish(a: I) -> O {
                a.to()
            }
        }
    };
}

extreme_fold!(Max, LOWEST, max_nan);
extreme_fold!(Min, HIGHEST, min_nan);

/// The [`Fold`] of a truth test: whether `$op` of every element's "is nonzero" holds, from
/// `$init`.
macro_rules! truth_fold {
    ($name:ident, $init:expr, $op:tt) => {
        impl<I: Element + Default> Fold for $name<I> {
            type In = I;
            type Acc = bool;
            type Out = bool;
            const WIDE: bool = false;
            #[inline(always)]
            fn init() -> bool {
                $init
            }
            #[inline(always)]
            fn step(a: bool, x: I) -> bool {
                a $op (x != I::default())
            }
            #[inline(always)]
            fn merge(a: bool, b: bool) -> bool {
                a $op b
            }
            #[inline(always)]
            fn finish(a: bool) -> bool {
                a
            }
        }
    };
}

truth_fold!(All, true, &);
truth_fold!(Any, false, |);

/// Folds at most [`BLOCK`] contiguous elements into `L` independent accumulators, combined
/// pairwise at the end. The accumulators are updated as one row (`acc[i] = step(acc[i],
/// x[i])`), a loop LLVM's loop vectoriser turns into vector code reliably (unrolled scalar
/// lanes are left to the less predictable SLP vectoriser).
#[inline(always)]
pub(super) fn fold_lanes<F: Fold, const L: usize>(x: &[F::In]) -> F::Acc {
    let mut acc = [F::init(); L];
    let mut chunks = x.chunks_exact(L);
    for c in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a = F::step(*a, v);
        }
    }
    let mut tail = F::init();
    for &v in chunks.remainder() {
        tail = F::step(tail, v);
    }
    F::merge(merge_lanes::<F, L>(acc), tail)
}

/// `L` (a power of two) accumulators combined pairwise: halves merged into halves, as vector
/// registers are.
#[inline(always)]
pub(super) fn merge_lanes<F: Fold, const L: usize>(mut acc: [F::Acc; L]) -> F::Acc {
    let mut width = L;
    while width > 1 {
        width /= 2;
        let (lo, hi) = acc.split_at_mut(width);
        for (a, &b) in lo.iter_mut().zip(hi.iter()) {
            *a = F::merge(*a, b);
        }
    }
    acc[0]
}

/// [`fold_lanes`] with as many accumulators as eight 256-bit registers hold for the float
/// folds, fewer (and less code) for the rest.
#[inline(always)]
fn lanes<F: Fold>(x: &[F::In]) -> F::Acc {
    if !F::WIDE {
        fold_lanes::<F, 16>(x)
    } else if std::mem::size_of::<F::Acc>() <= 4 {
        fold_lanes::<F, 64>(x)
    } else {
        fold_lanes::<F, 32>(x)
    }
}

/// Folds at most [`BLOCK`] contiguous elements, with AVX2 where the fold gains from it and
/// the CPU has it (the check is cached; one call covers a whole block).
#[inline(always)]
pub(super) fn fold_block<F: Fold>(x: &[F::In]) -> F::Acc {
    #[cfg(target_arch = "x86_64")]
    if F::WIDE && super::simd::has_avx2() {
        #[target_feature(enable = "avx2,fma")]
        fn wide<F: Fold>(x: &[F::In]) -> F::Acc {
            lanes::<F>(x)
        }
        // SAFETY: `wide` needs AVX2 and FMA, which the CPU has (checked above).
        return unsafe { wide::<F>(x) };
    }
    lanes::<F>(x)
}

/// Partial results of consecutive blocks, combined pairwise (a binary counter): the error
/// of a float sum grows with the logarithm of the length, not the length.
pub(super) struct Pairwise<F: Fold> {
    /// `levels[k]` holds the combination of 2^k blocks, or nothing.
    levels: [Option<F::Acc>; 48],
}

impl<F: Fold> Pairwise<F> {
    /// No blocks yet.
    #[inline(always)]
    pub(super) fn new() -> Self {
        Pairwise { levels: [None; 48] }
    }

    /// The result of the next block.
    #[inline(always)]
    pub(super) fn push(&mut self, block: F::Acc) {
        let mut carry = block;
        let mut k = 0;
        while let Some(prev) = self.levels[k].take() {
            carry = F::merge(prev, carry);
            k += 1;
        }
        self.levels[k] = Some(carry);
    }

    /// Everything combined, in order (higher levels hold earlier blocks).
    #[inline(always)]
    pub(super) fn finish(self) -> F::Acc {
        let mut acc: Option<F::Acc> = None;
        for level in self.levels.into_iter().flatten() {
            acc = Some(match acc {
                None => level,
                Some(later) => F::merge(level, later),
            });
        }
        acc.unwrap_or_else(F::init)
    }
}

/// Folds a contiguous run of any length, block by block, pairwise.
#[inline(always)]
pub(super) fn fold_run<F: Fold>(x: &[F::In]) -> F::Acc {
    let mut acc = Pairwise::<F>::new();
    for block in x.chunks(BLOCK) {
        acc.push(fold_block::<F>(block));
    }
    acc.finish()
}

/// `acc[j] = step(acc[j], x[j])`: one row folded into a row of accumulators (with AVX2
/// where it helps, as [`fold_block`]).
#[inline(always)]
pub(super) fn fold_cols<F: Fold>(acc: &mut [F::Acc], x: &[F::In]) {
    #[inline(always)]
    fn each<F: Fold>(acc: &mut [F::Acc], x: &[F::In]) {
        for (a, &v) in acc.iter_mut().zip(x) {
            *a = F::step(*a, v);
        }
    }
    #[cfg(target_arch = "x86_64")]
    if F::WIDE && super::simd::has_avx2() {
        #[target_feature(enable = "avx2,fma")]
        fn wide<F: Fold>(acc: &mut [F::Acc], x: &[F::In]) {
            each::<F>(acc, x);
        }
        // SAFETY: `wide` needs AVX2 and FMA, which the CPU has (checked above).
        unsafe { wide::<F>(acc, x) };
        return;
    }
    each::<F>(acc, x);
}

/// `log(eᵃ + eᵇ)` without overflow: the larger plus `log1p` of the smaller's exponential
/// relative to it. `-∞` is the identity, `+∞` absorbs, NaN propagates.
#[inline(always)]
pub(super) fn log_add<T: num_traits::Float>(a: T, b: T) -> T {
    if a.is_nan() || b.is_nan() {
        return a + b;
    }
    let (hi, lo) = if a > b { (a, b) } else { (b, a) };
    if lo == T::neg_infinity() || hi == T::infinity() {
        return hi;
    }
    hi + (lo - hi).exp().ln_1p()
}

/// Running `log(sum(exp(x)))` of floats `I`, written as `O`.
pub(super) struct LogAdd<I, O>(Marker<(I, O)>);

impl<I, O> Fold for LogAdd<I, O>
where
    I: Element + num_traits::Float + Default + To<O>,
    O: Element,
{
    type In = I;
    type Acc = I;
    type Out = O;
    const WIDE: bool = false;
    #[inline(always)]
    fn init() -> I {
        I::neg_infinity()
    }
    #[inline(always)]
    fn step(a: I, x: I) -> I {
        log_add(a, x)
    }
    #[inline(always)]
    fn merge(a: I, b: I) -> I {
        log_add(a, b)
    }
    #[inline(always)]
    fn finish(a: I) -> O {
        a.to()
    }
}
