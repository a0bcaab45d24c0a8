//! Matrix products and their composites against float64 references computed here.

use nuvec_core::{
    Array, DType, MatmulOp, Primitive, SliceArg, TensorAxes, addmm, broadcast_to, inner, kron,
    matmul, outer, slice, tensordot, trace, transpose,
};

fn s(start: Option<isize>, stop: Option<isize>, step: isize) -> SliceArg {
    SliceArg::new(start, stop, step)
}

/// A small deterministic generator of values in [-1, 1).
struct Rng(u64);

impl Rng {
    fn f64(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }

    fn vec(&mut self, n: usize) -> Vec<f64> {
        (0..n).map(|_| self.f64()).collect()
    }
}

fn array(data: &[f64], shape: &[usize], dtype: DType) -> Array {
    Array::from_slice(data, shape)
        .unwrap()
        .astype(dtype)
        .unwrap()
}

/// An array of random values in `dtype`, and those values (after rounding) as f64.
fn random(rng: &mut Rng, shape: &[usize], dtype: DType) -> (Array, Vec<f64>) {
    let n = shape.iter().product();
    let a = array(&rng.vec(n), shape, dtype);
    let values = values(&a);
    (a, values)
}

fn values(a: &Array) -> Vec<f64> {
    a.astype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for ax in (0..shape.len()).rev() {
        idx[ax] = i % shape[ax];
        i /= shape[ax];
    }
    idx
}

/// NumPy's matmul in f64 by a triple loop: the result and, for tolerances, the sum of the
/// absolute values of the terms of each element.
fn reference(a: &[f64], sa: &[usize], b: &[f64], sb: &[usize]) -> (Vec<f64>, Vec<f64>, Vec<usize>) {
    let a_shape: Vec<usize> = if sa.len() == 1 {
        vec![1, sa[0]]
    } else {
        sa.to_vec()
    };
    let b_shape: Vec<usize> = if sb.len() == 1 {
        vec![sb[0], 1]
    } else {
        sb.to_vec()
    };
    let (na, nb) = (a_shape.len(), b_shape.len());
    let (m, k, n) = (a_shape[na - 2], a_shape[na - 1], b_shape[nb - 1]);
    assert_eq!(k, b_shape[nb - 2]);
    let nbatch = (na - 2).max(nb - 2);
    let pad = |s: &[usize]| {
        let mut v = vec![1; nbatch - (s.len() - 2)];
        v.extend_from_slice(&s[..s.len() - 2]);
        v
    };
    let (ba, bb) = (pad(&a_shape), pad(&b_shape));
    let batch: Vec<usize> = ba.iter().zip(&bb).map(|(&x, &y)| x.max(y)).collect();
    let count: usize = batch.iter().product();
    let (sta, stb) = (strides(&ba), strides(&bb));
    let mut out = Vec::new();
    let mut abs = Vec::new();
    for t in 0..count {
        let idx = unravel(t, &batch);
        let oa: usize = (0..nbatch)
            .map(|d| if ba[d] == 1 { 0 } else { idx[d] * sta[d] })
            .sum();
        let ob: usize = (0..nbatch)
            .map(|d| if bb[d] == 1 { 0 } else { idx[d] * stb[d] })
            .sum();
        for i in 0..m {
            for j in 0..n {
                let (mut s, mut s_abs) = (0.0, 0.0);
                for p in 0..k {
                    let x = a[oa * m * k + i * k + p] * b[ob * k * n + p * n + j];
                    s += x;
                    s_abs += x.abs();
                }
                out.push(s);
                abs.push(s_abs);
            }
        }
    }
    let mut shape = batch;
    if sa.len() > 1 {
        shape.push(m);
    }
    if sb.len() > 1 {
        shape.push(n);
    }
    (out, abs, shape)
}

/// The rounding unit of a type's results.
fn eps(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => f64::EPSILON,
        DType::F16 => 2f64.powi(-11),
        DType::BF16 => 2f64.powi(-8),
        _ => f32::EPSILON as f64,
    }
}

/// Checks `got` against a reference: the result's rounding plus f32 (or f64) accumulation.
fn assert_close(got: &[f64], want: &[f64], abs: &[f64], dtype: DType, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let acc = if dtype == DType::F64 {
        f64::EPSILON
    } else {
        f32::EPSILON as f64
    };
    for (i, ((&g, &w), &s)) in got.iter().zip(want).zip(abs).enumerate() {
        let tol = 2.0 * eps(dtype) * (w.abs() + s * 1e-3) + 16.0 * acc * s + 1e-300;
        assert!(
            (g - w).abs() <= tol,
            "{what} ({dtype}): element {i} is {g}, expected {w} (tolerance {tol})"
        );
    }
}

