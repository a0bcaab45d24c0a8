//! Timing one run. The CPU uses a wall clock; a GPU stream records CUDA events
//! ([`nuvec_core::cuda::EventTimer`]), since `eval` there only queues the work.

use std::time::Instant;

use nuvec_core::cuda::EventTimer;
use nuvec_core::{DeviceKind, Stream};

use crate::case::Skip;

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

/// CUDA events on a GPU stream: `start` waits for the stream to be idle and records one,
/// `stop` records the other and waits for it. The time between them covers the host's
/// building and queueing too (the stream is idle until the first launch), and any step
/// that runs on the host through the CPU bridge.
pub struct GpuTimer(EventTimer);

impl Timer for GpuTimer {
    fn start(&mut self) -> Result<(), Skip> {
        Ok(self.0.start()?)
    }

    fn stop(&mut self) -> Result<f64, Skip> {
        Ok(self.0.stop()?)
    }
}

/// The timer for cases evaluated on `stream`: unavailable (saying why) for a GPU stream
/// without a CUDA device.
pub fn for_stream(stream: Stream) -> Result<Box<dyn Timer>, Skip> {
    match stream.device.kind {
        DeviceKind::Cpu => Ok(Box::new(WallTimer::default())),
        DeviceKind::Gpu => EventTimer::new(stream)
            .map(|t| Box::new(GpuTimer(t)) as Box<dyn Timer>)
            .map_err(|e| Skip::Unavailable(format!("no GPU to run on ({e})"))),
    }
}
