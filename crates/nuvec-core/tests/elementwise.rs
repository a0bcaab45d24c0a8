//! Unary, binary and ternary elementwise ops and casts against f64 references, on contiguous,
//! transposed, broadcast and empty inputs, across dtypes.

mod common;

use common::Rng;
use nuvec_core::*;

/// The array's elements as f64, in row-major order.
fn values(a: &Array) -> Vec<f64> {
    a.astype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

/// `vals` (row-major `[r, c]`) in several layouts of the same logical array: contiguous, a
/// transposed view, and (when every row is equal) a broadcast view.
fn layouts(vals: &[f64], r: usize, c: usize, dtype: DType) -> Vec<(&'static str, Array)> {
    let mk =
        |v: &[f64], shape: &[usize]| Array::from_slice(v, shape).unwrap().astype(dtype).unwrap();
    let mut out = vec![("contiguous", mk(vals, &[r, c]))];
    let mut t = vec![0.0; r * c];
    for i in 0..r {
        for j in 0..c {
            t[j * r + i] = vals[i * c + j];
        }
    }
    out.push(("transposed", mk(&t, &[c, r]).t().unwrap()));
    out
}

/// Tolerance relative to max(|want|, 1) for results in `dtype`.
fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 2e-3,
        DType::BF16 => 1.6e-2,
        DType::F32 => 2e-6,
        _ => 1e-12,
    }
}

fn assert_close(name: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{name}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= tol * w.abs().max(1.0);
        assert!(ok, "{name}: element {i}: got {g}, want {w}");
    }
}

type UnaryCase = (
    &'static str,
    fn(&Array) -> Result<Array>,
    fn(f64) -> f64,
    (f64, f64),
);

fn sigmoid_ref(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

const UNARY: &[UnaryCase] = &[
    ("abs", abs, f64::abs, (-3.0, 3.0)),
    ("negative", negative, |x| -x, (-3.0, 3.0)),
    (
        "sign",
        sign,
        |x| {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                0.0
            }
        },
        (-3.0, 3.0),
    ),
    ("square", square, |x| x * x, (-3.0, 3.0)),
    ("sqrt", sqrt, f64::sqrt, (0.01, 4.0)),
    ("rsqrt", rsqrt, |x| 1.0 / x.sqrt(), (0.01, 4.0)),
    ("reciprocal", reciprocal, |x| 1.0 / x, (0.5, 4.0)),
    ("exp", exp, f64::exp, (-5.0, 5.0)),
    ("expm1", expm1, f64::exp_m1, (-1.0, 1.0)),
    ("log", log, f64::ln, (0.01, 4.0)),
    ("log1p", log1p, f64::ln_1p, (-0.5, 4.0)),
    ("log2", log2, f64::log2, (0.01, 4.0)),
    ("log10", log10, f64::log10, (0.01, 4.0)),
    ("sin", sin, f64::sin, (-3.0, 3.0)),
    ("cos", cos, f64::cos, (-3.0, 3.0)),
    ("tan", tan, f64::tan, (-1.2, 1.2)),
    ("arcsin", arcsin, f64::asin, (-0.9, 0.9)),
    ("arccos", arccos, f64::acos, (-0.9, 0.9)),
    ("arctan", arctan, f64::atan, (-3.0, 3.0)),
    ("sinh", sinh, f64::sinh, (-3.0, 3.0)),
    ("cosh", cosh, f64::cosh, (-3.0, 3.0)),
    ("tanh", tanh, f64::tanh, (-3.0, 3.0)),
    ("arcsinh", arcsinh, f64::asinh, (-3.0, 3.0)),
    ("arccosh", arccosh, f64::acosh, (1.1, 4.0)),
    ("arctanh", arctanh, f64::atanh, (-0.9, 0.9)),
    ("sigmoid", sigmoid, sigmoid_ref, (-6.0, 6.0)),
    ("erf", erf, libm::erf, (-2.0, 2.0)),
    ("floor", floor, f64::floor, (-3.0, 3.0)),
    ("ceil", ceil, f64::ceil, (-3.0, 3.0)),
    ("trunc", trunc, f64::trunc, (-3.0, 3.0)),
];

