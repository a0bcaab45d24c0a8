//! Layers, as MLX's `nn` layers: each is a [`crate::Module`] (its parameters named as in
//! MLX), and those of one input implement [`Forward`].

pub mod activation;
pub mod attention;
pub mod container;
pub mod conv;
pub mod dropout;
pub mod embedding;
pub mod linear;
pub mod norm;
pub mod positional;
pub mod quantized;

use nuvec_core::Array;

use crate::error::Result;
use crate::module::Visit;

/// A layer of one input and one output (MLX's `__call__(x)`).
pub trait Forward {
    /// The layer applied to `x`.
    fn forward(&self, x: &Array) -> Result<Array>;
}

/// A module of one input, as [`container::Sequential`] holds them: [`Visit`] and
/// [`Forward`], and `Send + Sync` so that models can move between threads. Implemented for
/// every such type.
pub trait Layer: Visit + Forward + Send + Sync {}

impl<T: Visit + Forward + Send + Sync> Layer for T {}

impl<T: Forward + ?Sized> Forward for Box<T> {
    fn forward(&self, x: &Array) -> Result<Array> {
        (**self).forward(x)
    }
}
