//! GGUF files (llama.cpp's format): a header, typed metadata, a table of tensors and their
//! data, little endian. Quantized tensors are converted to nuvec's affine layout in
//! `gguf_quants`.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Display;
use std::path::Path;

use super::bytes::{decode, element_count};
use super::gguf_quants::{Quant, convert};
use super::{Ctx, map_file};
use crate::{Array, DType, Result};

/// The file's first four bytes.
const MAGIC: &[u8; 4] = b"GGUF";
/// The data section's alignment when the metadata gives none.
const DEFAULT_ALIGNMENT: u64 = 32;
/// The most dimensions a tensor may have (ggml has 4; a few more are let through).
const MAX_DIMS: u32 = 8;
/// The deepest nesting of arrays in metadata that is read.
const MAX_DEPTH: usize = 8;

/// One metadata value of a GGUF file, of any of the format's value types.
#[derive(Debug, Clone, PartialEq)]
pub enum GgufValue {
    /// `UINT8`
    U8(u8),
    /// `INT8`
    I8(i8),
    /// `UINT16`
    U16(u16),
    /// `INT16`
    I16(i16),
    /// `UINT32`
    U32(u32),
    /// `INT32`
    I32(i32),
    /// `UINT64`
    U64(u64),
    /// `INT64`
    I64(i64),
    /// `FLOAT32`
    F32(f32),
    /// `FLOAT64`
    F64(f64),
    /// `BOOL`
    Bool(bool),
    /// `STRING` (UTF-8)
    String(String),
    /// `ARRAY`: values of one type, possibly arrays themselves.
    Array(GgufArray),
}

/// A GGUF metadata array: one vector per element type, so that large arrays (a tokenizer's
/// vocabulary and scores) stay compact.
#[derive(Debug, Clone, PartialEq)]
pub enum GgufArray {
    /// `UINT8` elements.
    U8(Vec<u8>),
    /// `INT8` elements.
    I8(Vec<i8>),
    /// `UINT16` elements.
    U16(Vec<u16>),
    /// `INT16` elements.
    I16(Vec<i16>),
    /// `UINT32` elements.
    U32(Vec<u32>),
    /// `INT32` elements.
    I32(Vec<i32>),
    /// `UINT64` elements.
    U64(Vec<u64>),
    /// `INT64` elements.
    I64(Vec<i64>),
    /// `FLOAT32` elements.
    F32(Vec<f32>),
    /// `FLOAT64` elements.
    F64(Vec<f64>),
    /// `BOOL` elements.
    Bool(Vec<bool>),
    /// `STRING` elements.
    String(Vec<String>),
    /// `ARRAY` elements (arrays of arrays).
    Array(Vec<GgufArray>),
}

impl GgufArray {
    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            GgufArray::U8(v) => v.len(),
            GgufArray::I8(v) => v.len(),
            GgufArray::U16(v) => v.len(),
            GgufArray::I16(v) => v.len(),
            GgufArray::U32(v) => v.len(),
            GgufArray::I32(v) => v.len(),
            GgufArray::U64(v) => v.len(),
            GgufArray::I64(v) => v.len(),
            GgufArray::F32(v) => v.len(),
            GgufArray::F64(v) => v.len(),
            GgufArray::Bool(v) => v.len(),
            GgufArray::String(v) => v.len(),
            GgufArray::Array(v) => v.len(),
        }
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl GgufValue {
    /// The value as an `i128`, if it is an integer of any width.
    fn as_int(&self) -> Option<i128> {
        Some(match *self {
            GgufValue::U8(v) => v.into(),
            GgufValue::I8(v) => v.into(),
            GgufValue::U16(v) => v.into(),
            GgufValue::I16(v) => v.into(),
            GgufValue::U32(v) => v.into(),
            GgufValue::I32(v) => v.into(),
            GgufValue::U64(v) => v.into(),
            GgufValue::I64(v) => v.into(),
            _ => return None,
        })
    }

    /// The value as a `u64`, if it is a non-negative integer of any width.
    pub fn as_u64(&self) -> Option<u64> {
        self.as_int().and_then(|v| u64::try_from(v).ok())
    }

    /// The value as an `i64`, if it is an integer of any width that fits.
    pub fn as_i64(&self) -> Option<i64> {
        self.as_int().and_then(|v| i64::try_from(v).ok())
    }

    /// The value as an `f64`, if it is a float or an integer.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            GgufValue::F32(v) => Some(v.into()),
            GgufValue::F64(v) => Some(v),
            _ => self.as_int().map(|v| v as f64),
        }
    }

    /// The value as a `bool`, if it is one.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            GgufValue::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The value as a string, if it is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            GgufValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value as an array, if it is one.
    pub fn as_array(&self) -> Option<&GgufArray> {
        match self {
            GgufValue::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// A GGUF file's metadata: its format version and every key-value pair of its header.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GgufMetadata {
    /// The format version (2 or 3).
    pub version: u32,
    /// The key-value pairs, by key.
    pub values: BTreeMap<String, GgufValue>,
}

impl GgufMetadata {
    /// The value of `key`, if the file has it.
    pub fn get(&self, key: &str) -> Option<&GgufValue> {
        self.values.get(key)
    }
}

/// A tensor's storage type: ggml's type codes that nuvec loads.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Storage {
    /// Elements of a nuvec type, stored as they are.
    Plain(DType),
    /// Blocks of 32 quantized values.
    Quant(Quant),
}

