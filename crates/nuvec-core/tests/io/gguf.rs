//! GGUF: the `gguf` package's file (metadata of every kind; F32, F16, BF16 and the Q4_0, Q4_1
//! and Q8_0 quantizations checked against the package's own dequantization), and bad files.

use nuvec_core::io::{GgufArray, GgufValue, load_gguf, load_npz};
use nuvec_core::{Array, DType, Error, bf16, dequantize, f16, quantized_matmul};

use crate::{expect_format, fixture, put, tempdir};

#[test]
fn metadata_of_every_kind() {
    let dir = tempdir();
    let path = put(dir.path(), "model.gguf", fixture!("model.gguf"));
    let (_, meta) = load_gguf(&path).unwrap();
    assert_eq!(meta.version, 3);
    let v = |k: &str| meta.get(k).unwrap_or_else(|| panic!("no key {k}")).clone();
    assert_eq!(
        v("general.architecture"),
        GgufValue::String("nuvec-test".into())
    );
    assert_eq!(v("test.u8"), GgufValue::U8(200));
    assert_eq!(v("test.i8"), GgufValue::I8(-100));
    assert_eq!(v("test.u16"), GgufValue::U16(60000));
    assert_eq!(v("test.i16"), GgufValue::I16(-30000));
    assert_eq!(v("test.u32"), GgufValue::U32(4_000_000_000));
    assert_eq!(v("test.i32"), GgufValue::I32(-2_000_000_000));
    assert_eq!(v("test.u64"), GgufValue::U64(u64::MAX));
    assert_eq!(v("test.i64"), GgufValue::I64(i64::MIN));
    assert_eq!(v("test.f32"), GgufValue::F32(0.25));
    assert_eq!(v("test.f64"), GgufValue::F64(-1.5e300));
    assert_eq!(v("test.bool"), GgufValue::Bool(true));
    assert_eq!(v("test.string").as_str(), Some("héllo"));
    assert_eq!(
        v("test.ints"),
        GgufValue::Array(GgufArray::I32(vec![1, -2, 3]))
    );
    assert_eq!(
        v("test.floats"),
        GgufValue::Array(GgufArray::F32(vec![0.5, 1.5]))
    );
    assert_eq!(
        v("test.strings"),
        GgufValue::Array(GgufArray::String(vec!["a".into(), "bc".into(), "".into()]))
    );
    assert_eq!(
        v("test.nested"),
        GgufValue::Array(GgufArray::Array(vec![
            GgufArray::I32(vec![1, 2]),
            GgufArray::I32(vec![3])
        ]))
    );
    // The accessors.
    assert_eq!(v("test.u8").as_u64(), Some(200));
    assert_eq!(v("test.i8").as_u64(), None);
    assert_eq!(v("test.i8").as_i64(), Some(-100));
    assert_eq!(v("test.u64").as_i64(), None);
    assert_eq!(v("test.f32").as_f64(), Some(0.25));
    assert_eq!(v("test.bool").as_bool(), Some(true));
    assert_eq!(v("test.strings").as_array().map(GgufArray::len), Some(3));
}

#[test]
fn plain_tensors_have_row_major_shapes() {
    let dir = tempdir();
    let path = put(dir.path(), "model.gguf", fixture!("model.gguf"));
    let (t, _) = load_gguf(&path).unwrap();
    let plain = load_npz(put(dir.path(), "plain.npz", fixture!("gguf_plain.npz"))).unwrap();
    let reference = load_npz(put(dir.path(), "ref.npz", fixture!("gguf_reference.npz"))).unwrap();

    let w = &t["f32.weight"];
    assert_eq!((w.dtype(), w.shape()), (DType::F32, &[2usize, 3, 4][..]));
    assert_eq!(
        w.to_vec::<f32>().unwrap(),
        plain["f32.weight"].to_vec::<f32>().unwrap()
    );
    let b = &t["f16.bias"];
    assert_eq!((b.dtype(), b.shape()), (DType::F16, &[5usize][..]));
    assert_eq!(
        b.to_vec::<f16>().unwrap(),
        plain["f16.bias"].to_vec::<f16>().unwrap()
    );
    let bf = &t["bf16.weight"];
    assert_eq!((bf.dtype(), bf.shape()), (DType::BF16, &[2usize, 8][..]));
    let got: Vec<f32> = bf
        .to_vec::<bf16>()
        .unwrap()
        .iter()
        .map(|x| x.to_f32())
        .collect();
    assert_eq!(got, reference["bf16.weight"].to_vec::<f32>().unwrap());
}

