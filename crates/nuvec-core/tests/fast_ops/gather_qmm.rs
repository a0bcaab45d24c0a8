//! `gather_qmm` against products written here in float64: the weights unpacked by hand from
//! MLX's packing (value `i` of a row is bits `i · bits ..` of the row's little-endian stream
//! of bits), scaled and shifted group by group, then multiplied index by index.

use super::*;

/// The packed integers of every row of `wq` (`[rows, words]` flattened), unpacked.
fn unpack(words: &[u32], words_per_row: usize, bits: usize) -> Vec<u32> {
    let per_row = words_per_row * 32 / bits;
    let mut out = Vec::with_capacity(words.len() / words_per_row * per_row);
    for row in words.chunks(words_per_row) {
        for i in 0..per_row {
            let mut v = 0u32;
            for t in 0..bits {
                let bit = i * bits + t;
                v |= ((row[bit / 32] >> (bit % 32)) & 1) << t;
            }
            out.push(v);
        }
    }
    out
}

/// The dequantized weights `s · q + b` of every batch, as `[batches, rows, values]`.
fn dequantized(wq: &Array, scales: &Array, biases: &Array, group: usize, bits: u32) -> Vec<f64> {
    let words = wq.to_vec::<u32>().unwrap();
    let q = unpack(&words, wq.shape()[wq.ndim() - 1], bits as usize);
    let (s, b) = (values(scales), values(biases));
    q.iter()
        .enumerate()
        .map(|(i, &q)| s[i / group] * f64::from(q) + b[i / group])
        .collect()
}

/// The products `x[lhs[p]] · W[rhs[p]]` (`W` transposed when `transpose`), index by index.
#[allow(clippy::too_many_arguments)]
fn reference(
    x: &[f64],
    w: &[f64],
    (m, k, n): (usize, usize, usize),
    transpose: bool,
    lhs: &[usize],
    rhs: &[usize],
) -> Vec<f64> {
    let mut out = Vec::new();
    for (&l, &r) in lhs.iter().zip(rhs) {
        let wb = &w[r * k * n..(r + 1) * k * n];
        for i in 0..m {
            for j in 0..n {
                let dot: f64 = (0..k)
                    .map(|c| {
                        let wv = if transpose {
                            wb[j * k + c]
                        } else {
                            wb[c * n + j]
                        };
                        x[(l * m + i) * k + c] * wv
                    })
                    .sum();
                out.push(dot);
            }
        }
    }
    out
}

/// Quantized weights of `batch` batches for a product of inner size `k` and outer `n`.
fn weights(
    rng: &mut Rng,
    batch: &[usize],
    (k, n): (usize, usize),
    transpose: bool,
    group: usize,
    bits: u32,
    dtype: DType,
) -> (Array, Array, Array) {
    let mut shape = batch.to_vec();
    shape.extend(if transpose { [n, k] } else { [k, n] });
    let w = rand(rng, &shape, dtype);
    quantize(&w, group, bits).unwrap()
}

/// A relative tolerance for a sum of `k` products rounded to `dtype`.
fn product_tol(dtype: DType, k: usize) -> f64 {
    tol(dtype) * (k as f64).sqrt().max(2.0)
}

#[test]
fn gather_qmm_matches_the_formula_for_every_width() {
    let mut rng = Rng::new(91);
    let (m, e) = (2, 3);
    for (bits, group, transpose) in [
        (4, 32, true),
        (2, 64, true),
        (3, 32, false),
        (5, 32, true),
        (6, 64, false),
        (8, 32, true),
    ] {
        let (k, n) = if transpose {
            (2 * group, 5)
        } else {
            (6, group)
        };
        for dtype in FLOATS {
            let (wq, s, b) = weights(&mut rng, &[e], (k, n), transpose, group, bits, dtype);
            let wv = dequantized(&wq, &s, &b, group, bits);
            let x = rand(&mut rng, &[4, m, k], dtype);
            // [3, 1] and [1, 2] broadcast to [3, 2].
            let lhs = Array::from_slice(&[3u32, 0, 2], &[3, 1]).unwrap();
            let rhs = Array::from_slice(&[2i64, 0], &[1, 2]).unwrap();
            let got = gather_qmm(
                &x,
                &wq,
                &s,
                &b,
                Some(&lhs),
                Some(&rhs),
                transpose,
                group,
                bits,
                false,
            )
            .unwrap();
            let want = reference(
                &values(&x),
                &wv,
                (m, k, n),
                transpose,
                &[3, 3, 0, 0, 2, 2],
                &[2, 0, 2, 0, 2, 0],
            );
            let name = format!("gather_qmm {bits} bits g{group} t{transpose} {dtype}");
            check(
                &name,
                &got,
                &[3, 2, m, n],
                dtype,
                &want,
                product_tol(dtype, k),
            );
        }
    }
}

