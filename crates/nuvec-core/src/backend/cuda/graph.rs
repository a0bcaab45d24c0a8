//! Batching kernel launches into CUDA graphs.
//!
//! Launching a kernel costs the host a few microseconds, far more than a small kernel runs.
//! So runs of consecutive nodes that only queue kernels (and device-to-device copies) on one
//! stream are recorded by stream capture instead of launched one by one, and each run of up
//! to [`nodes_per_graph`] nodes is launched as one graph. The first few nodes of each
//! evaluation are launched directly, so that evaluating one or two operations pays no graph.
//! Graph executables are kept per device and size and updated in place for the next run of
//! the same shape, which is much cheaper than building a new one. `NUVEC_GRAPH_NODES` sets
//! the run length (`0` turns batching off), as MLX's `MLX_MAX_OPS_PER_BUFFER` does.
//!
//! A capture is closed and its graph launched ("flushed") before anything that must see the
//! work queued or that a capture cannot hold: the end of every `eval`, a node that is not
//! batched (cuBLAS products, uploads, the CPU bridge), copies to the host, events,
//! synchronisation and returning memory to the driver. Batching only starts while a device
//! has a single stream, so no event between streams is ever recorded inside a capture.
//!
//! Several threads may queue work on one device. Every node, transfer and wait goes through
//! a [`Use`] of its device: a node being recorded holds the capture (nobody else closes it
//! until the node's kernels are all queued), and any other use first closes the open capture
//! and, while it lasts, keeps new captures from opening, so that only kernels are ever
//! recorded and they launch in the order they were queued.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::{self, ThreadId};

use cudarc::driver::{CudaStream, result, sys};

use super::context::{self, Gpu};
use crate::{Error, Result};

/// Nodes recorded into one graph unless `NUVEC_GRAPH_NODES` says otherwise.
const DEFAULT_NODES: usize = 32;
/// Nodes of each evaluation launched directly on a stream before recording starts: a graph
/// costs more to end, update and launch than a few launches, so short evaluations (a single
/// large operation, say) keep direct launches.
const DIRECT_FIRST: usize = 4;
/// Executables kept per device (one per graph size seen last).
const KEPT: usize = 4;

/// The most nodes one graph holds; `0`: no batching.
pub(crate) fn nodes_per_graph() -> usize {
    static NODES: OnceLock<usize> = OnceLock::new();
    *NODES.get_or_init(|| {
        std::env::var("NUVEC_GRAPH_NODES")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(DEFAULT_NODES)
    })
}

/// Captures open on any device: flushing everything is a load when none is.
static OPEN: AtomicUsize = AtomicUsize::new(0);
/// Evaluations ended so far ([`finished`]): a device's count of direct launches restarts
/// with each.
static EVALS: AtomicUsize = AtomicUsize::new(0);

/// A graph executable made from a capture of `nodes` nodes.
struct Exec {
    nodes: usize,
    exec: sys::CUgraphExec,
}

// SAFETY: a graph executable is a driver handle that any thread may use; every use of one
// goes through the `Mutex<Batch>` that owns it, which serialises them as the driver asks.
unsafe impl Send for Exec {}

/// The capture open on a device: its stream and the nodes recorded so far.
struct Open {
    stream: Arc<CudaStream>,
    nodes: usize,
}

/// The capture state of one device. At most one of its streams captures at a time (batching
/// needs the device to have a single stream).
#[derive(Default)]
struct Batch {
    open: Option<Open>,
    /// The thread queuing a node into the open capture: no other closes it meanwhile.
    holder: Option<ThreadId>,
    /// Uses that queue work directly (or wait on the device) now: no capture opens while
    /// there are any, so that their work is never recorded.
    users: usize,
    /// Threads waiting for the holder to finish its node (a notification is only sent when
    /// there are any: it costs a system call).
    waiting: usize,
    /// Executables of earlier graphs, most recent last.
    execs: Vec<Exec>,
    /// Nodes launched directly during evaluation number `.0` (see [`DIRECT_FIRST`]).
    direct: (usize, usize),
}

/// A device's capture state and the wait for its holder.
#[derive(Default)]
pub(crate) struct Batching {
    state: Mutex<Batch>,
    released: Condvar,
}

