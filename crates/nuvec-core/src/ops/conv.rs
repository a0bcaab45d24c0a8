//! Convolutions, with MLX's layout (channels last): the input is `[N, *spatial, C_in]`, the
//! weight `[C_out, *kernel, C_in / groups]` and the output `[N, *spatial_out, C_out]`, for one
//! to three spatial axes.
//!
//! [`conv1d`], [`conv2d`] and [`conv3d`] are cross-correlations (the kernel is not flipped);
//! [`conv_transpose1d`] and friends are their transposes; [`conv_general`] exposes every
//! parameter of the single primitive they all record ([`ConvOp`]). Inputs of different float
//! types are promoted to a common one; integer inputs are an error, as in MLX.
//!
//! ```
//! use nuvec_core::{Array, conv1d};
//!
//! # fn main() -> nuvec_core::Result<()> {
//! // One sequence of 5 positions with one channel, and a 2-tap kernel summing neighbours.
//! let x = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0], &[1, 5, 1])?;
//! let w = Array::from_slice(&[1.0f32, 1.0], &[1, 2, 1])?;
//! let y = conv1d(&x, &w, 1, 0, 1, 1)?;
//! assert_eq!(y.shape(), [1, 4, 1]);
//! assert_eq!(y.to_vec::<f32>()?, [3.0, 5.0, 7.0, 9.0]);
//! # Ok(())
//! # }
//! ```

use crate::error::invalid;
use crate::ops::{check_errors, expect_inputs};
use crate::primitive::{OutputSpec, Primitive};
use crate::{Array, Category, DType, Result, promote_types};

/// The convolution primitive: inputs `(x, w)` of one float type, `x` of shape
/// `[N, *spatial, C_in]` and `w` of shape `[C_out, *kernel, C_in / groups]`; every vector has
/// one entry per spatial axis.
///
/// Output position `o` along an axis reads, for kernel tap `k`, position
/// `o·stride + k·kernel_dilation − padding_lo` of the input dilated by `input_dilation` (zeros
/// between its elements) and padded with zeros on both sides; `flip` reverses the kernel's
/// spatial axes (a true convolution instead of a cross-correlation). Padding may be negative,
/// which crops the dilated input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvOp {
    /// Positions between consecutive outputs, per axis (at least 1).
    pub strides: Vec<usize>,
    /// Zeros before the dilated input, per axis.
    pub padding_lo: Vec<isize>,
    /// Zeros after the dilated input, per axis.
    pub padding_hi: Vec<isize>,
    /// Positions between kernel taps, per axis (at least 1).
    pub kernel_dilation: Vec<usize>,
    /// Zeros between input elements plus one, per axis (at least 1).
    pub input_dilation: Vec<usize>,
    /// The channels split into this many independent groups.
    pub groups: usize,
    /// Whether the kernel's spatial axes are reversed.
    pub flip: bool,
}

/// The extent of `n` elements spread `dilation` apart: `(n − 1)·dilation + 1`, or 0 if empty.
pub(crate) fn dilated(n: usize, dilation: usize) -> usize {
    if n == 0 { 0 } else { (n - 1) * dilation + 1 }
}

