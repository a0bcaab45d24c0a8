//! Rules of the indexing family: `take`, `take_along_axis`, `gather`, the scatters and
//! `slice_update`.
//!
//! Gathers clamp out-of-range indices and scatters skip them (see `ops/index.rs`), so the
//! rules resolve indices the same way: a gather's transpose scatters to the clamped places,
//! and an update that a scatter dropped gets no cotangent. Replace-scatters with repeated
//! indices keep the last update only, so only that one gets a cotangent.

use super::{JvpArgs, VjpArgs, or_zeros, output, single};
use crate::ops::index::{IndexOp, ScatterMode};
use crate::ops::shape::ShapeOp;
use crate::primitive::{Batched, Primitive};
use crate::{Array, Category, DType, Error, Result};
use crate::{equal, expand_dims, logical_and, multiply, where_, zeros, zeros_like};

fn unsupported(op: &IndexOp, what: &str) -> Error {
    Error::Unsupported {
        op: op.name(),
        what: what.into(),
    }
}

/// Records an indexing node.
fn node(op: IndexOp, inputs: Vec<Array>) -> Result<Array> {
    Array::op1(Primitive::Index(op), inputs)
}

/// `v` where `mask` holds, zero elsewhere.
fn masked(mask: &Array, v: &Array) -> Result<Array> {
    where_(mask, v, &zeros(&[], v.dtype())?)
}

/// Indices as `i64` with negative ones counted from the end of an axis of `dim`.
fn wrapped(idx: &Array, dim: usize) -> Result<Array> {
    match idx.dtype().category() {
        Category::Signed => {
            let v = idx.astype(DType::I64)?;
            where_(crate::less(&v, 0i64)?, crate::add(&v, dim as i64)?, &v)
        }
        // Past i64::MAX an index is out of range anyway: keep it so through the cast.
        _ if idx.dtype() == DType::U64 => crate::minimum(idx, i64::MAX as u64)?.astype(DType::I64),
        _ => idx.astype(DType::I64),
    }
}

/// Where a gather's window of `window` elements starts for each index: clamped inside `dim`.
fn clamped(idx: &Array, dim: usize, window: usize) -> Result<Array> {
    let last = dim.saturating_sub(window) as i64;
    crate::clip(&wrapped(idx, dim)?, Some(0i64), Some(last))
}

/// Whether a scatter writes the window of each index (it skips windows that do not fit).
fn fits(idx: &Array, dim: usize, window: usize) -> Result<Array> {
    if window > dim {
        return zeros(idx.shape(), DType::Bool);
    }
    let v = wrapped(idx, dim)?;
    logical_and(
        crate::greater_equal(&v, 0i64)?,
        crate::less_equal(&v, (dim - window) as i64)?,
    )
}

/// For a scatter's updates (`idx_shape + window`), whether each window is written: `None`
/// when every one is (no index arrays). Shaped to broadcast against the updates.
fn all_fit(
    a: &Array,
    indices: &[Array],
    axes: &[usize],
    window: &[usize],
) -> Result<Option<Array>> {
    let mut mask: Option<Array> = None;
    for (idx, &axis) in indices.iter().zip(axes) {
        let f = fits(idx, a.shape()[axis], window[axis])?;
        mask = Some(match mask {
            Some(m) => logical_and(&m, &f)?,
            None => f,
        });
    }
    mask.map(|m| {
        let mut shape: Vec<isize> = m.shape().iter().map(|&d| d as isize).collect();
        shape.extend(std::iter::repeat_n(1, window.len()));
        m.reshape(&shape)
    })
    .transpose()
}

/// Distinct `i64` labels, one per element of `shape`.
fn labels(shape: &[usize]) -> Result<Array> {
    let n: usize = shape.iter().product();
    let shape: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
    crate::arange(0.0, n as f64, 1.0, DType::I64)?.reshape(&shape)
}

/// Which update elements survive a replace-scatter: each element's label is scattered the
/// same way and read back; only the last writer of a place (and never a skipped one) finds
/// its own label there. `scatter` writes the labels into an array of `-1`s of the target's
/// shape, `gather` reads them back in the updates' shape.
fn survivors(
    target: &[usize],
    updates: &[usize],
    scatter: impl Fn(Array, Array) -> Result<Array>,
    gather: impl Fn(Array) -> Result<Array>,
) -> Result<Array> {
    let ids = labels(updates)?;
    let base = crate::full(target, -1i64, DType::I64)?;
    let back = gather(scatter(base, ids.clone())?)?;
    equal(&back, &ids)
}

