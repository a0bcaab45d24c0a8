//! The fused last-axis kernels: `logsumexp` and `softmax`, each row read from memory once
//! (then re-read from cache). `float32` rows use an exponential written to vectorise
//! ([`exp_neg`]); half rows are widened to `float32` first, `float64` rows use the
//! standard library's `exp`.

use half::slice::HalfFloatSliceExt;

use super::fold::{Load, Max, Sum, To, fold_lanes, fold_run, max_nan, merge_lanes};
use super::plan::par_fill;
use crate::array::{ArrayData, Layout};
use crate::backend::cpu::copy::to_contiguous_shared;
use crate::backend::cpu::elementwise::donated;
use crate::dtype::{Element, bf16, f16};
use crate::{Error, Result};

/// Below this, `exp` underflows to a subnormal or zero: the result is 0.
const EXP_LOW: f32 = -87.336_55;

/// `c₁..c₅` of `eʳ ≈ 1 + c₁r + c₂r² + ... + c₅r⁵` on `[-ln2/2, ln2/2]`, fitted to relative
/// error (below 1e-7, about one ulp).
const EXP_POLY: [f32; 5] = [
    0.999_999_7,
    0.499_991_5,
    0.166_676_36,
    0.041_897_934,
    0.008_290_319,
];

#[inline(always)]
fn mul_add<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    // Without the FMA unit `mul_add` would be a slow library call.
    if FMA { a.mul_add(b, c) } else { a * b + c }
}

/// `eˣ` for `x ≤ 0` (or NaN, which propagates), within about two ulp, without branches so
/// that loops of it vectorise: `x = k·ln2 + r`, `eʳ` by [`EXP_POLY`], `2ᵏ` built from its
/// exponent bits. The shared `math::exp_f32` covers every input; the kernels here only ever
/// exponentiate `x - max(x)`, which lets this one skip the overflow side and a few
/// instructions per element (the exponential is what these kernels spend their time on).
#[inline(always)]
fn exp_neg<const FMA: bool>(x: f32) -> f32 {
    // Adding 1.5·2²³ rounds to an integer held in the low mantissa bits; the extra 127 is
    // the exponent bias, so those bits shifted into the exponent field are 2ᵏ.
    const SHIFT: f32 = 12_583_039.0;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let xc = if x < EXP_LOW { EXP_LOW } else { x };
    let t = mul_add::<FMA>(xc, std::f32::consts::LOG2_E, SHIFT);
    let k = t - SHIFT;
    // r = x - k·ln2 in two steps, so that k·ln2 loses nothing.
    let r = mul_add::<FMA>(k, -LN2_HI, xc);
    let r = mul_add::<FMA>(k, -LN2_LO, r);
    let mut p = EXP_POLY[4];
    for &c in EXP_POLY[..4].iter().rev() {
        p = mul_add::<FMA>(p, r, c);
    }
    let p = mul_add::<FMA>(p, r, 1.0);
    let y = p * f32::from_bits(t.to_bits() << 23);
    if x < EXP_LOW { 0.0 } else { y }
}

/// Elements per block of the one-pass kernels (8 KiB of `float32`: a block read from
/// memory stays in the L1 cache for the passes that follow).
const CHUNK: usize = 2048;

/// The largest element of a run (NaN wins).
fn max_run(x: &[f32]) -> f32 {
    fold_run::<Max<f32, f32>>(x)
}

/// `x[i] = exp(x[i] - m)`, for `x[i] <= m`, returning their sum (32 accumulators, combined
/// pairwise).
#[inline(always)]
fn exp_shifted_body<const FMA: bool>(x: &mut [f32], m: f32) -> f32 {
    let mut acc = [0f32; 32];
    let mut chunks = x.chunks_exact_mut(32);
    for c in &mut chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *v = exp_neg::<FMA>(*v - m);
            *a += *v;
        }
    }
    let mut tail = 0.0;
    for v in chunks.into_remainder() {
        *v = exp_neg::<FMA>(*v - m);
        tail += *v;
    }
    pairwise_32(acc) + tail
}

