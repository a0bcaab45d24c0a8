//! The GPUs of this process: the driver, found at run time (never linked), one context per
//! device, its CUDA streams, allocator and kernel cache.
//!
//! Nothing here touches the driver before checking that its library loads: on a machine
//! without CUDA every entry point returns an [`Error::Device`] instead of panicking.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{CudaContext, CudaStream, result, sys};

use super::alloc::Allocator;
use super::graph::Batching;
use super::jit::Jit;
use super::launch::{Arch, Kernel, KernelKey, ModuleKey, Symbol};
use crate::{DType, Error, Result};

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
    /// What the device is (read once).
    pub(crate) props: DeviceProps,
    /// Kernels already looked up (no strings are built on the launch path).
    kernels: Mutex<HashMap<KernelKey, Kernel>>,
    /// Page-locked host memory that large transfers go through (see `mod.rs`).
    pub(crate) staging: Mutex<Option<super::transfer::Staging>>,
    /// The graph capture state (`graph.rs`).
    pub(crate) batching: Batching,
}

/// What nuvec reads of a device once, when it opens it.
#[derive(Clone, Debug)]
pub(crate) struct DeviceProps {
    /// The driver's name of the device.
    pub(crate) name: String,
    /// Its memory, in bytes.
    pub(crate) memory: usize,
    /// The number of multiprocessors.
    pub(crate) sms: u32,
    /// The portable target architecture of its compute capability.
    pub(crate) arch: Arch,
    /// The most shared memory one block may ask for (opting in past 48 KiB), in bytes.
    pub(crate) shared_per_block: u32,
    /// The shared memory of one multiprocessor, in bytes.
    pub(crate) shared_per_sm: u32,
    /// The most threads resident on one multiprocessor.
    pub(crate) threads_per_sm: u32,
    /// The size of the L2 cache, in bytes.
    pub(crate) l2_bytes: u32,
}

impl DeviceProps {
    fn read(ctx: &CudaContext) -> std::result::Result<DeviceProps, String> {
        use sys::CUdevice_attribute as A;
        let get = |attr: A, what: &str| {
            ctx.attribute(attr)
                .map(|v| v.max(0) as u32)
                .map_err(|e| format!("reading its {what} failed: {e}"))
        };
        let (major, minor) = ctx
            .compute_capability()
            .map_err(|e| format!("reading its compute capability failed: {e}"))?;
        Ok(DeviceProps {
            name: ctx
                .name()
                .map_err(|e| format!("reading its name failed: {e}"))?,
            memory: ctx
                .total_mem()
                .map_err(|e| format!("reading its memory size failed: {e}"))?,
            sms: get(
                A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                "multiprocessor count",
            )?
            .max(1),
            arch: Arch::of(major.max(0) as u32, minor.max(0) as u32),
            shared_per_block: get(
                A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                "shared memory per block",
            )?,
            shared_per_sm: get(
                A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
                "shared memory per multiprocessor",
            )?,
            threads_per_sm: get(
                A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
                "threads per multiprocessor",
            )?,
            l2_bytes: get(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 cache size")?,
        })
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

    /// The module key of `family` over `dtype` (with template argument `arg`, 0 for
    /// none) for this device's portable architecture.
    pub(crate) fn module(&self, family: &'static str, dtype: Option<DType>, arg: u32) -> ModuleKey {
        ModuleKey {
            family,
            dtype,
            arg,
            spec: 0,
            arch: self.props.arch,
        }
    }

    /// The kernel named by `key`, whose module's source `source()` gives (compiled and
    /// loaded the first time; later calls find it in the device's table).
    pub(crate) fn kernel(
        &self,
        key: &KernelKey,
        source: impl FnOnce() -> String,
    ) -> Result<Kernel> {
        if let Some(k) = lock(&self.kernels).get(key) {
            return Ok(k.clone());
        }
        let f = self
            .jit
            .function(&key.module, key.symbol.as_str(), source)?;
        let per_sm = f
            .occupancy_max_active_blocks_per_multiprocessor(Kernel::THREADS, 0, None)
            .map_err(|e| Error::Device(format!("cuda: reading a kernel's occupancy: {e}")))?;
        if kernel_info() {
            report(&f, key, per_sm);
        }
        let k = Kernel {
            f,
            wave: per_sm.max(1) * self.props.sms,
            symbol: key.symbol,
            shared_raised: Default::default(),
            static_bytes: Default::default(),
        };
        lock(&self.kernels).insert(*key, k.clone());
        Ok(k)
    }

    /// Kernel `symbol` of module `family` over `dtype` (see [`Gpu::kernel`]).
    pub(crate) fn kernel_of(
        &self,
        family: &'static str,
        dtype: Option<DType>,
        symbol: Symbol,
        source: impl FnOnce() -> String,
    ) -> Result<Kernel> {
        self.kernel_in(family, dtype, 0, symbol, source)
    }

    /// Kernel `symbol` of module `family` over `dtype` with template argument `arg` (see
    /// [`Gpu::kernel`]): families that instantiate a kernel for each of several values (the
    /// row kernels' packs a thread) compile, on first use, only the module of that value.
    pub(crate) fn kernel_in(
        &self,
        family: &'static str,
        dtype: Option<DType>,
        arg: u32,
        symbol: Symbol,
        source: impl FnOnce() -> String,
    ) -> Result<Kernel> {
        let key = KernelKey {
            module: self.module(family, dtype, arg),
            symbol,
        };
        self.kernel(&key, source)
    }

    /// The allocator's id of nuvec stream `index` of this device.
    pub(crate) fn stream_id(&self, index: usize) -> usize {
        self.ordinal * STREAMS + index
    }
}

/// Whether `NUVEC_KERNEL_INFO` asks for a line on stderr about each kernel as it loads.
fn kernel_info() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("NUVEC_KERNEL_INFO").is_some_and(|v| v != "0"))
}