#[test]
fn unary_float_ops_match_f64_references_in_every_layout() {
    let mut rng = Rng::new(1);
    let (r, c) = (5, 7);
    for &(name, op, reference, (lo, hi)) in UNARY {
        let vals: Vec<f64> = (0..r * c).map(|_| rng.range(lo, hi)).collect();
        for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
            for (layout, x) in layouts(&vals, r, c, dtype) {
                let y = op(&x).unwrap();
                assert_eq!(y.dtype(), dtype, "{name} {dtype}");
                assert_eq!(y.shape(), [r, c]);
                // The reference starts from the values as stored in `dtype`.
                let want: Vec<f64> = values(&x).into_iter().map(reference).collect();
                let got = values(&y);
                // Rounding ops are exact; the others round once to `dtype`.
                assert_close(&format!("{name} {dtype} {layout}"), &got, &want, tol(dtype));
            }
        }
    }
}

#[test]
fn erfinv_inverts_erf_and_round_ties_to_even() {
    let x = Array::from_slice(&[-0.9f64, -0.3, 0.0, 0.5, 0.99], &[5]).unwrap();
    let back: Vec<f64> = values(&erfinv(&x).unwrap())
        .into_iter()
        .map(libm::erf)
        .collect();
    assert_close("erfinv", &back, &values(&x), 1e-12);
    let x = Array::from_slice(&[0.5f32, 1.5, 2.5, -0.5, -1.5, 2.4], &[6]).unwrap();
    assert_eq!(
        round(&x, 0).unwrap().to_vec::<f32>().unwrap(),
        [0.0, 2.0, 2.0, -0.0, -2.0, 2.0]
    );
    let x = Array::from_slice(&[1.2345f64, -2.5678], &[2]).unwrap();
    assert_close(
        "round 2",
        &values(&round(&x, 2).unwrap()),
        &[1.23, -2.57],
        1e-12,
    );
}

#[test]
fn float_functions_of_integers_give_float32() {
    let x = Array::from_slice(&[1i32, 4, 9], &[3]).unwrap();
    let y = sqrt(&x).unwrap();
    assert_eq!(y.dtype(), DType::F32);
    assert_eq!(y.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0]);
    let b = Array::from_slice(&[true, false], &[2]).unwrap();
    assert_eq!(
        exp(&b).unwrap().to_vec::<f32>().unwrap(),
        [std::f32::consts::E, 1.0]
    );
}

#[test]
fn integer_unary_ops_wrap_like_c() {
    let x = Array::from_slice(&[-128i8, -3, 0, 5, 127], &[5]).unwrap();
    assert_eq!(
        abs(&x).unwrap().to_vec::<i8>().unwrap(),
        [-128, 3, 0, 5, 127]
    );
    assert_eq!(
        negative(&x).unwrap().to_vec::<i8>().unwrap(),
        [-128, 3, 0, -5, -127]
    );
    assert_eq!(sign(&x).unwrap().to_vec::<i8>().unwrap(), [-1, -1, 0, 1, 1]);
    assert_eq!(
        square(&x).unwrap().to_vec::<i8>().unwrap(),
        [0, 9, 0, 25, 1]
    );
    assert_eq!(
        bitwise_invert(&x).unwrap().to_vec::<i8>().unwrap(),
        [127, 2, -1, -6, -128]
    );
    let u = Array::from_slice(&[0u32, 7], &[2]).unwrap();
    assert_eq!(floor(&u).unwrap().to_vec::<u32>().unwrap(), [0, 7]);
    assert_eq!(
        logical_not(&u).unwrap().to_vec::<bool>().unwrap(),
        [true, false]
    );
    assert_eq!(isnan(&u).unwrap().to_vec::<bool>().unwrap(), [false, false]);
    assert!(negative(&Array::scalar(true)).is_err());
    assert!(bitwise_invert(&Array::scalar(1.0f32)).is_err());
    assert!(sqrt(&Array::scalar(Complex64::new(-4.0, 0.0))).is_ok());
}