impl Storage {
    /// The storage of ggml type `code`, or its name (or number) for the error.
    fn of(code: u32) -> std::result::Result<Storage, String> {
        Ok(match code {
            0 => Storage::Plain(DType::F32),
            1 => Storage::Plain(DType::F16),
            2 => Storage::Quant(Quant::Q4_0),
            3 => Storage::Quant(Quant::Q4_1),
            8 => Storage::Quant(Quant::Q8_0),
            24 => Storage::Plain(DType::I8),
            25 => Storage::Plain(DType::I16),
            26 => Storage::Plain(DType::I32),
            27 => Storage::Plain(DType::I64),
            28 => Storage::Plain(DType::F64),
            30 => Storage::Plain(DType::BF16),
            other => return Err(ggml_type_name(other)),
        })
    }

    /// Bytes of a row of `n` values, if `n` is whole blocks and the size fits.
    fn row_bytes(self, n: usize) -> Option<usize> {
        match self {
            Storage::Plain(d) => n.checked_mul(d.size()),
            Storage::Quant(q) => {
                if !n.is_multiple_of(q.block_len()) {
                    return None;
                }
                (n / q.block_len()).checked_mul(q.block_bytes())
            }
        }
    }
}

/// The name of a ggml tensor type that nuvec does not load.
fn ggml_type_name(code: u32) -> String {
    let name = match code {
        6 => "Q5_0",
        7 => "Q5_1",
        9 => "Q8_1",
        10 => "Q2_K",
        11 => "Q3_K",
        12 => "Q4_K",
        13 => "Q5_K",
        14 => "Q6_K",
        15 => "Q8_K",
        16 => "IQ2_XXS",
        17 => "IQ2_XS",
        18 => "IQ3_XXS",
        19 => "IQ1_S",
        20 => "IQ4_NL",
        21 => "IQ3_S",
        22 => "IQ2_S",
        23 => "IQ4_XS",
        29 => "IQ1_M",
        34 => "TQ1_0",
        35 => "TQ2_0",
        39 => "MXFP4",
        _ => return format!("type {code} (unknown)"),
    };
    format!("type {name} ({code})")
}

