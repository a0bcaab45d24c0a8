//! Matrix products on the CPU through the `gemm` crate.
//!
//! Inputs are read where they lie: each operand's row and column strides go to `gemm` as they
//! are (transposed, sliced, reversed and broadcast views included), and broadcast batch axes
//! become repeated offsets. `f32`, `f64` and `complex64` run in their own type; `f16` and
//! `bf16` are widened to `f32` one panel of the inner axis at a time, accumulated in `f32` and
//! rounded once (gemm's own `f16` kernel rounds its partial sums to `f16` after every depth
//! block, and was no faster). A batch of small products is spread over the rayon pool one
//! product per task; a large product is spread inside `gemm`.

use gemm::Parallelism;
use rayon::prelude::*;

use half::slice::HalfFloatSliceExt;

use super::elementwise::{GRAIN, donated, fill};
use super::math::FloatElem;
use crate::array::{ArrayData, Layout, collapse, for_each_strided, pool};
use crate::dtype::{Canon, Complex64, Element, bf16, f16};
use crate::ops::linalg::MatmulOp;
use crate::primitive::OutputSpec;
use crate::{DType, Error, Result};

/// `m · n · k` below which a product is too small to share between threads: a batch of them
/// runs one product per task instead.
const SMALL_PRODUCT: usize = 1 << 21;
/// `m · n · k` below which a single product stays on the calling thread.
const THREADED_PRODUCT: usize = 1 << 16;
/// The most elements of `a` and `b` widened to `f32` at a time for half types.
const PANEL_ELEMENTS: usize = 1 << 22;

/// Computes a matrix-product primitive.
pub(crate) fn eval(
    op: &MatmulOp,
    inputs: &mut [ArrayData],
    outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    let (shape, dtype) = (&outputs[0].0, outputs[0].1);
    let (ab, rest) = inputs.split_at_mut(2);
    let (a, b) = (&ab[0], &ab[1]);
    let (scale, c) = match op {
        MatmulOp::Matmul => (Scale::default(), None),
        MatmulOp::AddMm { alpha, beta } => (
            Scale {
                alpha: *alpha,
                beta: *beta,
            },
            rest.first_mut(),
        ),
    };
    let plan = Plan::new(&a.layout, &b.layout);
    let product = Product {
        op: op.name(),
        a,
        b,
        plan: &plan,
        shape,
        scale,
    };
    let data = match dtype {
        DType::F32 => native::<f32>(&product, c)?,
        DType::F64 => native::<f64>(&product, c)?,
        DType::C64 => native::<Complex64>(&product, c)?,
        DType::F16 => widened::<f16>(&product, c)?,
        DType::BF16 => widened::<bf16>(&product, c)?,
        other => {
            return Err(Error::UnsupportedDType {
                op: product.op,
                dtype: other,
            });
        }
    };
    Ok(vec![data])
}

/// One evaluation: the op's name, its operands, their plan, the output's shape and scale.
struct Product<'a> {
    op: &'static str,
    a: &'a ArrayData,
    b: &'a ArrayData,
    plan: &'a Plan,
    shape: &'a [usize],
    scale: Scale,
}

impl Product<'_> {
    /// The elements of `a` and `b`, as `T`.
    fn operands<T: Element>(&self) -> Result<(&[T], &[T])> {
        let a = self.a.buffer.host()?.typed::<T>(self.op)?;
        let b = self.b.buffer.host()?.typed::<T>(self.op)?;
        Ok((a, b))
    }
}

/// `alpha · (a @ b) + beta · c`; a plain product is `alpha = 1` without `c`.
#[derive(Debug, Clone, Copy)]
struct Scale {
    alpha: f32,
    beta: f32,
}

impl Default for Scale {
    fn default() -> Scale {
        Scale {
            alpha: 1.0,
            beta: 0.0,
        }
    }
}

/// The products to run: one `m × k` by `k × n` product per output matrix, each operand read
/// through its strides from its own start in the buffer.
#[derive(Debug)]
struct Plan {
    m: usize,
    n: usize,
    k: usize,
    a_rs: isize,
    a_cs: isize,
    b_rs: isize,
    b_cs: isize,
    /// The buffer positions of `a[i, 0, 0]` and `b[i, 0, 0]` for each product `i`.
    starts: Vec<(usize, usize)>,
}

