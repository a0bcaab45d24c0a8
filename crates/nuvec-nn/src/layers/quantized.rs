//! [`QuantizedLinear`]: a linear layer whose weight is quantized (MLX's affine mode).

use nuvec_core::{Array, DType, add, dequantize, quantize, quantized_matmul};

use crate::error::{Result, invalid};
use crate::init;
use crate::layers::Forward;
use crate::layers::linear::Linear;
use crate::module::{Param, Visit, join_name};

/// `y = x Ŵᵀ + b` with `Ŵ` the weight stored quantized, as MLX's `nn.QuantizedLinear`: the
/// parameters `weight` (`uint32`, `[out, in · bits / 32]`), `scales` and `biases` (`[out, in
/// / group_size]`) are [`nuvec_core::quantize`]'s outputs, and the product is
/// [`nuvec_core::quantized_matmul`]. The quantized parameters are frozen and stay frozen
/// ([`crate::Module::unfreeze`] leaves them so; MLX would unfreeze them). The bias is frozen
/// in a layer made by [`QuantizedLinear::new`] and trainable in one made from a [`Linear`],
/// as in MLX (where `from_linear` assigns the bias after the layer froze itself).
///
/// ```
/// use nuvec_core::{DType, ones};
/// use nuvec_nn::{Forward, Linear, QuantizedLinear, Module};
///
/// # fn main() -> nuvec_nn::Result<()> {
/// let linear = Linear::new(64, 8, true)?;
/// let mut q = QuantizedLinear::from_linear(&linear, 64, 4)?;
/// assert_eq!(q.weight.shape(), [8, 8]);
/// assert_eq!(q.trainable_parameters().into_keys().collect::<Vec<_>>(), ["bias"]);
/// q.unfreeze();
/// assert_eq!(q.trainable_parameters().len(), 1);
/// let x = ones(&[2, 64], DType::F32)?;
/// assert_eq!(q.forward(&x)?.shape(), [2, 8]);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct QuantizedLinear {
    /// The packed quantized weight, `uint32` `[out, in · bits / 32]`.
    pub weight: Param,
    /// One scale per group, `[out, in / group_size]`.
    pub scales: Param,
    /// One bias (offset) per group, `[out, in / group_size]`.
    pub biases: Param,
    /// The layer's bias, `[out]`, if it has one.
    pub bias: Option<Param>,
    /// Values per scale and bias (32, 64 or 128; MLX's default is 64).
    pub group_size: usize,
    /// Bits per value (2, 3, 4, 5, 6 or 8; MLX's default is 4).
    pub bits: u32,
}

impl QuantizedLinear {
    /// A layer from `input_dims` to `output_dims` with a random weight (drawn as
    /// [`Linear::new`]'s, then quantized) and a zero bias, all frozen.
    pub fn new(
        input_dims: usize,
        output_dims: usize,
        bias: bool,
        group_size: usize,
        bits: u32,
    ) -> Result<QuantizedLinear> {
        if input_dims == 0 || output_dims == 0 {
            return Err(invalid(
                "QuantizedLinear",
                format!("dimensions must be positive, got {input_dims} and {output_dims}"),
            ));
        }
        let scale = (1.0 / input_dims as f64).sqrt();
        let w = init::uniform(-scale, scale, &[output_dims, input_dims], DType::F32)?;
        let bias = match bias {
            true => Some(nuvec_core::zeros(&[output_dims], DType::F32)?),
            false => None,
        };
        let mut layer = QuantizedLinear::from_weights(&w, bias, group_size, bits)?;
        if let Some(b) = &mut layer.bias {
            b.set_frozen(true);
        }
        Ok(layer)
    }

    /// The layer of `linear`, its weight quantized with `group_size` and `bits` (MLX's
    /// `QuantizedLinear.from_linear`).
    pub fn from_linear(linear: &Linear, group_size: usize, bits: u32) -> Result<QuantizedLinear> {
        let bias = linear.bias.as_ref().map(|b| b.value().clone());
        QuantizedLinear::from_weights(linear.weight.value(), bias, group_size, bits)
    }

    /// The layer of a float weight `[out, in]` (quantized here) and an optional (trainable)
    /// bias.
    pub fn from_weights(
        weight: &Array,
        bias: Option<Array>,
        group_size: usize,
        bits: u32,
    ) -> Result<QuantizedLinear> {
        if weight.ndim() != 2 {
            return Err(invalid(
                "QuantizedLinear",
                format!("the weight must be 2-D, got shape {:?}", weight.shape()),
            ));
        }
        let (wq, scales, biases) = quantize(weight, group_size, bits)?;
        let frozen = |a: Array| {
            let mut p = Param::new(a);
            p.set_frozen(true);
            p
        };
        Ok(QuantizedLinear {
            weight: frozen(wq),
            scales: frozen(scales),
            biases: frozen(biases),
            bias: bias.map(Param::new),
            group_size,
            bits,
        })
    }

    /// The float weight `[out, in]` the quantized one stands for.
    pub fn dequantized_weight(&self) -> Result<Array> {
        Ok(dequantize(
            &self.weight,
            &self.scales,
            &self.biases,
            self.group_size,
            self.bits,
        )?)
    }
}

impl Forward for QuantizedLinear {
    fn forward(&self, x: &Array) -> Result<Array> {
        let y = quantized_matmul(
            x,
            &self.weight,
            &self.scales,
            &self.biases,
            true,
            self.group_size,
            self.bits,
        )?;
        Ok(match &self.bias {
            Some(b) => add(&y, b)?,
            None => y,
        })
    }
}

impl Visit for QuantizedLinear {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Param)) {
        self.weight.visit(&join_name(prefix, "weight"), f);
        self.scales.visit(&join_name(prefix, "scales"), f);
        self.biases.visit(&join_name(prefix, "biases"), f);
        self.bias.visit(&join_name(prefix, "bias"), f);
    }

    fn visit_mut(
        &mut self,
        prefix: &str,
        f: &mut dyn FnMut(&str, &mut Param) -> Result<()>,
    ) -> Result<()> {
        let mut refreeze = |name: &str, p: &mut Param| {
            let r = f(name, p);
            p.set_frozen(true);
            r
        };
        self.weight
            .visit_mut(&join_name(prefix, "weight"), &mut refreeze)?;
        self.scales
            .visit_mut(&join_name(prefix, "scales"), &mut refreeze)?;
        self.biases
            .visit_mut(&join_name(prefix, "biases"), &mut refreeze)?;
        self.bias.visit_mut(&join_name(prefix, "bias"), f)
    }
}
