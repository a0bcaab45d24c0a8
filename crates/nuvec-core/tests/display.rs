//! Printing: each expected string is what NumPy 2's `repr` prints for the same array (with
//! MLX's lowercase `true`/`false` for booleans).

use nuvec_core::*;

/// `vals` as an array of `dtype` with shape `shape`.
fn arr(vals: &[f64], shape: &[usize], dtype: DType) -> Array {
    Array::from_slice(vals, shape)
        .unwrap()
        .astype(dtype)
        .unwrap()
}

/// 0, 1, 2, ... as f64.
fn range(n: usize) -> Vec<f64> {
    (0..n).map(|i| i as f64).collect()
}

fn check(a: &Array, want: &str) {
    assert_eq!(format!("{a}"), want);
    assert_eq!(format!("{a:?}"), want);
}

#[test]
fn floats_align_on_the_point_with_a_trailing_dot() {
    check(
        &arr(&[1.0, 2.0, 3.0, 4.0], &[2, 2], DType::F16),
        "array([[1., 2.],\n       [3., 4.]], dtype=float16)",
    );
    check(
        &arr(&[1.0, 2.5, 3.0, 4.0], &[2, 2], DType::F16),
        "array([[1. , 2.5],\n       [3. , 4. ]], dtype=float16)",
    );
    check(
        &arr(&[1.5, 2.25, -10.0], &[3], DType::F64),
        "array([  1.5 ,   2.25, -10.  ])",
    );
    check(
        &arr(&[-0.0, 0.0, 1.0], &[3], DType::F32),
        "array([-0.,  0.,  1.], dtype=float32)",
    );
}

#[test]
fn floats_print_their_shortest_digits_in_their_own_type() {
    let thirds = [0.1, 0.2, 0.3, 1.0 / 3.0];
    check(
        &arr(&thirds, &[4], DType::F32),
        "array([0.1       , 0.2       , 0.3       , 0.33333334], dtype=float32)",
    );
    check(
        &arr(&thirds, &[4], DType::F16),
        "array([0.1   , 0.2   , 0.3   , 0.3333], dtype=float16)",
    );
    check(
        &arr(&thirds, &[4], DType::F64),
        "array([0.1       , 0.2       , 0.3       , 0.33333333])",
    );
    // At most 8 decimals, rounded.
    check(
        &arr(&[0.999999999, 0.123456789123], &[2], DType::F64),
        "array([1.        , 0.12345679])",
    );
    // bfloat16's 0.1 is 0.10009765625; its shortest form is 0.1.
    check(
        &arr(&[0.1, 1.0], &[2], DType::BF16),
        "array([0.1, 1. ], dtype=bfloat16)",
    );
}

#[test]
fn scientific_notation_when_magnitudes_call_for_it() {
    check(
        &arr(&[1e-5, 1.5e10, 0.0], &[3], DType::F32),
        "array([1.0e-05, 1.5e+10, 0.0e+00], dtype=float32)",
    );
    // The cutoff follows the type's precision: 1e6 for float32, 1e3 for float16, 1e8 for
    // float64.
    check(
        &arr(&[1e6, 5e5], &[2], DType::F32),
        "array([1.e+06, 5.e+05], dtype=float32)",
    );
    check(
        &arr(&[1000.0, 500.0], &[2], DType::F16),
        "array([1.e+03, 5.e+02], dtype=float16)",
    );
    check(
        &arr(&[1e6, 5e5], &[2], DType::F64),
        "array([1000000.,  500000.])",
    );
    check(
        &arr(&[1e8, 5e7], &[2], DType::F64),
        "array([1.e+08, 5.e+07])",
    );
    // Digits past the shortest ones are the value's own (the float32 nearest 1e-45).
    check(
        &arr(&[3.4e38, 1e-45, -1.0], &[3], DType::F32),
        "array([ 3.4e+38,  1.4e-45, -1.0e+00], dtype=float32)",
    );
}

