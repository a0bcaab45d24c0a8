//! Rules of the reduction family: reductions over axes, arg-reductions, scans and softmax.
//!
//! Choices where the derivative is not unique:
//! - `max`/`min` over axes: the cotangent is split equally among the elements equal to the
//!   result (as MLX does), and the tangent is the mean of their tangents.
//! - `cummax`/`cummin`: each running extreme is credited to the latest position (in scan
//!   order) holding it, so a tie passes the derivative to the newer element (as PyTorch's
//!   indices). The rules gather and scatter along the axis (`take_along_axis`,
//!   `scatter_add_axis`), so their own derivatives and batching come from the index rules.
//! - `prod` and `cumprod` are right at zeros: `prod` uses the product of the other elements
//!   (two exclusive cumulative products, no division); `cumprod` divides only by nonzero
//!   elements and treats each scan's first zero separately (the products with
//!   that zero replaced by one), as MLX does; later zeros get nothing. First derivatives are
//!   exact with any number of zeros; of higher ones, only the mixed derivative between two
//!   zeros of one scan is missed (reported as zero).
//! - `all`, `any` and the arg-reductions are not differentiable (their outputs are booleans
//!   and integers): their tangents are zeros of the output's type.

use super::{JvpArgs, VjpArgs, output, single};
use crate::ops::reduce::scan::scan_node;
use crate::ops::reduce::{ArgReduceOp, ReduceOp, ScanOp};
use crate::primitive::{Batched, Primitive};
use crate::{Array, DType, Result};
use crate::{add, divide, equal, exp, log, multiply, subtract, where_};

/// A scan's parameters: the operation, its axis, `reverse` and `inclusive`.
pub(super) type ScanSpec = (ScanOp, usize, bool, bool);

fn as_isize(axes: &[usize]) -> Vec<isize> {
    axes.iter().map(|&a| a as isize).collect()
}

/// `axes` (unbatched positions) as positions in an array with a batch axis at `batch`.
fn shift_axes(axes: &[usize], batch: usize) -> Vec<usize> {
    axes.iter()
        .map(|&a| if a >= batch { a + 1 } else { a })
        .collect()
}

/// The product of every reduced element but the one at each position, of `x`'s shape:
/// exclusive cumulative products from both ends of the reduced elements (flattened into one
/// last axis), multiplied. Right when some elements are zero; no division.
fn others_product(x: &Array, axes: &[usize]) -> Result<Array> {
    let mut perm: Vec<usize> = (0..x.ndim()).filter(|i| !axes.contains(i)).collect();
    let lead = perm.len();
    perm.extend_from_slice(axes);
    let moved = crate::transpose(x, &perm)?;
    let moved_shape: Vec<isize> = moved.shape().iter().map(|&d| d as isize).collect();
    let mut flat: Vec<isize> = moved_shape[..lead].to_vec();
    flat.push(moved_shape[lead..].iter().product());
    let flat = crate::reshape(&moved, &flat)?;
    let last = flat.ndim() - 1;
    let before = scan_node(ScanOp::Prod, &flat, last, false, false)?;
    let after = scan_node(ScanOp::Prod, &flat, last, true, false)?;
    let others = crate::reshape(&multiply(&before, &after)?, &moved_shape)?;
    let mut inverse = vec![0; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inverse[p] = i;
    }
    crate::transpose(&others, &inverse)
}

/// `d out / d x` of a differentiable reduction, of `x`'s shape (`out` keeps the reduced axes
/// as size 1), or `None` for `sum`, whose derivative is one everywhere.
fn reduce_weights(op: ReduceOp, axes: &[usize], x: &Array, out: &Array) -> Result<Option<Array>> {
    Ok(Some(match op {
        ReduceOp::Sum => return Ok(None),
        ReduceOp::Prod => others_product(x, axes)?,
        ReduceOp::Max | ReduceOp::Min => {
            // Ties share the derivative equally.
            let hit = equal(x, out)?.astype(x.dtype())?;
            let count = crate::sum(&hit, &as_isize(axes), true)?;
            divide(&hit, &count)?
        }
        ReduceOp::LogSumExp => exp(&subtract(x, out)?)?,
        // Not differentiable (callers return zeros before asking).
        ReduceOp::All | ReduceOp::Any => crate::zeros_like(x)?,
    }))
}

