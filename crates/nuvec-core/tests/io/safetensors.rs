//! safetensors: round trips, the Python package's files, and bad files.

use std::collections::HashMap;

use nuvec_core::io::{
    load_safetensors, load_safetensors_metadata, load_safetensors_with_metadata, save_safetensors,
};
use nuvec_core::{Array, Complex64, DType, Error, bf16, f16};

use crate::{assert_same, every_dtype, expect_format, fixture, put, tempdir};

#[test]
fn round_trip_every_dtype_and_shape() {
    let dir = tempdir();
    let path = dir.path().join("all.safetensors");
    let arrays: HashMap<String, Array> = every_dtype().into_iter().collect();
    save_safetensors(&path, &arrays, None).unwrap();
    let (back, meta) = load_safetensors_with_metadata(&path).unwrap();
    assert!(meta.is_empty());
    assert_eq!(back.len(), arrays.len());
    for (name, a) in &arrays {
        assert_same(&back[name], a, name);
    }
}

#[test]
fn metadata_round_trip_and_header_only_read() {
    let dir = tempdir();
    let path = dir.path().join("m.safetensors");
    let arrays = HashMap::from([("x".to_string(), Array::scalar(1.5f32))]);
    let meta = HashMap::from([
        ("format".to_string(), "mlx".to_string()),
        ("unicode".to_string(), "naïve ✓".to_string()),
    ]);
    save_safetensors(&path, &arrays, Some(&meta)).unwrap();
    assert_eq!(load_safetensors_metadata(&path).unwrap(), meta);
    let (back, got) = load_safetensors_with_metadata(&path).unwrap();
    assert_eq!(got, meta);
    assert_eq!(back["x"].item::<f32>().unwrap(), 1.5);
    assert_eq!(load_safetensors(&path).unwrap().len(), 1);
}

#[test]
fn no_tensors_at_all() {
    let dir = tempdir();
    let path = dir.path().join("none.safetensors");
    save_safetensors(&path, &HashMap::new(), None).unwrap();
    assert!(load_safetensors(&path).unwrap().is_empty());
}