impl ConvOp {
    /// The primitive's name.
    pub fn name(&self) -> &'static str {
        "conv_general"
    }

    /// The number of spatial axes.
    pub fn spatial(&self) -> usize {
        self.strides.len()
    }

    /// The output's shape and type.
    pub fn output_specs(&self, inputs: &[Array]) -> Result<Vec<OutputSpec>> {
        let op = self.name();
        expect_inputs(op, inputs, 2)?;
        let (x, w) = (&inputs[0], &inputs[1]);
        if x.dtype() != w.dtype() || x.dtype().category() != Category::Float {
            return Err(invalid(
                op,
                format!(
                    "the primitive needs two inputs of one float type, got {} and {}",
                    x.dtype(),
                    w.dtype()
                ),
            ));
        }
        let shape = self.out_shape(op, x.shape(), w.shape())?;
        Ok(vec![(shape, x.dtype())])
    }

    /// The output shape for these input and weight shapes, or the error that makes them
    /// invalid (the messages start with `op`).
    pub(crate) fn out_shape(&self, op: &str, x: &[usize], w: &[usize]) -> Result<Vec<usize>> {
        let d = self.spatial();
        if !(1..=3).contains(&d) {
            return Err(invalid(
                op,
                format!("1 to 3 spatial axes are supported, got {d}"),
            ));
        }
        let lengths = [
            self.padding_lo.len(),
            self.padding_hi.len(),
            self.kernel_dilation.len(),
            self.input_dilation.len(),
        ];
        if lengths.iter().any(|&l| l != d) {
            return Err(invalid(
                op,
                format!("parameters for different numbers of spatial axes: {self:?}"),
            ));
        }
        if x.len() != d + 2 {
            return Err(invalid(
                op,
                format!(
                    "the input must have {} dimensions ([N, ..., C_in]) for {d} spatial axes, \
                     got shape {x:?}",
                    d + 2
                ),
            ));
        }
        if w.len() != d + 2 {
            return Err(invalid(
                op,
                format!(
                    "the weight must have {} dimensions ([C_out, ..., C_in]) for {d} spatial \
                     axes, got shape {w:?}",
                    d + 2
                ),
            ));
        }
        if self.strides.contains(&0)
            || self.kernel_dilation.contains(&0)
            || self.input_dilation.contains(&0)
        {
            return Err(invalid(
                op,
                format!(
                    "strides and dilations must be positive, got strides {:?}, kernel \
                     dilation {:?}, input dilation {:?}",
                    self.strides, self.kernel_dilation, self.input_dilation
                ),
            ));
        }
        let g = self.groups;
        let (c_in, c_out, c_w) = (x[d + 1], w[0], w[d + 1]);
        if g == 0 {
            return Err(invalid(op, "groups must be at least 1"));
        }
        if c_in % g != 0 {
            return Err(invalid(
                op,
                format!("the input channels ({c_in}) must be divisible by the groups ({g})"),
            ));
        }
        if c_out % g != 0 {
            return Err(invalid(
                op,
                format!("the output channels ({c_out}) must be divisible by the groups ({g})"),
            ));
        }
        if c_w * g != c_in {
            return Err(invalid(
                op,
                format!(
                    "the input has {c_in} channels but the weight of shape {w:?} with {g} \
                     group(s) expects {}",
                    c_w * g
                ),
            ));
        }
        let mut out = vec![x[0]];
        for i in 0..d {
            let k = w[i + 1];
            if k == 0 {
                return Err(invalid(
                    op,
                    format!("the kernel's spatial sizes must be positive, got weight {w:?}"),
                ));
            }
            let span = dilated(x[i + 1], self.input_dilation[i]) as isize
                + self.padding_lo[i]
                + self.padding_hi[i];
            let reach = dilated(k, self.kernel_dilation[i]) as isize;
            if span < reach {
                return Err(invalid(
                    op,
                    format!(
                        "spatial axis {i}: the padded input (size {span}) is smaller than the \
                         dilated kernel (size {reach}); input {x:?}, weight {w:?}, padding \
                         {:?} and {:?}",
                        self.padding_lo, self.padding_hi
                    ),
                ));
            }
            out.push(((span - reach) as usize) / self.strides[i] + 1);
        }
        out.push(c_out);
        Ok(out)
    }
}

/// One value per spatial axis of a convolution: a single `usize` stands for every axis, a
/// tuple or array gives one per axis.
///
/// ```
/// use nuvec_core::ConvArg;
///
/// assert_eq!(ConvArg::<2>::from(3).0, [3, 3]);
/// assert_eq!(ConvArg::<2>::from((1, 2)).0, [1, 2]);
/// assert_eq!(ConvArg::<3>::from([1, 2, 3]).0, [1, 2, 3]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvArg<const N: usize>(pub [usize; N]);