const FLOATS: [DType; 4] = [DType::F32, DType::F64, DType::F16, DType::BF16];

/// `matmul` of `a` and `b` against the reference of their values.
fn check(a: &Array, b: &Array, what: &str) {
    let c = matmul(a, b).unwrap();
    let (want, abs, shape) = reference(&values(a), a.shape(), &values(b), b.shape());
    assert_eq!(c.shape(), shape, "{what}: shape");
    assert_close(&values(&c), &want, &abs, c.dtype(), what);
}

#[test]
fn matmul_matrices_and_vectors() {
    let mut rng = Rng(1);
    for dtype in FLOATS {
        let cases: &[(&[usize], &[usize])] = &[
            (&[3, 4], &[4, 5]),
            (&[1, 1], &[1, 1]),
            (&[4], &[4, 5]),
            (&[3, 4], &[4]),
            (&[7], &[7]),
            (&[17, 33], &[33, 9]),
            (&[130, 257], &[257, 140]),
        ];
        for (sa, sb) in cases {
            let (a, _) = random(&mut rng, sa, dtype);
            let (b, _) = random(&mut rng, sb, dtype);
            let c = matmul(&a, &b).unwrap();
            assert_eq!(c.dtype(), dtype);
            check(&a, &b, &format!("{sa:?} @ {sb:?}"));
        }
    }
}

#[test]
fn matmul_broadcasts_batches() {
    let mut rng = Rng(2);
    for dtype in FLOATS {
        let cases: &[(&[usize], &[usize])] = &[
            (&[2, 1, 3, 4], &[5, 4, 6]),
            (&[7, 3, 4], &[4, 2]),
            (&[3, 4], &[6, 4, 2]),
            (&[4], &[2, 4, 3]),
            (&[2, 3, 4], &[4]),
            (&[3, 1, 5], &[3, 5, 1]),
            (&[256, 8, 9], &[256, 9, 10]),
            (&[40, 33, 20], &[20, 25]),
            (&[2, 1, 2, 5, 6], &[3, 1, 6, 4]),
        ];
        for (sa, sb) in cases {
            let (a, _) = random(&mut rng, sa, dtype);
            let (b, _) = random(&mut rng, sb, dtype);
            check(&a, &b, &format!("{sa:?} @ {sb:?}"));
        }
    }
}

#[test]
fn matmul_reads_views_in_place() {
    let mut rng = Rng(3);
    for dtype in FLOATS {
        // Transposed operands.
        let (x, _) = random(&mut rng, &[5, 3], dtype);
        let (y, _) = random(&mut rng, &[4, 5], dtype);
        check(&x.t().unwrap(), &y.t().unwrap(), "transposed both");
        let (z, _) = random(&mut rng, &[5, 6], dtype);
        check(&x.t().unwrap(), &z, "transposed a");
        // Batched, with the batch axis in the middle of the buffer.
        let (w, _) = random(&mut rng, &[3, 2, 5], dtype);
        let a = transpose(&w, &[1, 0, 2]).unwrap(); // [2, 3, 5]
        let (v, _) = random(&mut rng, &[2, 4, 5], dtype);
        let b = transpose(&v, &[0, 2, 1]).unwrap(); // [2, 5, 4]
        check(&a, &b, "batch axis in the middle, transposed b");
        // A tall batch through a transposed view cannot merge its rows.
        let (u, _) = random(&mut rng, &[6, 4, 3], dtype);
        let a = transpose(&u, &[1, 0, 2]).unwrap(); // [4, 6, 3]
        let (r, _) = random(&mut rng, &[3, 2], dtype);
        check(&a, &r, "unmergeable batch with a shared b");
        // Broadcast inside the matrices (zero strides).
        let (row, _) = random(&mut rng, &[1, 4], dtype);
        let (col, _) = random(&mut rng, &[4, 1], dtype);
        let a = broadcast_to(&row, &[3, 4]).unwrap();
        let b = broadcast_to(&col, &[4, 5]).unwrap();
        check(&a, &b, "broadcast rows and columns");
        let (one, _) = random(&mut rng, &[], dtype);
        let a = broadcast_to(&one, &[2, 3, 4]).unwrap();
        check(&a, &b, "one broadcast element");
        // Sliced views with negative steps: a[::-1, 1:8:2, ::-3] @ b[5:0:-2, ::2].
        let (big, _) = random(&mut rng, &[3, 9, 8], dtype);
        let a = slice(
            &big,
            &[s(None, None, -1), s(Some(1), Some(8), 2), s(None, None, -3)],
        );
        let a = a.unwrap(); // [3, 4, 3]
        let (small, _) = random(&mut rng, &[7, 5], dtype);
        let b = slice(&small, &[s(Some(5), Some(0), -2), s(None, None, 2)]).unwrap(); // [3, 3]
        check(&a, &b, "negative steps");
        check(
            &b,
            &transpose(&a, &[0, 2, 1]).unwrap(),
            "negative steps, b batched",
        );
        // Every other row of a batch still steps as one axis: one tall product.
        let (t, _) = random(&mut rng, &[4, 6, 5], dtype);
        let a = slice(&t, &[SliceArg::full(), s(None, None, 2)]).unwrap(); // [4, 3, 5]
        let (r, _) = random(&mut rng, &[5, 2], dtype);
        check(&a, &r, "strided rows merged over the batch");
        check(
            &slice(&a, &[s(None, None, -1)]).unwrap(),
            &r,
            "reversed batch, shared b",
        );
        // Rows of one element whose batch axis is the matrix's column axis.
        let (w, _) = random(&mut rng, &[5, 6], dtype);
        let a = nuvec_core::expand_dims(&w.t().unwrap(), 1).unwrap(); // [6, 1, 5]
        check(&a, &r, "single rows from a transposed matrix");
    }
}

