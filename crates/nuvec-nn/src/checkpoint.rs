//! Files of named arrays for [`crate::Module::save_weights`], [`crate::Module::load_weights_file`]
//! and the optimizers' [`crate::optim::Optimizer::save_state`] and
//! [`crate::optim::Optimizer::load_state`]: safetensors or NumPy's `.npz`, chosen by the
//! file's extension as MLX's `save_weights` chooses, through [`nuvec_core::io`].

use std::collections::HashMap;
use std::path::Path;

use nuvec_core::{Array, io};

use crate::error::{Result, invalid};

/// The formats a checkpoint can be written in.
enum Format {
    Safetensors,
    Npz,
}

/// The format named by `path`'s extension (`.safetensors` or `.npz`), or an error naming `op`.
fn format_of(op: &str, path: &Path) -> Result<Format> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("safetensors") => Ok(Format::Safetensors),
        Some("npz") => Ok(Format::Npz),
        _ => Err(invalid(
            op,
            format!(
                "{}: the extension must be .safetensors or .npz",
                path.display()
            ),
        )),
    }
}

/// Writes `arrays` to `path` (safetensors files get MLX's metadata `format: mlx`).
pub(crate) fn save(op: &str, path: &Path, arrays: &HashMap<String, Array>) -> Result<()> {
    match format_of(op, path)? {
        Format::Safetensors => {
            let metadata = HashMap::from([("format".to_string(), "mlx".to_string())]);
            io::save_safetensors(path, arrays, Some(&metadata))?;
        }
        Format::Npz => io::save_npz(path, arrays)?,
    }
    Ok(())
}

/// Every array of the file at `path`.
pub(crate) fn load(op: &str, path: &Path) -> Result<HashMap<String, Array>> {
    Ok(match format_of(op, path)? {
        Format::Safetensors => io::load_safetensors(path)?,
        Format::Npz => io::load_npz(path)?,
    })
}
