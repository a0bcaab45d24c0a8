//! Rules of the elementwise families: unary, binary and `where_`.

use super::{JvpArgs, VjpArgs, batch_front, or_zeros, output, single};
use crate::ops::binary::BinaryOp;
use crate::ops::unary::UnaryOp;
use crate::primitive::{Batched, Primitive};
use crate::{Array, Result};
use crate::{
    add, divide, equal, exp, greater, less, log, multiply, negative, square, subtract, where_,
    zeros_like,
};

/// `op(a, b)` recorded directly when the operands already share a shape and a type (as a
/// cotangent and an elementwise node's primals do), without the operator's promotion and
/// broadcasting, which cost more than the node; through the operator otherwise.
fn direct(op: BinaryOp, a: &Array, b: &Array) -> Result<Array> {
    if a.shape() == b.shape() && a.dtype() == b.dtype() {
        return Array::op1(Primitive::Binary(op), vec![a.clone(), b.clone()]);
    }
    match op {
        BinaryOp::Subtract => subtract(a, b),
        _ => multiply(a, b),
    }
}

/// The complex-aware linear functions, whose derivative applies the function itself.
fn is_linear_complex(op: UnaryOp, x: &Array) -> bool {
    x.dtype() == crate::DType::C64 && matches!(op, UnaryOp::Conjugate | UnaryOp::Negative)
}

pub(super) fn unary_vjp(op: UnaryOp, call: VjpArgs<'_>) -> Result<Vec<Array>> {
    let (x, g) = (&call.inputs[0], single(call.cotangents)?);
    if is_linear_complex(op, x) || (op == UnaryOp::Conjugate) {
        return Ok(vec![Array::op1(Primitive::Unary(op), vec![g.clone()])?]);
    }
    if matches!(op, UnaryOp::Real) && x.dtype() != crate::DType::C64 {
        return Ok(vec![g.clone()]);
    }
    let out = output(call.outputs)?;
    if op == UnaryOp::Tanh && x.dtype().is_float() {
        // g · (1 − out²) as g − (g · out) · out: three nodes, no broadcast constant.
        let g_out = direct(BinaryOp::Multiply, g, out)?;
        let g_out2 = direct(BinaryOp::Multiply, &g_out, out)?;
        return Ok(vec![direct(BinaryOp::Subtract, g, &g_out2)?]);
    }
    Ok(vec![match op.derivative(x, out)? {
        Some(d) => direct(BinaryOp::Multiply, g, &d)?,
        None => zeros_like(x)?,
    }])
}

pub(super) fn unary_jvp(op: UnaryOp, call: JvpArgs<'_>) -> Result<Vec<Array>> {
    let x = &call.inputs[0];
    let out = output(call.outputs)?;
    let Some(t) = &call.tangents[0] else {
        return Ok(vec![zeros_like(out)?]);
    };
    if is_linear_complex(op, x) || (op == UnaryOp::Conjugate) {
        return Ok(vec![Array::op1(Primitive::Unary(op), vec![t.clone()])?]);
    }
    if matches!(op, UnaryOp::Real) && x.dtype() != crate::DType::C64 {
        return Ok(vec![t.clone()]);
    }
    Ok(vec![match op.derivative(x, out)? {
        Some(d) => multiply(t, &d)?,
        None => zeros_like(out)?,
    }])
}

