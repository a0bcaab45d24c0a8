//! NumPy's `.npy` format: a magic string, a version, a small header (a Python dict literal
//! giving the dtype, the order and the shape) and the raw elements.
//!
//! The header is parsed here by hand: it is a dict of three keys whose values are a string, a
//! boolean and a tuple of integers, and nothing else is accepted.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use super::bytes::{byte_count, decode, host_elements, write_le};
use super::{Ctx, map_file};
use crate::array::{Layout, gather_row_major};
use crate::dtype::HostData;
use crate::{Array, DType, Result};

/// The first six bytes of every `.npy` file.
const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// NumPy pads the header so that the data starts at a multiple of this.
const ALIGN: usize = 64;

/// What a `.npy` header says.
#[derive(Debug)]
struct Header {
    dtype: DType,
    /// Whether multi-byte elements are little endian.
    little: bool,
    /// Whether the elements are in column-major (Fortran) order.
    fortran: bool,
    shape: Vec<usize>,
}

/// The element type and byte order of a NumPy type string (`'<f4'`, `'|b1'`, ...).
///
/// `V2` (NumPy's two-byte void) is read as `bfloat16`, as MLX writes and reads it.
fn parse_descr(descr: &str) -> Option<(DType, bool)> {
    let (order, code) = match descr.chars().next()? {
        c @ ('<' | '>' | '|' | '=') => (c, &descr[1..]),
        _ => ('|', descr),
    };
    let little = match order {
        '>' => false,
        '=' => cfg!(target_endian = "little"),
        _ => true,
    };
    let dtype = match code {
        "b1" => DType::Bool,
        "u1" => DType::U8,
        "u2" => DType::U16,
        "u4" => DType::U32,
        "u8" => DType::U64,
        "i1" => DType::I8,
        "i2" => DType::I16,
        "i4" => DType::I32,
        "i8" => DType::I64,
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        "c8" => DType::C64,
        "V2" => DType::BF16,
        _ => return None,
    };
    Some((dtype, little))
}

/// The NumPy type string nuvec writes for `dtype` (little endian; `bfloat16` as `'<V2'`).
fn descr(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool => "|b1",
        DType::U8 => "|u1",
        DType::U16 => "<u2",
        DType::U32 => "<u4",
        DType::U64 => "<u8",
        DType::I8 => "|i1",
        DType::I16 => "<i2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::F16 => "<f2",
        DType::BF16 => "<V2",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::C64 => "<c8",
    }
}

/// A value of the header's dict.
enum Value {
    Str(String),
    Bool(bool),
    Tuple(Vec<usize>),
}

/// A cursor over the header's characters.
struct Lexer<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
}

