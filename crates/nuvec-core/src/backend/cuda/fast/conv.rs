//! [`FastOp::DepthwiseConv1d`](crate::fast::FastOp::DepthwiseConv1d) on the GPU
//! (`kernels/fast/conv.cu`): a thread an output, each summing its taps in the order and with
//! the roundings of the fallback graph on the CPU, so that the seeds' bit-for-bit comparison
//! holds. The input and weights are read through their strides.

use cudarc::driver::DeviceRepr;

use super::{CudaKernel, Place};
use crate::array::ArrayData;
use crate::backend::cuda::elementwise::type_names;
use crate::backend::cuda::launch::symbol;
use crate::fast::conv::{DepthwiseConv1d, output_length};
use crate::fast::{Arg, kernel_sized};
use crate::primitive::OutputSpec;
use crate::{DType, Result};

const COMMON: &str = include_str!("../kernels/common.cuh");
const CONV: &str = include_str!("../kernels/fast/conv.cu");

/// The module of the kernel over `dtype`.
pub(super) fn source(dtype: DType) -> String {
    let (ct, tn) = type_names(dtype).expect("a float type");
    format!("{COMMON}\n{CONV}\nNV_CONV_FAST({ct}, {tn})\n")
}

impl CudaKernel for DepthwiseConv1d {
    /// `x` `[N, L, C]` and `w` `[C, K, 1]` of one kernel type.
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        kernel_sized(inputs)
            && inputs.len() == 2
            && inputs[1].dtype == inputs[0].dtype
            && inputs[0].shape.len() == 3
            && inputs[1].shape.len() == 3
    }

    fn eval(
        &self,
        place: &Place,
        inputs: &mut [ArrayData],
        _: &[OutputSpec],
    ) -> Result<Vec<ArrayData>> {
        let (x, w) = (&inputs[0], &inputs[1]);
        let dtype = x.dtype();
        let (xs, ws) = (&x.layout, &w.layout);
        let (n, l, c, k) = (xs.shape[0], xs.shape[1], xs.shape[2], ws.shape[1]);
        let lout = output_length(l, k, self.stride, self.padding, self.dilation);
        let (y, yp) = place.output(dtype, &[n, lout, c])?;
        let count = n * lout * c;
        if count == 0 {
            return Ok(vec![y]);
        }
        let size = dtype.size() as u64;
        let xp = place.input(x)? + xs.offset as u64 * size;
        let wp = place.input(w)? + ws.offset as u64 * size;
        let tn = type_names(dtype).expect("a float type").1;
        let f = place.gpu.kernel_of(
            "conv_fast",
            Some(dtype),
            symbol!("depthwise_conv1d_{tn}")?,
            || source(dtype),
        )?;
        let st = |s: isize| s as i64;
        let (xn, xl, xc) = (st(xs.strides[0]), st(xs.strides[1]), st(xs.strides[2]));
        let (wc, wk) = (st(ws.strides[0]), st(ws.strides[1]));
        let dims = [n, l, c, lout, k, self.stride, self.padding, self.dilation].map(|v| v as i64);
        let params: [&dyn DeviceRepr; 16] = [
            &xp, &xn, &xl, &xc, &wp, &wc, &wk, &yp, &dims[0], &dims[1], &dims[2], &dims[3],
            &dims[4], &dims[5], &dims[6], &dims[7],
        ];
        // SAFETY: `xp` and `wp` point at the first elements of x (`[N, L, C]`) and w
        // (`[C, K, 1]`) inside their blocks, every element reached through the strides
        // passed; taps outside `0..L` are not read; `yp` is a fresh row-major block of
        // `N · L_out · C` elements of x's type; the arguments match `depthwise_conv1d_*`.
        unsafe { f.launch(&place.stream, f.config(count), &params) }?;
        Ok(vec![y])
    }
}
