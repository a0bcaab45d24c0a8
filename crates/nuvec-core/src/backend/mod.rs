//! The backends: the CPU (always) and, later, CUDA. Each has one file per primitive family.

pub(crate) mod cpu;

use crate::array::ArrayData;
use crate::primitive::{OutputSpec, Primitive};
use crate::{Device, DeviceKind, Error, Result, Stream};

/// Whether work can run on `device`, or the error that says why not.
pub(crate) fn check_device(device: Device) -> Result<()> {
    match device.kind {
        DeviceKind::Cpu => Ok(()),
        DeviceKind::Gpu => Err(Error::Device(format!(
            "{device}: this build of nuvec has no CUDA backend"
        ))),
    }
}

/// Computes one node's outputs on its stream's device.
pub(crate) fn eval(
    stream: Stream,
    primitive: &Primitive,
    inputs: &mut [ArrayData],
    outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    match stream.device.kind {
        DeviceKind::Cpu => cpu::eval(primitive, inputs, outputs),
        DeviceKind::Gpu => Err(Error::Device(format!(
            "{}: this build of nuvec has no CUDA backend",
            stream.device
        ))),
    }
}
