//! The CUDA backend: kernels compiled at run time by NVRTC, device memory from a caching
//! allocator, work queued on CUDA streams. The driver is loaded dynamically, so the crate
//! builds and runs everywhere; without a driver or a device, GPU work returns an
//! [`Error::Device`].
//!
//! Data moves on demand: a kernel's inputs get a device copy when they have none (kept with
//! the buffer), and reading values on the host copies them back once, after waiting for the
//! stream that computes them; large buffers travel through page-locked staging memory
//! (`transfer.rs`). A primitive without a CUDA kernel yet runs on the CPU over host
//! copies of its inputs (see [`eval`]); that bridge keeps every program runnable on the GPU
//! stream while kernels are added family by family.
//!
//! The base every family builds on:
//! - `dtype.rs`: the element types with kernels, the C++ type and name suffix of each;
//! - `launch.rs`: the typed kernel key (module family, element type, template argument,
//!   target architecture incl. `sm_90a`, symbol), [`Gpu::kernel`]'s one table of loaded
//!   kernels, and `Kernel::launch`, the one place a kernel is queued;
//! - `jit.rs`: NVRTC, with compiled modules kept in memory and their PTX on disk
//!   (`NUVEC_KERNEL_INFO=1` prints each kernel's registers, spills and occupancy as it loads;
//!   `NUVEC_KERNEL_DEFINES="NAME=VALUE ..."` sets the kernels' tunable constants, to try
//!   variants without a rebuild). Families with many instantiations (the row kernels) split
//!   them into modules by template argument ([`Gpu::kernel_in`]), so a first launch compiles
//!   only its own;
//! - `context.rs`: each device, its streams and what it is (multiprocessors, shared memory,
//!   architecture), read once when it opens.

mod alloc;
mod context;
mod conv;
mod creation;
mod dtype;
mod elementwise;
pub(crate) mod fast;
mod graph;
mod index;
mod jit;
mod launch;
mod matmul;
mod quantized;
mod random;
mod reduce;
mod shape;
mod sort;
mod tensor_map;
pub(crate) mod timing;
mod transfer;

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use cudarc::driver::{CudaStream, result};

pub(crate) use alloc::DeviceBuffer;
pub use alloc::MemoryStats;
pub(crate) use context::Gpu;
pub use context::{DeviceInfo, device_info};
pub(crate) use dtype::type_names;
pub(crate) use jit::fnv1a;
pub(crate) use launch::MAX_PARAMS;

use crate::array::{ArrayData, Buffer, DeviceData, HostData, Layout};
use crate::primitive::{OutputSpec, Primitive};
use crate::{DType, Error, Result, Stream};

/// A buffer's elements on a GPU: the memory and the stream that writes them.
#[derive(Debug)]
pub(crate) struct DeviceCopy {
    buf: DeviceBuffer,
    ordinal: usize,
    /// The allocator id of the stream whose queued work produces the elements.
    stream_id: usize,
}

impl DeviceCopy {
    /// The device address of element 0.
    pub(crate) fn ptr(&self) -> u64 {
        self.buf.ptr()
    }
}

impl DeviceData for DeviceCopy {
    fn to_host(&self, dtype: DType, len: usize) -> Result<HostData> {
        let gpu = context::gpu(self.ordinal)?;
        gpu.ctx
            .bind_to_thread()
            .map_err(driver("bind the context"))?;
        let stream = context::stream_by_id(self.stream_id)
            .ok_or_else(|| Error::Device("cuda: a buffer's stream is gone".into()))?;
        // Kernels still recorded in a capture have not run yet: this launches them, and no
        // capture records the copy.
        graph::exclusively(&gpu, || {
            crate::with_dtype!(dtype, T => {
                let mut v = crate::array::pool::alloc::<T>(len);
                // After the work queued on the producing stream; large buffers go through
                // page-locked staging memory (`transfer.rs`).
                transfer::download(&gpu, &stream, transfer::bytes_mut(&mut v), self.buf.ptr())?;
                Ok(<T as crate::dtype::Element>::into_host(v))
            })
        })
    }
}

