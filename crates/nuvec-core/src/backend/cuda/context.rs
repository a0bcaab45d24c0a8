//! The GPUs of this process: the driver, found at run time (never linked), one context per
//! device, its CUDA streams, allocator and kernel cache.
//!
//! Nothing here touches the driver before checking that its library loads: on a machine
//! without CUDA every entry point returns an [`Error::Device`] instead of panicking.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{CudaContext, CudaFunction, CudaStream, result, sys};

use super::alloc::Allocator;
use super::graph::Batching;
use super::jit::Jit;
use crate::{Error, Result};

/// Streams per device that nuvec's [`crate::Stream`] indices map to (ids are
/// `device · STREAMS + index`).
const STREAMS: usize = 64;

/// One GPU, ready for work.
pub(crate) struct Gpu {
    /// The device's index.
    pub(crate) ordinal: usize,
    /// Its primary context.
    pub(crate) ctx: Arc<CudaContext>,
    /// Its device memory.
    pub(crate) alloc: Arc<Allocator>,
    /// Its compiled kernels.
    pub(crate) jit: Jit,
    /// CUDA streams by nuvec stream index, made when first used.
    streams: Mutex<Vec<Option<Arc<CudaStream>>>>,
    /// The number of multiprocessors.
    pub(crate) sms: u32,
    /// Kernels already looked up, by a key their family packs into 64 bits (no strings are
    /// built or hashed on the launch path).
    kernels: Mutex<HashMap<u64, Kernel>>,
    /// Page-locked host memory that large transfers go through (see `mod.rs`).
    pub(crate) staging: Mutex<Option<super::transfer::Staging>>,
    /// The graph capture state (`graph.rs`).
    pub(crate) batching: Batching,
}

/// A kernel ready to launch, with the most blocks of [`Kernel::THREADS`] threads that the
/// whole device runs at once (one wave), which grid-stride kernels need no more than.
#[derive(Clone)]
pub(crate) struct Kernel {
    pub(crate) f: CudaFunction,
    pub(crate) wave: u32,
}

impl Kernel {
    /// Threads per block of the elementwise kernels.
    pub(crate) const THREADS: u32 = 256;

    /// The launch of a grid-stride kernel over `items` units of work (one per thread and
    /// step): one block per 256 units, at most one wave of the device.
    pub(crate) fn config(&self, items: usize) -> cudarc::driver::LaunchConfig {
        let blocks = items
            .div_ceil(Self::THREADS as usize)
            .clamp(1, self.wave.max(1) as usize) as u32;
        cudarc::driver::LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (Self::THREADS, 1, 1),
            shared_mem_bytes: 0,
        }
    }
}

impl Gpu {
    /// The CUDA stream behind nuvec stream `index` of this device.
    pub(crate) fn stream(&self, index: usize) -> Result<Arc<CudaStream>> {
        if index >= STREAMS {
            return Err(Error::Device(format!(
                "gpu({}): stream index {index} is beyond the {STREAMS} streams a device has",
                self.ordinal
            )));
        }
        let mut streams = lock(&self.streams);
        if let Some(s) = &streams[index] {
            return Ok(Arc::clone(s));
        }
        let s = self
            .ctx
            .new_stream()
            .map_err(|e| Error::Device(format!("cuda: creating a stream: {e}")))?;
        streams[index] = Some(Arc::clone(&s));
        self.alloc.stream_made();
        drop(streams);
        // No capture opens once the device has a second stream; launch one already open,
        // so that no event between streams is recorded into it.
        super::graph::flush(self)?;
        Ok(s)
    }

    /// The kernel stored under `key`, made by `make` (compiled or loaded) the first time.
    pub(crate) fn kernel(
        &self,
        key: u64,
        make: impl FnOnce() -> Result<CudaFunction>,
    ) -> Result<Kernel> {
        if let Some(k) = lock(&self.kernels).get(&key) {
            return Ok(k.clone());
        }
        let f = make()?;
        let per_sm = f
            .occupancy_max_active_blocks_per_multiprocessor(Kernel::THREADS, 0, None)
            .map_err(|e| Error::Device(format!("cuda: reading a kernel's occupancy: {e}")))?;
        let k = Kernel {
            f,
            wave: per_sm.max(1) * self.sms,
        };
        lock(&self.kernels).insert(key, k.clone());
        Ok(k)
    }

