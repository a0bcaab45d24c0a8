//! [`scaled_dot_product_attention`] and the attention graph the paged form shares.

use super::check::Checker;
use super::{AttentionMask, FastOp, Fused, check_inputs, floating, one, wide};
use crate::backend::cpu::fast::CpuKernel;
use crate::backend::cuda::fast::CudaKernel;
use crate::error::invalid;
use crate::primitive::OutputSpec;
use crate::{Array, DType, Result, promote_types};
use crate::{add, divide, exp, matmul, multiply, reshape, subtract, sum};

/// Scaled dot-product attention, as MLX's `fast.scaled_dot_product_attention`:
/// `softmax(scale · q kᵀ + mask) v` over `[B, H, L, D]` arrays.
///
/// `k` and `v` may have fewer heads than `q` (grouped-query attention, `Hq` a multiple of
/// `Hkv`: query head `h` reads key head `h / (Hq / Hkv)`), and `v` its own head size.
/// Optional `sinks` (`[Hq]`) add one logit per head that takes part in the softmax but
/// attends to nothing. The inputs are promoted to one floating type. On the GPU, the shapes
/// MLX's kernels take record one fused node; the rest runs the equivalent composition.
///
/// ```
/// use nuvec_core::{Array, fast};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let q = Array::from_slice(&[1.0f32, 0.0], &[1, 1, 1, 2])?;
/// let k = Array::from_slice(&[0.0f32, 0.0, 0.0, 0.0], &[1, 1, 2, 2])?;
/// let v = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[1, 1, 2, 2])?;
/// // Equal scores: the mean of the two value rows.
/// let y = fast::scaled_dot_product_attention(&q, &k, &v, 1.0, fast::AttentionMask::None, None)?;
/// assert_eq!(y.to_vec::<f32>()?, [2.0, 3.0]);
/// # Ok(())
/// # }
/// ```
pub fn scaled_dot_product_attention(
    q: &Array,
    k: &Array,
    v: &Array,
    scale: f32,
    mask: AttentionMask<'_>,
    sinks: Option<&Array>,
) -> Result<Array> {
    const OP: &str = "scaled_dot_product_attention";
    check_inputs(&[q, k, v])?;
    let [qs, ks, _] = check_qkv(OP, [q, k, v], ["q, k and v", "key"], |qs, ks, vs| {
        ks[0] == qs[0] && vs[0] == qs[0] && qs[3] == ks[3] && ks[1] == vs[1] && ks[2] == vs[2]
    })?;
    let dtype = promote_types(promote_types(q.dtype(), k.dtype()), v.dtype());
    floating(OP, dtype)?;
    let mut inputs = vec![q.astype(dtype)?, k.astype(dtype)?, v.astype(dtype)?];
    let (causal, has_mask) = match mask {
        AttentionMask::None => (false, false),
        AttentionMask::Causal => (true, false),
        AttentionMask::Array(m) => {
            check_inputs(&[m])?;
            if m.ndim() > 4 {
                return Err(invalid(
                    OP,
                    format!(
                        "the mask must have at most 4 dimensions, got {:?}",
                        m.shape()
                    ),
                ));
            }
            let m = if m.dtype() == DType::Bool {
                m.clone()
            } else if promote_types(m.dtype(), dtype) == dtype {
                m.astype(dtype)?
            } else {
                return Err(invalid(
                    OP,
                    format!("a {} mask does not promote to {dtype}", m.dtype()),
                ));
            };
            inputs.push(crate::broadcast_to(&m, &[qs[0], qs[1], qs[2], ks[2]])?);
            (false, true)
        }
    };
    if let Some(s) = sinks {
        check_inputs(&[s])?;
        if s.ndim() != 1 || s.size() != qs[1] || promote_types(s.dtype(), dtype) != dtype {
            return Err(invalid(
                OP,
                format!("sinks must be [{}] of a type promoting to {dtype}", qs[1]),
            ));
        }
        inputs.push(s.astype(dtype)?);
    }
    let op = FastOp::Attention {
        scale: scale.to_bits(),
        causal,
        mask: has_mask,
        sinks: sinks.is_some(),
    };
    one(op, inputs)
}

/// The shape checks both attentions make of `q` and the keys and values, `[B, H, L, D]`
/// each: an error unless all three are 4-D (`names` says them), unless `fits` (each
/// attention's own rule of which axes agree), and unless the query heads are a multiple of
/// the `keys`' heads (each key head serves a group of them). Returns the three shapes.
pub(super) fn check_qkv<'a>(
    op: &'static str,
    [q, k, v]: [&'a Array; 3],
    [names, keys]: [&str; 2],
    fits: impl Fn(&[usize], &[usize], &[usize]) -> bool,
) -> Result<[&'a [usize]; 3]> {
    if [q, k, v].iter().any(|a| a.ndim() != 4) {
        return Err(invalid(
            op,
            format!(
                "{names} must be 4-D, got {:?}, {:?} and {:?}",
                q.shape(),
                k.shape(),
                v.shape()
            ),
        ));
    }
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    if !fits(qs, ks, vs) {
        return Err(invalid(
            op,
            format!("incompatible shapes {qs:?}, {ks:?} and {vs:?}"),
        ));
    }
    if ks[1] == 0 || qs[1] % ks[1] != 0 {
        return Err(invalid(
            op,
            format!(
                "the query heads ({}) must be a multiple of the {keys} heads ({})",
                qs[1], ks[1]
            ),
        ));
    }
    Ok([qs, ks, vs])
}

