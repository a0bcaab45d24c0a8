//! `.npy` and `.npz`: round trips, NumPy's files, NumPy reading nuvec's, and bad files.

use std::collections::HashMap;
use std::io::Write;

use nuvec_core::io::{load_npy, load_npz, save_npy, save_npz, save_npz_compressed};
use nuvec_core::{Array, Complex64, DType, Error, bf16, f16};

use crate::{assert_same, every_dtype, expect_format, fixture, put, tempdir};

/// The arrays of tests/fixtures/io_numpy.py's `expected()`, built here from the same
/// formulas.
fn numpy_expected() -> Vec<(&'static str, Array)> {
    let f = |v: Vec<f32>, s: &[usize]| Array::from_vec(v, s).unwrap();
    let c64 = |v: &[(f32, f32)], s: &[usize]| {
        let v: Vec<Complex64> = v.iter().map(|&(re, im)| Complex64::new(re, im)).collect();
        Array::from_vec(v, s).unwrap()
    };
    let big_c64: Vec<(f32, f32)> = (0..6).map(|k| (k as f32, k as f32 - 2.0)).collect();
    vec![
        (
            "c_f32",
            f((0..6).map(|k| k as f32 * 0.5).collect(), &[2, 3]),
        ),
        (
            "fortran_f64",
            Array::from_vec((0..24).map(|k| k as f64 / 8.0).collect(), &[2, 3, 4]).unwrap(),
        ),
        (
            "big_i32",
            Array::from_vec((-3..3).collect::<Vec<i32>>(), &[3, 2]).unwrap(),
        ),
        ("big_c64_fortran", c64(&big_c64, &[2, 3])),
        (
            "bool",
            Array::from_slice(&[true, false, true, true], &[2, 2]).unwrap(),
        ),
        ("c64", c64(&[(1.0, 2.0), (-0.5, 0.0), (3.25, -4.0)], &[3])),
        (
            "f16",
            Array::from_vec(
                [1.5f32, -2.0, 0.099975586, 65504.0]
                    .map(f16::from_f32)
                    .to_vec(),
                &[2, 2],
            )
            .unwrap(),
        ),
        (
            "u64",
            Array::from_slice(&[0u64, 1, 1 << 63, u64::MAX], &[4]).unwrap(),
        ),
        (
            "i8",
            Array::from_slice(&[-128i8, -1, 0, 127], &[4]).unwrap(),
        ),
        ("u16", Array::from_slice(&[0u16, 1, 65535], &[3]).unwrap()),
        (
            "i64",
            Array::from_slice(&[i64::MIN, i64::MAX], &[1, 2]).unwrap(),
        ),
        ("scalar", Array::scalar(3.5f32)),
        ("empty", Array::from_slice::<f32>(&[], &[0, 3]).unwrap()),
    ]
}

/// The fixture bytes of each `numpy_expected` name.
fn numpy_fixture(name: &str) -> &'static [u8] {
    match name {
        "c_f32" => fixture!("c_f32.npy"),
        "fortran_f64" => fixture!("fortran_f64.npy"),
        "big_i32" => fixture!("big_i32.npy"),
        "big_c64_fortran" => fixture!("big_c64_fortran.npy"),
        "bool" => fixture!("bool.npy"),
        "c64" => fixture!("c64.npy"),
        "f16" => fixture!("f16.npy"),
        "u64" => fixture!("u64.npy"),
        "i8" => fixture!("i8.npy"),
        "u16" => fixture!("u16.npy"),
        "i64" => fixture!("i64.npy"),
        "scalar" => fixture!("scalar.npy"),
        "empty" => fixture!("empty.npy"),
        other => panic!("no fixture {other}"),
    }
}

#[test]
fn reads_numpy_files_c_fortran_big_endian() {
    let dir = tempdir();
    for (name, want) in numpy_expected() {
        let path = put(dir.path(), &format!("{name}.npy"), numpy_fixture(name));
        assert_same(&load_npy(&path).unwrap(), &want, name);
    }
}

#[test]
fn reads_format_versions_2_and_3() {
    let dir = tempdir();
    let want = &numpy_expected()[0].1;
    for (name, bytes) in [
        ("v2.npy", fixture!("v2.npy")),
        ("v3.npy", fixture!("v3.npy")),
    ] {
        assert_eq!(bytes[6], if name == "v2.npy" { 2 } else { 3 });
        let path = put(dir.path(), name, bytes);
        assert_same(&load_npy(&path).unwrap(), want, name);
    }
}

#[test]
fn round_trip_every_dtype_and_shape() {
    let dir = tempdir();
    for (name, a) in every_dtype() {
        let path = dir.path().join(format!("{name}.npy"));
        save_npy(&path, &a).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().len() as usize % 64,
            a.nbytes() % 64
        );
        assert_same(&load_npy(&path).unwrap(), &a, &name);
    }
}

