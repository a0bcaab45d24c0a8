//! [`gather_mm`]: matrix products of gathered batches (a mixture of experts' layers).

use super::{FastOp, check_inputs, integral, on_gpu};
use crate::error::invalid;
use crate::primitive::Primitive;
use crate::{Array, DType, Result, promote_types};

/// Matrix products of batches picked by index, as MLX's `gather_mm`: with `a` of shape
/// `[..., M, K]` and `b` of shape `[..., K, N]`, output `[i.., :, :]` is
/// `a_flat[lhs[i..]] @ b_flat[rhs[i..]]`, where `a_flat` and `b_flat` are the matrices of
/// `a` and `b` in row-major order of their batch axes. Missing indices default to every
/// batch in order (`arange` over the batch shape); the two index arrays (any integer type)
/// broadcast to one shape, which leads the output's. `sorted_indices` promises that `rhs`
/// is sorted, which lets a kernel group rows by weight. Out-of-range indices are clamped.
///
/// ```
/// use nuvec_core::{Array, gather_mm};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let x = Array::from_slice(&[1.0f32, 2.0], &[1, 1, 2])?; // one row
/// let experts = Array::from_slice(&[1.0f32, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0], &[2, 2, 2])?;
/// let pick = Array::from_slice(&[1u32, 0], &[2])?;
/// let zero = Array::from_slice(&[0u32, 0], &[2])?;
/// let y = gather_mm(&x, &experts, Some(&zero), Some(&pick), false)?;
/// // Expert 1 swaps the features, expert 0 keeps them.
/// assert_eq!(y.to_vec::<f32>()?, [2.0, 1.0, 1.0, 2.0]);
/// # Ok(())
/// # }
/// ```
pub fn gather_mm(
    a: &Array,
    b: &Array,
    lhs_indices: Option<&Array>,
    rhs_indices: Option<&Array>,
    sorted_indices: bool,
) -> Result<Array> {
    const OP: &str = "gather_mm";
    check_inputs(&[a, b])?;
    if a.ndim() < 2 || b.ndim() < 2 {
        return Err(invalid(
            OP,
            format!(
                "a and b must have at least 2 dimensions, got {:?} and {:?}",
                a.shape(),
                b.shape()
            ),
        ));
    }
    let (k, k2) = (a.shape()[a.ndim() - 1], b.shape()[b.ndim() - 2]);
    if k != k2 {
        return Err(invalid(
            OP,
            format!(
                "the inner sizes of {:?} and {:?} differ",
                a.shape(),
                b.shape()
            ),
        ));
    }
    let dtype = promote_types(a.dtype(), b.dtype());
    super::floating(OP, dtype)?;
    let indices = |given: Option<&Array>, m: &Array| -> Result<Array> {
        match given {
            Some(i) => {
                check_inputs(&[i])?;
                if !integral(i.dtype()) {
                    return Err(invalid(
                        OP,
                        format!("indices must be integers, got {}", i.dtype()),
                    ));
                }
                i.astype(DType::U32)
            }
            None => {
                let batch = &m.shape()[..m.ndim() - 2];
                let n: usize = batch.iter().product();
                let all = crate::arange(0.0, n as f64, 1.0, DType::U32)?;
                crate::reshape(&all, &super::dims(batch))
            }
        }
    };
    let lhs = indices(lhs_indices, a)?;
    let rhs = indices(rhs_indices, b)?;
    let shape = crate::ops::broadcast_shapes(OP, lhs.shape(), rhs.shape())?;
    let lhs = crate::broadcast_to(&lhs, &shape)?;
    let rhs = crate::broadcast_to(&rhs, &shape)?;
    let mut inputs = vec![a.astype(dtype)?, b.astype(dtype)?, lhs, rhs];
    if !on_gpu(dtype, a.size()) {
        return gather_mm_graph(&inputs);
    }
    if sorted_indices {
        // Where each weight batch's rows start in the sorted rows.
        let batches: usize = b.shape()[..b.ndim() - 2].iter().product();
        let flat = crate::reshape(&inputs[3], &[-1])?;
        let starts = crate::arange(0.0, batches as f64, 1.0, DType::U32)?;
        inputs.push(crate::searchsorted(&flat, &starts, false)?.astype(DType::I32)?);
    }
    Array::op1(Primitive::Fast(FastOp::GatherMm), inputs)
}

/// [`FastOp::GatherMm`]'s fallback, `(a, b, lhs, rhs[, offsets])`: the indexed matrices of
/// both operands taken out, then one batched product.
pub(super) fn gather_mm_graph(inputs: &[Array]) -> Result<Array> {
    let matrices = |m: &Array, at: &Array| -> Result<Array> {
        let nd = m.ndim();
        let flat = crate::reshape(
            m,
            &[-1, m.shape()[nd - 2] as isize, m.shape()[nd - 1] as isize],
        )?;
        crate::take(&flat, at, Some(0))
    };
    crate::matmul(
        &matrices(&inputs[0], &inputs[2])?,
        &matrices(&inputs[1], &inputs[3])?,
    )
}