#[test]
fn nan_and_infinities_take_the_common_width() {
    check(
        &arr(&[f64::NAN, 1.0, f64::INFINITY, -2.0], &[4], DType::F32),
        "array([nan,  1., inf, -2.], dtype=float32)",
    );
    check(
        &arr(&[f64::NAN, f64::NEG_INFINITY], &[2], DType::F32),
        "array([ nan, -inf], dtype=float32)",
    );
    check(&Array::scalar(f64::NAN), "array(nan)");
}

#[test]
fn integers_pad_to_the_widest() {
    check(
        &arr(&[1.0, -10.0, 100.0], &[3], DType::I32),
        "array([  1, -10, 100], dtype=int32)",
    );
    check(
        &arr(&[1.0, 2.0, 3.0, 4.0, 5.0, 255.0], &[2, 3], DType::U8),
        "array([[  1,   2,   3],\n       [  4,   5, 255]], dtype=uint8)",
    );
    check(
        &arr(&[1.0, 2.0, 3.0, 4.0], &[2, 2], DType::I64),
        "array([[1, 2],\n       [3, 4]])",
    );
    check(
        &Array::from_slice(&[u64::MAX, 0], &[2]).unwrap(),
        "array([18446744073709551615,                    0], dtype=uint64)",
    );
    check(
        &Array::from_slice(&[i64::MIN, i64::MAX], &[2]).unwrap(),
        "array([-9223372036854775808,  9223372036854775807])",
    );
}

#[test]
fn booleans_print_as_mlx_does() {
    check(
        &Array::from_slice(&[true, false, true], &[3]).unwrap(),
        "array([ true, false,  true])",
    );
    check(&Array::scalar(true), "array(true)");
}

#[test]
fn complex_numbers_format_both_parts() {
    let c = |re: f32, im: f32| Complex64::new(re, im);
    check(
        &Array::from_slice(&[c(1.0, 2.0), c(3.5, -1.0)], &[2]).unwrap(),
        "array([1. +2.j, 3.5-1.j], dtype=complex64)",
    );
    check(
        &Array::from_slice(
            &[c(0.0, 0.0), c(1e-5, 1e5), c(f32::NAN, f32::INFINITY)],
            &[3],
        )
        .unwrap(),
        "array([0.e+00     +0.j, 1.e-05+100000.j,    nan    +infj], dtype=complex64)",
    );
    check(
        &Array::scalar(c(1.5, -2.0)),
        "array(1.5-2.j, dtype=complex64)",
    );
}

#[test]
fn zero_dimensional_and_empty_arrays() {
    check(&Array::scalar(1.5f32), "array(1.5, dtype=float32)");
    check(&Array::scalar(1.0f64), "array(1.)");
    check(&Array::scalar(7i32), "array(7, dtype=int32)");
    let empty = |shape: &[usize], dtype| arr(&[], shape, dtype);
    check(
        &empty(&[0, 3], DType::F32),
        "array([], shape=(0, 3), dtype=float32)",
    );
    check(&empty(&[0], DType::F32), "array([], dtype=float32)");
    check(&empty(&[0], DType::F64), "array([], dtype=float64)");
    check(
        &empty(&[3, 0], DType::I64),
        "array([], shape=(3, 0), dtype=int64)",
    );
}

#[test]
fn long_rows_wrap_and_the_dtype_moves_to_its_own_line() {
    check(
        &arr(&range(30), &[30], DType::F64),
        "array([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12.,\n       \
         13., 14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25.,\n       \
         26., 27., 28., 29.])",
    );
    let halves = |n: usize| {
        arr(
            &(0..n).map(|i| i as f64 * 1.5).collect::<Vec<_>>(),
            &[n],
            DType::F32,
        )
    };
    check(
        &halves(10),
        "array([ 0. ,  1.5,  3. ,  4.5,  6. ,  7.5,  9. , 10.5, 12. , 13.5],\n      \
         dtype=float32)",
    );
    check(
        &halves(11),
        "array([ 0. ,  1.5,  3. ,  4.5,  6. ,  7.5,  9. , 10.5, 12. , 13.5, 15. ],\n      \
         dtype=float32)",
    );
    check(
        &halves(12),
        "array([ 0. ,  1.5,  3. ,  4.5,  6. ,  7.5,  9. , 10.5, 12. , 13.5, 15. ,\n       \
         16.5], dtype=float32)",
    );
}

