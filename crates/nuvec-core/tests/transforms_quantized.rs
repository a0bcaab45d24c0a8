//! Derivatives and batching of the quantization family: vjp against central differences and
//! jvp against vjp (the weights' packed integers constant), vmap against a loop, and the
//! transforms quantizing does not have.

mod common;

use common::Rng;
use common::autodiff::{check, check_vmap, random};
use nuvec_core::*;

/// Packed weights of the unpacked `shape` with f64 scales and biases.
fn packed(rng: &mut Rng, shape: &[usize], gs: usize, bits: u32) -> (Array, Array, Array) {
    let w = random(rng, shape, -1.0, 1.0);
    let (wq, s, b) = quantize(&w, gs, bits).unwrap();
    (wq, s, b)
}

fn qmm(transpose: bool, gs: usize, bits: u32) -> impl Fn(&[Array]) -> Result<Vec<Array>> + Clone {
    move |v: &[Array]| {
        Ok(vec![quantized_matmul(
            &v[0], &v[1], &v[2], &v[3], transpose, gs, bits,
        )?])
    }
}

#[test]
fn quantized_matmul_derivatives() {
    let mut rng = Rng::new(11);
    for (bits, gs) in [(4, 32), (3, 64), (6, 32), (8, 64)] {
        for transpose in [true, false] {
            // w is [n, k] packed along k, or [k, n] packed along n.
            let (n, k) = if transpose { (5, 64) } else { (64, 6) };
            let wshape = if transpose { [n, k] } else { [k, n] };
            let (wq, s, b) = packed(&mut rng, &wshape, gs, bits);
            let name = format!("bits={bits} gs={gs} t={transpose}");
            let x = random(&mut rng, &[2, 3, k], -1.0, 1.0);
            check(
                &name,
                qmm(transpose, gs, bits),
                &[x, wq.clone(), s.clone(), b.clone()],
                &mut rng,
            );
            // A 1-D x.
            let x = random(&mut rng, &[k], -1.0, 1.0);
            check(
                &format!("{name} 1-D"),
                qmm(transpose, gs, bits),
                &[x, wq, s, b],
                &mut rng,
            );
        }
    }
    // A batch of weights, and x broadcast against it.
    for transpose in [true, false] {
        let (n, k) = if transpose { (3, 32) } else { (32, 4) };
        let wshape = if transpose { [2, n, k] } else { [2, k, n] };
        let (wq, s, b) = packed(&mut rng, &wshape, 32, 4);
        let x = random(&mut rng, &[2, 2, k], -1.0, 1.0);
        check(
            "batched",
            qmm(transpose, 32, 4),
            &[x, wq.clone(), s.clone(), b.clone()],
            &mut rng,
        );
        let x = random(&mut rng, &[2, k], -1.0, 1.0);
        check(
            "broadcast x",
            qmm(transpose, 32, 4),
            &[x, wq, s, b],
            &mut rng,
        );
    }
}

#[test]
fn dequantize_derivatives() {
    let mut rng = Rng::new(12);
    for (bits, gs) in [(2, 32), (5, 64), (4, 128)] {
        let (wq, s, b) = packed(&mut rng, &[3, 128], gs, bits);
        let f = move |v: &[Array]| Ok(vec![dequantize(&v[0], &v[1], &v[2], gs, bits)?]);
        check(
            &format!("dequantize bits={bits} gs={gs}"),
            f,
            &[wq, s, b],
            &mut rng,
        );
    }
}

