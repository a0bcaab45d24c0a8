//! [`Adafactor`].

use nuvec_core::{
    Array, add, divide, expand_dims, maximum, mean, multiply, rsqrt, sqrt, square, subtract, zeros,
    zeros_like,
};

use super::{LearningRate, Optimizer, OptimizerState, SlotState, slot};
use crate::error::{Result, invalid};

/// Adafactor (Shazeer and Stern, 2018), as MLX's `optimizers.Adafactor`: the second moment
/// of a parameter of 2 or more axes is kept factored, as row and column means
/// (`exp_avg_sq_row`, `exp_avg_sq_col`), else whole (`exp_avg_sq`), decaying with `β₂ = 1 −
/// t^decay_rate`; the update `g / √v̂` is clipped to RMS `clip_threshold`, scaled by the
/// step size (relative, `min(1e-2, 1/√t)` — or `1e-6 t` with warm-up — or the learning
/// rate) times `max(ε₂, RMS(w))` when `scale_parameter`; with `beta_1`, it is averaged
/// (`exp_avg`). MLX's defaults: no learning rate (relative steps), `eps` `(1e-30, 1e-3)`,
/// `clip_threshold` 1, `decay_rate` −0.8, no `beta_1`, no weight decay, `scale_parameter`
/// and `relative_step` on, `warmup_init` off.
///
/// For parameters of more than 2 axes the factors are combined over the last two (MLX
/// expands the column factor at axis 0, which only broadcasts for 2-D parameters).
#[derive(Debug, Clone)]
pub struct Adafactor {
    base: OptimizerState,
    has_learning_rate: bool,
    eps: (f64, f64),
    clip_threshold: f64,
    decay_rate: f64,
    beta_1: Option<f64>,
    weight_decay: f64,
    scale_parameter: bool,
    relative_step: bool,
    warmup_init: bool,
}

impl Default for Adafactor {
    fn default() -> Adafactor {
        Adafactor::new()
    }
}

impl Adafactor {
    /// Adafactor with MLX's defaults (relative step sizes, no learning rate).
    pub fn new() -> Adafactor {
        Adafactor {
            base: OptimizerState::new(LearningRate::Constant(0.0)),
            has_learning_rate: false,
            eps: (1e-30, 1e-3),
            clip_threshold: 1.0,
            decay_rate: -0.8,
            beta_1: None,
            weight_decay: 0.0,
            scale_parameter: true,
            relative_step: true,
            warmup_init: false,
        }
    }

    /// With a learning rate (used when `relative_step` is off).
    pub fn learning_rate(mut self, learning_rate: impl Into<LearningRate>) -> Adafactor {
        self.base = OptimizerState::new(learning_rate.into());
        self.has_learning_rate = true;
        self
    }

    /// With `(ε₁, ε₂)`: added to the squared gradients, and the least parameter scale.
    pub fn eps(mut self, eps1: f64, eps2: f64) -> Adafactor {
        self.eps = (eps1, eps2);
        self
    }

    /// With the RMS the unscaled update is clipped to.
    pub fn clip_threshold(mut self, clip_threshold: f64) -> Adafactor {
        self.clip_threshold = clip_threshold;
        self
    }

    /// With the exponent of `β₂ = 1 − t^decay_rate`.
    pub fn decay_rate(mut self, decay_rate: f64) -> Adafactor {
        self.decay_rate = decay_rate;
        self
    }

    /// With a first moment of coefficient `beta_1`.
    pub fn beta_1(mut self, beta_1: f64) -> Adafactor {
        self.beta_1 = Some(beta_1);
        self
    }

    /// With weight decay.
    pub fn weight_decay(mut self, weight_decay: f64) -> Adafactor {
        self.weight_decay = weight_decay;
        self
    }

    /// Whether the step size is scaled by the parameter's RMS.
    pub fn scale_parameter(mut self, on: bool) -> Adafactor {
        self.scale_parameter = on;
        self
    }

    /// Whether the step size is relative (`min(1e-2, 1/√t)`) rather than the learning rate.
    pub fn relative_step(mut self, on: bool) -> Adafactor {
        self.relative_step = on;
        self
    }

    /// Whether the relative step size warms up as `1e-6 t`.
    pub fn warmup_init(mut self, on: bool) -> Adafactor {
        self.warmup_init = on;
        self
    }
}