pub(super) fn reduce_vjp(op: ReduceOp, axes: &[usize], call: VjpArgs<'_>) -> Result<Vec<Array>> {
    let x = &call.inputs[0];
    if matches!(op, ReduceOp::All | ReduceOp::Any) {
        return call
            .argnums
            .iter()
            .map(|&i| crate::zeros_like(&call.inputs[i]))
            .collect();
    }
    let g = single(call.cotangents)?;
    let dx = match reduce_weights(op, axes, x, output(call.outputs)?)? {
        None => crate::broadcast_to(g, x.shape())?,
        Some(w) => multiply(g, &w)?,
    };
    Ok(vec![dx.astype(x.dtype())?])
}

pub(super) fn reduce_jvp(op: ReduceOp, axes: &[usize], call: JvpArgs<'_>) -> Result<Vec<Array>> {
    let out = output(call.outputs)?;
    let t = match &call.tangents[0] {
        Some(t) if !matches!(op, ReduceOp::All | ReduceOp::Any) => t,
        _ => return Ok(vec![crate::zeros_like(out)?]),
    };
    let weighted = match reduce_weights(op, axes, &call.inputs[0], out)? {
        None => t.clone(),
        Some(w) => multiply(t, &w)?,
    };
    Ok(vec![
        crate::sum(&weighted, &as_isize(axes), true)?.astype(out.dtype())?,
    ])
}

pub(super) fn reduce_vmap(
    op: ReduceOp,
    axes: &[usize],
    inputs: &[Array],
    batch: &[Option<usize>],
) -> Result<Batched> {
    let x = &inputs[0];
    let build =
        |axes: Vec<usize>, x: &Array| Array::op1(Primitive::Reduce { op, axes }, vec![x.clone()]);
    let Some(b) = batch[0] else {
        return Ok((vec![build(axes.to_vec(), x)?], vec![None]));
    };
    let last = x.ndim() - 1;
    if op == ReduceOp::LogSumExp && b == last {
        // The primitive reduces the last axis only: the batch moves out of the way.
        let front = crate::transforms::move_axis(x, b, 0)?;
        return Ok((vec![build(vec![last], &front)?], vec![Some(0)]));
    }
    Ok((vec![build(shift_axes(axes, b), x)?], vec![Some(b)]))
}

pub(super) fn arg_reduce_vmap(
    op: ArgReduceOp,
    axis: usize,
    inputs: &[Array],
    batch: &[Option<usize>],
) -> Result<Batched> {
    let build = |axis: usize| Array::op1(Primitive::ArgReduce { op, axis }, inputs.to_vec());
    match batch[0] {
        None => Ok((vec![build(axis)?], vec![None])),
        Some(b) => Ok((vec![build(shift_axes(&[axis], b)[0])?], vec![Some(b)])),
    }
}

/// Where each position's running extreme came from along `axis`: the latest position, in
/// scan order, whose value reaches the scan's output there (`attains`), as `int32`, plus a
/// mask of the positions that have one (an exclusive scan's first position has none).
fn scan_winners(
    attains: &Array,
    axis: usize,
    reverse: bool,
    inclusive: bool,
) -> Result<(Array, Array)> {
    let n = attains.shape()[axis];
    let mut shape = vec![1isize; attains.ndim()];
    shape[axis] = n as isize;
    let index = crate::reshape(&crate::arange(0.0, n as f64, 1.0, DType::I32)?, &shape)?;
    let (winner, valid) = if reverse {
        let w = scan_node(
            ScanOp::Min,
            &where_(attains, &index, n as i32)?,
            axis,
            true,
            inclusive,
        )?;
        let valid = crate::less(&w, n as i32)?;
        (w, valid)
    } else {
        let w = scan_node(
            ScanOp::Max,
            &where_(attains, &index, -1)?,
            axis,
            false,
            inclusive,
        )?;
        let valid = crate::greater_equal(&w, 0)?;
        (w, valid)
    };
    Ok((where_(&valid, &winner, 0)?, valid))
}

