//! NaN and infinities, float accuracy, large inputs (the parallel and blocked paths),
//! donation, and the output types.

use nuvec_core::{
    Array, DType, all, any, argmax, argmin, count_nonzero, cummax, cumprod, cumsum, logcumsumexp,
    logsumexp, max, mean, min, prod, softmax, std, sum, transpose, var,
};

use super::*;

#[test]
fn nan_propagates_through_max_and_min_and_infinities_are_ordered() {
    let (nan, inf) = (f32::NAN, f32::INFINITY);
    let x = Array::from_slice(&[1.0, nan, 3.0, -inf, 2.0, inf, 0.0, 5.0], &[2, 4]).unwrap();
    let mx = f64s(&max(&x, &[1], false).unwrap());
    assert!(mx[0].is_nan());
    assert_eq!(mx[1], f64::INFINITY);
    let mn = f64s(&min(&x, &[1], false).unwrap());
    assert!(mn[0].is_nan());
    assert_eq!(mn[1], 0.0);
    // Along the other axis, and with NaN last in its run.
    let mx0 = f64s(&max(&x, &[0], false).unwrap());
    assert!(mx0[1].is_nan());
    assert_eq!(mx0[3], 5.0);
    let long: Vec<f32> = (0..1000)
        .map(|i| if i == 999 { nan } else { i as f32 })
        .collect();
    let long = Array::from_slice(&long, &[1000]).unwrap();
    assert!(f64s(&max(&long, &[], false).unwrap())[0].is_nan());
    assert!(f64s(&min(&long, &[], false).unwrap())[0].is_nan());
    // Sums see infinities and NaN as IEEE arithmetic does.
    let s = f64s(&sum(&x, &[1], false).unwrap());
    assert!(s[0].is_nan());
    assert!(s[1].is_infinite() && s[1] > 0.0);
}

#[test]
fn logsumexp_handles_infinities_and_large_values() {
    let (nan, inf) = (f32::NAN, f32::INFINITY);
    let rows: [[f32; 3]; 6] = [
        [-inf, -inf, -inf],
        [1.0, inf, 2.0],
        [-inf, 0.0, -inf],
        [1.0, nan, 2.0],
        [1000.0, 1000.0, 1000.0],
        [-1000.0, -1000.0, -1001.0],
    ];
    let flat: Vec<f32> = rows.iter().flatten().copied().collect();
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        // f16 cannot hold ±1000 precisely enough for a tight check; its rows stay small.
        let x = Array::from_slice(&flat, &[6, 3])
            .unwrap()
            .astype(dtype)
            .unwrap();
        let y = f64s(&logsumexp(&x, &[1], false).unwrap());
        assert_eq!(y[0], f64::NEG_INFINITY, "{dtype}");
        assert_eq!(y[1], f64::INFINITY, "{dtype}");
        assert_eq!(y[2], 0.0, "{dtype}");
        assert!(y[3].is_nan(), "{dtype}");
        if dtype != DType::F16 {
            // Absolute error: the output's rounding at 1000.
            let eps = match dtype {
                DType::F64 => 1e-9,
                DType::F32 => 2e-4,
                _ => 8.0,
            };
            let want = 1000.0 + 3f64.ln();
            assert!((y[4] - want).abs() < eps, "{dtype} {}", y[4]);
            let want = -1000.0 + (2.0 + (-1f64).exp()).ln();
            assert!((y[5] - want).abs() < eps, "{dtype} {}", y[5]);
        }
        // The same rows through the general path (axis 0 of the transpose).
        let t = transpose(&x, &[1, 0]).unwrap();
        let z = f64s(&logsumexp(&t, &[0], true).unwrap());
        assert_eq!(z[..3], y[..3], "{dtype}");
    }
}

