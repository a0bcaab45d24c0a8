//! The checks of a fused node's inputs, shared by the units' `specs`.

use crate::error::invalid;
use crate::primitive::OutputSpec;
use crate::{Array, Result};

/// The checks of one node, named after its operation.
pub(crate) struct Checker<'a> {
    pub(crate) op: &'static str,
    pub(crate) inputs: &'a [Array],
}

impl Checker<'_> {
    pub(crate) fn fail<T>(&self, msg: String) -> Result<T> {
        Err(invalid(self.op, msg))
    }

    pub(crate) fn count(&self, lo: usize, hi: usize) -> Result<()> {
        let n = self.inputs.len();
        if n < lo || n > hi {
            let want = if lo == hi {
                lo.to_string()
            } else {
                format!("{lo} to {hi}")
            };
            return self.fail(format!("{want} inputs expected, got {n}"));
        }
        Ok(())
    }

    /// Input `i`, checked to have `ndim` dimensions (`None`: at least one).
    pub(crate) fn rank(&self, i: usize, ndim: Option<usize>) -> Result<&Array> {
        let a = &self.inputs[i];
        let ok = match ndim {
            Some(n) => a.ndim() == n,
            None => a.ndim() > 0,
        };
        if !ok {
            let want = ndim.map_or("at least 1".to_string(), |n| n.to_string());
            return self.fail(format!(
                "input {i} must have {want} dimensions, got shape {:?}",
                a.shape()
            ));
        }
        Ok(a)
    }

    pub(crate) fn float(&self, i: usize) -> Result<()> {
        super::floating(self.op, self.inputs[i].dtype())
    }

    pub(crate) fn integer(&self, i: usize) -> Result<()> {
        let dtype = self.inputs[i].dtype();
        if !super::integral(dtype) {
            return self.fail(format!("input {i} must hold integers, got {dtype}"));
        }
        Ok(())
    }

    pub(crate) fn same_dtype(&self, i: usize, j: usize) -> Result<()> {
        let (a, b) = (self.inputs[i].dtype(), self.inputs[j].dtype());
        if a != b {
            return self.fail(format!("inputs {i} and {j} differ in type: {a} and {b}"));
        }
        Ok(())
    }

    pub(crate) fn shape(&self, i: usize, want: &[usize]) -> Result<()> {
        let got = self.inputs[i].shape();
        if got != want {
            return self.fail(format!("input {i} must have shape {want:?}, got {got:?}"));
        }
        Ok(())
    }

    /// A parameter of the last axis: 0-D (absent) or 1-D of `d` elements, of input 0's type.
    pub(crate) fn param(&self, i: usize, d: usize) -> Result<()> {
        let p = &self.inputs[i];
        if p.ndim() > 1 || (p.ndim() == 1 && p.size() != d) {
            return self.fail(format!(
                "input {i} must be 0-D or 1-D with {d} elements, got shape {:?}",
                p.shape()
            ));
        }
        self.same_dtype(0, i)
    }

    pub(crate) fn holds(&self, ok: bool, msg: impl FnOnce() -> String) -> Result<()> {
        if ok { Ok(()) } else { self.fail(msg()) }
    }

    /// The attention checks of inputs 0 to 2, `q` and the keys and values: each 4-D and of
    /// `q`'s floating type, their shapes fitting as `fits` says, and the query heads a
    /// multiple of the key heads (axis 1 of the keys). Returns the three shapes.
    pub(crate) fn attention(
        &self,
        fits: impl Fn(&[usize], &[usize], &[usize]) -> bool,
    ) -> Result<[&[usize]; 3]> {
        let (q, k, v) = (
            self.rank(0, Some(4))?,
            self.rank(1, Some(4))?,
            self.rank(2, Some(4))?,
        );
        self.float(0)?;
        self.same_dtype(0, 1)?;
        self.same_dtype(0, 2)?;
        let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
        self.holds(fits(qs, ks, vs) && ks[1] > 0 && qs[1] % ks[1] == 0, || {
            format!("incompatible shapes {qs:?}, {ks:?} and {vs:?}")
        })?;
        Ok([qs, ks, vs])
    }

    /// The rotation's checks: `dims` against input `x`'s features, and the optional
    /// frequencies at input `freqs`.
    pub(crate) fn rotation(&self, x: usize, freqs: usize, dims: usize) -> Result<()> {
        let c = self;
        let d = c.inputs[x].shape()[c.inputs[x].ndim() - 1];
        c.holds(dims > 0 && dims.is_multiple_of(2) && dims <= d, || {
            format!("dims must be even, positive and at most {d}, got {dims}")
        })?;
        if let Some(f) = c.inputs.get(freqs) {
            c.holds(f.ndim() == 1 && f.size() == dims / 2, || {
                format!("freqs must have {} elements, got {:?}", dims / 2, f.shape())
            })?;
            c.float(freqs)?;
        }
        Ok(())
    }
}

/// The spec of an output like `a`: its shape and type.
pub(crate) fn like(a: &Array) -> OutputSpec {
    (a.shape().to_vec(), a.dtype())
}