/// The pieces of `cumprod`'s derivative at zeros: the mask of zeros, the mask of each scan's
/// first zero, `x` with zeros replaced by one (to divide by), and the scan of `x` with its
/// first zero replaced by one.
fn cumprod_parts(
    x: &Array,
    axis: usize,
    reverse: bool,
    inclusive: bool,
) -> Result<(Array, Array, Array, Array)> {
    let zero = equal(x, 0.0)?;
    let zeros_before = scan_node(ScanOp::Sum, &zero, axis, reverse, false)?;
    let first = crate::logical_and(&zero, &equal(&zeros_before, 0)?)?;
    let safe = where_(&zero, 1.0, x)?;
    let skipped = scan_node(
        ScanOp::Prod,
        &where_(&first, 1.0, x)?,
        axis,
        reverse,
        inclusive,
    )?;
    Ok((zero, first, safe, skipped))
}

/// `log(max(±v, 0))` with `-∞` where `±v ≤ 0` (no infinite derivative at zero): the two
/// halves of a signed value in log space.
fn log_parts(v: &Array) -> Result<(Array, Array)> {
    let pos = crate::greater(v, 0.0)?;
    let neg = crate::less(v, 0.0)?;
    let lp = where_(&pos, log(&where_(&pos, v, 1.0)?)?, f64::NEG_INFINITY)?;
    let ln = where_(
        &neg,
        log(&where_(&neg, crate::negative(v)?, 1.0)?)?,
        f64::NEG_INFINITY,
    )?;
    Ok((lp, ln))
}

/// `y` with `-∞` (an empty running sum) replaced by 0, to subtract safely.
fn finite_floor(y: &Array) -> Result<Array> {
    where_(equal(y, f64::NEG_INFINITY)?, 0.0, y)
}

pub(super) fn scan_vjp(spec: ScanSpec, call: VjpArgs<'_>) -> Result<Vec<Array>> {
    let (op, axis, reverse, inclusive) = spec;
    let (x, g) = (&call.inputs[0], single(call.cotangents)?);
    // The transpose of a scan's sum runs the other way with the same inclusiveness.
    let back = |op: ScanOp, v: &Array| scan_node(op, v, axis, !reverse, inclusive);
    let dx = match op {
        ScanOp::Sum => back(ScanOp::Sum, g)?,
        ScanOp::Prod => {
            let y = output(call.outputs)?;
            let (zero, first, safe, skipped) = cumprod_parts(x, axis, reverse, inclusive)?;
            // At a nonzero x: Σ g·y / x (0 after the first zero, where every product holding
            // x also holds that zero); at the first zero: Σ g·(the products without it). At
            // zeros the quotient is masked off, so that its derivative does not leak in.
            let quotient = divide(back(ScanOp::Sum, &multiply(g, y)?)?, &safe)?;
            let at = back(ScanOp::Sum, &multiply(g, &skipped)?)?;
            add(where_(&zero, 0.0, &quotient)?, where_(&first, &at, 0.0)?)?
        }
        ScanOp::Max | ScanOp::Min => {
            let y = output(call.outputs)?;
            let attains = if op == ScanOp::Max {
                crate::greater_equal(x, y)?
            } else {
                crate::less_equal(x, y)?
            };
            let (winner, valid) = scan_winners(&attains, axis, reverse, inclusive)?;
            let g = where_(&valid, g, 0.0)?;
            crate::scatter_add_axis(&crate::zeros_like(x)?, &winner, &g, Some(axis as isize))?
        }
        ScanOp::LogAddExp => {
            // dx_k = Σ_i g_i exp(x_k − y_i), summed in log space with g's signs apart.
            let y = finite_floor(output(call.outputs)?)?;
            let (gp, gn) = log_parts(g)?;
            let sp = back(ScanOp::LogAddExp, &subtract(&gp, &y)?)?;
            let sn = back(ScanOp::LogAddExp, &subtract(&gn, &y)?)?;
            subtract(exp(&add(x, &sp)?)?, exp(&add(x, &sn)?)?)?
        }
    };
    Ok(vec![dx.astype(x.dtype())?])
}