#[test]
fn matmul_of_empty_shapes() {
    for dtype in FLOATS {
        let z = |shape: &[usize]| array(&vec![0.5; shape.iter().product()], shape, dtype);
        let c = matmul(&z(&[0, 4]), &z(&[4, 5])).unwrap();
        assert_eq!(c.shape(), [0, 5]);
        assert!(values(&c).is_empty());
        let c = matmul(&z(&[3, 4]), &z(&[4, 0])).unwrap();
        assert_eq!(c.shape(), [3, 0]);
        // k = 0: a sum of nothing.
        let c = matmul(&z(&[3, 0]), &z(&[0, 5])).unwrap();
        assert_eq!(c.shape(), [3, 5]);
        assert_eq!(values(&c), vec![0.0; 15]);
        let c = matmul(&z(&[2, 3, 0]), &z(&[0, 2])).unwrap();
        assert_eq!(values(&c), vec![0.0; 12]);
        let c = matmul(&z(&[0]), &z(&[0])).unwrap();
        assert_eq!(c.shape(), [] as [usize; 0]);
        assert_eq!(values(&c), [0.0]);
        let c = matmul(&z(&[2, 0, 3, 4]), &z(&[4, 5])).unwrap();
        assert_eq!(c.shape(), [2, 0, 3, 5]);
        // Large enough for recycled buffers: a freed result of the same size must not show
        // through an empty sum.
        let full = matmul(&z(&[200, 3]), &z(&[3, 100])).unwrap();
        assert_eq!(values(&full), vec![0.75; 20_000]);
        drop(full);
        let c = matmul(&z(&[200, 0]), &z(&[0, 100])).unwrap();
        assert_eq!(values(&c), vec![0.0; 20_000]);
    }
}

#[test]
fn matmul_promotes_types() {
    let mut rng = Rng(4);
    let pairs = [
        (DType::F16, DType::BF16, DType::F32),
        (DType::F32, DType::F64, DType::F64),
        (DType::I32, DType::F16, DType::F16),
        (DType::BF16, DType::U8, DType::BF16),
        (DType::F32, DType::C64, DType::C64),
    ];
    for (x, y, want) in pairs {
        let (a, _) = random(&mut rng, &[3, 4], DType::F64);
        let (b, _) = random(&mut rng, &[4, 2], DType::F64);
        let (a, b) = (a.astype(x).unwrap(), b.astype(y).unwrap());
        let c = matmul(&a, &b).unwrap();
        assert_eq!(c.dtype(), want, "{x} @ {y}");
        if want != DType::C64 {
            let (a, b) = (a.astype(want).unwrap(), b.astype(want).unwrap());
            check(&a, &b, &format!("{x} @ {y}"));
        }
    }
}