fn driver(what: &'static str) -> impl Fn(result::DriverError) -> Error {
    move |e| Error::Device(format!("cuda: {what}: {e}"))
}

/// Whether GPU `ordinal` can run work, or the error that says why not.
pub(crate) fn check(ordinal: usize) -> Result<()> {
    context::check(ordinal)
}

/// Launches the kernels still recorded for a graph, on every stream: called when an `eval`
/// ends, so that its work is queued when it returns.
pub(crate) fn finish() -> Result<()> {
    graph::finished()
}

/// Where a node runs: the device, its CUDA stream and that stream's allocator id.
pub(crate) struct Place {
    /// The nuvec stream the node runs on.
    pub(crate) node_stream: Stream,
    pub(crate) gpu: Arc<Gpu>,
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) stream_id: usize,
}

impl Place {
    fn of(stream: Stream) -> Result<Place> {
        let gpu = context::gpu(stream.device.index)?;
        gpu.ctx
            .bind_to_thread()
            .map_err(driver("bind the context"))?;
        let cuda = gpu.stream(stream.index)?;
        Ok(Place {
            node_stream: stream,
            stream_id: gpu.stream_id(stream.index),
            stream: cuda,
            gpu,
        })
    }

    /// The device address of `data`'s buffer (element 0, before the layout's offset), copying
    /// it to this device first if needed, and ordering this stream after the one that writes
    /// it.
    pub(crate) fn input(&self, data: &ArrayData) -> Result<u64> {
        let buffer = &data.buffer;
        if let Some(copy) = buffer.device::<DeviceCopy>()
            && copy.ordinal == self.gpu.ordinal
        {
            if copy.stream_id != self.stream_id
                && let Some(producer) = context::stream_by_id(copy.stream_id)
            {
                // Everything queued on the producer so far, which includes the write.
                let event = producer
                    .record_event(None)
                    .map_err(driver("record an event"))?;
                self.stream
                    .wait(&event)
                    .map_err(driver("wait for an event"))?;
            }
            return Ok(copy.ptr());
        }
        let host = buffer.ensure_host()?;
        let bytes = host.len() * host.dtype().size();
        let buf = self.gpu.alloc.alloc(bytes, self.stream_id)?;
        if bytes > 0 {
            // The block holds at least `bytes`; large copies go through page-locked staging
            // memory, and `host` may be dropped once this returns.
            transfer::upload(
                &self.gpu,
                &self.stream,
                buf.ptr(),
                transfer::host_bytes(host),
            )?;
        }
        let copy = buffer.set_device(DeviceCopy {
            buf,
            ordinal: self.gpu.ordinal,
            stream_id: self.stream_id,
        });
        copy.map(DeviceCopy::ptr)
            .ok_or_else(|| Error::Device("cuda: a buffer is on another backend's device".into()))
    }

    /// Whether `data` already has a copy on this device written by this stream, so that a
    /// kernel can read it with no transfer and no event.
    fn resident(&self, data: &ArrayData) -> bool {
        data.buffer.device::<DeviceCopy>().is_some_and(|copy| {
            copy.ordinal == self.gpu.ordinal && copy.stream_id == self.stream_id
        })
    }