#[test]
fn views_are_saved_row_major() {
    let dir = tempdir();
    let path = dir.path().join("v.safetensors");
    let a = Array::from_slice(&[1i32, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
    let t = a.t().unwrap();
    let b =
        nuvec_core::broadcast_to(&Array::from_slice(&[7u16, 8], &[2]).unwrap(), &[3, 2]).unwrap();
    let arrays = HashMap::from([("t".to_string(), t), ("b".to_string(), b)]);
    save_safetensors(&path, &arrays, None).unwrap();
    let back = load_safetensors(&path).unwrap();
    assert_eq!(back["t"].shape(), [3, 2]);
    assert_eq!(back["t"].to_vec::<i32>().unwrap(), [1, 4, 2, 5, 3, 6]);
    assert_eq!(back["b"].to_vec::<u16>().unwrap(), [7, 8, 7, 8, 7, 8]);
}

#[test]
fn reads_the_python_package_file() {
    let dir = tempdir();
    let path = put(dir.path(), "p.safetensors", fixture!("python.safetensors"));
    let (t, meta) = load_safetensors_with_metadata(&path).unwrap();
    assert_eq!(meta["format"], "np");
    assert_eq!(meta["note"], "written by safetensors");
    assert_eq!(t.len(), 14);
    assert_eq!(t["bool"].to_vec::<bool>().unwrap(), [true, false, true]);
    assert_eq!(t["u8"].to_vec::<u8>().unwrap(), [0, 7, 255]);
    assert_eq!(t["i8"].to_vec::<i8>().unwrap(), [-128, 0, 127]);
    assert_eq!(t["u16"].to_vec::<u16>().unwrap(), [0, 65535]);
    assert_eq!(t["i16"].to_vec::<i16>().unwrap(), [-32768, 32767]);
    assert_eq!(t["u32"].to_vec::<u32>().unwrap(), [0, u32::MAX]);
    assert_eq!(t["i32"].shape(), [2, 3]);
    assert_eq!(t["i32"].to_vec::<i32>().unwrap(), [-3, -2, -1, 0, 1, 2]);
    assert_eq!(t["u64"].to_vec::<u64>().unwrap(), [u64::MAX]);
    assert_eq!(t["i64"].to_vec::<i64>().unwrap(), [i64::MIN, 5]);
    assert_eq!(t["f16"].shape(), [1, 2]);
    assert_eq!(
        t["f16"].to_vec::<f16>().unwrap(),
        [f16::from_f32(0.5), f16::from_f32(-1.25)]
    );
    let f32s: Vec<f32> = (0..12).map(|k| k as f32 / 4.0).collect();
    assert_eq!(t["f32"].shape(), [3, 4]);
    assert_eq!(t["f32"].to_vec::<f32>().unwrap(), f32s);
    assert_eq!(t["f64"].shape(), [] as [usize; 0]);
    assert_eq!(t["f64"].item::<f64>().unwrap(), std::f64::consts::E);
    assert_eq!(
        t["c64"].to_vec::<Complex64>().unwrap(),
        [Complex64::new(1.0, -1.0), Complex64::new(2.5, 0.5)]
    );
    assert_eq!(t["empty"].shape(), [2, 0]);
    assert_eq!(t["empty"].dtype(), DType::F32);
}

#[test]
fn reads_bfloat16() {
    let dir = tempdir();
    let path = put(dir.path(), "b.safetensors", fixture!("bf16.safetensors"));
    let t = load_safetensors(&path).unwrap();
    assert_eq!(t["w"].shape(), [2, 2]);
    let want = [1.0f32, -3.0, 0.0, f32::INFINITY].map(bf16::from_f32);
    assert_eq!(t["w"].to_vec::<bf16>().unwrap(), want);
}

#[test]
fn an_unsupported_dtype_names_the_tensor_and_dtype() {
    let dir = tempdir();
    let path = put(dir.path(), "f8.safetensors", fixture!("fp8.safetensors"));
    expect_format(
        load_safetensors(&path),
        &["load_safetensors", "'scale'", "F8_E4M3"],
    );
    // The header alone is fine.
    assert!(load_safetensors_metadata(&path).unwrap().is_empty());
}

/// A safetensors file of a raw header and data.
fn raw(header: &str, data: &[u8]) -> Vec<u8> {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

#[test]
fn bad_files_are_errors() {
    let dir = tempdir();
    let ok = r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
    let cases: Vec<(&str, Vec<u8>, &[&str])> = vec![
        ("empty", vec![], &["header"]),
        ("short", vec![1, 2, 3], &["header"]),
        (
            "size past the end",
            {
                let mut b = raw(ok, &[0; 8]);
                b[..8].copy_from_slice(&1000u64.to_le_bytes());
                b
            },
            &["header"],
        ),
        (
            "huge size",
            {
                let mut b = raw(ok, &[0; 8]);
                b[..8].copy_from_slice(&u64::MAX.to_le_bytes());
                b
            },
            &["header"],
        ),
        ("not json", raw("{not json", &[]), &["header"]),
        (
            "not utf-8",
            {
                let mut b = raw("{}  ", &[]);
                b[9] = 0xff;
                b
            },
            &["header"],
        ),
        (
            "unknown dtype",
            raw(
                r#"{"a":{"dtype":"X7","shape":[2],"data_offsets":[0,8]}}"#,
                &[0; 8],
            ),
            &["header"],
        ),
        ("truncated data", raw(ok, &[0; 4]), &["header"]),
        ("extra data", raw(ok, &[0; 12]), &["header"]),
        (
            "size mismatch",
            raw(
                r#"{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#,
                &[0; 8],
            ),
            &["header"],
        ),
        (
            "overlap",
            raw(
                r#"{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}"#,
                &[0; 6],
            ),
            &["header"],
        ),
        (
            "offsets out of range",
            raw(
                r#"{"a":{"dtype":"U8","shape":[4],"data_offsets":[100,104]}}"#,
                &[0; 4],
            ),
            &["header"],
        ),
        (
            "shape overflow",
            raw(
                r#"{"a":{"dtype":"F64","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}}"#,
                &[0; 8],
            ),
            &["header"],
        ),
        (
            "metadata not strings",
            raw(r#"{"__metadata__":{"a":1}}"#, &[]),
            &["header"],
        ),
    ];
    for (what, bytes, parts) in cases {
        let path = put(dir.path(), "bad.safetensors", &bytes);
        let r = load_safetensors(&path);
        assert!(matches!(r, Err(Error::Format { .. })), "{what}: {r:?}");
        expect_format(r, parts);
        assert!(load_safetensors_metadata(&path).is_err(), "{what}");
    }
}

#[test]
fn a_missing_file_is_an_io_error_naming_it() {
    let dir = tempdir();
    let path = dir.path().join("absent.safetensors");
    match load_safetensors(&path) {
        Err(Error::Io(msg)) => assert!(msg.contains("absent.safetensors"), "{msg}"),
        other => panic!("{other:?}"),
    }
    let arrays = HashMap::from([("x".to_string(), Array::scalar(1u8))]);
    assert!(matches!(
        save_safetensors(dir.path().join("no/such/dir/x.safetensors"), &arrays, None),
        Err(Error::Io(_))
    ));
}

#[test]
fn an_array_in_an_error_state_is_not_saved() {
    let dir = tempdir();
    let path = dir.path().join("e.safetensors");
    let bad = Array::from_error(Error::InvalidArgument("broken".into()));
    let arrays = HashMap::from([("x".to_string(), bad)]);
    assert!(save_safetensors(&path, &arrays, None).is_err());
    assert!(!path.exists());
}

#[test]
fn a_bare_file_name_is_in_the_current_folder() {
    // Every other test uses absolute paths, so moving the process's folder is safe here.
    let dir = tempdir();
    std::env::set_current_dir(dir.path()).unwrap();
    let arrays = HashMap::from([("x".to_string(), Array::scalar(2u32))]);
    save_safetensors("bare.safetensors", &arrays, None).unwrap();
    assert_eq!(
        load_safetensors("bare.safetensors").unwrap()["x"]
            .item::<u32>()
            .unwrap(),
        2
    );
    nuvec_core::io::save_npy("bare.npy", &arrays["x"]).unwrap();
    assert_eq!(
        nuvec_core::io::load_npy("bare.npy")
            .unwrap()
            .item::<u32>()
            .unwrap(),
        2
    );
    assert!(dir.path().join("bare.safetensors").exists());
    std::env::set_current_dir(std::env::temp_dir()).unwrap();
}