#[test]
fn matmul_complex() {
    use nuvec_core::Complex64;
    let mut rng = Rng(5);
    let (m, k, n) = (3, 5, 4);
    let av: Vec<Complex64> = (0..m * k)
        .map(|_| Complex64::new(rng.f64() as f32, rng.f64() as f32))
        .collect();
    let bv: Vec<Complex64> = (0..k * n)
        .map(|_| Complex64::new(rng.f64() as f32, rng.f64() as f32))
        .collect();
    let a = Array::from_slice(&av, &[m, k]).unwrap();
    let b = Array::from_slice(&bv, &[k, n]).unwrap();
    let got = matmul(&a, &b).unwrap().to_vec::<Complex64>().unwrap();
    for i in 0..m {
        for j in 0..n {
            let (mut re, mut im) = (0f64, 0f64);
            for p in 0..k {
                let (x, y) = (av[i * k + p], bv[p * n + j]);
                re += x.re as f64 * y.re as f64 - x.im as f64 * y.im as f64;
                im += x.re as f64 * y.im as f64 + x.im as f64 * y.re as f64;
            }
            let g = got[i * n + j];
            assert!((g.re as f64 - re).abs() < 1e-5 && (g.im as f64 - im).abs() < 1e-5);
        }
    }
}

#[test]
fn matmul_halves_over_many_panels() {
    // A long inner axis is widened to f32 in several panels.
    let mut rng = Rng(6);
    for dtype in [DType::F16, DType::BF16] {
        let (a, _) = random(&mut rng, &[32, 66_000], dtype);
        let (b, _) = random(&mut rng, &[66_000, 32], dtype);
        check(&a, &b, "long k");
        check(&b.t().unwrap(), &a.t().unwrap(), "long k, transposed");
    }
}

#[test]
fn matmul_rejects_bad_input() {
    let f = |shape: &[usize]| array(&vec![1.0; shape.iter().product()], shape, DType::F32);
    let i = Array::from_slice(&[1i32, 2, 3, 4], &[2, 2]).unwrap();
    assert!(matmul(&i, &i).is_err(), "integers");
    let t = Array::from_slice(&[true, false, true, false], &[2, 2]).unwrap();
    assert!(matmul(&t, &t).is_err(), "booleans");
    assert!(matmul(&Array::scalar(1.0f32), &f(&[2, 2])).is_err(), "0-D");
    assert!(matmul(&f(&[2, 3]), &f(&[4, 2])).is_err(), "inner sizes");
    assert!(matmul(&f(&[3]), &f(&[4])).is_err(), "vector sizes");
    assert!(matmul(&f(&[2, 3, 4]), &f(&[3, 4, 5])).is_err(), "batches");
    let err = matmul(&f(&[2, 3]), &f(&[4, 2])).unwrap_err().to_string();
    assert!(err.starts_with("matmul"), "{err}");
    // The primitive itself checks its inputs.
    let prim = Primitive::Matmul(MatmulOp::Matmul);
    assert!(Array::from_op(prim.clone(), vec![f(&[2, 3, 4]), f(&[1, 4, 5])]).is_err());
    assert!(
        Array::from_op(
            prim.clone(),
            vec![f(&[3, 4]), f(&[4, 5]).astype(DType::F64).unwrap()]
        )
        .is_err()
    );
    assert!(Array::from_op(prim, vec![f(&[3, 4])]).is_err());
}

#[test]
fn addmm_matches_formula() {
    let mut rng = Rng(7);
    let cases: &[(&[usize], &[usize], &[usize])] = &[
        (&[3, 5], &[3, 4], &[4, 5]),
        (&[5], &[3, 4], &[4, 5]),
        (&[], &[3, 4], &[4, 5]),
        (&[3, 1], &[3, 4], &[4, 5]),
        (&[5], &[4], &[4, 5]),
        (&[3], &[3, 4], &[4]),
        (&[2, 3, 5], &[2, 3, 4], &[4, 5]),
        (&[5], &[2, 3, 4], &[4, 5]),
        (&[3, 5], &[2, 3, 4], &[2, 4, 5]),
        (&[3, 5], &[3, 0], &[0, 5]),
        (&[200, 150], &[200, 300], &[300, 150]),
    ];
    for dtype in FLOATS {
        for (alpha, beta) in [(1.0f32, 1.0f32), (0.5, -2.0), (2.0, 0.0)] {
            for (sc, sa, sb) in cases {
                let (c, cv) = random(&mut rng, sc, dtype);
                let (a, av) = random(&mut rng, sa, dtype);
                let (b, bv) = random(&mut rng, sb, dtype);
                let got = addmm(&c, &a, &b, alpha, beta).unwrap();
                let (prod, abs, shape) = reference(&av, sa, &bv, sb);
                assert_eq!(got.shape(), shape);
                assert_eq!(got.dtype(), dtype);
                // c broadcast to the result by index.
                let cshape: Vec<usize> = {
                    let mut v = vec![1; shape.len() - sc.len()];
                    v.extend_from_slice(sc);
                    v
                };
                let cst = strides(&cshape);
                let want: Vec<f64> = (0..prod.len())
                    .map(|t| {
                        let idx = unravel(t, &shape);
                        let at: usize = (0..shape.len())
                            .map(|d| if cshape[d] == 1 { 0 } else { idx[d] * cst[d] })
                            .sum();
                        alpha as f64 * prod[t] + beta as f64 * cv[at]
                    })
                    .collect();
                let abs: Vec<f64> = abs
                    .iter()
                    .map(|s| alpha.abs() as f64 * s + beta.abs() as f64)
                    .collect();
                let what = format!("addmm {sc:?} + {sa:?} @ {sb:?}, {alpha} {beta}");
                assert_close(&values(&got), &want, &abs, dtype, &what);
            }
        }
    }
}

