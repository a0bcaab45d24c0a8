//! The quantized product `x · wᵀ` (or `x · w`) on the CPU.
//!
//! The output is cut into bands of columns (rows of `w` when it is transposed), one task per
//! band and batch entry, spread over the rayon pool. A few rows of `x` (decoding: one) take
//! the vector path: each group of `w` is unpacked once into registers-sized scratch and dotted
//! with every row of `x`, the bias entering through the group's sum of `x`; nothing but the
//! packed words streams from memory. More rows take the matrix path: the band of `w` is
//! dequantized into a panel of floats, a slice of the inner axis at a time, and multiplied by
//! `gemm`. Both compute in `f32` (`f64` for `f64`) and write the band's outputs transposed,
//! so that each task owns a contiguous piece; one pass at the end lays them out row-major in
//! the output type.

use std::borrow::Cow;

use gemm::Parallelism;
use rayon::prelude::*;

use super::{Compute, unpack, with_bits};
use crate::Result;
use crate::array::{ArrayData, collapse, for_each_strided, gather_row_major, pool};
use crate::backend::cpu::elementwise::fill;
use crate::backend::cpu::math::{AccFloat, FloatElem};
use crate::dtype::Element;

const OP: &str = "quantized_matmul";
/// Rows of `x` up to which the vector path is taken.
const VECTOR_ROWS: usize = 6;
/// Multiply-adds below which the product stays on the calling thread.
const PARALLEL_WORK: usize = 1 << 18;
/// The most floats of a dequantized panel (256 KiB of `f32`, so it stays in L2).
const PANEL: usize = 1 << 16;

/// The matrices of a `[..., rows, cols]` input: where each starts and how far apart its rows
/// are, over elements whose rows are contiguous (copied into a new buffer where not).
struct Matrices<'a, E: Clone> {
    data: Cow<'a, [E]>,
    starts: Vec<usize>,
    row_stride: isize,
}

impl<'a, E: Element> Matrices<'a, E> {
    /// The matrices of `data` read in place (a strided batch included) when each row's
    /// elements are adjacent.
    fn new(data: &'a ArrayData) -> Result<Matrices<'a, E>> {
        let layout = &data.layout;
        let nd = layout.shape.len();
        let src = data.buffer.host().typed::<E>(OP)?;
        if layout.strides[nd - 1] != 1 && layout.shape[nd - 1] > 1 {
            let rows = gather_row_major(src, layout);
            return Ok(Matrices::row_major(Cow::Owned(rows), &layout.shape));
        }
        let batch = &layout.shape[..nd - 2];
        let count: usize = batch.iter().product();
        let (shape, strides) = collapse(batch, &[&layout.strides[..nd - 2]]);
        let mut starts = Vec::with_capacity(count);
        for_each_strided(&shape, [&strides[0]], [layout.offset], 0, count, |[p]| {
            starts.push(p)
        });
        Ok(Matrices {
            data: Cow::Borrowed(src),
            starts,
            row_stride: layout.strides[nd - 2],
        })
    }

    /// Row-major matrices of `shape` in `data`.
    fn row_major(data: Cow<'a, [E]>, shape: &[usize]) -> Matrices<'a, E> {
        let nd = shape.len();
        let (rows, cols) = (shape[nd - 2], shape[nd - 1]);
        let count: usize = shape[..nd - 2].iter().product();
        Matrices {
            data,
            starts: (0..count).map(|b| b * rows * cols).collect(),
            row_stride: cols as isize,
        }
    }

    /// The first `len` elements of row `r` of matrix `b`.
    #[inline(always)]
    fn row(&self, b: usize, r: usize, len: usize) -> &[E] {
        let at = (self.starts[b] as isize + r as isize * self.row_stride) as usize;
        &self.data[at..at + len]
    }
}

/// Scales or biases in the compute type `C`: read in place when they are of that type,
/// converted into a new row-major buffer otherwise.
fn in_compute<'a, T: FloatElem<Acc = C>, C: Compute + Element>(
    data: &'a ArrayData,
) -> Result<Matrices<'a, C>> {
    if data.dtype() == C::DTYPE {
        return Matrices::new(data);
    }
    let values: Vec<C> = data.to_vec::<T>(OP)?.into_iter().map(T::up).collect();
    Ok(Matrices::row_major(Cow::Owned(values), &data.layout.shape))
}

