//! [`Adam`] and [`AdamW`].

use nuvec_core::{Array, add, divide, multiply, sqrt, square, subtract, zeros_like};

use super::{LearningRate, Optimizer, OptimizerState, SlotState, slot};
use crate::error::Result;

/// Adam, as MLX's `optimizers.Adam`: `m ← β₁m + (1 − β₁)g`, `v ← β₂v + (1 − β₂)g²`, `w ← w −
/// lr · m / (√v + ε)`; with bias correction (off by default, as MLX; PyTorch always applies
/// it) `w ← w − lr / (1 − β₁ᵗ) · m / (√v / √(1 − β₂ᵗ) + ε)`. MLX's defaults: betas `(0.9,
/// 0.999)`, `ε = 1e-8`.
#[derive(Debug, Clone)]
pub struct Adam {
    base: OptimizerState,
    betas: (f64, f64),
    eps: f64,
    bias_correction: bool,
}

impl Adam {
    /// Adam with MLX's defaults.
    pub fn new(learning_rate: impl Into<LearningRate>) -> Adam {
        Adam {
            base: OptimizerState::new(learning_rate.into()),
            betas: (0.9, 0.999),
            eps: 1e-8,
            bias_correction: false,
        }
    }

    /// With the averaging coefficients `(β₁, β₂)`.
    pub fn betas(mut self, b1: f64, b2: f64) -> Adam {
        self.betas = (b1, b2);
        self
    }

    /// With `ε`.
    pub fn eps(mut self, eps: f64) -> Adam {
        self.eps = eps;
        self
    }

    /// With (or without) bias correction.
    pub fn bias_correction(mut self, on: bool) -> Adam {
        self.bias_correction = on;
        self
    }

    /// The step shared by Adam and AdamW.
    fn adam_step(
        &self,
        gradient: &Array,
        parameter: &Array,
        state: &mut SlotState,
        lr: f64,
        step: usize,
    ) -> Result<Array> {
        let (b1, b2) = self.betas;
        let m = add(
            multiply(slot(state, "m")?, b1)?,
            multiply(gradient, 1.0 - b1)?,
        )?;
        let v = add(
            multiply(slot(state, "v")?, b2)?,
            multiply(square(gradient)?, 1.0 - b2)?,
        )?;
        state.insert("m".to_string(), m.clone());
        state.insert("v".to_string(), v.clone());
        let t = step as i32;
        let update = if self.bias_correction {
            let numerator = multiply(&m, lr / (1.0 - b1.powi(t)))?;
            let denominator = add(divide(sqrt(&v)?, (1.0 - b2.powi(t)).sqrt())?, self.eps)?;
            divide(numerator, denominator)?
        } else {
            divide(multiply(&m, lr)?, add(sqrt(&v)?, self.eps)?)?
        };
        Ok(subtract(parameter, update)?)
    }
}

impl Optimizer for Adam {
    fn base(&self) -> &OptimizerState {
        &self.base
    }

    fn base_mut(&mut self) -> &mut OptimizerState {
        &mut self.base
    }

    fn slot_names(&self) -> &'static [&'static str] {
        &["m", "v"]
    }

    fn init_single(&self, parameter: &Array) -> Result<SlotState> {
        Ok([
            ("m".to_string(), zeros_like(parameter)?),
            ("v".to_string(), zeros_like(parameter)?),
        ]
        .into())
    }

    fn apply_single(
        &self,
        gradient: &Array,
        parameter: &Array,
        state: &mut SlotState,
        lr: f64,
        step: usize,
    ) -> Result<Array> {
        self.adam_step(gradient, parameter, state, lr, step)
    }
}

/// AdamW, as MLX's `optimizers.AdamW`: the parameter decays first, `w ← w · (1 − lr · λ)`,
/// then takes [`Adam`]'s step. MLX's defaults: Adam's, and `λ = 0.01`.
#[derive(Debug, Clone)]
pub struct AdamW {
    adam: Adam,
    weight_decay: f64,
}

impl AdamW {
    /// AdamW with MLX's defaults.
    pub fn new(learning_rate: impl Into<LearningRate>) -> AdamW {
        AdamW {
            adam: Adam::new(learning_rate),
            weight_decay: 0.01,
        }
    }

    /// With the averaging coefficients `(β₁, β₂)`.
    pub fn betas(mut self, b1: f64, b2: f64) -> AdamW {
        self.adam = self.adam.betas(b1, b2);
        self
    }

    /// With `ε`.
    pub fn eps(mut self, eps: f64) -> AdamW {
        self.adam = self.adam.eps(eps);
        self
    }

    /// With (or without) bias correction.
    pub fn bias_correction(mut self, on: bool) -> AdamW {
        self.adam = self.adam.bias_correction(on);
        self
    }

    /// With the weight decay `λ`.
    pub fn weight_decay(mut self, weight_decay: f64) -> AdamW {
        self.weight_decay = weight_decay;
        self
    }
}

impl Optimizer for AdamW {
    fn base(&self) -> &OptimizerState {
        &self.adam.base
    }

    fn base_mut(&mut self) -> &mut OptimizerState {
        &mut self.adam.base
    }

    fn slot_names(&self) -> &'static [&'static str] {
        &["m", "v"]
    }

    fn init_single(&self, parameter: &Array) -> Result<SlotState> {
        self.adam.init_single(parameter)
    }

    fn apply_single(
        &self,
        gradient: &Array,
        parameter: &Array,
        state: &mut SlotState,
        lr: f64,
        step: usize,
    ) -> Result<Array> {
        let decayed = multiply(parameter, 1.0 - lr * self.weight_decay)?;
        self.adam.adam_step(gradient, &decayed, state, lr, step)
    }
}