#[test]
fn addmm_writes_over_a_temporary_c() {
    let mut rng = Rng(8);
    let (a, av) = random(&mut rng, &[4, 3], DType::F32);
    let (b, bv) = random(&mut rng, &[3, 2], DType::F32);
    let (x, xv) = random(&mut rng, &[4, 2], DType::F32);
    // `x * 2` is held only by the addmm node, so its buffer may hold the result; `x` itself
    // must stay unchanged.
    let c = nuvec_core::multiply(&x, 2.0).unwrap();
    let y = addmm(&c, &a, &b, 1.0, 1.0).unwrap();
    drop(c);
    let (prod, abs, _) = reference(&av, &[4, 3], &bv, &[3, 2]);
    let want: Vec<f64> = prod.iter().zip(&xv).map(|(p, x)| p + 2.0 * x).collect();
    assert_close(&values(&y), &want, &abs, DType::F32, "donated c");
    assert_eq!(values(&x), xv);
}

#[test]
fn addmm_complex_and_promotion() {
    let a = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let c = Array::from_slice(&[1.0f64, 1.0], &[2]).unwrap();
    let y = addmm(&c, &a, &a, 1.0, 3.0).unwrap();
    assert_eq!(y.dtype(), DType::F64);
    assert_eq!(values(&y), [10.0, 13.0, 18.0, 25.0]);
    let z = addmm(&c.astype(DType::C64).unwrap(), &a, &a, 2.0, 1.0).unwrap();
    assert_eq!(z.dtype(), DType::C64);
    let re = nuvec_core::real(&z).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(re, [15.0, 21.0, 31.0, 45.0]);
}

#[test]
fn addmm_rejects_bad_input() {
    let f = |shape: &[usize]| array(&vec![1.0; shape.iter().product()], shape, DType::F32);
    assert!(
        addmm(&f(&[3, 5]), &f(&[3, 4]), &f(&[3, 5]), 1.0, 1.0).is_err(),
        "inner sizes"
    );
    assert!(
        addmm(&f(&[4, 5]), &f(&[3, 4]), &f(&[4, 5]), 1.0, 1.0).is_err(),
        "c's shape"
    );
    assert!(
        addmm(&f(&[2, 3, 5]), &f(&[3, 4]), &f(&[4, 5]), 1.0, 1.0).is_err(),
        "c too big"
    );
    let i = Array::from_slice(&[1i32, 2, 3, 4], &[2, 2]).unwrap();
    assert!(addmm(&i, &i, &i, 1.0, 1.0).is_err(), "integers");
    assert!(
        addmm(&f(&[]), &Array::scalar(1.0f32), &f(&[2]), 1.0, 1.0).is_err(),
        "0-D"
    );
}

