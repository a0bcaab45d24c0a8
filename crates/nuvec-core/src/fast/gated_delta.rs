//! The gated delta rule (Gated DeltaNet's recurrence): [`gated_delta`], every step's state
//! ([`gated_delta_steps`]) and states kept in a pool addressed by slot
//! ([`gated_delta_slots`]).

use super::check::{Checker, like};
use super::{FastOp, Fused, check_inputs, floating, integral, pair, record_or_fallback, span};
use crate::backend::cuda::fast::CudaKernel;
use crate::error::invalid;
use crate::primitive::OutputSpec;
use crate::{Array, DType, Result, SliceArg};
use crate::{add, expand_dims, multiply, reshape, squeeze, subtract, sum};

/// The gated delta rule, as mlx-lm's `gated_delta_update` once its gates are computed.
/// For each step `t` and value head, with `S` that head's state (`[Dv, Dk]`):
///
/// `S ← g_t · S`, then `S ← S + β_t (v_t − S k_t) k_tᵀ`, and `y_t = S q_t`.
///
/// Shapes: `q` and `k` are `[B, T, Hk, Dk]`, `v` is `[B, T, Hv, Dv]` (value head `h`
/// reads key head `h / (Hv / Hk)`), `g` and `beta` are `[B, T, Hv]`, `state` is
/// `[B, Hv, Dv, Dk]`. Returns `y` (`[B, T, Hv, Dv]`, in `q`'s type) and the final state (in
/// `state`'s type); the recurrence runs in float32 (float64 for float64 inputs). On the GPU
/// it is one kernel (for `Dk` a multiple of 32); elsewhere the steps are ordinary
/// operations, which also define the derivatives.
///
/// ```
/// use nuvec_core::{Array, DType, Result, fast, ones, zeros};
///
/// # fn main() -> Result<()> {
/// let q = ones(&[1, 2, 1, 32], DType::F32)?;
/// let v = ones(&[1, 2, 1, 4], DType::F32)?;
/// let (g, beta) = (ones(&[1, 2, 1], DType::F32)?, ones(&[1, 2, 1], DType::F32)?);
/// let state = zeros(&[1, 1, 4, 32], DType::F32)?;
/// let (y, s) = fast::gated_delta(&(&q * 0.25), &(&q * 0.125), &v, &g, &(&beta * 0.5), &state)?;
/// // k · k = 0.5 and k · q = 1. Step 1: S = 0.5 · v kᵀ, so y = 0.5. Step 2: S k = 0.25,
/// // so S gains (1 − 0.25) · 0.5 · v kᵀ, and y = 0.875.
/// assert_eq!(y.to_vec::<f32>()?, [0.5, 0.5, 0.5, 0.5, 0.875, 0.875, 0.875, 0.875]);
/// assert_eq!(s.shape(), [1, 1, 4, 32]);
/// # Ok(())
/// # }
/// ```
pub fn gated_delta(
    q: &Array,
    k: &Array,
    v: &Array,
    g: &Array,
    beta: &Array,
    state: &Array,
) -> Result<(Array, Array)> {
    recurrence(q, k, v, g, beta, state, false)
}

/// [`gated_delta`] returning the state after every step, `[B, T, Hv, Dv, Dk]` (step `t`'s
/// state at index `t`, the last one [`gated_delta`]'s final state), so that a caller can
/// roll the recurrence back to any step, as speculative decoding does after a rejected
/// draft. `y` equals [`gated_delta`]'s; keeping every state costs `T` times its size.
///
/// ```
/// use nuvec_core::{DType, fast, ones, zeros};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let q = ones(&[1, 3, 1, 2], DType::F32)?;
/// let v = ones(&[1, 3, 1, 1], DType::F32)?;
/// let g = ones(&[1, 3, 1], DType::F32)?;
/// let state = zeros(&[1, 1, 1, 2], DType::F32)?;
/// let (_, states) = fast::gated_delta_steps(&q, &(&q * 0.5), &v, &g, &(&g * 0.5), &state)?;
/// assert_eq!(states.shape(), [1, 3, 1, 1, 2]);
/// # Ok(())
/// # }
/// ```
pub fn gated_delta_steps(
    q: &Array,
    k: &Array,
    v: &Array,
    g: &Array,
    beta: &Array,
    state: &Array,
) -> Result<(Array, Array)> {
    recurrence(q, k, v, g, beta, state, true)
}

