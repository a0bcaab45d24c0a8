//! The fused operation the seeds record on a GPU stream whose CUDA kernel is still to be
//! written: the gated delta rule ([`GatedDelta`]). It takes the inputs its kernel will take,
//! so the graphs look as they will; until then it runs its fallback graph inside the node on
//! this stream.

use super::{CudaKernel, Place, nested};
use crate::Result;
use crate::array::ArrayData;
use crate::fast::gated_delta::GatedDelta;
use crate::fast::{Arg, kernel_sized};
use crate::primitive::OutputSpec;

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