impl Lexer<'_> {
    fn skip_ws(&mut self) {
        while self.chars.next_if(|c| c.is_ascii_whitespace()).is_some() {}
    }

    /// The next character after any whitespace, consumed.
    fn next(&mut self) -> Option<char> {
        self.skip_ws();
        self.chars.next()
    }

    /// The next character after any whitespace, not consumed.
    fn peek(&mut self) -> Option<char> {
        self.skip_ws();
        self.chars.peek().copied()
    }

    fn expect(&mut self, want: char) -> std::result::Result<(), String> {
        match self.next() {
            Some(c) if c == want => Ok(()),
            Some(c) => Err(format!("expected '{want}', found '{c}'")),
            None => Err(format!("expected '{want}', found the end")),
        }
    }

    /// A quoted string (single or double quotes; a backslash takes the next character).
    fn string(&mut self) -> std::result::Result<String, String> {
        let quote = match self.next() {
            Some(q @ ('\'' | '"')) => q,
            Some(c) => return Err(format!("expected a string, found '{c}'")),
            None => return Err("expected a string, found the end".into()),
        };
        let mut s = String::new();
        loop {
            match self.chars.next() {
                Some(c) if c == quote => return Ok(s),
                Some('\\') => match self.chars.next() {
                    Some(c) => s.push(c),
                    None => return Err("unterminated string".into()),
                },
                Some(c) => s.push(c),
                None => return Err("unterminated string".into()),
            }
        }
    }

    /// A bare word (`True`, `False`, digits).
    fn word(&mut self) -> String {
        self.skip_ws();
        let mut w = String::new();
        while let Some(c) = self
            .chars
            .next_if(|c| c.is_ascii_alphanumeric() || *c == '_')
        {
            w.push(c);
        }
        w
    }

    /// A tuple of non-negative integers, as Python writes one: `()`, `(3,)`, `(2, 3)`.
    fn tuple(&mut self) -> std::result::Result<Vec<usize>, String> {
        self.expect('(')?;
        let mut dims = Vec::new();
        loop {
            if self.peek() == Some(')') {
                self.chars.next();
                return Ok(dims);
            }
            let w = self.word();
            // Python 2 wrote long integers with an `L` suffix.
            let digits = w.strip_suffix('L').unwrap_or(&w);
            let dim = digits
                .parse::<usize>()
                .map_err(|_| format!("'{w}' is not a dimension"))?;
            dims.push(dim);
            match self.next() {
                Some(',') => {}
                Some(')') => return Ok(dims),
                Some(c) => return Err(format!("expected ',' or ')' in the shape, found '{c}'")),
                None => return Err("unterminated shape".into()),
            }
        }
    }

    fn value(&mut self) -> std::result::Result<Value, String> {
        match self.peek() {
            Some('\'' | '"') => Ok(Value::Str(self.string()?)),
            Some('(') => Ok(Value::Tuple(self.tuple()?)),
            Some('[') => Err("structured dtypes (a list as 'descr') are not supported".into()),
            Some(_) => match self.word().as_str() {
                "True" => Ok(Value::Bool(true)),
                "False" => Ok(Value::Bool(false)),
                w => Err(format!("unexpected value '{w}'")),
            },
            None => Err("expected a value, found the end".into()),
        }
    }
}

/// Parses the header's dict literal.
fn parse_dict(text: &str) -> std::result::Result<Header, String> {
    let mut lx = Lexer {
        chars: text.chars().peekable(),
    };
    lx.expect('{')?;
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    loop {
        if lx.peek() == Some('}') {
            lx.chars.next();
            break;
        }
        let key = lx.string()?;
        lx.expect(':')?;
        let value = lx.value()?;
        let slot_taken = match (key.as_str(), value) {
            ("descr", Value::Str(s)) => descr.replace(s).is_some(),
            ("fortran_order", Value::Bool(b)) => fortran.replace(b).is_some(),
            ("shape", Value::Tuple(t)) => shape.replace(t).is_some(),
            ("descr" | "fortran_order" | "shape", _) => {
                return Err(format!("'{key}' has a value of the wrong kind"));
            }
            _ => return Err(format!("unexpected key '{key}'")),
        };
        if slot_taken {
            return Err(format!("key '{key}' appears twice"));
        }
        match lx.next() {
            Some(',') => {}
            Some('}') => break,
            Some(c) => return Err(format!("expected ',' or '}}', found '{c}'")),
            None => return Err("unterminated dict".into()),
        }
    }
    if let Some(c) = lx.next() {
        return Err(format!("unexpected '{c}' after the dict"));
    }
    let descr = descr.ok_or("the key 'descr' is missing")?;
    let fortran = fortran.ok_or("the key 'fortran_order' is missing")?;
    let shape = shape.ok_or("the key 'shape' is missing")?;
    let (dtype, little) =
        parse_descr(&descr).ok_or_else(|| format!("dtype '{descr}' is not supported by nuvec"))?;
    Ok(Header {
        dtype,
        little,
        fortran,
        shape,
    })
}