/// [`gated_delta`] for a batch of sequences whose states live in a shared pool
/// (`[S, Hv, Dv, Dk]`): sequence `b` starts from `pool[slots[b]]` (`slots`: `[B]`
/// integers, distinct) and its final state is written back there. Returns `y` and the new
/// pool; entries no slot names are unchanged, and a pool another array still holds is
/// copied, never written.
///
/// ```
/// use nuvec_core::{DType, fast, ones, zeros, Array};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let q = ones(&[1, 1, 1, 2], DType::F32)?;
/// let v = ones(&[1, 1, 1, 1], DType::F32)?;
/// let g = ones(&[1, 1, 1], DType::F32)?;
/// let pool = zeros(&[3, 1, 1, 2], DType::F32)?;
/// let slots = Array::from_slice(&[2i32], &[1])?;
/// let (y, pool) = fast::gated_delta_slots(&q, &(&q * 0.5), &v, &g, &g, &pool, &slots)?;
/// // From zero, S = β v kᵀ = [0.5, 0.5], written to slot 2; y = S q = 1.
/// assert_eq!(y.to_vec::<f32>()?, [1.0]);
/// assert_eq!(pool.to_vec::<f32>()?, [0.0, 0.0, 0.0, 0.0, 0.5, 0.5]);
/// # Ok(())
/// # }
/// ```
pub fn gated_delta_slots(
    q: &Array,
    k: &Array,
    v: &Array,
    g: &Array,
    beta: &Array,
    pool: &Array,
    slots: &Array,
) -> Result<(Array, Array)> {
    const OP: &str = "gated_delta_slots";
    check_inputs(&[pool, slots])?;
    let (b, hv, dv, dk) = check_sequences(OP, q, k, v, g, beta, pool)?;
    if pool.ndim() != 4 || pool.shape()[1..] != [hv, dv, dk] {
        return Err(invalid(
            OP,
            format!(
                "the pool must be [S, {hv}, {dv}, {dk}], got {:?}",
                pool.shape()
            ),
        ));
    }
    if slots.shape() != [b] || !integral(slots.dtype()) {
        return Err(invalid(
            OP,
            format!(
                "slots must be [{b}] integers, got {:?} of {}",
                slots.shape(),
                slots.dtype()
            ),
        ));
    }
    let inputs = vec![
        q.clone(),
        k.clone(),
        v.clone(),
        g.clone(),
        beta.clone(),
        pool.clone(),
        slots.astype(DType::I32)?,
    ];
    let op = FastOp::GatedDeltaSlots;
    Ok(pair(record_or_fallback(op, inputs)?))
}

/// The checks shared by the gated delta operations (all but the state's shape):
/// `(B, Hv, Dv, Dk)`.
fn check_sequences(
    op: &'static str,
    q: &Array,
    k: &Array,
    v: &Array,
    g: &Array,
    beta: &Array,
    state: &Array,
) -> Result<(usize, usize, usize, usize)> {
    check_inputs(&[q, k, v, g, beta, state])?;
    for a in [q, k, v, g, beta, state] {
        floating(op, a.dtype())?;
    }
    if q.ndim() != 4 || q.shape() != k.shape() || v.ndim() != 4 {
        return Err(invalid(
            op,
            format!(
                "q and k must be [B, T, Hk, Dk] and v [B, T, Hv, Dv], got {:?}, {:?} and {:?}",
                q.shape(),
                k.shape(),
                v.shape()
            ),
        ));
    }
    let (b, t, hk, dk) = (q.shape()[0], q.shape()[1], q.shape()[2], q.shape()[3]);
    let (hv, dv) = (v.shape()[2], v.shape()[3]);
    if v.shape()[..2] != [b, t] || hk == 0 || hv % hk != 0 {
        return Err(invalid(
            op,
            format!(
                "v must be [{b}, {t}, Hv, Dv] with Hv a multiple of {hk}, got {:?}",
                v.shape()
            ),
        ));
    }
    if g.shape() != [b, t, hv] || beta.shape() != [b, t, hv] {
        return Err(invalid(
            op,
            format!(
                "g and beta must be [{b}, {t}, {hv}], got {:?} and {:?}",
                g.shape(),
                beta.shape()
            ),
        ));
    }
    Ok((b, hv, dv, dk))
}

