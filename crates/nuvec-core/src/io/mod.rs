//! Loading and saving arrays: safetensors, NumPy's `.npy` and `.npz`, and GGUF, with MLX's
//! function names.
//!
//! | format | load | save |
//! | --- | --- | --- |
//! | safetensors | [`load_safetensors`], [`load_safetensors_with_metadata`], [`load_safetensors_metadata`] | [`save_safetensors`] |
//! | `.npy` | [`load_npy`] | [`save_npy`] |
//! | `.npz` | [`load_npz`] | [`save_npz`] (stored), [`save_npz_compressed`] (deflated) |
//! | GGUF | [`load_gguf`] | |
//!
//! Loading copies the file's elements into arrays that own them (already evaluated, on the
//! default stream), so an array never refers to the file after the call returns. Saving
//! evaluates the arrays first and writes their elements in row-major order, little endian.
//!
//! A file that is not valid (truncated, corrupt, with offsets or sizes that contradict each
//! other) or that holds an element type nuvec lacks gives an [`Error::Format`] naming the
//! function, the file and the part of it at fault; the operating system's errors give an
//! [`Error::Io`]. No input makes these functions panic, read out of bounds, or allocate more
//! than the file's size warrants.
//!
//! ```
//! use std::collections::HashMap;
//! use nuvec_core::{Array, io};
//!
//! # fn main() -> nuvec_core::Result<()> {
//! let dir = std::env::temp_dir().join(format!("nuvec-io-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).map_err(|e| nuvec_core::Error::Io(e.to_string()))?;
//! let path = dir.join("model.safetensors");
//!
//! let mut tensors = HashMap::new();
//! tensors.insert("w".to_string(), Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?);
//! tensors.insert("step".to_string(), Array::scalar(7i64));
//! let metadata = HashMap::from([("format".to_string(), "mlx".to_string())]);
//! io::save_safetensors(&path, &tensors, Some(&metadata))?;
//!
//! let (loaded, meta) = io::load_safetensors_with_metadata(&path)?;
//! assert_eq!(loaded["w"].shape(), [2, 2]);
//! assert_eq!(loaded["w"].to_vec::<f32>()?, [1.0, 2.0, 3.0, 4.0]);
//! assert_eq!(loaded["step"].item::<i64>()?, 7);
//! assert_eq!(meta["format"], "mlx");
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(())
//! # }
//! ```
//!
//! [`Error::Format`]: crate::Error::Format
//! [`Error::Io`]: crate::Error::Io

mod bytes;
mod gguf;
mod gguf_quants;
mod npy;
mod npz;
mod safetensors;

use std::fmt::Display;
use std::fs::File;
use std::path::Path;

pub use gguf::{GgufArray, GgufMetadata, GgufValue, load_gguf};
pub use npy::{load_npy, save_npy};
pub use npz::{load_npz, save_npz, save_npz_compressed};
pub use safetensors::{
    load_safetensors, load_safetensors_metadata, load_safetensors_with_metadata, save_safetensors,
};

use crate::Error;

/// The function and file an error is about: every error of this module names both.
#[derive(Clone, Copy)]
pub(crate) struct Ctx<'a> {
    op: &'static str,
    path: &'a Path,
}

impl<'a> Ctx<'a> {
    /// The context of `op` working on `path`.
    pub(crate) fn new(op: &'static str, path: &'a Path) -> Ctx<'a> {
        Ctx { op, path }
    }

    /// An [`Error::Format`]: the file is not valid, `what` says where and why.
    pub(crate) fn format(&self, what: impl Display) -> Error {
        Error::Format {
            op: self.op,
            path: self.path.display().to_string(),
            what: what.to_string(),
        }
    }

    /// An [`Error::Io`] from the operating system's error.
    pub(crate) fn io(&self, err: impl Display) -> Error {
        Error::Io(format!("{}: {}: {err}", self.op, self.path.display()))
    }
}

/// A read-only memory map of a whole file.
pub(crate) fn map_file(ctx: Ctx<'_>) -> crate::Result<memmap2::Mmap> {
    let file = File::open(ctx.path).map_err(|e| ctx.io(e))?;
    // SAFETY: the map is read-only and private to this call: every loader copies what it needs
    // out of it into owned arrays and drops it before returning, so no array or reference
    // outlives it. Every offset into it is checked against its length, which is fixed when it
    // is made, so no read leaves it. What the map cannot guard against is another process
    // changing the file while it is mapped: its bytes may then change under the parser (the
    // result is garbage values or a format error, never an out-of-bounds read, because lengths
    // are checked on the map, not on the bytes read from it), and a file truncated meanwhile
    // can make the OS raise SIGBUS, as it does for any program reading a mapped file.
    unsafe { memmap2::Mmap::map(&file) }.map_err(|e| ctx.io(e))
}