/// [`FastOp::Attention`]: `(q, k, v[, mask][, sinks])`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attention {
    /// The score scale.
    pub(crate) scale: f32,
    /// Causal masking, aligned at the end.
    pub(crate) causal: bool,
    /// Whether an array mask is the fourth input.
    pub(crate) mask: bool,
    /// Whether per-head sinks are the last input.
    pub(crate) sinks: bool,
}

impl Fused for Attention {
    fn name(&self) -> &'static str {
        "scaled_dot_product_attention"
    }

    fn specs(&self, c: &Checker<'_>) -> Result<Vec<OutputSpec>> {
        let n = 3 + usize::from(self.mask) + usize::from(self.sinks);
        c.count(n, n)?;
        let [qs, ks, vs] = c.attention(|qs, ks, vs| {
            ks[0] == qs[0] && vs[0] == qs[0] && ks[3] == qs[3] && ks[1] == vs[1] && ks[2] == vs[2]
        })?;
        if self.mask {
            c.shape(3, &[qs[0], qs[1], qs[2], ks[2]])?;
            if c.inputs[3].dtype() != DType::Bool {
                c.same_dtype(0, 3)?;
            }
        }
        if self.sinks {
            let last = c.inputs.len() - 1;
            c.shape(last, &[qs[1]])?;
            c.same_dtype(0, last)?;
        }
        Ok(vec![(
            vec![qs[0], qs[1], qs[2], vs[3]],
            c.inputs[0].dtype(),
        )])
    }

    fn fallback(&self, inputs: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![attention_graph(inputs, *self)?])
    }

    fn cpu(&self) -> Option<&dyn CpuKernel> {
        Some(self)
    }

    fn cuda(&self) -> Option<&dyn CudaKernel> {
        Some(self)
    }
}

/// The smallest finite value of a float type: what a boolean mask puts over hidden scores
/// (not −∞, so that a row hiding every key stays finite).
fn lowest(dtype: DType) -> f64 {
    crate::ops::binary::finite_range(dtype).0
}

/// [`FastOp::Attention`]'s fallback, `(q, k, v[, mask][, sinks])`: MLX's composition, with
/// the sinks folded into the softmax. Grouped heads become an extra axis of `q` that `k`
/// and `v` broadcast over, so no key is copied per query head.
pub(crate) fn attention_graph(inputs: &[Array], form: Attention) -> Result<Array> {
    let (q, k, v) = (&inputs[0], &inputs[1], &inputs[2]);
    let dtype = q.dtype();
    let (b, hq, lq, d) = (q.shape()[0], q.shape()[1], q.shape()[2], q.shape()[3]);
    let (hkv, lk, dv) = (k.shape()[1], k.shape()[2], v.shape()[3]);
    if b == 0 || hq == 0 || lq == 0 || lk == 0 {
        // Nothing to attend to (or nobody asking): zeros.
        return crate::zeros(&[b, hq, lq, dv], dtype);
    }
    let group = hq / hkv;
    let i = |n: usize| n as isize;
    let mut q = multiply(q, f64::from(form.scale))?;
    let (mut k, mut v) = (k.clone(), v.clone());
    if group > 1 {
        q = reshape(&q, &[i(b), i(hkv), i(group), i(lq), i(d)])?;
        k = crate::expand_dims(&k, 2)?;
        v = crate::expand_dims(&v, 2)?;
    }
    let mut scores = matmul(&q, &crate::swapaxes(&k, -1, -2)?)?;
    if form.mask {
        let m = &inputs[3];
        let m = if group > 1 {
            reshape(m, &[i(b), i(hkv), i(group), i(lq), i(lk)])?
        } else {
            m.clone()
        };
        scores = if m.dtype() == DType::Bool {
            crate::where_(&m, &scores, lowest(dtype))?
        } else {
            add(&scores, &m)?
        };
    }
    if form.causal {
        // The queries are the last `lq` positions of the keys.
        let first = lk as f64 - lq as f64;
        let rows = crate::arange(first, first + lq as f64, 1.0, DType::I32)?;
        let cols = crate::arange(0.0, lk as f64, 1.0, DType::I32)?;
        let seen =
            crate::greater_equal(crate::expand_dims(&rows, 1)?, crate::expand_dims(&cols, 0)?)?;
        scores = crate::where_(&seen, &scores, lowest(dtype))?;
    }
    let probs = if form.sinks {
        let s = wide(&scores)?;
        let sink = inputs[inputs.len() - 1].astype(s.dtype())?;
        let sink_shape: Vec<isize> = if group > 1 {
            vec![1, i(hkv), i(group), 1, 1]
        } else {
            vec![1, i(hq), 1, 1]
        };
        let sink = reshape(&sink, &sink_shape)?;
        // The largest logit of each row, the sink included, factored out for stability.
        let top = crate::stop_gradient(&crate::maximum(crate::max(&s, &[-1], true)?, &sink)?)?;
        let e = exp(&subtract(&s, &top)?)?;
        let total = add(sum(&e, &[-1], true)?, exp(&subtract(&sink, &top)?)?)?;
        divide(&e, &total)?.astype(dtype)?
    } else {
        crate::softmax(&scores, &[-1])?
    };
    let out = matmul(&probs, &v)?;
    if group > 1 {
        reshape(&out, &[i(b), i(hq), i(lq), i(dv)])
    } else {
        Ok(out)
    }
}
