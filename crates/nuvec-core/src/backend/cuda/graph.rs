//! Batching kernel launches into CUDA graphs.
//!
//! Launching a kernel costs the host a few microseconds, far more than a small kernel runs.
//! So runs of consecutive nodes that only queue kernels (and device-to-device copies) on one
//! stream are recorded by stream capture instead of launched one by one, and each run of up
//! to [`nodes_per_graph`] nodes is launched as one graph. The first few nodes of each
//! evaluation are launched directly, so that evaluating one or two operations pays no graph.
//! Graph executables are kept per stream and size and updated in place for the next run of
//! the same shape, which is much cheaper than building a new one.
//!
//! A capture is closed and its graph launched ("flushed") before anything that must see the
//! work queued or that a capture cannot hold: the end of every `eval`, a node that is not
//! batched (cuBLAS products, uploads, the CPU bridge), copies to the host, events,
//! synchronisation and returning memory to the driver. Batching only starts while a device
//! has a single stream, so no event between streams is ever recorded inside a capture.
//! `NUVEC_GRAPH_NODES` sets the run length (`0` turns batching off), as MLX's
//! `MLX_MAX_OPS_PER_BUFFER` does.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use cudarc::driver::{CudaStream, result, sys};

use super::context::{self, Gpu};
use crate::{Error, Result};

/// Nodes recorded into one graph unless `NUVEC_GRAPH_NODES` says otherwise.
const DEFAULT_NODES: usize = 32;
/// Nodes of each evaluation launched directly on a stream before recording starts: a graph
/// costs more to end, update and launch than a few launches, so short evaluations (a single
/// large operation, say) keep direct launches.
const DIRECT_FIRST: usize = 4;
/// Executables kept per stream (one per graph size seen last).
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

/// Captures open on any stream of any device: flushing everything is a load when none is.
static OPEN: AtomicUsize = AtomicUsize::new(0);
/// Evaluations ended so far ([`finished`]): a stream's count of direct launches restarts
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

/// The capture state of one stream.
#[derive(Default)]
pub(crate) struct Batch {
    /// Nodes recorded into the open capture; `None` while no capture is open.
    open: Option<usize>,
    /// Executables of earlier graphs, most recent last.
    execs: Vec<Exec>,
    /// Nodes launched directly during evaluation number `.0` (see [`DIRECT_FIRST`]).
    direct: (usize, usize),
}

fn driver(what: &'static str) -> impl Fn(result::DriverError) -> Error {
    move |e| Error::Device(format!("cuda: {what}: {e}"))
}

/// Opens a capture on stream `index` of `gpu` (unless one is open) for the node about to
/// run; `false` (launch directly) when batching is off, the device has more than one stream,
/// or this evaluation has launched fewer than [`DIRECT_FIRST`] nodes on the stream.
pub(crate) fn begin(gpu: &Gpu, index: usize, stream: &CudaStream) -> Result<bool> {
    if nodes_per_graph() == 0 || gpu.alloc.streams() > 1 {
        return Ok(false);
    }
    let mut batch = gpu.batch(index);
    if batch.open.is_none() {
        let now = EVALS.load(Ordering::Relaxed);
        if batch.direct.0 != now {
            batch.direct = (now, 0);
        }
        if batch.direct.1 < DIRECT_FIRST {
            batch.direct.1 += 1;
            return Ok(false);
        }
        let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
        // SAFETY: the stream is live (its `Arc` is held); relaxed mode lets the nodes that
        // follow allocate and load modules while the capture is open.
        unsafe { result::stream::begin_capture(stream.cu_stream(), mode) }
            .map_err(driver("begin a graph capture"))?;
        batch.open = Some(0);
        OPEN.fetch_add(1, Ordering::SeqCst);
    }
    Ok(true)
}

/// Counts a node recorded by [`begin`]'s capture, launching the graph once it is full.
pub(crate) fn added(gpu: &Gpu, index: usize, stream: &CudaStream) -> Result<()> {
    let mut batch = gpu.batch(index);
    let Some(n) = batch.open.as_mut() else {
        // Another thread flushed the capture meanwhile; the node was launched directly.
        return Ok(());
    };
    *n += 1;
    if *n >= nodes_per_graph() {
        close(&mut batch, stream)?;
    }
    Ok(())
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
        for (index, stream) in gpu.streams_made() {
            let mut batch = gpu.batch(index);
            if batch.open.is_some()
                && let Err(e) = close(&mut batch, &stream)
            {
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Ends the open capture of `batch` (on `stream`) and launches what it recorded.
fn close(batch: &mut Batch, stream: &CudaStream) -> Result<()> {
    if batch.open.take().is_none() {
        return Ok(());
    }
    OPEN.fetch_sub(1, Ordering::SeqCst);
    // SAFETY: this stream's capture was begun by `begin` and is still open (`open` was set).
    let graph = unsafe { result::stream::end_capture(stream.cu_stream()) }.map_err(|e| {
        Error::Device(format!(
            "cuda: ending a graph capture failed ({e}); the kernels recorded since the last \
             one did not run"
        ))
    })?;
    let launched = launch(batch, graph, stream);
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