impl Plan {
    fn new(a: &Layout, b: &Layout) -> Plan {
        let nd = a.shape.len();
        let (m, k, n) = (a.shape[nd - 2], a.shape[nd - 1], b.shape[nd - 1]);
        let batch = &a.shape[..nd - 2];
        let count: usize = batch.iter().product();
        let mut plan = Plan {
            m,
            n,
            k,
            a_rs: a.strides[nd - 2],
            a_cs: a.strides[nd - 1],
            b_rs: b.strides[nd - 2],
            b_cs: b.strides[nd - 1],
            starts: Vec::with_capacity(count),
        };
        // When every product shares one `b` and `a`'s batch and row axes step as a single
        // axis, the batch is one tall product: far better use of gemm than many short ones.
        let shared_b = b.strides[..nd - 2]
            .iter()
            .zip(batch)
            .all(|(&s, &d)| s == 0 || d == 1);
        if count > 1 && shared_b {
            let (merged, strides) = collapse(&a.shape[..nd - 1], &[&a.strides[..nd - 1]]);
            if merged.len() <= 1 {
                if let Some(&rs) = strides[0].first() {
                    plan.a_rs = rs;
                }
                plan.m = m * count;
                plan.starts.push((a.offset, b.offset));
                return plan;
            }
        }
        let (shape, strides) = collapse(batch, &[&a.strides[..nd - 2], &b.strides[..nd - 2]]);
        let starts = &mut plan.starts;
        for_each_strided(
            &shape,
            [&strides[0], &strides[1]],
            [a.offset, b.offset],
            0,
            count,
            |[p, q]| starts.push((p, q)),
        );
        plan
    }

    /// Whether to run one product per task, and whether to split each product into tiles for
    /// the threads.
    fn parallelism(&self) -> (bool, bool) {
        let work = self.m * self.n * self.k;
        let count = self.starts.len();
        let threads = rayon::current_num_threads();
        let per_task = count > 1
            && threads > 1
            && (work < SMALL_PRODUCT || count >= 4 * threads)
            && count * work >= THREADED_PRODUCT;
        let split = !per_task && threads > 1 && work >= THREADED_PRODUCT;
        (per_task, split)
    }

    /// Runs `f(i, out_i, split)` for each product `i` and its `m × n` block of `out`.
    fn for_each<T: Send>(&self, out: &mut [T], f: &(dyn Fn(usize, &mut [T], bool) + Sync)) {
        let block = self.m * self.n;
        if block == 0 {
            return;
        }
        let (per_task, split) = self.parallelism();
        if per_task {
            out.par_chunks_mut(block)
                .enumerate()
                .for_each(|(i, chunk)| f(i, chunk, false));
        } else {
            for (i, chunk) in out.chunks_mut(block).enumerate() {
                f(i, chunk, split);
            }
        }
    }
}

/// A rectangle of one product's output: rows `r0..r0 + rows`, columns `c0..c0 + cols`.
#[derive(Debug, Clone, Copy)]
struct Tile {
    r0: usize,
    rows: usize,
    c0: usize,
    cols: usize,
}

/// Runs `f` on tiles that cover an `m × n` output once: the whole of it, or with `split` one
/// tile per thread (a band of columns, or of rows when the output is narrow), each computed
/// by a single-threaded gemm. Independent tiles ran about 5% faster here than gemm's own
/// threading, which synchronises its threads after every block of the inner axis.
fn for_each_tile(m: usize, n: usize, split: bool, f: &(dyn Fn(Tile) + Sync)) {
    let parts = rayon::current_num_threads();
    let whole = Tile {
        r0: 0,
        rows: m,
        c0: 0,
        cols: n,
    };
    // Bands a multiple of gemm's register tile wide, so that no thread gets ragged edges.
    let tiles: Vec<Tile> = if !split || parts < 2 {
        vec![whole]
    } else if n >= 64 * parts {
        let cols = bands(n, parts, 64);
        cols.map(|(c0, cols)| Tile { c0, cols, ..whole }).collect()
    } else if m >= 16 * parts {
        let rows = bands(m, parts, 16);
        rows.map(|(r0, rows)| Tile { r0, rows, ..whole }).collect()
    } else {
        vec![whole]
    };
    if tiles.len() == 1 {
        f(tiles[0]);
    } else {
        tiles.par_iter().for_each(|&t| f(t));
    }
}

/// `(start, length)` of about `parts` bands covering `0..len`, each a multiple of `multiple`
/// long but the last.
fn bands(len: usize, parts: usize, multiple: usize) -> impl Iterator<Item = (usize, usize)> {
    let step = len.div_ceil(parts).next_multiple_of(multiple);
    (0..len)
        .step_by(step)
        .map(move |at| (at, step.min(len - at)))
}

/// An output that several tasks write, each its own tiles.
#[derive(Clone, Copy)]
struct Shared<T>(*mut T);

// SAFETY: the tasks holding a `Shared` write disjoint tiles of the output it points to (see
// `for_each_tile`), and the output outlives them (they end before `for_each_tile` returns).
unsafe impl<T: Send> Send for Shared<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T> Shared<T> {
    /// The element `i` places after the start (a method, so that closures capture the
    /// wrapper rather than its raw pointer).
    fn at(self, i: usize) -> *mut T {
        self.0.wrapping_add(i)
    }
}

