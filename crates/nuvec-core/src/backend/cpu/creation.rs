//! Creation primitives on the CPU.

use super::elementwise::fill;
use crate::Result;
use crate::array::ArrayData;
use crate::dtype::{Canon, Element};
use crate::ops::creation::CreationOp;
use crate::primitive::OutputSpec;

/// Computes a creation primitive.
pub(crate) fn eval(op: &CreationOp, _outputs: &[OutputSpec]) -> Result<Vec<ArrayData>> {
    match *op {
        CreationOp::Arange {
            start,
            step,
            n,
            dtype,
        } => {
            let data = crate::with_dtype!(dtype, T => arange::<T>(start, step, n));
            Ok(vec![data])
        }
    }
}

/// `n` values from `start` by `step`. Floats compute each value in `f64` (no drift along
/// the range); integers use MLX's rule: the first value truncated, and the step as the
/// truncated second value minus it.
fn arange<T: Element>(start: f64, step: f64, n: usize) -> ArrayData {
    // From the buffer cache, as every kernel's output (both branches write every element).
    let mut out = crate::array::pool::alloc::<T>(n);
    if T::DTYPE.is_integer() {
        let first = Canon::Float(start).as_i128();
        let delta = Canon::Float(start + step).as_i128() - first;
        fill(&mut out, &|s, chunk| {
            for (i, v) in chunk.iter_mut().enumerate() {
                let at = first.wrapping_add(delta.wrapping_mul((s + i) as i128));
                *v = T::from_canon(Canon::Int(at));
            }
        });
    } else {
        fill(&mut out, &|s, chunk| {
            for (i, v) in chunk.iter_mut().enumerate() {
                *v = T::from_canon(Canon::Float(start + (s + i) as f64 * step));
            }
        });
    }
    ArrayData::from_vec(out, &[n])
}