#[test]
fn outer_and_inner() {
    let mut rng = Rng(9);
    for dtype in FLOATS {
        let (a, av) = random(&mut rng, &[2, 3], dtype);
        let (b, bv) = random(&mut rng, &[4], dtype);
        let o = outer(&a, &b).unwrap();
        assert_eq!(o.shape(), [6, 4]);
        let want: Vec<f64> = av
            .iter()
            .flat_map(|x| bv.iter().map(move |y| x * y))
            .collect();
        let abs: Vec<f64> = want.iter().map(|w| w.abs()).collect();
        assert_close(&values(&o), &want, &abs, dtype, "outer");

        // inner: sum over the last axes.
        let (x, xv) = random(&mut rng, &[2, 3, 5], dtype);
        let (y, yv) = random(&mut rng, &[4, 5], dtype);
        let got = inner(&x, &y).unwrap();
        assert_eq!(got.shape(), [2, 3, 4]);
        let (mut want, mut abs) = (vec![], vec![]);
        for i in 0..6 {
            for j in 0..4 {
                let terms: Vec<f64> = (0..5).map(|p| xv[i * 5 + p] * yv[j * 5 + p]).collect();
                want.push(terms.iter().sum());
                abs.push(terms.iter().map(|t| t.abs()).sum());
            }
        }
        assert_close(&values(&got), &want, &abs, dtype, "inner");
        // Vectors: a scalar; a transposed view.
        let (v, vv) = random(&mut rng, &[5], dtype);
        let d = inner(&v, &v).unwrap();
        assert_eq!(d.shape(), [] as [usize; 0]);
        let want: f64 = vv.iter().map(|x| x * x).sum();
        assert_close(&values(&d), &[want], &[want], dtype, "inner of vectors");
        let t = inner(&y.t().unwrap().t().unwrap(), &v).unwrap();
        assert_eq!(t.shape(), [4]);
    }
    // Integers and scalars multiply.
    let a = Array::from_slice(&[1i32, 2, 3], &[3]).unwrap();
    assert_eq!(
        outer(&a, &a).unwrap().to_vec::<i32>().unwrap(),
        [1, 2, 3, 2, 4, 6, 3, 6, 9]
    );
    let s = inner(&a, &Array::scalar(2i32)).unwrap();
    assert_eq!(s.to_vec::<i32>().unwrap(), [2, 4, 6]);
    let e = outer(&array(&[], &[0], DType::F32), &a).unwrap();
    assert_eq!(e.shape(), [0, 3]);
    // Errors.
    let f = |shape: &[usize]| array(&vec![1.0; shape.iter().product()], shape, DType::F32);
    assert!(inner(&f(&[2, 3]), &f(&[3, 2])).is_err());
}

/// tensordot by brute force: `a`'s free axes, then `b`'s, summing over paired axes.
fn tensordot_ref(
    av: &[f64],
    sa: &[usize],
    bv: &[f64],
    sb: &[usize],
    xa: &[usize],
    xb: &[usize],
) -> (Vec<f64>, Vec<f64>, Vec<usize>) {
    let fa: Vec<usize> = (0..sa.len()).filter(|i| !xa.contains(i)).collect();
    let fb: Vec<usize> = (0..sb.len()).filter(|i| !xb.contains(i)).collect();
    let mut shape: Vec<usize> = fa.iter().map(|&i| sa[i]).collect();
    shape.extend(fb.iter().map(|&i| sb[i]));
    let cshape: Vec<usize> = xa.iter().map(|&i| sa[i]).collect();
    let (sta, stb) = (strides(sa), strides(sb));
    let total: usize = shape.iter().product();
    let csize: usize = cshape.iter().product();
    let (mut out, mut abs) = (vec![], vec![]);
    for t in 0..total {
        let idx = unravel(t, &shape);
        let (mut s, mut s_abs) = (0.0, 0.0);
        for c in 0..csize {
            let cidx = unravel(c, &cshape);
            let mut ia = vec![0; sa.len()];
            let mut ib = vec![0; sb.len()];
            for (q, &ax) in fa.iter().enumerate() {
                ia[ax] = idx[q];
            }
            for (q, &ax) in fb.iter().enumerate() {
                ib[ax] = idx[fa.len() + q];
            }
            for (q, (&x, &y)) in xa.iter().zip(xb).enumerate() {
                ia[x] = cidx[q];
                ib[y] = cidx[q];
            }
            let pa: usize = ia.iter().zip(&sta).map(|(i, s)| i * s).sum();
            let pb: usize = ib.iter().zip(&stb).map(|(i, s)| i * s).sum();
            let x = av[pa] * bv[pb];
            s += x;
            s_abs += x.abs();
        }
        out.push(s);
        abs.push(s_abs);
    }
    (out, abs, shape)
}

