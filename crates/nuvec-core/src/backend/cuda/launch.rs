//! Kernels by key, and launching them.
//!
//! A kernel is named by one typed [`KernelKey`]: the module it lives in ([`ModuleKey`]:
//! source family, element type, a template argument, target architecture) and its symbol.
//! Each device keeps one table from keys to loaded kernels ([`super::Gpu::kernel`]); a key
//! holds no heap data, so a launch finds its kernel without building a string. The module
//! behind a key is compiled once per process (and its PTX once per machine, `jit.rs`).
//!
//! [`Kernel::launch`] is the one place a kernel is put on a stream: it takes the kernel's
//! parameters as a slice and reports a failure with the kernel's name.

use std::ffi::c_void;
use std::fmt::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use cudarc::driver::{CudaFunction, CudaStream, DeviceRepr, LaunchConfig, result, sys};

use crate::{DType, Error, Result};

/// A target architecture: compute capability `major.minor`, and whether the code may use
/// the features of exactly that architecture (`sm_90a`: `wgmma`, the tensor-memory
/// accelerator), which then runs on no other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Arch {
    pub(crate) major: u32,
    pub(crate) minor: u32,
    pub(crate) specific: bool,
}

impl Arch {
    /// The portable target of a device of compute capability `major.minor`.
    pub(crate) fn of(major: u32, minor: u32) -> Arch {
        Arch {
            major,
            minor,
            specific: false,
        }
    }

    /// The architecture-specific target (`sm_90a`), or the error on a device that has none
    /// (before Hopper).
    #[allow(dead_code)] // asked for by the first `wgmma` kernels; tested below
    pub(crate) fn specific(self) -> Result<Arch> {
        if self.major < 9 {
            return Err(Error::Unsupported {
                op: "cuda",
                what: format!(
                    "sm_{}{}a kernels (they need Hopper or later)",
                    self.major, self.minor
                ),
            });
        }
        Ok(Arch {
            specific: true,
            ..self
        })
    }

    /// NVRTC's name for it: `sm_90`, `sm_90a`.
    pub(crate) fn name(self) -> String {
        let a = if self.specific { "a" } else { "" };
        format!("sm_{}{}{a}", self.major, self.minor)
    }
}

/// One compiled module: a kernel source family instantiated for an element type (`None`
/// for type-free families) and a template argument (a head size; 0 where none), for one
/// architecture. Families whose sources are not fixed (the users' kernels, `fast/custom.rs`)
/// tell their modules apart by `spec`, a hash of the source (0 for every built-in family):
/// a hash rather than a name, so that a key stays `Copy` and holds no heap data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ModuleKey {
    pub(crate) family: &'static str,
    pub(crate) dtype: Option<DType>,
    pub(crate) arg: u32,
    pub(crate) spec: u64,
    pub(crate) arch: Arch,
}

impl ModuleKey {
    /// The module's name, derived from its parts (`norms_bf16`, `attention_f16_d128`,
    /// `custom_0123456789abcdef`): the file name of its PTX in the disk cache, and part of
    /// error messages.
    pub(crate) fn name(&self) -> String {
        let mut s = self.family.to_string();
        if let Some((_, tn)) = self.dtype.and_then(super::dtype::type_names) {
            s.push('_');
            s.push_str(tn);
        }
        if self.arg != 0 {
            let _ = write!(s, "_d{}", self.arg);
        }
        if self.spec != 0 {
            let _ = write!(s, "_{:016x}", self.spec);
        }
        s
    }
}

/// The longest kernel symbol a [`Symbol`] holds.
const SYMBOL_BYTES: usize = 62;

/// A kernel's symbol in its module, held inline (no allocation on the launch path).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Symbol {
    len: u8,
    bytes: [u8; SYMBOL_BYTES],
}

impl Symbol {
    /// The symbol that `args` writes (see [`symbol!`]).
    pub(crate) fn new(args: fmt::Arguments<'_>) -> Result<Symbol> {
        let mut s = Symbol {
            len: 0,
            bytes: [0; SYMBOL_BYTES],
        };
        s.write_fmt(args).map_err(|_| {
            Error::Device(format!(
                "cuda: a kernel name is longer than {SYMBOL_BYTES} bytes"
            ))
        })?;
        Ok(s)
    }

    pub(crate) fn as_str(&self) -> &str {
        // Only whole `&str`s are written (`write_str`), so the bytes are UTF-8.
        std::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or("?")
    }
}

impl Write for Symbol {
    fn write_str(&mut self, part: &str) -> fmt::Result {
        let (at, n) = (self.len as usize, part.len());
        if at + n > SYMBOL_BYTES {
            return Err(fmt::Error);
        }
        self.bytes[at..at + n].copy_from_slice(part.as_bytes());
        self.len += n as u8;
        Ok(())
    }
}