#[test]
fn no_derivative_of_quantizing_or_the_packed_integers() {
    let mut rng = Rng::new(13);
    let w = random(&mut rng, &[2, 32], -1.0, 1.0);
    let f = |v: &[Array]| {
        let (_, s, b) = quantize(&v[0], 32, 4)?;
        Ok(vec![add(&s, &b)?])
    };
    let cot = ones(&[2, 1], DType::F64).unwrap();
    let err = vjp(f, std::slice::from_ref(&w), &[cot]).unwrap_err();
    assert!(
        matches!(err, Error::Unsupported { op: "quantize", .. }),
        "{err}"
    );
    let err = jvp(f, std::slice::from_ref(&w), std::slice::from_ref(&w)).unwrap_err();
    assert!(
        matches!(err, Error::Unsupported { op: "quantize", .. }),
        "{err}"
    );
    // Asked directly, the rules refuse the packed integers.
    let (wq, s, b) = quantize(&w, 32, 4).unwrap();
    let x = random(&mut rng, &[1, 32], -1.0, 1.0);
    let y = quantized_matmul(&x, &wq, &s, &b, true, 32, 4).unwrap();
    let p = y.primitive().unwrap().clone();
    let ins = y.inputs();
    let g = Some(ones_like(&y).unwrap());
    let err = p
        .vjp(&ins, &[Some(y.clone())], std::slice::from_ref(&g), &[1])
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Unsupported {
                op: "quantized_matmul",
                ..
            }
        ),
        "{err}"
    );
    let d = dequantize(&wq, &s, &b, 32, 4).unwrap();
    let p = d.primitive().unwrap().clone();
    let err = p
        .vjp(
            &d.inputs(),
            &[Some(d.clone())],
            &[Some(ones_like(&d).unwrap())],
            &[0],
        )
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Unsupported {
                op: "dequantize",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn quantized_matmul_batching() {
    let mut rng = Rng::new(14);
    for transpose in [true, false] {
        let (n, k) = if transpose { (4, 64) } else { (64, 5) };
        let wshape = if transpose { [n, k] } else { [k, n] };
        let f = qmm(transpose, 32, 3);
        let (wq, s, b) = packed(&mut rng, &wshape, 32, 3);
        // Only x batched: rows of one example, several leading axes, a 1-D x.
        let x = random(&mut rng, &[3, 2, k], -1.0, 1.0);
        let ws = [wq.clone(), s.clone(), b.clone()];
        let all = |x: &Array, ws: &[Array]| {
            let mut v = vec![x.clone()];
            v.extend_from_slice(ws);
            v
        };
        check_vmap("x", f.clone(), &all(&x, &ws), &[true, false, false, false]);
        let x3 = random(&mut rng, &[3, 2, 2, k], -1.0, 1.0);
        check_vmap(
            "x 3-D",
            f.clone(),
            &all(&x3, &ws),
            &[true, false, false, false],
        );
        let x1 = random(&mut rng, &[3, k], -1.0, 1.0);
        check_vmap(
            "x 1-D",
            f.clone(),
            &all(&x1, &ws),
            &[true, false, false, false],
        );
        // A batch of weights, with x batched or shared, and the scales alone batched.
        let bshape = [3, wshape[0], wshape[1]];
        let (bq, bs, bb) = packed(&mut rng, &bshape, 32, 3);
        let bws = [bq.clone(), bs.clone(), bb.clone()];
        check_vmap("all", f.clone(), &all(&x, &bws), &[true; 4]);
        check_vmap(
            "weights",
            f.clone(),
            &all(&x3, &bws),
            &[false, true, true, true],
        );
        check_vmap(
            "weights, 1-D x",
            f.clone(),
            &all(&x1, &bws),
            &[true, true, true, true],
        );
        let scales_only = [wq.clone(), bs.clone(), b.clone()];
        check_vmap(
            "scales",
            f.clone(),
            &all(&x, &scales_only),
            &[false, false, true, false],
        );
        // Each example a batch of two weights.
        let (cq, cs, cb) = packed(&mut rng, &[3, 2, wshape[0], wshape[1]], 32, 3);
        let x4 = random(&mut rng, &[3, 2, 2, k], -1.0, 1.0);
        check_vmap(
            "batched weights",
            f.clone(),
            &[x4.clone(), cq.clone(), cs.clone(), cb.clone()],
            &[true; 4],
        );
        let c0 = |a: &Array| take(a, &Array::scalar(0u32), Some(0)).unwrap();
        check_vmap(
            "batched weights, x",
            f.clone(),
            &[x4, c0(&cq), c0(&cs), c0(&cb)],
            &[true, false, false, false],
        );
    }
}

#[test]
fn quantize_and_dequantize_batching() {
    let mut rng = Rng::new(15);
    let w = random(&mut rng, &[3, 2, 64], -1.0, 1.0);
    let q = |v: &[Array]| {
        let (wq, s, b) = quantize(&v[0], 32, 5)?;
        Ok(vec![wq, s, b])
    };
    check_vmap("quantize", q, &[w], &[true]);
    let (wq, s, b) = packed(&mut rng, &[3, 2, 64], 64, 6);
    let d = |v: &[Array]| Ok(vec![dequantize(&v[0], &v[1], &v[2], 64, 6)?]);
    check_vmap(
        "dequantize",
        d,
        &[wq.clone(), s.clone(), b.clone()],
        &[true; 3],
    );
    let c0 = |a: &Array| take(a, &Array::scalar(0u32), Some(0)).unwrap();
    check_vmap(
        "dequantize scales",
        d,
        &[c0(&wq), s.clone(), c0(&b)],
        &[false, true, false],
    );
    check_vmap(
        "dequantize words",
        d,
        &[wq, c0(&s), c0(&b)],
        &[true, false, false],
    );
}