/// `out[i] = exp(x[i] - m)`, for `x[i] <= m`, returning their sum.
#[inline(always)]
fn exp_into_body<const FMA: bool>(x: &[f32], m: f32, out: &mut [f32]) -> f32 {
    let mut acc = [0f32; 32];
    let mut chunks = out.chunks_exact_mut(32);
    let mut src = x.chunks_exact(32);
    for (c, xs) in (&mut chunks).zip(&mut src) {
        for ((a, o), &v) in acc.iter_mut().zip(c).zip(xs) {
            *o = exp_neg::<FMA>(v - m);
            *a += *o;
        }
    }
    let mut tail = 0.0;
    for (o, &v) in chunks.into_remainder().iter_mut().zip(src.remainder()) {
        *o = exp_neg::<FMA>(v - m);
        tail += *o;
    }
    pairwise_32(acc) + tail
}

/// The sum of 32 accumulators, pairwise.
#[inline(always)]
fn pairwise_32(acc: [f32; 32]) -> f32 {
    merge_lanes::<Sum<f32, f32, f32>, 32>(acc)
}

/// `x[i] *= factor`.
#[inline(always)]
fn scale_body<const FMA: bool>(x: &mut [f32], factor: f32) {
    for v in x.iter_mut() {
        *v *= factor;
    }
}

/// `sum(exp(x[i] - m))`, for `x[i] <= m`, with 32 accumulators (combined pairwise).
#[inline(always)]
fn exp_sum_body<const FMA: bool>(x: &[f32], m: f32) -> f32 {
    let mut acc = [0f32; 32];
    let mut chunks = x.chunks_exact(32);
    for c in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += exp_neg::<FMA>(v - m);
        }
    }
    let mut tail = 0.0;
    for &v in chunks.remainder() {
        tail += exp_neg::<FMA>(v - m);
    }
    pairwise_32(acc) + tail
}

/// The largest element of a run (NaN wins), with 32 accumulators.
#[inline(always)]
fn max_body(x: &[f32]) -> f32 {
    fold_lanes::<Max<f32, f32>, 32>(x)
}

/// The largest of 32 accumulators (NaN wins).
#[inline(always)]
fn tree_max_32(acc: [f32; 32]) -> f32 {
    merge_lanes::<Max<f32, f32>, 32>(acc)
}

/// `(sum(exp(cur[i] - m)), max(next))` for `cur[i] <= m`: one block's exponentials and the
/// next block's maximum in one loop, so that reading the next block from memory overlaps
/// the arithmetic on this one.
#[inline(always)]
fn exp_sum_max_body<const FMA: bool>(cur: &[f32], m: f32, next: &[f32]) -> (f32, f32) {
    let both = cur.len().min(next.len()) / 32 * 32;
    let mut sums = [0f32; 32];
    let mut maxs = [f32::NEG_INFINITY; 32];
    for (c, x) in cur[..both]
        .chunks_exact(32)
        .zip(next[..both].chunks_exact(32))
    {
        for (((s, mx), &v), &w) in sums.iter_mut().zip(maxs.iter_mut()).zip(c).zip(x) {
            *s += exp_neg::<FMA>(v - m);
            *mx = max_nan(*mx, w);
        }
    }
    let sum = pairwise_32(sums) + exp_sum_body::<FMA>(&cur[both..], m);
    let max = max_nan(tree_max_32(maxs), max_body(&next[both..]));
    (sum, max)
}

/// `out[i] = exp(cur[i] - m)` with their sum, and `max(next)`, in one loop (see
/// [`exp_sum_max_body`]).
#[inline(always)]
fn exp_into_max_body<const FMA: bool>(
    cur: &[f32],
    m: f32,
    out: &mut [f32],
    next: &[f32],
) -> (f32, f32) {
    let both = cur.len().min(next.len()) / 32 * 32;
    let mut sums = [0f32; 32];
    let mut maxs = [f32::NEG_INFINITY; 32];
    let lanes = cur[..both]
        .chunks_exact(32)
        .zip(out[..both].chunks_exact_mut(32));
    for ((c, o), x) in lanes.zip(next[..both].chunks_exact(32)) {
        for ((((s, mx), &v), d), &w) in sums.iter_mut().zip(maxs.iter_mut()).zip(c).zip(o).zip(x) {
            *d = exp_neg::<FMA>(v - m);
            *s += *d;
            *mx = max_nan(*mx, w);
        }
    }
    let sum = pairwise_32(sums) + exp_into_body::<FMA>(&cur[both..], m, &mut out[both..]);
    let max = max_nan(tree_max_32(maxs), max_body(&next[both..]));
    (sum, max)
}

