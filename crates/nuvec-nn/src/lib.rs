//! nuvec-nn: neural-network layers, losses and optimizers over nuvec-core, after MLX's
//! `mlx.nn` and `mlx.optimizers` (the same names, defaults and formulas; candle-nn's where
//! MLX is silent), built only on nuvec-core's public API.
//!
//! - [`Module`]: a tree of named parameters ([`Param`]), flat under MLX's dotted names
//!   (`layers.0.weight`) as [`Params`]; `#[derive(Module)]` makes a struct one.
//!   [`value_and_grad`] differentiates a loss with respect to a module's trainable
//!   parameters. [`Module::save_weights`] and [`Module::load_weights_file`] write and read
//!   them as safetensors (or `.npz`) files; optimizers save their state the same way
//!   ([`optim::Optimizer::save_state`], [`optim::Optimizer::load_state`]).
//! - [Layers](layers): [`Linear`], [`QuantizedLinear`], [`Embedding`], [`RMSNorm`],
//!   [`LayerNorm`], [`RoPE`], [`MultiHeadAttention`] (grouped-query, with a [`KvCache`]),
//!   [`Conv1d`], [`Conv2d`], [`Dropout`], [`Sequential`], and activation layers; [`init`]
//!   holds the initialisers.
//! - [`activations`] and [`losses`] as functions; [`optim`] for the optimizers and schedules.
//! - [`transformer`]: a small decoder-only language model in the style of Qwen3 (RMS norms,
//!   rotary embeddings, grouped-query attention with q/k norms, SwiGLU), built from the
//!   layers above.
//!
//! A two-layer perceptron, trained a few steps of SGD:
//!
//! ```
//! use nuvec_core::{Array, random};
//! use nuvec_nn::losses::{Reduction, mse_loss};
//! use nuvec_nn::optim::{Optimizer, Sgd};
//! use nuvec_nn::{Forward, Linear, Module, activations::relu, value_and_grad};
//!
//! #[derive(Module)]
//! struct Mlp {
//!     hidden: Linear,
//!     out: Linear,
//! }
//!
//! impl Forward for Mlp {
//!     fn forward(&self, x: &Array) -> nuvec_nn::Result<Array> {
//!         self.out.forward(&relu(&self.hidden.forward(x)?)?)
//!     }
//! }
//!
//! # fn main() -> nuvec_nn::Result<()> {
//! random::seed(0);
//! let mut model = Mlp { hidden: Linear::new(2, 16, true)?, out: Linear::new(16, 1, true)? };
//! let x = Array::from_slice(&[0.0f32, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0], &[4, 2])?;
//! let y = Array::from_slice(&[0.0f32, 1.0, 1.0, 2.0], &[4, 1])?;
//! let mut opt = Sgd::new(0.1);
//! let mut losses = Vec::new();
//! for _ in 0..20 {
//!     let (loss, grads) =
//!         value_and_grad(&mut model, |m| mse_loss(&m.forward(&x)?, &y, Reduction::Mean))?;
//!     opt.update(&mut model, &grads)?;
//!     losses.push(loss.item::<f32>()?);
//! }
//! assert!(losses[19] < losses[0] / 2.0);
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

// The derive names `::nuvec_nn`, which must resolve inside this crate too.
extern crate self as nuvec_nn;

pub mod activations;
mod checkpoint;
pub mod error;
mod grad;
pub mod init;
pub mod layers;
pub mod losses;
mod module;
pub mod optim;
pub mod transformer;

pub use error::{Error, Result};
pub use grad::value_and_grad;
pub use layers::activation::{
    CELU, ELU, GELU, GLU, GeluApprox, HardShrink, HardTanh, Hardswish, LeakyReLU, LogSigmoid,
    LogSoftmax, Mish, PReLU, ReLU, ReLU6, SELU, SiLU, Sigmoid, SoftShrink, Softmax, Softmin,
    Softplus, Softsign, Step, Tanh,
};
pub use layers::attention::{KvCache, MultiHeadAttention};
pub use layers::container::Sequential;
pub use layers::conv::{Conv1d, Conv2d};
pub use layers::dropout::Dropout;
pub use layers::embedding::Embedding;
pub use layers::linear::{Identity, Linear};
pub use layers::norm::{LayerNorm, RMSNorm};
pub use layers::positional::RoPE;
pub use layers::quantized::QuantizedLinear;
pub use layers::{Forward, Layer};
pub use module::{Module, NamedArrays, Param, Params, Visit, join_name};
/// `#[derive(Module)]`: see [`nuvec_nn_derive`] for the field attributes.
pub use nuvec_nn_derive::Module;