impl<const N: usize> From<usize> for ConvArg<N> {
    fn from(v: usize) -> ConvArg<N> {
        ConvArg([v; N])
    }
}

impl<const N: usize> From<[usize; N]> for ConvArg<N> {
    fn from(v: [usize; N]) -> ConvArg<N> {
        ConvArg(v)
    }
}

impl From<(usize, usize)> for ConvArg<2> {
    fn from((a, b): (usize, usize)) -> ConvArg<2> {
        ConvArg([a, b])
    }
}

impl From<(usize, usize, usize)> for ConvArg<3> {
    fn from((a, b, c): (usize, usize, usize)) -> ConvArg<3> {
        ConvArg([a, b, c])
    }
}

/// `values` for `d` axes: empty gives `default` everywhere, one value is repeated.
fn per_axis<T: Copy + std::fmt::Debug>(
    op: &str,
    what: &str,
    values: &[T],
    d: usize,
    default: T,
) -> Result<Vec<T>> {
    match values.len() {
        0 => Ok(vec![default; d]),
        1 => Ok(vec![values[0]; d]),
        n if n == d => Ok(values.to_vec()),
        _ => Err(invalid(
            op,
            format!("{what} {values:?} for {d} spatial axes"),
        )),
    }
}

/// The common float type of `x` and `w`, with both converted to it.
fn promoted(op: &str, x: &Array, w: &Array) -> Result<(Array, Array)> {
    for a in [x, w] {
        if a.dtype().category() != Category::Float {
            return Err(invalid(
                op,
                format!(
                    "only floating-point inputs are supported, got {} and {}",
                    x.dtype(),
                    w.dtype()
                ),
            ));
        }
    }
    let dtype: DType = promote_types(x.dtype(), w.dtype());
    Ok((x.astype(dtype)?, w.astype(dtype)?))
}

/// Records the primitive after checking the arguments (errors name `op`).
fn record(op: &str, x: &Array, w: &Array, p: ConvOp) -> Result<Array> {
    check_errors(&[x, w])?;
    let (x, w) = promoted(op, x, w)?;
    // The shape check here gives errors in the name of the function the caller used.
    p.out_shape(op, x.shape(), w.shape())?;
    Array::op1(Primitive::Conv(p), vec![x, w])
}

/// Checks that the `what` operand (its axes named `axes`) of an op over `d` spatial axes has
/// `d + 2` dimensions.
fn check_rank(op: &str, (what, axes): (&str, &str), a: &Array, d: usize) -> Result<()> {
    if a.ndim() != d + 2 {
        return Err(invalid(
            op,
            format!(
                "the {what} must have {} dimensions ({axes}), got shape {:?}",
                d + 2,
                a.shape()
            ),
        ));
    }
    Ok(())
}

/// [`check_rank`] of a convolution's input.
const INPUT: (&str, &str) = ("input", "[N, ..., C_in]");

