//! The fused operations ([`FastOp`]) on the GPU.
//!
//! Each kernel is a [`CudaKernel`] implemented for its operation's unit, in the file of its
//! family (`norms.rs`, `norm_grads.rs`, `rope.rs`, `norm_rope.rs`, `softmax.rs`,
//! `attention.rs` and `flash.rs`, `gated_delta.rs`, `conv.rs`, with their sources in
//! `kernels/fast/`; `custom.rs` runs the users' kernels, whose sources are generated;
//! `gather_qmm`'s lives with the other quantized kernels, in `quantized/gather.rs`). Its
//! [`CudaKernel::takes`] looks at shapes and dtypes only: the public operations ask it before
//! recording a fused node on a GPU stream, and [`eval`] asks it again, so a recorded node
//! always finds its kernel. Layouts are the kernel's business: what it cannot read through its
//! strides it copies first ([`with_copies`]).
//!
//! Nodes built by hand for inputs no kernel takes still run their fallback graph inside the
//! node, on this stream (counted by [`crate::fast::nested_fallbacks`]).

mod attention;
mod conv;
pub(crate) mod custom;
pub(super) mod flash;
mod gated_delta;
mod norm_grads;
mod norm_rope;
mod norms;
mod rope;
mod softmax;

use super::Place;
use crate::array::ArrayData;
use crate::backend::cpu::fast::{args_of_data, fallback_on};
use crate::fast::{Arg, FastOp, Fused};
use crate::primitive::OutputSpec;
use crate::{Error, Result};

/// A fused operation's CUDA kernel.
pub(crate) trait CudaKernel {
    /// Whether the kernel computes the operation for inputs of these shapes and types (any
    /// layouts).
    fn takes(&self, inputs: &[Arg<'_>]) -> bool;

    /// Whether a node of these inputs only queues kernels on its stream (no transfer, no
    /// library call, no nested evaluation), so that it can be recorded into a CUDA graph.
    fn batchable(&self, _inputs: &[Arg<'_>]) -> bool {
        true
    }

    /// Queues the kernels computing the outputs of inputs the kernel takes.
    fn eval(
        &self,
        place: &Place,
        inputs: &mut [ArrayData],
        outputs: &[OutputSpec],
    ) -> Result<Vec<ArrayData>>;
}

/// The kernel of `op` when it takes these inputs.
fn kernel<'a>(unit: &'a dyn Fused, inputs: &[ArrayData]) -> Option<&'a dyn CudaKernel> {
    unit.cuda().filter(|k| k.takes(&args_of_data(inputs)))
}

/// Whether a node of `op` on these inputs only queues kernels (see [`CudaKernel::batchable`]).
pub(super) fn batchable(op: &FastOp, inputs: &[ArrayData]) -> bool {
    let unit = op.unit();
    kernel(&*unit, inputs).is_some_and(|k| k.batchable(&args_of_data(inputs)))
}

/// Computes a fused node's outputs on a GPU stream: its kernel, or (for a node built by hand
/// that no kernel takes) its fallback graph on this stream.
pub(super) fn eval(
    place: &Place,
    op: &FastOp,
    inputs: &mut [ArrayData],
    outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    let unit = op.unit();
    match kernel(&*unit, inputs) {
        Some(k) => k.eval(place, inputs, outputs),
        None => nested(place, &*unit, inputs, outputs),
    }
}

/// The fallback graph of `unit` run on this node's stream over its inputs.
pub(super) fn nested(
    place: &Place,
    unit: &dyn Fused,
    inputs: &mut [ArrayData],
    outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    fallback_on(place.node_stream, unit, inputs, outputs)
}

/// `run(inputs)`, and where it cannot read some input's layout (`Ok(None)`: axes that do not
/// merge into the kernel's eight, features not contiguous), `run` again over row-major copies
/// of every input made on the device.
pub(super) fn with_copies(
    place: &Place,
    name: &str,
    inputs: &[ArrayData],
    mut run: impl FnMut(&[ArrayData]) -> Result<Option<Vec<ArrayData>>>,
) -> Result<Vec<ArrayData>> {
    if let Some(out) = run(inputs)? {
        return Ok(out);
    }
    let copies = inputs
        .iter()
        .map(|d| row_major(place, d))
        .collect::<Result<Vec<_>>>()?;
    run(&copies)?.ok_or_else(|| {
        Error::Device(format!(
            "cuda: {name}: the kernel refused row-major copies of inputs it takes"
        ))
    })
}

/// `data` itself when row-major, else a row-major copy (on the device; through the host for a
/// view of more axes than the device's strided copy merges).
pub(super) fn row_major(place: &Place, data: &ArrayData) -> Result<ArrayData> {
    if data.layout.is_row_contiguous() {
        return Ok(data.clone());
    }
    // The strided copy refuses views of more than eight unmergeable axes: those go through
    // the host.
    if let Ok(Some(copy)) = super::elementwise::convert(place, data, data.dtype()) {
        return Ok(copy);
    }
    data.buffer.ensure_host()?;
    Ok(crate::backend::cpu::copy::to_contiguous(data))
}

/// Every kernel source of these families, complete, for compiling ahead of time (CI); the
/// families split by pack count are in [`split_modules`].
#[cfg(test)]
pub(super) fn all_sources() -> Vec<(String, String)> {
    let mut sources = Vec::new();
    for d in [crate::DType::F32, crate::DType::F16, crate::DType::BF16] {
        let tn = super::dtype::type_names(d).expect("a float type").1;
        sources.push((format!("rope_{tn}"), rope::source(d)));
        sources.push((format!("conv_fast_{tn}"), conv::source(d)));
    }
    sources.extend(attention::all_sources());
    sources.extend(flash::all_sources());
    sources.extend(custom::all_sources());
    sources.extend(gated_delta::all_sources());
    sources
}

/// The modules of the families split by pack count, with the symbols each launch asks it for.
#[cfg(test)]
pub(super) fn split_modules() -> Vec<(String, String, Vec<String>)> {
    [crate::DType::F32, crate::DType::F16, crate::DType::BF16]
        .into_iter()
        .flat_map(|d| {
            [
                norms::sources(d),
                softmax::sources(d),
                norm_rope::sources(d),
                gated_delta::sources(d),
            ]
        })
        .flatten()
        .collect()
}
