//! Timing one run. The CPU uses a wall clock; the GPU will record CUDA events on the stream
//! (the seam is [`Timer`] and [`for_target`]).

use std::time::Instant;

use crate::case::{Skip, Target};

/// Measures the time of one run: `start` before the graph is built, `stop` after `eval`
/// returned. A GPU timer records events on the stream and waits for the second in `stop`,
/// since `eval` there only queues work.
pub trait Timer {
    /// Marks the start of a run.
    fn start(&mut self) -> Result<(), Skip>;
    /// Marks its end and returns the seconds since `start`.
    fn stop(&mut self) -> Result<f64, Skip>;
}

/// The host's monotonic clock; right for the CPU backend, whose `eval` returns when the work
/// is done.
#[derive(Default)]
pub struct WallTimer {
    started: Option<Instant>,
}

impl Timer for WallTimer {
    fn start(&mut self) -> Result<(), Skip> {
        self.started = Some(Instant::now());
        Ok(())
    }

    fn stop(&mut self) -> Result<f64, Skip> {
        let started = self
            .started
            .take()
            .ok_or_else(|| Skip::Failed("timer stopped before it was started".into()))?;
        Ok(started.elapsed().as_secs_f64())
    }
}

/// The timer for cases on `target`.
pub fn for_target(target: Target) -> Result<Box<dyn Timer>, Skip> {
    match target {
        Target::Cpu => Ok(Box::new(WallTimer::default())),
        // CUDA events after warm-up, once the CUDA backend exists (BENCH-CASES.md).
        Target::Gpu => Err(Skip::Unavailable(
            "needs the CUDA backend (and its event timer)".into(),
        )),
    }
}