/// `cur[i] = exp(cur[i] - m)` with their sum, and `max(next)`, in one loop (see
/// [`exp_sum_max_body`]).
#[inline(always)]
fn exp_shifted_max_body<const FMA: bool>(cur: &mut [f32], m: f32, next: &[f32]) -> (f32, f32) {
    let both = cur.len().min(next.len()) / 32 * 32;
    let mut sums = [0f32; 32];
    let mut maxs = [f32::NEG_INFINITY; 32];
    for (c, x) in cur[..both]
        .chunks_exact_mut(32)
        .zip(next[..both].chunks_exact(32))
    {
        for (((s, mx), v), &w) in sums.iter_mut().zip(maxs.iter_mut()).zip(c).zip(x) {
            *v = exp_neg::<FMA>(*v - m);
            *s += *v;
            *mx = max_nan(*mx, w);
        }
    }
    let sum = pairwise_32(sums) + exp_shifted_body::<FMA>(&mut cur[both..], m);
    let max = max_nan(tree_max_32(maxs), max_body(&next[both..]));
    (sum, max)
}

/// Defines `$name`, which runs `$body::<FMA>` compiled for AVX-512, AVX2 or the baseline,
/// the widest the CPU has: the exponential is compute-bound, so wider vectors pay off
/// directly (one call covers a block).
macro_rules! widest {
    ($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)? = $body:ident;) => {
        $(#[$doc])*
        fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
                fn avx512($($arg: $ty),*) $(-> $ret)? {
                    $body::<true>($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                fn avx2($($arg: $ty),*) $(-> $ret)? {
                    $body::<true>($($arg),*)
                }
                if super::simd::has_avx512() {
                    // SAFETY: `avx512` needs AVX-512F/VL, AVX2 and FMA, which the CPU has.
                    return unsafe { avx512($($arg),*) };
                }
                if super::simd::has_avx2() {
                    // SAFETY: `avx2` needs AVX2 and FMA, which the CPU has.
                    return unsafe { avx2($($arg),*) };
                }
            }
            $body::<false>($($arg),*)
        }
    };
}

widest! {
    /// [`exp_shifted_max_body`] with the widest vectors the CPU has.
    fn exp_shifted_max(cur: &mut [f32], m: f32, next: &[f32]) -> (f32, f32) = exp_shifted_max_body;
}

widest! {
    /// [`exp_into_max_body`] with the widest vectors the CPU has.
    fn exp_into_max(cur: &[f32], m: f32, out: &mut [f32], next: &[f32]) -> (f32, f32) = exp_into_max_body;
}

widest! {
    /// [`scale_body`] with the widest vectors the CPU has.
    fn scale(x: &mut [f32], factor: f32) = scale_body;
}

widest! {
    /// [`exp_sum_max_body`] with the widest vectors the CPU has.
    fn exp_sum_max(cur: &[f32], m: f32, next: &[f32]) -> (f32, f32) = exp_sum_max_body;
}

/// The running state of one row's `log(sum(exp(x)))`, block by block: the maximum so far,
/// the sum of exponentials relative to it, and the special values seen.
struct LseRow {
    m: f32,
    s: f64,
    nan: bool,
    pos_inf: bool,
}

impl LseRow {
    fn new() -> LseRow {
        LseRow {
            m: f32::NEG_INFINITY,
            s: 0.0,
            nan: false,
            pos_inf: false,
        }
    }

    /// Takes the next block's maximum `bm`; whether the block's exponentials still matter
    /// (relative to `self.m`, raised to `bm` if larger, the sum so far rescaled).
    fn admit(&mut self, bm: f32) -> bool {
        if bm.is_nan() {
            self.nan = true;
        } else if bm == f32::INFINITY {
            // The result is +∞ unless a NaN follows; the exponentials no longer matter.
            self.pos_inf = true;
        }
        if self.nan || self.pos_inf || bm == f32::NEG_INFINITY {
            return false;
        }
        if bm > self.m {
            self.s *= f64::from(self.m - bm).exp();
            self.m = bm;
        }
        true
    }

    /// The row's result: NaN, +∞, -∞ (every element -∞), or `m + log(s)`.
    fn finish(&self) -> f32 {
        if self.nan {
            f32::NAN
        } else if self.pos_inf {
            f32::INFINITY
        } else if self.m == f32::NEG_INFINITY {
            self.m
        } else {
            (f64::from(self.m) + self.s.ln()) as f32
        }
    }
}

/// The positions of block `k` of rows of `n` elements, counted through the rows in order
/// (each row's blocks are [`CHUNK`] long but its last).
fn block_range(n: usize, k: usize) -> std::ops::Range<usize> {
    let per_row = n.div_ceil(CHUNK);
    let start = (k / per_row) * n + (k % per_row) * CHUNK;
    start..start + (n - (k % per_row) * CHUNK).min(CHUNK)
}

