//! Optimizers, as MLX's `optimizers`: [`Sgd`], [`Adam`], [`AdamW`], [`Lion`] and
//! [`Adafactor`], learning-rate [`schedules`], and [`clip_grad_norm`].
//!
//! An optimizer maps a gradient tree (as [`crate::value_and_grad`] returns) and the
//! parameters to the updated parameters ([`Optimizer::apply_gradients`]), or updates a
//! module in place ([`Optimizer::update`]). Its state is a step counter, the learning rate,
//! and per parameter a few arrays (Adam's `m` and `v`, ...), exported flat as MLX's
//! `tree_flatten(optimizer.state)` names them: `step`, `learning_rate`,
//! `layers.0.weight.m`, ... ([`Optimizer::state`], [`Optimizer::set_state`]).
//!
//! As in MLX, the step counter is incremented before each update (Adam's bias correction
//! sees 1 on the first), and a schedule is evaluated at the step count before it (0 on the
//! first update).
//!
//! ```
//! use nuvec_core::Array;
//! use nuvec_nn::Params;
//! use nuvec_nn::optim::{Optimizer, Sgd};
//!
//! # fn main() -> nuvec_nn::Result<()> {
//! let mut opt = Sgd::new(0.1).momentum(0.9);
//! let params: Params = [("w".to_string(), Array::from_slice(&[1.0f32], &[1])?)].into();
//! let grads: Params = [("w".to_string(), Array::from_slice(&[2.0f32], &[1])?)].into();
//! let new = opt.apply_gradients(&grads, &params)?;
//! assert!((new["w"].to_vec::<f32>()?[0] - 0.8).abs() < 1e-6);
//! assert!(opt.state().contains_key("w.v"));
//! # Ok(())
//! # }
//! ```

mod adafactor;
mod adam;
mod lion;
pub mod schedules;
mod sgd;

pub use adafactor::Adafactor;
pub use adam::{Adam, AdamW};
pub use lion::Lion;
pub use schedules::{
    Schedule, cosine_decay, exponential_decay, join_schedules, linear_schedule, step_decay,
};
pub use sgd::Sgd;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use nuvec_core::{Array, DType, multiply, sqrt, square, sum, where_};

use crate::error::{Error, Result, invalid};
use crate::module::{Module, NamedArrays, Params};

/// A learning rate: a constant, or a [`Schedule`] of the step.
#[derive(Clone)]
pub enum LearningRate {
    /// The same rate at every step.
    Constant(f64),
    /// The rate at each step (counted from 0).
    Scheduled(Schedule),
}

impl LearningRate {
    /// The rate at `step`.
    pub fn at(&self, step: usize) -> f64 {
        match self {
            LearningRate::Constant(v) => *v,
            LearningRate::Scheduled(s) => s.at(step),
        }
    }
}

impl std::fmt::Debug for LearningRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LearningRate::Constant(v) => write!(f, "Constant({v})"),
            LearningRate::Scheduled(_) => write!(f, "Scheduled(..)"),
        }
    }
}

impl From<f64> for LearningRate {
    fn from(v: f64) -> LearningRate {
        LearningRate::Constant(v)
    }
}

impl From<f32> for LearningRate {
    fn from(v: f32) -> LearningRate {
        LearningRate::Constant(f64::from(v))
    }
}

impl From<Schedule> for LearningRate {
    fn from(s: Schedule) -> LearningRate {
        LearningRate::Scheduled(s)
    }
}

/// One parameter's optimizer state: state names (`m`, `v`, ...) to arrays.
pub type SlotState = BTreeMap<String, Array>;

/// What every optimizer keeps: the step count, the learning rate, and each parameter's
/// state.
#[derive(Debug, Clone)]
pub struct OptimizerState {
    step: usize,
    learning_rate: LearningRate,
    current_lr: f64,
    slots: BTreeMap<String, SlotState>,
}

impl OptimizerState {
    /// A fresh state with this learning rate.
    pub fn new(learning_rate: LearningRate) -> OptimizerState {
        let current_lr = learning_rate.at(0);
        OptimizerState {
            step: 0,
            learning_rate,
            current_lr,
            slots: BTreeMap::new(),
        }
    }
}

/// An optimizer: its own update rule ([`Optimizer::init_single`] and
/// [`Optimizer::apply_single`], per parameter) over the shared [`OptimizerState`], with
/// MLX's `Optimizer` methods provided.
pub trait Optimizer {
    /// The shared state.
    fn base(&self) -> &OptimizerState;

