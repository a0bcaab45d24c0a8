//! Activation layers, as MLX's: each applies the function of the same name in
//! [`crate::activations`]. Those without settings are unit structs (`ReLU`); the others hold
//! their settings, with MLX's defaults from `Default`.
//!
//! ```
//! use nuvec_core::Array;
//! use nuvec_nn::{Forward, GELU, GeluApprox, LeakyReLU};
//!
//! # fn main() -> nuvec_nn::Result<()> {
//! let x = Array::from_slice(&[-2.0f32, 3.0], &[2])?;
//! assert_eq!(LeakyReLU::default().forward(&x)?.to_vec::<f32>()?, [-0.02, 3.0]);
//! let y = GELU::new(GeluApprox::Tanh).forward(&x)?;
//! assert_eq!(y.shape(), [2]);
//! # Ok(())
//! # }
//! ```

use nuvec_core::{Array, DType};

use crate::activations as act;
use crate::error::Result;
use crate::layers::Forward;
use crate::module::Param;

macro_rules! unit_activations {
    ($($(#[$doc:meta])* $name:ident => $f:path;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default, crate::Module)]
        pub struct $name;

        impl Forward for $name {
            fn forward(&self, x: &Array) -> Result<Array> {
                $f(x)
            }
        }
    )*};
}

unit_activations! {
    /// [`act::relu`] as a layer.
    ReLU => act::relu;
    /// [`act::relu6`] as a layer.
    ReLU6 => act::relu6;
    /// [`act::selu`] as a layer.
    SELU => act::selu;
    /// [`act::silu`] as a layer.
    SiLU => act::silu;
    /// [`act::softplus`] as a layer.
    Softplus => act::softplus;
    /// [`act::softsign`] as a layer.
    Softsign => act::softsign;
    /// [`act::mish`] as a layer.
    Mish => act::mish;
    /// [`act::hardswish`] as a layer.
    Hardswish => act::hardswish;
    /// [`act::sigmoid`] as a layer.
    Sigmoid => act::sigmoid;
    /// [`act::log_sigmoid`] as a layer.
    LogSigmoid => act::log_sigmoid;
    /// [`act::tanh`] as a layer.
    Tanh => act::tanh;
}

macro_rules! set_activations {
    ($($(#[$doc:meta])* $name:ident { $field:ident: $ty:ty = $default:expr } => $f:path;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, crate::Module)]
        pub struct $name {
            /// The function's setting (see the function).
            pub $field: $ty,
        }

        impl Default for $name {
            fn default() -> $name {
                $name { $field: $default }
            }
        }

        impl $name {
            /// The layer with this setting.
            pub fn new($field: $ty) -> $name {
                $name { $field }
            }
        }

        impl Forward for $name {
            fn forward(&self, x: &Array) -> Result<Array> {
                $f(x, self.$field)
            }
        }
    )*};
}

set_activations! {
    /// [`act::leaky_relu`] as a layer (default slope 0.01).
    LeakyReLU { negative_slope: f64 = 0.01 } => act::leaky_relu;
    /// [`act::elu`] as a layer (default `alpha` 1).
    ELU { alpha: f64 = 1.0 } => act::elu;
    /// [`act::celu`] as a layer (default `alpha` 1).
    CELU { alpha: f64 = 1.0 } => act::celu;
    /// [`act::hard_shrink`] as a layer (default `lambda` 0.5).
    HardShrink { lambda: f64 = 0.5 } => act::hard_shrink;
    /// [`act::soft_shrink`] as a layer (default `lambda` 0.5).
    SoftShrink { lambda: f64 = 0.5 } => act::soft_shrink;
    /// [`act::step`] as a layer (default threshold 0).
    Step { threshold: f64 = 0.0 } => act::step;
    /// [`act::softmax`] as a layer (default axis −1).
    Softmax { axis: isize = -1 } => act::softmax;
    /// [`act::log_softmax`] as a layer (default axis −1).
    LogSoftmax { axis: isize = -1 } => act::log_softmax;
    /// [`act::softmin`] as a layer (default axis −1).
    Softmin { axis: isize = -1 } => act::softmin;
    /// [`act::glu`] as a layer (default axis −1).
    GLU { axis: isize = -1 } => act::glu;
}

/// [`act::hard_tanh`] as a layer (defaults −1 and 1).
#[derive(Debug, Clone, Copy, crate::Module)]
pub struct HardTanh {
    /// The lower bound.
    pub min_val: f64,
    /// The upper bound.
    pub max_val: f64,
}

impl Default for HardTanh {
    fn default() -> HardTanh {
        HardTanh {
            min_val: -1.0,
            max_val: 1.0,
        }
    }
}

impl Forward for HardTanh {
    fn forward(&self, x: &Array) -> Result<Array> {
        act::hard_tanh(x, self.min_val, self.max_val)
    }
}

/// Which form of GELU a [`GELU`] layer computes (MLX's `approx` argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GeluApprox {
    /// The exact form with erf ([`act::gelu`]; MLX's `"none"`).
    #[default]
    None,
    /// The tanh approximation ([`act::gelu_approx`]; MLX's `"precise"` or `"tanh"`).
    Tanh,
    /// The sigmoid approximation ([`act::gelu_fast_approx`]; MLX's `"fast"`).
    Fast,
}

/// GELU as a layer, exact or approximated.
#[derive(Debug, Clone, Copy, Default, crate::Module)]
pub struct GELU {
    /// The form computed.
    #[module(skip)]
    pub approx: GeluApprox,
}

impl GELU {
    /// The layer computing the form `approx`.
    pub fn new(approx: GeluApprox) -> GELU {
        GELU { approx }
    }
}

impl Forward for GELU {
    fn forward(&self, x: &Array) -> Result<Array> {
        match self.approx {
            GeluApprox::None => act::gelu(x),
            GeluApprox::Tanh => act::gelu_approx(x),
            GeluApprox::Fast => act::gelu_fast_approx(x),
        }
    }
}

/// The parametric ReLU, as MLX's `nn.PReLU`: a learned slope `weight` (`[num_parameters]`,
/// initialised to `init`; MLX's defaults are 1 and 0.25) for the negative part.
#[derive(Debug, Clone, crate::Module)]
pub struct PReLU {
    /// The slopes, `[num_parameters]` (broadcast against the last axis).
    pub weight: Param,
}

impl PReLU {
    /// `num_parameters` slopes, each `init`.
    pub fn new(num_parameters: usize, init: f64) -> Result<PReLU> {
        Ok(PReLU {
            weight: Param::new(crate::init::constant(init, &[num_parameters], DType::F32)?),
        })
    }
}

impl Forward for PReLU {
    fn forward(&self, x: &Array) -> Result<Array> {
        act::prelu(x, &self.weight)
    }
}
