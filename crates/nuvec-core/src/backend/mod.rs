//! The backends: the CPU (always) and CUDA (where a driver and a device answer). Each has
//! one file per primitive family.
//!
//! The fused operations ([`crate::fast`]) have a folder of their own in each backend:
//! `cpu/fast/X.rs` implements `CpuKernel` and `cuda/fast/X.rs` implements `CudaKernel` (its
//! source in `cuda/kernels/fast/X.cu`) for the unit of operation `X` (`fast/X.rs`), whose
//! `cpu`/`cuda` methods hand them out. A kernel's `takes` (shapes and dtypes) is asked both
//! when a node is recorded and when it runs; the backends' `fast/mod.rs` do the rest (host
//! copies on the CPU, graph batching and layout copies on the GPU), so adding a kernel touches
//! only its family's files.

pub(crate) mod common;
pub(crate) mod cpu;
pub(crate) mod cuda;

use crate::array::ArrayData;
use crate::primitive::{OutputSpec, Primitive};
use crate::{Device, DeviceKind, Error, Result, Stream};

/// Whether work can run on `device`, or the error that says why not.
pub(crate) fn check_device(device: Device) -> Result<()> {
    match device.kind {
        DeviceKind::Cpu => Ok(()),
        DeviceKind::Gpu => cuda::check(device.index).map_err(|e| match e {
            Error::Device(msg) => Error::Device(format!("{device}: {msg}")),
            other => other,
        }),
    }
}

/// Queues the work that backends hold back to batch it (the CUDA graphs being recorded).
pub(crate) fn finish() -> Result<()> {
    cuda::finish()
}

/// Computes one node's outputs on its stream's device.
pub(crate) fn eval(
    stream: Stream,
    primitive: &Primitive,
    inputs: &mut [ArrayData],
    outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    match stream.device.kind {
        DeviceKind::Cpu => {
            // Inputs computed on a GPU come to the host once (and stay there too).
            for data in inputs.iter() {
                data.buffer.ensure_host()?;
            }
            cpu::eval(primitive, inputs, outputs)
        }
        DeviceKind::Gpu => cuda::eval(stream, primitive, inputs, outputs),
    }
}