#[test]
fn predicates_see_nan_and_infinity() {
    let x = Array::from_slice(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1.0], &[4]).unwrap();
    let b = |a: Result<Array>| a.unwrap().to_vec::<bool>().unwrap();
    assert_eq!(b(isnan(&x)), [true, false, false, false]);
    assert_eq!(b(isinf(&x)), [false, true, true, false]);
    assert_eq!(b(isposinf(&x)), [false, true, false, false]);
    assert_eq!(b(isneginf(&x)), [false, false, true, false]);
    assert_eq!(b(isfinite(&x)), [false, false, false, true]);
    let clean = nan_to_num(&x, 0.0, None, Some(-1.0))
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(clean, [0.0, f32::MAX, -1.0, 1.0]);
}

type BinaryCase = (
    &'static str,
    fn(&Array, &Array) -> Result<Array>,
    fn(f64, f64) -> f64,
);

fn python_mod(a: f64, b: f64) -> f64 {
    let r = a % b;
    if r != 0.0 && (r < 0.0) != (b < 0.0) {
        r + b
    } else {
        r
    }
}

fn logaddexp_ref(a: f64, b: f64) -> f64 {
    let m = a.max(b);
    m + ((a - m).exp() + (b - m).exp()).ln()
}

const BINARY: &[BinaryCase] = &[
    ("add", |a, b| add(a, b), |a, b| a + b),
    ("subtract", |a, b| subtract(a, b), |a, b| a - b),
    ("multiply", |a, b| multiply(a, b), |a, b| a * b),
    ("divide", |a, b| divide(a, b), |a, b| a / b),
    (
        "floor_divide",
        |a, b| floor_divide(a, b),
        |a, b| (a / b).floor(),
    ),
    ("remainder", |a, b| remainder(a, b), python_mod),
    ("power", |a, b| power(a, b), f64::powf),
    ("maximum", |a, b| maximum(a, b), f64::max),
    ("minimum", |a, b| minimum(a, b), f64::min),
    ("arctan2", |a, b| arctan2(a, b), f64::atan2),
    ("logaddexp", |a, b| logaddexp(a, b), logaddexp_ref),
];

#[test]
fn binary_float_ops_match_f64_references_with_broadcasting() {
    let mut rng = Rng::new(2);
    let (r, c) = (4, 6);
    for &(name, op, reference) in BINARY {
        let av: Vec<f64> = (0..r * c).map(|_| rng.range(0.5, 3.0)).collect();
        let bv: Vec<f64> = (0..r * c)
            .map(|_| rng.range(0.5, 2.0) * if rng.f64() < 0.0 { -1.0 } else { 1.0 })
            .collect();
        let av: Vec<f64> = if name == "power" {
            av
        } else {
            av.iter()
                .map(|x| x * if rng.f64() < 0.0 { -1.0 } else { 1.0 })
                .collect()
        };
        let bv: Vec<f64> = if name == "power" {
            bv.iter().map(|x| x.abs()).collect()
        } else {
            bv
        };
        for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
            for ((la, a), (lb, b)) in layouts(&av, r, c, dtype)
                .into_iter()
                .zip(layouts(&bv, r, c, dtype).into_iter().rev())
            {
                let y = op(&a, &b).unwrap();
                assert_eq!(y.dtype(), dtype);
                let want: Vec<f64> = values(&a)
                    .iter()
                    .zip(values(&b))
                    .map(|(&x, y)| reference(x, y))
                    .collect();
                assert_close(
                    &format!("{name} {dtype} {la}/{lb}"),
                    &values(&y),
                    &want,
                    tol(dtype) * 2.0,
                );
            }
            // A row broadcast against a column: [r, 1] with [1, c].
            let col = Array::from_slice(&av[..r], &[r, 1])
                .unwrap()
                .astype(dtype)
                .unwrap();
            let row = Array::from_slice(&bv[..c], &[c])
                .unwrap()
                .astype(dtype)
                .unwrap();
            let y = op(&col, &row).unwrap();
            assert_eq!(y.shape(), [r, c]);
            let (cv, rv) = (values(&col), values(&row));
            let want: Vec<f64> = (0..r * c)
                .map(|k| reference(cv[k / c], rv[k % c]))
                .collect();
            assert_close(
                &format!("{name} {dtype} outer"),
                &values(&y),
                &want,
                tol(dtype) * 2.0,
            );
        }
    }
}

