//! Loss functions, as MLX's `nn.losses`: the same names, formulas and default reductions
//! (each function's documentation says its default, which callers pass explicitly).
//!
//! ```
//! use nuvec_core::Array;
//! use nuvec_nn::losses::{Reduction, mse_loss};
//!
//! # fn main() -> nuvec_nn::Result<()> {
//! let p = Array::from_slice(&[1.0f32, 2.0], &[2])?;
//! let t = Array::from_slice(&[0.0f32, 4.0], &[2])?;
//! assert_eq!(mse_loss(&p, &t, Reduction::Mean)?.item::<f32>()?, 2.5);
//! # Ok(())
//! # }
//! ```

use nuvec_core::{
    Array, DType, abs, add, astype, exp, expand_dims, fast, less, log, logaddexp, logsumexp,
    maximum, mean, minimum, multiply, negative, not_equal, square, squeeze, subtract, sum,
    take_along_axis, where_,
};

use crate::error::{Result, invalid};

/// How a loss of one value per element (or row) is reduced (MLX's `reduction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reduction {
    /// Every value (`"none"`).
    #[default]
    None,
    /// The mean of the values (`"mean"`).
    Mean,
    /// The sum of the values (`"sum"`).
    Sum,
}

impl Reduction {
    /// `loss` reduced.
    pub fn apply(self, loss: &Array) -> Result<Array> {
        Ok(match self {
            Reduction::None => loss.clone(),
            Reduction::Mean => mean(loss, &[], false)?,
            Reduction::Sum => sum(loss, &[], false)?,
        })
    }
}

fn same_shape(op: &str, a: &Array, b: &Array) -> Result<()> {
    if a.shape() != b.shape() {
        return Err(invalid(
            op,
            format!(
                "predictions of shape {:?} and targets of shape {:?} differ",
                a.shape(),
                b.shape()
            ),
        ));
    }
    Ok(())
}

/// The settings of [`CrossEntropy::loss`]: MLX's `cross_entropy` arguments, with PyTorch's
/// `ignore_index`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CrossEntropy {
    /// The class axis of the logits (MLX's default −1).
    pub axis: isize,
    /// The weight `ε` of the uniform distribution mixed into the targets (default 0).
    pub label_smoothing: f32,
    /// A class index whose rows count neither in the loss nor in the mean (PyTorch's
    /// `ignore_index`; MLX has none; default `None`). Their loss is 0.
    pub ignore_index: Option<i64>,
    /// The reduction (MLX's default [`Reduction::None`]). With an ignore index, the mean is
    /// over the rows not ignored (as PyTorch's).
    pub reduction: Reduction,
}

impl Default for CrossEntropy {
    fn default() -> CrossEntropy {
        CrossEntropy {
            axis: -1,
            label_smoothing: 0.0,
            ignore_index: None,
            reduction: Reduction::None,
        }
    }
}

/// [`CrossEntropy::loss`] with class-index or probability targets, no weights, MLX's other
/// defaults, and `reduction`.
///
/// ```
/// use nuvec_core::Array;
/// use nuvec_nn::losses::{Reduction, cross_entropy};
///
/// # fn main() -> nuvec_nn::Result<()> {
/// let logits = Array::from_slice(&[0.0f32, 0.0, 0.0, 0.0], &[1, 4])?;
/// let targets = Array::from_slice(&[3i32], &[1])?;
/// let l = cross_entropy(&logits, &targets, Reduction::Mean)?.item::<f32>()?;
/// assert!((l - 4f32.ln()).abs() < 1e-6);
/// # Ok(())
/// # }
/// ```
pub fn cross_entropy(logits: &Array, targets: &Array, reduction: Reduction) -> Result<Array> {
    CrossEntropy {
        reduction,
        ..CrossEntropy::default()
    }
    .loss(logits, targets, None)
}

