//! Kernels compiled at run time by NVRTC for the device's architecture.
//!
//! A *module* is one kernel source (from `kernels/`) with the instantiations one family needs
//! for one element type, e.g. every unary function over `float`, named by a
//! [`ModuleKey`] (which includes the target architecture, `sm_90a` where a kernel needs
//! it). It is compiled once per process and device (kept in memory) and once per machine
//! (its PTX kept on disk, under `NUVEC_KERNEL_CACHE`, else the user's cache directory),
//! keyed by a hash of the source, the architecture and the options. CUDA's headers come from `$CUDA_HOME/include` (else
//! `/usr/local/cuda/include`).
//!
//! For tuning, `NUVEC_KERNEL_DEFINES` (`NAME=VALUE` words separated by spaces) puts a
//! `#define` before every source: the kernels' tunable constants (`#ifndef` defaults, such as
//! `NV_RMS_MINB` in `fast/norms.cu`) can then be tried without rebuilding.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::{CompileError, CompileOptions, Ptx};

use super::launch::ModuleKey;
use crate::{Error, Result};

/// The compiled modules of one device, by [`ModuleKey`].
pub(crate) struct Jit {
    ctx: Arc<CudaContext>,
    modules: Mutex<HashMap<ModuleKey, Arc<CudaModule>>>,
}

impl Jit {
    pub(crate) fn new(ctx: Arc<CudaContext>) -> Jit {
        Jit {
            ctx,
            modules: Mutex::new(HashMap::new()),
        }
    }

    /// Kernel `symbol` of module `key`, whose source `source()` gives (called only when the
    /// module is not compiled yet).
    pub(crate) fn function(
        &self,
        key: &ModuleKey,
        symbol: &str,
        source: impl FnOnce() -> String,
    ) -> Result<CudaFunction> {
        let module = self.module(key, source)?;
        module
            .load_function(symbol)
            .map_err(|e| Error::Device(format!("cuda: kernel {symbol} of {}: {e}", key.name())))
    }

    fn module(&self, key: &ModuleKey, source: impl FnOnce() -> String) -> Result<Arc<CudaModule>> {
        if let Some(m) = lock(&self.modules).get(key) {
            return Ok(Arc::clone(m));
        }
        let name = key.name();
        let ptx = compile_cached(&name, &(defines() + &source()), &key.arch.name())?;
        let module = self
            .ctx
            .load_module(Ptx::from_src(ptx))
            .map_err(|e| Error::Device(format!("cuda: loading module {name}: {e}")))?;
        lock(&self.modules).insert(*key, Arc::clone(&module));
        Ok(module)
    }
}

/// The `#define` lines `NUVEC_KERNEL_DEFINES` asks for (see the module's documentation).
fn defines() -> String {
    static DEFINES: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DEFINES
        .get_or_init(|| {
            std::env::var("NUVEC_KERNEL_DEFINES")
                .unwrap_or_default()
                .split_whitespace()
                .map(|d| format!("#define {}\n", d.replacen('=', " ", 1)))
                .collect()
        })
        .clone()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where CUDA's headers are.
fn cuda_include() -> String {
    let home = std::env::var("CUDA_HOME")
        .or_else(|_| std::env::var("CUDA_PATH"))
        .unwrap_or_else(|_| "/usr/local/cuda".into());
    format!("{home}/include")
}

/// The on-disk cache directory, if one can be named.
fn cache_dir() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("NUVEC_KERNEL_CACHE") {
        return Some(PathBuf::from(dir));
    }
    let base = std::env::var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|_| std::env::var("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .ok()?;
    Some(base.join("nuvec").join("kernels"))
}

/// A 64-bit FNV-1a hash: stable across builds and platforms, unlike the standard hasher,
/// so cache file names stay valid.
pub(crate) fn fnv1a(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in part.as_bytes().iter().chain(&[0xff]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The NVRTC options every module is compiled with.
fn options(arch: &str) -> Vec<String> {
    vec![
        format!("--gpu-architecture={arch}"),
        "--std=c++17".into(),
        "-default-device".into(),
    ]
}

/// PTX for `source`, from the disk cache or compiled (and then stored there).
fn compile_cached(key: &str, source: &str, arch: &str) -> Result<String> {
    let opts = options(arch);
    let hash = fnv1a(&[source, arch, &opts.join(" "), env!("CARGO_PKG_VERSION")]);
    let file = cache_dir().map(|d| d.join(format!("{key}-{arch}-{hash:016x}.ptx")));
    if let Some(ptx) = file.as_ref().and_then(|f| std::fs::read_to_string(f).ok()) {
        return Ok(ptx);
    }
    let ptx = compile(key, source, arch)?;
    if let Some(f) = file {
        // A cache that cannot be written only costs a compile next time.
        if let Some(dir) = f.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let tmp = f.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::write(&tmp, &ptx).is_ok() {
            let _ = std::fs::rename(&tmp, &f);
        }
    }
    Ok(ptx)
}

/// Compiles `source` to PTX for `arch` with NVRTC.
pub(crate) fn compile(key: &str, source: &str, arch: &str) -> Result<String> {
    compile_with(key, source, arch, options(arch))
}

/// [`compile`] without NVVM's optimisations (`--device-debug`), for the tests that only check
/// that every module compiles and holds its kernels: the front end's checks are the same and
/// the largest modules compile in a ninth of the time.
#[cfg(test)]
pub(crate) fn compile_unoptimized(key: &str, source: &str, arch: &str) -> Result<String> {
    let mut opts = options(arch);
    opts.push("--device-debug".into());
    compile_with(key, source, arch, opts)
}

fn compile_with(key: &str, source: &str, arch: &str, options: Vec<String>) -> Result<String> {
    // SAFETY: only tries to open the library; nothing is called through it.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(Error::Device(
            "cuda: NVRTC (libnvrtc) was not found: kernels cannot be compiled".into(),
        ));
    }
    let opts = CompileOptions {
        options,
        include_paths: vec![cuda_include()],
        name: Some(format!("{key}.cu")),
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(source, opts).map_err(|e| match e {
        CompileError::CompileError { log, .. } => Error::Compile {
            kernel: format!("{key} for {arch}"),
            log: log.to_string_lossy().trim_end().to_string(),
        },
        e => Error::Device(format!("cuda: compiling {key} for {arch}: {e}")),
    })?;
    Ok(ptx.to_src())
}

#[cfg(test)]
mod tests {
    use super::fnv1a;

    #[test]
    fn cache_keys_separate_their_parts() {
        assert_ne!(fnv1a(&["ab", "c"]), fnv1a(&["a", "bc"]));
        assert_eq!(fnv1a(&["x"]), fnv1a(&["x"]));
    }
}