/// A bounds-checked cursor over the file's bytes.
struct Reader<'a> {
    ctx: Ctx<'a>,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// The next `n` bytes; `part` names what is being read, for the error.
    fn take(&mut self, n: usize, part: &dyn Display) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(self.ctx.format(format!(
                "{part}: truncated: {n} bytes needed at offset {}, {} left",
                self.pos,
                self.remaining()
            )));
        };
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, part: &dyn Display) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, part)?);
        Ok(out)
    }

    fn u32(&mut self, part: &dyn Display) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(part)?))
    }

    fn u64(&mut self, part: &dyn Display) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(part)?))
    }

    /// A `u64` that must fit in memory (a count or a length).
    fn len(&mut self, part: &dyn Display) -> Result<usize> {
        let v = self.u64(part)?;
        usize::try_from(v).map_err(|_| self.ctx.format(format!("{part}: length {v} is too large")))
    }

    /// Checks that `count` items of at least `min` bytes each can be in the rest of the file,
    /// before anything is allocated for them.
    fn check_count(&self, count: usize, min: usize, part: &dyn Display) -> Result<()> {
        if count.checked_mul(min).is_none_or(|n| n > self.remaining()) {
            return Err(self.ctx.format(format!(
                "{part}: {count} items cannot fit in the {} bytes left",
                self.remaining()
            )));
        }
        Ok(())
    }

    fn string(&mut self, part: &dyn Display) -> Result<String> {
        let n = self.len(part)?;
        let raw = self.take(n, part)?;
        String::from_utf8(raw.to_vec())
            .map_err(|e| self.ctx.format(format!("{part}: string is not UTF-8: {e}")))
    }

    /// `count` fixed-size values read with `f` from `size` bytes each.
    fn vec<T>(
        &mut self,
        count: usize,
        size: usize,
        part: &dyn Display,
        f: impl Fn(&[u8]) -> T,
    ) -> Result<Vec<T>> {
        self.check_count(count, size, part)?;
        let raw = self.take(count * size, part)?;
        Ok(raw.chunks_exact(size).map(f).collect())
    }

    /// A value of type `code`.
    fn value(&mut self, code: u32, depth: usize, part: &dyn Display) -> Result<GgufValue> {
        Ok(match code {
            0 => GgufValue::U8(u8::from_le_bytes(self.array(part)?)),
            1 => GgufValue::I8(i8::from_le_bytes(self.array(part)?)),
            2 => GgufValue::U16(u16::from_le_bytes(self.array(part)?)),
            3 => GgufValue::I16(i16::from_le_bytes(self.array(part)?)),
            4 => GgufValue::U32(u32::from_le_bytes(self.array(part)?)),
            5 => GgufValue::I32(i32::from_le_bytes(self.array(part)?)),
            6 => GgufValue::F32(f32::from_le_bytes(self.array(part)?)),
            7 => GgufValue::Bool(self.array::<1>(part)?[0] != 0),
            8 => GgufValue::String(self.string(part)?),
            9 => GgufValue::Array(self.gguf_array(depth + 1, part)?),
            10 => GgufValue::U64(u64::from_le_bytes(self.array(part)?)),
            11 => GgufValue::I64(i64::from_le_bytes(self.array(part)?)),
            12 => GgufValue::F64(f64::from_le_bytes(self.array(part)?)),
            other => {
                return Err(self
                    .ctx
                    .format(format!("{part}: unknown value type {other}")));
            }
        })
    }

    /// An array value: its element type, its count and its elements.
    fn gguf_array(&mut self, depth: usize, part: &dyn Display) -> Result<GgufArray> {
        if depth > MAX_DEPTH {
            return Err(self.ctx.format(format!(
                "{part}: arrays nested deeper than {MAX_DEPTH} levels"
            )));
        }
        let code = self.u32(part)?;
        let n = self.len(part)?;
        macro_rules! fixed {
            ($variant:ident, $t:ty) => {
                GgufArray::$variant(self.vec(n, std::mem::size_of::<$t>(), part, |b| {
                    let mut raw = [0u8; std::mem::size_of::<$t>()];
                    raw.copy_from_slice(b);
                    <$t>::from_le_bytes(raw)
                })?)
            };
        }
        Ok(match code {
            0 => fixed!(U8, u8),
            1 => fixed!(I8, i8),
            2 => fixed!(U16, u16),
            3 => fixed!(I16, i16),
            4 => fixed!(U32, u32),
            5 => fixed!(I32, i32),
            6 => fixed!(F32, f32),
            7 => GgufArray::Bool(self.vec(n, 1, part, |b| b[0] != 0)?),
            8 => {
                // Every string is at least its 8-byte length.
                self.check_count(n, 8, part)?;
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    v.push(self.string(part)?);
                }
                GgufArray::String(v)
            }
            9 => {
                // Every array is at least its type and count.
                self.check_count(n, 12, part)?;
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    v.push(self.gguf_array(depth + 1, part)?);
                }
                GgufArray::Array(v)
            }
            10 => fixed!(U64, u64),
            11 => fixed!(I64, i64),
            12 => fixed!(F64, f64),
            other => {
                return Err(self
                    .ctx
                    .format(format!("{part}: unknown array element type {other}")));
            }
        })
    }
}

