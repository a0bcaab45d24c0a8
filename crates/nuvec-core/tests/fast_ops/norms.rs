//! `rms_norm`, `add_rms_norm`, `layer_norm`, `cross_entropy`, and softmax/logsumexp on the
//! CPU.

use super::*;

/// Each row (of `d` values) of `x` over its root mean square, times `w`.
fn rms_ref(x: &[f64], d: usize, w: Option<&[f64]>, eps: f64) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(d.max(1)) {
        let ms = row.iter().map(|v| v * v).sum::<f64>() / d as f64;
        let n = 1.0 / (ms + eps).sqrt();
        out.extend(
            row.iter()
                .enumerate()
                .map(|(j, v)| v * n * w.map_or(1.0, |w| w[j])),
        );
    }
    out
}

/// Each row normalised to mean 0 and variance 1, times `w`, plus `b`.
fn layer_ref(x: &[f64], d: usize, w: Option<&[f64]>, b: Option<&[f64]>, eps: f64) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(d.max(1)) {
        let mu = row.iter().sum::<f64>() / d as f64;
        let var = row.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / d as f64;
        let n = 1.0 / (var + eps).sqrt();
        out.extend(
            row.iter()
                .enumerate()
                .map(|(j, v)| (v - mu) * n * w.map_or(1.0, |w| w[j]) + b.map_or(0.0, |b| b[j])),
        );
    }
    out
}

/// The epsilon of the norms as they see it (an f32).
const EPS: f64 = 1e-5f32 as f64;

const SHAPES: [&[usize]; 5] = [&[7], &[3, 5], &[2, 3, 16], &[0, 4], &[2, 300]];

#[test]
fn rms_norm_matches_the_formula() {
    let mut rng = Rng::new(1);
    for shape in SHAPES {
        let d = shape[shape.len() - 1];
        for dtype in FLOATS {
            let x = rand(&mut rng, shape, dtype);
            let w = rand(&mut rng, &[d], dtype);
            let (xv, wv) = (values(&x), values(&w));
            for weighted in [false, true] {
                let want = rms_ref(&xv, d, weighted.then_some(&wv[..]), EPS);
                let name = format!("rms {shape:?} {dtype} weighted {weighted}");
                let wt = weighted.then_some(&w);
                let got = fast::rms_norm(&x, wt, 1e-5).unwrap();
                check(&name, &got, shape, dtype, &want, tol(dtype));
                if shape.len() > 1 {
                    let got = fast::rms_norm(&strided(&x), wt, 1e-5).unwrap();
                    check(
                        &format!("{name} strided"),
                        &got,
                        shape,
                        dtype,
                        &want,
                        tol(dtype),
                    );
                }
            }
        }
    }
    // A broadcast input (every row the same) and a reversed slice.
    let row = Array::from_slice(&[1.0f32, -2.0, 0.5], &[3]).unwrap();
    let x = broadcast_to(&row, &[4, 3]).unwrap();
    let want = rms_ref(&values(&x), 3, None, 1e-6);
    let got = fast::rms_norm(&x, None, 1e-6).unwrap();
    check("rms broadcast", &got, &[4, 3], DType::F32, &want, 1e-6);
    let x = rand(&mut rng, &[5, 6], DType::F32);
    let rev = slice(&x, &[SliceArg::new(None, None, -2)]).unwrap();
    let want = rms_ref(&values(&rev), 6, None, 1e-6);
    let got = fast::rms_norm(&rev, None, 1e-6).unwrap();
    check("rms reversed", &got, &[3, 6], DType::F32, &want, 2e-6);
}

#[test]
fn rms_norm_promotes_the_weight() {
    let mut rng = Rng::new(2);
    for (xd, wd, out) in [
        (DType::F16, DType::F32, DType::F32),
        (DType::BF16, DType::F16, DType::F32),
        (DType::F32, DType::F64, DType::F64),
    ] {
        let x = rand(&mut rng, &[3, 8], xd);
        let w = rand(&mut rng, &[8], wd);
        let want = rms_ref(&values(&x), 8, Some(&values(&w)), EPS);
        let got = fast::rms_norm(&x, Some(&w), 1e-5).unwrap();
        check(&format!("{xd}·{wd}"), &got, &[3, 8], out, &want, tol(out));
    }
}