/// One line about a kernel just loaded: its registers, spilled (local) and static shared
/// bytes a thread or block, and blocks of 256 threads a multiprocessor holds.
fn report(f: &cudarc::driver::CudaFunction, key: &KernelKey, per_sm: u32) {
    use sys::CUfunction_attribute_enum as A;
    let get = |a: A| f.get_attribute(a).unwrap_or(-1);
    eprintln!(
        "nuvec kernel {} ({}, {}): {} registers, {} local bytes, {} shared bytes, {} blocks of 256 a multiprocessor",
        key.symbol.as_str(),
        key.module.name(),
        key.module.arch.name(),
        get(A::CU_FUNC_ATTRIBUTE_NUM_REGS),
        get(A::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
        get(A::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
        per_sm,
    );
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
    let props = DeviceProps::read(&ctx).map_err(|e| format!("gpu({ordinal}): {e}"))?;
    Ok(Arc::new(Gpu {
        ordinal,
        alloc: Arc::new(Allocator::new(Arc::clone(&ctx))),
        jit: Jit::new(Arc::clone(&ctx)),
        ctx,
        streams: Mutex::new(vec![None; STREAMS]),
        props,
        kernels: Mutex::new(HashMap::new()),
        staging: Mutex::new(None),
        batching: Batching::default(),
    }))
}

/// What CUDA device `ordinal` is, as nuvec read it once when it opened the device.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceInfo {
    /// The driver's name of the device (`NVIDIA H200`).
    pub name: String,
    /// The target architecture its kernels are compiled for (`sm_90`).
    pub architecture: String,
    /// Its memory, in bytes.
    pub memory_bytes: usize,
    /// The number of multiprocessors.
    pub multiprocessors: u32,
    /// The most shared memory one block may use, in bytes.
    pub max_shared_memory_per_block: u32,
    /// The shared memory of one multiprocessor, in bytes.
    pub shared_memory_per_multiprocessor: u32,
    /// The most threads resident on one multiprocessor.
    pub max_threads_per_multiprocessor: u32,
    /// The size of the L2 cache, in bytes.
    pub l2_cache_bytes: u32,
}

/// What CUDA device `ordinal` is (MLX's `device_info`), or an [`Error::Device`] where it
/// cannot be opened (no driver, no such device).
///
/// ```
/// match nuvec_core::cuda::device_info(0) {
///     Ok(info) => println!("{}: {} multiprocessors", info.name, info.multiprocessors),
///     Err(e) => println!("no GPU: {e}"),
/// }
/// ```
pub fn device_info(ordinal: usize) -> Result<DeviceInfo> {
    let p = &gpu(ordinal)?.props;
    Ok(DeviceInfo {
        name: p.name.clone(),
        architecture: p.arch.name(),
        memory_bytes: p.memory,
        multiprocessors: p.sms,
        max_shared_memory_per_block: p.shared_per_block,
        shared_memory_per_multiprocessor: p.shared_per_sm,
        max_threads_per_multiprocessor: p.threads_per_sm,
        l2_cache_bytes: p.l2_bytes,
    })
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