/// The quantized tensors of model.gguf: name prefix, full name, bits.
const QUANTS: [(&str, &str, u32); 4] = [
    ("q4_0", "q4_0.weight", 4),
    ("q4_1", "q4_1.weight", 4),
    ("q8_0", "q8_0.weight", 8),
    ("q8_0_plain", "q8_0_plain", 8),
];

#[test]
fn quantized_tensors_match_the_gguf_package() {
    let dir = tempdir();
    let path = put(dir.path(), "model.gguf", fixture!("model.gguf"));
    let (t, _) = load_gguf(&path).unwrap();
    assert_eq!(t.len(), 3 + 4 * 3, "{:?}", t.keys().collect::<Vec<_>>());
    let reference = load_npz(put(dir.path(), "ref.npz", fixture!("gguf_reference.npz"))).unwrap();
    for (prefix, name, bits) in QUANTS {
        let (w, s, b) = (
            &t[name],
            &t[&format!("{prefix}.scales")],
            &t[&format!("{prefix}.biases")],
        );
        assert_eq!(
            (w.dtype(), w.shape()),
            (DType::U32, &[3usize, 64 * bits as usize / 32][..]),
            "{name}"
        );
        assert_eq!(
            (s.dtype(), s.shape()),
            (DType::F16, &[3usize, 2][..]),
            "{name}"
        );
        assert_eq!(
            (b.dtype(), b.shape()),
            (DType::F16, &[3usize, 2][..]),
            "{name}"
        );
        let want = reference[name].to_vec::<f32>().unwrap();
        assert_eq!(reference[name].shape(), [3, 64]);

        // The affine layout unpacked here, in f32: value i of a row at bits i·bits.
        let words = w.to_vec::<u32>().unwrap();
        let scales = s.to_vec::<f16>().unwrap();
        let biases = b.to_vec::<f16>().unwrap();
        let per_row = 64 * bits as usize / 32;
        // How large the terms of each value are, for the tolerance of float16 arithmetic.
        let mut magnitude = vec![0f32; 3 * 64];
        for row in 0..3 {
            for i in 0..64 {
                let bit = i * bits as usize;
                let q = (words[row * per_row + bit / 32] >> (bit % 32)) & ((1 << bits) - 1);
                let g = row * 2 + i / 32;
                let (sc, bi) = (scales[g].to_f32(), biases[g].to_f32());
                let v = sc * q as f32 + bi;
                let r = want[row * 64 + i];
                magnitude[row * 64 + i] = (sc * q as f32).abs() + bi.abs();
                let tol = 1e-6 * (sc.abs() * 256.0 + bi.abs());
                assert!((v - r).abs() <= tol, "{name}[{row}, {i}]: {v} vs {r}");
            }
        }

        // nuvec's own dequantize (f16 out, like the scales; within float16's rounding of
        // `s·q` and `+ b`).
        let deq = dequantize(w, s, b, 32, bits).unwrap();
        assert_eq!((deq.dtype(), deq.shape()), (DType::F16, &[3usize, 64][..]));
        for (k, (d, r)) in deq.to_vec::<f16>().unwrap().iter().zip(&want).enumerate() {
            let d = d.to_f32();
            let tol = 1e-3 * (magnitude[k] + r.abs()) + 1e-4;
            assert!((d - r).abs() <= tol, "{name} dequantize[{k}]: {d} vs {r}");
        }

        // quantized_matmul takes them directly: x · wᵀ against the reference in f64.
        let xs: Vec<f32> = (0..128)
            .map(|k| ((k * 37 % 17) as f32 - 8.0) / 8.0)
            .collect();
        let x = Array::from_vec(xs.iter().map(|&v| f16::from_f32(v)).collect(), &[2, 64]).unwrap();
        let y = quantized_matmul(&x, w, s, b, true, 32, bits).unwrap();
        assert_eq!((y.dtype(), y.shape()), (DType::F16, &[2usize, 3][..]));
        let y = y.to_vec::<f16>().unwrap();
        for m in 0..2 {
            for n in 0..3 {
                let (mut dot, mut mag) = (0f64, 0f64);
                for k in 0..64 {
                    let p = f64::from(xs[m * 64 + k]) * f64::from(want[n * 64 + k]);
                    dot += p;
                    mag += p.abs();
                }
                let got = f64::from(y[m * 3 + n].to_f32());
                assert!(
                    (got - dot).abs() <= 4e-3 * mag + 1e-3,
                    "{name} matmul[{m}, {n}]: {got} vs {dot}"
                );
            }
        }
    }
}