/// The convolution with every parameter: the input dilated by `input_dilation` and padded
/// with `padding_lo` / `padding_hi` zeros (negative values crop), correlated with the kernel
/// dilated by `kernel_dilation` (reversed first if `flip`), every `strides`-th position kept.
/// Each parameter slice holds one value per spatial axis, a single value for all of them, or
/// nothing for the default (stride and dilations 1, padding 0). Channels split into `groups`
/// independent groups. The transposed convolutions and the derivatives are made of this.
///
/// ```
/// use nuvec_core::{Array, conv_general};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let x = Array::from_slice(&[1.0f32, 2.0, 3.0], &[1, 3, 1])?;
/// let w = Array::from_slice(&[1.0f32, 10.0], &[1, 2, 1])?;
/// // Input dilated to [1, 0, 2, 0, 3] and padded with one zero on each side; kernel flipped.
/// let y = conv_general(&x, &w, &[], &[1], &[1], &[], &[2], 1, true)?;
/// assert_eq!(y.to_vec::<f32>()?, [1.0, 10.0, 2.0, 20.0, 3.0, 30.0]);
/// # Ok(())
/// # }
/// ```
#[allow(clippy::too_many_arguments)]
pub fn conv_general(
    x: &Array,
    w: &Array,
    strides: &[usize],
    padding_lo: &[isize],
    padding_hi: &[isize],
    kernel_dilation: &[usize],
    input_dilation: &[usize],
    groups: usize,
    flip: bool,
) -> Result<Array> {
    const OP: &str = "conv_general";
    check_errors(&[x, w])?;
    let d = x.ndim().saturating_sub(2);
    if !(1..=3).contains(&d) {
        return Err(invalid(
            OP,
            format!(
                "the input must have 3 to 5 dimensions ([N, ..., C_in]), got shape {:?}",
                x.shape()
            ),
        ));
    }
    let p = ConvOp {
        strides: per_axis(OP, "strides", strides, d, 1)?,
        padding_lo: per_axis(OP, "padding_lo", padding_lo, d, 0)?,
        padding_hi: per_axis(OP, "padding_hi", padding_hi, d, 0)?,
        kernel_dilation: per_axis(OP, "kernel_dilation", kernel_dilation, d, 1)?,
        input_dilation: per_axis(OP, "input_dilation", input_dilation, d, 1)?,
        groups,
        flip,
    };
    record(OP, x, w, p)
}