/// The tangent of input `i`, zeros of its shape when it has none.
fn tangent(inputs: &[Array], tangents: &[Option<Array>], i: usize) -> Result<Array> {
    or_zeros(&tangents[i], &inputs[i])
}

/// The node's output: the recorded one, or the node again if that one was dropped.
fn result(op: &IndexOp, inputs: &[Array], outputs: &[Option<Array>]) -> Result<Array> {
    match output(outputs) {
        Ok(o) => Ok(o.clone()),
        Err(_) => node(op.clone(), inputs.to_vec()),
    }
}

pub(super) fn vjp(op: &IndexOp, call: VjpArgs<'_>) -> Result<Vec<Array>> {
    let g = single(call.cotangents)?;
    let a = &call.inputs[0];
    match op {
        IndexOp::Take { axis } => {
            let axis = *axis;
            let idx = &call.inputs[1];
            if g.size() == 0 {
                return constant_or(call.argnums, call.inputs, zeros_like(a)?);
            }
            // The cotangent is a[..axis] + idx + a[axis+1..]: bring the index axes to the
            // front, then a window of one along `axis`, and add it back at the clamped places.
            let ni = idx.ndim();
            let perm: Vec<usize> = (axis..axis + ni)
                .chain(0..axis)
                .chain(axis + ni..g.ndim())
                .collect();
            let upd = expand_dims(&crate::transpose(g, &perm)?, (ni + axis) as isize)?;
            let at = clamped(idx, a.shape()[axis], 1)?;
            let scatter = IndexOp::Scatter {
                axes: vec![axis],
                mode: ScatterMode::Sum,
            };
            constant_or(
                call.argnums,
                call.inputs,
                node(scatter, vec![zeros_like(a)?, at, upd])?,
            )
        }
        IndexOp::Gather { axes, slice_sizes } => {
            let mut args = vec![zeros_like(a)?];
            for (idx, &axis) in call.inputs[1..].iter().zip(axes) {
                args.push(clamped(idx, a.shape()[axis], slice_sizes[axis])?);
            }
            args.push(g.clone());
            let scatter = IndexOp::Scatter {
                axes: axes.clone(),
                mode: ScatterMode::Sum,
            };
            constant_or(call.argnums, call.inputs, node(scatter, args)?)
        }
        IndexOp::GatherAxis { axis } => {
            let at = clamped(&call.inputs[1], a.shape()[*axis], 1)?;
            let scatter = IndexOp::ScatterAxis {
                axis: *axis,
                mode: ScatterMode::Sum,
            };
            constant_or(
                call.argnums,
                call.inputs,
                node(scatter, vec![zeros_like(a)?, at, g.clone()])?,
            )
        }
        IndexOp::Scatter { axes, mode } => scatter_vjp(op, axes, *mode, g, call),
        IndexOp::ScatterAxis { axis, mode } => scatter_axis_vjp(op, *axis, *mode, g, call),
        IndexOp::SliceUpdate { start, step, mode } => slice_update_vjp(
            op,
            start,
            step,
            *mode,
            call.inputs,
            call.outputs,
            g,
            call.argnums,
        ),
    }
}

/// For a gather: `da` for input 0, zeros for the indices (never asked for by the driver).
fn constant_or(argnums: &[usize], inputs: &[Array], da: Array) -> Result<Vec<Array>> {
    argnums
        .iter()
        .map(|&i| {
            if i == 0 {
                Ok(da.clone())
            } else {
                zeros_like(&inputs[i])
            }
        })
        .collect()
}