impl Batching {
    /// The state, as it is.
    fn state(&self) -> MutexGuard<'_, Batch> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The state, once no other thread is queuing a node into the open capture.
    fn settled(&self) -> MutexGuard<'_, Batch> {
        let mut batch = self.state();
        // Reading this thread's id only when there is a holder keeps it off the common path.
        while batch.holder.is_some_and(|h| h != thread::current().id()) {
            batch.waiting += 1;
            batch = self.released.wait(batch).unwrap_or_else(|e| e.into_inner());
            batch.waiting -= 1;
        }
        batch
    }
}

fn driver(what: &'static str) -> impl Fn(result::DriverError) -> Error {
    move |e| Error::Device(format!("cuda: {what}: {e}"))
}

/// One thread's use of a device for one node, transfer or wait: from [`enter`] (or within
/// [`exclusively`]) to [`Use::finish`] (or the drop, after an error).
pub(crate) struct Use<'a> {
    gpu: &'a Gpu,
    /// Whether the node is being recorded (this thread holds the capture).
    recording: bool,
    ended: bool,
}

/// Starts a node on `stream` of `gpu`. A `batchable` node (one that only queues kernels on
/// inputs already on this stream) is recorded into the open capture, or opens one, unless
/// batching is off, the device has more than one stream, this evaluation has launched fewer
/// than [`DIRECT_FIRST`] nodes, or another use is under way. Any other node first closes the
/// open capture (launching what it holds) and launches directly.
pub(crate) fn enter<'a>(
    gpu: &'a Gpu,
    stream: &Arc<CudaStream>,
    batchable: bool,
) -> Result<Use<'a>> {
    let mut batch = gpu.batching.settled();
    if !(batchable && batch.users == 0 && nodes_per_graph() > 0 && gpu.alloc.streams() <= 1) {
        return direct(gpu, batch);
    }
    if !batch
        .open
        .as_ref()
        .is_some_and(|o| Arc::ptr_eq(&o.stream, stream))
    {
        close(&mut batch)?;
        let now = EVALS.load(Ordering::Relaxed);
        if batch.direct.0 != now {
            batch.direct = (now, 0);
        }
        if batch.direct.1 < DIRECT_FIRST {
            batch.direct.1 += 1;
            return direct(gpu, batch);
        }
        let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
        // SAFETY: the stream is live (its `Arc` is held); relaxed mode lets the nodes that
        // follow allocate and load modules while the capture is open, and lets another
        // thread end it.
        unsafe { result::stream::begin_capture(stream.cu_stream(), mode) }
            .map_err(driver("begin a graph capture"))?;
        batch.open = Some(Open {
            stream: Arc::clone(stream),
            nodes: 0,
        });
        OPEN.fetch_add(1, Ordering::SeqCst);
    }
    batch.holder = Some(thread::current().id());
    Ok(Use {
        gpu,
        recording: true,
        ended: false,
    })
}

/// Runs `work`, a use of `gpu` that must see everything queued so far and must not be
/// recorded (copies to the host, waits, events, returning memory to the driver): the open
/// capture is launched first, and none opens until `work` returns. An error of `work`
/// comes before one from ending the use.
pub(crate) fn exclusively<R>(gpu: &Gpu, work: impl FnOnce() -> Result<R>) -> Result<R> {
    let using = direct(gpu, gpu.batching.settled())?;
    let done = work();
    let ended = using.finish();
    let value = done?;
    ended?;
    Ok(value)
}

/// A use that queues its work directly: the open capture (if any) is launched first, and
/// none opens until the use ends.
fn direct<'a>(gpu: &'a Gpu, mut batch: MutexGuard<'_, Batch>) -> Result<Use<'a>> {
    close(&mut batch)?;
    batch.users += 1;
    Ok(Use {
        gpu,
        recording: false,
        ended: false,
    })
}

impl Use<'_> {
    /// Ends the use: a recorded node is counted, and a full graph launched.
    pub(crate) fn finish(mut self) -> Result<()> {
        self.ended = true;
        self.end()
    }

    fn end(&self) -> Result<()> {
        // No wait: this thread holds the capture, or is a user (and no capture opens while
        // there are users).
        let mut batch = self.gpu.batching.state();
        let ended = if self.recording {
            batch.holder = None;
            match batch.open.as_mut() {
                Some(open) => {
                    open.nodes += 1;
                    if open.nodes >= nodes_per_graph() {
                        close(&mut batch)
                    } else {
                        Ok(())
                    }
                }
                // Closed by this thread within the node (memory given back to the driver).
                None => Ok(()),
            }
        } else {
            batch.users -= 1;
            Ok(())
        };
        let waiting = batch.waiting > 0;
        drop(batch);
        if waiting {
            self.gpu.batching.released.notify_all();
        }
        ended
    }
}

