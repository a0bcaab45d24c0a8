//! [`Linear`] and [`Identity`].

use nuvec_core::{Array, DType, add, matmul};

use crate::error::{Result, invalid};
use crate::init;
use crate::layers::Forward;
use crate::module::Param;

/// `y = x Wᵀ + b`, as MLX's `nn.Linear`: `weight` is `[output_dims, input_dims]`, `bias`
/// (optional) `[output_dims]`, both initialised from `U(−1/√in, 1/√in)`.
///
/// ```
/// use nuvec_core::{Array, DType, ones};
/// use nuvec_nn::{Forward, Linear, Module};
///
/// # fn main() -> nuvec_nn::Result<()> {
/// let layer = Linear::new(4, 3, true)?;
/// assert_eq!(layer.weight.shape(), [3, 4]);
/// let y = layer.forward(&ones(&[2, 4], DType::F32)?)?;
/// assert_eq!(y.shape(), [2, 3]);
/// assert_eq!(layer.num_parameters(), 15);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, crate::Module)]
pub struct Linear {
    /// `[output_dims, input_dims]`.
    pub weight: Param,
    /// `[output_dims]`, if the layer has a bias.
    pub bias: Option<Param>,
}

impl Linear {
    /// A float32 layer from `input_dims` to `output_dims`, with MLX's initialisation.
    pub fn new(input_dims: usize, output_dims: usize, bias: bool) -> Result<Linear> {
        Linear::with_dtype(input_dims, output_dims, bias, DType::F32)
    }

    /// [`Linear::new`] with parameters of `dtype`.
    pub fn with_dtype(
        input_dims: usize,
        output_dims: usize,
        bias: bool,
        dtype: DType,
    ) -> Result<Linear> {
        if input_dims == 0 || output_dims == 0 {
            return Err(invalid(
                "Linear",
                format!("dimensions must be positive, got {input_dims} and {output_dims}"),
            ));
        }
        let scale = (1.0 / input_dims as f64).sqrt();
        let weight = init::uniform(-scale, scale, &[output_dims, input_dims], dtype)?;
        let bias = match bias {
            true => Some(Param::new(init::uniform(
                -scale,
                scale,
                &[output_dims],
                dtype,
            )?)),
            false => None,
        };
        Ok(Linear {
            weight: Param::new(weight),
            bias,
        })
    }

    /// A layer with the given weight (`[out, in]`) and bias (`[out]`).
    pub fn from_weights(weight: Array, bias: Option<Array>) -> Result<Linear> {
        if weight.ndim() != 2 {
            return Err(invalid(
                "Linear",
                format!("the weight must be 2-D, got shape {:?}", weight.shape()),
            ));
        }
        if let Some(b) = &bias
            && b.shape() != [weight.shape()[0]]
        {
            return Err(invalid(
                "Linear",
                format!(
                    "the bias must have shape [{}], got {:?}",
                    weight.shape()[0],
                    b.shape()
                ),
            ));
        }
        Ok(Linear {
            weight: Param::new(weight),
            bias: bias.map(Param::new),
        })
    }

    /// `input_dims`.
    pub fn input_dims(&self) -> usize {
        self.weight.shape()[1]
    }

    /// `output_dims`.
    pub fn output_dims(&self) -> usize {
        self.weight.shape()[0]
    }
}

impl Forward for Linear {
    fn forward(&self, x: &Array) -> Result<Array> {
        let y = matmul(x, &self.weight.t()?)?;
        Ok(match &self.bias {
            Some(b) => add(&y, b)?,
            None => y,
        })
    }
}

/// The identity layer (MLX's `nn.Identity`): returns its input.
#[derive(Debug, Clone, Default, crate::Module)]
pub struct Identity;

impl Forward for Identity {
    fn forward(&self, x: &Array) -> Result<Array> {
        Ok(x.clone())
    }
}
