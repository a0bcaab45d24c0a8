//! Creation ops against direct formulas.

use nuvec_core::{
    Array, DType, arange, broadcast_to, eye, identity, linspace, meshgrid, transpose, tri, tril,
    triu,
};

fn values(a: &Array) -> Vec<f64> {
    a.astype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

/// The length MLX gives a range.
fn range_len(start: f64, stop: f64, step: f64) -> usize {
    ((stop - start) / step).ceil().max(0.0) as usize
}

/// `v` rounded to `dtype` as a cast would.
fn rounded(v: f64, dtype: DType) -> f64 {
    values(&Array::scalar(v).astype(dtype).unwrap())[0]
}

#[test]
fn arange_of_floats() {
    let ranges = [
        (0.0, 10.0, 1.0),
        (0.0, -5.0, -1.5),
        (0.1, 1.0, 0.1),
        (-3.0, 3.0, 0.7),
        (2.0, 1000.5, 3.25),
        (5.0, 0.0, 1.0),
        (0.0, 0.0, 1.0),
        (0.0, 70_000.0, 1.0),
    ];
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        for (start, stop, step) in ranges {
            let a = arange(start, stop, step, dtype).unwrap();
            assert_eq!(a.dtype(), dtype);
            let n = range_len(start, stop, step);
            assert_eq!(a.shape(), [n], "{start} {stop} {step}");
            let want: Vec<f64> = (0..n)
                .map(|i| rounded(start + i as f64 * step, dtype))
                .collect();
            assert_eq!(values(&a), want, "{dtype} {start} {stop} {step}");
        }
    }
}

#[test]
fn arange_of_integers() {
    let ranges = [
        (0.0, 10.0, 1.0),
        (0.5, 5.0, 1.5),
        (10.0, -10.0, -3.0),
        (-2.5, 4.0, 2.9),
        (0.0, 2.0, 0.5),
        (0.0, 100_000.0, 1.0),
    ];
    for dtype in [DType::I32, DType::I64, DType::U8, DType::I16, DType::U32] {
        for (start, stop, step) in ranges {
            let a = arange(start, stop, step, dtype).unwrap();
            let n = range_len(start, stop, step);
            assert_eq!(a.shape(), [n]);
            // MLX's rule: the first value and the step truncated, integer arithmetic that
            // wraps in the element type.
            let first = start.trunc() as i64;
            let delta = (start + step).trunc() as i64 - first;
            let want: Vec<f64> = (0..n)
                .map(|i| {
                    values(
                        &Array::scalar(first + i as i64 * delta)
                            .astype(dtype)
                            .unwrap(),
                    )[0]
                })
                .collect();
            assert_eq!(values(&a), want, "{dtype} {start} {stop} {step}");
        }
    }
    // An infinite step gives the start alone (or nothing).
    let a = arange(3.0, 10.0, f64::INFINITY, DType::F32).unwrap();
    assert_eq!(values(&a), [3.0]);
    let a = arange(3.0, 1.0, f64::INFINITY, DType::F32).unwrap();
    assert_eq!(a.shape(), [0]);
}

#[test]
fn arange_rejects_bad_input() {
    assert!(arange(0.0, 1.0, 0.0, DType::F32).is_err(), "zero step");
    assert!(arange(0.0, 1.0, 1.0, DType::Bool).is_err(), "bool");
    assert!(arange(0.0, f64::NAN, 1.0, DType::F32).is_err(), "NaN stop");
    assert!(arange(0.0, 1.0, f64::NAN, DType::F32).is_err(), "NaN step");
    assert!(
        arange(f64::NEG_INFINITY, 1.0, 1.0, DType::F32).is_err(),
        "infinite start"
    );
    assert!(arange(0.0, 1e12, 1.0, DType::F32).is_err(), "too long");
    let err = arange(0.0, 1.0, 0.0, DType::F32).unwrap_err().to_string();
    assert!(err.starts_with("arange"), "{err}");
}

#[test]
fn linspace_matches_formula() {
    for dtype in [DType::F32, DType::F64, DType::F16, DType::I32] {
        for (start, stop, num) in [
            (0.0, 1.0, 5),
            (2.0, -3.0, 7),
            (-1.0, 1.0, 2),
            (0.0, 9.0, 10),
        ] {
            let a = linspace(start, stop, num, dtype).unwrap();
            assert_eq!(a.shape(), [num]);
            assert_eq!(a.dtype(), dtype);
            let got = values(&a);
            for (i, g) in got.iter().enumerate() {
                let t = i as f64 / (num - 1) as f64;
                let want = rounded(start + t * (stop - start), dtype);
                let tol = match dtype {
                    DType::F64 => 1e-14,
                    DType::F16 => 4e-3,
                    DType::I32 => 1.0, // truncation of a value within f32 rounding
                    _ => 1e-6,
                };
                assert!((g - want).abs() <= tol, "{dtype} {i}: {g} vs {want}");
            }
            // The end points are exact.
            assert_eq!(got[0], rounded(start, dtype));
            assert_eq!(got[num - 1], rounded(stop, dtype));
        }
    }
    assert_eq!(values(&linspace(4.0, 9.0, 1, DType::F32).unwrap()), [4.0]);
    assert_eq!(linspace(4.0, 9.0, 0, DType::F32).unwrap().shape(), [0]);
}

