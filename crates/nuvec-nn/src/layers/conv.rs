//! [`Conv1d`] and [`Conv2d`] (over nuvec-core's `conv1d` and `conv2d`; channels last, as
//! MLX).

use nuvec_core::{Array, ConvArg, DType, add, conv1d, conv2d};

use crate::error::{Result, invalid};
use crate::init;
use crate::layers::Forward;
use crate::module::Param;

fn check_channels(op: &str, in_channels: usize, out_channels: usize, groups: usize) -> Result<()> {
    if in_channels == 0 || out_channels == 0 || groups == 0 {
        return Err(invalid(op, "channels and groups must be positive"));
    }
    if !in_channels.is_multiple_of(groups) || !out_channels.is_multiple_of(groups) {
        return Err(invalid(
            op,
            format!(
                "in_channels ({in_channels}) and out_channels ({out_channels}) must be \
                 multiples of groups ({groups})"
            ),
        ));
    }
    Ok(())
}

/// A 1-D convolution over `x: [N, L, in_channels]`, as MLX's `nn.Conv1d`: `weight` is
/// `[out_channels, kernel_size, in_channels / groups]` from `U(−s, s)` with `s =
/// 1/√(in_channels · kernel_size)`, `bias` `[out_channels]` zeros.
///
/// ```
/// use nuvec_core::{DType, ones};
/// use nuvec_nn::{Conv1d, Forward};
///
/// # fn main() -> nuvec_nn::Result<()> {
/// let conv = Conv1d::new(3, 8, 3, 1, 1, 1, 1, true)?;
/// assert_eq!(conv.forward(&ones(&[2, 10, 3], DType::F32)?)?.shape(), [2, 10, 8]);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, crate::Module)]
pub struct Conv1d {
    /// `[out_channels, kernel_size, in_channels / groups]`.
    pub weight: Param,
    /// `[out_channels]`, if the layer has a bias.
    pub bias: Option<Param>,
    /// The step between outputs.
    pub stride: usize,
    /// Zeros added at both ends.
    pub padding: usize,
    /// The spacing of the kernel's taps.
    pub dilation: usize,
    /// Independent channel groups.
    pub groups: usize,
}

impl Conv1d {
    /// A float32 convolution with MLX's initialisation (MLX's defaults: stride 1, padding 0,
    /// dilation 1, groups 1, a bias).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel_size: usize,
        stride: usize,
        padding: usize,
        dilation: usize,
        groups: usize,
        bias: bool,
    ) -> Result<Conv1d> {
        check_channels("Conv1d", in_channels, out_channels, groups)?;
        if kernel_size == 0 || stride == 0 || dilation == 0 {
            return Err(invalid(
                "Conv1d",
                "kernel_size, stride and dilation must be positive",
            ));
        }
        let scale = (1.0 / (in_channels * kernel_size) as f64).sqrt();
        let shape = [out_channels, kernel_size, in_channels / groups];
        let weight = Param::new(init::uniform(-scale, scale, &shape, DType::F32)?);
        let bias = match bias {
            true => Some(Param::new(nuvec_core::zeros(&[out_channels], DType::F32)?)),
            false => None,
        };
        Ok(Conv1d {
            weight,
            bias,
            stride,
            padding,
            dilation,
            groups,
        })
    }
}

impl Forward for Conv1d {
    fn forward(&self, x: &Array) -> Result<Array> {
        let y = conv1d(
            x,
            &self.weight,
            self.stride,
            self.padding,
            self.dilation,
            self.groups,
        )?;
        Ok(match &self.bias {
            Some(b) => add(&y, b)?,
            None => y,
        })
    }
}

/// A 2-D convolution over `x: [N, H, W, in_channels]`, as MLX's `nn.Conv2d`: `weight` is
/// `[out_channels, kh, kw, in_channels / groups]` from `U(−s, s)` with `s = 1/√(in_channels
/// · kh · kw)`, `bias` `[out_channels]` zeros. Kernel size, stride, padding and dilation are
/// one value for both axes or a pair.
///
/// ```
/// use nuvec_core::{DType, ones};
/// use nuvec_nn::{Conv2d, Forward};
///
/// # fn main() -> nuvec_nn::Result<()> {
/// let conv = Conv2d::new(3, 4, (3, 3), 2, 1, 1, 1, true)?;
/// assert_eq!(conv.forward(&ones(&[1, 8, 8, 3], DType::F32)?)?.shape(), [1, 4, 4, 4]);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, crate::Module)]
pub struct Conv2d {
    /// `[out_channels, kh, kw, in_channels / groups]`.
    pub weight: Param,
    /// `[out_channels]`, if the layer has a bias.
    pub bias: Option<Param>,
    /// The steps between outputs, per axis.
    #[module(skip)]
    pub stride: ConvArg<2>,
    /// Zeros added on both sides, per axis.
    #[module(skip)]
    pub padding: ConvArg<2>,
    /// The spacing of the kernel's taps, per axis.
    #[module(skip)]
    pub dilation: ConvArg<2>,
    /// Independent channel groups.
    pub groups: usize,
}

impl Conv2d {
    /// A float32 convolution with MLX's initialisation (MLX's defaults: stride 1, padding 0,
    /// dilation 1, groups 1, a bias).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel_size: impl Into<ConvArg<2>>,
        stride: impl Into<ConvArg<2>>,
        padding: impl Into<ConvArg<2>>,
        dilation: impl Into<ConvArg<2>>,
        groups: usize,
        bias: bool,
    ) -> Result<Conv2d> {
        check_channels("Conv2d", in_channels, out_channels, groups)?;
        let ConvArg([kh, kw]) = kernel_size.into();
        let (stride, padding, dilation) = (stride.into(), padding.into(), dilation.into());
        if kh == 0 || kw == 0 || stride.0.contains(&0) || dilation.0.contains(&0) {
            return Err(invalid(
                "Conv2d",
                "kernel_size, stride and dilation must be positive",
            ));
        }
        let scale = (1.0 / (in_channels * kh * kw) as f64).sqrt();
        let shape = [out_channels, kh, kw, in_channels / groups];
        let weight = Param::new(init::uniform(-scale, scale, &shape, DType::F32)?);
        let bias = match bias {
            true => Some(Param::new(nuvec_core::zeros(&[out_channels], DType::F32)?)),
            false => None,
        };
        Ok(Conv2d {
            weight,
            bias,
            stride,
            padding,
            dilation,
            groups,
        })
    }
}

impl Forward for Conv2d {
    fn forward(&self, x: &Array) -> Result<Array> {
        let y = conv2d(
            x,
            &self.weight,
            self.stride,
            self.padding,
            self.dilation,
            self.groups,
        )?;
        Ok(match &self.bias {
            Some(b) => add(&y, b)?,
            None => y,
        })
    }
}
