//! How a reduction walks its input: the [`Plan`] (which axis runs innermost and where the
//! elements of each output start), the drivers that run a [`Fold`] over it, and the split
//! of the work over the rayon pool.
//!
//! Two shapes of work cover every layout. When the innermost axis is reduced, each output
//! folds runs of elements (`Rows`: a contiguous row is one vectorised loop). When it is
//! kept, a block of consecutive outputs folds whole rows of the input into a row of
//! accumulators (`Cols`), so reductions over leading axes also stream contiguous memory.

use rayon::prelude::*;

use super::fold::{BLOCK, Fold, Load, Pairwise, fold_block, fold_cols};
use crate::array::{Layout, for_each_strided};
use crate::backend::common::reduce_plan::{ReducePlan, step_rank};
use crate::backend::cpu::elementwise::GRAIN;

/// Outputs per accumulator tile of a `Cols` reduction (the tile stays in the L1 cache).
const TILE: usize = 2048;

/// The innermost loop of a reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Inner {
    /// Each output folds runs of `n` elements, `s` apart.
    Rows {
        /// Elements per run.
        n: usize,
        /// The step between them.
        s: isize,
    },
    /// `m` consecutive outputs read elements `s` apart: each reduced position adds one
    /// row of `m` elements to `m` accumulators.
    Cols {
        /// Outputs per block.
        m: usize,
        /// The input step between neighbouring outputs.
        s: isize,
    },
}

/// The walk of one reduction over one layout.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    /// The buffer position of the first element.
    pub offset: usize,
    /// The kept axes outside the inner loop (merged where possible), in the output's order.
    pub kshape: Vec<usize>,
    /// Their input strides.
    pub kstrides: Vec<isize>,
    /// Where the runs (`Rows`) or rows (`Cols`) folded into one output or block start,
    /// relative to its first element, in the input's order.
    pub roffs: Vec<isize>,
    /// The inner loop.
    pub inner: Inner,
    /// The number of outputs.
    pub nout: usize,
}

