//! Creation primitives on the CPU.

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
            let data = crate::with_dtype!(dtype, T => {
                let v: Vec<T> = (0..n)
                    .map(|i| T::from_canon(Canon::Float(start + i as f64 * step)))
                    .collect();
                ArrayData::from_vec(v, &[n])
            });
            Ok(vec![data])
        }
    }
}