#[test]
fn tensordot_counts_and_pairs() {
    let mut rng = Rng(10);
    for dtype in FLOATS {
        let (a, av) = random(&mut rng, &[2, 3, 4], dtype);
        let (b, bv) = random(&mut rng, &[3, 4, 5], dtype);
        let cases: Vec<(TensorAxes, Vec<usize>, Vec<usize>)> = vec![
            (2.into(), vec![1, 2], vec![0, 1]),
            (TensorAxes::Count(0), vec![], vec![]),
            (([1isize], [0isize]).into(), vec![1], vec![0]),
            (([-1isize, -2], [1isize, 0]).into(), vec![2, 1], vec![1, 0]),
            ((vec![2isize], vec![1isize]).into(), vec![2], vec![1]),
        ];
        for (axes, xa, xb) in cases {
            let got = tensordot(&a, &b, axes.clone()).unwrap();
            let (want, abs, shape) = tensordot_ref(&av, a.shape(), &bv, b.shape(), &xa, &xb);
            assert_eq!(got.shape(), shape, "{axes:?}");
            assert_close(
                &values(&got),
                &want,
                &abs,
                dtype,
                &format!("tensordot {axes:?}"),
            );
        }
        // A count of 1 on matrices is the matrix product, on transposed views too.
        let (m, mv) = random(&mut rng, &[4, 3], dtype);
        let got = tensordot(&m.t().unwrap(), &m, 1).unwrap();
        let (want, abs, _) = tensordot_ref(&mv, &[4, 3], &mv, &[4, 3], &[0], &[0]);
        assert_close(
            &values(&got),
            &want,
            &abs,
            dtype,
            "tensordot of a transposed view",
        );
    }
}

#[test]
fn tensordot_rejects_bad_axes() {
    let f = |shape: &[usize]| array(&vec![1.0; shape.iter().product()], shape, DType::F32);
    let (a, b) = (f(&[2, 3, 4]), f(&[3, 4, 5]));
    assert!(tensordot(&a, &b, 4).is_err(), "count too large");
    assert!(tensordot(&a, &b, -1).is_err(), "negative count");
    assert!(tensordot(&a, &b, 1).is_err(), "sizes differ");
    assert!(
        tensordot(&a, &b, (vec![1isize, 2], vec![0isize])).is_err(),
        "lengths differ"
    );
    assert!(
        tensordot(&a, &b, ([3isize], [0isize])).is_err(),
        "axis out of range"
    );
    assert!(
        tensordot(&a, &b, ([1isize, 1], [0isize, 0])).is_err(),
        "repeated axis"
    );
    assert!(
        tensordot(&a, &b, ([0isize], [0isize])).is_err(),
        "sizes differ on pairs"
    );
    let i = Array::from_slice(&[1i32, 2], &[2]).unwrap();
    assert!(tensordot(&i, &i, 1).is_err(), "integers");
}

#[test]
fn kron_matches_blocks() {
    let mut rng = Rng(11);
    let cases: &[(&[usize], &[usize])] =
        &[(&[2, 2], &[2, 3]), (&[3], &[2, 2]), (&[2, 1, 3], &[2, 2])];
    for dtype in [DType::F32, DType::F64, DType::I32] {
        for (sa, sb) in cases {
            let (a, _) = random(&mut rng, sa, DType::F64);
            let (b, _) = random(&mut rng, sb, DType::F64);
            let scale = if dtype == DType::I32 { 10.0 } else { 1.0 };
            let (a, b) = (
                nuvec_core::multiply(&a, scale)
                    .unwrap()
                    .astype(dtype)
                    .unwrap(),
                nuvec_core::multiply(&b, scale)
                    .unwrap()
                    .astype(dtype)
                    .unwrap(),
            );
            let (av, bv) = (values(&a), values(&b));
            let got = kron(&a, &b).unwrap();
            let nd = sa.len().max(sb.len());
            let pad = |s: &[usize]| {
                let mut v = vec![1; nd - s.len()];
                v.extend_from_slice(s);
                v
            };
            let (pa, pb) = (pad(sa), pad(sb));
            let shape: Vec<usize> = pa.iter().zip(&pb).map(|(x, y)| x * y).collect();
            assert_eq!(got.shape(), shape);
            let (sta, stb) = (strides(&pa), strides(&pb));
            let want: Vec<f64> = (0..shape.iter().product())
                .map(|t| {
                    let idx = unravel(t, &shape);
                    let ia: usize = (0..nd).map(|d| idx[d] / pb[d] * sta[d]).sum();
                    let ib: usize = (0..nd).map(|d| idx[d] % pb[d] * stb[d]).sum();
                    av[ia] * bv[ib]
                })
                .collect();
            let abs: Vec<f64> = want.iter().map(|w| w.abs()).collect();
            assert_close(&values(&got), &want, &abs, dtype, "kron");
        }
    }
    let e = array(&[], &[0, 2], DType::F32);
    assert!(kron(&e, &e).is_err(), "empty inputs");
}

