//! Shared helpers of nuvec-nn's tests: reading the reference fixtures (JSON of
//! `{"shape": [...], "data": [...]}` arrays, written by `fixtures/make_reference.py`) and
//! comparing arrays with them.

#![allow(dead_code)]

use nuvec_core::Array;
use serde_json::Value;

/// The default relative and absolute tolerances for float32 results against float64
/// references.
pub const RTOL: f64 = 1e-5;
pub const ATOL: f64 = 1e-6;

pub fn parse(json: &str) -> Value {
    serde_json::from_str(json).expect("a fixture is valid JSON")
}

pub fn shape(v: &Value) -> Vec<usize> {
    v["shape"]
        .as_array()
        .expect("an array has a shape")
        .iter()
        .map(|d| d.as_u64().expect("a dimension") as usize)
        .collect()
}

pub fn f64s(v: &Value) -> Vec<f64> {
    v["data"]
        .as_array()
        .expect("an array has data")
        .iter()
        .map(|x| x.as_f64().expect("a number"))
        .collect()
}

/// A float32 array of the fixture's values (stored exactly: they were drawn in float32).
pub fn array(v: &Value) -> Array {
    let data: Vec<f32> = f64s(v).iter().map(|&x| x as f32).collect();
    Array::from_vec(data, &shape(v)).expect("the data fills the shape")
}

/// An int32 array of the fixture's integers.
pub fn int_array(v: &Value) -> Array {
    let data: Vec<i32> = f64s(v).iter().map(|&x| x as i32).collect();
    Array::from_vec(data, &shape(v)).expect("the data fills the shape")
}

pub fn values(a: &Array) -> Vec<f32> {
    a.astype(nuvec_core::DType::F32)
        .expect("a float32 copy")
        .to_vec::<f32>()
        .expect("the array evaluates")
}

/// Asserts `|got − want| <= atol + rtol · |want|` elementwise.
pub fn close_values(what: &str, got: &[f32], want: &[f64], rtol: f64, atol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (f64::from(g) - w).abs();
        assert!(
            err <= atol + rtol * w.abs(),
            "{what}[{i}]: got {g}, want {w} (error {err:e})"
        );
    }
}

/// Asserts that `got` has the fixture's shape and values (within `rtol`, `atol`).
pub fn close_tol(what: &str, got: &Array, want: &Value, rtol: f64, atol: f64) {
    assert_eq!(got.shape(), shape(want).as_slice(), "{what}: shapes differ");
    close_values(what, &values(got), &f64s(want), rtol, atol);
}

/// [`close_tol`] with the default tolerances.
pub fn close(what: &str, got: &Array, want: &Value) {
    close_tol(what, got, want, RTOL, ATOL);
}

/// `sum(y · w)`: the scalar whose gradient the fixtures record.
pub fn weighted_sum(y: &Array, w: &Array) -> nuvec_core::Result<Array> {
    nuvec_core::sum(&nuvec_core::multiply(y, w)?, &[], false)
}
