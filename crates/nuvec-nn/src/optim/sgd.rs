//! [`Sgd`].

use nuvec_core::{Array, add, multiply, subtract, zeros_like};

use super::{LearningRate, Optimizer, OptimizerState, SlotState, slot};
use crate::error::{Result, invalid};

/// Stochastic gradient descent, as MLX's `optimizers.SGD`: with weight decay `λ` the
/// gradient is `g + λw`; with momentum `μ` and dampening `τ`, `v ← μv + (1 − τ)g` (from `v
/// = 0`) and the update is `v`, or `g + μv` with Nesterov momentum; `w ← w − lr · update`.
/// (PyTorch's SGD starts `v` at the first gradient, which differs from MLX's only with
/// dampening.)
#[derive(Debug, Clone)]
pub struct Sgd {
    base: OptimizerState,
    momentum: f64,
    weight_decay: f64,
    dampening: f64,
    nesterov: bool,
}

impl Sgd {
    /// Plain SGD (MLX's defaults: no momentum, weight decay or dampening).
    pub fn new(learning_rate: impl Into<LearningRate>) -> Sgd {
        Sgd {
            base: OptimizerState::new(learning_rate.into()),
            momentum: 0.0,
            weight_decay: 0.0,
            dampening: 0.0,
            nesterov: false,
        }
    }

    /// With momentum `μ`.
    pub fn momentum(mut self, momentum: f64) -> Sgd {
        self.momentum = momentum;
        self
    }

    /// With weight decay (an L2 penalty).
    pub fn weight_decay(mut self, weight_decay: f64) -> Sgd {
        self.weight_decay = weight_decay;
        self
    }

    /// With dampening `τ` of the momentum.
    pub fn dampening(mut self, dampening: f64) -> Sgd {
        self.dampening = dampening;
        self
    }

    /// With Nesterov momentum (which needs a momentum and no dampening).
    pub fn nesterov(mut self, nesterov: bool) -> Sgd {
        self.nesterov = nesterov;
        self
    }
}

impl Optimizer for Sgd {
    fn base(&self) -> &OptimizerState {
        &self.base
    }

    fn base_mut(&mut self) -> &mut OptimizerState {
        &mut self.base
    }

    fn slot_names(&self) -> &'static [&'static str] {
        &["v"]
    }

    fn init_single(&self, parameter: &Array) -> Result<SlotState> {
        Ok([("v".to_string(), zeros_like(parameter)?)].into())
    }

    fn apply_single(
        &self,
        gradient: &Array,
        parameter: &Array,
        state: &mut SlotState,
        lr: f64,
        _step: usize,
    ) -> Result<Array> {
        if self.nesterov && (self.momentum <= 0.0 || self.dampening != 0.0) {
            return Err(invalid(
                "Sgd",
                "Nesterov momentum needs a momentum and no dampening",
            ));
        }
        let mut g = gradient.clone();
        if self.weight_decay != 0.0 {
            g = add(&g, multiply(parameter, self.weight_decay)?)?;
        }
        if self.momentum <= 0.0 {
            return Ok(subtract(parameter, multiply(&g, lr)?)?);
        }
        let v = multiply(slot(state, "v")?, self.momentum)?;
        let v = if self.dampening > 0.0 {
            add(&v, multiply(&g, 1.0 - self.dampening)?)?
        } else {
            add(&v, &g)?
        };
        let update = if self.nesterov {
            add(&g, multiply(&v, self.momentum)?)?
        } else {
            v.clone()
        };
        state.insert("v".to_string(), v);
        Ok(subtract(parameter, multiply(&update, lr)?)?)
    }
}