    /// The shared state, mutably.
    fn base_mut(&mut self) -> &mut OptimizerState;

    /// The names of the state arrays this optimizer may keep per parameter.
    fn slot_names(&self) -> &'static [&'static str];

    /// The initial state of one parameter.
    fn init_single(&self, parameter: &Array) -> Result<SlotState>;

    /// The updated `parameter` after its `gradient`, updating its `state`; `lr` is the
    /// learning rate of this step and `step` the step count (1 on the first update).
    fn apply_single(
        &self,
        gradient: &Array,
        parameter: &Array,
        state: &mut SlotState,
        lr: f64,
        step: usize,
    ) -> Result<Array>;

    /// The number of updates made.
    fn step(&self) -> usize {
        self.base().step
    }

    /// The learning rate of the last update (before any, of the first).
    fn learning_rate(&self) -> f64 {
        self.base().current_lr
    }

    /// Replaces the learning rate (a constant or a schedule).
    fn set_learning_rate(&mut self, learning_rate: LearningRate) {
        let base = self.base_mut();
        base.current_lr = learning_rate.at(base.step);
        base.learning_rate = learning_rate;
    }

    /// Creates the state of every parameter in `parameters` that has none yet (MLX's
    /// `init`: optional, since an update creates what it needs, but it makes
    /// [`Optimizer::state`] complete before the first update).
    fn init(&mut self, parameters: &Params) -> Result<()> {
        for (name, p) in parameters {
            if !self.base().slots.contains_key(name) {
                let state = self.init_single(p)?;
                self.base_mut().slots.insert(name.clone(), state);
            }
        }
        Ok(())
    }

    /// The updated parameters for `gradients` (MLX's `apply_gradients`): one entry per
    /// gradient, each of which must name one of `parameters` (a superset is fine).
    fn apply_gradients(
        &mut self,
        gradients: &Params,
        parameters: &impl NamedArrays,
    ) -> Result<Params>
    where
        Self: Sized,
    {
        for name in gradients.keys() {
            if parameters.get_array(name).is_none() {
                return Err(Error::UnknownParameter(name.clone()));
            }
        }
        let lr = {
            let base = self.base_mut();
            base.current_lr = base.learning_rate.at(base.step);
            base.step += 1;
            base.current_lr
        };
        let step = self.base().step;
        let mut out = Params::new();
        for (name, g) in gradients {
            let Some(p) = parameters.get_array(name) else {
                return Err(Error::UnknownParameter(name.clone()));
            };
            let mut state = match self.base_mut().slots.remove(name) {
                Some(s) => s,
                None => self.init_single(p)?,
            };
            let result = self.apply_single(g, p, &mut state, lr, step);
            self.base_mut().slots.insert(name.clone(), state);
            out.insert(name.clone(), result?);
        }
        Ok(out)
    }

    /// Applies `gradients` to `model`'s parameters (MLX's `update`).
    fn update(&mut self, model: &mut impl Module, gradients: &Params) -> Result<()>
    where
        Self: Sized,
    {
        let params = model.parameters();
        let new = self.apply_gradients(gradients, &params)?;
        model.update(&new)
    }

    /// The state, flat: `step` (`uint64`), `learning_rate` (`float32`) and
    /// `<parameter>.<slot>` for each parameter's arrays.
    fn state(&self) -> HashMap<String, Array> {
        let base = self.base();
        let mut out = HashMap::new();
        out.insert("step".to_string(), Array::scalar(base.step as u64));
        out.insert(
            "learning_rate".to_string(),
            Array::scalar(base.current_lr as f32),
        );
        for (name, slots) in &base.slots {
            for (slot, a) in slots {
                out.insert(format!("{name}.{slot}"), a.clone());
            }
        }
        out
    }

    /// Restores a state that [`Optimizer::state`] exported. `step` is required; a stored
    /// `learning_rate` replaces a constant rate unless that rate rounds to it (a schedule is
    /// kept); every other name must
    /// end in one of this optimizer's slot names. Parameters absent from `state` start
    /// afresh at their next update.
    fn set_state(&mut self, state: &impl NamedArrays) -> Result<()>
    where
        Self: Sized,
    {
        let step = state
            .get_array("step")
            .ok_or_else(|| invalid("set_state", "the state has no step"))?;
        let step = step.astype(DType::U64)?.item::<u64>()? as usize;
        let lr = match state.get_array("learning_rate") {
            Some(a) => Some(f64::from(a.astype(DType::F32)?.item::<f32>()?)),
            None => None,
        };
        let names = self.slot_names();
        let mut slots: BTreeMap<String, SlotState> = BTreeMap::new();
        for key in state.array_names() {
            if key == "step" || key == "learning_rate" {
                continue;
            }
            let parsed = key
                .rsplit_once('.')
                .filter(|(_, slot)| names.contains(slot));
            let Some((param, slot)) = parsed else {
                return Err(invalid(
                    "set_state",
                    format!("{key} is not <parameter>.<one of {names:?}>"),
                ));
            };
            if let Some(a) = state.get_array(key) {
                slots
                    .entry(param.to_string())
                    .or_default()
                    .insert(slot.to_string(), a.clone());
            }
        }
        let base = self.base_mut();
        base.step = step;
        base.slots = slots;
        match (&base.learning_rate, lr) {
            // A constant that rounds to the stored float32 is kept at full precision.
            (LearningRate::Constant(c), Some(lr)) if (*c as f32) == lr as f32 => {
                base.current_lr = *c;
            }
            (LearningRate::Constant(_), Some(lr)) => {
                base.learning_rate = LearningRate::Constant(lr);
                base.current_lr = lr;
            }
            _ => base.current_lr = base.learning_rate.at(step.saturating_sub(1)),
        }
        Ok(())
    }
    /// Saves the state ([`Optimizer::state`]) to the file `path`: safetensors when the path
    /// ends in `.safetensors`, NumPy's `.npz` when it ends in `.npz` (as
    /// [`crate::Module::save_weights`]). The state's arrays are evaluated first.
    fn save_state(&self, path: impl AsRef<Path>) -> Result<()>
    where
        Self: Sized,
    {
        crate::checkpoint::save("save_state", path.as_ref(), &self.state())
    }

    /// Restores the state saved by [`Optimizer::save_state`] (as [`Optimizer::set_state`]):
    /// the optimizer then takes the same next steps as the one that saved it.
    fn load_state(&mut self, path: impl AsRef<Path>) -> Result<()>
    where
        Self: Sized,
    {
        let state = crate::checkpoint::load("load_state", path.as_ref())?;
        self.set_state(&state)
    }
}