#[test]
fn softmax_is_stable_and_handles_infinities() {
    let (nan, inf) = (f32::NAN, f32::INFINITY);
    let x = Array::from_slice(
        &[
            1000.0, 1001.0, -inf, 999.0, -inf, -inf, -inf, -inf, 0.0, nan, 1.0, 2.0,
        ],
        &[3, 4],
    )
    .unwrap();
    let y = f64s(&softmax(&x, &[-1]).unwrap());
    let e = [(-1f64).exp(), 1.0, 0.0, (-2f64).exp()];
    let s: f64 = e.iter().sum();
    for j in 0..4 {
        assert!((y[j] - e[j] / s).abs() < 1e-6, "{j} {}", y[j]);
    }
    // A row of -∞ and a row holding NaN give NaN (as exp(x - max(x)) does).
    assert!(y[4..].iter().all(|v| v.is_nan()));
    let x = Array::from_slice(&[inf, 1.0], &[2]).unwrap();
    assert!(f64s(&softmax(&x, &[0]).unwrap()).iter().all(|v| v.is_nan()));
}

#[test]
fn half_sums_accumulate_in_float32() {
    // 5000 ones: a float16 running total would stop at 2048.
    let ones = Array::from_slice(&vec![1.0f32; 5000], &[5000]).unwrap();
    for dtype in [DType::F16, DType::BF16] {
        let x = ones.astype(dtype).unwrap();
        let want = if dtype == DType::F16 { 5000.0 } else { 4992.0 }; // bf16 rounds 5000
        assert_eq!(f64s(&sum(&x, &[], false).unwrap()), [want], "{dtype}");
        assert_eq!(
            f64s(&cumsum(&x, 0, false, true).unwrap())[4999],
            want,
            "{dtype}"
        );
        assert_eq!(f64s(&mean(&x, &[], false).unwrap()), [1.0], "{dtype}");
        let big = x.reshape(&[50, 100]).unwrap();
        let s = f64s(&sum(&big, &[0], false).unwrap());
        assert!(s.iter().all(|&v| v == 50.0), "{dtype}");
    }
    // A float16 mean whose sum would overflow float16 (65504).
    let x = Array::from_slice(&vec![1000.0f32; 100], &[100])
        .unwrap()
        .astype(DType::F16)
        .unwrap();
    assert_eq!(f64s(&mean(&x, &[], false).unwrap()), [1000.0]);
    assert_eq!(f64s(&var(&x, &[], false, 0).unwrap()), [0.0]);
}

#[test]
fn float32_sums_are_accurate() {
    // 2^20 copies of 0.1: a single running float32 total is off by about 1e-4 relative.
    let n = 1 << 20;
    let x = Array::from_slice(&vec![0.1f32; n], &[n]).unwrap();
    let want = f64::from(0.1f32) * n as f64;
    let got = f64s(&sum(&x, &[], false).unwrap())[0];
    assert!(((got - want) / want).abs() < 1e-6, "{got} vs {want}");
    let rows = x.reshape(&[4, n as isize / 4]).unwrap();
    for got in f64s(&sum(&rows, &[1], false).unwrap()) {
        assert!(((got - want / 4.0) / want).abs() < 1e-6, "{got}");
    }
}

// ---------------------------------------------------------------------------------------
// Large inputs: the parallel and blocked paths.

#[test]
fn large_reductions_match_reference() {
    let mut rng = Rng(17);
    // Rows split over the pool, one long row split in pieces, columns in tiles, a middle
    // axis, and several reduced axes at once (tested in release builds too: the vector
    // code differs from the debug build's).
    let cases: &[(&[usize], &[isize])] = &[
        (&[40, 3000], &[-1]),
        (&[200_000], &[]),
        (&[3, 70_000], &[]),
        (&[3000, 40], &[0]),
        (&[4, 5000, 3], &[1]),
        (&[7, 3000, 5], &[0, 2]),
        (&[70_000, 3], &[0]),
    ];
    for &(shape, axes) in cases {
        let n: usize = shape.iter().product();
        let vals = values(&mut rng, n, DType::F32, Values::General);
        for lay in LAYS {
            let (x, logical) = build(&vals, shape, DType::F32, lay);
            let ax = norm_axes(axes, shape.len());
            let what = format!("{shape:?} {axes:?} {lay:?}");
            let s = f64s(&sum(&x, axes, false).unwrap());
            check(
                &s,
                &ref_reduce(&logical, shape, &ax, 0.0, &|a, b| a + b),
                1e-6,
                &what,
            );
            let m = f64s(&max(&x, axes, false).unwrap());
            check(
                &m,
                &ref_reduce(&logical, shape, &ax, f64::NEG_INFINITY, &f64::max),
                0.0,
                &what,
            );
            let l = f64s(&logsumexp(&x, axes, false).unwrap());
            check(&l, &ref_lse(&logical, shape, &ax), 1e-6, &what);
            let y = f64s(&softmax(&x, axes).unwrap());
            check(&y, &ref_softmax(&logical, shape, &ax), 1e-6, &what);
            let last = shape.len() - 1;
            let a = f64s(&argmax(&x, last as isize, false).unwrap());
            check(&a, &ref_arg(&logical, shape, last, true), 0.0, &what);
            let c = f64s(&cumsum(&x, 0, false, true).unwrap());
            let want = ref_scan(&logical, shape, 0, false, true, 0.0, &|a, b| a + b);
            // Running sums of thousands of values: float32 rounding grows with the count.
            check(&c, &want, 1e-4, &what);
        }
    }
}