impl Plan {
    /// The walk reducing `layout` (of a non-empty array) over the sorted `axes`, on top of
    /// the shared [`ReducePlan`]. `idempotent` folds (max, min, all, any, arg-reductions)
    /// skip broadcast axes, which repeat one element; `commutative` ones may read a reversed
    /// run forwards.
    pub fn new(layout: &Layout, axes: &[usize], idempotent: bool, commutative: bool) -> Plan {
        let mut split = ReducePlan::new(layout, axes, idempotent);
        let (mut kshape, mut kstrides) = split.merged_kept();
        // The innermost loop should take the smallest step; broadcast axes come last.
        let best_red = split.red.iter().map(|r| step_rank(r.1)).min();
        let cols = match (kstrides.last(), best_red) {
            (Some(&ks), Some(r)) => step_rank(ks) < r,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let inner = if cols {
            // The innermost kept axes, merged, make the blocks.
            let m = kshape.pop().expect("cols needs a kept axis");
            let s = kstrides.pop().expect("as many strides as axes");
            Inner::Cols { m, s }
        } else {
            let (n, s) = split.take_run(commutative).unwrap_or((1, 0));
            Inner::Rows { n, s }
        };
        let mut roffs = vec![0isize];
        for &(n, s) in &split.red {
            roffs = roffs
                .iter()
                .flat_map(|&o| (0..n).map(move |i| o + i as isize * s))
                .collect();
        }
        Plan {
            offset: split.offset,
            kshape,
            kstrides,
            roffs,
            inner,
            nout: split.nout,
        }
    }

    /// `f(position)` with the buffer position where each of the outputs (`Rows`) or blocks
    /// (`Cols`) `start..start + count` starts, in order.
    #[inline(always)]
    pub fn for_each_base(&self, start: usize, count: usize, mut f: impl FnMut(usize)) {
        let strides = [self.kstrides.as_slice()];
        for_each_strided(&self.kshape, strides, [self.offset], start, count, |[p]| {
            f(p)
        });
    }
}

/// Fills `out` chunk by chunk with `f(start, chunk)`, over the pool when the work (`cost`
/// per output element) is large; chunks hold whole multiples of `unit` elements. This is
/// [`fill`](crate::backend::cpu::elementwise::fill) for work that is not one element per
/// output: a reduction of 1024 rows of 4096 is as much work as an elementwise op on 4M
/// elements.
pub(super) fn par_fill<U: Send>(
    out: &mut [U],
    cost: usize,
    unit: usize,
    f: &(dyn Fn(usize, &mut [U]) + Sync),
) {
    let n = out.len();
    let units = n / unit.max(1);
    let work = n.saturating_mul(cost.max(1));
    if work <= 2 * GRAIN || units <= 1 {
        f(0, out);
        return;
    }
    let tasks = (rayon::current_num_threads() * 4)
        .min(work / GRAIN)
        .clamp(1, units);
    let chunk = units.div_ceil(tasks) * unit.max(1);
    out.par_chunks_mut(chunk)
        .enumerate()
        .for_each(|(i, c)| f(i * chunk, c));
}

/// Folds the reduction planned by `plan` over `src`, one output per element.
pub(super) fn run<T: Load, F: Fold<In = T::In>>(src: &[T], plan: &Plan) -> Vec<F::Out> {
    // Every output is written: the buffer may come from the cache uncleared.
    let mut out = crate::array::pool::alloc::<F::Out>(plan.nout);
    match plan.inner {
        Inner::Rows { n, .. } => {
            let cost = plan.roffs.len() * n;
            if plan.nout == 1 && cost > 2 * GRAIN {
                out[0] = F::finish(split::<T, F>(src, plan));
            } else {
                par_fill(&mut out, cost, 1, &|start, chunk| {
                    rows::<T, F>(src, plan, start, chunk)
                });
            }
        }
        Inner::Cols { .. } => par_fill(&mut out, plan.roffs.len(), 1, &|start, chunk| {
            cols::<T, F>(src, plan, start, chunk)
        }),
    }
    out
}

/// A single output's work split into pieces over the pool, combined in order.
fn split<T: Load, F: Fold<In = T::In>>(src: &[T], plan: &Plan) -> F::Acc {
    let Inner::Rows { n, .. } = plan.inner else {
        unreachable!("split is only planned for rows")
    };
    let cost = plan.roffs.len() * n;
    let pieces = (rayon::current_num_threads() * 4).min(cost / GRAIN).max(1);
    let mut partials = vec![F::init(); pieces];
    par_fill(&mut partials, cost / pieces, 1, &|start, chunk| {
        for (k, slot) in chunk.iter_mut().enumerate() {
            *slot = piece::<T, F>(src, plan, start + k, pieces);
        }
    });
    partials
        .into_iter()
        .reduce(F::merge)
        .unwrap_or_else(F::init)
}

/// Folds one run: a vectorised loop when contiguous (after converting half floats in
/// blocks), a strided walk otherwise.
#[inline(always)]
fn fold_row<T: Load, F: Fold<In = T::In>>(
    src: &[T],
    at: isize,
    n: usize,
    s: isize,
    buf: &mut [T::In],
) -> F::Acc {
    if s == 1 {
        let row = &src[at as usize..at as usize + n];
        let mut acc = Pairwise::<F>::new();
        for part in row.chunks(BLOCK) {
            let x = match T::direct(part) {
                Some(x) => x,
                None => {
                    T::load(part, &mut buf[..part.len()]);
                    &buf[..part.len()]
                }
            };
            acc.push(fold_block::<F>(x));
        }
        acc.finish()
    } else {
        let mut acc = F::init();
        let mut p = at;
        for _ in 0..n {
            acc = F::step(acc, src[p as usize].up());
            p += s;
        }
        acc
    }
}

/// A conversion buffer for runs of up to `n` elements (empty when none is needed).
fn buffer<T: Load>(n: usize) -> Vec<T::In> {
    vec![T::In::default(); if T::DIRECT { 0 } else { n.min(BLOCK) }]
}

/// Outputs `start..start + chunk.len()` of a `Rows` plan.
fn rows<T: Load, F: Fold<In = T::In>>(src: &[T], plan: &Plan, start: usize, chunk: &mut [F::Out]) {
    let Inner::Rows { n, s } = plan.inner else {
        unreachable!("rows of a cols plan")
    };
    let mut buf = buffer::<T>(n);
    let mut k = 0;
    plan.for_each_base(start, chunk.len(), |base| {
        let mut acc = F::init();
        for &r in &plan.roffs {
            acc = F::merge(
                acc,
                fold_row::<T, F>(src, base as isize + r, n, s, &mut buf),
            );
        }
        chunk[k] = F::finish(acc);
        k += 1;
    });
}

/// Piece `index` of `pieces` of a single output's runs (whole runs when there are enough
/// of them, else the same slice of every run).
fn piece<T: Load, F: Fold<In = T::In>>(
    src: &[T],
    plan: &Plan,
    index: usize,
    pieces: usize,
) -> F::Acc {
    let Inner::Rows { n, s } = plan.inner else {
        unreachable!("pieces of a cols plan")
    };
    // A single output has no kept axes: its runs start at the offset.
    let base = plan.offset as isize;
    let mut buf = buffer::<T>(n);
    let mut acc = F::init();
    let runs = plan.roffs.len();
    // Whole runs when there are enough of them, else the same part of every run.
    let (rs, (first, len)) = if runs >= pieces {
        let part = &plan.roffs[index * runs / pieces..(index + 1) * runs / pieces];
        (part, (0, n))
    } else {
        let (a, b) = (index * n / pieces, (index + 1) * n / pieces);
        (&plan.roffs[..], (a, b - a))
    };
    for &r in rs {
        let at = base + r + first as isize * s;
        acc = F::merge(acc, fold_row::<T, F>(src, at, len, s, &mut buf));
    }
    acc
}

/// Outputs `start..start + chunk.len()` of a `Cols` plan, tile by tile.
fn cols<T: Load, F: Fold<In = T::In>>(src: &[T], plan: &Plan, start: usize, chunk: &mut [F::Out]) {
    let Inner::Cols { m, s } = plan.inner else {
        unreachable!("cols of a rows plan")
    };
    let end = start + chunk.len();
    if start == end {
        return;
    }
    // The first element of each block this chunk touches.
    let (b0, b1) = (start / m, (end - 1) / m + 1);
    let mut bases = Vec::with_capacity(b1 - b0);
    plan.for_each_base(b0, b1 - b0, |q| bases.push(q as isize));
    let tile = TILE.min(chunk.len());
    let mut acc = vec![F::init(); tile];
    let mut buf = vec![T::In::default(); if T::DIRECT { 0 } else { tile }];
    let mut o = start;
    while o < end {
        let (b, j0) = (o / m, o % m);
        let len = (m - j0).min(end - o).min(tile);
        let first = bases[b - b0] + j0 as isize * s;
        let a = &mut acc[..len];
        a.fill(F::init());
        for &r in &plan.roffs {
            let at = first + r;
            if s == 1 {
                let row = &src[at as usize..at as usize + len];
                match T::direct(row) {
                    Some(x) => fold_cols::<F>(a, x),
                    None => {
                        let bb = &mut buf[..len];
                        T::load(row, bb);
                        fold_cols::<F>(a, bb);
                    }
                }
            } else {
                for (j, av) in a.iter_mut().enumerate() {
                    *av = F::step(*av, src[(at + j as isize * s) as usize].up());
                }
            }
        }
        let dst = &mut chunk[o - start..o - start + len];
        for (d, &v) in dst.iter_mut().zip(a.iter()) {
            *d = F::finish(v);
        }
        o += len;
    }
}