fn recurrence(
    q: &Array,
    k: &Array,
    v: &Array,
    g: &Array,
    beta: &Array,
    state: &Array,
    steps: bool,
) -> Result<(Array, Array)> {
    const OP: &str = "gated_delta";
    let (b, hv, dv, dk) = check_sequences(OP, q, k, v, g, beta, state)?;
    if state.shape() != [b, hv, dv, dk] {
        return Err(invalid(
            OP,
            format!(
                "state must be [{b}, {hv}, {dv}, {dk}], got {:?}",
                state.shape()
            ),
        ));
    }
    let inputs = vec![
        q.clone(),
        k.clone(),
        v.clone(),
        g.clone(),
        beta.clone(),
        state.clone(),
    ];
    let op = FastOp::GatedDelta { steps };
    Ok(pair(record_or_fallback(op, inputs)?))
}

/// [`FastOp::GatedDelta`]'s fallback, `(q, k, v, g, beta, state)`: the recurrence step by
/// step from ordinary operations (mlx-lm's `gated_delta_ops`).
fn gated_delta_graph(inputs: &[Array], steps: bool) -> Result<Vec<Array>> {
    let [q, k, v, g, beta, state] = inputs else {
        unreachable!("the gated delta node has six inputs")
    };
    let (b, t, hk, dk) = (q.shape()[0], q.shape()[1], q.shape()[2], q.shape()[3]);
    let (hv, dv) = (v.shape()[2], v.shape()[3]);
    let group = hv / hk;
    // Each key head serves `group` consecutive value heads: repeat it that many times.
    let per_value_head = |x: &Array| -> Result<Array> {
        if group == 1 {
            return Ok(x.clone());
        }
        let wide = crate::broadcast_to(&expand_dims(x, 3)?, &[b, t, hk, group, dk])?;
        reshape(&wide, &super::dims(&[b, t, hv, dk]))
    };
    let (qh, kh) = (
        per_value_head(&super::wide(q)?)?,
        per_value_head(&super::wide(k)?)?,
    );
    let (v32, g32, beta32) = (super::wide(v)?, super::wide(g)?, super::wide(beta)?);
    // Step `i` of a `[B, T, ...]` array.
    let at = |x: &Array, i: usize| -> Result<Array> {
        let mut args = vec![SliceArg::full(); x.ndim()];
        args[1] = span(i, i + 1);
        squeeze(&crate::slice(x, &args)?, &[1])
    };
    let mut s = super::wide(state)?;
    let mut ys = Vec::with_capacity(t);
    let mut states = Vec::with_capacity(if steps { t } else { 0 });
    for i in 0..t {
        let (qt, kt, vt) = (at(&qh, i)?, expand_dims(&at(&kh, i)?, 2)?, at(&v32, i)?);
        let decay = reshape(&at(&g32, i)?, &super::dims(&[b, hv, 1, 1]))?;
        s = multiply(&s, &decay)?;
        // What the state recalls for this key, and the correction towards v.
        let recalled = sum(&multiply(&s, &kt)?, &[-1], false)?;
        let delta = multiply(
            subtract(&vt, &recalled)?,
            expand_dims(&at(&beta32, i)?, -1)?,
        )?;
        s = add(&s, multiply(&kt, expand_dims(&delta, -1)?)?)?;
        let y = sum(&multiply(&s, expand_dims(&qt, 2)?)?, &[-1], false)?;
        ys.push(y.astype(q.dtype())?);
        if steps {
            states.push(s.astype(state.dtype())?);
        }
    }
    let y = if ys.is_empty() {
        crate::zeros(&[b, 0, hv, dv], q.dtype())?
    } else {
        crate::stack(&ys, 1)?
    };
    let last = match (steps, states.is_empty()) {
        (false, _) => s.astype(state.dtype())?,
        (true, false) => crate::stack(&states, 1)?,
        (true, true) => crate::zeros(&[b, 0, hv, dv, dk], state.dtype())?,
    };
    Ok(vec![y, last])
}

