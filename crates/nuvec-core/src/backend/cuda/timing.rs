//! Waiting for a stream and timing its work with CUDA events (for benchmarks).
//!
//! [`eval`](crate::eval) on a GPU stream only queues work, so a host clock read right after
//! it measures the queueing. [`synchronize`] waits until a stream's queued work is done;
//! [`EventTimer`] records two events on the stream and reports the device time between them.

use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaStream, sys};

use super::{Gpu, context, driver};
use crate::error::invalid;
use crate::{DeviceKind, Result, Stream};

/// The device and the CUDA stream behind a GPU `stream`, with the device's context bound to
/// this thread.
fn cuda_stream(op: &'static str, stream: Stream) -> Result<(Arc<Gpu>, Arc<CudaStream>)> {
    if stream.device.kind != DeviceKind::Gpu {
        return Err(invalid(
            op,
            format!(
                "{} is not a GPU: only GPU streams have events",
                stream.device
            ),
        ));
    }
    let gpu = context::gpu(stream.device.index)?;
    gpu.ctx
        .bind_to_thread()
        .map_err(driver("bind the context"))?;
    let cuda = gpu.stream(stream.index)?;
    Ok((gpu, cuda))
}

/// Waits until the work queued on `stream` so far has finished (as MLX's `mx.synchronize`).
/// CPU streams have nothing queued: [`eval`](crate::eval) returns when their work is done.
/// Errors where `stream` is on a GPU that does not answer.
///
/// ```
/// use nuvec_core::{Array, default_stream, eval, synchronize};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let y = &Array::from_slice(&[1.0f32, 2.0], &[2])? * 2.0;
/// eval(std::slice::from_ref(&y))?;
/// synchronize(default_stream())?;
/// # Ok(())
/// # }
/// ```
pub fn synchronize(stream: Stream) -> Result<()> {
    if stream.device.kind == DeviceKind::Cpu {
        return Ok(());
    }
    let (gpu, cuda) = cuda_stream("synchronize", stream)?;
    // Launches what a capture holds, and keeps the wait out of any capture.
    super::graph::exclusively(&gpu, || cuda.synchronize().map_err(driver("synchronize")))
}

/// Times the work of a GPU stream with two CUDA events: [`start`](EventTimer::start) waits
/// for the stream to be idle and records the first, [`stop`](EventTimer::stop) records the
/// second, waits for it and returns the seconds between them. Work the host does in
/// between while the stream is idle (building a graph, a primitive run on the host) counts
/// too, since the second event completes only once the host has queued it.
///
/// Creating a timer errors where there is no CUDA device, or for a CPU stream.
///
/// ```
/// use nuvec_core::{Device, Stream, cuda::EventTimer};
///
/// match EventTimer::new(Stream::default_for(Device::gpu(0))) {
///     Ok(mut timer) => {
///         timer.start().unwrap();
///         // ... build and evaluate on that stream ...
///         let seconds = timer.stop().unwrap();
///         assert!(seconds >= 0.0);
///     }
///     Err(e) => eprintln!("no GPU: {e}"),
/// }
/// ```
pub struct EventTimer {
    gpu: Arc<Gpu>,
    stream: Arc<CudaStream>,
    begin: CudaEvent,
    end: CudaEvent,
    started: bool,
}

impl std::fmt::Debug for EventTimer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventTimer")
            .field("started", &self.started)
            .finish_non_exhaustive()
    }
}

impl EventTimer {
    /// A timer for the work of `stream`, a GPU stream.
    pub fn new(stream: Stream) -> Result<EventTimer> {
        let (gpu, cuda) = cuda_stream("EventTimer", stream)?;
        let ctx = cuda.context();
        // Timing needs the default flags (cudarc's own default turns timing off).
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let begin = ctx.new_event(flags).map_err(driver("create an event"))?;
        let end = ctx.new_event(flags).map_err(driver("create an event"))?;
        Ok(EventTimer {
            gpu,
            stream: cuda,
            begin,
            end,
            started: false,
        })
    }

    /// Waits for the work queued so far, then marks the start.
    pub fn start(&mut self) -> Result<()> {
        // An event queued behind earlier work would start the clock late; and an event
        // must not be recorded into a capture.
        super::graph::exclusively(&self.gpu, || {
            self.stream.synchronize().map_err(driver("synchronize"))?;
            self.begin
                .record(&self.stream)
                .map_err(driver("record an event"))
        })?;
        self.started = true;
        Ok(())
    }

    /// Marks the end, waits for the work queued before it and returns the seconds since
    /// [`start`](EventTimer::start).
    pub fn stop(&mut self) -> Result<f64> {
        if !std::mem::take(&mut self.started) {
            return Err(invalid("EventTimer", "stop called before start"));
        }
        super::graph::exclusively(&self.gpu, || {
            self.end
                .record(&self.stream)
                .map_err(driver("record an event"))?;
            self.end.synchronize().map_err(driver("wait for an event"))
        })?;
        let ms = self
            .begin
            .elapsed_ms(&self.end)
            .map_err(driver("read the time between events"))?;
        Ok(f64::from(ms) / 1e3)
    }
}
