//! safetensors files, through the `safetensors` crate (which parses and validates the header)
//! on a memory map of the file.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use safetensors::tensor::{Dtype, SafeTensors, View};

use super::bytes::{byte_count, decode, host_elements, to_le_bytes};
use super::{Ctx, map_file};
use crate::{Array, DType, Error, Result};

/// nuvec's element type for a safetensors dtype, if it has one.
fn from_st(dtype: Dtype) -> Option<DType> {
    Some(match dtype {
        Dtype::BOOL => DType::Bool,
        Dtype::U8 => DType::U8,
        Dtype::U16 => DType::U16,
        Dtype::U32 => DType::U32,
        Dtype::U64 => DType::U64,
        Dtype::I8 => DType::I8,
        Dtype::I16 => DType::I16,
        Dtype::I32 => DType::I32,
        Dtype::I64 => DType::I64,
        Dtype::F16 => DType::F16,
        Dtype::BF16 => DType::BF16,
        Dtype::F32 => DType::F32,
        Dtype::F64 => DType::F64,
        Dtype::C64 => DType::C64,
        _ => return None,
    })
}

/// The safetensors dtype of a nuvec element type (every one has one).
fn to_st(dtype: DType) -> Dtype {
    match dtype {
        DType::Bool => Dtype::BOOL,
        DType::U8 => Dtype::U8,
        DType::U16 => Dtype::U16,
        DType::U32 => Dtype::U32,
        DType::U64 => Dtype::U64,
        DType::I8 => Dtype::I8,
        DType::I16 => Dtype::I16,
        DType::I32 => Dtype::I32,
        DType::I64 => Dtype::I64,
        DType::F16 => Dtype::F16,
        DType::BF16 => Dtype::BF16,
        DType::F32 => Dtype::F32,
        DType::F64 => Dtype::F64,
        DType::C64 => Dtype::C64,
    }
}

/// The length of the header's size field.
const SIZE_LEN: usize = 8;

/// Parses a whole safetensors file: its tensors (copied out) and its metadata.
fn parse(ctx: Ctx<'_>, bytes: &[u8]) -> Result<(HashMap<String, Array>, HashMap<String, String>)> {
    // The crate checks the header's length against the file, the offsets (contiguous, in
    // order, ending at the file's end) and each range against its shape and dtype.
    let (n, meta) =
        SafeTensors::read_metadata(bytes).map_err(|e| ctx.format(format!("header: {e}")))?;
    let data = SIZE_LEN
        .checked_add(n)
        .and_then(|start| bytes.get(start..))
        .ok_or_else(|| ctx.format("header: its length runs past the end of the file"))?;
    let infos = meta.tensors();
    let mut arrays = HashMap::with_capacity(infos.len());
    for (name, info) in infos {
        let dtype = from_st(info.dtype).ok_or_else(|| {
            ctx.format(format!(
                "tensor '{name}': dtype {} is not supported by nuvec",
                info.dtype
            ))
        })?;
        let (start, end) = info.data_offsets;
        let shape = &info.shape;
        // Checked again, cheaply, so that no mismatch can reach the array constructor.
        let bytes = data
            .get(start..end)
            .filter(|b| byte_count(shape, dtype) == Some(b.len()))
            .ok_or_else(|| {
                ctx.format(format!(
                    "tensor '{name}': offsets {start}..{end} do not hold shape {shape:?} of {dtype}"
                ))
            })?;
        let array = Array::from_buffer(decode(dtype, bytes, true), shape)?;
        arrays.insert(name, array);
    }
    let metadata = meta.metadata().clone().unwrap_or_default();
    Ok((arrays, metadata))
}

/// Loads every tensor of a safetensors file (MLX's `load_safetensors`, without its metadata).
///
/// The file is memory-mapped and each tensor copied into an array that owns its elements. All
/// of nuvec's element types load (`BOOL`, `U8`..`U64`, `I8`..`I64`, `F16`, `BF16`, `F32`,
/// `F64`, `C64`); others (`F8_E4M3`, `F4`, ...) give an [`Error::Format`] naming the tensor and
/// its dtype, as does a header that does not parse or whose offsets, shapes and dtypes
/// contradict each other or the file's length.
pub fn load_safetensors(path: impl AsRef<Path>) -> Result<HashMap<String, Array>> {
    let path = path.as_ref();
    let ctx = Ctx::new("load_safetensors", path);
    let map = map_file(ctx)?;
    Ok(parse(ctx, &map)?.0)
}