impl CrossEntropy {
    /// The cross entropy of `logits` against `targets`: integer class indices (the logits'
    /// shape without the class axis) or probabilities (the logits' shape), as MLX's:
    /// `logsumexp(logits) − (1 − ε) · score − ε · mean(logits)` per row, where `score` is
    /// the target's logit (or `Σ targets · logits`). `weights` (the shape of one loss per
    /// row) multiply the rows' losses before the reduction. Class-index targets over the last
    /// axis use [`fast::cross_entropy`].
    pub fn loss(&self, logits: &Array, targets: &Array, weights: Option<&Array>) -> Result<Array> {
        const OP: &str = "cross_entropy";
        if logits.ndim() == 0 {
            return Err(invalid(OP, "logits need a class axis"));
        }
        if !(0.0..1.0).contains(&self.label_smoothing) {
            return Err(invalid(
                OP,
                format!(
                    "label smoothing must be in [0, 1), got {}",
                    self.label_smoothing
                ),
            ));
        }
        let axis = nuvec_core::normalize_axis(OP, self.axis, logits.ndim())? as isize;
        let probs = targets.ndim() == logits.ndim();
        let mut row_shape = logits.shape().to_vec();
        row_shape.remove(axis as usize);
        if probs {
            if targets.shape() != logits.shape() {
                return Err(invalid(
                    OP,
                    format!(
                        "probability targets of shape {:?} do not match logits of shape {:?}",
                        targets.shape(),
                        logits.shape()
                    ),
                ));
            }
            if self.ignore_index.is_some() {
                return Err(invalid(OP, "ignore_index needs class-index targets"));
            }
        } else {
            if targets.shape() != row_shape.as_slice() {
                return Err(invalid(
                    OP,
                    format!(
                        "class targets of shape {:?} do not match logits of shape {:?} (the \
                         class axis {})",
                        targets.shape(),
                        logits.shape(),
                        self.axis
                    ),
                ));
            }
            if targets.dtype().is_float() {
                return Err(invalid(
                    OP,
                    format!("class targets must be integers, got {}", targets.dtype()),
                ));
            }
        }
        // Ignored rows read class 0 and are zeroed afterwards.
        let keep = match (self.ignore_index, probs) {
            (Some(ignore), false) => Some(not_equal(targets, ignore)?),
            _ => None,
        };
        let indices = match &keep {
            Some(k) => where_(k, targets, 0)?,
            None => targets.clone(),
        };
        let eps = f64::from(self.label_smoothing);
        let last = axis == logits.ndim() as isize - 1;
        let fused = matches!(logits.dtype(), DType::F32 | DType::F16 | DType::BF16);
        let mut loss = if !probs && last && fused {
            // logsumexp − score, fused.
            fast::cross_entropy(logits, &indices)?
        } else {
            let score = if probs {
                sum(&multiply(logits, targets)?, &[axis], false)?
            } else {
                let idx = expand_dims(&indices, axis)?;
                squeeze(&take_along_axis(logits, &idx, Some(axis))?, &[axis])?
            };
            subtract(logsumexp(logits, &[axis], false)?, score)?
        };
        if eps > 0.0 {
            // lse − (1 − ε) s − ε m = (lse − s) + ε (s − m).
            let score = if probs {
                sum(&multiply(logits, targets)?, &[axis], false)?
            } else {
                let idx = expand_dims(&indices, axis)?;
                squeeze(&take_along_axis(logits, &idx, Some(axis))?, &[axis])?
            };
            let m = mean(logits, &[axis], false)?;
            loss = add(&loss, multiply(subtract(&score, &m)?, eps)?)?;
        }
        if loss.dtype() != logits.dtype() && logits.dtype().is_float() {
            loss = astype(&loss, logits.dtype())?;
        }
        if let Some(w) = weights {
            if w.shape() != loss.shape() {
                return Err(invalid(
                    OP,
                    format!(
                        "weights of shape {:?} do not match the loss of shape {:?}",
                        w.shape(),
                        loss.shape()
                    ),
                ));
            }
            loss = multiply(&loss, w)?;
        }
        match keep {
            Some(k) => {
                let loss = where_(&k, &loss, 0.0)?;
                match self.reduction {
                    Reduction::Mean => {
                        let count = sum(&astype(&k, loss.dtype())?, &[], false)?;
                        Ok(nuvec_core::divide(sum(&loss, &[], false)?, count)?)
                    }
                    r => r.apply(&loss),
                }
            }
            None => self.reduction.apply(&loss),
        }
    }
}

/// Binary cross entropy of `inputs` (logits when `with_logits`, MLX's default; else
/// probabilities) against `targets` in `[0, 1]` of the same shape, as MLX's:
/// `softplus(x) − x · t` from logits, `−(t · max(ln p, −100) + (1 − t) · max(ln(1 − p),
/// −100))` from probabilities. `weights` (of the inputs' shape) multiply it before the
/// reduction (MLX's default [`Reduction::Mean`]).
pub fn binary_cross_entropy(
    inputs: &Array,
    targets: &Array,
    weights: Option<&Array>,
    with_logits: bool,
    reduction: Reduction,
) -> Result<Array> {
    const OP: &str = "binary_cross_entropy";
    same_shape(OP, inputs, targets)?;
    let loss = if with_logits {
        subtract(logaddexp(inputs, 0.0)?, multiply(inputs, targets)?)?
    } else {
        let log_p = maximum(log(inputs)?, -100.0)?;
        let log_q = maximum(log(&subtract(1.0, inputs)?)?, -100.0)?;
        let pos = multiply(targets, &log_p)?;
        let neg = multiply(subtract(1.0, targets)?, &log_q)?;
        negative(&add(pos, neg)?)?
    };
    let loss = match weights {
        Some(w) if w.shape() != loss.shape() => {
            return Err(invalid(
                OP,
                format!(
                    "weights of shape {:?} do not match the loss of shape {:?}",
                    w.shape(),
                    loss.shape()
                ),
            ));
        }
        Some(w) => multiply(&loss, w)?,
        None => loss,
    };
    reduction.apply(&loss)
}

