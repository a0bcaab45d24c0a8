//! [`Sequential`].

use nuvec_core::Array;

use crate::error::Result;
use crate::layers::{Forward, Layer};

/// Layers applied one after the other, as MLX's `nn.Sequential`; their parameters are named
/// `layers.0.weight`, `layers.1.bias`, ...
///
/// ```
/// use nuvec_core::{DType, ones};
/// use nuvec_nn::{Forward, Linear, Module, ReLU, Sequential};
///
/// # fn main() -> nuvec_nn::Result<()> {
/// let mlp = Sequential::new()
///     .with(Linear::new(4, 8, true)?)
///     .with(ReLU)
///     .with(Linear::new(8, 1, false)?);
/// assert_eq!(mlp.forward(&ones(&[3, 4], DType::F32)?)?.shape(), [3, 1]);
/// assert!(mlp.parameters().contains_key("layers.2.weight"));
/// # Ok(())
/// # }
/// ```
#[derive(Default, crate::Module)]
pub struct Sequential {
    /// The layers, in order.
    pub layers: Vec<Box<dyn Layer>>,
}

impl Sequential {
    /// No layers (the identity).
    pub fn new() -> Sequential {
        Sequential { layers: Vec::new() }
    }

    /// The sequence with `layer` appended.
    pub fn with(mut self, layer: impl Layer + 'static) -> Sequential {
        self.layers.push(Box::new(layer));
        self
    }

    /// Appends `layer`.
    pub fn push(&mut self, layer: impl Layer + 'static) {
        self.layers.push(Box::new(layer));
    }

    /// The number of layers.
    pub fn len(&self) -> usize {
        self.layers.len()
    }

    /// Whether there are no layers.
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }
}

impl Forward for Sequential {
    fn forward(&self, x: &Array) -> Result<Array> {
        let mut y = x.clone();
        for layer in &self.layers {
            y = layer.forward(&y)?;
        }
        Ok(y)
    }
}