#[test]
fn integer_binary_ops_follow_python_and_wrap() {
    let a = Array::from_slice(&[7i32, -7, 7, -7, i32::MAX, 5], &[6]).unwrap();
    let b = Array::from_slice(&[2i32, 2, -2, -2, 1, 0], &[6]).unwrap();
    let v = |x: Result<Array>| x.unwrap().to_vec::<i32>().unwrap();
    assert_eq!(v(floor_divide(&a, &b)), [3, -4, -4, 3, i32::MAX, 0]);
    assert_eq!(v(remainder(&a, &b)), [1, 1, -1, -1, 0, 0]);
    assert_eq!(v(add(&a, &b)), [9, -5, 5, -9, i32::MIN, 5]);
    assert_eq!(v(power(&a, 2)), [49, 49, 49, 49, 1, 25]);
    assert_eq!(v(maximum(&a, &b)), [7, 2, 7, -2, i32::MAX, 5]);
    let m = Array::from_slice(&[i32::MIN], &[1]).unwrap();
    assert_eq!(v(floor_divide(&m, -1)), [i32::MIN]);
    let x = Array::from_slice(&[0b1100u8, 0b1010], &[2]).unwrap();
    let y = Array::from_slice(&[0b1010u8, 0b0110], &[2]).unwrap();
    let u = |x: Result<Array>| x.unwrap().to_vec::<u8>().unwrap();
    assert_eq!(u(bitwise_and(&x, &y)), [0b1000, 0b0010]);
    assert_eq!(u(bitwise_or(&x, &y)), [0b1110, 0b1110]);
    assert_eq!(u(bitwise_xor(&x, &y)), [0b0110, 0b1100]);
    assert_eq!(u(left_shift(&x, 4)), [0b1100_0000, 0b1010_0000]);
    assert_eq!(u(right_shift(&x, 9)), [0, 0]);
    let s = Array::from_slice(&[-16i16], &[1]).unwrap();
    assert_eq!(right_shift(&s, 2).unwrap().to_vec::<i16>().unwrap(), [-4]);
    assert!(left_shift(Array::scalar(1.0f32), 1).is_err());
    assert!(bitwise_and(Array::scalar(1.0f32), 1).is_err());
}

#[test]
fn comparisons_and_logic_give_booleans() {
    let a = Array::from_slice(&[1.0f32, 2.0, f32::NAN], &[3]).unwrap();
    let b = |x: Result<Array>| x.unwrap().to_vec::<bool>().unwrap();
    assert_eq!(b(equal(&a, 2.0)), [false, true, false]);
    assert_eq!(b(not_equal(&a, 2.0)), [true, false, true]);
    assert_eq!(b(less(&a, 2)), [true, false, false]);
    assert_eq!(b(less_equal(&a, 2)), [true, true, false]);
    assert_eq!(b(greater(&a, 1)), [false, true, false]);
    assert_eq!(b(greater_equal(&a, 1)), [true, true, false]);
    let p = Array::from_slice(&[true, true, false, false], &[4]).unwrap();
    let q = Array::from_slice(&[1i32, 0, 3, 0], &[4]).unwrap();
    assert_eq!(b(logical_and(&p, &q)), [true, false, false, false]);
    assert_eq!(b(logical_or(&p, &q)), [true, true, true, false]);
    assert_eq!(b(logical_xor(&p, &q)), [false, true, true, false]);
    let z = Array::from_slice(&[Complex64::new(1.0, 2.0)], &[1]).unwrap();
    assert!(less(&z, &z).is_err());
    assert_eq!(b(equal(&z, &z)), [true]);
}

