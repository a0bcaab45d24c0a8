//! The public operations, one module per family. Each function checks its arguments, works
//! out the result's type and shape, and records a node; nothing is computed until evaluation.

pub(crate) mod binary;
pub(crate) mod conv;
pub(crate) mod creation;
pub(crate) mod index;
pub(crate) mod linalg;
pub(crate) mod quantized;
pub(crate) mod random;
pub(crate) mod reduce;
pub(crate) mod shape;
pub(crate) mod sort;
pub(crate) mod unary;

pub use binary::*;
pub use conv::*;
pub use creation::*;
pub use index::*;
pub use linalg::*;
pub use quantized::*;
pub use reduce::*;
pub use shape::*;
pub use sort::*;
pub use unary::*;

use crate::error::invalid;
use crate::{Array, Error, Result};

/// Checks that a primitive got `n` inputs.
pub(crate) fn expect_inputs(op: &'static str, inputs: &[Array], n: usize) -> Result<()> {
    if inputs.len() != n {
        return Err(invalid(
            op,
            format!("expected {n} inputs, got {}", inputs.len()),
        ));
    }
    Ok(())
}

/// An error unless `a` is a matrix or a stack of them (at least 2-D); `what` names it in the
/// message, or is empty where `a` is the operation's only array.
pub(crate) fn check_matrices(op: &'static str, what: &str, a: &Array) -> Result<()> {
    if a.ndim() >= 2 {
        return Ok(());
    }
    let needs = format!("needs at least 2 dimensions, got shape {:?}", a.shape());
    let msg = if what.is_empty() {
        needs
    } else {
        format!("{what} {needs}")
    };
    Err(invalid(op, msg))
}

/// Reports the error of the first input in an error state.
pub(crate) fn check_errors(inputs: &[&Array]) -> Result<()> {
    match inputs.iter().find_map(|a| a.error()) {
        Some(err) => Err(err),
        None => Ok(()),
    }
}

/// `axis` counted from the end when negative, checked against `ndim`.
pub fn normalize_axis(op: &'static str, axis: isize, ndim: usize) -> Result<usize> {
    let n = ndim as isize;
    if axis < -n || axis >= n {
        return Err(Error::AxisOutOfRange { op, axis, ndim });
    }
    Ok(if axis < 0 { axis + n } else { axis } as usize)
}

/// Each axis normalised, sorted, and checked for repeats.
pub fn normalize_axes(op: &'static str, axes: &[isize], ndim: usize) -> Result<Vec<usize>> {
    let mut out = axes
        .iter()
        .map(|&a| normalize_axis(op, a, ndim))
        .collect::<Result<Vec<_>>>()?;
    out.sort_unstable();
    if out.windows(2).any(|w| w[0] == w[1]) {
        return Err(invalid(op, format!("repeated axis in {axes:?}")));
    }
    Ok(out)
}

/// NumPy's broadcast of two shapes.
pub fn broadcast_shapes(op: &'static str, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let db = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => {
                return Err(Error::IncompatibleShapes {
                    op,
                    lhs: a.to_vec(),
                    rhs: b.to_vec(),
                });
            }
        };
    }
    Ok(out)
}
