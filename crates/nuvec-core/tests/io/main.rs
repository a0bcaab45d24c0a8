//! `nuvec_core::io`: round trips of every element type, files written by NumPy, the Python
//! `safetensors` package and the `gguf` package (tests/fixtures/io_*.py wrote them, into
//! tests/fixtures/io/), GGUF quantizations against the `gguf` package's own dequantization,
//! corrupt and lying files of each format (an error each, never a panic), and property tests
//! that mutate and truncate valid files.

mod fuzz;
mod gguf;
mod npy;
mod safetensors;

use std::path::{Path, PathBuf};

use nuvec_core::{Array, DType, Error, HostData};

/// The bytes of a fixture file, embedded in the test binary.
macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/io/",
            $name
        ))
        .as_slice()
    };
}
pub(crate) use fixture;

/// A temporary folder, removed when dropped.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary folder")
}

/// Writes `bytes` to `dir/name` and returns the path.
pub fn put(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("writing a test file");
    path
}

/// Asserts that `r` is an [`Error::Format`] whose message contains every one of `parts`.
#[track_caller]
pub fn expect_format<T: std::fmt::Debug>(r: nuvec_core::Result<T>, parts: &[&str]) {
    match r {
        Err(e @ Error::Format { .. }) => {
            let msg = e.to_string();
            for p in parts {
                assert!(msg.contains(p), "message {msg:?} lacks {p:?}");
            }
        }
        other => panic!("expected a format error containing {parts:?}, got {other:?}"),
    }
}

/// One array of every element type, of several shapes (0-d, empty, 1-d to 3-d), with values
/// that exercise each type's range: name -> array.
pub fn every_dtype() -> Vec<(String, Array)> {
    let shapes: [&[usize]; 5] = [&[], &[0], &[5], &[2, 3], &[2, 0, 3]];
    let mut out = Vec::new();
    for (d, dtype) in DType::ALL.into_iter().enumerate() {
        for (s, shape) in shapes.iter().enumerate() {
            let shape = if s == 3 && d % 2 == 1 {
                &[1, 2, 3][..]
            } else {
                shape
            };
            let n: usize = shape.iter().product();
            out.push((
                format!("{}_{s}", dtype.name()),
                Array::from_buffer(values(dtype, n), shape).unwrap(),
            ));
        }
    }
    out
}

/// `n` values of `dtype`: extremes first, then a simple sequence.
pub fn values(dtype: DType, n: usize) -> HostData {
    use nuvec_core::{Complex64, bf16, f16};
    let i = |k: usize| k as i64 - 2;
    match dtype {
        DType::Bool => HostData::Bool((0..n).map(|k| k % 3 != 1).collect()),
        DType::U8 => HostData::U8((0..n).map(|k| [255, 0][k % 2] ^ k as u8).collect()),
        DType::U16 => HostData::U16((0..n).map(|k| u16::MAX - k as u16 * 7).collect()),
        DType::U32 => HostData::U32((0..n).map(|k| u32::MAX - k as u32 * 99).collect()),
        DType::U64 => HostData::U64((0..n).map(|k| u64::MAX - k as u64 * 12345).collect()),
        DType::I8 => HostData::I8(
            (0..n)
                .map(|k| [i8::MIN, i8::MAX][k % 2] / (k as i8 + 1))
                .collect(),
        ),
        DType::I16 => HostData::I16((0..n).map(|k| i16::MIN + k as i16 * 999).collect()),
        DType::I32 => HostData::I32((0..n).map(|k| i32::MIN + k as i32 * 77777).collect()),
        DType::I64 => HostData::I64(
            (0..n)
                .map(|k| [i64::MAX, i64::MIN][k % 2] / (k as i64 + 1))
                .collect(),
        ),
        DType::F16 => HostData::F16((0..n).map(|k| f16::from_f32(i(k) as f32 * 0.3)).collect()),
        DType::BF16 => HostData::BF16(
            (0..n)
                .map(|k| bf16::from_f32(i(k) as f32 * -1.7e30))
                .collect(),
        ),
        DType::F32 => HostData::F32((0..n).map(|k| i(k) as f32 * 1.1e-20 + 0.125).collect()),
        DType::F64 => HostData::F64((0..n).map(|k| (i(k) as f64).exp() * 1e200).collect()),
        DType::C64 => HostData::C64(
            (0..n)
                .map(|k| Complex64::new(i(k) as f32, -0.5 * k as f32))
                .collect(),
        ),
    }
}

/// The elements of `a` as host data (row-major).
pub fn host(a: &Array) -> HostData {
    use nuvec_core::{Complex64, bf16, f16};
    macro_rules! get {
        ($($d:ident => $t:ty),*) => {
            match a.dtype() {
                $(DType::$d => HostData::$d(a.to_vec::<$t>().unwrap()),)*
            }
        };
    }
    get!(Bool => bool, U8 => u8, U16 => u16, U32 => u32, U64 => u64, I8 => i8, I16 => i16,
         I32 => i32, I64 => i64, F16 => f16, BF16 => bf16, F32 => f32, F64 => f64,
         C64 => Complex64)
}

/// Asserts that two arrays have one dtype, one shape and the same elements, bit for bit.
#[track_caller]
pub fn assert_same(got: &Array, want: &Array, what: &str) {
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    assert_eq!(host(got), host(want), "{what}: elements");
}