impl Drop for Use<'_> {
    fn drop(&mut self) {
        if !self.ended {
            // After an error: the error already on its way matters more than this one.
            let _ = self.end();
        }
    }
}

/// Launches every open capture at the end of an evaluation ([`flush_all`]) and restarts
/// the count of direct launches.
pub(crate) fn finished() -> Result<()> {
    EVALS.fetch_add(1, Ordering::Relaxed);
    flush_all()
}

/// Launches every open capture, on every device.
pub(crate) fn flush_all() -> Result<()> {
    if OPEN.load(Ordering::SeqCst) == 0 {
        return Ok(());
    }
    let mut first_error = None;
    for gpu in context::opened() {
        if let Err(e) = flush(&gpu) {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Launches the capture open on `gpu`, if any.
pub(crate) fn flush(gpu: &Gpu) -> Result<()> {
    close(&mut gpu.batching.settled())
}

/// Ends the open capture of `batch` and launches what it recorded.
fn close(batch: &mut Batch) -> Result<()> {
    let Some(open) = batch.open.take() else {
        return Ok(());
    };
    OPEN.fetch_sub(1, Ordering::SeqCst);
    // SAFETY: this stream's capture was begun by `enter` and is still open (`open` was set);
    // relaxed mode lets any thread end it.
    let graph = unsafe { result::stream::end_capture(open.stream.cu_stream()) }.map_err(|e| {
        Error::Device(format!(
            "cuda: ending a graph capture failed ({e}); the kernels recorded since the last \
             one did not run"
        ))
    })?;
    let launched = launch(batch, graph, &open.stream);
    // SAFETY: `graph` came from the capture above and nothing else holds it; an executable
    // made from it does not need it any more.
    let destroyed = unsafe { result::graph::destroy(graph) }.map_err(driver("destroy a graph"));
    launched.and(destroyed)
}

/// Launches `graph` on `stream` through a kept executable of its size (updated to it) or a
/// new one.
fn launch(batch: &mut Batch, graph: sys::CUgraph, stream: &CudaStream) -> Result<()> {
    let mut nodes = 0usize;
    // SAFETY: `graph` is a live graph; a null node array asks only for the count.
    unsafe { sys::cuGraphGetNodes(graph, std::ptr::null_mut(), &mut nodes) }
        .result()
        .map_err(driver("count a graph's nodes"))?;
    if nodes == 0 {
        return Ok(());
    }
    let mut exec = None;
    if let Some(at) = batch.execs.iter().position(|e| e.nodes == nodes) {
        let kept = batch.execs.remove(at);
        // SAFETY: the info struct is plain data (integers and handles) for which all zero
        // bits are a valid value.
        let mut info: sys::CUgraphExecUpdateResultInfo = unsafe { std::mem::zeroed() };
        // SAFETY: both handles are live and `info` is writable; launches of the executable
        // already queued keep the parameters they had.
        let updated = unsafe { sys::cuGraphExecUpdate_v2(kept.exec, graph, &mut info) };
        if updated == sys::CUresult::CUDA_SUCCESS {
            exec = Some(kept);
        } else {
            // SAFETY: the executable is no longer kept anywhere; queued launches of it
            // finish first (the driver defers the release).
            let _ = unsafe { result::graph::exec_destroy(kept.exec) };
        }
    }
    let exec = match exec {
        Some(e) => e,
        None => Exec {
            nodes,
            // SAFETY: `graph` is a complete graph from a capture.
            exec: unsafe { result::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) }
                .map_err(driver("instantiate a graph"))?,
        },
    };
    // SAFETY: the executable and the stream are live; the graph's kernels read and write
    // device blocks that their arrays (or the allocator's cache, in stream order) hold.
    let launched = unsafe { result::graph::launch(exec.exec, stream.cu_stream()) }
        .map_err(driver("launch a graph"));
    batch.execs.push(exec);
    if batch.execs.len() > KEPT {
        let old = batch.execs.remove(0);
        // SAFETY: as above; the driver releases it after its queued launches.
        let _ = unsafe { result::graph::exec_destroy(old.exec) };
    }
    launched
}