#[test]
fn eye_identity_and_tri() {
    let shapes = [
        (3, None),
        (3, Some(5)),
        (4, Some(2)),
        (0, Some(3)),
        (1, None),
    ];
    for dtype in [DType::F32, DType::I32, DType::Bool, DType::BF16] {
        for (n, m) in shapes {
            let cols = m.unwrap_or(n);
            for k in [-5isize, -1, 0, 1, 2, 7] {
                let e = eye(n, m, k, dtype).unwrap();
                assert_eq!(e.shape(), [n, cols]);
                assert_eq!(e.dtype(), dtype);
                let want: Vec<f64> = (0..n * cols)
                    .map(|t| {
                        let (i, j) = ((t / cols) as isize, (t % cols) as isize);
                        f64::from(u8::from(j == i + k))
                    })
                    .collect();
                assert_eq!(values(&e), want, "eye {n} {m:?} {k}");
                let t = tri(n, m, k, dtype).unwrap();
                let want: Vec<f64> = (0..n * cols)
                    .map(|t| {
                        let (i, j) = ((t / cols) as isize, (t % cols) as isize);
                        f64::from(u8::from(j <= i + k))
                    })
                    .collect();
                assert_eq!(values(&t), want, "tri {n} {m:?} {k}");
            }
        }
        let i = identity(3, dtype).unwrap();
        assert_eq!(values(&i), [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
    }
}

#[test]
fn tril_and_triu() {
    let data: Vec<f64> = (0..2 * 3 * 4).map(|v| v as f64 + 1.0).collect();
    for dtype in [DType::F32, DType::I64, DType::F16] {
        let x = Array::from_slice(&data, &[2, 3, 4])
            .unwrap()
            .astype(dtype)
            .unwrap();
        // A transposed view of the same values.
        let xt = transpose(&x, &[0, 2, 1]).unwrap(); // [2, 4, 3]
        for (a, shape) in [(&x, [2usize, 3, 4]), (&xt, [2, 4, 3])] {
            let av = values(a);
            let (rows, cols) = (shape[1], shape[2]);
            for k in [-2isize, 0, 1, 5] {
                let lower = tril(a, k).unwrap();
                let upper = triu(a, k).unwrap();
                assert_eq!(lower.dtype(), dtype);
                assert_eq!(lower.shape(), shape);
                let (mut wl, mut wu) = (vec![], vec![]);
                for (t, &v) in av.iter().enumerate() {
                    let (i, j) = (((t / cols) % rows) as isize, (t % cols) as isize);
                    wl.push(if j <= i + k { v } else { 0.0 });
                    wu.push(if j >= i + k { v } else { 0.0 });
                }
                assert_eq!(values(&lower), wl, "tril {k}");
                assert_eq!(values(&upper), wu, "triu {k}");
            }
        }
    }
    // Booleans stay booleans; a broadcast input works.
    let b = broadcast_to(&Array::scalar(true), &[3, 3]).unwrap();
    let l = tril(&b, 0).unwrap();
    assert_eq!(l.dtype(), DType::Bool);
    assert_eq!(
        l.to_vec::<bool>().unwrap(),
        [true, false, false, true, true, false, true, true, true]
    );
    let e = Array::from_slice::<f32>(&[], &[0, 3]).unwrap();
    assert_eq!(triu(&e, 0).unwrap().shape(), [0, 3]);
    // Errors.
    let v = Array::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    assert!(tril(&v, 0).is_err());
    assert!(triu(&Array::scalar(1.0f32), 0).is_err());
}

#[test]
fn meshgrid_both_indexings() {
    let x = Array::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
    let y = Array::from_slice(&[10i32, 20], &[2]).unwrap();
    let z = Array::from_slice(&[100i64, 200, 300, 400], &[2, 2]).unwrap(); // flattened
    let (xv, yv, zv) = (values(&x), values(&y), values(&z));
    for xy in [true, false] {
        let g = meshgrid(&[x.clone(), y.clone(), z.clone()], xy).unwrap();
        let shape = if xy { [2, 3, 4] } else { [3, 2, 4] };
        assert_eq!(g.len(), 3);
        assert_eq!(g[0].dtype(), DType::F32);
        assert_eq!(g[1].dtype(), DType::I32);
        for (out, (src, axis)) in g.iter().zip([
            (&xv, if xy { 1 } else { 0 }),
            (&yv, if xy { 0 } else { 1 }),
            (&zv, 2),
        ]) {
            assert_eq!(out.shape(), shape);
            let want: Vec<f64> = (0..24)
                .map(|t| {
                    let idx = [t / (shape[1] * 4), (t / 4) % shape[1], t % 4];
                    src[idx[axis]]
                })
                .collect();
            assert_eq!(values(out), want, "xy {xy} axis {axis}");
        }
    }
    let one = meshgrid(std::slice::from_ref(&x), true).unwrap();
    assert_eq!(values(&one[0]), xv);
    assert!(meshgrid(&[], true).unwrap().is_empty());
}
