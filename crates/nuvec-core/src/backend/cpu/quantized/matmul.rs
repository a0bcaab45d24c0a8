//! The quantized product `x · wᵀ` (or `x · w`) on the CPU.
//!
//! The output is cut into tasks (a batch entry, a block of rows of `x`, a band of columns),
//! spread over the rayon pool; each task owns its pieces of the output rows, so tasks never
//! share memory. A few rows of `x` (decoding: one) take the vector path (see `gemv` for the
//! transposed weight; the other orientation adds `x[i, r] · (s · q + b)` row by row of `w`):
//! the packed words stream from memory once and are never stored as floats. More rows take
//! the matrix path: the band of `w` is dequantized into a panel of floats, a slice of the inner
//! axis at a time, and multiplied by `gemm`. Both compute in `f32` (`f64` for `f64`) and
//! round once into the output.

use std::borrow::Cow;

use gemm::Parallelism;
use rayon::prelude::*;

use super::gemv::Gemv;
use super::{Compute, unpack_dyn};
use crate::Result;
use crate::array::{ArrayData, collapse, for_each_strided, gather_row_major, pool};
use crate::backend::cpu::math::{AccFloat, FloatElem};
use crate::dtype::Element;

const OP: &str = "quantized_matmul";
/// Rows of `x` up to which the vector path is taken.
const VECTOR_ROWS: usize = 6;
/// Multiply-adds below which the product stays on the calling thread.
const PARALLEL_WORK: usize = 1 << 18;
/// The most floats of a dequantized panel (256 KiB of `f32`, so it stays in L2).
const PANEL: usize = 1 << 16;
/// The most rows of `x` one task multiplies (bounding its scratch; each block of rows
/// dequantizes the weights again).
const ROW_BLOCK: usize = 1024;

/// The matrices of a `[..., rows, cols]` input: where each starts and how far apart its rows
/// are, over elements whose rows are contiguous (copied into a new buffer where not).
pub(super) struct Matrices<'a, E: Clone> {
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
        let src = data.buffer.host()?.typed::<E>(OP)?;
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
    pub(super) fn row(&self, b: usize, r: usize, len: usize) -> &[E] {
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
pub(super) struct Problem<'a, C: Compute + Element> {
    /// `[batch, m, k]`, row-major.
    pub(super) x: Vec<C>,
    /// `[batch, rows, words]`.
    pub(super) w: Matrices<'a, u32>,
    /// `[batch, rows, groups]`.
    pub(super) scales: Matrices<'a, C>,
    /// `[batch, rows, groups]`.
    pub(super) biases: Matrices<'a, C>,
    pub(super) batch: usize,
    pub(super) m: usize,
    pub(super) n: usize,
    pub(super) k: usize,
    pub(super) group_size: usize,
    pub(super) transpose: bool,
}

impl<C: Compute + Element> Problem<'_, C> {
    /// Row `i` of `x` in matrix `b`.
    #[inline(always)]
    pub(super) fn x_row(&self, b: usize, i: usize) -> &[C] {
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
    T::Acc: Gemv,
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
    run::<T>(&p, bits, &mut out);
    Ok(ArrayData::from_vec(out, shape))
}

/// A piece of the output one task computes: rows `r0..r0 + rows.len()` of batch entry `b`,
/// columns `n0..n0 + width` (each row's piece of the row-major output).
struct Task<'o, T> {
    b: usize,
    r0: usize,
    n0: usize,
    rows: Vec<&'o mut [T]>,
}