/// Loads every tensor of a safetensors file and its metadata (MLX's `load_safetensors` with
/// `return_metadata=True`): the header's `__metadata__` string map, empty if it has none.
pub fn load_safetensors_with_metadata(
    path: impl AsRef<Path>,
) -> Result<(HashMap<String, Array>, HashMap<String, String>)> {
    let path = path.as_ref();
    let ctx = Ctx::new("load_safetensors", path);
    let map = map_file(ctx)?;
    parse(ctx, &map)
}

/// The metadata of a safetensors file (its header's `__metadata__`, empty if it has none),
/// without copying any tensor. The whole header is still validated.
pub fn load_safetensors_metadata(path: impl AsRef<Path>) -> Result<HashMap<String, String>> {
    let path = path.as_ref();
    let ctx = Ctx::new("load_safetensors_metadata", path);
    let map = map_file(ctx)?;
    let (_, meta) =
        SafeTensors::read_metadata(&map).map_err(|e| ctx.format(format!("header: {e}")))?;
    Ok(meta.metadata().clone().unwrap_or_default())
}

/// One array as the `safetensors` crate's [`View`]: its bytes are made when the crate writes
/// it, one tensor at a time, so saving needs little memory beyond the arrays'.
struct Tensor<'a> {
    array: &'a Array,
    dtype: Dtype,
    /// The first error met making a tensor's bytes (the trait cannot return one).
    failed: &'a Mutex<Option<Error>>,
}

impl View for Tensor<'_> {
    fn dtype(&self) -> Dtype {
        self.dtype
    }

    fn shape(&self) -> &[usize] {
        self.array.shape()
    }

    fn data(&self) -> Cow<'_, [u8]> {
        match host_elements(self.array) {
            Ok(host) => Cow::Owned(to_le_bytes(&host)),
            Err(e) => {
                let mut slot = self.failed.lock().unwrap_or_else(|p| p.into_inner());
                slot.get_or_insert(e);
                Cow::Owned(vec![0; self.data_len()])
            }
        }
    }

    fn data_len(&self) -> usize {
        self.array.nbytes()
    }
}

/// Saves arrays to a safetensors file, with optional `__metadata__` (MLX's
/// `save_safetensors`).
///
/// Every element type is written under its safetensors name (`complex64` as `C64`). The
/// arrays are evaluated first; their elements go out in row-major order. The file is written
/// beside `path` and then renamed over it, so a file that is mapped elsewhere is never
/// truncated under its reader.
pub fn save_safetensors(
    path: impl AsRef<Path>,
    arrays: &HashMap<String, Array>,
    metadata: Option<&HashMap<String, String>>,
) -> Result<()> {
    let path = path.as_ref();
    let ctx = Ctx::new("save_safetensors", path);
    let list: Vec<&Array> = arrays.values().collect();
    if let Some(err) = list.iter().find_map(|a| a.error()) {
        return Err(err);
    }
    crate::eval(&list.iter().map(|a| (*a).clone()).collect::<Vec<_>>())?;
    let failed = Mutex::new(None);
    let tensors = arrays.iter().map(|(name, array)| {
        let view = Tensor {
            array,
            dtype: to_st(array.dtype()),
            failed: &failed,
        };
        (name.as_str(), view)
    });
    // The crate writes a temporary file in the target's folder: name that folder even for a
    // bare file name (whose parent is the empty path).
    let target = match path.parent() {
        Some(p) if p.as_os_str().is_empty() => Path::new(".").join(path),
        _ => path.to_path_buf(),
    };
    let written = safetensors::tensor::serialize_to_file(tensors, metadata.cloned(), &target);
    if let Some(err) = failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        let _ = std::fs::remove_file(&target);
        return Err(err);
    }
    written.map_err(|e| match e {
        safetensors::SafeTensorError::IoError(io) => ctx.io(io),
        other => ctx.format(other),
    })
}
