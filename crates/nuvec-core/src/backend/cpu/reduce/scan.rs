//! Scans and arg-reductions: the kernels that keep positions along their axis.
//!
//! A scan runs over a row-major copy seen as `[outer, len, inner]`: with `inner == 1` each
//! row is scanned in turn; otherwise whole rows of `inner` elements are folded into a row of
//! accumulators, so the loop over `inner` is contiguous and vectorises.

use super::fold::{Fold, Load};
use super::plan::{Inner, Plan, par_fill};

/// The scan of `src` (row-major, `len` positions of `inner` elements per block) with fold
/// `F`, forwards or from the end, element `i` included in result `i` or not.
pub(super) fn scan<T: Load, F: Fold<In = T::In>>(
    src: &[T],
    len: usize,
    inner: usize,
    reverse: bool,
    inclusive: bool,
) -> Vec<F::Out> {
    // Every element is written: the buffer may come from the cache uncleared.
    let mut out = crate::array::pool::alloc::<F::Out>(src.len());
    let block = len * inner;
    if block == 0 {
        return out;
    }
    par_fill(&mut out, 1, block, &|start, chunk| {
        let blocks = chunk.chunks_mut(block).zip(src[start..].chunks(block));
        if inner == 1 {
            // One running value per row: a plain loop, forwards or backwards.
            for (dst, x) in blocks {
                if reverse {
                    scan_run::<T, F>(x.iter().rev().zip(dst.iter_mut().rev()), inclusive);
                } else {
                    scan_run::<T, F>(x.iter().zip(dst.iter_mut()), inclusive);
                }
            }
            return;
        }
        let mut acc = vec![F::init(); inner];
        for (dst, x) in blocks {
            acc.fill(F::init());
            for k in 0..len {
                let i = if reverse { len - 1 - k } else { k };
                let row = i * inner..(i + 1) * inner;
                let (xs, os) = (&x[row.clone()], &mut dst[row]);
                if inclusive {
                    for ((a, o), &v) in acc.iter_mut().zip(os).zip(xs) {
                        *a = F::step(*a, v.up());
                        *o = F::finish(*a);
                    }
                } else {
                    for ((a, o), &v) in acc.iter_mut().zip(os).zip(xs) {
                        *o = F::finish(*a);
                        *a = F::step(*a, v.up());
                    }
                }
            }
        }
    });
    out
}

/// One running value along `(input, output)` pairs.
#[inline(always)]
fn scan_run<'a, T: Load, F: Fold<In = T::In>>(
    pairs: impl Iterator<Item = (&'a T, &'a mut F::Out)>,
    inclusive: bool,
) {
    let mut acc = F::init();
    for (&v, o) in pairs {
        if inclusive {
            acc = F::step(acc, v.up());
            *o = F::finish(acc);
        } else {
            *o = F::finish(acc);
            acc = F::step(acc, v.up());
        }
    }
}

/// Whether `x` replaces `best` as the extreme: larger (`MAX`) or smaller, or the first NaN
/// (NaN counts as the extreme, and the first one wins, as NumPy).
#[inline(always)]
#[allow(clippy::eq_op)]
fn better<V: PartialOrd + Copy, const MAX: bool>(x: V, best: V) -> bool {
    let beyond = if MAX { x > best } else { x < best };
    beyond || (x != x && best == best)
}

/// The position of the first extreme element of a run.
#[inline(always)]
fn first_extreme<'a, T: Load, const MAX: bool>(run: impl Iterator<Item = &'a T>) -> usize
where
    T::In: PartialOrd,
{
    let mut best: Option<T::In> = None;
    let mut index = 0;
    for (i, &v) in run.enumerate() {
        let v = v.up();
        match best {
            Some(b) if !better::<_, MAX>(v, b) => {}
            _ => (best, index) = (Some(v), i),
        }
    }
    index
}

/// The index (`u32`) of the extreme element along the single axis of `plan`, per output.
pub(super) fn arg<T: Load, const MAX: bool>(src: &[T], plan: &Plan) -> Vec<u32>
where
    T::In: PartialOrd,
{
    // Every output is written: the buffer may come from the cache uncleared.
    let mut out = crate::array::pool::alloc::<u32>(plan.nout);
    match plan.inner {
        Inner::Rows { n, s } => {
            // One reduced axis: one run per output.
            par_fill(&mut out, n, 1, &|start, chunk| {
                let mut k = 0;
                plan.for_each_base(start, chunk.len(), |base| {
                    let index = if s == 1 {
                        first_extreme::<T, MAX>(src[base..base + n].iter())
                    } else {
                        let at = |i: usize| &src[(base as isize + i as isize * s) as usize];
                        first_extreme::<T, MAX>((0..n).map(at))
                    };
                    chunk[k] = index as u32;
                    k += 1;
                });
            });
        }
        Inner::Cols { m, s } => {
            // Whole rows against a row of running extremes; `roffs` are the axis positions.
            par_fill(&mut out, plan.roffs.len(), 1, &|start, chunk| {
                let end = start + chunk.len();
                let mut best: Vec<T::In> = Vec::new();
                let mut o = start;
                while o < end {
                    let (b, j0) = (o / m, o % m);
                    let len = (m - j0).min(end - o);
                    let mut first = plan.offset as isize;
                    plan.for_each_base(b, 1, |q| first = q as isize);
                    let first = first + j0 as isize * s;
                    let at = |r: isize, j: usize| src[(first + r + j as isize * s) as usize].up();
                    let idx = &mut chunk[o - start..o - start + len];
                    best.clear();
                    best.extend((0..len).map(|j| at(plan.roffs[0], j)));
                    idx.fill(0);
                    for (ri, &r) in plan.roffs.iter().enumerate().skip(1) {
                        for (j, (bv, iv)) in best.iter_mut().zip(idx.iter_mut()).enumerate() {
                            let v = at(r, j);
                            if better::<_, MAX>(v, *bv) {
                                (*bv, *iv) = (v, ri as u32);
                            }
                        }
                    }
                    o += len;
                }
            });
        }
    }
    out
}