/// Runs `f` on the output's elements (row-major, `shape`): a new zeroed buffer, or `c`'s
/// elements, written over `c` itself when its buffer may be donated.
fn with_output<T: Element>(
    op: &'static str,
    c: Option<&mut ArrayData>,
    shape: &[usize],
    f: impl FnOnce(&mut [T]),
) -> Result<ArrayData> {
    let n: usize = shape.iter().product();
    let Some(c) = c else {
        // Every element is written (gemm zeroes the output when `k = 0`).
        let mut out = pool::alloc::<T>(n);
        f(&mut out);
        return Ok(ArrayData::from_vec(out, shape));
    };
    if let Some(elements) = donated::<T>(c).filter(|e| e.len() == n) {
        f(elements);
        return Ok(c.view(Layout::contiguous(shape)));
    }
    let mut out = c.to_vec::<T>(op)?;
    f(&mut out);
    Ok(ArrayData::from_vec(out, shape))
}

/// A product in the element type itself, through `gemm`.
fn native<T: Element>(product: &Product<'_>, c: Option<&mut ArrayData>) -> Result<ArrayData> {
    let (sa, sb) = product.operands::<T>()?;
    let read_dst = c.is_some();
    let scale = product.scale;
    let alpha = T::from_canon(Canon::Float(f64::from(scale.alpha)));
    let beta = T::from_canon(Canon::Float(f64::from(scale.beta)));
    let p = product.plan;
    with_output(product.op, c, product.shape, |out| {
        p.for_each(out, &|i, dst, split| {
            let (pa, pb) = p.starts[i];
            let dst = Shared(dst.as_mut_ptr());
            for_each_tile(p.m, p.n, split, &|t| {
                let a = Strided {
                    at: sa.as_ptr().wrapping_add(pa),
                    rs: p.a_rs,
                    cs: p.a_cs,
                };
                let b = Strided {
                    at: sb.as_ptr().wrapping_add(pb),
                    rs: p.b_rs,
                    cs: p.b_cs,
                };
                // SAFETY: the tile's rows and columns lie inside this product's `m × n`
                // row-major block of the output, which no other task writes; every element
                // gemm reads, `pa + r·a_rs + j·a_cs` for `r < m`, `j < k` (and likewise for
                // `b`), is an element of the operand's layout, so it lies inside its buffer,
                // which the caller holds for the whole call.
                unsafe { gemm_tile(t, p.k, (dst, p.n), read_dst, a, b, (beta, alpha)) };
            });
        })
    })
}

/// A matrix read through its strides: the position of element `[0, 0]`, the steps between
/// rows and between columns.
#[derive(Clone, Copy)]
struct Strided<T> {
    at: *const T,
    rs: isize,
    cs: isize,
}

/// Tile `t` of `dst = keep · dst + alpha · (a @ b)` through a single-threaded gemm, where `a`
/// has `k` columns, `dst` is row-major with `n` columns, and `(keep, alpha)` are the scales
/// (`dst` is only read when `read_dst`).
///
/// # Safety
///
/// The tile's elements of `dst`, rows `t.r0..t.r0 + t.rows` of `a` and columns
/// `t.c0..t.c0 + t.cols` of `b` (read through their strides) must lie in live buffers, and
/// no other task may touch the tile of `dst` meanwhile.
unsafe fn gemm_tile<T: 'static>(
    t: Tile,
    k: usize,
    (dst, n): (Shared<T>, usize),
    read_dst: bool,
    a: Strided<T>,
    b: Strided<T>,
    (keep, alpha): (T, T),
) {
    // SAFETY: the caller vouches for every element gemm touches (see above).
    unsafe {
        gemm::gemm(
            t.rows,
            t.cols,
            k,
            dst.at(t.r0 * n + t.c0),
            1,
            n as isize,
            read_dst,
            a.at.wrapping_offset(t.r0 as isize * a.rs),
            a.cs,
            a.rs,
            b.at.wrapping_offset(t.c0 as isize * b.cs),
            b.cs,
            b.rs,
            keep,
            alpha,
            false,
            false,
            false,
            Parallelism::None,
        );
    }
}

/// The half-precision types, converted to and from `f32` a slice at a time (with the
/// processor's conversion instructions where it has them).
trait Half: FloatElem<Acc = f32> {
    fn widen_slice(src: &[Self], dst: &mut [f32]);
    fn narrow_slice(src: &[f32], dst: &mut [Self]);
}

impl Half for f16 {
    fn widen_slice(src: &[f16], dst: &mut [f32]) {
        src.convert_to_f32_slice(dst);
    }
    fn narrow_slice(src: &[f32], dst: &mut [f16]) {
        dst.convert_from_f32_slice(src);
    }
}

