//! The fused operations ([`FastOp`]) on the CPU.
//!
//! The CPU records fused nodes only where a kernel is worth it; any such node evaluated
//! here, and any without a CPU kernel, runs its fallback graph on the evaluated inputs.
//! [`eval`] is the one place a CPU kernel for a fused operation would plug in.

use crate::array::{ArrayData, HostData};
use crate::fast::FastOp;
use crate::primitive::OutputSpec;
use crate::{Array, Device, Error, Result, Stream};

/// Computes a fused node's outputs.
pub(super) fn eval(
    op: &FastOp,
    inputs: &mut [ArrayData],
    outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    // No CPU kernels yet: every fused operation runs its fallback.
    fallback(op, inputs, outputs)
}

/// Runs `op`'s fallback graph, on the CPU stream, over arrays made from the inputs' data.
/// The inputs are moved into those arrays, so that a buffer this node owned alone (a
/// cache written in place, say) can still be donated inside the graph.
fn fallback(
    op: &FastOp,
    inputs: &mut [ArrayData],
    outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    let empty = || ArrayData::from_host(HostData::Bool(Vec::new()), &[0]);
    crate::with_stream(Stream::default_for(Device::cpu()), || {
        let leaves: Vec<Array> = inputs
            .iter_mut()
            .map(|data| Array::from_data(std::mem::replace(data, empty())))
            .collect();
        let results = op.fallback(&leaves)?;
        // Only the graph holds the leaves now.
        drop(leaves);
        crate::eval(&results)?;
        if results.len() != outputs.len() {
            return Err(mismatch(op, "a different number of outputs"));
        }
        results
            .iter()
            .zip(outputs)
            .map(|(a, (shape, dtype))| {
                if a.shape() != shape.as_slice() || a.dtype() != *dtype {
                    return Err(mismatch(op, "an output of another shape or type"));
                }
                a.data().cloned().ok_or_else(|| {
                    Error::Device(format!("{}: an output was not computed", op.name()))
                })
            })
            .collect()
    })
}

fn mismatch(op: &FastOp, what: &str) -> Error {
    Error::Device(format!(
        "{}: the fallback graph produced {what} than the node declares",
        op.name()
    ))
}