#[test]
fn add_rms_norm_matches_add_then_rms_norm() {
    let mut rng = Rng::new(3);
    for shape in [&[9][..], &[3, 7], &[2, 1, 64]] {
        let d = shape[shape.len() - 1];
        for dtype in FLOATS {
            let x = rand(&mut rng, shape, dtype);
            let r = rand(&mut rng, shape, dtype);
            let w = rand(&mut rng, &[d], dtype);
            for weight in [Some(&w), None] {
                let name = format!("add_rms {shape:?} {dtype} {}", weight.is_some());
                let (h, y) = fast::add_rms_norm(&x, &r, weight, 1e-5).unwrap();
                // h is the rounded sum; the norm is of h.
                let hw = add(&x, &r).unwrap();
                check_same(&format!("{name} h"), &h, &hw, 0.0);
                let wv = weight.map(values);
                let want = rms_ref(&values(&hw), d, wv.as_deref(), EPS);
                check(&format!("{name} y"), &y, shape, dtype, &want, tol(dtype));
                // Bit for bit the two operations.
                let composed = fast::rms_norm(&hw, weight, 1e-5).unwrap();
                check_same(&format!("{name} composed"), &y, &composed, 0.0);
            }
        }
    }
    // A weight that widens the sum's type, and a residual that broadcasts: the two ops.
    let x = rand(&mut rng, &[2, 8], DType::BF16);
    let r = rand(&mut rng, &[2, 8], DType::BF16);
    let w = rand(&mut rng, &[8], DType::F32);
    let (h, y) = fast::add_rms_norm(&x, &r, Some(&w), 1e-5).unwrap();
    assert_eq!((h.dtype(), y.dtype()), (DType::BF16, DType::F32));
    let want = fast::rms_norm(&add(&x, &r).unwrap(), Some(&w), 1e-5).unwrap();
    check_same("widened", &y, &want, 0.0);
    let row = rand(&mut rng, &[8], DType::F32);
    let x = rand(&mut rng, &[3, 8], DType::F32);
    let (h, y) = fast::add_rms_norm(&x, &row, None, 1e-5).unwrap();
    let hw = add(&x, &row).unwrap();
    check_same("broadcast h", &h, &hw, 0.0);
    let want = rms_ref(&values(&hw), 8, None, EPS);
    check("broadcast y", &y, &[3, 8], DType::F32, &want, 2e-5);
    // Integer sums cannot be normalised.
    let i = Array::from_slice(&[1i32, 2], &[1, 2]).unwrap();
    expect_err(fast::add_rms_norm(&i, &i, None, 1e-5), "rms_norm");
}

#[test]
fn layer_norm_matches_the_formula() {
    let mut rng = Rng::new(4);
    for shape in SHAPES {
        let d = shape[shape.len() - 1];
        for dtype in FLOATS {
            let x = rand(&mut rng, shape, dtype);
            let w = rand(&mut rng, &[d], dtype);
            let b = rand(&mut rng, &[d], dtype);
            let (xv, wv, bv) = (values(&x), values(&w), values(&b));
            for (weighted, biased) in [(false, false), (true, false), (false, true), (true, true)] {
                let want = layer_ref(
                    &xv,
                    d,
                    weighted.then_some(&wv[..]),
                    biased.then_some(&bv[..]),
                    EPS,
                );
                let name = format!("layer_norm {shape:?} {dtype} {weighted} {biased}");
                let got = fast::layer_norm(&x, weighted.then_some(&w), biased.then_some(&b), 1e-5)
                    .unwrap();
                check(&name, &got, shape, dtype, &want, tol(dtype));
            }
        }
    }
    let x = rand(&mut rng, &[4, 6], DType::F32);
    let want = layer_ref(&values(&x), 6, None, None, EPS);
    let got = fast::layer_norm(&strided(&x), None, None, 1e-5).unwrap();
    check("layer_norm strided", &got, &[4, 6], DType::F32, &want, 2e-5);
    // Mixed types promote.
    let w = rand(&mut rng, &[6], DType::F64);
    let got = fast::layer_norm(&x, Some(&w), None, 1e-5).unwrap();
    assert_eq!(got.dtype(), DType::F64);
}