/// The cotangent of a scatter's target for each mode (`None` for a product's updates, whose
/// rule this crate does not have).
fn scatter_target_cotangent(
    mode: ScatterMode,
    g: &Array,
    a: &Array,
    out: impl Fn() -> Result<Array>,
    rescatter: impl Fn(Array, Array, ScatterMode) -> Result<Array>,
    updates: &Array,
) -> Result<Array> {
    match mode {
        // Written places were overwritten: nothing flows back to them.
        ScatterMode::Replace => rescatter(g.clone(), zeros_like(updates)?, ScatterMode::Replace),
        ScatterMode::Sum => Ok(g.clone()),
        // Each element was multiplied by the updates that landed on it.
        ScatterMode::Prod => rescatter(g.clone(), updates.clone(), ScatterMode::Prod),
        // Only where the target's own element won (ties: both sides get it, as MLX).
        ScatterMode::Max | ScatterMode::Min => masked(&equal(&out()?, a)?, g),
    }
}

/// The cotangent of a scatter's updates `u` (written into `a`, the output's cotangent `g`):
/// `g` gathered where they were written, kept only where an update lands (`fit`: `None`
/// where every one does) and is what the output holds there (the last write for `Replace`,
/// the winner for `Max` and `Min`). Both scatters' rules share it; `what` names the
/// derivative a product scatter lacks.
#[allow(clippy::too_many_arguments)]
fn updates_cotangent(
    op: &IndexOp,
    mode: ScatterMode,
    what: &str,
    (g, a, u): (&Array, &Array, &Array),
    rescatter: impl Fn(Array, Array, ScatterMode) -> Result<Array>,
    gather: impl Fn(Array) -> Result<Array>,
    out: impl Fn() -> Result<Array>,
    fit: impl Fn() -> Result<Option<Array>>,
) -> Result<Array> {
    let gathered = gather(g.clone())?;
    let keep = match mode {
        ScatterMode::Replace => survivors(
            a.shape(),
            u.shape(),
            |t, ids| rescatter(t, ids, mode),
            &gather,
        )?,
        ScatterMode::Sum => match fit()? {
            Some(m) => m,
            None => return Ok(gathered),
        },
        ScatterMode::Max | ScatterMode::Min => {
            let won = equal(&gather(out()?)?, u)?;
            match fit()? {
                Some(m) => logical_and(&m, &won)?,
                None => won,
            }
        }
        ScatterMode::Prod => return Err(unsupported(op, what)),
    };
    masked(&keep, &gathered)
}

/// An example's parameters (start, step, axes, sizes) with the batch's entry first, for a
/// node that gains the batch as a leading axis.
fn batch_first<T>(batch: T, example: impl IntoIterator<Item = T>) -> Vec<T> {
    std::iter::once(batch).chain(example).collect()
}

fn scatter_vjp(
    op: &IndexOp,
    axes: &[usize],
    mode: ScatterMode,
    g: &Array,
    call: VjpArgs<'_>,
) -> Result<Vec<Array>> {
    let (inputs, outputs, argnums) = (call.inputs, call.outputs, call.argnums);
    let (a, u) = (&inputs[0], &inputs[inputs.len() - 1]);
    let indices = &inputs[1..inputs.len() - 1];
    let window = &u.shape()[u.ndim() - a.ndim()..];
    let out = || result(op, inputs, outputs);
    let rescatter = |target: Array, upd: Array, mode: ScatterMode| {
        let mut args = vec![target];
        args.extend(indices.iter().cloned());
        args.push(upd);
        node(
            IndexOp::Scatter {
                axes: axes.to_vec(),
                mode,
            },
            args,
        )
    };
    let gather = |x: Array| {
        let mut args = vec![x];
        args.extend(indices.iter().cloned());
        node(
            IndexOp::Gather {
                axes: axes.to_vec(),
                slice_sizes: window.to_vec(),
            },
            args,
        )
    };
    argnums
        .iter()
        .map(|&i| {
            if i == 0 {
                return scatter_target_cotangent(mode, g, a, out, rescatter, u);
            }
            if i != inputs.len() - 1 {
                return zeros_like(&inputs[i]);
            }
            if u.size() == 0 {
                return zeros_like(u);
            }
            let fit = || all_fit(a, indices, axes, window);
            let what = "the derivative for the updates";
            updates_cotangent(op, mode, what, (g, a, u), rescatter, gather, out, fit)
        })
        .collect()
}

