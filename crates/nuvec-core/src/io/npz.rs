//! NumPy's `.npz` format: a zip archive of `.npy` files, one per array, named after it.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use zip::CompressionMethod;
use zip::write::SimpleFileOptions;

use super::Ctx;
use super::npy::{parse_npy, write_npy};
use crate::{Array, Result};

/// Loads the arrays of a NumPy `.npz` file (what `np.savez` and `np.savez_compressed`
/// write), keyed by member name less its `.npy` suffix.
///
/// Members may be stored or deflated (zip64 archives load too). Members whose names do not
/// end in `.npy` are not arrays and are skipped. Each member is read as [`load_npy`] reads a
/// file, and its errors name the member; an archive that does not parse, a member whose
/// checksum does not match, or two members of one name give an [`Error::Format`].
///
/// [`load_npy`]: super::load_npy
/// [`Error::Format`]: crate::Error::Format
pub fn load_npz(path: impl AsRef<Path>) -> Result<HashMap<String, Array>> {
    let path = path.as_ref();
    let ctx = Ctx::new("load_npz", path);
    let file = File::open(path).map_err(|e| ctx.io(e))?;
    let mut archive = zip::ZipArchive::new(BufReader::new(file))
        .map_err(|e| ctx.format(format!("zip archive: {e}")))?;
    let mut arrays = HashMap::new();
    for i in 0..archive.len() {
        let mut member = archive
            .by_index(i)
            .map_err(|e| ctx.format(format!("zip member #{i}: {e}")))?;
        if member.is_dir() {
            continue;
        }
        let name = member
            .name()
            .map_err(|e| ctx.format(format!("zip member #{i}: name: {e}")))?
            .into_owned();
        let Some(key) = name.strip_suffix(".npy").map(str::to_owned) else {
            continue;
        };
        // Read what the member holds, not what its entry claims: the buffer grows with the
        // bytes actually read, and the zip reader checks them against the entry's CRC.
        let mut bytes = Vec::new();
        member
            .read_to_end(&mut bytes)
            .map_err(|e| ctx.format(format!("zip member '{name}': {e}")))?;
        let array = parse_npy(Ctx::new("load_npz", &Path::new(path).join(&name)), &bytes)?;
        if arrays.insert(key, array).is_some() {
            return Err(ctx.format(format!("zip member '{name}' appears twice")));
        }
    }
    Ok(arrays)
}

/// Writes the arrays as an `.npz` archive with members compressed by `method`.
fn save(
    ctx: Ctx<'_>,
    path: &Path,
    arrays: &HashMap<String, Array>,
    method: CompressionMethod,
) -> Result<()> {
    let mut list: Vec<(&String, &Array)> = arrays.iter().collect();
    list.sort_by(|a, b| a.0.cmp(b.0));
    if let Some(err) = list.iter().find_map(|(_, a)| a.error()) {
        return Err(err);
    }
    crate::eval(&list.iter().map(|(_, a)| (*a).clone()).collect::<Vec<_>>())?;
    let file = File::create(path).map_err(|e| ctx.io(e))?;
    let mut zip = zip::ZipWriter::new(BufWriter::new(file));
    for (name, array) in list {
        // A member past 4 GiB needs zip64 records.
        let large = array.nbytes() as u64 >= u64::from(u32::MAX) - (1 << 20);
        let options = SimpleFileOptions::default()
            .compression_method(method)
            .large_file(large);
        zip.start_file(format!("{name}.npy"), options)
            .map_err(|e| ctx.io(format!("zip member '{name}.npy': {e}")))?;
        write_npy(ctx, &mut zip, array)?;
    }
    let mut inner = zip
        .finish()
        .map_err(|e| ctx.io(format!("zip archive: {e}")))?;
    inner.flush().map_err(|e| ctx.io(e))
}

/// Saves arrays as a NumPy `.npz` file at exactly `path`, members stored without compression
/// (as `np.savez` and MLX's `savez` do), each a `.npy` file as [`save_npy`] writes it, named
/// `{key}.npy`, in key order.
///
/// [`save_npy`]: super::save_npy
pub fn save_npz(path: impl AsRef<Path>, arrays: &HashMap<String, Array>) -> Result<()> {
    let path = path.as_ref();
    save(
        Ctx::new("save_npz", path),
        path,
        arrays,
        CompressionMethod::Stored,
    )
}

/// Saves arrays as a NumPy `.npz` file whose members are deflated (as
/// `np.savez_compressed` and MLX's `savez_compressed` do); otherwise as [`save_npz`].
pub fn save_npz_compressed(path: impl AsRef<Path>, arrays: &HashMap<String, Array>) -> Result<()> {
    let path = path.as_ref();
    save(
        Ctx::new("save_npz_compressed", path),
        path,
        arrays,
        CompressionMethod::Deflated,
    )
}