#[test]
fn cross_entropy_matches_the_formula() {
    let mut rng = Rng::new(5);
    for shape in [&[6][..], &[4, 5], &[2, 3, 7], &[0, 3]] {
        let classes = shape[shape.len() - 1];
        let rows: usize = shape[..shape.len() - 1].iter().product();
        for dtype in FLOATS {
            let x = uniform(&mut rng, shape, -3.0, 3.0, dtype);
            // Every other target counted from the end.
            let t: Vec<i64> = (0..rows)
                .map(|i| {
                    let c = (i * 5 + 1) % classes;
                    if i % 2 == 1 {
                        c as i64 - classes as i64
                    } else {
                        c as i64
                    }
                })
                .collect();
            let tshape = &shape[..shape.len() - 1];
            let xv = values(&x);
            let want: Vec<f64> = (0..rows)
                .map(|r| {
                    let row = &xv[r * classes..(r + 1) * classes];
                    let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let lse = m + row.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
                    let c = t[r].rem_euclid(classes as i64) as usize;
                    lse - row[c]
                })
                .collect();
            for tdtype in [DType::I32, DType::I64, DType::I16] {
                let targets = Array::from_slice(&t, tshape)
                    .unwrap()
                    .astype(tdtype)
                    .unwrap();
                let got = fast::cross_entropy(&x, &targets).unwrap();
                let name = format!("cross_entropy {shape:?} {dtype} {tdtype}");
                // Always float32, computed in float32 (or float64).
                let tol = if dtype == DType::F64 { 1e-6 } else { 2e-5 };
                check(&name, &got, tshape, DType::F32, &want, tol);
            }
        }
    }
    // Unsigned targets.
    let x = rand(&mut rng, &[2, 4], DType::F32);
    let t = Array::from_slice(&[3u8, 0], &[2]).unwrap();
    let xv = values(&x);
    let want: Vec<f64> = (0..2)
        .map(|r| {
            let row = &xv[r * 4..r * 4 + 4];
            row.iter().map(|v| v.exp()).sum::<f64>().ln() - row[[3, 0][r]]
        })
        .collect();
    let got = fast::cross_entropy(&strided(&x), &t).unwrap();
    check(
        "cross_entropy u8 strided",
        &got,
        &[2],
        DType::F32,
        &want,
        2e-5,
    );
}

#[test]
fn softmax_and_logsumexp_keep_their_cpu_primitives() {
    // On the CPU stream the crate's own kernels run, not a fused node.
    let x = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let s = softmax(&x, &[-1]).unwrap();
    assert!(matches!(s.primitive(), Some(Primitive::Softmax)));
    let l = logsumexp(&x, &[-1], true).unwrap();
    assert!(matches!(l.primitive(), Some(Primitive::Reduce { .. })));
    let want = [1.0 / (1.0 + 1f64.exp()), 1f64.exp() / (1.0 + 1f64.exp())];
    check(
        "softmax",
        &s,
        &[2, 2],
        DType::F32,
        &[want[0], want[1], want[0], want[1]],
        1e-6,
    );
    let lse = |a: f64, b: f64| (a.exp() + b.exp()).ln();
    check(
        "logsumexp",
        &l,
        &[2, 1],
        DType::F32,
        &[lse(1.0, 2.0), lse(3.0, 4.0)],
        1e-6,
    );
}

/// Batching a norm over its weight (not only its rows) batches the fallback graph: each
/// example equals the norm with its own weight, on the CPU and (built only) on a GPU stream.
#[test]
fn vmap_over_the_weight_equals_a_loop() {
    let mut rng = Rng::new(0x77);
    let x = rand(&mut rng, &[4, 8], DType::F32);
    let w = rand(&mut rng, &[3, 8], DType::F32);
    let b = rand(&mut rng, &[8], DType::F32);
    let f = |xs: &[Array]| {
        Ok(vec![fast::layer_norm(
            &xs[0],
            Some(&xs[1]),
            Some(&xs[2]),
            1e-5,
        )?])
    };
    let out = vmap(f, &[None, Some(0), None], &[0])(&[x.clone(), w.clone(), b.clone()]).unwrap();
    assert_eq!(out[0].shape(), [3, 4, 8]);
    for i in 0..3 {
        let wi = part(&w, 0, i, i + 1).reshape(&[8]).unwrap();
        let want = fast::layer_norm(&x, Some(&wi), Some(&b), 1e-5).unwrap();
        check_same(
            "vmap layer_norm",
            &part(&out[0], 0, i, i + 1).reshape(&[4, 8]).unwrap(),
            &want,
            1e-6,
        );
    }
    let g = |xs: &[Array]| {
        let (h, y) = fast::add_rms_norm(&xs[0], &xs[0], Some(&xs[1]), 1e-5)?;
        Ok(vec![h, y])
    };
    let outs = with_stream(Stream::default_for(Device::gpu(0)), || {
        vmap(g, &[None, Some(0)], &[0, 0])(&[x.clone(), w.clone()]).unwrap()
    });
    assert_eq!(outs.len(), 2);
    assert_eq!(outs[1].shape(), [3, 4, 8]);
}