/// Defines the public `D`-dimensional convolution `$name` (doc attributes first) over
/// `$inner` ([`conv_nd`], or [`conv_transpose_nd`] with `output_padding`): each parameter
/// is one value for every axis or one per axis.
macro_rules! conv_fn {
    ($(#[$doc:meta])* $name:ident, $d:literal, $inner:ident $(, $extra:ident)?) => {
        $(#[$doc])*
        pub fn $name(
            x: &Array,
            w: &Array,
            stride: impl Into<ConvArg<$d>>,
            padding: impl Into<ConvArg<$d>>,
            dilation: impl Into<ConvArg<$d>>,
            $($extra: impl Into<ConvArg<$d>>,)?
            groups: usize,
        ) -> Result<Array> {
            let params = (stride.into(), padding.into(), dilation.into() $(, $extra.into())?);
            $inner::<$d>(stringify!($name), x, w, params, groups)
        }
    };
}

/// A plain convolution (cross-correlation) over `D` spatial axes.
fn conv_nd<const D: usize>(
    op: &str,
    x: &Array,
    w: &Array,
    (stride, padding, dilation): (ConvArg<D>, ConvArg<D>, ConvArg<D>),
    groups: usize,
) -> Result<Array> {
    check_errors(&[x, w])?;
    check_rank(op, INPUT, x, D)?;
    let pad: Vec<isize> = padding.0.iter().map(|&v| v as isize).collect();
    let p = ConvOp {
        strides: stride.0.to_vec(),
        padding_lo: pad.clone(),
        padding_hi: pad,
        kernel_dilation: dilation.0.to_vec(),
        input_dilation: vec![1; D],
        groups,
        flip: false,
    };
    record(op, x, w, p)
}

/// The 1-D convolution (cross-correlation, as in MLX and PyTorch) of `x: [N, L, C_in]` with
/// `w: [C_out, K, C_in / groups]`: `padding` zeros on both sides, taps `dilation` apart, every
/// `stride`-th output kept, giving `[N, (L + 2·padding − dilation·(K − 1) − 1) / stride + 1,
/// C_out]`. With `groups = C_in = C_out` it is depthwise (one filter per channel).
///
/// ```
/// use nuvec_core::{Array, conv1d};
///
/// # fn main() -> nuvec_core::Result<()> {
/// // Two channels, each with its own 2-tap filter (depthwise), one zero of padding.
/// let x = Array::from_slice(&[1.0f32, 10.0, 2.0, 20.0, 3.0, 30.0], &[1, 3, 2])?;
/// let w = Array::from_slice(&[1.0f32, 1.0, 1.0, -1.0], &[2, 2, 1])?;
/// let y = conv1d(&x, &w, 1, 1, 1, 2)?;
/// assert_eq!(y.shape(), [1, 4, 2]);
/// assert_eq!(y.to_vec::<f32>()?, [1.0, -10.0, 3.0, -10.0, 5.0, -10.0, 3.0, 30.0]);
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
    let params = (stride.into(), padding.into(), dilation.into());
    let conv = conv_nd::<1>("conv1d", x, w, params, groups)?;
    // The depthwise case (LLMs' short convolutions) is one fused kernel where one takes it.
    let channels = x.shape()[2];
    if groups == channels && w.shape()[0] == channels {
        let dtype = conv.dtype();
        let fused = crate::fast::conv::depthwise_conv1d(
            &x.astype(dtype)?,
            &w.astype(dtype)?,
            stride,
            padding,
            dilation,
        )?;
        if let Some(fused) = fused {
            return Ok(fused);
        }
    }
    Ok(conv)
}

conv_fn! {
    /// The 2-D convolution of `x: [N, H, W, C_in]` with `w: [C_out, KH, KW, C_in / groups]`;
    /// `stride`, `padding` and `dilation` are one value for both axes or a pair.
    ///
    /// ```
    /// use nuvec_core::{DType, conv2d, ones};
    ///
    /// # fn main() -> nuvec_core::Result<()> {
    /// let x = ones(&[2, 5, 5, 3], DType::F32)?;
    /// let w = ones(&[4, 3, 3, 3], DType::F32)?;
    /// let y = conv2d(&x, &w, 2, 1, 1, 1)?;
    /// assert_eq!(y.shape(), [2, 3, 3, 4]);
    /// // The centre output sees all 27 inputs; a corner sees 2 × 2 positions.
    /// let v = y.to_vec::<f32>()?;
    /// assert_eq!((v[4 * 4], v[0]), (27.0, 12.0));
    /// # Ok(())
    /// # }
    /// ```
    conv2d, 2, conv_nd
}

conv_fn! {
    /// The 3-D convolution of `x: [N, D, H, W, C_in]` with `w: [C_out, KD, KH, KW, C_in /
    /// groups]`; `stride`, `padding` and `dilation` are one value for every axis or a triple.
    ///
    /// ```
    /// use nuvec_core::{DType, conv3d, ones};
    ///
    /// # fn main() -> nuvec_core::Result<()> {
    /// let x = ones(&[1, 4, 4, 4, 2], DType::F32)?;
    /// let w = ones(&[3, 2, 2, 2, 2], DType::F32)?;
    /// let y = conv3d(&x, &w, (1, 2, 2), 0, 1, 1)?;
    /// assert_eq!(y.shape(), [1, 3, 2, 2, 3]);
    /// assert!(y.to_vec::<f32>()?.iter().all(|&v| v == 16.0));
    /// # Ok(())
    /// # }
    /// ```
    conv3d, 3, conv_nd
}

/// The transposed convolution over `D` spatial axes, as MLX builds it: a convolution of the
/// input dilated by `stride`, with the kernel flipped and padded so that each output has the
/// size `(L − 1)·stride − 2·padding + dilation·(K − 1) + 1 + output_padding`.
fn conv_transpose_nd<const D: usize>(
    op: &str,
    x: &Array,
    w: &Array,
    (stride, padding, dilation, output_padding): (ConvArg<D>, ConvArg<D>, ConvArg<D>, ConvArg<D>),
    groups: usize,
) -> Result<Array> {
    check_errors(&[x, w])?;
    check_rank(op, INPUT, x, D)?;
    check_rank(op, ("weight", "[C_out, ..., C_in]"), w, D)?;
    let mut lo = Vec::with_capacity(D);
    let mut hi = Vec::with_capacity(D);
    for i in 0..D {
        if stride.0[i] == 0 || dilation.0[i] == 0 {
            return Err(invalid(
                op,
                format!(
                    "stride and dilation must be positive, got {:?} and {:?}",
                    stride.0, dilation.0
                ),
            ));
        }
        // The kernel's extent less one, minus the padding the forward convolution removed.
        let reach = dilated(w.shape()[i + 1].max(1), dilation.0[i]) as isize - 1;
        lo.push(reach - padding.0[i] as isize);
        hi.push(reach - padding.0[i] as isize + output_padding.0[i] as isize);
    }
    let p = ConvOp {
        strides: vec![1; D],
        padding_lo: lo,
        padding_hi: hi,
        kernel_dilation: dilation.0.to_vec(),
        input_dilation: stride.0.to_vec(),
        groups,
        flip: true,
    };
    record(op, x, w, p)
}

/// The 1-D transposed convolution (the adjoint of [`conv1d`] with the kernel's channel axes
/// read the other way), MLX's `conv_transpose1d`: `x: [N, L, C_in]`, `w: [C_out, K, C_in /
/// groups]`, output `[N, (L − 1)·stride − 2·padding + dilation·(K − 1) + 1 + output_padding,
/// C_out]`.
///
/// ```
/// use nuvec_core::{Array, conv_transpose1d};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let x = Array::from_slice(&[1.0f32, 2.0], &[1, 2, 1])?;
/// let w = Array::from_slice(&[1.0f32, 10.0, 100.0], &[1, 3, 1])?;
/// // Each input spreads its kernel over the output, starting `stride` apart.
/// let y = conv_transpose1d(&x, &w, 2, 0, 1, 0, 1)?;
/// assert_eq!(y.to_vec::<f32>()?, [1.0, 10.0, 102.0, 20.0, 200.0]);
/// # Ok(())
/// # }
/// ```
pub fn conv_transpose1d(
    x: &Array,
    w: &Array,
    stride: usize,
    padding: usize,
    dilation: usize,
    output_padding: usize,
    groups: usize,
) -> Result<Array> {
    let params = (
        stride.into(),
        padding.into(),
        dilation.into(),
        output_padding.into(),
    );
    conv_transpose_nd::<1>("conv_transpose1d", x, w, params, groups)
}

conv_fn! {
    /// The 2-D transposed convolution (MLX's `conv_transpose2d`); each parameter is one value
    /// for both axes or a pair.
    ///
    /// ```
    /// use nuvec_core::{DType, conv_transpose2d, ones};
    ///
    /// # fn main() -> nuvec_core::Result<()> {
    /// let x = ones(&[1, 3, 3, 2], DType::F32)?;
    /// let w = ones(&[5, 2, 2, 2], DType::F32)?;
    /// let y = conv_transpose2d(&x, &w, 2, 0, 1, (1, 0), 1)?;
    /// assert_eq!(y.shape(), [1, 7, 6, 5]);
    /// # Ok(())
    /// # }
    /// ```
    conv_transpose2d, 2, conv_transpose_nd, output_padding
}

conv_fn! {
    /// The 3-D transposed convolution (MLX's `conv_transpose3d`); each parameter is one value
    /// for every axis or a triple.
    ///
    /// ```
    /// use nuvec_core::{DType, conv_transpose3d, ones};
    ///
    /// # fn main() -> nuvec_core::Result<()> {
    /// let x = ones(&[1, 2, 2, 2, 1], DType::F32)?;
    /// let w = ones(&[1, 3, 3, 3, 1], DType::F32)?;
    /// let y = conv_transpose3d(&x, &w, 1, 1, 1, 0, 1)?;
    /// assert_eq!(y.shape(), [1, 2, 2, 2, 1]);
    /// assert!(y.to_vec::<f32>()?.iter().all(|&v| v == 8.0));
    /// # Ok(())
    /// # }
    /// ```
    conv_transpose3d, 3, conv_transpose_nd, output_padding
}