/// Parses the magic, version and header of `bytes`; returns the header and where the data
/// starts.
fn parse_header(ctx: Ctx<'_>, bytes: &[u8]) -> Result<(Header, usize)> {
    if bytes.get(..6) != Some(MAGIC.as_slice()) {
        return Err(ctx.format("header: not a .npy file (no NumPy magic string)"));
    }
    let Some(&[major, minor]) = bytes.get(6..8) else {
        return Err(ctx.format("header: the file ends inside the format version"));
    };
    let (len_size, utf8) = match (major, minor) {
        (1, 0) => (2, false),
        (2, 0) => (4, false),
        (3, 0) => (4, true),
        _ => {
            return Err(ctx.format(format!(
                "header: format version {major}.{minor} is not supported (1.0, 2.0, 3.0)"
            )));
        }
    };
    let len = match bytes.get(8..8 + len_size) {
        Some(&[a, b]) => usize::from(u16::from_le_bytes([a, b])),
        Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]) as usize,
        _ => return Err(ctx.format("header: the file ends inside the header length")),
    };
    let start = 8 + len_size;
    let raw = start
        .checked_add(len)
        .and_then(|end| bytes.get(start..end))
        .ok_or_else(|| {
            ctx.format(format!(
                "header: its length {len} runs past the end of the file ({} bytes)",
                bytes.len()
            ))
        })?;
    let text: String = if utf8 {
        std::str::from_utf8(raw)
            .map_err(|e| ctx.format(format!("header: not UTF-8: {e}")))?
            .to_owned()
    } else {
        // Versions 1 and 2 are latin-1: every byte is one character.
        raw.iter().map(|&b| char::from(b)).collect()
    };
    let header = parse_dict(&text).map_err(|e| ctx.format(format!("header: {e}")))?;
    Ok((header, start + len))
}

/// Host data in column-major order reordered to row-major.
fn fortran_to_c(host: HostData, shape: &[usize]) -> HostData {
    if shape.iter().filter(|&&d| d > 1).count() < 2 {
        return host;
    }
    let mut strides = vec![0isize; shape.len()];
    let mut acc = 1isize;
    for (s, &n) in strides.iter_mut().zip(shape) {
        *s = acc;
        acc *= n.max(1) as isize;
    }
    let layout = Layout {
        shape: shape.to_vec(),
        strides,
        offset: 0,
    };
    crate::with_host!(&host, v, T => <T as crate::dtype::Element>::into_host(gather_row_major(v, &layout)))
}

/// The array in a whole `.npy` file's bytes.
pub(crate) fn parse_npy(ctx: Ctx<'_>, bytes: &[u8]) -> Result<Array> {
    let (header, start) = parse_header(ctx, bytes)?;
    let Header {
        dtype,
        little,
        fortran,
        shape,
    } = header;
    let data = &bytes[start..];
    let need = byte_count(&shape, dtype).ok_or_else(|| {
        ctx.format(format!(
            "header: shape {shape:?} of {dtype} is too large to address"
        ))
    })?;
    if data.len() != need {
        return Err(ctx.format(format!(
            "data: {} bytes, but shape {shape:?} of {dtype} needs {need}",
            data.len()
        )));
    }
    let mut host = decode(dtype, data, little);
    if fortran {
        host = fortran_to_c(host, &shape);
    }
    Array::from_buffer(host, &shape)
}