fn scatter_axis_vjp(
    op: &IndexOp,
    axis: usize,
    mode: ScatterMode,
    g: &Array,
    call: VjpArgs<'_>,
) -> Result<Vec<Array>> {
    let (inputs, outputs, argnums) = (call.inputs, call.outputs, call.argnums);
    let (a, idx, v) = (&inputs[0], &inputs[1], &inputs[2]);
    let out = || result(op, inputs, outputs);
    let rescatter = |target: Array, upd: Array, mode: ScatterMode| {
        node(
            IndexOp::ScatterAxis { axis, mode },
            vec![target, idx.clone(), upd],
        )
    };
    let gather = |x: Array| node(IndexOp::GatherAxis { axis }, vec![x, idx.clone()]);
    argnums
        .iter()
        .map(|&i| match i {
            0 => scatter_target_cotangent(mode, g, a, out, rescatter, v),
            2 => {
                if v.size() == 0 || a.shape()[axis] == 0 {
                    // Nothing written (an empty axis skips every index).
                    return zeros_like(v);
                }
                let fit = || fits(idx, a.shape()[axis], 1).map(Some);
                let what = "the derivative for the values";
                updates_cotangent(op, mode, what, (g, a, v), rescatter, gather, out, fit)
            }
            _ => zeros_like(&inputs[i]),
        })
        .collect()
}

/// The region of `x` that a slice update writes (a view).
fn region(x: &Array, start: &[usize], step: &[isize], shape: &[usize]) -> Result<Array> {
    let ranges = start
        .iter()
        .zip(step)
        .zip(shape)
        .map(|((&s, &st), &n)| (s, st, n))
        .collect();
    Array::op1(Primitive::Shape(ShapeOp::Slice(ranges)), vec![x.clone()])
}

#[allow(clippy::too_many_arguments)]
fn slice_update_vjp(
    op: &IndexOp,
    start: &[usize],
    step: &[isize],
    mode: ScatterMode,
    inputs: &[Array],
    outputs: &[Option<Array>],
    g: &Array,
    argnums: &[usize],
) -> Result<Vec<Array>> {
    let (src, upd) = (&inputs[0], &inputs[1]);
    let shape = upd.shape();
    let update = |target: Array, u: Array, mode: ScatterMode| {
        let op = IndexOp::SliceUpdate {
            start: start.to_vec(),
            step: step.to_vec(),
            mode,
        };
        node(op, vec![target, u])
    };
    let out = || result(op, inputs, outputs);
    argnums
        .iter()
        .map(|&i| {
            if upd.size() == 0 {
                // An empty region: the output is `src`.
                return if i == 0 {
                    Ok(g.clone())
                } else {
                    zeros_like(upd)
                };
            }
            if i == 0 {
                return scatter_target_cotangent(mode, g, src, out, update, upd);
            }
            let g_region = region(g, start, step, shape)?;
            match mode {
                ScatterMode::Replace | ScatterMode::Sum => Ok(g_region),
                ScatterMode::Prod => multiply(&g_region, &region(src, start, step, shape)?),
                ScatterMode::Max | ScatterMode::Min => {
                    let won = equal(&region(&out()?, start, step, shape)?, upd)?;
                    masked(&won, &g_region)
                }
            }
        })
        .collect()
}

pub(super) fn jvp(op: &IndexOp, call: JvpArgs<'_>) -> Result<Vec<Array>> {
    let t0 = tangent(call.inputs, call.tangents, 0)?;
    let last = call.inputs.len() - 1;
    let with = |first: Array, last_arg: Option<Array>, op: IndexOp| {
        let mut args = vec![first];
        args.extend(call.inputs[1..last].iter().cloned());
        args.push(last_arg.unwrap_or_else(|| call.inputs[last].clone()));
        node(op, args)
    };
    let out = match op {
        // Gathers are linear in the array: gather its tangent.
        IndexOp::Take { .. } | IndexOp::Gather { .. } | IndexOp::GatherAxis { .. } => {
            let mut args = vec![t0];
            args.extend(call.inputs[1..].iter().cloned());
            node(op.clone(), args)?
        }
        IndexOp::Scatter { mode, .. }
        | IndexOp::ScatterAxis { mode, .. }
        | IndexOp::SliceUpdate { mode, .. } => {
            let tu = tangent(call.inputs, call.tangents, last)?;
            let remode = |mode: ScatterMode| {
                let mut o = op.clone();
                match &mut o {
                    IndexOp::Scatter { mode: m, .. }
                    | IndexOp::ScatterAxis { mode: m, .. }
                    | IndexOp::SliceUpdate { mode: m, .. } => *m = mode,
                    _ => {}
                }
                o
            };
            match mode {
                ScatterMode::Replace | ScatterMode::Sum => with(t0, Some(tu), op.clone())?,
                ScatterMode::Prod => {
                    prod_jvp(op, call.inputs, t0, &call.tangents[last], &with, &remode)?
                }
                ScatterMode::Max | ScatterMode::Min => {
                    // The winner's tangent: the target's where it won, plus each winning
                    // update's (ties count both, as the vjp does).
                    let out = result(op, call.inputs, call.outputs)?;
                    let ta = masked(&equal(&out, &call.inputs[0])?, &t0)?;
                    let won = update_won(op, call.inputs, &out)?;
                    with(ta, Some(masked(&won, &tu)?), remode(ScatterMode::Sum))?
                }
            }
        }
    };
    Ok(vec![out])
}

