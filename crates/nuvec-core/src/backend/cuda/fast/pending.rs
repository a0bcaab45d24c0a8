//! The fused operations the seeds record on a GPU stream whose CUDA kernels are still to be
//! written: the gated delta rule ([`GatedDelta`]) and the depthwise convolution
//! ([`DepthwiseConv1d`]). Each takes the inputs its kernel will take, so the graphs look as
//! they will; until then the gated delta rule runs its fallback graph inside the node on this
//! stream, and the convolution runs on the host, whose result the seeds compare with the CPU
//! convolution bit for bit.

use super::{CudaKernel, Place, nested};
use crate::array::ArrayData;
use crate::backend::cpu::fast::fallback_on;
use crate::fast::conv::DepthwiseConv1d;
use crate::fast::gated_delta::GatedDelta;
use crate::fast::{Arg, kernel_sized};
use crate::primitive::OutputSpec;
use crate::{Device, Result, Stream};

impl CudaKernel for GatedDelta {
    /// `q` and `v` of one kernel type, gates and state of kernel types, `Dk` a multiple
    /// of 32.
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        kernel_sized(inputs)
            && inputs.len() == 6
            && inputs[0].dtype == inputs[2].dtype
            && inputs[0].last().is_multiple_of(32)
            && inputs[3..6].iter().all(Arg::kernel_float)
    }

    fn batchable(&self, _: &[Arg<'_>]) -> bool {
        false
    }

    fn eval(
        &self,
        place: &Place,
        inputs: &mut [ArrayData],
        outputs: &[OutputSpec],
    ) -> Result<Vec<ArrayData>> {
        nested(place, self, inputs, outputs)
    }
}

impl CudaKernel for DepthwiseConv1d {
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        kernel_sized(inputs) && inputs.len() == 2 && inputs[1].dtype == inputs[0].dtype
    }

    fn batchable(&self, _: &[Arg<'_>]) -> bool {
        false
    }

    fn eval(
        &self,
        _place: &Place,
        inputs: &mut [ArrayData],
        outputs: &[OutputSpec],
    ) -> Result<Vec<ArrayData>> {
        for data in inputs.iter() {
            data.buffer.ensure_host()?;
        }
        fallback_on(Stream::default_for(Device::cpu()), self, inputs, outputs)
    }
}