/// One quantized product, its operands ready in the compute type `C`.
struct Problem<'a, C: Compute + Element> {
    /// `[batch, m, k]`, row-major.
    x: Vec<C>,
    w: Matrices<'a, u32>,
    scales: Matrices<'a, C>,
    biases: Matrices<'a, C>,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
    group_size: usize,
    transpose: bool,
}

impl<C: Compute + Element> Problem<'_, C> {
    /// Row `i` of `x` in matrix `b`.
    #[inline(always)]
    fn x_row(&self, b: usize, i: usize) -> &[C] {
        let at = (b * self.m + i) * self.k;
        &self.x[at..at + self.k]
    }

    /// Words of `bits` bits that `values` values take.
    #[inline(always)]
    fn words(values: usize, bits: usize) -> usize {
        values * bits / 32
    }
}

/// Computes the product for an output of `shape` (`[..., m, n]`, or `[..., n]` for a 2-D `w`).
pub(super) fn eval<T: FloatElem>(
    inputs: &[ArrayData],
    group_size: usize,
    bits: usize,
    transpose: bool,
    shape: &[usize],
) -> Result<ArrayData>
where
    T::Acc: Compute + Element,
{
    let (x, w) = (&inputs[0], &inputs[1]);
    let nd = w.layout.shape.len();
    let unpacked = w.layout.shape[nd - 1] * 32 / bits;
    let rows = w.layout.shape[nd - 2];
    let (k, n) = if transpose {
        (unpacked, rows)
    } else {
        (rows, unpacked)
    };
    let batch: usize = w.layout.shape[..nd - 2].iter().product();
    let size: usize = shape.iter().product();
    let mut out = pool::alloc::<T>(size);
    if size == 0 || k == 0 {
        // Empty, or sums of nothing.
        out.fill(T::down(T::Acc::c(0.0)));
        return Ok(ArrayData::from_vec(out, shape));
    }
    let m = size / (batch * n);
    let xs: Vec<T::Acc> = match x.contiguous_slice::<T>() {
        Some(s) => s.iter().map(|&v| v.up()).collect(),
        None => x.to_vec::<T>(OP)?.into_iter().map(T::up).collect(),
    };
    let p = Problem {
        x: xs,
        w: Matrices::new(w)?,
        scales: in_compute::<T, T::Acc>(&inputs[2])?,
        biases: in_compute::<T, T::Acc>(&inputs[3])?,
        batch,
        m,
        n,
        k,
        group_size,
        transpose,
    };
    let transposed = with_bits!(bits, B => run::<T::Acc, B>(&p));
    // Lay the `[batch, n, m]` result out as `[batch, m, n]`.
    if m == 1 {
        fill(&mut out, &|s, chunk| {
            for (o, &v) in chunk.iter_mut().zip(&transposed[s..]) {
                *o = T::down(v);
            }
        });
    } else {
        let row = |r: usize, o: &mut [T]| {
            let (b, i) = (r / m, r % m);
            let block = &transposed[b * n * m..(b + 1) * n * m];
            for (j, o) in o.iter_mut().enumerate() {
                *o = T::down(block[j * m + i]);
            }
        };
        if size >= PARALLEL_WORK {
            out.par_chunks_mut(n)
                .enumerate()
                .for_each(|(r, o)| row(r, o));
        } else {
            out.chunks_mut(n).enumerate().for_each(|(r, o)| row(r, o));
        }
    }
    pool::release(<T::Acc as Element>::into_host(transposed));
    Ok(ArrayData::from_vec(out, shape))
}

