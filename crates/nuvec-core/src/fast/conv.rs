//! The depthwise 1-D convolution as a fused operation ([`FastOp::DepthwiseConv1d`]):
//! [`crate::conv1d`] records it where a kernel takes it; its fallback is built from padding,
//! strided slices and products.

use super::check::Checker;
use super::{FastOp, Fused, fused_here};
use crate::backend::cuda::fast::CudaKernel;
use crate::primitive::OutputSpec;
use crate::{Array, Result, SliceArg};

/// The number of outputs of a convolution over `l` positions with `k` taps (0 when the
/// padded input is shorter than one window).
pub(crate) fn output_length(
    l: usize,
    k: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
) -> usize {
    let window = dilation * k.saturating_sub(1) + 1;
    let padded = l + 2 * padding;
    if padded < window || stride == 0 {
        0
    } else {
        (padded - window) / stride + 1
    }
}

/// The fused node of the depthwise convolution of checked arguments (`x`: `[N, L, C]`, `w`:
/// `[C, K, 1]`, one floating type) where a kernel takes it, else `None`.
pub(crate) fn depthwise_conv1d(
    x: &Array,
    w: &Array,
    stride: usize,
    padding: usize,
    dilation: usize,
) -> Result<Option<Array>> {
    let op = FastOp::DepthwiseConv1d {
        stride,
        padding,
        dilation,
    };
    fused_here(op, vec![x.clone(), w.clone()])
}

/// The `K` strided windows of the padded `x` (`[N, L, C]`), stacked as `[N, L_out, K, C]`:
/// window `j` holds the inputs tap `j` multiplies.
fn taps(x: &Array, k: usize, stride: usize, padding: usize, dilation: usize) -> Result<Array> {
    let l_out = output_length(x.shape()[1], k, stride, padding, dilation);
    let padded = if padding > 0 {
        crate::pad(x, &[(0, 0), (padding, padding), (0, 0)], 0.0)?
    } else {
        x.clone()
    };
    let windows = (0..k)
        .map(|j| {
            let first = j * dilation;
            let args = [
                SliceArg::full(),
                SliceArg::new(
                    Some(first as isize),
                    Some((first + stride * (l_out - 1) + 1) as isize),
                    stride as isize,
                ),
            ];
            crate::slice(&padded, &args)
        })
        .collect::<Result<Vec<_>>>()?;
    crate::stack(&windows, 2)
}

/// [`FastOp::DepthwiseConv1d`]'s fallback: each channel's taps times its weights, summed.
fn depthwise_graph(
    x: &Array,
    w: &Array,
    stride: usize,
    padding: usize,
    dilation: usize,
) -> Result<Array> {
    let (n, c, k) = (x.shape()[0], x.shape()[2], w.shape()[1]);
    let l_out = output_length(x.shape()[1], k, stride, padding, dilation);
    if n * l_out * c == 0 {
        return crate::zeros(&[n, l_out, c], x.dtype());
    }
    // Half types compute in f32 and round once, as the convolution kernels do, so that the
    // fused node and the ordinary convolution agree bit for bit.
    let dtype = x.dtype();
    let wide = |a: &Array| match dtype {
        crate::DType::F16 | crate::DType::BF16 => a.astype(crate::DType::F32),
        _ => Ok(a.clone()),
    };
    let windows = taps(&wide(x)?, k, stride, padding, dilation)?;
    // [C, K, 1] -> [K, C], aligned with the windows' last two axes.
    let weights = crate::transpose(&crate::reshape(&wide(w)?, &super::dims(&[c, k]))?, &[1, 0])?;
    crate::sum(&crate::multiply(&windows, &weights)?, &[2], false)?.astype(dtype)
}

/// [`FastOp::DepthwiseConv1d`]: `(x, w)`.
pub(crate) struct DepthwiseConv1d {
    /// Input positions between consecutive outputs.
    pub(crate) stride: usize,
    /// Zeros added before and after the input.
    pub(crate) padding: usize,
    /// Input positions between consecutive taps.
    pub(crate) dilation: usize,
}

impl Fused for DepthwiseConv1d {
    fn name(&self) -> &'static str {
        "conv1d"
    }

    fn specs(&self, c: &Checker<'_>) -> Result<Vec<OutputSpec>> {
        c.count(2, 2)?;
        let (x, w) = (c.rank(0, Some(3))?, c.rank(1, Some(3))?);
        c.float(0)?;
        c.same_dtype(0, 1)?;
        let (n, l, ch) = (x.shape()[0], x.shape()[1], x.shape()[2]);
        let k = w.shape()[1];
        c.holds(w.shape() == [ch, k, 1] && k > 0, || {
            format!("weights of shape {:?} for {ch} channels", w.shape())
        })?;
        c.holds(self.stride > 0 && self.dilation > 0, || {
            "stride and dilation must be positive".into()
        })?;
        let l_out = output_length(l, k, self.stride, self.padding, self.dilation);
        Ok(vec![(vec![n, l_out, ch], x.dtype())])
    }

    fn fallback(&self, inputs: &[Array]) -> Result<Vec<Array>> {
        let (x, w) = (&inputs[0], &inputs[1]);
        Ok(vec![depthwise_graph(
            x,
            w,
            self.stride,
            self.padding,
            self.dilation,
        )?])
    }

    fn cuda(&self) -> Option<&dyn CudaKernel> {
        Some(self)
    }
}