    /// At least `n` u32 counters kept for this stream, zero between launches: each is
    /// cleared once, when allocated (queued on the stream before the launch that asks for
    /// them), and every kernel that takes them sets each counter it moves back to zero before
    /// it ends (the decoding attention's in-block merge, the quantized product's stream-K
    /// flags). Kernels on one stream run one after the other, so they share them.
    pub(crate) fn zeroed_counters(&self, n: usize) -> Result<u64> {
        /// Per stream (the allocator's id, unique across devices): the block and its length.
        type Counters = HashMap<usize, (alloc::DeviceBuffer, usize)>;
        static COUNTERS: LazyLock<Mutex<Counters>> = LazyLock::new(|| Mutex::new(HashMap::new()));
        let mut map = COUNTERS
            .lock()
            .map_err(|_| Error::Device("cuda: the counters' lock is poisoned".into()))?;
        if let Some((buffer, len)) = map.get(&self.stream_id)
            && *len >= n
        {
            return Ok(buffer.ptr());
        }
        let len = n.next_power_of_two().max(1024);
        let buffer = self.gpu.alloc.alloc(len * 4, self.stream_id)?;
        // SAFETY: the block was just allocated with `len · 4` bytes for this stream; the memset
        // is queued on it before any launch that reads the counters.
        unsafe { result::memset_d8_async(buffer.ptr(), 0, len * 4, self.stream.cu_stream()) }
            .map_err(|e| Error::Device(format!("cuda: zeroing counters: {e}")))?;
        let ptr = buffer.ptr();
        // A smaller block this replaces goes back to the allocator's cache for this stream,
        // after the work queued on it.
        map.insert(self.stream_id, (buffer, len));
        Ok(ptr)
    }

    /// A new row-major output of `shape` and `dtype` on this device, and its address.
    pub(crate) fn output(&self, dtype: DType, shape: &[usize]) -> Result<(ArrayData, u64)> {
        let len: usize = shape.iter().product();
        let buf = self.gpu.alloc.alloc(len * dtype.size(), self.stream_id)?;
        let ptr = buf.ptr();
        let copy = DeviceCopy {
            buf,
            ordinal: self.gpu.ordinal,
            stream_id: self.stream_id,
        };
        let data = ArrayData {
            buffer: Arc::new(Buffer::from_device(copy, dtype, len)),
            layout: Layout::contiguous(shape),
        };
        Ok((data, ptr))
    }
}

/// Computes one node's outputs on a GPU stream.
pub(crate) fn eval(
    stream: Stream,
    primitive: &Primitive,
    inputs: &mut [ArrayData],
    outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    let place = Place::of(stream)?;
    // A node that only queues kernels on inputs already here may be recorded into the
    // device's graph; any other node first launches what was recorded (`graph.rs`).
    let batchable = batchable(primitive, inputs) && inputs.iter().all(|d| place.resident(d));
    let using = graph::enter(&place.gpu, &place.stream, batchable)?;
    let done = run(&place, primitive, inputs, outputs);
    // The node's own error, if any, says more than one from ending the use.
    let finished = using.finish();
    let done = done?;
    finished?;
    match done {
        Some(results) => Ok(results),
        // The host reads the inputs through `to_host`, which launches what was recorded.
        None => on_host(primitive, inputs, outputs),
    }
}

/// Whether a node of `primitive` only queues kernels and device copies on its stream (when
/// its inputs are on the device): no cuBLAS call, no transfer, no nested evaluation.
fn batchable(primitive: &Primitive, inputs: &[ArrayData]) -> bool {
    if let Primitive::Fast(op) = primitive {
        return fast::batchable(op, inputs);
    }
    matches!(
        primitive,
        Primitive::Unary(_)
            | Primitive::Binary(_)
            | Primitive::Select
            | Primitive::AsType(_)
            | Primitive::Shape(_)
            | Primitive::Index(_)
            | Primitive::Creation(_)
            | Primitive::Reduce { .. }
            | Primitive::ArgReduce { .. }
            | Primitive::Scan { .. }
            | Primitive::Softmax
    )
}