pub(super) fn scan_jvp(spec: ScanSpec, call: JvpArgs<'_>) -> Result<Vec<Array>> {
    let (op, axis, reverse, inclusive) = spec;
    let (x, y) = (&call.inputs[0], output(call.outputs)?);
    let Some(t) = &call.tangents[0] else {
        return Ok(vec![crate::zeros_like(y)?]);
    };
    let fwd = |op: ScanOp, v: &Array| scan_node(op, v, axis, reverse, inclusive);
    let dy = match op {
        ScanOp::Sum => fwd(ScanOp::Sum, t)?,
        ScanOp::Prod => {
            // Up to the first zero: y · Σ t / x; after it only the zero's own term is left,
            // its tangent times the product without it.
            let (zero, first, safe, skipped) = cumprod_parts(x, axis, reverse, inclusive)?;
            let ratio = where_(&zero, 0.0, divide(t, &safe)?)?;
            let before = multiply(y, fwd(ScanOp::Sum, &ratio)?)?;
            let at = multiply(&skipped, fwd(ScanOp::Sum, &where_(&first, t, 0.0)?)?)?;
            add(&before, &at)?
        }
        ScanOp::Max | ScanOp::Min => {
            let attains = if op == ScanOp::Max {
                crate::greater_equal(x, y)?
            } else {
                crate::less_equal(x, y)?
            };
            let (winner, valid) = scan_winners(&attains, axis, reverse, inclusive)?;
            let picked = crate::take_along_axis(t, &winner, Some(axis as isize))?;
            where_(&valid, &picked, 0.0)?
        }
        ScanOp::LogAddExp => {
            // dy_i = Σ_k t_k exp(x_k − y_i), in log space with t's signs apart.
            let ys = finite_floor(y)?;
            let (tp, tn) = log_parts(t)?;
            let sp = fwd(ScanOp::LogAddExp, &add(&tp, x)?)?;
            let sn = fwd(ScanOp::LogAddExp, &add(&tn, x)?)?;
            subtract(exp(&subtract(&sp, &ys)?)?, exp(&subtract(&sn, &ys)?)?)?
        }
    };
    Ok(vec![dy.astype(y.dtype())?])
}

pub(super) fn scan_vmap(
    spec: ScanSpec,
    inputs: &[Array],
    batch: &[Option<usize>],
) -> Result<Batched> {
    let (op, axis, reverse, inclusive) = spec;
    let Some(b) = batch[0] else {
        return Ok((
            vec![scan_node(op, &inputs[0], axis, reverse, inclusive)?],
            vec![None],
        ));
    };
    let out = scan_node(
        op,
        &inputs[0],
        shift_axes(&[axis], b)[0],
        reverse,
        inclusive,
    )?;
    Ok((vec![out], vec![Some(b)]))
}

/// The softmax Jacobian (symmetric) applied to `v`: `y · (v − Σ v·y)` over the last axis.
fn softmax_linear(y: &Array, v: &Array) -> Result<Array> {
    let dot = crate::sum(&multiply(v, y)?, &[-1], true)?;
    multiply(y, &subtract(v, &dot)?)?.astype(y.dtype())
}

pub(super) fn softmax_vjp(
    outputs: &[Option<Array>],
    cotangents: &[Option<Array>],
) -> Result<Vec<Array>> {
    Ok(vec![softmax_linear(output(outputs)?, single(cotangents)?)?])
}

pub(super) fn softmax_jvp(
    outputs: &[Option<Array>],
    tangents: &[Option<Array>],
) -> Result<Vec<Array>> {
    let y = output(outputs)?;
    Ok(vec![match &tangents[0] {
        Some(t) => softmax_linear(y, t)?,
        None => crate::zeros_like(y)?,
    }])
}

pub(super) fn softmax_vmap(inputs: &[Array], batch: &[Option<usize>]) -> Result<Batched> {
    let x = &inputs[0];
    let build = |x: &Array| Array::op1(Primitive::Softmax, vec![x.clone()]);
    match batch[0] {
        None => Ok((vec![build(x)?], vec![None])),
        // The primitive normalises the last axis: a batch there moves to the front.
        Some(b) if b == x.ndim() - 1 => {
            let front = crate::transforms::move_axis(x, b, 0)?;
            Ok((vec![build(&front)?], vec![Some(0)]))
        }
        Some(b) => Ok((vec![build(x)?], vec![Some(b)])),
    }
}