/// For max/min scatters: which update elements are the result at their place (and were
/// written at all), in the updates' shape.
fn update_won(op: &IndexOp, inputs: &[Array], out: &Array) -> Result<Array> {
    let (a, u) = (&inputs[0], &inputs[inputs.len() - 1]);
    match op {
        IndexOp::Scatter { axes, .. } => {
            let indices = &inputs[1..inputs.len() - 1];
            let window = &u.shape()[u.ndim() - a.ndim()..];
            let mut args = vec![out.clone()];
            args.extend(indices.iter().cloned());
            let gathered = node(
                IndexOp::Gather {
                    axes: axes.clone(),
                    slice_sizes: window.to_vec(),
                },
                args,
            )?;
            let won = equal(&gathered, u)?;
            match all_fit(a, indices, axes, window)? {
                Some(m) => logical_and(&m, &won),
                None => Ok(won),
            }
        }
        IndexOp::ScatterAxis { axis, .. } => {
            if u.size() == 0 || a.shape()[*axis] == 0 {
                return zeros(u.shape(), DType::Bool);
            }
            let idx = &inputs[1];
            let gathered = node(
                IndexOp::GatherAxis { axis: *axis },
                vec![out.clone(), idx.clone()],
            )?;
            logical_and(&fits(idx, a.shape()[*axis], 1)?, &equal(&gathered, u)?)
        }
        IndexOp::SliceUpdate { start, step, .. } => equal(&region(out, start, step, u.shape())?, u),
        _ => Err(unsupported(op, "jvp")),
    }
}

/// A product scatter's tangent. For the target it is its tangent times the product of the
/// updates at each place; for the updates only slice updates (no repeats) have a rule.
fn prod_jvp(
    op: &IndexOp,
    inputs: &[Array],
    t0: Array,
    tu: &Option<Array>,
    with: &dyn Fn(Array, Option<Array>, IndexOp) -> Result<Array>,
    remode: &dyn Fn(ScatterMode) -> IndexOp,
) -> Result<Array> {
    let scaled = with(t0, None, op.clone())?;
    let Some(tu) = tu else {
        return Ok(scaled);
    };
    match op {
        IndexOp::SliceUpdate { start, step, .. } => {
            let src = region(&inputs[0], start, step, tu.shape())?;
            with(scaled, Some(multiply(&src, tu)?), remode(ScatterMode::Sum))
        }
        _ => Err(unsupported(op, "the derivative for the updates")),
    }
}

/// `x` with its batch axis (if any) moved to the front and stretched to `size`.
fn front(x: &Array, ax: Option<usize>, size: usize) -> Result<Array> {
    match ax {
        Some(a) => crate::transforms::move_axis(x, a, 0),
        None => {
            let mut shape = vec![size];
            shape.extend_from_slice(x.shape());
            crate::broadcast_to(&expand_dims(x, 0)?, &shape)
        }
    }
}

/// `0..size` as an index along a leading batch axis, in `shape` (whose first axis is `size`).
fn batch_index(size: usize, shape: &[usize]) -> Result<Array> {
    let mut s = vec![size as isize];
    s.extend(std::iter::repeat_n(1, shape.len() - 1));
    let ar = crate::arange(0.0, size as f64, 1.0, DType::I64)?.reshape(&s)?;
    crate::broadcast_to(&ar, shape)
}