/// The partial derivatives `(d out/d a, d out/d b)` of a binary op, `None` where zero.
fn partials(
    op: BinaryOp,
    a: &Array,
    b: &Array,
    out: &Array,
) -> Result<(Option<Array>, Option<Array>)> {
    use BinaryOp::*;
    let one = |x: &Array| crate::ones_like(x);
    Ok(match op {
        Add => (Some(one(a)?), Some(one(b)?)),
        Subtract => (Some(one(a)?), Some(crate::full_like(b, -1.0)?)),
        Multiply => (Some(b.clone()), Some(a.clone())),
        Divide => (
            Some(crate::reciprocal(b)?),
            Some(negative(&divide(out, b)?)?),
        ),
        Power => {
            // d/da = b · a^(b−1); d/db = out · ln a (0 where a = 0, as the limit).
            let da = multiply(b, crate::power(a, subtract(b, 1.0)?)?)?;
            let ln_a = where_(equal(a, 0.0)?, 0.0, log(a)?)?;
            (Some(da), Some(multiply(out, &ln_a)?))
        }
        Maximum => {
            let pick_a = greater(a, b)?;
            (
                Some(where_(&pick_a, 1.0, 0.0)?.astype(a.dtype())?),
                Some(where_(&pick_a, 0.0, 1.0)?.astype(b.dtype())?),
            )
        }
        Minimum => {
            let pick_a = less(a, b)?;
            (
                Some(where_(&pick_a, 1.0, 0.0)?.astype(a.dtype())?),
                Some(where_(&pick_a, 0.0, 1.0)?.astype(b.dtype())?),
            )
        }
        ArcTan2 => {
            // atan2(a, b): d/da = b / (a² + b²), d/db = −a / (a² + b²).
            let r2 = add(square(a)?, square(b)?)?;
            (Some(divide(b, &r2)?), Some(divide(negative(a)?, &r2)?))
        }
        LogAddExp => (
            Some(exp(&subtract(a, out)?)?),
            Some(exp(&subtract(b, out)?)?),
        ),
        Remainder => (
            Some(one(a)?),
            Some(negative(&crate::floor(&divide(a, b)?)?)?),
        ),
        FloorDivide | Equal | NotEqual | Less | LessEqual | Greater | GreaterEqual | LogicalAnd
        | LogicalOr | BitwiseAnd | BitwiseOr | BitwiseXor | LeftShift | RightShift => (None, None),
    })
}

pub(super) fn binary_vjp(op: BinaryOp, call: VjpArgs<'_>) -> Result<Vec<Array>> {
    let g = single(call.cotangents)?;
    let (a, b) = (&call.inputs[0], &call.inputs[1]);
    // The common linear cases build only what each asked-for input needs.
    match op {
        BinaryOp::Add => return Ok(call.argnums.iter().map(|_| g.clone()).collect()),
        BinaryOp::Subtract => {
            return call
                .argnums
                .iter()
                .map(|&i| if i == 0 { Ok(g.clone()) } else { negative(g) })
                .collect();
        }
        BinaryOp::Multiply => {
            return call
                .argnums
                .iter()
                .map(|&i| direct(BinaryOp::Multiply, g, if i == 0 { b } else { a }))
                .collect();
        }
        _ => {}
    }
    let (da, db) = partials(op, a, b, output(call.outputs)?)?;
    call.argnums
        .iter()
        .map(|&i| {
            let d = if i == 0 { &da } else { &db };
            match d {
                Some(d) => multiply(g, d),
                None => zeros_like(&call.inputs[i]),
            }
        })
        .collect()
}

pub(super) fn binary_jvp(op: BinaryOp, call: JvpArgs<'_>) -> Result<Vec<Array>> {
    let out = output(call.outputs)?;
    let (da, db) = partials(op, &call.inputs[0], &call.inputs[1], out)?;
    let mut total: Option<Array> = None;
    for (d, t) in [(da, &call.tangents[0]), (db, &call.tangents[1])] {
        if let (Some(d), Some(t)) = (d, t) {
            let term = multiply(t, &d)?;
            total = Some(match total {
                Some(acc) => add(&acc, &term)?,
                None => term,
            });
        }
    }
    Ok(vec![match total {
        Some(t) => t.astype(out.dtype())?,
        None => zeros_like(out)?,
    }])
}

pub(super) fn select_vjp(call: VjpArgs<'_>) -> Result<Vec<Array>> {
    let g = single(call.cotangents)?;
    let c = &call.inputs[0];
    call.argnums
        .iter()
        .map(|&i| match i {
            1 => where_(c, g, 0.0),
            2 => where_(c, 0.0, g),
            _ => zeros_like(&call.inputs[i]),
        })
        .collect()
}

pub(super) fn select_jvp(inputs: &[Array], tangents: &[Option<Array>]) -> Result<Vec<Array>> {
    let zero = |i: usize| or_zeros(&tangents[i], &inputs[i]);
    Ok(vec![where_(&inputs[0], zero(1)?, zero(2)?)?])
}

/// Binary and ternary elementwise primitives: every input with its batch axis in front.
pub(super) fn vmap(p: &Primitive, inputs: &[Array], axes: &[Option<usize>]) -> Result<Batched> {
    let front = batch_front(inputs, axes)?;
    Ok((vec![Array::op1(p.clone(), front)?], vec![Some(0)]))
}
