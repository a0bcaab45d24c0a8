//! `gather_mm` and `conv1d` (depthwise, grouped, plain).

use super::*;

/// `a[lhs] @ b[rhs]` for each index position, in float64.
fn gather_mm_ref(
    a: &[f64],
    b: &[f64],
    (m, k, n): (usize, usize, usize),
    lhs: &[usize],
    rhs: &[usize],
) -> Vec<f64> {
    let mut out = Vec::new();
    for (&l, &r) in lhs.iter().zip(rhs) {
        for i in 0..m {
            for j in 0..n {
                out.push(
                    (0..k)
                        .map(|c| a[l * m * k + i * k + c] * b[r * k * n + c * n + j])
                        .sum(),
                );
            }
        }
    }
    out
}

#[test]
fn gather_mm_matches_the_formula() {
    let mut rng = Rng::new(51);
    let (m, k, n) = (2, 3, 4);
    for dtype in FLOATS {
        let a = rand(&mut rng, &[3, m, k], dtype);
        let b = rand(&mut rng, &[2, 2, k, n], dtype);
        let (av, bv) = (values(&a), values(&b));
        // Index arrays [3, 1] and [1, 2] broadcast to [3, 2].
        let lhs = Array::from_slice(&[2u32, 0, 1], &[3, 1]).unwrap();
        let rhs = Array::from_slice(&[3i32, 1], &[1, 2]).unwrap();
        let got = gather_mm(&a, &b, Some(&lhs), Some(&rhs), false).unwrap();
        let (li, ri) = ([2, 2, 0, 0, 1, 1], [3, 1, 3, 1, 3, 1]);
        let want = gather_mm_ref(&av, &bv, (m, k, n), &li, &ri);
        let t = 2.0 * tol(dtype);
        check(
            &format!("gather_mm {dtype}"),
            &got,
            &[3, 2, m, n],
            dtype,
            &want,
            t,
        );
        // Sorted right indices give the same products.
        let sorted = Array::from_slice(&[0i32, 0, 2, 3], &[4]).unwrap();
        let left = Array::from_slice(&[1i32, 0, 2, 2], &[4]).unwrap();
        let got = gather_mm(&a, &b, Some(&left), Some(&sorted), true).unwrap();
        let want = gather_mm_ref(&av, &bv, (m, k, n), &[1, 0, 2, 2], &[0, 0, 2, 3]);
        check(
            &format!("gather_mm sorted {dtype}"),
            &got,
            &[4, m, n],
            dtype,
            &want,
            t,
        );
    }
    // Default indices: every batch in order, a batched product.
    let a = rand(&mut rng, &[2, 3, m, k], DType::F32);
    let b = rand(&mut rng, &[2, 3, k, n], DType::F32);
    let got = gather_mm(&a, &b, None, None, false).unwrap();
    let want = matmul(&a, &b).unwrap();
    check_same("gather_mm defaults", &got, &want, 1e-6);
    // Mixed types promote; a strided operand.
    let a = rand(&mut rng, &[1, m, k], DType::F16);
    let b = rand(&mut rng, &[2, k, n], DType::F32);
    let idx = Array::from_slice(&[1u8, 0], &[2]).unwrap();
    let zero = Array::from_slice(&[0u8, 0], &[2]).unwrap();
    let got = gather_mm(&strided(&a), &b, Some(&zero), Some(&idx), false).unwrap();
    let want = gather_mm_ref(&values(&a), &values(&b), (m, k, n), &[0, 0], &[1, 0]);
    check("gather_mm mixed", &got, &[2, m, n], DType::F32, &want, 1e-5);
}

/// The convolution in float64: `x` `[N, L, Cin]`, `w` `[Cout, K, Cin/G]`.
#[allow(clippy::too_many_arguments)]
fn conv_ref(
    x: &[f64],
    (n, l, c_in): (usize, usize, usize),
    w: &[f64],
    (c_out, k): (usize, usize),
    stride: usize,
    padding: usize,
    dilation: usize,
    groups: usize,
) -> (Vec<f64>, usize) {
    let l_out = (l + 2 * padding - dilation * (k - 1) - 1) / stride + 1;
    let (gi, go) = (c_in / groups, c_out / groups);
    let mut out = vec![0.0; n * l_out * c_out];
    for b in 0..n {
        for t in 0..l_out {
            for o in 0..c_out {
                let group = o / go;
                let mut acc = 0.0;
                for j in 0..k {
                    let pos = (t * stride + j * dilation) as isize - padding as isize;
                    if pos < 0 || pos >= l as isize {
                        continue;
                    }
                    for c in 0..gi {
                        let xi = x[(b * l + pos as usize) * c_in + group * gi + c];
                        acc += xi * w[(o * k + j) * gi + c];
                    }
                }
                out[(b * l_out + t) * c_out + o] = acc;
            }
        }
    }
    (out, l_out)
}

#[test]
fn conv1d_matches_the_formula() {
    let mut rng = Rng::new(52);
    // (N, L, Cin, Cout, K, stride, padding, dilation, groups)
    let cases = [
        (1, 20, 6, 6, 4, 1, 0, 1, 6),
        (2, 17, 5, 5, 3, 1, 2, 1, 5),
        (1, 30, 8, 8, 3, 2, 1, 2, 8),
        (3, 9, 1, 1, 9, 1, 4, 1, 1),
        (2, 11, 4, 6, 3, 1, 1, 1, 2),
        (1, 12, 3, 5, 2, 3, 0, 2, 1),
    ];
    for (n, l, c_in, c_out, k, stride, padding, dilation, groups) in cases {
        for dtype in FLOATS {
            let x = rand(&mut rng, &[n, l, c_in], dtype);
            let w = rand(&mut rng, &[c_out, k, c_in / groups], dtype);
            let (want, l_out) = conv_ref(
                &values(&x),
                (n, l, c_in),
                &values(&w),
                (c_out, k),
                stride,
                padding,
                dilation,
                groups,
            );
            let name = format!(
                "conv1d {:?} {dtype}",
                (n, l, c_in, c_out, k, stride, padding, dilation, groups)
            );
            let got = conv1d(&x, &w, stride, padding, dilation, groups).unwrap();
            let t = 3.0 * tol(dtype);
            check(&name, &got, &[n, l_out, c_out], dtype, &want, t);
            let got = conv1d(&strided(&x), &w, stride, padding, dilation, groups).unwrap();
            check(
                &format!("{name} strided"),
                &got,
                &[n, l_out, c_out],
                dtype,
                &want,
                t,
            );
        }
    }
    // Mixed types promote.
    let x = rand(&mut rng, &[1, 6, 3], DType::BF16);
    let w = rand(&mut rng, &[3, 2, 1], DType::F32);
    let got = conv1d(&x, &w, 1, 1, 1, 3).unwrap();
    let (want, l_out) = conv_ref(&values(&x), (1, 6, 3), &values(&w), (3, 2), 1, 1, 1, 3);
    check(
        "conv1d mixed",
        &got,
        &[1, l_out, 3],
        DType::F32,
        &want,
        1e-5,
    );
}
