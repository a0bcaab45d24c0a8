//! [`Lion`].

use nuvec_core::{Array, add, multiply, sign, subtract, zeros_like};

use super::{LearningRate, Optimizer, OptimizerState, SlotState, slot};
use crate::error::Result;

/// Lion, as MLX's `optimizers.Lion`: `c = β₁m + (1 − β₁)g`, `m ← β₂m + (1 − β₂)g`, and with
/// weight decay `λ`, `w ← w · (1 − lr · λ)`; then `w ← w − lr · sign(c)`. MLX's defaults:
/// betas `(0.9, 0.99)`, no weight decay.
#[derive(Debug, Clone)]
pub struct Lion {
    base: OptimizerState,
    betas: (f64, f64),
    weight_decay: f64,
}

impl Lion {
    /// Lion with MLX's defaults.
    pub fn new(learning_rate: impl Into<LearningRate>) -> Lion {
        Lion {
            base: OptimizerState::new(learning_rate.into()),
            betas: (0.9, 0.99),
            weight_decay: 0.0,
        }
    }

    /// With the coefficients `(β₁, β₂)`.
    pub fn betas(mut self, b1: f64, b2: f64) -> Lion {
        self.betas = (b1, b2);
        self
    }

    /// With the weight decay `λ`.
    pub fn weight_decay(mut self, weight_decay: f64) -> Lion {
        self.weight_decay = weight_decay;
        self
    }
}

impl Optimizer for Lion {
    fn base(&self) -> &OptimizerState {
        &self.base
    }

    fn base_mut(&mut self) -> &mut OptimizerState {
        &mut self.base
    }

    fn slot_names(&self) -> &'static [&'static str] {
        &["m"]
    }

    fn init_single(&self, parameter: &Array) -> Result<SlotState> {
        Ok([("m".to_string(), zeros_like(parameter)?)].into())
    }

    fn apply_single(
        &self,
        gradient: &Array,
        parameter: &Array,
        state: &mut SlotState,
        lr: f64,
        _step: usize,
    ) -> Result<Array> {
        let (b1, b2) = self.betas;
        let m = slot(state, "m")?.clone();
        let c = add(multiply(&m, b1)?, multiply(gradient, 1.0 - b1)?)?;
        let m = add(multiply(&m, b2)?, multiply(gradient, 1.0 - b2)?)?;
        state.insert("m".to_string(), m);
        let p = if self.weight_decay > 0.0 {
            multiply(parameter, 1.0 - lr * self.weight_decay)?
        } else {
            parameter.clone()
        };
        Ok(subtract(&p, multiply(sign(&c)?, lr)?)?)
    }
}