/// Runs a node's kernels, or `None` where the primitive has none for these inputs.
fn run(
    place: &Place,
    primitive: &Primitive,
    inputs: &mut [ArrayData],
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    Ok(match primitive {
        Primitive::Unary(op) => elementwise::unary(place, *op, &inputs[0], outputs)?,
        Primitive::Binary(op) => elementwise::binary(place, *op, inputs, outputs)?,
        Primitive::Select => elementwise::select(place, inputs, outputs)?,
        Primitive::AsType(dtype) => elementwise::astype(place, &inputs[0], *dtype)?,
        Primitive::Shape(op) => shape::eval(place, op, inputs, outputs)?,
        Primitive::Matmul(op) => matmul::eval(place, op, inputs, outputs)?,
        Primitive::Conv(op) => conv::eval(place, op, inputs, outputs)?,
        Primitive::Sort(op) => sort::eval(place, op, inputs, outputs)?,
        Primitive::Random(op) => random::eval(place, op, inputs, outputs)?,
        Primitive::Index(op) => index::eval(place, op, inputs, outputs)?,
        Primitive::Creation(op) => creation::eval(place, op)?,
        Primitive::Reduce { op, axes } => reduce::reduce(place, *op, axes, &inputs[0], outputs)?,
        Primitive::ArgReduce { op, axis } => {
            reduce::arg_reduce(place, *op, *axis, &inputs[0], outputs)?
        }
        Primitive::Scan {
            op,
            axis,
            reverse,
            inclusive,
        } => reduce::scan(
            place,
            *op,
            (*axis, *reverse, *inclusive),
            &inputs[0],
            outputs,
        )?,
        Primitive::Softmax => reduce::softmax(place, &inputs[0])?,
        Primitive::Quantized(op) => quantized::eval(place, op, inputs, outputs)?,
        Primitive::Fast(op) => Some(fast::eval(place, op, inputs, outputs)?),
        Primitive::StopGradient | Primitive::Identity => Some(vec![inputs[0].clone()]),
        // The outputs of the custom function's own graph, handed on where they are.
        Primitive::Custom(op) => Some(op.forward(inputs)),
    })
}

/// Runs a primitive that has no CUDA kernel yet (or not for these types) with the CPU
/// backend over host copies of its inputs; its results stay on the host until a kernel
/// reads them.
fn on_host(
    primitive: &Primitive,
    inputs: &mut [ArrayData],
    outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    HOST_RUNS.with(|n| n.set(n.get() + 1));
    if log_host_runs() {
        let inputs: Vec<String> = inputs
            .iter()
            .map(|d| format!("{}{:?}", d.dtype(), d.layout.shape))
            .collect();
        eprintln!(
            "nuvec: {} ran on the host bridge over {}",
            primitive.name(),
            inputs.join(", ")
        );
    }
    for data in inputs.iter() {
        data.buffer.ensure_host()?;
    }
    crate::backend::cpu::eval(primitive, inputs, outputs)
}