/// `x` without its axis `axis` (of size 1).
fn drop_axis(x: &Array, axis: usize) -> Result<Array> {
    let shape: Vec<isize> = x
        .shape()
        .iter()
        .enumerate()
        .filter(|&(d, _)| d != axis)
        .map(|(_, &n)| n as isize)
        .collect();
    x.reshape(&shape)
}

pub(super) fn vmap(op: &IndexOp, inputs: &[Array], axes: &[Option<usize>]) -> Result<Batched> {
    let size = inputs
        .iter()
        .zip(axes)
        .find_map(|(x, ax)| ax.map(|a| x.shape()[a]))
        .unwrap_or(1);
    let last = inputs.len() - 1;
    match op {
        IndexOp::Take { axis } => take_vmap(*axis, inputs, axes, size),
        IndexOp::Gather {
            axes: on,
            slice_sizes,
        } => gather_vmap(on, slice_sizes, inputs, axes, size),
        IndexOp::GatherAxis { axis } => {
            let args = vec![
                front(&inputs[0], axes[0], size)?,
                front(&inputs[1], axes[1], size)?,
            ];
            let out = node(IndexOp::GatherAxis { axis: axis + 1 }, args)?;
            Ok((vec![out], vec![Some(0)]))
        }
        IndexOp::ScatterAxis { axis, mode } => {
            let args = (0..3)
                .map(|i| front(&inputs[i], axes[i], size))
                .collect::<Result<Vec<_>>>()?;
            let op = IndexOp::ScatterAxis {
                axis: axis + 1,
                mode: *mode,
            };
            Ok((vec![node(op, args)?], vec![Some(0)]))
        }
        IndexOp::SliceUpdate { start, step, mode } => {
            let args = vec![
                front(&inputs[0], axes[0], size)?,
                front(&inputs[1], axes[1], size)?,
            ];
            let op = IndexOp::SliceUpdate {
                start: batch_first(0, start.iter().copied()),
                step: batch_first(1, step.iter().copied()),
                mode: *mode,
            };
            Ok((vec![node(op, args)?], vec![Some(0)]))
        }
        IndexOp::Scatter { axes: on, mode } => {
            let a = front(&inputs[0], axes[0], size)?;
            let u = &inputs[last];
            // The rank of one example's index arrays.
            let example = |i: usize| inputs[i].ndim() - usize::from(axes[i].is_some());
            let ni = example(last) - example(0);
            let shifted: Vec<usize> = on.iter().map(|&x| x + 1).collect();
            if axes[1..last].iter().all(Option::is_none) {
                // Shared indices: the batch is one more (whole) axis of every window.
                let u = match axes[last] {
                    Some(ax) => crate::transforms::move_axis(u, ax, ni)?,
                    None => {
                        let mut shape = u.shape().to_vec();
                        shape.insert(ni, size);
                        crate::broadcast_to(&expand_dims(u, ni as isize)?, &shape)?
                    }
                };
                let mut args = vec![a];
                args.extend(inputs[1..last].iter().cloned());
                args.push(u);
                let op = IndexOp::Scatter {
                    axes: shifted,
                    mode: *mode,
                };
                return Ok((vec![node(op, args)?], vec![Some(0)]));
            }
            // Batched indices: the batch axis is indexed too, by each example's number.
            let indices = (1..last)
                .map(|i| front(&inputs[i], axes[i], size))
                .collect::<Result<Vec<_>>>()?;
            let mut args = vec![a, batch_index(size, indices[0].shape())?];
            args.extend(indices);
            let u = expand_dims(&front(u, axes[last], size)?, (ni + 1) as isize)?;
            args.push(u);
            let op = IndexOp::Scatter {
                axes: batch_first(0, shifted),
                mode: *mode,
            };
            Ok((vec![node(op, args)?], vec![Some(0)]))
        }
    }
}