/// Block `k` of rows of `n` elements (see [`block_range`]).
fn block_of(src: &[f32], n: usize, k: usize) -> &[f32] {
    &src[block_range(n, k)]
}

/// `out[i] = logsumexp(row i of src)` for rows of `n` elements (at least one), in one pass
/// over memory: the blocks of every row in turn, each one's maximum found while the
/// previous one's exponentials are summed.
fn lse_rows_f32(src: &[f32], n: usize, out: &mut [f32]) {
    let per_row = n.div_ceil(CHUNK);
    let total = out.len() * per_row;
    if total == 0 {
        return;
    }
    let mut next_max = max_run(block_of(src, n, 0));
    let mut row = LseRow::new();
    for k in 0..total {
        if k % per_row == 0 {
            row = LseRow::new();
        }
        let next = if k + 1 < total {
            block_of(src, n, k + 1)
        } else {
            &[]
        };
        next_max = if row.admit(next_max) {
            let (s, next_max) = exp_sum_max(block_of(src, n, k), row.m, next);
            row.s += f64::from(s);
            next_max
        } else {
            max_run(next)
        };
        if k % per_row == per_row - 1 {
            out[k / per_row] = row.finish();
        }
    }
}

/// Softmax of each row of `n` elements (at least one) of `src` into `out` (of `out` in
/// place when `src` is `None`), in one pass over memory: the blocks of every row in turn,
/// each one's maximum found while the previous one's exponentials are written. A block
/// holds exponentials relative to the running maximum when it was read (`marks`); the end
/// of the row brings every block to the row's maximum and divides by the sum.
fn softmax_rows_f32(src: Option<&[f32]>, out: &mut [f32], n: usize) {
    if n <= SHORT_ROW {
        return softmax_short_rows(src, out, n);
    }
    let per_row = n.div_ceil(CHUNK);
    let total = out.len() / n * per_row;
    if total == 0 {
        return;
    }
    let block = |k: usize| block_range(n, k);
    let mut next_max = max_run(&src.unwrap_or(out)[block(0)]);
    let (mut m, mut s, mut bad) = (f32::NEG_INFINITY, 0f64, false);
    let mut marks = Vec::with_capacity(per_row);
    for k in 0..total {
        if k % per_row == 0 {
            (m, s, bad) = (f32::NEG_INFINITY, 0.0, false);
            marks.clear();
        }
        let cur = block(k);
        let next = if k + 1 < total {
            block(k + 1)
        } else {
            cur.end..cur.end
        };
        let bm = next_max;
        // NaN, or ∞ - ∞: every value of the row is NaN (as exp(x - max(x)) gives).
        bad |= bm.is_nan() || bm == f32::INFINITY;
        if bad || bm == f32::NEG_INFINITY {
            if !bad {
                out[cur.clone()].fill(0.0);
            }
            next_max = max_run(&src.unwrap_or(out)[next]);
        } else {
            if bm > m {
                s *= f64::from(m - bm).exp();
                m = bm;
            }
            let (sum, nm) = match src {
                Some(x) => exp_into_max(&x[cur.clone()], m, &mut out[cur.clone()], &x[next]),
                None => {
                    let (head, tail) = out.split_at_mut(cur.end);
                    exp_shifted_max(&mut head[cur.start..], m, &tail[..next.len()])
                }
            };
            s += f64::from(sum);
            next_max = nm;
        }
        marks.push(m);
        if k % per_row == per_row - 1 {
            let row_start = (k / per_row) * n;
            let row = &mut out[row_start..row_start + n];
            if bad || m == f32::NEG_INFINITY {
                // A NaN or +∞ seen, or a row of -∞ only (-∞ + ∞).
                row.fill(f32::NAN);
                continue;
            }
            for (b, &mark) in row.chunks_mut(CHUNK).zip(marks.iter()) {
                let factor = if mark == f32::NEG_INFINITY {
                    0.0
                } else {
                    (f64::from(mark - m).exp() / s) as f32
                };
                scale(b, factor);
            }
        }
    }
}

/// The longest rows [`softmax_short_rows`] takes: rows of attention scores over a few
/// keys, where the blockwise kernel's bookkeeping per row cost more than the row.
const SHORT_ROW: usize = 64;