/// Computes the product into `out` (`[batch, m, n]`, row-major): one task per batch entry,
/// block of rows and band of columns.
fn run<T: FloatElem>(p: &Problem<'_, T::Acc>, bits: usize, out: &mut [T])
where
    T::Acc: Gemv,
{
    let (m, n) = (p.m, p.n);
    let threads = rayon::current_num_threads();
    let parallel = threads > 1 && p.batch * m * n * p.k >= PARALLEL_WORK;
    let vector = m <= VECTOR_ROWS;
    // Bands: a multiple of the group size when they cut packed rows (so that they start on a
    // word), enough of them to keep every thread busy, and wide enough for gemm.
    let align = if p.transpose { 8 } else { p.group_size };
    let widest = if vector { 64 } else { 128 }.max(align);
    let wanted = n.div_ceil(8 * threads).next_multiple_of(align);
    let band = wanted.clamp(align, widest);
    let (blocks, bands) = (m.div_ceil(ROW_BLOCK), n.div_ceil(band));
    let mut tasks: Vec<Task<'_, T>> = (0..p.batch * blocks * bands)
        .map(|t| Task {
            b: t / (blocks * bands),
            r0: t / bands % blocks * ROW_BLOCK,
            n0: t % bands * band,
            rows: Vec::new(),
        })
        .collect();
    for (r, line) in out.chunks_mut(n).enumerate() {
        let first = (r / m * blocks + r % m / ROW_BLOCK) * bands;
        for (task, piece) in tasks[first..first + bands]
            .iter_mut()
            .zip(line.chunks_mut(band))
        {
            task.rows.push(piece);
        }
    }
    let prep = match vector && p.transpose {
        true => T::Acc::prepare(p, bits),
        false => Vec::new(),
    };
    for_each_task(&mut tasks, parallel, &|task| {
        let (rows, cols) = (task.rows.len(), task.rows[0].len());
        let mut temp = pool::alloc::<T::Acc>(rows * cols);
        // The vector paths leave each column's `m` values together, the panel path each row.
        let by_column = vector;
        compute(
            p,
            &prep,
            bits,
            vector,
            (task.b, task.r0, task.n0, cols),
            &mut temp,
        );
        for (i, row) in task.rows.iter_mut().enumerate() {
            if by_column {
                for (j, o) in row.iter_mut().enumerate() {
                    *o = T::down(temp[j * rows + i]);
                }
            } else {
                for (o, &v) in row.iter_mut().zip(&temp[i * cols..]) {
                    *o = T::down(v);
                }
            }
        }
        pool::release(<T::Acc as Element>::into_host(temp));
    });
}

/// The task at batch entry `b`, rows from `r0`, columns `n0..n0 + cols` into `temp` (`rows ×
/// cols`, as `[cols, m]` on the vector paths).
fn compute<C: Gemv>(
    p: &Problem<'_, C>,
    prep: &[C],
    bits: usize,
    vector: bool,
    (b, r0, n0, cols): (usize, usize, usize, usize),
    temp: &mut [C],
) {
    match (vector, p.transpose) {
        (true, true) => C::rows(p, prep, bits, b, n0, temp),
        (true, false) => vector_n(p, bits, (b, n0, cols), temp),
        (false, _) => panel(p, bits, b, r0, n0, cols, temp),
    }
}

/// Runs `f` on every task, over the pool when `parallel` (a trait object, so that the pool's
/// machinery is built once per output type).
fn for_each_task<T: Send>(
    tasks: &mut [Task<'_, T>],
    parallel: bool,
    f: &(dyn Fn(&mut Task<'_, T>) + Sync),
) {
    if parallel {
        tasks.par_iter_mut().for_each(f);
    } else {
        tasks.iter_mut().for_each(f);
    }
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

/// The vector path with `w` as is (`[k, n]` packed along `n`): each row `r` of `w` adds
/// `x[i, r] · (s · q + b)` to the band's accumulators, group by group. The band is
/// `(b, n0, cols)`: batch entry `b`, columns `n0..n0 + cols`.
fn vector_n<C: Compute + Element>(
    p: &Problem<'_, C>,
    bits: usize,
    band: (usize, usize, usize),
    out: &mut [C],
) {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        #[target_feature(enable = "avx2,fma")]
        fn wide<C: Compute + Element>(
            p: &Problem<'_, C>,
            bits: usize,
            band: (usize, usize, usize),
            out: &mut [C],
        ) {
            vector_n_body::<C, true>(p, bits, band, out)
        }
        // SAFETY: `wide` needs AVX2 and FMA, which the CPU has (checked above).
        unsafe { wide::<C>(p, bits, band, out) };
        return;
    }
    vector_n_body::<C, false>(p, bits, band, out)
}

#[inline(always)]
fn vector_n_body<C: Compute + Element, const FMA: bool>(
    p: &Problem<'_, C>,
    bits: usize,
    (b, n0, cols): (usize, usize, usize),
    out: &mut [C],
) {
    let (m, k, gs) = (p.m, p.k, p.group_size);
    let zero = C::c(0.0);
    let (g0, groups) = (n0 / gs, cols / gs);
    let first_word = Problem::<C>::words(n0, bits);
    let words = Problem::<C>::words(cols, bits);
    // `acc[i · cols + j]`: row `i` of `x`, column `n0 + j`.
    let mut acc = vec![zero; m * cols];
    let mut q = vec![zero; cols];
    for r in 0..k {
        let w = p.w.row(b, r, first_word + words);
        unpack_dyn(bits, &w[first_word..], &mut q);
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
fn panel<C: Compute + Element>(
    p: &Problem<'_, C>,
    bits: usize,
    b: usize,
    r0: usize,
    n0: usize,
    cols: usize,
    out: &mut [C],
) {
    let (m, k, gs) = (p.m, p.k, p.group_size);
    let rows = out.len() / cols;
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
            let words = Problem::<C>::words(gs, bits);
            for (j, line) in panel.chunks_exact_mut(kc).enumerate().take(cols) {
                let row = n0 + j;
                let w = p.w.row(b, row, Problem::<C>::words(k0 + kc, bits));
                let scales = &p.scales.row(b, row, g0 + groups)[g0..];
                let biases = &p.biases.row(b, row, g0 + groups)[g0..];
                for (g, part) in line.chunks_exact_mut(gs).enumerate() {
                    let at = (g0 + g) * words;
                    unpack_dyn(bits, &w[at..at + words], part);
                    let (s, bias) = (scales[g], biases[g]);
                    for v in part.iter_mut() {
                        *v = *v * s + bias;
                    }
                }
            }
        } else {
            // panel[t · cols + j] = w[k0 + t, n0 + j].
            let (g0, groups) = (n0 / gs, cols / gs);
            let first_word = Problem::<C>::words(n0, bits);
            let words = Problem::<C>::words(cols, bits);
            for (t, line) in panel.chunks_exact_mut(cols).enumerate().take(kc) {
                let r = k0 + t;
                let w = p.w.row(b, r, first_word + words);
                unpack_dyn(bits, &w[first_word..], &mut q);
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
        let lhs = &p.x[(b * m + r0) * k + k0..];
        // SAFETY: `out` is this task's `rows × cols` block, row-major (written with column
        // stride 1 and row stride `cols`); `lhs` starts at row `r0`, column `k0` of `x[b]`, read
        // as `rows × kc` with row stride `k`, all inside `x[b]` (rows `r0..r0 + rows` of its
        // `m`); the panel holds `cols · kc` values read with the strides set above.
        unsafe {
            gemm::gemm(
                rows,
                cols,
                kc,
                out.as_mut_ptr(),
                1,
                cols as isize,
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