fn take_vmap(
    axis: usize,
    inputs: &[Array],
    axes: &[Option<usize>],
    size: usize,
) -> Result<Batched> {
    let (a, idx) = (&inputs[0], &inputs[1]);
    match (axes[0], axes[1]) {
        (Some(ax), None) => {
            // Take along the shifted axis: the batch stays put, or follows the index axes.
            let along = if ax <= axis { axis + 1 } else { axis };
            let out = node(IndexOp::Take { axis: along }, vec![a.clone(), idx.clone()])?;
            let at = if ax < along { ax } else { ax - 1 + idx.ndim() };
            Ok((vec![out], vec![Some(at)]))
        }
        (None, Some(k)) => {
            let out = node(IndexOp::Take { axis }, vec![a.clone(), idx.clone()])?;
            Ok((vec![out], vec![Some(axis + k)]))
        }
        _ => {
            // Both batched: a gather indexing the batch axis by each example's number and
            // `axis` by its indices, with windows of one along both.
            let a = front(a, axes[0], size)?;
            let idx = front(idx, axes[1], size)?;
            let ni = idx.ndim() - 1;
            let mut sizes = a.shape().to_vec();
            if sizes[axis + 1] == 0 {
                // Nothing to take from (so no indices either): the result is empty.
                let mut shape = vec![size];
                shape.extend_from_slice(&a.shape()[1..=axis]);
                shape.extend_from_slice(&idx.shape()[1..]);
                shape.extend_from_slice(&a.shape()[axis + 2..]);
                return Ok((vec![zeros(&shape, a.dtype())?], vec![Some(0)]));
            }
            sizes[0] = 1;
            sizes[axis + 1] = 1;
            let args = vec![a.clone(), batch_index(size, idx.shape())?, idx];
            let g = node(
                IndexOp::Gather {
                    axes: vec![0, axis + 1],
                    slice_sizes: sizes,
                },
                args,
            )?;
            // [B] + idx + [1] + a[..axis] + [1] + a[axis+1..]: drop the ones, then put the
            // index axes back at `axis`.
            let g = drop_axis(&drop_axis(&g, 2 + ni + axis)?, 1 + ni)?;
            let perm: Vec<usize> = std::iter::once(0)
                .chain(1 + ni..1 + ni + axis)
                .chain(1..1 + ni)
                .chain(1 + ni + axis..g.ndim())
                .collect();
            Ok((vec![crate::transpose(&g, &perm)?], vec![Some(0)]))
        }
    }
}

fn gather_vmap(
    on: &[usize],
    slice_sizes: &[usize],
    inputs: &[Array],
    axes: &[Option<usize>],
    size: usize,
) -> Result<Batched> {
    let shifted: Vec<usize> = on.iter().map(|&x| x + 1).collect();
    let indices_batched = axes[1..].iter().any(Option::is_some);
    match (axes[0], indices_batched) {
        (Some(ax), false) => {
            // Shared indices: the batch is one more (whole) axis of every window.
            let mut args = vec![crate::transforms::move_axis(&inputs[0], ax, 0)?];
            args.extend(inputs[1..].iter().cloned());
            let mut sizes = vec![size];
            sizes.extend_from_slice(slice_sizes);
            let op = IndexOp::Gather {
                axes: shifted,
                slice_sizes: sizes,
            };
            let at = inputs.get(1).map_or(0, Array::ndim);
            Ok((vec![node(op, args)?], vec![Some(at)]))
        }
        (None, _) => {
            let mut args = vec![inputs[0].clone()];
            for i in 1..inputs.len() {
                args.push(front(&inputs[i], axes[i], size)?);
            }
            let op = IndexOp::Gather {
                axes: on.to_vec(),
                slice_sizes: slice_sizes.to_vec(),
            };
            Ok((vec![node(op, args)?], vec![Some(0)]))
        }
        (Some(_), true) => {
            let a = front(&inputs[0], axes[0], size)?;
            let indices = (1..inputs.len())
                .map(|i| front(&inputs[i], axes[i], size))
                .collect::<Result<Vec<_>>>()?;
            let ni = indices[0].ndim() - 1;
            let mut args = vec![a, batch_index(size, indices[0].shape())?];
            args.extend(indices);
            let op = IndexOp::Gather {
                axes: batch_first(0, shifted),
                slice_sizes: batch_first(1, slice_sizes.iter().copied()),
            };
            // [B] + idx + [1] + window: drop the one.
            let out = drop_axis(&node(op, args)?, 1 + ni)?;
            Ok((vec![out], vec![Some(0)]))
        }
    }
}