/// Softmax of rows of `n <= SHORT_ROW` elements (from `src`, or `out` in place): each row's
/// maximum, exponentials and sum in one go, in float32.
#[inline(always)]
fn softmax_short_rows_body<const FMA: bool>(src: Option<&[f32]>, out: &mut [f32], n: usize) {
    let mut e = [0f32; SHORT_ROW];
    for (r, row) in out.chunks_exact_mut(n).enumerate() {
        let x = match src {
            Some(src) => &src[r * n..(r + 1) * n],
            None => &*row,
        };
        let m = max_body(x);
        if m.is_nan() || m.is_infinite() {
            // A NaN, ∞ - ∞, or a row of -∞ only: NaN throughout, as exp(x - max(x)) gives.
            row.fill(f32::NAN);
            continue;
        }
        let mut total = 0f32;
        for (e, &v) in e.iter_mut().zip(x) {
            *e = exp_neg::<FMA>(v - m);
            total += *e;
        }
        let inv = 1.0 / total;
        for (o, &e) in row.iter_mut().zip(&e[..n]) {
            *o = e * inv;
        }
    }
}

widest! {
    /// [`softmax_short_rows_body`] with the widest vectors the CPU has.
    fn softmax_short_rows(src: Option<&[f32]>, out: &mut [f32], n: usize) = softmax_short_rows_body;
}

/// Work per element of the exponential kernels, against one add (for the parallel split).
const EXP_COST: usize = 4;

/// The row length (last axis) and the row-major elements of `x`.
fn rows_of<T: Element>(x: &ArrayData) -> Result<(usize, ArrayData)> {
    let n = x.layout.shape.last().copied().unwrap_or(1);
    let x = to_contiguous_shared(x);
    x.buffer.host()?.typed::<T>("softmax")?;
    Ok((n, x))
}

/// The contiguous elements of row-major data.
fn elements<T: Element>(x: &ArrayData) -> &[T] {
    x.contiguous_slice::<T>()
        .expect("the data was made row-major and typed")
}

/// `logsumexp` over the last axis of `x` (whose size is at least 1), shaped `shape`.
pub(super) fn logsumexp(x: &ArrayData, shape: &[usize]) -> Result<ArrayData> {
    let rows: usize = shape.iter().product();
    Ok(match x.dtype() {
        crate::DType::F32 => {
            let (n, x) = rows_of::<f32>(x)?;
            let src = elements::<f32>(&x);
            // Outputs come from the buffer cache (every row is written): a fresh vector would
            // return to the cache when dropped and never be taken back from it.
            let mut out = crate::array::pool::alloc::<f32>(rows);
            par_fill(&mut out, n * EXP_COST, 1, &|start, chunk| {
                lse_rows_f32(&src[start * n..(start + chunk.len()) * n], n, chunk)
            });
            ArrayData::from_vec(out, shape)
        }
        crate::DType::F64 => {
            let (n, x) = rows_of::<f64>(x)?;
            let src = elements::<f64>(&x);
            let mut out = crate::array::pool::alloc::<f64>(rows);
            par_fill(&mut out, n * EXP_COST, 1, &|start, chunk| {
                for (o, row) in chunk.iter_mut().zip(src[start * n..].chunks_exact(n)) {
                    *o = lse_row_f64(row);
                }
            });
            ArrayData::from_vec(out, shape)
        }
        crate::DType::F16 => lse_half::<f16>(x, shape)?,
        crate::DType::BF16 => lse_half::<bf16>(x, shape)?,
        dtype => {
            return Err(Error::UnsupportedDType {
                op: "logsumexp",
                dtype,
            });
        }
    })
}

/// `logsumexp` of one `float64` row.
fn lse_row_f64(x: &[f64]) -> f64 {
    let m = fold_run::<Max<f64, f64>>(x);
    if !m.is_finite() {
        return m;
    }
    m + x.iter().map(|&v| (v - m).exp()).sum::<f64>().ln()
}

/// `logsumexp` of half rows, computed in `float32`.
fn lse_half<H>(x: &ArrayData, shape: &[usize]) -> Result<ArrayData>
where
    H: Load<In = f32>,
    f32: To<H>,
{
    let (n, x) = rows_of::<H>(x)?;
    let src = elements::<H>(&x);
    let rows: usize = shape.iter().product();
    let mut out = crate::array::pool::alloc::<H>(rows);
    par_fill(&mut out, n * EXP_COST, 1, &|start, chunk| {
        let mut wide = vec![0f32; n * chunk.len()];
        H::load(&src[start * n..(start + chunk.len()) * n], &mut wide);
        let mut res = vec![0f32; chunk.len()];
        lse_rows_f32(&wide, n, &mut res);
        for (o, &v) in chunk.iter_mut().zip(&res) {
            *o = v.to();
        }
    });
    Ok(ArrayData::from_vec(out, shape))
}

