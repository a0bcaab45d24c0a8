//! [`RMSNorm`] and [`LayerNorm`] (over nuvec-core's fused norms).

use nuvec_core::{Array, DType, fast};

use crate::error::{Result, invalid};
use crate::layers::Forward;
use crate::module::Param;

/// Root-mean-square normalisation over the last axis with a learned scale, as MLX's
/// `nn.RMSNorm` (over [`fast::rms_norm`]): `weight` is `[dims]`, initialised to ones.
///
/// ```
/// use nuvec_core::Array;
/// use nuvec_nn::{Forward, RMSNorm};
///
/// # fn main() -> nuvec_nn::Result<()> {
/// let norm = RMSNorm::new(2, 0.0)?;
/// let y = norm.forward(&Array::from_slice(&[3.0f32, 4.0], &[1, 2])?)?.to_vec::<f32>()?;
/// let rms = 12.5f32.sqrt();
/// assert!((y[0] - 3.0 / rms).abs() < 1e-6 && (y[1] - 4.0 / rms).abs() < 1e-6);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, crate::Module)]
pub struct RMSNorm {
    /// The scale, `[dims]`.
    pub weight: Param,
    /// Added to the mean square (MLX's default is `1e-5`).
    pub eps: f32,
}

impl RMSNorm {
    /// A norm over `dims` features (float32 ones).
    pub fn new(dims: usize, eps: f32) -> Result<RMSNorm> {
        if dims == 0 {
            return Err(invalid("RMSNorm", "dims must be positive"));
        }
        Ok(RMSNorm {
            weight: Param::new(nuvec_core::ones(&[dims], DType::F32)?),
            eps,
        })
    }
}

impl Forward for RMSNorm {
    fn forward(&self, x: &Array) -> Result<Array> {
        Ok(fast::rms_norm(x, Some(&self.weight), self.eps)?)
    }
}

/// Layer normalisation over the last axis, as MLX's `nn.LayerNorm` (over
/// [`fast::layer_norm`]): `(x − mean) / √(var + eps) · weight + bias`, with `weight` (ones)
/// and `bias` (zeros) of `[dims]` when `affine` (the bias only with `bias`).
#[derive(Debug, Clone, crate::Module)]
pub struct LayerNorm {
    /// The scale, `[dims]`, when affine.
    pub weight: Option<Param>,
    /// The shift, `[dims]`, when affine with a bias.
    pub bias: Option<Param>,
    /// Added to the variance (MLX's default is `1e-5`).
    pub eps: f32,
}

impl LayerNorm {
    /// A norm over `dims` features (MLX's defaults: `affine` and `bias` true).
    pub fn new(dims: usize, eps: f32, affine: bool, bias: bool) -> Result<LayerNorm> {
        if dims == 0 {
            return Err(invalid("LayerNorm", "dims must be positive"));
        }
        let (weight, bias) = match affine {
            true => (
                Some(Param::new(nuvec_core::ones(&[dims], DType::F32)?)),
                match bias {
                    true => Some(Param::new(nuvec_core::zeros(&[dims], DType::F32)?)),
                    false => None,
                },
            ),
            false => (None, None),
        };
        Ok(LayerNorm { weight, bias, eps })
    }
}

impl Forward for LayerNorm {
    fn forward(&self, x: &Array) -> Result<Array> {
        let w = self.weight.as_ref().map(Param::value);
        let b = self.bias.as_ref().map(Param::value);
        Ok(fast::layer_norm(x, w, b, self.eps)?)
    }
}