#[test]
fn views_are_saved_in_c_order() {
    let dir = tempdir();
    let path = dir.path().join("t.npy");
    let a = Array::from_slice(&[1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    save_npy(&path, &a.t().unwrap()).unwrap();
    let back = load_npy(&path).unwrap();
    assert_eq!(back.shape(), [3, 2]);
    assert_eq!(
        back.to_vec::<f64>().unwrap(),
        [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
    );
}

#[test]
fn bfloat16_is_written_as_two_byte_void() {
    let dir = tempdir();
    let path = dir.path().join("bf.npy");
    let a = Array::from_vec([1.0f32, -2.0, 0.0].map(bf16::from_f32).to_vec(), &[3]).unwrap();
    save_npy(&path, &a).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let header = String::from_utf8_lossy(&bytes[10..64]);
    assert!(header.contains("'descr': '<V2'"), "{header}");
    assert_same(&load_npy(&path).unwrap(), &a, "bf16");
}

#[test]
fn npz_reads_numpy_stored_and_deflated() {
    let dir = tempdir();
    let expected: HashMap<&str, Array> = numpy_expected().into_iter().collect();
    for (file, bytes, extra) in [
        ("stored.npz", fixture!("stored.npz"), None),
        (
            "deflated.npz",
            fixture!("deflated.npz"),
            Some("fortran_f64"),
        ),
    ] {
        let path = put(dir.path(), file, bytes);
        let got = load_npz(&path).unwrap();
        let mut keys = vec!["c_f32", "bool", "i8", "scalar", "empty"];
        keys.extend(extra);
        assert_eq!(got.len(), keys.len(), "{file}");
        for k in keys {
            assert_same(&got[k], &expected[k], &format!("{file}/{k}"));
        }
    }
}

#[test]
fn npz_round_trip_stored_and_deflated() {
    let dir = tempdir();
    let arrays: HashMap<String, Array> = every_dtype().into_iter().collect();
    let stored = dir.path().join("s.npz");
    let deflated = dir.path().join("d.npz");
    save_npz(&stored, &arrays).unwrap();
    save_npz_compressed(&deflated, &arrays).unwrap();
    for path in [&stored, &deflated] {
        let back = load_npz(path).unwrap();
        assert_eq!(back.len(), arrays.len());
        for (name, a) in &arrays {
            assert_same(&back[name], a, name);
        }
    }
    // Compressible data is smaller deflated.
    let big = HashMap::from([(
        "z".to_string(),
        nuvec_core::zeros(&[4096], DType::F32).unwrap(),
    )]);
    save_npz(&stored, &big).unwrap();
    save_npz_compressed(&deflated, &big).unwrap();
    let len = |p: &std::path::Path| std::fs::metadata(p).unwrap().len();
    assert!(len(&deflated) * 10 < len(&stored));
    assert_same(&load_npz(&deflated).unwrap()["z"], &big["z"], "z");
}

#[test]
fn npz_skips_members_that_are_not_npy_and_names_bad_ones() {
    let dir = tempdir();
    let path = dir.path().join("m.npz");
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let opts = zip::write::SimpleFileOptions::default();
    zip.start_file("readme.txt", opts).unwrap();
    zip.write_all(b"not an array").unwrap();
    zip.start_file("ok.npy", opts).unwrap();
    zip.write_all(fixture!("i8.npy")).unwrap();
    zip.finish().unwrap();
    let got = load_npz(&path).unwrap();
    assert_eq!(got.keys().collect::<Vec<_>>(), ["ok"]);

    let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    zip.start_file("bad.npy", opts).unwrap();
    zip.write_all(b"\x93NUMPY\x01\x00\xff\xff").unwrap();
    zip.finish().unwrap();
    expect_format(load_npz(&path), &["load_npz", "bad.npy", "header"]);
}

#[test]
fn npz_bad_archives_are_errors() {
    let dir = tempdir();
    let stored = fixture!("stored.npz");
    let path = put(dir.path(), "x.npz", b"PK\x03\x04 not really a zip");
    expect_format(load_npz(&path), &["load_npz", "zip"]);
    let path = put(dir.path(), "x.npz", &stored[..stored.len() / 2]);
    expect_format(load_npz(&path), &["zip"]);
    // A flipped byte in a stored member's data fails its checksum.
    let at = stored.windows(6).position(|w| w == b"\x93NUMPY").unwrap() + 130;
    let mut bad = stored.to_vec();
    bad[at] ^= 0x55;
    let path = put(dir.path(), "x.npz", &bad);
    expect_format(load_npz(&path), &["load_npz", "c_f32.npy"]);
    assert!(matches!(
        load_npz(dir.path().join("absent.npz")),
        Err(Error::Io(_))
    ));
}

/// A `.npy` file of version `major`, a raw header dict and data.
fn npy_raw(major: u8, dict: &str, data: &[u8]) -> Vec<u8> {
    let mut out = b"\x93NUMPY".to_vec();
    out.extend_from_slice(&[major, 0]);
    let text = format!("{dict}\n");
    if major == 1 {
        out.extend_from_slice(&(text.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(text.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(data);
    out
}

#[test]
fn hand_written_headers_parse() {
    let dir = tempdir();
    // Double quotes, no trailing comma, odd spacing, Python 2's long integers.
    let dict = r#"{"descr":">u2","fortran_order":True,"shape":(2L,2L)}"#;
    let path = put(
        dir.path(),
        "h.npy",
        &npy_raw(2, dict, &[0, 1, 0, 2, 0, 3, 0, 4]),
    );
    let a = load_npy(&path).unwrap();
    assert_eq!(a.to_vec::<u16>().unwrap(), [1, 3, 2, 4]);
}

#[test]
fn bad_npy_files_are_errors() {
    let dir = tempdir();
    let dict = |descr: &str, shape: &str| {
        format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}")
    };
    let good = dict("<f4", "(2,)");
    let cases: Vec<(&str, Vec<u8>, &[&str])> = vec![
        ("empty", vec![], &["header", "magic"]),
        (
            "no magic",
            b"PK\x03\x04 hello world".to_vec(),
            &["header", "magic"],
        ),
        (
            "version 4",
            npy_raw(4, &good, &[0; 8]),
            &["header", "version 4.0"],
        ),
        (
            "cut in length",
            b"\x93NUMPY\x02\x00\x10".to_vec(),
            &["header"],
        ),
        (
            "length past end",
            {
                let mut b = npy_raw(1, &good, &[0; 8]);
                b[8..10].copy_from_slice(&u16::MAX.to_le_bytes());
                b
            },
            &["header", "past the end"],
        ),
        (
            "v2 length past end",
            {
                let mut b = npy_raw(2, &good, &[0; 8]);
                b[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
                b
            },
            &["header", "past the end"],
        ),
        (
            "short data",
            npy_raw(1, &good, &[0; 7]),
            &["data", "7 bytes", "needs 8"],
        ),
        (
            "long data",
            npy_raw(1, &good, &[0; 9]),
            &["data", "9 bytes"],
        ),
        (
            "complex128",
            npy_raw(1, &dict("<c16", "(1,)"), &[0; 16]),
            &["'<c16'", "not supported"],
        ),
        (
            "strings",
            npy_raw(1, &dict("<U3", "(1,)"), &[0; 12]),
            &["'<U3'"],
        ),
        (
            "objects",
            npy_raw(1, &dict("|O", "(1,)"), &[0; 8]),
            &["'|O'"],
        ),
        (
            "structured",
            npy_raw(
                1,
                "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }",
                &[0; 4],
            ),
            &["structured"],
        ),
        (
            "overflow",
            npy_raw(1, &dict("<f8", "(4294967296, 4294967296, 16)"), &[0; 8]),
            &["too large"],
        ),
        (
            "huge shape",
            npy_raw(1, &dict("<f8", "(99999999999999999999,)"), &[0; 8]),
            &["dimension"],
        ),
        (
            "negative",
            npy_raw(1, &dict("<f8", "(-1,)"), &[0; 8]),
            &["dimension"],
        ),
        (
            "garbage",
            npy_raw(
                1,
                "{'descr': '<f4', 'fortran_order': maybe, 'shape': (2,)}",
                &[0; 8],
            ),
            &["maybe"],
        ),
        (
            "missing key",
            npy_raw(1, "{'descr': '<f4', 'shape': (2,)}", &[0; 8]),
            &["fortran_order"],
        ),
        (
            "extra key",
            npy_raw(
                1,
                "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': True}",
                &[0; 8],
            ),
            &["'x'"],
        ),
        (
            "not utf-8 (v3)",
            npy_raw(3, "{'descr': '\u{ff}'}", &[])
                .into_iter()
                .map(|b| if b == 0xc3 { 0xff } else { b })
                .collect(),
            &["UTF-8"],
        ),
    ];
    for (what, bytes, parts) in cases {
        let path = put(dir.path(), "bad.npy", &bytes);
        let r = load_npy(&path);
        assert!(matches!(r, Err(Error::Format { .. })), "{what}: {r:?}");
        expect_format(r, &[&["load_npy", "bad.npy"][..], parts].concat());
    }
    assert!(matches!(
        load_npy(dir.path().join("absent.npy")),
        Err(Error::Io(_))
    ));
}

#[test]
fn numpy_reads_what_nuvec_writes() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/io_numpy.py");
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let has_numpy = std::process::Command::new(&python)
        .args(["-c", "import numpy"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_numpy {
        println!("numpy_reads_what_nuvec_writes: skipped ({python} with numpy not found)");
        return;
    }
    let dir = tempdir();
    let mut small = HashMap::new();
    for (name, a) in numpy_expected() {
        save_npy(dir.path().join(format!("{name}.npy")), &a).unwrap();
        if ["c_f32", "bool", "i8", "scalar", "empty"].contains(&name) {
            small.insert(name.to_string(), a);
        }
    }
    let bf = Array::from_vec([1.0f32, -2.0, 0.0].map(bf16::from_f32).to_vec(), &[3]).unwrap();
    save_npy(dir.path().join("bf16.npy"), &bf).unwrap();
    save_npz(dir.path().join("stored.npz"), &small).unwrap();
    save_npz_compressed(dir.path().join("deflated.npz"), &small).unwrap();
    let out = std::process::Command::new(&python)
        .arg(script)
        .arg("--check")
        .arg(dir.path())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "numpy's check failed:\n{text}");
    println!("{text}");
}