/// A kernel over whole rows: from `src` into `out`, or over `out` in place when `src` is
/// `None`.
type RowKernel<'a, T> = dyn Fn(Option<&[T]>, &mut [T]) + Sync + 'a;

/// Runs `kernel(src, out)` over chunks of whole rows (of `n` elements): in place on `x`'s
/// own buffer when nobody else holds it (donation, `src` is `None`), else from a row-major
/// view of `x` into a new buffer.
fn rows_into<T: Element>(x: &mut ArrayData, n: usize, kernel: &RowKernel<'_, T>) -> ArrayData {
    let shape = x.layout.shape.clone();
    if let Some(buf) = donated::<T>(x) {
        par_fill(buf, EXP_COST, n, &|_, rows| kernel(None, rows));
        return x.view(Layout::contiguous(&shape));
    }
    let x = to_contiguous_shared(x);
    let src = elements::<T>(&x);
    // Every element is written: the buffer may come from the cache uncleared.
    let mut out = crate::array::pool::alloc::<T>(src.len());
    par_fill(&mut out, EXP_COST, n, &|start, rows| {
        kernel(Some(&src[start..start + rows.len()]), rows)
    });
    ArrayData::from_vec(out, &shape)
}

/// Softmax over the last axis of `inputs[0]`, written over it when it can be donated.
pub(super) fn softmax(inputs: &mut [ArrayData]) -> Result<ArrayData> {
    let x = &mut inputs[0];
    let n = x.layout.shape.last().copied().unwrap_or(1);
    if x.layout.size() == 0 {
        return Ok(x.clone());
    }
    Ok(match x.dtype() {
        crate::DType::F32 => rows_into::<f32>(x, n, &|src, out| softmax_rows_f32(src, out, n)),
        crate::DType::F64 => rows_into::<f64>(x, n, &|src, out| {
            if let Some(src) = src {
                out.copy_from_slice(src);
            }
            for row in out.chunks_exact_mut(n) {
                softmax_row_f64(row);
            }
        }),
        crate::DType::F16 => rows_into::<f16>(x, n, &|src, out| softmax_half_rows(src, out, n)),
        crate::DType::BF16 => rows_into::<bf16>(x, n, &|src, out| softmax_half_rows(src, out, n)),
        dtype => {
            return Err(Error::UnsupportedDType {
                op: "softmax",
                dtype,
            });
        }
    })
}

/// Softmax of one `float64` row, in place.
fn softmax_row_f64(row: &mut [f64]) {
    let m = fold_run::<Max<f64, f64>>(row);
    if !m.is_finite() {
        row.fill(f64::NAN);
        return;
    }
    let mut total = 0.0;
    for v in row.iter_mut() {
        *v = (*v - m).exp();
        total += *v;
    }
    for v in row.iter_mut() {
        *v /= total;
    }
}

/// Softmax of half rows (from `src`, or `out` in place), computed in `float32` (MLX's
/// precise softmax).
fn softmax_half_rows<H>(src: Option<&[H]>, out: &mut [H], n: usize)
where
    H: Load<In = f32>,
    [H]: HalfFloatSliceExt,
{
    let mut wide = vec![0f32; out.len()];
    H::load(src.unwrap_or(out), &mut wide);
    softmax_rows_f32(None, &mut wide, n);
    out.convert_from_f32_slice(&wide);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_neg_is_accurate_to_an_ulp_or_two() {
        let mut worst = 0f64;
        let mut x = 0f32;
        while x > EXP_LOW {
            for got in [exp_neg::<false>(x), exp_neg::<true>(x)] {
                let want = f64::from(x).exp();
                worst = worst.max(((f64::from(got) - want) / want).abs());
            }
            x -= 0.000_37;
        }
        assert!(worst < 2.4e-7, "worst relative error {worst:e}");
        assert_eq!(exp_neg::<false>(0.0), 1.0);
        assert_eq!(exp_neg::<false>(-100.0), 0.0);
        assert_eq!(exp_neg::<false>(f32::NEG_INFINITY), 0.0);
        assert!(exp_neg::<false>(f32::NAN).is_nan());
    }
}