impl fmt::Debug for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A kernel symbol from format arguments: `symbol!("rope_rows_{tn}")?`.
macro_rules! symbol {
    ($($t:tt)*) => {
        $crate::backend::cuda::launch::Symbol::new(format_args!($($t)*))
    };
}
pub(crate) use symbol;

/// What names one kernel: its module and its symbol there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct KernelKey {
    pub(crate) module: ModuleKey,
    pub(crate) symbol: Symbol,
}

/// A kernel ready to launch, with the most blocks of [`Kernel::THREADS`] threads that the
/// whole device runs at once (one wave), which grid-stride kernels need no more than.
#[derive(Clone)]
pub(crate) struct Kernel {
    pub(crate) f: CudaFunction,
    pub(crate) wave: u32,
    pub(crate) symbol: Symbol,
    /// Set once [`Kernel::allow_shared`] has raised the function's limit; shared by every
    /// clone of the device's table entry, so the driver is asked once per function.
    pub(crate) shared_raised: Arc<AtomicBool>,
    /// The function's static shared memory, once [`Kernel::static_shared`] has asked for it
    /// (shared like `shared_raised`).
    pub(crate) static_bytes: Arc<OnceLock<u32>>,
}

/// The most parameters a kernel takes.
pub(crate) const MAX_PARAMS: usize = 24;

impl Kernel {
    /// Threads per block of the elementwise kernels.
    pub(crate) const THREADS: u32 = 256;