/// A tensor's entry in the table, checked against the file.
struct TensorInfo {
    name: String,
    /// Row-major (ggml's dimensions reversed).
    shape: Vec<usize>,
    storage: Storage,
    /// Where its bytes are in the file.
    range: std::ops::Range<usize>,
}

/// Reads the header, metadata and tensor table, checking every tensor's range.
fn parse_header<'a>(ctx: Ctx<'a>, bytes: &'a [u8]) -> Result<(GgufMetadata, Vec<TensorInfo>)> {
    let mut r = Reader { ctx, bytes, pos: 0 };
    let header: &dyn Display = &"header";
    if r.take(4, header)? != MAGIC {
        return Err(ctx.format("header: not a GGUF file (no GGUF magic)"));
    }
    let version = r.u32(header)?;
    match version {
        2 | 3 => {}
        1 => return Err(ctx.format("header: GGUF version 1 is not supported (2 or 3)")),
        v if v.swap_bytes() <= 3 => {
            return Err(ctx.format("header: big-endian GGUF files are not supported"));
        }
        v => return Err(ctx.format(format!("header: GGUF version {v} is not supported"))),
    }
    let n_tensors = r.len(&"header: tensor count")?;
    let n_kv = r.len(&"header: metadata count")?;
    // A key-value pair is at least a key length, a type and one byte; a tensor's entry at
    // least a name length, a dimension count, a type and an offset.
    r.check_count(n_kv, 13, &"header: metadata count")?;
    r.check_count(n_tensors, 24, &"header: tensor count")?;

    let mut values = BTreeMap::new();
    for i in 0..n_kv {
        let key = r.string(&format_args!("metadata #{i}: key"))?;
        let part = format!("metadata '{key}'");
        let code = r.u32(&part)?;
        let value = r.value(code, 0, &part)?;
        if values.insert(key, value).is_some() {
            return Err(ctx.format(format!("{part}: key appears twice")));
        }
    }
    let alignment = match values.get("general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some(v) => match v.as_u64() {
            Some(a) if a.is_power_of_two() && a <= 1 << 30 => a,
            _ => {
                return Err(ctx.format(format!(
                    "metadata 'general.alignment': {v:?} is not a power of two"
                )));
            }
        },
    };

    let mut raw = Vec::with_capacity(n_tensors);
    for i in 0..n_tensors {
        let name = r.string(&format_args!("tensor #{i}: name"))?;
        let part = format!("tensor '{name}'");
        let n_dims = r.u32(&part)?;
        if n_dims > MAX_DIMS {
            return Err(ctx.format(format!("{part}: {n_dims} dimensions (at most {MAX_DIMS})")));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            dims.push(r.len(&part)?);
        }
        let code = r.u32(&part)?;
        let offset = r.u64(&part)?;
        raw.push((name, dims, code, offset));
    }
    let data_start = (r.pos as u64).next_multiple_of(alignment);

    let mut infos = Vec::with_capacity(raw.len());
    let mut seen = std::collections::HashSet::new();
    for (name, dims, code, offset) in raw {
        let part = format!("tensor '{name}'");
        if !seen.insert(name.clone()) {
            return Err(ctx.format(format!("{part}: name appears twice")));
        }
        let storage =
            Storage::of(code).map_err(|t| ctx.format(format!("{part}: {t} is not supported")))?;
        let shape: Vec<usize> = dims.iter().rev().copied().collect();
        let row = dims.first().copied().unwrap_or(1);
        let rows = element_count(&dims[dims.len().min(1)..]);
        if let Storage::Quant(q) = storage
            && (dims.is_empty() || !row.is_multiple_of(q.block_len()))
        {
            return Err(ctx.format(format!(
                "{part}: shape {shape:?} of {q:?}: the last axis must be a multiple of {}",
                q.block_len()
            )));
        }
        let nbytes = rows
            .zip(storage.row_bytes(row))
            .and_then(|(rows, row)| rows.checked_mul(row))
            .filter(|_| element_count(&shape).is_some());
        let start = data_start.checked_add(offset);
        let range = nbytes
            .zip(start)
            .and_then(|(n, s)| {
                let s = usize::try_from(s).ok()?;
                Some(s..s.checked_add(n)?)
            })
            .filter(|range| range.end <= bytes.len());
        let Some(range) = range else {
            return Err(ctx.format(format!(
                "{part}: shape {shape:?} at data offset {offset} runs past the end of the file \
                 ({} bytes)",
                bytes.len()
            )));
        };
        infos.push(TensorInfo {
            name,
            shape,
            storage,
            range,
        });
    }
    check_overlaps(ctx, &infos)?;
    Ok((GgufMetadata { version, values }, infos))
}