/// The product as `[batch, n, m]` (each output column's `m` values together).
fn run<C: Compute + Element, const B: usize>(p: &Problem<'_, C>) -> Vec<C> {
    let (m, n) = (p.m, p.n);
    let mut out = pool::alloc::<C>(p.batch * n * m);
    let threads = rayon::current_num_threads();
    let parallel = threads > 1 && p.batch * m * n * p.k >= PARALLEL_WORK;
    let vector = m <= VECTOR_ROWS;
    // Bands: a multiple of the group size when they cut packed rows (so that they start on a
    // word), enough of them to keep every thread busy, and wide enough for gemm.
    let align = if p.transpose { 8 } else { p.group_size };
    let widest = if vector { 64 } else { 128 }.max(align);
    let wanted = n.div_ceil(8 * threads).next_multiple_of(align);
    let band = wanted.clamp(align, widest);
    let task = |b: usize, n0: usize, chunk: &mut [C]| {
        let cols = chunk.len() / m;
        match (vector, p.transpose) {
            (true, true) => vector_t::<C, B>(p, b, n0, cols, chunk),
            (true, false) => vector_n::<C, B>(p, b, n0, cols, chunk),
            (false, _) => panel::<C, B>(p, b, n0, cols, chunk),
        }
    };
    for_bands(&mut out, n * m, band * m, parallel, &|b, j, chunk| {
        task(b, j * band, chunk)
    });
    out
}

/// Runs `f(batch, band, chunk)` over each batch entry's output (`per_batch` values) cut into
/// chunks of `per_band` values, over the pool when `parallel`.
fn for_bands<C: Send>(
    out: &mut [C],
    per_batch: usize,
    per_band: usize,
    parallel: bool,
    f: &(dyn Fn(usize, usize, &mut [C]) + Sync),
) {
    if parallel {
        out.par_chunks_mut(per_batch)
            .enumerate()
            .for_each(|(b, o)| {
                o.par_chunks_mut(per_band)
                    .enumerate()
                    .for_each(|(j, c)| f(b, j, c))
            });
    } else {
        for (b, o) in out.chunks_mut(per_batch).enumerate() {
            for (j, c) in o.chunks_mut(per_band).enumerate() {
                f(b, j, c);
            }
        }
    }
}