    /// The launch of a grid-stride kernel over `items` units of work (one per thread and
    /// step): one block per 256 units, at most one wave of the device.
    pub(crate) fn config(&self, items: usize) -> LaunchConfig {
        let blocks = items
            .div_ceil(Self::THREADS as usize)
            .clamp(1, self.wave.max(1) as usize) as u32;
        LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (Self::THREADS, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// Lets the kernel's blocks take all the dynamic shared memory the device gives a block
    /// (`device_most`, its opt-in limit) less the kernel's static shared memory, past the 48 KiB
    /// a kernel gets unasked. Always the same value, so that launches asking for different
    /// amounts never lower it under one another. The driver is asked on the first call only:
    /// two driver calls on every launch weigh on decode-sized work.
    pub(crate) fn allow_shared(&self, device_most: u32) -> Result<()> {
        use cudarc::driver::sys::CUfunction_attribute as Attr;
        if self.shared_raised.load(Ordering::Acquire) {
            return Ok(());
        }
        let failed = |e: result::DriverError| {
            Error::Device(format!(
                "cuda: {}: raising its shared memory: {e}",
                self.symbol.as_str()
            ))
        };
        let most = device_most.saturating_sub(self.static_shared()?);
        self.f
            .set_attribute(
                Attr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                most as i32,
            )
            .map_err(failed)?;
        // Racing first calls set the same value, so neither's store can undo the other's.
        self.shared_raised.store(true, Ordering::Release);
        Ok(())
    }

    /// The kernel's static shared memory in bytes, asked of the driver on the first call only.
    pub(crate) fn static_shared(&self) -> Result<u32> {
        use cudarc::driver::sys::CUfunction_attribute as Attr;
        if let Some(&bytes) = self.static_bytes.get() {
            return Ok(bytes);
        }
        let bytes = self
            .f
            .get_attribute(Attr::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
            .map_err(|e| {
                Error::Device(format!(
                    "cuda: {}: its static shared memory: {e}",
                    self.symbol.as_str()
                ))
            })?;
        Ok(*self.static_bytes.get_or_init(|| bytes.max(0) as u32))
    }

    /// How many blocks of `threads` threads and `shared` bytes of dynamic shared memory a
    /// multiprocessor runs at once (at least 1).
    pub(crate) fn resident(&self, threads: usize, shared: usize) -> Result<usize> {
        let n = self
            .f
            .occupancy_max_active_blocks_per_multiprocessor(threads as u32, shared, None)
            .map_err(|e| {
                Error::Device(format!(
                    "cuda: {}: reading its occupancy: {e}",
                    self.symbol.as_str()
                ))
            })?;
        Ok((n as usize).max(1))
    }

    /// Queues the kernel on `stream` over the grid `cfg`, with `params` as its parameters.
    ///
    /// # Safety
    /// `params` are the kernel's parameters in order, each of the type the kernel declares
    /// for it; every device address among them points into memory that stays allocated
    /// until `stream` has passed this work; and the kernel, run over `cfg`, reads and
    /// writes only inside that memory.
    pub(crate) unsafe fn launch(
        &self,
        stream: &CudaStream,
        cfg: LaunchConfig,
        params: &[&dyn DeviceRepr],
    ) -> Result<()> {
        // SAFETY: the caller's guarantees, passed on.
        unsafe { self.queue(stream, cfg, params, false) }
    }

    /// Queues the kernel as [`Kernel::launch`] does, but as a programmatic dependent launch
    /// (Hopper's): its blocks may start while the kernel before it on `stream` still runs,
    /// so its launch hides behind that kernel's last blocks. The kernel must wait for the
    /// one before (`griddepcontrol.wait`, which returns once that grid has finished and its
    /// writes are visible) before it touches anything the one before writes or reads.
    /// Before Hopper, or with `NUVEC_PDL=0`, it is an ordinary launch. Its one user (the
    /// decoding attention's merge) launches outside graph captures: a kernel recorded into a
    /// graph this way has not been tried on the device.
    ///
    /// # Safety
    /// As for [`Kernel::launch`], and the kernel waits as said above.
    pub(crate) unsafe fn launch_dependent(
        &self,
        stream: &CudaStream,
        cfg: LaunchConfig,
        params: &[&dyn DeviceRepr],
        arch: Arch,
    ) -> Result<()> {
        let early = arch.major >= 9 && programmatic_launches();
        // SAFETY: the caller's guarantees, passed on.
        unsafe { self.queue(stream, cfg, params, early) }
    }

    /// The launch itself, with programmatic stream serialization when `early`.
    ///
    /// # Safety
    /// As for [`Kernel::launch_dependent`].
    unsafe fn queue(
        &self,
        stream: &CudaStream,
        cfg: LaunchConfig,
        params: &[&dyn DeviceRepr],
        early: bool,
    ) -> Result<()> {
        if params.len() > MAX_PARAMS {
            return Err(Error::Device(format!(
                "cuda: {} takes {} parameters, more than {MAX_PARAMS}",
                self.symbol.as_str(),
                params.len()
            )));
        }
        let mut raw = [std::ptr::null_mut::<c_void>(); MAX_PARAMS];
        for (slot, p) in raw.iter_mut().zip(params) {
            // The driver reads each parameter's bytes through its address (the values
            // outlive the call, which copies them).
            *slot = (*p as *const dyn DeviceRepr).cast::<c_void>().cast_mut();
        }
        let failed = |e: result::DriverError| {
            Error::Device(format!("cuda: launching {}: {e}", self.symbol.as_str()))
        };
        stream.context().bind_to_thread().map_err(failed)?;
        if !early {
            // SAFETY: the caller guarantees the parameters' types and the memory they
            // address; `raw` holds one address per parameter, each of a live value.
            return unsafe {
                result::launch_kernel(
                    self.f.cu_function(),
                    cfg.grid_dim,
                    cfg.block_dim,
                    cfg.shared_mem_bytes,
                    stream.cu_stream(),
                    &mut raw[..params.len()],
                )
            }
            .map_err(failed);
        }
        let mut attr = sys::CUlaunchAttribute {
            id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
            pad: [0; 4],
            value: sys::CUlaunchAttributeValue {
                programmaticStreamSerializationAllowed: 1,
            },
        };
        let config = sys::CUlaunchConfig {
            gridDimX: cfg.grid_dim.0,
            gridDimY: cfg.grid_dim.1,
            gridDimZ: cfg.grid_dim.2,
            blockDimX: cfg.block_dim.0,
            blockDimY: cfg.block_dim.1,
            blockDimZ: cfg.block_dim.2,
            sharedMemBytes: cfg.shared_mem_bytes,
            hStream: stream.cu_stream(),
            attrs: &mut attr,
            numAttrs: 1,
        };
        // SAFETY: as above; `config` and the one attribute it points to live through the
        // call, which copies them.
        unsafe {
            sys::cuLaunchKernelEx(
                &config,
                self.f.cu_function(),
                raw.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result()
        .map_err(failed)
    }
}

/// Whether dependent kernels launch programmatically ([`Kernel::launch_dependent`]): on
/// by default, `NUVEC_PDL=0` turns it off.
fn programmatic_launches() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("NUVEC_PDL").map_or(true, |v| v.trim() != "0"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_hold_what_was_written_and_refuse_longer_names() {
        let s = symbol!("unary_{}_{}_c", "exp", "f32").unwrap();
        assert_eq!(s.as_str(), "unary_exp_f32_c");
        assert_eq!(s, symbol!("unary_exp_f32_c").unwrap());
        assert_ne!(s, symbol!("unary_exp_f32_s").unwrap());
        assert!(symbol!("{}", "x".repeat(SYMBOL_BYTES + 1)).is_err());
    }

    #[test]
    fn architectures_name_their_targets() {
        let hopper = Arch::of(9, 0);
        assert_eq!(hopper.name(), "sm_90");
        assert_eq!(hopper.specific().unwrap().name(), "sm_90a");
        assert!(Arch::of(8, 0).specific().is_err());
        let m = ModuleKey {
            family: "attention",
            dtype: Some(DType::BF16),
            arg: 128,
            spec: 0,
            arch: hopper,
        };
        assert_eq!(m.name(), "attention_bf16_d128");
        let custom = ModuleKey {
            family: "custom",
            dtype: None,
            arg: 0,
            spec: 0xabc,
            arch: hopper,
        };
        assert_eq!(custom.name(), "custom_0000000000000abc");
    }
}