#[test]
fn closeness_and_equality() {
    let a = Array::from_slice(&[1.0f32, 2.0, f32::NAN, f32::INFINITY], &[4]).unwrap();
    let b = Array::from_slice(&[1.0f32 + 1e-7, 2.1, f32::NAN, f32::INFINITY], &[4]).unwrap();
    let got = isclose(&a, &b, 1e-5, 1e-8, false)
        .unwrap()
        .to_vec::<bool>()
        .unwrap();
    assert_eq!(got, [true, false, false, true]);
    let got = isclose(&a, &b, 1e-5, 1e-8, true)
        .unwrap()
        .to_vec::<bool>()
        .unwrap();
    assert_eq!(got, [true, false, true, true]);
}

#[test]
fn where_selects_with_broadcasting_and_promotion() {
    let cond = Array::from_slice(&[true, false, true], &[3]).unwrap();
    let x = Array::from_slice(&[1i32, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
    let y = where_(&cond, &x, 0.5).unwrap();
    assert_eq!(y.dtype(), DType::F32);
    assert_eq!(y.to_vec::<f32>().unwrap(), [1.0, 0.5, 3.0, 4.0, 0.5, 6.0]);
    let y = where_(&cond, x.t().unwrap().t().unwrap(), -1).unwrap();
    assert_eq!(y.to_vec::<i32>().unwrap(), [1, -1, 3, 4, -1, 6]);
    // An integer condition means nonzero.
    let c = Array::from_slice(&[0u8, 3], &[2]).unwrap();
    assert_eq!(
        where_(&c, 1.0f32, 2.0f32).unwrap().to_vec::<f32>().unwrap(),
        [2.0, 1.0]
    );
    assert!(where_(&cond, Array::from_slice(&[1.0f32; 2], &[2]).unwrap(), 0.0).is_err());
}

#[test]
fn casts_between_every_pair_of_types_match_c_casts() {
    let vals = [-3.75f64, -1.0, 0.0, 0.5, 1.0, 2.25, 200.0];
    for from in DType::ALL {
        for to in DType::ALL {
            if to == DType::C64 {
                continue;
            }
            let x = Array::from_slice(&vals, &[vals.len()])
                .unwrap()
                .astype(from)
                .unwrap();
            let stored = values(&x.astype(DType::F64).unwrap());
            // Integer sources convert to integers exactly (wrapping), not through f64.
            let exact: Vec<i64> = if from.is_integer() {
                x.astype(DType::I64).unwrap().to_vec::<i64>().unwrap()
            } else {
                stored.iter().map(|&s| s as i64).collect()
            };
            let y = x.astype(to).unwrap();
            assert_eq!(y.dtype(), to);
            let got = values(&y);
            for (i, (&s, &g)) in stored.iter().zip(&got).enumerate() {
                let e = exact[i];
                let want = match to {
                    DType::Bool => f64::from(u8::from(s != 0.0)),
                    DType::U8 => f64::from(e as u8),
                    DType::U16 => f64::from(e as u16),
                    DType::U32 => f64::from(e as u32),
                    DType::U64 => (e as u64) as f64,
                    DType::I8 => f64::from(e as i8),
                    DType::I16 => f64::from(e as i16),
                    DType::I32 => f64::from(e as i32),
                    DType::I64 => e as f64,
                    DType::F16 => f64::from(f16::from_f64(s)),
                    DType::BF16 => f64::from(bf16::from_f64(s)),
                    DType::F32 => f64::from(s as f32),
                    _ => s,
                };
                assert_eq!(g, want, "{from} -> {to} element {i}");
            }
        }
    }
}

#[test]
fn weak_scalars_take_the_array_type() {
    let h = Array::from_slice(&[1.0f32, 2.0], &[2])
        .unwrap()
        .astype(DType::F16)
        .unwrap();
    assert_eq!(add(&h, 1.5f64).unwrap().dtype(), DType::F16);
    let i = Array::from_slice(&[1u8, 2], &[2]).unwrap();
    assert_eq!(add(&i, 1).unwrap().dtype(), DType::U8);
    assert_eq!(add(&i, 1.0).unwrap().dtype(), DType::F32);
    assert_eq!(divide(&i, 2).unwrap().dtype(), DType::F32);
    let b = Array::from_slice(&[true], &[1]).unwrap();
    assert_eq!(add(&b, 1).unwrap().dtype(), DType::I32);
    assert_eq!(add(1, 2).unwrap().dtype(), DType::I32);
    assert_eq!(divide(1.0, 2).unwrap().item::<f32>().unwrap(), 0.5);
    assert_eq!((2.0f32 * &h).dtype(), DType::F16);
}

#[test]
fn empty_arrays_flow_through_every_elementwise_kind() {
    let e = Array::from_slice::<f32>(&[], &[0, 3]).unwrap();
    assert_eq!(exp(&e).unwrap().shape(), [0, 3]);
    assert_eq!(
        add(&e, 1.0).unwrap().to_vec::<f32>().unwrap(),
        Vec::<f32>::new()
    );
    let row = Array::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
    assert_eq!(multiply(&e, &row).unwrap().shape(), [0, 3]);
    assert_eq!(
        e.astype(DType::I8).unwrap().to_vec::<i8>().unwrap(),
        Vec::<i8>::new()
    );
    assert_eq!(
        where_(greater(&e, 0).unwrap(), &e, 1.0).unwrap().shape(),
        [0, 3]
    );
}

#[test]
fn bad_inputs_are_errors_naming_the_op() {
    let a = Array::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
    let b = Array::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    match add(&a, &b) {
        Err(Error::IncompatibleShapes { op, .. }) => assert_eq!(op, "add"),
        other => panic!("expected a shape error, got {other:?}"),
    }
    match arctan2(Array::scalar(1i32), Array::scalar(1i32)) {
        Ok(y) => assert_eq!(y.dtype(), DType::F32),
        Err(e) => panic!("{e}"),
    }
    // Operators carry the error to the next op and to eval.
    let bad = &a + &b;
    assert!(bad.error().is_some());
    assert!(exp(&bad).is_err());
    assert!(bad.eval().is_err());
    assert!((&bad * 2.0).eval().is_err());
}

/// Outputs beyond the streaming threshold (8 MiB) take the path that computes blocks into a
/// buffer and streams them out; sizes that are not multiples of the block or the vector width
/// exercise its unaligned head and tail.
#[test]
fn large_outputs_match_elementwise_references() {
    let n = (9 << 20) + 3;
    let a: Vec<f32> = (0..n).map(|i| ((i % 1000) as f32) * 0.01 - 5.0).collect();
    let b: Vec<f32> = (0..n).map(|i| ((i % 777) as f32) * 0.02 - 7.0).collect();
    let x = Array::from_slice(&a, &[n]).unwrap();
    let y = Array::from_slice(&b, &[n]).unwrap();
    let sum = add(&x, &y).unwrap().to_vec::<f32>().unwrap();
    let below = less(&x, &y).unwrap().to_vec::<bool>().unwrap();
    let e = exp(&x).unwrap().to_vec::<f32>().unwrap();
    for i in (0..n).step_by(997).chain(n - 40..n) {
        assert_eq!(sum[i], a[i] + b[i], "add at {i}");
        assert_eq!(below[i], a[i] < b[i], "less at {i}");
        let want = f64::from(a[i]).exp();
        assert!(((f64::from(e[i]) - want) / want).abs() < 1e-6, "exp at {i}");
    }
    // Bytes (one per element) and an offset start: chunks begin off the 16-byte grid.
    let bytes = slice(&less(&x, &y).unwrap(), &[SliceArg::new(Some(5), None, 1)]).unwrap();
    let flipped = logical_not(&bytes).unwrap().to_vec::<bool>().unwrap();
    for (i, &v) in flipped.iter().enumerate().step_by(1009) {
        assert_eq!(v, a[i + 5] >= b[i + 5], "not at {i}");
    }
    assert_eq!(flipped.len(), n - 5);
}
