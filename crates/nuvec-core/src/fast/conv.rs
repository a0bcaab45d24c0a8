//! One-dimensional convolution: the depthwise case as a fused operation, and [`conv1d`]
//! itself from ordinary operations.
//!
//! [`conv1d`] here is a stand-in until the convolution family lands (`ops/conv`): it
//! builds the convolution from padding, strided slices and products. When that family
//! brings its own `conv1d`, its depthwise case should call [`depthwise_conv1d`] and the
//! re-export of this one in `lib.rs` goes.

use super::{FastOp, check_inputs, floating, one};
use crate::error::invalid;
use crate::{Array, Result, SliceArg, promote_types};

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

/// A 1-D convolution, as MLX's `conv1d`: `x` is `[N, L, C_in]`, `w` is
/// `[C_out, K, C_in / groups]`, and the result `[N, L_out, C_out]` with
/// `L_out = (L + 2·padding − dilation·(K − 1) − 1) / stride + 1`. Input channels and
/// output channels split into `groups` groups, each output group reading its own input
/// group (`groups = C_in = C_out` with `w` of `[C, K, 1]` is the depthwise convolution, a
/// fused operation on the GPU). The inputs are promoted to one floating type.
///
/// ```
/// use nuvec_core::{Array, conv1d};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let x = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[1, 4, 1])?;
/// let w = Array::from_slice(&[1.0f32, -1.0], &[1, 2, 1])?; // x[t] − x[t + 1]
/// assert_eq!(conv1d(&x, &w, 1, 0, 1, 1)?.to_vec::<f32>()?, [-1.0, -1.0, -1.0]);
/// # Ok(())
/// # }
/// ```
pub fn conv1d(
    x: &Array,
    w: &Array,
    stride: usize,
    padding: usize,
    dilation: usize,
    groups: usize,
) -> Result<Array> {
    const OP: &str = "conv1d";
    check_inputs(&[x, w])?;
    if x.ndim() != 3 || w.ndim() != 3 {
        return Err(invalid(
            OP,
            format!(
                "x must be [N, L, C_in] and w [C_out, K, C_in / groups], got {:?} and {:?}",
                x.shape(),
                w.shape()
            ),
        ));
    }
    if stride == 0 || dilation == 0 || groups == 0 {
        return Err(invalid(
            OP,
            format!(
                "stride ({stride}), dilation ({dilation}) and groups ({groups}) must be positive"
            ),
        ));
    }
    let (c_in, c_out, k) = (x.shape()[2], w.shape()[0], w.shape()[1]);
    if !c_in.is_multiple_of(groups)
        || !c_out.is_multiple_of(groups)
        || w.shape()[2] * groups != c_in
    {
        return Err(invalid(
            OP,
            format!(
                "{groups} groups do not fit {c_in} input channels and weights of shape {:?}",
                w.shape()
            ),
        ));
    }
    let l_out = output_length(x.shape()[1], k, stride, padding, dilation);
    if k == 0 || l_out == 0 {
        return Err(invalid(
            OP,
            format!(
                "{k} taps with dilation {dilation} do not fit {} positions padded by {padding}",
                x.shape()[1]
            ),
        ));
    }
    let dtype = promote_types(x.dtype(), w.dtype());
    floating(OP, dtype)?;
    let (x, w) = (x.astype(dtype)?, w.astype(dtype)?);
    if groups == c_in && c_out == c_in {
        return depthwise_conv1d(&x, &w, stride, padding, dilation);
    }
    grouped_graph(&x, &w, stride, padding, dilation, groups)
}

/// The depthwise convolution of checked arguments (`x`: `[N, L, C]`, `w`: `[C, K, 1]`, one
/// floating type): one fused node on the GPU, else its fallback.
pub(crate) fn depthwise_conv1d(
    x: &Array,
    w: &Array,
    stride: usize,
    padding: usize,
    dilation: usize,
) -> Result<Array> {
    let op = FastOp::DepthwiseConv1d {
        stride,
        padding,
        dilation,
    };
    one(op, vec![x.clone(), w.clone()])
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
pub(super) fn depthwise_graph(
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
    let windows = taps(x, k, stride, padding, dilation)?;
    // [C, K, 1] -> [K, C], aligned with the windows' last two axes.
    let weights = crate::transpose(&crate::reshape(w, &super::dims(&[c, k]))?, &[1, 0])?;
    crate::sum(&crate::multiply(&windows, &weights)?, &[2], false)
}

/// A grouped convolution from ordinary operations: per group, one matrix product of the
/// taps (`[N · L_out, K · C_in/G]`) with the weights.
fn grouped_graph(
    x: &Array,
    w: &Array,
    stride: usize,
    padding: usize,
    dilation: usize,
    groups: usize,
) -> Result<Array> {
    let (n, c_in, c_out, k) = (x.shape()[0], x.shape()[2], w.shape()[0], w.shape()[1]);
    let l_out = output_length(x.shape()[1], k, stride, padding, dilation);
    let (cg_in, cg_out) = (c_in / groups, c_out / groups);
    if n * l_out * c_out == 0 {
        return crate::zeros(&[n, l_out, c_out], x.dtype());
    }
    let windows = taps(x, k, stride, padding, dilation)?;
    let rows = n * l_out;
    // [N, L_out, K, C_in] -> [G, N·L_out, K·C_in/G].
    let windows = crate::reshape(&windows, &super::dims(&[rows, k, groups, cg_in]))?;
    let windows = crate::transpose(&windows, &[2, 0, 1, 3])?;
    let windows = crate::reshape(&windows, &super::dims(&[groups, rows, k * cg_in]))?;
    // [C_out, K, C_in/G] -> [G, K·C_in/G, C_out/G].
    let weights = crate::reshape(w, &super::dims(&[groups, cg_out, k * cg_in]))?;
    let weights = crate::swapaxes(&weights, -1, -2)?;
    let out = crate::matmul(&windows, &weights)?;
    // [G, N·L_out, C_out/G] -> [N, L_out, C_out].
    let out = crate::transpose(&out, &[1, 0, 2])?;
    crate::reshape(&out, &super::dims(&[n, l_out, c_out]))
}
