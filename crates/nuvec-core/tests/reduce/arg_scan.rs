//! `argmax`, `argmin` and the scans along every axis, both ways, inclusive or not.

use nuvec_core::{
    Array, DType, argmax, argmin, cummax, cummin, cumprod, cumsum, logcumsumexp, transpose,
};

use super::*;

#[test]
fn argmax_and_argmin_match_reference() {
    let mut rng = Rng(3);
    let shapes: &[&[usize]] = &[&[7], &[3, 5], &[2, 3, 4], &[4, 1, 6], &[0, 3]];
    for dtype in DTYPES {
        for &shape in shapes {
            // Few distinct values, so ties (first occurrence) are common.
            let vals: Vec<f64> = (0..shape.iter().product())
                .map(|_| {
                    let v = draw(&mut rng, dtype, Values::General);
                    if dtype == DType::Bool {
                        v
                    } else {
                        (v / 3.0).round()
                    }
                })
                .collect();
            for lay in LAYS {
                let (x, logical) = build(&vals, shape, dtype, lay);
                for axis in 0..shape.len() {
                    if shape[axis] == 0 {
                        continue;
                    }
                    for (name, largest) in [("argmax", true), ("argmin", false)] {
                        let want = ref_arg(&logical, shape, axis, largest);
                        for keepdims in [false, true] {
                            let ax = if keepdims {
                                axis as isize
                            } else {
                                axis as isize - shape.len() as isize
                            };
                            let y = if largest {
                                argmax(&x, ax, keepdims)
                            } else {
                                argmin(&x, ax, keepdims)
                            }
                            .unwrap();
                            let what = format!("{name} {dtype} {shape:?} {lay:?} axis {ax}");
                            assert_eq!(y.dtype(), DType::U32, "{what}");
                            assert_eq!(y.shape(), out_shape(shape, &[axis], keepdims), "{what}");
                            check(&f64s(&y), &want, 0.0, &what);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn argmax_counts_nan_as_the_extreme() {
    let nan = f32::NAN;
    let x = Array::from_slice(&[1.0, nan, 5.0, nan, 2.0, 9.0, -1.0, 3.0], &[2, 4]).unwrap();
    assert_eq!(
        argmax(&x, 1, false).unwrap().to_vec::<u32>().unwrap(),
        [1, 1]
    );
    assert_eq!(
        argmin(&x, 1, false).unwrap().to_vec::<u32>().unwrap(),
        [1, 2]
    );
    assert_eq!(
        argmax(&x, 0, false).unwrap().to_vec::<u32>().unwrap(),
        [1, 0, 0, 0]
    );
    let t = transpose(&x, &[1, 0]).unwrap();
    assert_eq!(
        argmax(&t, 0, false).unwrap().to_vec::<u32>().unwrap(),
        [1, 1]
    );
}

// ---------------------------------------------------------------------------------------
// Scans.

type ScanFn = dyn Fn(&Array, isize, bool, bool) -> Res;

fn scan_sweep(
    name: &str,
    dtypes: &[DType],
    kind: Values,
    op: &ScanFn,
    out_dtype: &dyn Fn(DType) -> DType,
    init: f64,
    f: &dyn Fn(f64, f64) -> f64,
) {
    let mut rng = Rng(5);
    for &dtype in dtypes {
        for &shape in SHAPES.iter().chain(EMPTY_SHAPES) {
            let vals = values(&mut rng, shape.iter().product(), dtype, kind);
            for lay in LAYS {
                let (x, logical) = build(&vals, shape, dtype, lay);
                for axis in 0..shape.len() {
                    for (reverse, inclusive) in
                        [(false, true), (true, true), (false, false), (true, false)]
                    {
                        let ax = if reverse {
                            axis as isize - shape.len() as isize
                        } else {
                            axis as isize
                        };
                        let what = format!(
                            "{name} {dtype} {shape:?} {lay:?} axis {ax} rev {reverse} incl {inclusive}"
                        );
                        let y = op(&x, ax, reverse, inclusive).unwrap();
                        assert_eq!(y.dtype(), out_dtype(dtype), "{what}");
                        assert_eq!(y.shape(), shape, "{what}");
                        let want = ref_scan(&logical, shape, axis, reverse, inclusive, init, f);
                        check(&f64s(&y), &want, tol(out_dtype(dtype)).max(1e-6), &what);
                    }
                }
            }
        }
    }
}

#[test]
fn cumsum_and_cumprod_match_reference() {
    scan_sweep(
        "cumsum",
        &DTYPES,
        Values::General,
        &|x, a, r, i| cumsum(x, a, r, i),
        &widened,
        0.0,
        &|a, b| a + b,
    );
    // cumprod keeps the type (as MLX); booleans multiply as logical and.
    scan_sweep(
        "cumprod",
        &DTYPES,
        Values::Products,
        &|x, a, r, i| cumprod(x, a, r, i),
        &|d| d,
        1.0,
        &|a, b| a * b,
    );
}

#[test]
fn cummax_and_cummin_match_reference() {
    // The exclusive scans start from the type's lowest or highest value; check the
    // inclusive ones against the reference and the exclusive ones' first element below.
    let lowest = |d: DType| match d {
        DType::U8 | DType::Bool => 0.0,
        DType::I32 => f64::from(i32::MIN),
        _ => f64::NEG_INFINITY,
    };
    let highest = |d: DType| match d {
        DType::U8 => 255.0,
        DType::Bool => 1.0,
        DType::I32 => f64::from(i32::MAX),
        _ => f64::INFINITY,
    };
    for dtype in DTYPES {
        scan_sweep(
            "cummax",
            &[dtype],
            Values::General,
            &|x, a, r, i| cummax(x, a, r, i),
            &|d| d,
            lowest(dtype),
            &f64::max,
        );
        scan_sweep(
            "cummin",
            &[dtype],
            Values::General,
            &|x, a, r, i| cummin(x, a, r, i),
            &|d| d,
            highest(dtype),
            &f64::min,
        );
    }
}

#[test]
fn logcumsumexp_matches_reference() {
    let log_add = |a: f64, b: f64| {
        let m = a.max(b);
        if m == f64::NEG_INFINITY {
            m
        } else {
            m + ((a - m).exp() + (b - m).exp()).ln()
        }
    };
    scan_sweep(
        "logcumsumexp",
        &FLOATISH,
        Values::General,
        &|x, a, r, i| logcumsumexp(x, a, r, i),
        &floated,
        f64::NEG_INFINITY,
        &log_add,
    );
}