/// Checks that no two tensors' bytes overlap.
fn check_overlaps(ctx: Ctx<'_>, infos: &[TensorInfo]) -> Result<()> {
    let mut spans: Vec<&TensorInfo> = infos.iter().filter(|t| !t.range.is_empty()).collect();
    spans.sort_by_key(|t| t.range.start);
    for pair in spans.windows(2) {
        if pair[1].range.start < pair[0].range.end {
            return Err(ctx.format(format!(
                "tensor '{}': its data overlaps tensor '{}'",
                pair[1].name, pair[0].name
            )));
        }
    }
    Ok(())
}

/// Inserts `array` under `name`, failing on a name already taken.
fn insert(
    ctx: Ctx<'_>,
    arrays: &mut HashMap<String, Array>,
    name: String,
    array: Array,
) -> Result<()> {
    if arrays.contains_key(&name) {
        return Err(ctx.format(format!(
            "tensor '{name}': the name is taken (by a quantized tensor's scales or biases?)"
        )));
    }
    arrays.insert(name, array);
    Ok(())
}

/// Parses a whole GGUF file.
fn parse(ctx: Ctx<'_>, bytes: &[u8]) -> Result<(HashMap<String, Array>, GgufMetadata)> {
    let (metadata, infos) = parse_header(ctx, bytes)?;
    let mut arrays = HashMap::with_capacity(infos.len());
    for info in infos {
        let data = &bytes[info.range.clone()];
        match info.storage {
            Storage::Plain(dtype) => {
                let array = Array::from_buffer(decode(dtype, data, true), &info.shape)?;
                insert(ctx, &mut arrays, info.name, array)?;
            }
            Storage::Quant(q) => {
                let (w, scales, biases) = convert(q, data, &info.shape)?;
                let prefix = info
                    .name
                    .strip_suffix(".weight")
                    .unwrap_or(&info.name)
                    .to_owned();
                insert(ctx, &mut arrays, format!("{prefix}.scales"), scales)?;
                insert(ctx, &mut arrays, format!("{prefix}.biases"), biases)?;
                insert(ctx, &mut arrays, info.name, w)?;
            }
        }
    }
    Ok((arrays, metadata))
}

/// Loads the tensors and metadata of a GGUF file (MLX's `load_gguf`).
///
/// GGUF versions 2 and 3, little endian. Tensors of type `F32`, `F16`, `BF16`, `F64`, `I8`,
/// `I16`, `I32` and `I64` load as arrays of that type. GGUF lists dimensions fastest first;
/// the arrays have them reversed, row-major, so an `[n_out, n_in]` weight stays `[n_out,
/// n_in]`.
///
/// Quantized tensors of type `Q4_0`, `Q4_1` and `Q8_0` are converted, as MLX converts them,
/// to nuvec's affine layout with `group_size = 32` and 4 or 8 bits (see
/// [`quantize`](crate::quantize)): a tensor named `X.weight` gives `X.weight` (`uint32`,
/// packed along the last axis), `X.scales` and `X.biases` (`float16`, one per 32 values),
/// ready for [`quantized_matmul`](crate::quantized_matmul) and
/// [`dequantize`](crate::dequantize). A quantized tensor whose name does not end in
/// `.weight` gives `N`, `N.scales` and `N.biases`. (MLX reads `Q4_1` blocks with a two-byte
/// skew; nuvec follows ggml's block layout, checked against the `gguf` Python package.)
///
/// Other tensor types (the `K` and `IQ` quantizations, `Q5_*`, ...) give an
/// [`Error::Format`] naming the tensor and the type, as do a truncated or corrupt header,
/// counts that cannot fit in the file, tensors whose bytes run past the end of the file or
/// overlap, and duplicate names.
///
/// [`Error::Format`]: crate::Error::Format
pub fn load_gguf(path: impl AsRef<Path>) -> Result<(HashMap<String, Array>, GgufMetadata)> {
    let path = path.as_ref();
    let ctx = Ctx::new("load_gguf", path);
    let map = map_file(ctx)?;
    parse(ctx, &map)
}
