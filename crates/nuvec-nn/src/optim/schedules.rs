//! Learning-rate schedules, as MLX's `optimizers` schedules: functions of the step count
//! (from 0), given to an optimizer in place of a constant rate.
//!
//! ```
//! use nuvec_nn::optim::{cosine_decay, join_schedules, linear_schedule};
//!
//! # fn main() -> nuvec_nn::Result<()> {
//! // Ten steps of linear warm-up to 0.1, then a cosine decay over 100 steps.
//! let warmup = linear_schedule(0.0, 0.1, 10);
//! let s = join_schedules(vec![warmup, cosine_decay(0.1, 100, 0.0)], &[10])?;
//! assert_eq!(s.at(0), 0.0);
//! assert!((s.at(5) - 0.05).abs() < 1e-12);
//! assert!((s.at(10) - 0.1).abs() < 1e-12);
//! assert!(s.at(110).abs() < 1e-12);
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;

use crate::error::{Result, invalid};

/// A learning rate as a function of the step count.
#[derive(Clone)]
pub struct Schedule(Arc<dyn Fn(usize) -> f64 + Send + Sync>);

impl Schedule {
    /// The schedule computing `f(step)`.
    pub fn new(f: impl Fn(usize) -> f64 + Send + Sync + 'static) -> Schedule {
        Schedule(Arc::new(f))
    }

    /// The rate at `step`.
    pub fn at(&self, step: usize) -> f64 {
        (self.0)(step)
    }
}

impl std::fmt::Debug for Schedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Schedule(..)")
    }
}

/// `init · decay_rateˢᵗᵉᵖ`.
pub fn exponential_decay(init: f64, decay_rate: f64) -> Schedule {
    Schedule::new(move |step| init * decay_rate.powf(step as f64))
}

/// `init · decay_rate^⌊step / step_size⌋` (`step_size` 0 is taken as 1).
pub fn step_decay(init: f64, decay_rate: f64, step_size: usize) -> Schedule {
    let step_size = step_size.max(1);
    Schedule::new(move |step| init * decay_rate.powf((step / step_size) as f64))
}

/// From `init` to `end` along half a cosine over `decay_steps` steps, then `end`: `end +
/// (init − end) · (1 + cos(π · min(step, decay_steps) / decay_steps)) / 2`.
pub fn cosine_decay(init: f64, decay_steps: usize, end: f64) -> Schedule {
    let n = decay_steps.max(1) as f64;
    Schedule::new(move |step| {
        let s = (step as f64).min(n);
        let decay = 0.5 * (1.0 + (std::f64::consts::PI * s / n).cos());
        end + decay * (init - end)
    })
}

/// From `init` to `end` in a straight line over `steps` steps, then `end` (a warm-up).
pub fn linear_schedule(init: f64, end: f64, steps: usize) -> Schedule {
    let n = steps.max(1) as f64;
    Schedule::new(move |step| {
        let s = (step as f64).min(n);
        init + s * (end - init) / n
    })
}

/// `schedules[0]` before `boundaries[0]`, then `schedules[1]` (counting its steps from that
/// boundary), and so on; there is one boundary fewer than schedules.
pub fn join_schedules(schedules: Vec<Schedule>, boundaries: &[usize]) -> Result<Schedule> {
    if schedules.is_empty() || boundaries.len() + 1 != schedules.len() {
        return Err(invalid(
            "join_schedules",
            format!(
                "{} schedules need {} boundaries, got {}",
                schedules.len(),
                schedules.len().saturating_sub(1),
                boundaries.len()
            ),
        ));
    }
    let boundaries = boundaries.to_vec();
    Ok(Schedule::new(move |step| {
        let mut chosen = (0, 0);
        for (i, &b) in boundaries.iter().enumerate() {
            if step >= b {
                chosen = (i + 1, b);
            }
        }
        schedules[chosen.0].at(step - chosen.1)
    }))
}
