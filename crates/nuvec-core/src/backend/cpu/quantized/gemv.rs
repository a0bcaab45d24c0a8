//! The vector path of the product with a transposed `w` (`[n, k]`, packed along `k`): a few
//! rows of `x` (decoding: one) against every row of `w`, which streams from memory once.
//!
//! Output `j` of a row of `x` is `Σ_g s_g · ⟨q_g, x_g⟩ + b_g · Σ x_g` over the groups `g` of row
//! `j` of `w`: the biases meet precomputed group sums of `x`, and only the integers `q` are
//! unpacked. In `f32`, [`LANES`] consecutive units of words (a unit: one word with 2, 4 or 8
//! bits, the `bits` words holding 32 values otherwise) are unpacked side by side, one unit per
//! vector lane: the `i`-th value of every unit comes out with the same shifts and mask in all
//! lanes, and meets `x` rearranged once per call so that those values' partners are adjacent
//! too. That keeps the loop at a handful of vector instructions per eight values. `f64`
//! unpacks each group into scratch and takes a dot product.

use super::matmul::Problem;
use super::{Compute, unpack_dyn, with_bits};
use crate::dtype::Element;

/// Words unpacked side by side by the lane kernel (a 256-bit vector of `u32`).
const LANES: usize = 8;

/// The compute types' vector paths.
pub(super) trait Gemv: Compute + Element {
    /// Each row of `x` (per batch entry) as the kernel reads it, followed by its sums over
    /// each group: `[batch, m, k + k / group_size]`.
    fn prepare(p: &Problem<'_, Self>, bits: usize) -> Vec<Self> {
        prepare_rows(p, bits, false)
    }

    /// The outputs `[cols, m]` of rows `n0..n0 + cols` of `w` in batch entry `b`.
    fn rows(
        p: &Problem<'_, Self>,
        prep: &[Self],
        bits: usize,
        b: usize,
        n0: usize,
        out: &mut [Self],
    ) {
        scratch_rows(p, prep, bits, b, n0, out)
    }
}

/// `f64` takes the general kernel (it is the type of derivative checks, not of speed).
impl Gemv for f64 {}

impl Gemv for f32 {
    fn prepare(p: &Problem<'_, f32>, bits: usize) -> Vec<f32> {
        prepare_rows(p, bits, true)
    }

    fn rows(p: &Problem<'_, f32>, prep: &[f32], bits: usize, b: usize, n0: usize, out: &mut [f32]) {
        with_bits!(bits, B => with_fma!(lane_rows::<B>(p, prep, b, n0, out)))
    }
}

/// The words and values of a unit of `bits`-bit values: one word, or the `bits` words that 32
/// values fill when values straddle words.
const fn unit(bits: usize) -> (usize, usize) {
    if 32 % bits == 0 {
        (1, 32 / bits)
    } else {
        (bits, 32)
    }
}

/// Runs `$f::<..., FMA>(args)` compiled for AVX2 with fused multiply-adds where the CPU has
/// them (the standard library caches the check), for the baseline otherwise.
macro_rules! with_fma {
    ($f:ident::<$($g:tt),*>($($arg:expr),*)) => {{
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                // SAFETY: the CPU has AVX2 and FMA (checked above), all `wide` needs.
                unsafe { wide::$f::<$($g),*>($($arg),*) };
                return;
            }
        }
        $f::<$($g),*, false>($($arg),*)
    }};
}
use with_fma;

/// The kernels compiled with AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
mod wide {
    use super::Problem;

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn lane_rows<const B: usize>(
        p: &Problem<'_, f32>,
        prep: &[f32],
        b: usize,
        n0: usize,
        out: &mut [f32],
    ) {
        super::lane_rows::<B, true>(p, prep, b, n0, out)
    }
}

/// `a · b + c`, fused when `FMA`.
#[inline(always)]
fn madd<C: Compute, const FMA: bool>(a: C, b: C, c: C) -> C {
    if FMA { a.mul_add(b, c) } else { a * b + c }
}