/// The header nuvec writes for `array`: version 1.0 (2.0 for a header longer than 64 KiB),
/// C order, little endian, padded so that the data starts at a multiple of 64 bytes.
fn header_bytes(array: &Array) -> Vec<u8> {
    let dims: Vec<String> = array.shape().iter().map(|d| d.to_string()).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        descr(array.dtype())
    );
    let unpadded = |len_size: usize| MAGIC.len() + 2 + len_size + dict.len() + 1;
    let len_size = if unpadded(2).next_multiple_of(ALIGN) - 10 <= usize::from(u16::MAX) {
        2
    } else {
        4
    };
    let total = unpadded(len_size).next_multiple_of(ALIGN);
    let header_len = total - MAGIC.len() - 2 - len_size;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(MAGIC);
    if len_size == 2 {
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(header_len as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&(header_len as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.resize(total - 1, b' ');
    out.push(b'\n');
    out
}

/// Writes `array` as a `.npy` file to `w` (evaluating it first).
pub(crate) fn write_npy<W: Write>(ctx: Ctx<'_>, w: &mut W, array: &Array) -> Result<()> {
    let host = host_elements(array)?;
    w.write_all(&header_bytes(array)).map_err(|e| ctx.io(e))?;
    write_le(w, &host).map_err(|e| ctx.io(e))
}

/// Loads the array of a NumPy `.npy` file (MLX's `load` for `.npy`).
///
/// Format versions 1.0, 2.0 and 3.0 load, in C or Fortran order (a Fortran-order file is
/// reordered to row-major), little or big endian, of NumPy's `bool`, `int8`..`int64`,
/// `uint8`..`uint64`, `float16`, `float32`, `float64` and `complex64`. A two-byte void
/// (`'V2'`) loads as `bfloat16`, as MLX does: NumPy has no `bfloat16`, and MLX writes its
/// `bfloat16` arrays that way. Other dtypes (`complex128`, strings, objects, structured) and
/// a header or data length that does not fit the file give an [`Error::Format`].
///
/// [`Error::Format`]: crate::Error::Format
pub fn load_npy(path: impl AsRef<Path>) -> Result<Array> {
    let path = path.as_ref();
    let ctx = Ctx::new("load_npy", path);
    let map = map_file(ctx)?;
    parse_npy(ctx, &map)
}

/// Saves an array as a NumPy `.npy` file at exactly `path` (no `.npy` is appended, unlike
/// NumPy's and MLX's `save`).
///
/// The file is format version 1.0 (2.0 when the header needs more than 64 KiB), C order,
/// little endian. `bfloat16` is written as `'<V2'`, MLX's choice, which NumPy reads as raw
/// two-byte values (`.view(np.uint16)` gives the bits) and [`load_npy`] reads back as
/// `bfloat16`. Every other element type is written under its NumPy name.
pub fn save_npy(path: impl AsRef<Path>, array: &Array) -> Result<()> {
    let path = path.as_ref();
    let ctx = Ctx::new("save_npy", path);
    if let Some(err) = array.error() {
        return Err(err);
    }
    array.eval()?;
    let file = File::create(path).map_err(|e| ctx.io(e))?;
    let mut w = BufWriter::new(file);
    write_npy(ctx, &mut w, array)?;
    w.flush().map_err(|e| ctx.io(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_aligned_and_parses_back() {
        for shape in [vec![], vec![3], vec![2, 3], vec![0, 4, 1]] {
            let a = Array::from_buffer(HostData::zeros(DType::F32, shape.iter().product()), &shape)
                .unwrap();
            let h = header_bytes(&a);
            assert_eq!(h.len() % ALIGN, 0);
            let ctx = Ctx::new("test", Path::new("x.npy"));
            let (header, start) = parse_header(ctx, &h).unwrap();
            assert_eq!(start, h.len());
            assert_eq!(header.shape, shape);
            assert!(!header.fortran && header.little);
        }
    }

    #[test]
    fn dict_literals() {
        let h = parse_dict("{\"shape\": (2L, 3L,), 'fortran_order': True, 'descr': '>i2'}  \n")
            .unwrap();
        assert_eq!(h.shape, [2, 3]);
        assert!(h.fortran && !h.little);
        assert_eq!(h.dtype, DType::I16);
        for bad in [
            "",
            "{",
            "{'descr': '<f4'}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}",
            "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}",
            "{'descr': '<c16', 'fortran_order': False, 'shape': ()}",
            "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': ()}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': ()} x",
        ] {
            assert!(parse_dict(bad).is_err(), "{bad}");
        }
    }
}