/// [`FastOp::GatedDeltaSlots`]'s fallback, `(q, k, v, g, beta, pool, slots)`: the states
/// taken from the pool, the recurrence, and the final states scattered back.
fn slots_graph(inputs: &[Array]) -> Result<Vec<Array>> {
    let (pool, slots) = (&inputs[5], &inputs[6]);
    let state = crate::take(pool, slots, Some(0))?;
    let mut sequence = inputs[..5].to_vec();
    sequence.push(state);
    let (y, last) = pair(gated_delta_graph(&sequence, false)?);
    if slots.size() == 0 {
        return Ok(vec![y, pool.clone()]);
    }
    let windows = expand_dims(&last, 1)?;
    let new_pool = crate::scatter(pool, std::slice::from_ref(slots), &windows, &[0])?;
    Ok(vec![y, new_pool])
}

/// [`FastOp::GatedDelta`]: `(q, k, v, g, beta, state)` to `(y, state)`.
pub(crate) struct GatedDelta {
    /// Every step's state instead of the last one.
    pub(crate) steps: bool,
}

/// [`FastOp::GatedDeltaSlots`]: `(q, k, v, g, beta, pool, slots)` to `(y, pool)`.
pub(crate) struct GatedDeltaSlots;

/// `y`'s spec for the gated delta nodes: `v`'s shape in `q`'s type.
fn like_y(inputs: &[Array]) -> OutputSpec {
    (inputs[2].shape().to_vec(), inputs[0].dtype())
}

/// The checks shared by the gated delta nodes (all but the state); `(B, T, Hv, Dv, Dk)`.
fn node_checks(c: &Checker<'_>) -> Result<(usize, usize, usize, usize, usize)> {
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

impl Fused for GatedDelta {
    fn name(&self) -> &'static str {
        "gated_delta"
    }

    fn output_count(&self) -> usize {
        2
    }

    fn specs(&self, c: &Checker<'_>) -> Result<Vec<OutputSpec>> {
        c.count(6, 6)?;
        let (b, t, hv, dv, dk) = node_checks(c)?;
        let state = c.rank(5, Some(4))?;
        c.shape(5, &[b, hv, dv, dk])?;
        let mut shape = state.shape().to_vec();
        if self.steps {
            shape.insert(1, t);
        }
        Ok(vec![like_y(c.inputs), (shape, state.dtype())])
    }

    fn fallback(&self, inputs: &[Array]) -> Result<Vec<Array>> {
        gated_delta_graph(inputs, self.steps)
    }

    fn cuda(&self) -> Option<&dyn CudaKernel> {
        Some(self)
    }
}

impl Fused for GatedDeltaSlots {
    fn name(&self) -> &'static str {
        "gated_delta_slots"
    }

    fn output_count(&self) -> usize {
        2
    }

    fn specs(&self, c: &Checker<'_>) -> Result<Vec<OutputSpec>> {
        c.count(7, 7)?;
        let (b, _, hv, dv, dk) = node_checks(c)?;
        let pool = c.rank(5, Some(4))?;
        c.holds(pool.shape()[1..] == [hv, dv, dk], || {
            format!(
                "a pool of shape {:?} for states [{hv}, {dv}, {dk}]",
                pool.shape()
            )
        })?;
        c.integer(6)?;
        c.shape(6, &[b])?;
        Ok(vec![like_y(c.inputs), like(pool)])
    }

    fn fallback(&self, inputs: &[Array]) -> Result<Vec<Array>> {
        slots_graph(inputs)
    }

    fn cuda(&self) -> Option<&dyn CudaKernel> {
        Some(self)
    }
}
