//! [`FastOp::Softmax`](crate::fast::FastOp::Softmax) and
//! [`FastOp::LogSumExp`](crate::fast::FastOp::LogSumExp) on the GPU: the row kernels of the
//! reductions (`reduce.rs`, `kernels/reduce.cu`), over the last axis, accumulated in float32.

use super::{CudaKernel, Place, with_copies};
use crate::Result;
use crate::array::ArrayData;
use crate::backend::cuda::reduce;
use crate::fast::softmax::{LogSumExp, Softmax};
use crate::fast::{Arg, kernel_sized};
use crate::ops::reduce::ReduceOp;
use crate::primitive::OutputSpec;

/// One input of a kernel type with at least one axis.
fn takes_rows(inputs: &[Arg<'_>]) -> bool {
    inputs.len() == 1 && kernel_sized(inputs) && !inputs[0].shape.is_empty()
}

impl CudaKernel for Softmax {
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        takes_rows(inputs)
    }

    fn eval(
        &self,
        place: &Place,
        inputs: &mut [ArrayData],
        _: &[OutputSpec],
    ) -> Result<Vec<ArrayData>> {
        with_copies(place, "softmax", inputs, |i| reduce::softmax(place, &i[0]))
    }
}

impl CudaKernel for LogSumExp {
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        takes_rows(inputs)
    }

    fn eval(
        &self,
        place: &Place,
        inputs: &mut [ArrayData],
        outputs: &[OutputSpec],
    ) -> Result<Vec<ArrayData>> {
        let last = inputs[0].layout.shape.len() - 1;
        with_copies(place, "logsumexp", inputs, |i| {
            reduce::reduce(place, ReduceOp::LogSumExp, &[last], &i[0], outputs)
        })
    }
}
