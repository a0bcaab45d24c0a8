//! Rules of the matrix products (`matmul`, `addmm`).
//!
//! The primitives see matrices with equal batch axes: the public functions reshape 1-D
//! operands and broadcast batch axes as views first, so the cotangent of a broadcast batch
//! axis is summed by the broadcast's own rule and these rules never see one. The products
//! use the plain transpose, not the conjugate (as the elementwise `multiply` does), so the
//! complex cotangents follow the same convention as every other rule.

use super::{JvpArgs, VjpArgs, single};
use crate::ops::linalg::MatmulOp;
use crate::primitive::Batched;
use crate::{Array, Result, add, matmul, multiply, swapaxes};

/// The matrices' transpose over their last two axes (a view).
fn mt(x: &Array) -> Result<Array> {
    swapaxes(x, -1, -2)
}

/// `x · factor`, skipping the product for a factor of one.
fn scaled(x: Array, factor: f32) -> Result<Array> {
    if factor == 1.0 {
        Ok(x)
    } else {
        multiply(&x, factor)
    }
}

/// The product's factor: 1 for `matmul`, `alpha` for `addmm`.
fn alpha(op: &MatmulOp) -> f32 {
    match op {
        MatmulOp::AddMm { alpha, .. } => *alpha,
        _ => 1.0,
    }
}

pub(super) fn vjp(op: &MatmulOp, call: VjpArgs<'_>) -> Result<Vec<Array>> {
    let g = single(call.cotangents)?;
    let (a, b) = (&call.inputs[0], &call.inputs[1]);
    call.argnums
        .iter()
        .map(|&i| match (i, op) {
            // out = α · a b (+ β c): d a = α · g bᵀ, d b = α · aᵀ g, d c = β · g.
            (0, _) => scaled(matmul(g, &mt(b)?)?, alpha(op)),
            (1, _) => scaled(matmul(&mt(a)?, g)?, alpha(op)),
            (_, MatmulOp::AddMm { beta, .. }) => scaled(g.clone(), *beta),
            _ => crate::zeros_like(&call.inputs[i]),
        })
        .collect()
}

pub(super) fn jvp(op: &MatmulOp, call: JvpArgs<'_>) -> Result<Vec<Array>> {
    let (a, b) = (&call.inputs[0], &call.inputs[1]);
    // The product rule: d(a b) = da · b + a · db.
    let mut product: Option<Array> = None;
    if let Some(ta) = &call.tangents[0] {
        product = Some(matmul(ta, b)?);
    }
    if let Some(tb) = &call.tangents[1] {
        let term = matmul(a, tb)?;
        product = Some(match product {
            Some(p) => add(&p, &term)?,
            None => term,
        });
    }
    let mut total = product.map(|p| scaled(p, alpha(op))).transpose()?;
    if let (MatmulOp::AddMm { beta, .. }, Some(Some(tc))) = (op, call.tangents.get(2)) {
        let term = scaled(tc.clone(), *beta)?;
        total = Some(match total {
            Some(t) => add(&t, &term)?,
            None => term,
        });
    }
    Ok(vec![match total {
        Some(t) => t,
        None => match call.outputs.first().and_then(Option::as_ref) {
            Some(out) => crate::zeros_like(out)?,
            None => crate::zeros_like(&matmul(a, b)?)?,
        },
    }])
}

/// The batch of each operand as a leading batch axis (size 1 for a shared operand, which the
/// product broadcasts as a view): one batched product, no loop.
pub(super) fn vmap(op: &MatmulOp, inputs: &[Array], axes: &[Option<usize>]) -> Result<Batched> {
    let front = |i: usize| -> Result<Array> {
        match axes[i] {
            Some(ax) => crate::transforms::move_axis(&inputs[i], ax, 0),
            None => crate::expand_dims(&inputs[i], 0),
        }
    };
    let out = match op {
        MatmulOp::AddMm { alpha, beta } => {
            let c = front(2)?;
            if axes[0].is_none() && axes[1].is_none() {
                // Only `c` varies: one shared product, added to every example's `c`.
                let product = scaled(matmul(&inputs[0], &inputs[1])?, *alpha)?;
                add(&product, &scaled(c, *beta)?)?
            } else {
                crate::addmm(&c, &front(0)?, &front(1)?, *alpha, *beta)?
            }
        }
        _ => matmul(&front(0)?, &front(1)?)?,
    };
    Ok((vec![out], vec![Some(0)]))
}