impl Half for bf16 {
    fn widen_slice(src: &[bf16], dst: &mut [f32]) {
        src.convert_to_f32_slice(dst);
    }
    fn narrow_slice(src: &[f32], dst: &mut [bf16]) {
        dst.convert_from_f32_slice(src);
    }
}

/// Runs `f(line, out_line)` over the consecutive `len`-element lines of `out`, over the pool
/// when there are many elements.
fn for_lines(out: &mut [f32], len: usize, f: &(dyn Fn(usize, &mut [f32]) + Sync)) {
    if out.len() < 4 * GRAIN {
        out.chunks_mut(len).enumerate().for_each(|(i, l)| f(i, l));
    } else {
        out.par_chunks_mut(len)
            .enumerate()
            .for_each(|(i, l)| f(i, l));
    }
}

/// A `rows × cols` matrix of `src` widened to `f32`, with its row and column strides: laid
/// out in the order of the source's smaller stride, so that a transposed view is read in
/// memory order and stays transposed.
fn widen<T: Half>(
    src: &[T],
    start: usize,
    (rows, cols): (usize, usize),
    (rs, cs): (isize, isize),
) -> (Vec<f32>, isize, isize) {
    let mut out = pool::alloc::<f32>(rows * cols);
    let by_rows = cs.unsigned_abs() <= rs.unsigned_abs();
    let (inner, outer_step, inner_step) = if by_rows {
        (cols, rs, cs)
    } else {
        (rows, cs, rs)
    };
    if !out.is_empty() {
        for_lines(&mut out, inner, &|o, line| {
            let first = start as isize + o as isize * outer_step;
            if inner_step == 1 {
                let first = first as usize;
                T::widen_slice(&src[first..first + inner], line);
            } else {
                for (j, v) in line.iter_mut().enumerate() {
                    *v = src[(first + j as isize * inner_step) as usize].up();
                }
            }
        });
    }
    if by_rows {
        (out, cols as isize, 1)
    } else {
        (out, 1, rows as isize)
    }
}

/// A product of half-precision elements: each panel of the inner axis widened to `f32`,
/// accumulated in `f32`, rounded once at the end.
fn widened<T: Half>(product: &Product<'_>, c: Option<&mut ArrayData>) -> Result<ArrayData> {
    let (sa, sb) = product.operands::<T>()?;
    let has_c = c.is_some();
    let scale = product.scale;
    let p = product.plan;
    let panel = if (p.m + p.n) * p.k <= PANEL_ELEMENTS {
        p.k.max(1)
    } else {
        (PANEL_ELEMENTS / (p.m + p.n)).max(256)
    };
    with_output(product.op, c, product.shape, |out: &mut [T]| {
        p.for_each(out, &|i, dst, split| {
            let (pa, pb) = p.starts[i];
            // Overwritten by `c` or by the first panel's product.
            let mut acc = pool::alloc::<f32>(dst.len());
            if has_c {
                fill(&mut acc, &|s, chunk| {
                    T::widen_slice(&dst[s..s + chunk.len()], chunk)
                });
            }
            let mut k0 = 0;
            // At least one pass, so that `k = 0` still zeroes or scales the output.
            loop {
                let kc = panel.min(p.k - k0);
                let at_a = (pa as isize + k0 as isize * p.a_cs) as usize;
                let at_b = (pb as isize + k0 as isize * p.b_rs) as usize;
                let (wa, a_rs, a_cs) = widen(sa, at_a, (p.m, kc), (p.a_rs, p.a_cs));
                let (wb, b_rs, b_cs) = widen(sb, at_b, (kc, p.n), (p.b_rs, p.b_cs));
                let first = k0 == 0;
                let keep = if first { scale.beta } else { 1.0 };
                let read_dst = has_c || !first;
                let acc_out = Shared(acc.as_mut_ptr());
                for_each_tile(p.m, p.n, split, &|t| {
                    let a = Strided {
                        at: wa.as_ptr(),
                        rs: a_rs,
                        cs: a_cs,
                    };
                    let b = Strided {
                        at: wb.as_ptr(),
                        rs: b_rs,
                        cs: b_cs,
                    };
                    // SAFETY: the tile lies inside `acc`, an `m × n` row-major block owned
                    // here that no other task writes; `wa` is `m × kc` and `wb` is `kc × n`,
                    // read with the strides `widen` returned for them.
                    unsafe {
                        gemm_tile(t, kc, (acc_out, p.n), read_dst, a, b, (keep, scale.alpha))
                    };
                });
                pool::release(f32::into_host(wa));
                pool::release(f32::into_host(wb));
                k0 += kc;
                if k0 >= p.k {
                    break;
                }
            }
            fill(dst, &|s, chunk| {
                T::narrow_slice(&acc[s..s + chunk.len()], chunk)
            });
            pool::release(f32::into_host(acc));
        })
    })
}