/// A state array of `state`, or an error naming it.
pub(crate) fn slot<'a>(state: &'a SlotState, name: &str) -> Result<&'a Array> {
    state
        .get(name)
        .ok_or_else(|| invalid("optimizer", format!("the state has no {name}")))
}

/// The gradients scaled so that their global norm is at most `max_norm`, and that norm
/// before scaling (MLX's `clip_grad_norm`): each gradient times `max_norm / (norm + 1e-6)`
/// when `norm >= max_norm`, unchanged otherwise.
///
/// ```
/// use nuvec_core::Array;
/// use nuvec_nn::Params;
/// use nuvec_nn::optim::clip_grad_norm;
///
/// # fn main() -> nuvec_nn::Result<()> {
/// let g: Params = [("w".to_string(), Array::from_slice(&[3.0f32, 4.0], &[2])?)].into();
/// let (clipped, norm) = clip_grad_norm(&g, 1.0)?;
/// assert_eq!(norm.item::<f32>()?, 5.0);
/// let c = clipped["w"].to_vec::<f32>()?;
/// assert!((c[0] - 0.6).abs() < 1e-5 && (c[1] - 0.8).abs() < 1e-5);
/// # Ok(())
/// # }
/// ```
pub fn clip_grad_norm(gradients: &Params, max_norm: f64) -> Result<(Params, Array)> {
    let mut total = Array::scalar(0.0f32);
    for g in gradients.values() {
        total = nuvec_core::add(&total, sum(&square(g)?, &[], false)?)?;
    }
    let norm = sqrt(&total)?;
    let scale = nuvec_core::divide(max_norm, nuvec_core::add(&norm, 1e-6)?)?;
    let small = nuvec_core::less(&norm, max_norm)?;
    let mut out = Params::new();
    for (name, g) in gradients {
        let scaled = multiply(g, &scale.astype(g.dtype())?)?;
        out.insert(name.clone(), where_(&small, g, &scaled)?);
    }
    Ok((out, norm))
}