#[test]
fn an_unsupported_tensor_type_names_tensor_and_type() {
    let dir = tempdir();
    let path = put(dir.path(), "u.gguf", fixture!("unsupported.gguf"));
    expect_format(load_gguf(&path), &["load_gguf", "'q5.weight'", "Q5_0"]);
}

#[test]
fn every_truncation_of_the_fixture_is_an_error() {
    let dir = tempdir();
    let bytes = fixture!("model.gguf");
    // The last tensor ends within the final 32 bytes (the alignment) of the file.
    for len in (0..bytes.len() - 32).step_by(7) {
        let path = put(dir.path(), "t.gguf", &bytes[..len]);
        assert!(
            matches!(load_gguf(&path), Err(Error::Format { .. })),
            "prefix of {len} bytes"
        );
    }
}

/// A GGUF file assembled by hand.
struct Gguf {
    version: u32,
    kv: Vec<u8>,
    n_kv: u64,
    infos: Vec<u8>,
    n_tensors: u64,
    data: Vec<u8>,
}

fn string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

impl Gguf {
    fn new() -> Gguf {
        Gguf {
            version: 3,
            kv: vec![],
            n_kv: 0,
            infos: vec![],
            n_tensors: 0,
            data: vec![],
        }
    }

    /// A key of value type `code` with the value's raw bytes.
    fn kv(mut self, key: &str, code: u32, value: &[u8]) -> Gguf {
        string(&mut self.kv, key);
        self.kv.extend_from_slice(&code.to_le_bytes());
        self.kv.extend_from_slice(value);
        self.n_kv += 1;
        self
    }

    fn tensor(mut self, name: &str, dims: &[u64], ggml_type: u32, offset: u64) -> Gguf {
        string(&mut self.infos, name);
        self.infos
            .extend_from_slice(&(dims.len() as u32).to_le_bytes());
        for d in dims {
            self.infos.extend_from_slice(&d.to_le_bytes());
        }
        self.infos.extend_from_slice(&ggml_type.to_le_bytes());
        self.infos.extend_from_slice(&offset.to_le_bytes());
        self.n_tensors += 1;
        self
    }

    fn data(mut self, bytes: &[u8]) -> Gguf {
        self.data.extend_from_slice(bytes);
        self
    }

    fn build(&self) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&self.n_tensors.to_le_bytes());
        out.extend_from_slice(&self.n_kv.to_le_bytes());
        out.extend_from_slice(&self.kv);
        out.extend_from_slice(&self.infos);
        out.resize(out.len().next_multiple_of(32), 0);
        out.extend_from_slice(&self.data);
        out
    }
}