#[test]
fn gather_qmm_sorted_defaults_and_views() {
    let mut rng = Rng::new(92);
    let (m, k, n, group, bits) = (3, 64, 4, 32, 4);
    for dtype in [DType::F32, DType::BF16] {
        let (wq, s, b) = weights(&mut rng, &[4], (k, n), true, group, bits, dtype);
        let wv = dequantized(&wq, &s, &b, group, bits);
        // Tokens routed to experts, sorted by expert (a mixture of experts' layer).
        let x = rand(&mut rng, &[5, 1, k], dtype);
        let lhs = Array::from_slice(&[4u32, 1, 0, 3, 2, 1], &[6]).unwrap();
        let rhs = Array::from_slice(&[0u32, 0, 1, 1, 3, 3], &[6]).unwrap();
        let t = product_tol(dtype, k);
        for sorted in [false, true] {
            let got = gather_qmm(
                &x,
                &wq,
                &s,
                &b,
                Some(&lhs),
                Some(&rhs),
                true,
                group,
                bits,
                sorted,
            )
            .unwrap();
            let want = reference(
                &values(&x),
                &wv,
                (1, k, n),
                true,
                &[4, 1, 0, 3, 2, 1],
                &[0, 0, 1, 1, 3, 3],
            );
            check(
                &format!("sorted={sorted} {dtype}"),
                &got,
                &[6, 1, n],
                dtype,
                &want,
                t,
            );
        }
        // Default indices: every batch of each operand in order, batch shapes [2, 2].
        let w4 =
            |a: &Array| reshape(a, &[2, 2, a.shape()[1] as isize, a.shape()[2] as isize]).unwrap();
        let xb = rand(&mut rng, &[2, 2, m, k], dtype);
        let got = gather_qmm(
            &xb,
            &w4(&wq),
            &w4(&s),
            &w4(&b),
            None,
            None,
            true,
            group,
            bits,
            false,
        )
        .unwrap();
        let want = reference(
            &values(&xb),
            &wv,
            (m, k, n),
            true,
            &[0, 1, 2, 3],
            &[0, 1, 2, 3],
        );
        check(
            &format!("defaults {dtype}"),
            &got,
            &[2, 2, m, n],
            dtype,
            &want,
            t,
        );
        // Strided x, an index broadcast against the other's default (one x for all four).
        let x1 = rand(&mut rng, &[1, m, k], dtype);
        let zero = Array::from_slice(&[0u8], &[1]).unwrap();
        let got = gather_qmm(
            &strided(&x1),
            &w4(&wq),
            &w4(&s),
            &w4(&b),
            Some(&zero),
            None,
            true,
            group,
            bits,
            false,
        );
        let want = reference(&values(&x1), &wv, (m, k, n), true, &[0; 4], &[0, 1, 2, 3]);
        check(
            &format!("strided {dtype}"),
            &got.unwrap(),
            &[2, 2, m, n],
            dtype,
            &want,
            t,
        );
    }
    // Mixed types promote: float16 x with float32 scales gives float32.
    let (wq, s, b) = weights(&mut rng, &[2], (k, n), true, group, bits, DType::F32);
    let wv = dequantized(&wq, &s, &b, group, bits);
    let x = rand(&mut rng, &[1, 2, k], DType::F16);
    let idx = Array::from_slice(&[1i32, 0], &[2]).unwrap();
    let zero = Array::from_slice(&[0i32, 0], &[2]).unwrap();
    let got = gather_qmm(
        &x,
        &wq,
        &s,
        &b,
        Some(&zero),
        Some(&idx),
        true,
        group,
        bits,
        false,
    )
    .unwrap();
    let want = reference(&values(&x), &wv, (2, k, n), true, &[0, 0], &[1, 0]);
    check("mixed", &got, &[2, 2, n], DType::F32, &want, 1e-5);
}