/// The trace by its definition: for each index of the other axes, the sum over `i` of
/// `a[.., i (axis1), .., i + offset (axis2), ..]`.
fn trace_ref(
    av: &[f64],
    shape: &[usize],
    offset: isize,
    ax1: usize,
    ax2: usize,
) -> (Vec<f64>, Vec<f64>) {
    let rest: Vec<usize> = (0..shape.len()).filter(|&d| d != ax1 && d != ax2).collect();
    let rshape: Vec<usize> = rest.iter().map(|&d| shape[d]).collect();
    let st = strides(shape);
    let (mut out, mut abs) = (vec![], vec![]);
    for t in 0..rshape.iter().product() {
        let ridx = unravel(t, &rshape);
        let (mut s, mut s_abs) = (0.0, 0.0);
        for i in 0..shape[ax1] as isize {
            let j = i + offset;
            if j < 0 || j >= shape[ax2] as isize {
                continue;
            }
            let mut idx = vec![0; shape.len()];
            for (q, &d) in rest.iter().enumerate() {
                idx[d] = ridx[q];
            }
            idx[ax1] = i as usize;
            idx[ax2] = j as usize;
            let v = av[idx.iter().zip(&st).map(|(i, s)| i * s).sum::<usize>()];
            s += v;
            s_abs += v.abs();
        }
        out.push(s);
        abs.push(s_abs);
    }
    (out, abs)
}

#[test]
fn trace_matches_definition() {
    let mut rng = Rng(12);
    for dtype in [DType::F32, DType::F64, DType::BF16, DType::I32] {
        let make = |rng: &mut Rng, shape: &[usize]| {
            let n = shape.iter().product();
            let data: Vec<f64> = rng.vec(n).iter().map(|v| (v * 10.0).round()).collect();
            let a = array(&data, shape, dtype);
            let v = values(&a);
            (a, v)
        };
        let (m, mv) = make(&mut rng, &[3, 4]);
        for offset in -4..=5 {
            let got = trace(&m, offset, 0, 1).unwrap();
            assert_eq!(got.shape(), [] as [usize; 0]);
            let (want, abs) = trace_ref(&mv, &[3, 4], offset, 0, 1);
            assert_close(
                &values(&got),
                &want,
                &abs,
                got.dtype(),
                &format!("trace {offset}"),
            );
            // Rows and columns swapped.
            let got = trace(&m, offset, 1, 0).unwrap();
            let (want, abs) = trace_ref(&mv, &[3, 4], offset, 1, 0);
            assert_close(
                &values(&got),
                &want,
                &abs,
                got.dtype(),
                "trace, axes swapped",
            );
        }
        let (c, cv) = make(&mut rng, &[3, 2, 5]);
        for (o, x, y, ax1, ax2) in [(0, 0, 2, 0, 2), (1, -1, 0, 2, 0), (-1, 1, -1, 1, 2)] {
            let got = trace(&c, o, x, y).unwrap();
            let (want, abs) = trace_ref(&cv, &[3, 2, 5], o, ax1, ax2);
            assert_close(
                &values(&got),
                &want,
                &abs,
                got.dtype(),
                &format!("trace 3-D {x} {y}"),
            );
        }
        // Views: transposed and reversed with a step.
        let t = transpose(&c, &[2, 0, 1]).unwrap(); // [5, 3, 2]
        let tv = values(&t);
        let got = trace(&t, 0, 0, 1).unwrap();
        let (want, abs) = trace_ref(&tv, &[5, 3, 2], 0, 0, 1);
        assert_close(
            &values(&got),
            &want,
            &abs,
            got.dtype(),
            "trace of a transposed view",
        );
        let r = slice(
            &c,
            &[s(None, None, -1), SliceArg::full(), s(None, None, -2)],
        )
        .unwrap();
        let rv = values(&r); // [3, 2, 3]
        let got = trace(&r, 0, 0, 2).unwrap();
        let (want, abs) = trace_ref(&rv, &[3, 2, 3], 0, 0, 2);
        assert_close(
            &values(&got),
            &want,
            &abs,
            got.dtype(),
            "trace of a reversed slice",
        );
        // Empty.
        let e = array(&[], &[0, 3], dtype);
        assert_eq!(values(&trace(&e, 0, 0, 1).unwrap()), [0.0]);
    }
    let f = |shape: &[usize]| array(&vec![1.0; shape.iter().product()], shape, DType::F32);
    assert!(trace(&f(&[3]), 0, 0, 1).is_err(), "1-D");
    assert!(trace(&f(&[3, 3]), 0, 1, 1).is_err(), "same axis");
    assert!(trace(&f(&[3, 3]), 0, -1, 1).is_err(), "same axis, negative");
    assert!(trace(&f(&[3, 3]), 0, 0, 2).is_err(), "axis out of range");
}