/// Bytes of an array value: element type, count, then `rest`.
fn array(code: u32, count: u64, rest: &[u8]) -> Vec<u8> {
    let mut v = code.to_le_bytes().to_vec();
    v.extend_from_slice(&count.to_le_bytes());
    v.extend_from_slice(rest);
    v
}

#[test]
fn a_hand_built_file_loads() {
    let dir = tempdir();
    let data: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let g = Gguf::new()
        .kv("general.alignment", 4, &32u32.to_le_bytes())
        .kv("empty", 9, &array(8, 0, &[]))
        .tensor("m", &[3, 2], 0, 0)
        .tensor("s", &[], 0, 24)
        .tensor("e", &[0, 5], 0, 28)
        .data(&data);
    let path = put(dir.path(), "h.gguf", &g.build());
    let (t, meta) = load_gguf(&path).unwrap();
    assert_eq!(
        meta.get("empty"),
        Some(&GgufValue::Array(GgufArray::String(vec![])))
    );
    assert_eq!(t["m"].shape(), [2, 3]);
    assert_eq!(
        t["m"].to_vec::<f32>().unwrap(),
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
    assert_eq!(t["s"].shape(), [] as [usize; 0]);
    assert_eq!(t["s"].item::<f32>().unwrap(), 7.0);
    assert_eq!(t["e"].shape(), [5, 0]);
}

#[test]
fn bad_files_are_errors() {
    let dir = tempdir();
    let f32x8 = [0u8; 32];
    let mut deep = array(0, 1, &[7]);
    for _ in 0..20 {
        deep = array(9, 1, &deep);
    }
    let cases: Vec<(&str, Vec<u8>, &[&str])> = vec![
        ("empty", vec![], &["header"]),
        (
            "no magic",
            b"GGML\x03\x00\x00\x00".to_vec(),
            &["header", "magic"],
        ),
        (
            "version 1",
            {
                let mut g = Gguf::new();
                g.version = 1;
                g.build()
            },
            &["version 1"],
        ),
        (
            "big endian",
            {
                let mut g = Gguf::new();
                g.version = 3u32.swap_bytes();
                g.build()
            },
            &["big-endian"],
        ),
        (
            "version 9",
            {
                let mut g = Gguf::new();
                g.version = 9;
                g.build()
            },
            &["version 9"],
        ),
        (
            "tensor count",
            {
                let mut g = Gguf::new();
                g.n_tensors = u64::MAX;
                g.build()
            },
            &["tensor count"],
        ),
        (
            "metadata count",
            {
                let mut g = Gguf::new();
                g.n_kv = 1 << 40;
                g.build()
            },
            &["metadata count"],
        ),
        (
            "key length",
            {
                let mut g = Gguf::new();
                g.n_kv = 1;
                g.kv = u64::MAX.to_le_bytes().to_vec();
                g.kv.extend_from_slice(&[0; 16]);
                g.build()
            },
            &["metadata #0"],
        ),
        (
            "string length",
            Gguf::new().kv("s", 8, &(1u64 << 50).to_le_bytes()).build(),
            &["'s'", "truncated"],
        ),
        (
            "array count",
            Gguf::new()
                .kv("a", 9, &array(10, u64::MAX / 4, &[0; 16]))
                .build(),
            &["'a'", "cannot fit"],
        ),
        (
            "string array count",
            Gguf::new().kv("a", 9, &array(8, 1 << 40, &[0; 16])).build(),
            &["'a'", "cannot fit"],
        ),
        (
            "nested arrays count",
            Gguf::new().kv("a", 9, &array(9, 1 << 40, &[0; 16])).build(),
            &["'a'", "cannot fit"],
        ),
        (
            "too deep",
            Gguf::new().kv("a", 9, &deep).build(),
            &["'a'", "nested"],
        ),
        (
            "value type",
            Gguf::new().kv("v", 13, &[0; 8]).build(),
            &["'v'", "unknown value type 13"],
        ),
        (
            "element type",
            Gguf::new().kv("v", 9, &array(77, 1, &[0; 8])).build(),
            &["'v'", "element type 77"],
        ),
        (
            "duplicate key",
            Gguf::new().kv("k", 0, &[1]).kv("k", 0, &[2]).build(),
            &["'k'", "twice"],
        ),
        (
            "bad utf-8",
            Gguf::new()
                .kv("k", 8, &[2, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xfe])
                .build(),
            &["'k'", "UTF-8"],
        ),
        (
            "alignment 3",
            Gguf::new()
                .kv("general.alignment", 4, &3u32.to_le_bytes())
                .build(),
            &["general.alignment"],
        ),
        (
            "alignment string",
            Gguf::new()
                .kv("general.alignment", 8, &[1, 0, 0, 0, 0, 0, 0, 0, b'x'])
                .build(),
            &["general.alignment"],
        ),
        (
            "many dims",
            Gguf::new().tensor("t", &[1; 9], 0, 0).data(&f32x8).build(),
            &["'t'", "9 dimensions"],
        ),
        (
            "past the end",
            Gguf::new().tensor("t", &[8], 0, 32).data(&f32x8).build(),
            &["'t'", "past the end"],
        ),
        (
            "offset overflow",
            Gguf::new()
                .tensor("t", &[8], 0, u64::MAX - 8)
                .data(&f32x8)
                .build(),
            &["'t'", "past the end"],
        ),
        (
            "dims overflow",
            Gguf::new()
                .tensor("t", &[1 << 32, 1 << 32, 1 << 32], 0, 0)
                .data(&f32x8)
                .build(),
            &["'t'"],
        ),
        (
            "size overflow",
            Gguf::new()
                .tensor("t", &[1 << 62], 0, 0)
                .data(&f32x8)
                .build(),
            &["'t'"],
        ),
        (
            "overlap",
            Gguf::new()
                .tensor("a", &[4], 0, 0)
                .tensor("b", &[4], 0, 8)
                .data(&f32x8)
                .build(),
            &["overlaps"],
        ),
        (
            "duplicate tensor",
            Gguf::new()
                .tensor("a", &[2], 0, 0)
                .tensor("a", &[2], 0, 8)
                .data(&f32x8)
                .build(),
            &["'a'", "twice"],
        ),
        (
            "unknown type",
            Gguf::new().tensor("t", &[2], 99, 0).data(&f32x8).build(),
            &["'t'", "type 99"],
        ),
        (
            "k-quant",
            Gguf::new()
                .tensor("t", &[256], 12, 0)
                .data(&[0; 144])
                .build(),
            &["'t'", "Q4_K"],
        ),
        (
            "q4_0 row of 16",
            Gguf::new().tensor("t", &[16, 2], 2, 0).data(&f32x8).build(),
            &["'t'", "multiple of 32"],
        ),
        (
            "q8_0 scalar",
            Gguf::new().tensor("t", &[], 8, 0).data(&[0; 34]).build(),
            &["'t'", "multiple of 32"],
        ),
        (
            "names collide",
            Gguf::new()
                .tensor("a.weight", &[32], 8, 0)
                .tensor("a.scales", &[1], 0, 64)
                .data(&[0; 68])
                .build(),
            &["a.scales", "taken"],
        ),
    ];
    for (what, bytes, parts) in cases {
        let path = put(dir.path(), "bad.gguf", &bytes);
        let r = load_gguf(&path);
        assert!(matches!(r, Err(Error::Format { .. })), "{what}: {r:?}");
        expect_format(r, &[&["load_gguf", "bad.gguf"][..], parts].concat());
    }
    assert!(matches!(
        load_gguf(dir.path().join("absent.gguf")),
        Err(Error::Io(_))
    ));
}