    /// The allocator's id of nuvec stream `index` of this device.
    pub(crate) fn stream_id(&self, index: usize) -> usize {
        self.ordinal * STREAMS + index
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A device's slot: the device once opened, or why it could not be.
type Slot = OnceLock<std::result::Result<Arc<Gpu>, String>>;

/// Every device's slot, filled when the device is first used.
fn registry() -> Result<&'static [Slot]> {
    static DEVICES: OnceLock<std::result::Result<Vec<Slot>, String>> = OnceLock::new();
    let devices = DEVICES.get_or_init(|| {
        let count = device_count()?;
        Ok((0..count).map(|_| OnceLock::new()).collect())
    });
    match devices {
        Ok(v) => Ok(v.as_slice()),
        Err(msg) => Err(Error::Device(msg.clone())),
    }
}

/// The number of CUDA devices, or why there are none to use.
fn device_count() -> std::result::Result<usize, String> {
    if cfg!(miri) {
        return Err("cuda: not available under miri".into());
    }
    // SAFETY: only tries to open the driver library; nothing is called through it.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err("cuda: no CUDA driver library (libcuda) was found on this machine".into());
    }
    result::init().map_err(|e| format!("cuda: the driver did not initialise: {e}"))?;
    let n =
        result::device::get_count().map_err(|e| format!("cuda: counting devices failed: {e}"))?;
    Ok(n.max(0) as usize)
}

/// Device `ordinal`, set up on first use.
pub(crate) fn gpu(ordinal: usize) -> Result<Arc<Gpu>> {
    let devices = registry()?;
    let slot = devices.get(ordinal).ok_or_else(|| {
        Error::Device(format!(
            "gpu({ordinal}): this machine has {} CUDA device(s)",
            devices.len()
        ))
    })?;
    match slot.get_or_init(|| open(ordinal)) {
        Ok(g) => Ok(Arc::clone(g)),
        Err(msg) => Err(Error::Device(msg.clone())),
    }
}

fn open(ordinal: usize) -> std::result::Result<Arc<Gpu>, String> {
    let ctx = CudaContext::new(ordinal)
        .map_err(|e| format!("gpu({ordinal}): creating its context failed: {e}"))?;
    // SAFETY: nuvec orders work with its own streams and allocator and passes raw device
    // addresses, so cudarc's per-slice event tracking (which it would otherwise record at
    // every launch) has nothing to track.
    unsafe { ctx.disable_event_tracking() };
    let (major, minor) = ctx
        .compute_capability()
        .map_err(|e| format!("gpu({ordinal}): reading its compute capability failed: {e}"))?;
    let sms = ctx
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(|e| format!("gpu({ordinal}): reading its multiprocessor count failed: {e}"))?;
    Ok(Arc::new(Gpu {
        ordinal,
        alloc: Arc::new(Allocator::new(Arc::clone(&ctx))),
        jit: Jit::new(Arc::clone(&ctx), major, minor),
        ctx,
        streams: Mutex::new(vec![None; STREAMS]),
        sms: sms.max(1) as u32,
        kernels: Mutex::new(HashMap::new()),
        staging: Mutex::new(None),
        batching: Batching::default(),
    }))
}

/// Whether device `ordinal` can run work, or why not.
pub(crate) fn check(ordinal: usize) -> Result<()> {
    gpu(ordinal).map(|_| ())
}

/// The stream with allocator id `id`, if it was made.
pub(crate) fn stream_by_id(id: usize) -> Option<Arc<CudaStream>> {
    let g = gpu(id / STREAMS).ok()?;
    let streams = g.streams.lock().unwrap_or_else(|e| e.into_inner());
    streams.get(id % STREAMS)?.clone()
}

/// The devices set up so far (for memory statistics).
pub(crate) fn opened() -> Vec<Arc<Gpu>> {
    match registry() {
        Ok(devices) => devices
            .iter()
            .filter_map(|slot| slot.get().and_then(|r| r.as_ref().ok()).cloned())
            .collect(),
        Err(_) => Vec::new(),
    }
}