#[test]
fn softmax_writes_over_its_input_only_when_nobody_else_holds_it() {
    let vals: Vec<f32> = (0..4096).map(|i| (i % 7) as f32).collect();
    let want = ref_softmax(
        &vals.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(),
        &[64, 64],
        &[1],
    );
    for dtype in [DType::F32, DType::F64, DType::F16] {
        let x = Array::from_slice(&vals, &[64, 64])
            .unwrap()
            .astype(dtype)
            .unwrap();
        x.eval().unwrap();
        let before = f64s(&x);
        // `x` is still held here, so the kernel must not write over it.
        let y = softmax(&(&x * 1.0), &[1]).unwrap();
        check(&f64s(&y), &want, tol(dtype).max(1e-6), &dtype);
        assert_eq!(f64s(&x), before);
        let z = softmax(&x, &[1]).unwrap();
        check(&f64s(&z), &want, tol(dtype).max(1e-6), &dtype);
        assert_eq!(f64s(&x), before);
    }
}

#[test]
fn output_types_follow_mlx() {
    use DType::*;
    let all_types = [
        Bool, U8, U16, U32, U64, I8, I16, I32, I64, F16, BF16, F32, F64,
    ];
    let x = Array::from_slice(&[1.0f64, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    for d in all_types {
        let a = x.astype(d).unwrap();
        let wide = match d {
            Bool | I8 | I16 => I32,
            U8 | U16 => U32,
            other => other,
        };
        let float = if d.is_float() { d } else { F32 };
        assert_eq!(sum(&a, &[0], false).unwrap().dtype(), wide, "sum {d}");
        assert_eq!(prod(&a, &[0], false).unwrap().dtype(), wide, "prod {d}");
        assert_eq!(
            cumsum(&a, 0, false, true).unwrap().dtype(),
            wide,
            "cumsum {d}"
        );
        assert_eq!(
            cumprod(&a, 0, false, true).unwrap().dtype(),
            d,
            "cumprod {d}"
        );
        assert_eq!(max(&a, &[0], false).unwrap().dtype(), d, "max {d}");
        assert_eq!(min(&a, &[], false).unwrap().dtype(), d, "min {d}");
        assert_eq!(cummax(&a, 1, false, true).unwrap().dtype(), d, "cummax {d}");
        assert_eq!(all(&a, &[0], false).unwrap().dtype(), Bool, "all {d}");
        assert_eq!(any(&a, &[0], false).unwrap().dtype(), Bool, "any {d}");
        assert_eq!(
            count_nonzero(&a, &[], false).unwrap().dtype(),
            I32,
            "count {d}"
        );
        assert_eq!(argmax(&a, 0, false).unwrap().dtype(), U32, "argmax {d}");
        assert_eq!(argmin(&a, 1, true).unwrap().dtype(), U32, "argmin {d}");
        assert_eq!(mean(&a, &[0], false).unwrap().dtype(), float, "mean {d}");
        assert_eq!(var(&a, &[0], false, 0).unwrap().dtype(), float, "var {d}");
        assert_eq!(std(&a, &[0], false, 1).unwrap().dtype(), float, "std {d}");
        assert_eq!(
            logsumexp(&a, &[0], false).unwrap().dtype(),
            float,
            "logsumexp {d}"
        );
        assert_eq!(softmax(&a, &[0]).unwrap().dtype(), float, "softmax {d}");
        assert_eq!(
            logcumsumexp(&a, 0, false, true).unwrap().dtype(),
            float,
            "lcse {d}"
        );
        // The values are right in every type too (1..4 fit everywhere).
        let want_sum = if d == Bool {
            vec![2.0, 2.0]
        } else {
            vec![4.0, 6.0]
        };
        assert_eq!(f64s(&sum(&a, &[0], false).unwrap()), want_sum, "sum {d}");
    }
    // Widened sums do not wrap where the input type would.
    let bytes = Array::from_slice(&[200u8, 100, 250], &[3]).unwrap();
    assert_eq!(sum(&bytes, &[], false).unwrap().item::<u32>().unwrap(), 550);
    let small = Array::from_slice(&[-100i8, -100, -100], &[3]).unwrap();
    assert_eq!(
        sum(&small, &[], false).unwrap().item::<i32>().unwrap(),
        -300
    );
    // Complex numbers sum, multiply and compare with zero.
    let c = Array::from_slice(&[1.0f32, 0.0, 2.0], &[3])
        .unwrap()
        .astype(C64)
        .unwrap();
    assert_eq!(sum(&c, &[], false).unwrap().dtype(), C64);
    assert!(!all(&c, &[], false).unwrap().item::<bool>().unwrap());
    assert!(any(&c, &[], false).unwrap().item::<bool>().unwrap());
}

#[test]
fn reductions_over_size_one_axes_and_scalars() {
    let s = Array::scalar(3.5f32);
    assert_eq!(sum(&s, &[], false).unwrap().item::<f32>().unwrap(), 3.5);
    assert_eq!(max(&s, &[], true).unwrap().shape(), [] as [usize; 0]);
    assert_eq!(f64s(&logsumexp(&s, &[], false).unwrap()), [3.5]);
    assert_eq!(f64s(&softmax(&s, &[]).unwrap()), [1.0]);
    let x = Array::from_slice(&[1i8, -2, 3], &[3, 1]).unwrap();
    let y = sum(&x, &[1], false).unwrap();
    assert_eq!((y.shape(), y.dtype()), (&[3usize][..], DType::I32));
    assert_eq!(y.to_vec::<i32>().unwrap(), [1, -2, 3]);
    assert_eq!(f64s(&logsumexp(&x, &[1], true).unwrap()), [1.0, -2.0, 3.0]);
    assert_eq!(f64s(&softmax(&x, &[1]).unwrap()), [1.0; 3]);
}

#[test]
fn long_rows_with_late_maxima_and_blocks_of_minus_infinity() {
    // Rows longer than the kernels' blocks: one starting with a run of -∞, one whose
    // maximum comes last (earlier blocks are rescaled), one whose maximum comes first.
    let n = 5000;
    let mut vals = Vec::with_capacity(3 * n);
    for i in 0..n {
        vals.push(if i < 2100 {
            f64::NEG_INFINITY
        } else {
            (i % 13) as f64 / 4.0
        });
    }
    for i in 0..n {
        vals.push(i as f64 / 250.0);
    }
    for i in 0..n {
        vals.push(-(i as f64) / 100.0);
    }
    for dtype in [DType::F32, DType::F64, DType::BF16] {
        let x = Array::from_slice(&vals, &[3, n])
            .unwrap()
            .astype(dtype)
            .unwrap();
        // The logical values as the type holds them.
        let held = f64s(&x);
        let what = format!("{dtype}");
        let y = f64s(&softmax(&x, &[-1]).unwrap());
        check(
            &y,
            &ref_softmax(&held, &[3, n], &[1]),
            tol(dtype).max(1e-6),
            &what,
        );
        let l = f64s(&logsumexp(&x, &[1], false).unwrap());
        check(
            &l,
            &ref_lse(&held, &[3, n], &[1]),
            tol(dtype).max(1e-6),
            &what,
        );
    }
}