/// `Σ a[i] · b[i]` over lengths that are multiples of 16, in 16 independent sums (so that the
/// loop vectorises), with fused multiply-adds when `FMA`.
#[inline(always)]
fn dot<C: Compute, const FMA: bool>(a: &[C], b: &[C]) -> C {
    let zero = C::c(0.0);
    let mut acc = [zero; 16];
    for (ca, cb) in a.chunks_exact(16).zip(b.chunks_exact(16)) {
        for l in 0..16 {
            acc[l] = if FMA {
                ca[l].mul_add(cb[l], acc[l])
            } else {
                ca[l] * cb[l] + acc[l]
            };
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

/// Whether the CPU has AVX2 and FMA (the standard library caches the answer).
#[inline]
fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The vector path with `w` transposed (`[n, k]` packed along `k`): output column `j` of the
/// band is `Σ_g s_g · ⟨q_g, x_g⟩ + b_g · Σ x_g` over the groups `g` of row `n0 + j` of `w`.
fn vector_t<C: Compute + Element, const B: usize>(
    p: &Problem<'_, C>,
    b: usize,
    n0: usize,
    cols: usize,
    out: &mut [C],
) {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        #[target_feature(enable = "avx2,fma")]
        fn wide<C: Compute + Element, const B: usize>(
            p: &Problem<'_, C>,
            b: usize,
            n0: usize,
            cols: usize,
            out: &mut [C],
        ) {
            vector_t_body::<C, B, true>(p, b, n0, cols, out)
        }
        // SAFETY: `wide` needs AVX2 and FMA, which the CPU has (checked above).
        unsafe { wide::<C, B>(p, b, n0, cols, out) };
        return;
    }
    vector_t_body::<C, B, false>(p, b, n0, cols, out)
}

#[inline(always)]
fn vector_t_body<C: Compute + Element, const B: usize, const FMA: bool>(
    p: &Problem<'_, C>,
    b: usize,
    n0: usize,
    cols: usize,
    out: &mut [C],
) {
    let (m, k, gs) = (p.m, p.k, p.group_size);
    let groups = k / gs;
    let words = Problem::<C>::words(gs, B);
    // Each row of `x`'s sum over each group (what the biases multiply).
    let mut sums = vec![C::c(0.0); m * groups];
    for i in 0..m {
        let x = p.x_row(b, i);
        for (s, xg) in sums[i * groups..].iter_mut().zip(x.chunks_exact(gs)) {
            *s = xg.iter().fold(C::c(0.0), |a, &v| a + v);
        }
    }
    let mut q = [C::c(0.0); 128];
    let q = &mut q[..gs];
    for (j, o) in out.chunks_exact_mut(m).enumerate().take(cols) {
        let row = n0 + j;
        let w = p.w.row(b, row, Problem::<C>::words(k, B));
        let scales = p.scales.row(b, row, groups);
        let biases = p.biases.row(b, row, groups);
        o.fill(C::c(0.0));
        for g in 0..groups {
            unpack::<B, C>(&w[g * words..(g + 1) * words], q);
            for (i, o) in o.iter_mut().enumerate() {
                let xg = &p.x_row(b, i)[g * gs..(g + 1) * gs];
                let d = dot::<C, FMA>(q, xg);
                *o = *o + scales[g] * d + biases[g] * sums[i * groups + g];
            }
        }
    }
}

/// The vector path with `w` as is (`[k, n]` packed along `n`): each row `r` of `w` adds
/// `x[i, r] · (s · q + b)` to the band's accumulators, group by group.
fn vector_n<C: Compute + Element, const B: usize>(
    p: &Problem<'_, C>,
    b: usize,
    n0: usize,
    cols: usize,
    out: &mut [C],
) {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        #[target_feature(enable = "avx2,fma")]
        fn wide<C: Compute + Element, const B: usize>(
            p: &Problem<'_, C>,
            b: usize,
            n0: usize,
            cols: usize,
            out: &mut [C],
        ) {
            vector_n_body::<C, B, true>(p, b, n0, cols, out)
        }
        // SAFETY: `wide` needs AVX2 and FMA, which the CPU has (checked above).
        unsafe { wide::<C, B>(p, b, n0, cols, out) };
        return;
    }
    vector_n_body::<C, B, false>(p, b, n0, cols, out)
}

#[inline(always)]
fn vector_n_body<C: Compute + Element, const B: usize, const FMA: bool>(
    p: &Problem<'_, C>,
    b: usize,
    n0: usize,
    cols: usize,
    out: &mut [C],
) {
    let (m, k, gs) = (p.m, p.k, p.group_size);
    let zero = C::c(0.0);
    let (g0, groups) = (n0 / gs, cols / gs);
    let first_word = Problem::<C>::words(n0, B);
    let words = Problem::<C>::words(cols, B);
    // `acc[i · cols + j]`: row `i` of `x`, column `n0 + j`.
    let mut acc = vec![zero; m * cols];
    let mut q = vec![zero; cols];
    for r in 0..k {
        let w = p.w.row(b, r, first_word + words);
        unpack::<B, C>(&w[first_word..], &mut q);
        let scales = &p.scales.row(b, r, g0 + groups)[g0..];
        let biases = &p.biases.row(b, r, g0 + groups)[g0..];
        for i in 0..m {
            let xv = p.x_row(b, i)[r];
            let acc = &mut acc[i * cols..(i + 1) * cols];
            for ((a, qg), (&s, &bias)) in acc
                .chunks_exact_mut(gs)
                .zip(q.chunks_exact(gs))
                .zip(scales.iter().zip(biases))
            {
                let (xs, xb) = (xv * s, xv * bias);
                for (a, &q) in a.iter_mut().zip(qg) {
                    *a = if FMA {
                        q.mul_add(xs, *a + xb)
                    } else {
                        q * xs + xb + *a
                    };
                }
            }
        }
    }
    for (j, o) in out.chunks_exact_mut(m).enumerate() {
        for (i, o) in o.iter_mut().enumerate() {
            *o = acc[i * cols + j];
        }
    }
}

/// The matrix path: the band of `w` dequantized a slice of the inner axis at a time into a
/// panel, multiplied into the band's outputs by `gemm` (on this thread: the bands are the
/// parallelism).
fn panel<C: Compute + Element, const B: usize>(
    p: &Problem<'_, C>,
    b: usize,
    n0: usize,
    cols: usize,
    out: &mut [C],
) {
    let (m, k, gs) = (p.m, p.k, p.group_size);
    let zero = C::c(0.0);
    // A slice of the inner axis: whole groups when they lie along it.
    let depth = (PANEL / cols).max(gs) / gs * gs;
    let mut panel = pool::alloc::<C>(cols * depth.min(k));
    let mut q = vec![zero; if p.transpose { gs } else { cols }];
    let mut k0 = 0;
    while k0 < k {
        let kc = depth.min(k - k0);
        if p.transpose {
            // panel[j · kc + t] = w[n0 + j, k0 + t].
            let (g0, groups) = (k0 / gs, kc / gs);
            let words = Problem::<C>::words(gs, B);
            for (j, line) in panel.chunks_exact_mut(kc).enumerate().take(cols) {
                let row = n0 + j;
                let w = p.w.row(b, row, Problem::<C>::words(k0 + kc, B));
                let scales = &p.scales.row(b, row, g0 + groups)[g0..];
                let biases = &p.biases.row(b, row, g0 + groups)[g0..];
                for (g, part) in line.chunks_exact_mut(gs).enumerate() {
                    let at = (g0 + g) * words;
                    unpack::<B, C>(&w[at..at + words], part);
                    let (s, bias) = (scales[g], biases[g]);
                    for v in part.iter_mut() {
                        *v = *v * s + bias;
                    }
                }
            }
        } else {
            // panel[t · cols + j] = w[k0 + t, n0 + j].
            let (g0, groups) = (n0 / gs, cols / gs);
            let first_word = Problem::<C>::words(n0, B);
            let words = Problem::<C>::words(cols, B);
            for (t, line) in panel.chunks_exact_mut(cols).enumerate().take(kc) {
                let r = k0 + t;
                let w = p.w.row(b, r, first_word + words);
                unpack::<B, C>(&w[first_word..], &mut q);
                let scales = &p.scales.row(b, r, g0 + groups)[g0..];
                let biases = &p.biases.row(b, r, g0 + groups)[g0..];
                for ((part, qg), (&s, &bias)) in line
                    .chunks_exact_mut(gs)
                    .zip(q.chunks_exact(gs))
                    .zip(scales.iter().zip(biases))
                {
                    for (v, &qv) in part.iter_mut().zip(qg) {
                        *v = qv * s + bias;
                    }
                }
            }
        }
        let (rhs_cs, rhs_rs) = if p.transpose {
            (kc as isize, 1)
        } else {
            (1, cols as isize)
        };
        let lhs = &p.x[b * m * k + k0..];
        // SAFETY: `out` is this band's `[cols, m]` block, written as the `m × cols` matrix
        // with column stride `m` and row stride 1, all inside it; `lhs` is `x[b]` from
        // column `k0`, read as `m × kc` with row stride `k` (within `x[b]`, which has `m`
        // rows of `k`); the panel holds `cols · kc` values read with the strides set above.
        unsafe {
            gemm::gemm(
                m,
                cols,
                kc,
                out.as_mut_ptr(),
                m as isize,
                1,
                k0 > 0,
                lhs.as_ptr(),
                1,
                k as isize,
                panel.as_ptr(),
                rhs_cs,
                rhs_rs,
                C::c(1.0),
                C::c(1.0),
                false,
                false,
                false,
                Parallelism::None,
            );
        }
        k0 += kc;
    }
    pool::release(C::into_host(panel));
}
