//! [`FastOp::output_specs`]: the checks a fused node's inputs must pass (the public
//! functions check and convert their arguments first; these checks keep a node built by hand
//! from reaching a fallback that cannot take it) and the shape and type of each output.

use super::FastOp;
use crate::error::invalid;
use crate::primitive::OutputSpec;
use crate::{Array, DType, Result};

/// The checks of one node, named after its operation.
struct Checker<'a> {
    op: &'static str,
    inputs: &'a [Array],
}

impl Checker<'_> {
    fn fail<T>(&self, msg: String) -> Result<T> {
        Err(invalid(self.op, msg))
    }

    fn count(&self, lo: usize, hi: usize) -> Result<()> {
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
    fn rank(&self, i: usize, ndim: Option<usize>) -> Result<&Array> {
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

    fn float(&self, i: usize) -> Result<()> {
        super::floating(self.op, self.inputs[i].dtype())
    }

    fn integer(&self, i: usize) -> Result<()> {
        let dtype = self.inputs[i].dtype();
        if !super::integral(dtype) {
            return self.fail(format!("input {i} must hold integers, got {dtype}"));
        }
        Ok(())
    }

    fn same_dtype(&self, i: usize, j: usize) -> Result<()> {
        let (a, b) = (self.inputs[i].dtype(), self.inputs[j].dtype());
        if a != b {
            return self.fail(format!("inputs {i} and {j} differ in type: {a} and {b}"));
        }
        Ok(())
    }

    fn shape(&self, i: usize, want: &[usize]) -> Result<()> {
        let got = self.inputs[i].shape();
        if got != want {
            return self.fail(format!("input {i} must have shape {want:?}, got {got:?}"));
        }
        Ok(())
    }

    /// A parameter of the last axis: 0-D (absent) or 1-D of `d` elements, of input 0's type.
    fn param(&self, i: usize, d: usize) -> Result<()> {
        let p = &self.inputs[i];
        if p.ndim() > 1 || (p.ndim() == 1 && p.size() != d) {
            return self.fail(format!(
                "input {i} must be 0-D or 1-D with {d} elements, got shape {:?}",
                p.shape()
            ));
        }
        self.same_dtype(0, i)
    }

    fn holds(&self, ok: bool, msg: impl FnOnce() -> String) -> Result<()> {
        if ok { Ok(()) } else { self.fail(msg()) }
    }
}

fn like(a: &Array) -> OutputSpec {
    (a.shape().to_vec(), a.dtype())
}

impl FastOp {
    /// The shape and type of each output for these inputs, or the error that makes them
    /// invalid.
    pub fn output_specs(&self, inputs: &[Array]) -> Result<Vec<OutputSpec>> {
        let c = Checker {
            op: self.name(),
            inputs,
        };
        match self {
            FastOp::RmsNorm { .. } | FastOp::LayerNorm { .. } | FastOp::AddRmsNorm { .. } => {
                let params = if matches!(self, FastOp::RmsNorm { .. }) {
                    1
                } else {
                    2
                };
                c.count(1 + params, 1 + params)?;
                let x = c.rank(0, None)?;
                c.float(0)?;
                let d = x.shape()[x.ndim() - 1];
                let first_param = if let FastOp::AddRmsNorm { .. } = self {
                    c.shape(1, x.shape())?;
                    c.same_dtype(0, 1)?;
                    2
                } else {
                    1
                };
                for i in first_param..=params {
                    c.param(i, d)?;
                }
                Ok(match self {
                    FastOp::AddRmsNorm { .. } => vec![like(x), like(x)],
                    _ => vec![like(x)],
                })
            }
            FastOp::RmsNormVjp { .. } | FastOp::LayerNormVjp { .. } => {
                let params = if matches!(self, FastOp::RmsNormVjp { .. }) {
                    1
                } else {
                    2
                };
                c.count(params + 2, params + 2)?;
                let x = c.rank(0, None)?;
                c.float(0)?;
                let d = x.shape()[x.ndim() - 1];
                for i in 1..=params {
                    c.param(i, d)?;
                }
                c.shape(params + 1, x.shape())?;
                c.float(params + 1)?;
                Ok((0..=params).map(|i| like(&inputs[i])).collect())
            }
            FastOp::Rope { dims, .. } => {
                c.count(2, 3)?;
                let x = c.rank(0, None)?;
                c.float(0)?;
                c.holds(x.ndim() >= 3, || {
                    format!("the input needs 3 dimensions, got {:?}", x.shape())
                })?;
                self.rotation_checks(&c, 0, 2, *dims)?;
                let offset = &inputs[1];
                c.integer(1)?;
                c.holds(
                    offset.ndim() <= 1 && (offset.size() == 1 || offset.size() == x.shape()[0]),
                    || format!("offset of shape {:?} for {:?}", offset.shape(), x.shape()),
                )?;
                Ok(vec![like(x)])
            }
            FastOp::NormRope {
                dims,
                offset,
                cache,
                ..
            } => {
                let at = usize::from(*cache);
                c.count(2 + at, 3 + at)?;
                let x = c.rank(at, Some(4))?;
                c.float(at)?;
                let s = x.shape();
                c.param(at + 1, s[3])?;
                self.rotation_checks(&c, at, at + 2, *dims)?;
                if *cache {
                    let cache = c.rank(0, Some(4))?;
                    c.same_dtype(0, at)?;
                    let cs = cache.shape();
                    c.holds(
                        cs[..2] == s[..2] && cs[3] == s[3] && cs[2] >= offset + s[2],
                        || format!("a cache of shape {cs:?} cannot take {s:?} at {offset}"),
                    )?;
                }
                Ok(vec![like(&inputs[0])])
            }
            FastOp::DepthwiseConv1d {
                stride,
                padding,
                dilation,
            } => {
                c.count(2, 2)?;
                let (x, w) = (c.rank(0, Some(3))?, c.rank(1, Some(3))?);
                c.float(0)?;
                c.same_dtype(0, 1)?;
                let (n, l, ch) = (x.shape()[0], x.shape()[1], x.shape()[2]);
                let k = w.shape()[1];
                c.holds(w.shape() == [ch, k, 1] && k > 0, || {
                    format!("weights of shape {:?} for {ch} channels", w.shape())
                })?;
                c.holds(*stride > 0 && *dilation > 0, || {
                    "stride and dilation must be positive".into()
                })?;
                let l_out = super::conv::output_length(l, k, *stride, *padding, *dilation);
                Ok(vec![(vec![n, l_out, ch], x.dtype())])
            }
            FastOp::Softmax | FastOp::LogSumExp => {
                c.count(1, 1)?;
                let x = c.rank(0, None)?;
                c.float(0)?;
                let mut shape = x.shape().to_vec();
                if *self == FastOp::LogSumExp {
                    let last = shape.len() - 1;
                    c.holds(shape[last] > 0, || "cannot reduce an empty axis".into())?;
                    shape[last] = 1;
                }
                Ok(vec![(shape, x.dtype())])
            }
            FastOp::CrossEntropy | FastOp::CrossEntropyVjp => {
                let vjp = *self == FastOp::CrossEntropyVjp;
                c.count(if vjp { 4 } else { 2 }, if vjp { 4 } else { 2 })?;
                let x = c.rank(0, None)?;
                c.float(0)?;
                c.integer(1)?;
                let rows = &x.shape()[..x.ndim() - 1];
                c.shape(1, rows)?;
                if vjp {
                    c.shape(2, rows)?;
                    c.shape(3, rows)?;
                    c.float(2)?;
                    c.float(3)?;
                    return Ok(vec![like(x)]);
                }
                Ok(vec![(rows.to_vec(), DType::F32)])
            }
            FastOp::Attention { mask, sinks, .. } => {
                c.count(
                    3 + usize::from(*mask) + usize::from(*sinks),
                    3 + usize::from(*mask) + usize::from(*sinks),
                )?;
                let (q, k, v) = (
                    c.rank(0, Some(4))?,
                    c.rank(1, Some(4))?,
                    c.rank(2, Some(4))?,
                );
                c.float(0)?;
                c.same_dtype(0, 1)?;
                c.same_dtype(0, 2)?;
                let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
                c.holds(
                    ks[0] == qs[0]
                        && vs[0] == qs[0]
                        && ks[3] == qs[3]
                        && ks[1] == vs[1]
                        && ks[2] == vs[2]
                        && ks[1] > 0
                        && qs[1] % ks[1] == 0,
                    || format!("incompatible shapes {qs:?}, {ks:?} and {vs:?}"),
                )?;
                if *mask {
                    c.shape(3, &[qs[0], qs[1], qs[2], ks[2]])?;
                    if inputs[3].dtype() != DType::Bool {
                        c.same_dtype(0, 3)?;
                    }
                }
                if *sinks {
                    let last = inputs.len() - 1;
                    c.shape(last, &[qs[1]])?;
                    c.same_dtype(0, last)?;
                }
                Ok(vec![(vec![qs[0], qs[1], qs[2], vs[3]], q.dtype())])
            }
            FastOp::GatedDelta { steps } => {
                c.count(6, 6)?;
                let (b, t, hv, dv, dk) = gated_delta_checks(&c)?;
                let state = c.rank(5, Some(4))?;
                c.shape(5, &[b, hv, dv, dk])?;
                let mut shape = state.shape().to_vec();
                if *steps {
                    shape.insert(1, t);
                }
                Ok(vec![like_y(inputs), (shape, state.dtype())])
            }
            FastOp::GatedDeltaSlots => {
                c.count(7, 7)?;
                let (b, _, hv, dv, dk) = gated_delta_checks(&c)?;
                let pool = c.rank(5, Some(4))?;
                c.holds(pool.shape()[1..] == [hv, dv, dk], || {
                    format!(
                        "a pool of shape {:?} for states [{hv}, {dv}, {dk}]",
                        pool.shape()
                    )
                })?;
                c.integer(6)?;
                c.shape(6, &[b])?;
                Ok(vec![like_y(inputs), like(pool)])
            }
            FastOp::PagedAttention { .. } => {
                c.count(5, 5)?;
                let (q, kc, vc) = (
                    c.rank(0, Some(4))?,
                    c.rank(1, Some(4))?,
                    c.rank(2, Some(4))?,
                );
                c.float(0)?;
                c.same_dtype(0, 1)?;
                c.same_dtype(0, 2)?;
                let (qs, ks, vs) = (q.shape(), kc.shape(), vc.shape());
                c.holds(
                    ks[..3] == vs[..3] && ks[3] == qs[3] && ks[1] > 0 && qs[1] % ks[1] == 0,
                    || format!("incompatible shapes {qs:?}, {ks:?} and {vs:?}"),
                )?;
                let table = c.rank(3, Some(2))?;
                c.integer(3)?;
                c.integer(4)?;
                c.holds(table.shape()[0] == qs[0], || {
                    format!("a block table of shape {:?}", table.shape())
                })?;
                c.shape(4, &[qs[0]])?;
                Ok(vec![(vec![qs[0], qs[1], qs[2], vs[3]], q.dtype())])
            }
            FastOp::PagedWrite => {
                c.count(3, 3)?;
                let cache = c.rank(0, Some(4))?;
                c.float(0)?;
                let new = c.rank(1, Some(3))?;
                c.same_dtype(0, 1)?;
                let cs = cache.shape();
                c.shape(1, &[new.shape()[0], cs[1], cs[3]])?;
                c.integer(2)?;
                c.shape(2, &[new.shape()[0]])?;
                Ok(vec![like(cache)])
            }
            FastOp::GatherMm => {
                c.count(4, 5)?;
                let (a, b) = (&inputs[0], &inputs[1]);
                c.holds(a.ndim() >= 2 && b.ndim() >= 2, || {
                    format!("matrices expected, got {:?} and {:?}", a.shape(), b.shape())
                })?;
                c.float(0)?;
                c.same_dtype(0, 1)?;
                let (m, k) = (a.shape()[a.ndim() - 2], a.shape()[a.ndim() - 1]);
                let (k2, n) = (b.shape()[b.ndim() - 2], b.shape()[b.ndim() - 1]);
                c.holds(k == k2, || format!("inner sizes {k} and {k2} differ"))?;
                c.integer(2)?;
                c.integer(3)?;
                c.shape(3, inputs[2].shape())?;
                if inputs.len() == 5 {
                    c.rank(4, Some(1))?;
                    c.integer(4)?;
                }
                let mut shape = inputs[2].shape().to_vec();
                shape.extend([m, n]);
                Ok(vec![(shape, a.dtype())])
            }
            FastOp::GatherQmm {
                group_size,
                bits,
                transpose,
            } => {
                c.count(6, 7)?;
                let (x, w, scales) = (&inputs[0], &inputs[1], &inputs[2]);
                c.holds(x.ndim() >= 2 && w.ndim() >= 2, || {
                    format!("matrices expected, got {:?} and {:?}", x.shape(), w.shape())
                })?;
                c.float(0)?;
                c.same_dtype(0, 2)?;
                c.same_dtype(0, 3)?;
                c.holds(w.dtype() == DType::U32, || {
                    format!("the packed matrix must be uint32, got {}", w.dtype())
                })?;
                let nd = w.ndim();
                let (g, b) = (*group_size, usize::from(*bits));
                let words = w.shape()[nd - 1];
                c.holds(
                    matches!(g, 32 | 64 | 128)
                        && matches!(b, 2 | 3 | 4 | 5 | 6 | 8)
                        && scales.shape() == inputs[3].shape()
                        && scales.ndim() == nd
                        && scales.shape()[..nd - 1] == w.shape()[..nd - 1]
                        && (words * 32).is_multiple_of(b)
                        && words * 32 / b == scales.shape()[nd - 1] * g,
                    || {
                        format!(
                            "scales of shape {:?} do not fit a packed matrix of shape {:?} \
                             with group_size={g} and bits={b}",
                            scales.shape(),
                            w.shape()
                        )
                    },
                )?;
                let unpacked = scales.shape()[nd - 1] * g;
                let rows = w.shape()[nd - 2];
                let (k, n) = if *transpose {
                    (unpacked, rows)
                } else {
                    (rows, unpacked)
                };
                let kx = x.shape()[x.ndim() - 1];
                c.holds(kx == k, || format!("inner sizes {kx} and {k} differ"))?;
                c.integer(4)?;
                c.integer(5)?;
                c.shape(5, inputs[4].shape())?;
                if inputs.len() == 7 {
                    c.rank(6, Some(1))?;
                    c.integer(6)?;
                }
                let mut shape = inputs[4].shape().to_vec();
                shape.extend([x.shape()[x.ndim() - 2], n]);
                Ok(vec![(shape, x.dtype())])
            }
        }
    }

    /// The rotation's checks: `dims` against input `x`'s features, and the optional
    /// frequencies at input `freqs`.
    fn rotation_checks(&self, c: &Checker<'_>, x: usize, freqs: usize, dims: usize) -> Result<()> {
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

/// `y`'s spec for the gated delta nodes: `v`'s shape in `q`'s type.
fn like_y(inputs: &[Array]) -> OutputSpec {
    (inputs[2].shape().to_vec(), inputs[0].dtype())
}

/// The checks shared by the gated delta nodes (all but the state); `(B, T, Hv, Dv, Dk)`.
fn gated_delta_checks(c: &Checker<'_>) -> Result<(usize, usize, usize, usize, usize)> {
    let (q, v) = (c.rank(0, Some(4))?, c.rank(2, Some(4))?);
    for i in 0..6 {
        c.float(i)?;
    }
    c.shape(1, q.shape())?;
    let (b, t, hk, dk) = (q.shape()[0], q.shape()[1], q.shape()[2], q.shape()[3]);
    let (hv, dv) = (v.shape()[2], v.shape()[3]);
    c.holds(v.shape()[..2] == [b, t] && hk > 0 && hv % hk == 0, || {
        format!("v of shape {:?} for q of shape {:?}", v.shape(), q.shape())
    })?;
    c.shape(3, &[b, t, hv])?;
    c.shape(4, &[b, t, hv])?;
    Ok((b, t, hv, dv, dk))
}