/// The rows of `x` with their group sums (see [`Gemv::prepare`]); with `lanes`, each run of
/// [`LANES`] units' values rearranged so that value `i` of the run's units are adjacent:
/// `x[(t · LANES + l) · per + i]` moves to `(t · per + i) · LANES + l` (`per` values per
/// unit). Values after the last whole run stay in order.
fn prepare_rows<C: Compute + Element>(p: &Problem<'_, C>, bits: usize, lanes: bool) -> Vec<C> {
    let (k, gs) = (p.k, p.group_size);
    let width = k + k / gs;
    let mut prep = vec![C::c(0.0); p.batch * p.m * width];
    for (r, line) in prep.chunks_exact_mut(width).enumerate() {
        let x = p.x_row(r / p.m, r % p.m);
        let (xs, sums) = line.split_at_mut(k);
        for (s, g) in sums.iter_mut().zip(x.chunks_exact(gs)) {
            *s = g.iter().fold(C::c(0.0), |a, &v| a + v);
        }
        if !lanes {
            xs.copy_from_slice(x);
            continue;
        }
        let per = unit(bits).1;
        let run = LANES * per;
        let whole = k / run * run;
        for (dst, src) in xs[..whole].chunks_exact_mut(run).zip(x.chunks_exact(run)) {
            for l in 0..LANES {
                for i in 0..per {
                    dst[i * LANES + l] = src[l * per + i];
                }
            }
        }
        xs[whole..].copy_from_slice(&x[whole..]);
    }
    prep
}

/// Value `i` (of `B` bits) of a row of packed words.
#[inline(always)]
fn value_at<const B: usize>(w: &[u32], i: usize) -> u32 {
    let (at, off) = (i * B / 32, i * B % 32);
    let mut q = w[at] >> off;
    if off + B > 32 {
        q |= w[at + 1] << (32 - off);
    }
    q & ((1u32 << B) - 1)
}