/// The mean squared error `(p − t)²` (MLX's default [`Reduction::Mean`]).
pub fn mse_loss(predictions: &Array, targets: &Array, reduction: Reduction) -> Result<Array> {
    same_shape("mse_loss", predictions, targets)?;
    reduction.apply(&square(&subtract(predictions, targets)?)?)
}

/// The absolute error `|p − t|` (MLX's default [`Reduction::Mean`]).
pub fn l1_loss(predictions: &Array, targets: &Array, reduction: Reduction) -> Result<Array> {
    same_shape("l1_loss", predictions, targets)?;
    reduction.apply(&abs(&subtract(predictions, targets)?)?)
}

/// The smooth L1 loss: `0.5 d² / beta` where `d = |p − t| < beta`, else `d − 0.5 beta`
/// (MLX's defaults: `beta` 1, [`Reduction::Mean`]).
pub fn smooth_l1_loss(
    predictions: &Array,
    targets: &Array,
    beta: f64,
    reduction: Reduction,
) -> Result<Array> {
    same_shape("smooth_l1_loss", predictions, targets)?;
    let d = abs(&subtract(predictions, targets)?)?;
    let quad = divide_by(&multiply(square(&d)?, 0.5)?, beta)?;
    let lin = subtract(&d, 0.5 * beta)?;
    reduction.apply(&where_(less(&d, beta)?, quad, lin)?)
}

fn divide_by(a: &Array, b: f64) -> Result<Array> {
    Ok(nuvec_core::divide(a, b)?)
}

/// The Huber loss: `0.5 e²` where `|e| <= delta`, else `delta · (|e| − 0.5 delta)`, with
/// `e = inputs − targets` (MLX's defaults: `delta` 1, [`Reduction::None`]).
pub fn huber_loss(
    inputs: &Array,
    targets: &Array,
    delta: f64,
    reduction: Reduction,
) -> Result<Array> {
    same_shape("huber_loss", inputs, targets)?;
    let e = abs(&subtract(inputs, targets)?)?;
    let quad = minimum(&e, delta)?;
    let lin = subtract(&e, &quad)?;
    let loss = add(multiply(square(&quad)?, 0.5)?, multiply(lin, delta)?)?;
    reduction.apply(&loss)
}

/// The Kullback-Leibler divergence of log-probabilities `inputs` from log-probabilities
/// `targets` along `axis`: `Σ e^t · (t − inputs)` (MLX's defaults: axis −1,
/// [`Reduction::None`]).
pub fn kl_div_loss(
    inputs: &Array,
    targets: &Array,
    axis: isize,
    reduction: Reduction,
) -> Result<Array> {
    same_shape("kl_div_loss", inputs, targets)?;
    let loss = sum(
        &multiply(exp(targets)?, subtract(targets, inputs)?)?,
        &[axis],
        false,
    )?;
    reduction.apply(&loss)
}

/// The negative log likelihood of log-probabilities `inputs` at the integer class indices
/// `targets` (the inputs' shape without `axis`): `−inputs[target]` (MLX's defaults: axis −1,
/// [`Reduction::None`]).
pub fn nll_loss(
    inputs: &Array,
    targets: &Array,
    axis: isize,
    reduction: Reduction,
) -> Result<Array> {
    const OP: &str = "nll_loss";
    if inputs.ndim() == 0 {
        return Err(invalid(OP, "inputs need a class axis"));
    }
    let axis = nuvec_core::normalize_axis(OP, axis, inputs.ndim())? as isize;
    let mut row_shape = inputs.shape().to_vec();
    row_shape.remove(axis as usize);
    if targets.shape() != row_shape.as_slice() || targets.dtype().is_float() {
        return Err(invalid(
            OP,
            format!(
                "targets must be integer class indices of shape {row_shape:?}, got {} of {:?}",
                targets.dtype(),
                targets.shape()
            ),
        ));
    }
    let idx = expand_dims(targets, axis)?;
    let picked = squeeze(&take_along_axis(inputs, &idx, Some(axis))?, &[axis])?;
    reduction.apply(&negative(&picked)?)
}