thread_local! {
    /// Nodes of GPU streams that this thread's evaluations ran on the host bridge.
    static HOST_RUNS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Whether each node run on the host bridge is named on stderr (`NUVEC_LOG_HOST_BRIDGE=1`), to
/// find which primitive of a graph still lacks a kernel.
fn log_host_runs() -> bool {
    static LOG: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *LOG.get_or_init(|| std::env::var("NUVEC_LOG_HOST_BRIDGE").is_ok_and(|v| v == "1"))
}

/// How many nodes evaluated on a GPU stream have run on the CPU over host copies of their
/// inputs (primitives, or inputs, that no CUDA kernel takes yet) in evaluations on this thread
/// (evaluation runs on the thread that asks for it, so tests running side by side do not see
/// each other's). Tests read it to check that a kernel really ran.
pub fn host_bridge_runs() -> usize {
    HOST_RUNS.with(|n| n.get())
}

/// Device memory counters, summed over the GPUs used so far (zero where there are none).
pub fn memory_stats() -> MemoryStats {
    context::opened()
        .iter()
        .map(|g| g.alloc.stats())
        .fold(MemoryStats::default(), |a, s| MemoryStats {
            active: a.active + s.active,
            peak: a.peak + s.peak,
            cached: a.cached + s.cached,
        })
}

/// Gives the device memory that freed buffers keep cached back to the driver.
pub fn clear_device_cache() -> Result<()> {
    for g in context::opened() {
        g.alloc.release_cached(0)?;
    }
    Ok(())
}

/// Restarts the peak counter of [`memory_stats`] from the memory active now.
pub fn reset_peak_memory() {
    for g in context::opened() {
        g.alloc.reset_peak();
    }
}

/// Caps the device memory kept cached per GPU (freed buffers beyond it go back to the
/// driver).
pub fn set_device_cache_limit(bytes: usize) -> Result<()> {
    for g in context::opened() {
        g.alloc.set_cache_limit(bytes)?;
    }
    Ok(())
}

/// Every kernel source of every family, complete, for compiling ahead of time (CI). Each
/// family adds its own list here.
#[cfg(test)]
fn all_sources() -> Vec<(String, String)> {
    #[allow(unused_mut)] // each family below adds its own
    let mut sources = elementwise::all_sources();
    sources.extend(conv::all_sources());
    sources.extend(sort::all_sources());
    sources.extend(random::all_sources());
    sources.extend(index::all_sources());
    sources.extend(creation::all_sources());
    sources.extend(reduce::all_sources());
    sources.extend(fast::all_sources());
    sources.extend(quantized::all_sources());
    sources
}

#[cfg(test)]
mod tests {
    /// Compiles every `(key, source)` for `arch` on all cores, unoptimised: the errors, one
    /// line each. With `NUVEC_DUMP_KERNELS=DIR`, each module is compiled as the backend
    /// compiles it and its source and PTX are written there, to read the SASS offline
    /// (`ptxas -arch=sm_90a`, then `cuobjdump -sass`): how the ordering fault of the warpgroup
    /// quantized product was found.
    fn compile_all(sources: &[(String, String)], arch: &str) -> Vec<String> {
        use rayon::prelude::*;
        let dump = std::env::var("NUVEC_DUMP_KERNELS").ok();
        sources
            .par_iter()
            .filter_map(|(key, source)| {
                let compiled = if dump.is_some() {
                    super::jit::compile(key, source, arch)
                } else {
                    super::jit::compile_unoptimized(key, source, arch)
                };
                let ptx = match compiled {
                    Ok(ptx) => ptx,
                    Err(e) => return Some(e.to_string()),
                };
                if let Some(dir) = &dump {
                    let dir = std::path::Path::new(dir);
                    std::fs::write(dir.join(format!("{key}.ptx")), ptx).expect("the dump folder");
                    std::fs::write(dir.join(format!("{key}.cu")), source).expect("the dump folder");
                }
                None
            })
            .collect()
    }

    /// Every kernel source compiles for the H200's architecture. Needs NVRTC and CUDA's
    /// headers (CI installs them from the Python package index), not a GPU (see
    /// [`compile_all`] for `NUVEC_DUMP_KERNELS`).
    #[test]
    fn kernel_sources_compile_for_sm_90() {
        // SAFETY: only tries to open the library.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            eprintln!("skipped: NVRTC (libnvrtc) was not found");
            return;
        }
        let failures = compile_all(&super::all_sources(), "sm_90");
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    /// The Hopper kernels (`wgmma`: attention's and the quantized product's) compile for
    /// `sm_90a`.
    #[test]
    fn hopper_kernel_sources_compile_for_sm_90a() {
        // SAFETY: only tries to open the library.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            eprintln!("skipped: NVRTC (libnvrtc) was not found");
            return;
        }
        let mut sources = super::fast::flash::sm90_sources();
        sources.extend(super::quantized::sm90_sources());
        let failures = compile_all(&sources, "sm_90a");
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    /// The row families compile one module a kind and pack count: each module compiles and
    /// holds the kernels its launches ask it for.
    #[test]
    fn split_modules_hold_the_symbols_their_launches_name() {
        // SAFETY: only tries to open the library.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            eprintln!("skipped: NVRTC (libnvrtc) was not found");
            return;
        }
        use rayon::prelude::*;
        let missing: Vec<String> = super::fast::split_modules()
            .par_iter()
            .flat_map(|(name, source, symbols)| {
                match super::jit::compile_unoptimized(name, source, "sm_90") {
                    Ok(ptx) => symbols
                        .iter()
                        .filter(|s| !ptx.contains(&format!(".entry {s}(")))
                        .map(|s| format!("{name}: {s}"))
                        .collect::<Vec<_>>(),
                    Err(e) => vec![e.to_string()],
                }
            })
            .collect();
        assert!(
            missing.is_empty(),
            "not in their modules: {}",
            missing.join(", ")
        );
    }
}