fn rms(a: &Array) -> Result<Array> {
    Ok(sqrt(&mean(&square(a)?, &[], false)?)?)
}

impl Optimizer for Adafactor {
    fn base(&self) -> &OptimizerState {
        &self.base
    }

    fn base_mut(&mut self) -> &mut OptimizerState {
        &mut self.base
    }

    fn slot_names(&self) -> &'static [&'static str] {
        &["exp_avg_sq_row", "exp_avg_sq_col", "exp_avg_sq", "exp_avg"]
    }

    fn init_single(&self, parameter: &Array) -> Result<SlotState> {
        let mut state = SlotState::new();
        let s = parameter.shape();
        if s.len() >= 2 {
            let n = s.len();
            let mut col = s[..n - 2].to_vec();
            col.push(s[n - 1]);
            let dtype = parameter.dtype();
            state.insert("exp_avg_sq_row".to_string(), zeros(&s[..n - 1], dtype)?);
            state.insert("exp_avg_sq_col".to_string(), zeros(&col, dtype)?);
        } else {
            state.insert("exp_avg_sq".to_string(), zeros_like(parameter)?);
        }
        if self.beta_1.is_some() {
            state.insert("exp_avg".to_string(), zeros_like(parameter)?);
        }
        Ok(state)
    }

    fn apply_single(
        &self,
        gradient: &Array,
        parameter: &Array,
        state: &mut SlotState,
        lr: f64,
        step: usize,
    ) -> Result<Array> {
        if !self.relative_step && !self.has_learning_rate {
            return Err(invalid(
                "Adafactor",
                "without relative steps a learning rate is needed",
            ));
        }
        let t = step as f64;
        let dtype = parameter.dtype();
        let param_rms = rms(parameter)?;
        let relative = if self.relative_step {
            let min_step = if self.warmup_init { 1e-6 * t } else { 1e-2 };
            min_step.min(1.0 / t.sqrt())
        } else {
            lr
        };
        let step_size = if self.scale_parameter {
            multiply(maximum(&param_rms, self.eps.1)?, relative)?
        } else {
            nuvec_core::full(&[], relative, dtype)?
        };
        let beta_2 = 1.0 - t.powf(self.decay_rate);
        let sq = add(square(gradient)?, self.eps.0)?;
        let update = if gradient.ndim() >= 2 {
            let row = add(
                multiply(slot(state, "exp_avg_sq_row")?, beta_2)?,
                multiply(mean(&sq, &[-1], false)?, 1.0 - beta_2)?,
            )?;
            let col = add(
                multiply(slot(state, "exp_avg_sq_col")?, beta_2)?,
                multiply(mean(&sq, &[-2], false)?, 1.0 - beta_2)?,
            )?;
            state.insert("exp_avg_sq_row".to_string(), row.clone());
            state.insert("exp_avg_sq_col".to_string(), col.clone());
            let r = rsqrt(&divide(&row, mean(&row, &[-1], true)?)?)?;
            let c = rsqrt(&col)?;
            let factor = multiply(expand_dims(&r, -1)?, expand_dims(&c, -2)?)?;
            multiply(&factor, gradient)?
        } else {
            let v = add(
                multiply(slot(state, "exp_avg_sq")?, beta_2)?,
                multiply(&sq, 1.0 - beta_2)?,
            )?;
            state.insert("exp_avg_sq".to_string(), v.clone());
            multiply(rsqrt(&v)?, gradient)?
        };
        let clip = maximum(divide(rms(&update)?, self.clip_threshold)?, 1.0)?;
        let update = multiply(&step_size, divide(&update, &clip)?)?;
        let update = match self.beta_1 {
            Some(b1) => {
                let avg = add(
                    multiply(slot(state, "exp_avg")?, b1)?,
                    multiply(&update, 1.0 - b1)?,
                )?;
                state.insert("exp_avg".to_string(), avg.clone());
                avg
            }
            None => update,
        };
        let p = if self.weight_decay != 0.0 {
            let decay = multiply(&step_size, -self.weight_decay)?;
            add(parameter, multiply(parameter, decay)?)?
        } else {
            parameter.clone()
        };
        Ok(subtract(&p, &update)?)
    }
}
