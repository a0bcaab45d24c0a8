//! The layout plan of a reduction, shared by the CPU and CUDA backends: which axes are kept
//! and which reduced, which of them can be skipped, and how they merge. Each backend then
//! picks its own loop form from it (`backend/cpu/reduce/plan.rs`, `backend/cuda/reduce.rs`):
//! the CPU folds any step, while the CUDA kernels want unit steps and copy other layouts.

use crate::array::{Layout, collapse};

/// One axis of a walk: its extent and its step in the buffer, in elements.
pub(crate) type Axis = (usize, isize);

/// A reduction's input split into the axes that index outputs and the axes folded into
/// each of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReducePlan {
    /// The buffer position of each walk's first element (moved by [`Self::read_forwards`]
    /// and [`Self::take_run`] when they read reversed axes forwards).
    pub offset: usize,
    /// The kept axes of more than one element, in the output's order, not merged.
    pub kept: Vec<Axis>,
    /// The reduced axes still to walk: those of more than one element and, for idempotent
    /// folds, not broadcast; in the input's order until [`Self::read_forwards`] sorts them.
    pub red: Vec<Axis>,
    /// The number of outputs.
    pub nout: usize,
    /// Whether a reduced axis is empty (each output then folds no element).
    pub empty: bool,
}

/// The order of steps for the innermost loop: smaller steps first, broadcast axes last.
pub(crate) fn step_rank(s: isize) -> usize {
    if s == 0 { usize::MAX } else { s.unsigned_abs() }
}

impl ReducePlan {
    /// `layout` split for reducing the sorted `axes`. `idempotent` folds (max, min, all,
    /// any, arg-reductions) skip broadcast axes, which repeat one element; axes of one
    /// element are left out on both sides.
    pub fn new(layout: &Layout, axes: &[usize], idempotent: bool) -> ReducePlan {
        let mut plan = ReducePlan {
            offset: layout.offset,
            kept: Vec::new(),
            red: Vec::new(),
            nout: 1,
            empty: false,
        };
        for (i, (&n, &s)) in layout.shape.iter().zip(&layout.strides).enumerate() {
            if !axes.contains(&i) {
                plan.nout *= n;
                if n != 1 {
                    plan.kept.push((n, s));
                }
            } else if n == 0 {
                plan.empty = true;
            } else if n != 1 && !(idempotent && s == 0) {
                plan.red.push((n, s));
            }
        }
        plan
    }

    /// The kept axes with those that continue one another merged: shape and strides.
    pub fn merged_kept(&self) -> (Vec<usize>, Vec<isize>) {
        let shape: Vec<usize> = self.kept.iter().map(|k| k.0).collect();
        let strides: Vec<isize> = self.kept.iter().map(|k| k.1).collect();
        let (shape, mut strides) = collapse(&shape, &[&strides]);
        (shape, strides.swap_remove(0))
    }

    /// Whether the innermost kept axis (after merging) has step ±1, so that neighbouring
    /// outputs start at neighbouring elements.
    pub fn unit_inner(&self) -> bool {
        self.merged_kept()
            .1
            .last()
            .is_some_and(|s| s.unsigned_abs() == 1)
    }

    /// The reduced axis of the smallest step, taken out of [`Self::red`] as the innermost
    /// run, lengthened by the reduced axes that continue it (a contiguous full reduction
    /// becomes one run). With `forwards` (folds that do not depend on the order) a run of
    /// step -1 is read forwards from its lowest element. The axes left keep their order.
    pub fn take_run(&mut self, forwards: bool) -> Option<Axis> {
        let best = (0..self.red.len()).min_by_key(|&i| step_rank(self.red[i].1))?;
        let (mut n, mut s) = self.red.remove(best);
        while let Some(j) = self.red.iter().position(|&(_, rs)| rs == s * n as isize) {
            n *= self.red.remove(j).0;
        }
        if forwards && s == -1 {
            // Every run starts n - 1 elements earlier.
            self.offset -= n - 1;
            s = 1;
        }
        Some((n, s))
    }

    /// Every reversed reduced axis read forwards (the offset moves to its lowest element),
    /// the axes sorted outermost first and merged where one continues the next: the walk
    /// for kernels that may see their elements in any order.
    pub fn read_forwards(&mut self) {
        if self.empty {
            return;
        }
        let mut offset = self.offset as isize;
        let mut red: Vec<Axis> = self
            .red
            .iter()
            .map(|&(n, s)| {
                if s < 0 {
                    offset += (n as isize - 1) * s;
                    (n, -s)
                } else {
                    (n, s)
                }
            })
            .collect();
        self.offset = offset as usize;
        red.sort_by_key(|r| std::cmp::Reverse(r.1));
        self.red.clear();
        for (n, s) in red {
            match self.red.last_mut() {
                Some(last) if last.1 == n as isize * s => *last = (last.0 * n, s),
                _ => self.red.push((n, s)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forwards(layout: &Layout, axes: &[usize], idempotent: bool) -> ReducePlan {
        let mut p = ReducePlan::new(layout, axes, idempotent);
        p.read_forwards();
        p
    }

    #[test]
    fn read_forwards_merges_runs_and_reads_reversed_axes_forwards() {
        // [2, 3, 4] row-major, reducing the last two axes: one run of 12.
        let l = Layout::contiguous(&[2, 3, 4]);
        let p = forwards(&l, &[1, 2], false);
        assert_eq!((p.kept, p.red, p.offset), (vec![(2, 12)], vec![(12, 1)], 0));
        // The first and last axes: two reduced axes that do not merge.
        assert_eq!(forwards(&l, &[0, 2], false).red, vec![(2, 12), (4, 1)]);
        // A reversed axis starts at its last element.
        let rev = Layout {
            shape: vec![3, 4],
            strides: vec![-4, 1],
            offset: 8,
        };
        let p = forwards(&rev, &[0, 1], false);
        assert_eq!((p.red, p.offset), (vec![(12, 1)], 0));
        // Broadcast axes: skipped by max, counted by sum.
        let b = Layout {
            shape: vec![5, 3],
            strides: vec![0, 1],
            offset: 0,
        };
        assert_eq!(forwards(&b, &[0], true).red, vec![]);
        assert_eq!(forwards(&b, &[0], false).red, vec![(5, 0)]);
        let e = Layout::contiguous(&[0, 3]);
        assert!(forwards(&e, &[0], false).empty);
    }

    #[test]
    fn take_run_keeps_the_order_of_the_axes_left() {
        // [2, 3, 4] reducing the first and last axes: the run is the last axis.
        let l = Layout::contiguous(&[2, 3, 4]);
        let mut p = ReducePlan::new(&l, &[0, 2], false);
        assert_eq!(p.take_run(true), Some((4, 1)));
        assert_eq!(p.red, vec![(2, 12)]);
        assert!(!p.unit_inner());
        // Fully reversed: one run of 12 read forwards, unless the order matters.
        let rev = Layout {
            shape: vec![3, 4],
            strides: vec![-4, -1],
            offset: 11,
        };
        let mut p = ReducePlan::new(&rev, &[0, 1], false);
        assert_eq!((p.take_run(true), p.offset), (Some((12, 1)), 0));
        let mut p = ReducePlan::new(&rev, &[0, 1], false);
        assert_eq!((p.take_run(false), p.offset), (Some((12, -1)), 11));
        // Leading axes reduced: the kept axes merge into one of step 1.
        let p = ReducePlan::new(&l, &[0], false);
        assert_eq!(p.merged_kept(), (vec![12], vec![1]));
        assert!(p.unit_inner());
    }
}