/// The lane kernel (`f32`): see the module's description.
#[inline(always)]
fn lane_rows<const B: usize, const FMA: bool>(
    p: &Problem<'_, f32>,
    prep: &[f32],
    b: usize,
    n0: usize,
    out: &mut [f32],
) {
    let (m, k, gs) = (p.m, p.k, p.group_size);
    let (unit_words, per) = unit(B);
    let mask = (1u32 << B) - 1;
    let groups = k / gs;
    let group_units = gs / per;
    let row_words = k * B / 32;
    let units = k / per;
    let runs = units / LANES;
    let width = k + groups;
    for (j, o) in out.chunks_exact_mut(m).enumerate() {
        let row = n0 + j;
        let w = p.w.row(b, row, row_words);
        let scales = p.scales.row(b, row, groups);
        let biases = p.biases.row(b, row, groups);
        for (i, o) in o.iter_mut().enumerate() {
            let line = &prep[(b * m + i) * width..(b * m + i + 1) * width];
            let (xs, sums) = line.split_at(k);
            let mut total = [0.0f32; LANES];
            for t in 0..runs {
                let block = &w[t * LANES * unit_words..(t + 1) * LANES * unit_words];
                let xr = &xs[t * LANES * per..(t + 1) * LANES * per];
                let mut d = [0.0f32; LANES];
                let lane_x = |v: usize| -> &[f32; LANES] {
                    xr[v * LANES..(v + 1) * LANES]
                        .try_into()
                        .expect("LANES values")
                };
                if unit_words == 1 {
                    let words: &[u32; LANES] = block.try_into().expect("a run of LANES words");
                    for v in 0..per {
                        let xv = lane_x(v);
                        for l in 0..LANES {
                            let q = f32::small((words[l] >> (B * v)) & mask);
                            d[l] = madd::<f32, FMA>(q, xv[l], d[l]);
                        }
                    }
                } else {
                    // Word `a` of every lane's unit side by side, and a row of zeros for the
                    // word after the last.
                    let mut words = [[0u32; LANES]; 7];
                    for (l, unit) in block.chunks_exact(unit_words).enumerate() {
                        for (a, &word) in unit.iter().enumerate() {
                            words[a][l] = word;
                        }
                    }
                    for v in 0..per {
                        let (at, off) = (v * B / 32, v * B % 32);
                        let (lo, hi) = (&words[at], &words[at + 1]);
                        // The next word's bits land above the mask unless the value straddles
                        // the two (the shift is split so that neither half reaches 32).
                        let (right, left) = (off as u32, (31 - off) as u32);
                        let xv = lane_x(v);
                        for l in 0..LANES {
                            let q = (lo[l] >> right) | ((hi[l] << left) << 1);
                            d[l] = madd::<f32, FMA>(f32::small(q & mask), xv[l], d[l]);
                        }
                    }
                }
                // Each lane's unit lies in one group: scale the lane's partial sum by it. (The
                // scales are gathered into an array first: indexing them inside the lane loop
                // kept the compiler from vectorising any of it.)
                let first = t * LANES;
                let lane_scales: [f32; LANES] = if group_units >= LANES {
                    [scales[first / group_units]; LANES]
                } else {
                    std::array::from_fn(|l| scales[(first + l) / group_units])
                };
                for l in 0..LANES {
                    total[l] = madd::<f32, FMA>(lane_scales[l], d[l], total[l]);
                }
            }
            let mut acc = total.iter().sum::<f32>();
            // Values after the last whole run, in order.
            for u in runs * LANES..units {
                let mut d = 0.0f32;
                for (v, &xv) in xs.iter().enumerate().take((u + 1) * per).skip(u * per) {
                    let q = f32::small(value_at::<B>(w, v));
                    d = madd::<f32, FMA>(q, xv, d);
                }
                acc = madd::<f32, FMA>(scales[u / group_units], d, acc);
            }
            for (&bias, &s) in biases.iter().zip(sums) {
                acc = madd::<f32, FMA>(bias, s, acc);
            }
            *o = acc;
        }
    }
}

/// `Σ a[i] · b[i]` over lengths that are multiples of 16, in 16 independent sums (so that the
/// loop vectorises).
#[inline(always)]
fn dot<C: Compute>(a: &[C], b: &[C]) -> C {
    let mut acc = [C::c(0.0); 16];
    for (ca, cb) in a.chunks_exact(16).zip(b.chunks_exact(16)) {
        for l in 0..16 {
            acc[l] = ca[l] * cb[l] + acc[l];
        }
    }
    let mut width = 16;
    while width > 1 {
        width /= 2;
        for l in 0..width {
            acc[l] = acc[l] + acc[l + width];
        }
    }
    acc[0]
}

/// The general kernel: each group unpacked into scratch, then dotted with every row of `x`.
fn scratch_rows<C: Gemv>(
    p: &Problem<'_, C>,
    prep: &[C],
    bits: usize,
    b: usize,
    n0: usize,
    out: &mut [C],
) {
    let (m, k, gs) = (p.m, p.k, p.group_size);
    let groups = k / gs;
    let words = gs * bits / 32;
    let width = k + groups;
    let mut q = [C::c(0.0); 128];
    let q = &mut q[..gs];
    for (j, o) in out.chunks_exact_mut(m).enumerate() {
        let row = n0 + j;
        let w = p.w.row(b, row, k * bits / 32);
        let scales = p.scales.row(b, row, groups);
        let biases = p.biases.row(b, row, groups);
        o.fill(C::c(0.0));
        for g in 0..groups {
            unpack_dyn(bits, &w[g * words..(g + 1) * words], q);
            for (i, o) in o.iter_mut().enumerate() {
                let line = &prep[(b * m + i) * width..(b * m + i + 1) * width];
                let d = dot(q, &line[g * gs..(g + 1) * gs]);
                *o = *o + scales[g] * d + biases[g] * line[k + g];
            }
        }
    }
}