#[test]
fn gather_qmm_rejects_bad_arguments() {
    let mut rng = Rng::new(93);
    let (wq, s, b) = weights(&mut rng, &[2], (32, 4), true, 32, 4, DType::F32);
    let x = rand(&mut rng, &[2, 1, 32], DType::F32);
    let idx = Array::from_slice(&[0u32, 1], &[2]).unwrap();
    let run =
        |x: &Array, wq: &Array, s: &Array, b: &Array, l: Option<&Array>, g: usize, bits: u32| {
            gather_qmm(x, wq, s, b, l, Some(&idx), true, g, bits, false)
        };
    // x of one dimension, or the wrong inner size.
    expect_err(
        run(&rand(&mut rng, &[32], DType::F32), &wq, &s, &b, None, 32, 4),
        "gather_qmm",
    );
    expect_err(
        run(
            &rand(&mut rng, &[2, 1, 16], DType::F32),
            &wq,
            &s,
            &b,
            None,
            32,
            4,
        ),
        "gather_qmm",
    );
    // Unsupported widths and groups, or ones that do not fit the packing.
    expect_err(run(&x, &wq, &s, &b, None, 32, 7), "gather_qmm");
    expect_err(run(&x, &wq, &s, &b, None, 16, 4), "gather_qmm");
    expect_err(run(&x, &wq, &s, &b, None, 64, 4), "gather_qmm");
    expect_err(run(&x, &wq, &s, &b, None, 32, 8), "gather_qmm");
    // A float packed matrix; scales and biases of different shapes; integer x.
    expect_err(
        run(&x, &wq.astype(DType::F32).unwrap(), &s, &b, None, 32, 4),
        "gather_qmm",
    );
    expect_err(
        run(&x, &wq, &s, &part(&b, 0, 0, 1), None, 32, 4),
        "gather_qmm",
    );
    let xi = x.astype(DType::I32).unwrap();
    let si = s.astype(DType::I32).unwrap();
    expect_err(
        run(&xi, &wq, &si, &b.astype(DType::I32).unwrap(), None, 32, 4),
        "gather_qmm",
    );
    // Float indices, and indices that do not broadcast together.
    expect_err(
        run(
            &x,
            &wq,
            &s,
            &b,
            Some(&rand(&mut rng, &[2], DType::F32)),
            32,
            4,
        ),
        "gather_qmm",
    );
    let three = Array::from_slice(&[0u32, 1, 0], &[3]).unwrap();
    expect_err(run(&x, &wq, &s, &b, Some(&three), 32, 4), "gather_qmm");
}

#[test]
fn gather_qmm_nodes_are_checked() {
    let mut rng = Rng::new(94);
    let (wq, s, b) = weights(&mut rng, &[2], (32, 4), true, 32, 4, DType::F32);
    let x = rand(&mut rng, &[2, 1, 32], DType::F32);
    let idx = Array::from_slice(&[1u32, 0], &[2]).unwrap();
    let op = fast::FastOp::GatherQmm {
        group_size: 32,
        bits: 4,
        transpose: true,
    };
    let node = |inputs: Vec<Array>| Array::from_op(Primitive::Fast(op.clone()), inputs);
    // A node built by hand runs its fallback: the same as the public operation.
    let got = node(vec![
        x.clone(),
        wq.clone(),
        s.clone(),
        b.clone(),
        idx.clone(),
        idx.clone(),
    ])
    .unwrap();
    let want = gather_qmm(&x, &wq, &s, &b, Some(&idx), Some(&idx), true, 32, 4, false).unwrap();
    check_same("node", &got[0], &want, 0.0);
    // Too few inputs, index arrays of different shapes, a type mismatch.
    expect_err(
        node(vec![
            x.clone(),
            wq.clone(),
            s.clone(),
            b.clone(),
            idx.clone(),
        ]),
        "gather_qmm",
    );
    let one = Array::from_slice(&[0u32], &[1]).unwrap();
    expect_err(
        node(vec![
            x.clone(),
            wq.clone(),
            s.clone(),
            b.clone(),
            idx.clone(),
            one,
        ]),
        "gather_qmm",
    );
    let xh = x.astype(DType::F16).unwrap();
    expect_err(node(vec![xh, wq, s, b, idx.clone(), idx]), "gather_qmm");
}