#[test]
fn higher_dimensions_separate_blocks_with_blank_lines() {
    let vals: Vec<f64> = (0..24).map(|i| i as f64 - 20.0).collect();
    check(
        &arr(&vals, &[2, 3, 4], DType::I8),
        "array([[[-20, -19, -18, -17],\n        [-16, -15, -14, -13],\n        \
         [-12, -11, -10,  -9]],\n\n       [[ -8,  -7,  -6,  -5],\n        \
         [ -4,  -3,  -2,  -1],\n        [  0,   1,   2,   3]]], dtype=int8)",
    );
}

#[test]
fn large_arrays_are_summarised_with_their_shape() {
    check(
        &arr(&range(2000), &[2000], DType::I32),
        "array([   0,    1,    2, ..., 1997, 1998, 1999],\n      shape=(2000,), dtype=int32)",
    );
    check(
        &arr(&vec![0.0; 3000], &[1000, 3], DType::F64),
        "array([[0., 0., 0.],\n       [0., 0., 0.],\n       [0., 0., 0.],\n       ...,\n       \
         [0., 0., 0.],\n       [0., 0., 0.],\n       [0., 0., 0.]], shape=(1000, 3))",
    );
    // Only the elements shown decide the format (here: scientific, 3 decimals).
    check(
        &arr(&range(1200), &[2, 3, 200], DType::F32),
        "array([[[0.000e+00, 1.000e+00, 2.000e+00, ..., 1.970e+02, 1.980e+02,\n         \
         1.990e+02],\n        [2.000e+02, 2.010e+02, 2.020e+02, ..., 3.970e+02, 3.980e+02,\n         \
         3.990e+02],\n        [4.000e+02, 4.010e+02, 4.020e+02, ..., 5.970e+02, 5.980e+02,\n         \
         5.990e+02]],\n\n       [[6.000e+02, 6.010e+02, 6.020e+02, ..., 7.970e+02, 7.980e+02,\n         \
         7.990e+02],\n        [8.000e+02, 8.010e+02, 8.020e+02, ..., 9.970e+02, 9.980e+02,\n         \
         9.990e+02],\n        [1.000e+03, 1.001e+03, 1.002e+03, ..., 1.197e+03, 1.198e+03,\n         \
         1.199e+03]]], shape=(2, 3, 200), dtype=float32)",
    );
}

#[test]
fn views_print_in_logical_order() {
    let x = arr(&[1.0, 2.0, 3.0, 40.0, 50.0, 60.0], &[2, 3], DType::I32);
    check(
        &x.t().unwrap(),
        "array([[ 1, 40],\n       [ 2, 50],\n       [ 3, 60]], dtype=int32)",
    );
    let row = arr(&[0.5, -1.25], &[2], DType::F32);
    check(
        &broadcast_to(&row, &[3, 2]).unwrap(),
        "array([[ 0.5 , -1.25],\n       [ 0.5 , -1.25],\n       [ 0.5 , -1.25]], dtype=float32)",
    );
    // A lazy result is computed to print.
    check(
        &(&x * 2).reshape(&[6]).unwrap(),
        "array([  2,   4,   6,  80, 100, 120], dtype=int32)",
    );
}

#[test]
fn arrays_in_an_error_state_print_the_error() {
    let bad = Array::from_error(Error::InvalidArgument("add: shapes differ".into()));
    check(&bad, "array(<error: add: shapes differ>)");
    let x = Array::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    let y = Array::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
    let sum = &x + &y;
    let text = format!("{sum}");
    assert!(
        text.starts_with("array(<error: ") && text.contains("[2]"),
        "{text}"
    );
}
