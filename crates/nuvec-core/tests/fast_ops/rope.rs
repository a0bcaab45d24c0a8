//! `rope` and `norm_rope`.

use super::*;

/// The rotation of `x` (`shape`: `[B, ..., T, D]`) in float64: pairs `(i, i + dims/2)` or
/// `(2i, 2i + 1)` turned by `(offset_b + t) · scale · inv_freq[i]`.
fn rope_ref(
    x: &[f64],
    shape: &[usize],
    dims: usize,
    traditional: bool,
    inv_freq: &[f64],
    scale: f64,
    offsets: &[f64],
) -> Vec<f64> {
    let nd = shape.len();
    let (t_len, d) = (shape[nd - 2], shape[nd - 1]);
    let per_batch: usize = shape[1..].iter().product();
    let mut out = x.to_vec();
    let half = dims / 2;
    for (row, chunk) in x.chunks(d).enumerate() {
        let b = row * d / per_batch.max(1);
        let t = row % t_len;
        let offset = if offsets.len() == 1 {
            offsets[0]
        } else {
            offsets[b]
        };
        for (i, inv) in inv_freq.iter().enumerate().take(half) {
            let (p, q) = if traditional {
                (2 * i, 2 * i + 1)
            } else {
                (i, i + half)
            };
            let theta = (offset + t as f64) * scale * inv;
            let (c, s) = (theta.cos(), theta.sin());
            out[row * d + p] = chunk[p] * c - chunk[q] * s;
            out[row * d + q] = chunk[p] * s + chunk[q] * c;
        }
    }
    out
}

/// `base^(−2i/dims)` for each pair.
fn base_freqs(base: f64, dims: usize) -> Vec<f64> {
    (0..dims / 2)
        .map(|i| base.powf(-(2.0 * i as f64) / dims as f64))
        .collect()
}

/// Each row of `d` values over its root mean square, times `w`.
fn rms_rows(x: &[f64], d: usize, w: &[f64], eps: f64) -> Vec<f64> {
    x.chunks(d)
        .flat_map(|row| {
            let ms = row.iter().map(|v| v * v).sum::<f64>() / d as f64;
            let n = 1.0 / (ms + eps).sqrt();
            row.iter().zip(w).map(move |(v, w)| v * n * w)
        })
        .collect()
}

/// (shape, dims, traditional, per-batch offsets, explicit frequencies)
type Case = (&'static [usize], usize, bool, bool, bool);

const CASES: &[Case] = &[
    (&[2, 3, 5, 8], 8, false, false, false),
    (&[2, 3, 5, 8], 8, true, false, false),
    (&[2, 3, 5, 16], 8, false, true, false),
    (&[2, 3, 5, 16], 6, true, true, false),
    (&[2, 4, 16], 16, true, true, true),
    (&[3, 2, 1, 32], 16, false, false, true),
    (&[2, 2, 3, 6, 8], 8, false, true, false),
    (&[0, 2, 3, 8], 8, false, false, false),
];

#[test]
fn rope_matches_the_formula() {
    let mut rng = Rng::new(11);
    for &(shape, dims, traditional, per_batch, with_freqs) in CASES {
        for dtype in FLOATS {
            let x = rand(&mut rng, shape, dtype);
            let offsets: Vec<i32> = if per_batch {
                (0..shape[0] as i32).map(|i| 4 * i + 1).collect()
            } else {
                vec![7]
            };
            let offset = if per_batch {
                Array::from_slice(&offsets, &[shape[0]]).unwrap()
            } else {
                Array::scalar(offsets[0])
            };
            let freq_values: Vec<f32> = (0..dims / 2).map(|i| 1.0 + i as f32 * 2.5).collect();
            let freqs = Array::from_slice(&freq_values, &[dims / 2]).unwrap();
            let (base, inv): (Option<f32>, Vec<f64>) = if with_freqs {
                (
                    None,
                    freq_values.iter().map(|&f| 1.0 / f64::from(f)).collect(),
                )
            } else {
                (Some(500.0), base_freqs(500.0, dims))
            };
            let offs: Vec<f64> = offsets.iter().map(|&o| f64::from(o)).collect();
            let want = rope_ref(&values(&x), shape, dims, traditional, &inv, 0.75, &offs);
            let name = format!("rope {shape:?} dims {dims} trad {traditional} {dtype}");
            let f = with_freqs.then_some(&freqs);
            let got = fast::rope(&x, dims, traditional, base, 0.75, &offset, f).unwrap();
            // The angles are float32 (float64 for float64 inputs), rounded to the dtype.
            let t = if dtype == DType::F32 {
                1e-5
            } else {
                tol(dtype)
            };
            check(&name, &got, shape, dtype, &want, t);
            if x.size() > 0 {
                let got =
                    fast::rope(&strided(&x), dims, traditional, base, 0.75, &offset, f).unwrap();
                check(&format!("{name} strided"), &got, shape, dtype, &want, t);
            }
        }
    }
    // A 64-bit offset and a 1-element offset array.
    let x = rand(&mut rng, &[1, 2, 3, 4], DType::F32);
    let want = rope_ref(
        &values(&x),
        &[1, 2, 3, 4],
        4,
        false,
        &base_freqs(1e4, 4),
        1.0,
        &[2.0],
    );
    for offset in [
        Array::scalar(2i64),
        Array::from_slice(&[2u16], &[1]).unwrap(),
    ] {
        let got = fast::rope(&x, 4, false, Some(1e4), 1.0, &offset, None).unwrap();
        check("rope offsets", &got, &[1, 2, 3, 4], DType::F32, &want, 1e-5);
    }
}

#[test]
fn norm_rope_matches_the_formula_and_its_composition() {
    let mut rng = Rng::new(12);
    let freq_values: Vec<f32> = (0..4).map(|i| 2.0 + i as f32).collect();
    let freqs = Array::from_slice(&freq_values, &[4]).unwrap();
    // (B, H, L, D, dims, offset, capacity)
    for (b, h, l, d, dims, offset, capacity) in [
        (1, 2, 1, 8, 8, 0, 4),
        (2, 3, 4, 16, 8, 5, 12),
        (1, 1, 3, 8, 6, 2, 5),
    ] {
        for dtype in FLOATS {
            // The projection's layout, [B, L, H, D], transposed to [B, H, L, D].
            let x = transpose(&rand(&mut rng, &[b, l, h, d], dtype), &[0, 2, 1, 3]).unwrap();
            let w = rand(&mut rng, &[d], dtype);
            let cache = rand(&mut rng, &[b, h, capacity, d], dtype);
            for (normed, traditional, with_freqs, cached) in [
                (true, false, false, false),
                (true, false, false, true),
                (false, true, false, true),
                (false, false, false, false),
                (true, true, true, true),
            ] {
                if with_freqs && dims != 8 {
                    continue;
                }
                let rotation = fast::Rotation {
                    dims,
                    traditional,
                    base: (!with_freqs).then_some(1e4),
                    scale: 1.0,
                    freqs: with_freqs.then_some(&freqs),
                };
                let norm = normed.then_some((&w, 1e-6f32));
                let c = cached.then_some(&cache);
                let name = format!(
                    "norm_rope {:?} {dtype} norm {normed} trad {traditional} freqs {with_freqs} \
                     cache {cached}",
                    (b, h, l, d, dims, offset)
                );
                let got = fast::norm_rope(&x, norm, rotation, offset, c).unwrap();
                // The formula: rows normalised (rounded to the dtype), then rotated.
                let mut rows = values(&x);
                if normed {
                    rows = rms_rows(&rows, d, &values(&w), 1e-6);
                }
                let inv: Vec<f64> = if with_freqs {
                    freq_values.iter().map(|&f| 1.0 / f64::from(f)).collect()
                } else {
                    base_freqs(1e4, dims)
                };
                let rotated = rope_ref(
                    &rows,
                    &[b, h, l, d],
                    dims,
                    traditional,
                    &inv,
                    1.0,
                    &[offset as f64],
                );
                let t = 3.0 * tol(dtype);
                if cached {
                    let mut want = values(&cache);
                    for bi in 0..b {
                        for hi in 0..h {
                            for li in 0..l {
                                let src = flat(&[b, h, l, d], &[bi, hi, li, 0]);
                                let dst = flat(&[b, h, capacity, d], &[bi, hi, offset + li, 0]);
                                want[dst..dst + d].copy_from_slice(&rotated[src..src + d]);
                            }
                        }
                    }
                    check(&name, &got, &[b, h, capacity, d], dtype, &want, t);
                } else {
                    check(&name, &got, &[b, h, l, d], dtype, &rotated, t);
                }
                // The same as rms_norm, rope and slice_update composed, bit for bit.
                let mut composed = x.clone();
                if let Some((w, eps)) = norm {
                    composed = fast::rms_norm(&composed, Some(w), eps).unwrap();
                }
                composed = fast::rope(
                    &composed,
                    dims,
                    traditional,
                    rotation.base,
                    1.0,
                    &Array::scalar(offset as i32),
                    rotation.freqs,
                )
                .unwrap();
                if let Some(c) = c {
                    let region = [
                        SliceArg::full(),
                        SliceArg::full(),
                        SliceArg::new(Some(offset as isize), Some((offset + l) as isize), 1),
                    ];
                    composed = slice_update(c, &composed, &region).unwrap();
                }
                check_same(&format!("{name} composed"), &got, &composed, 0.0);
            }
        }
    }
}

#[test]
fn norm_rope_leaves_a_held_cache_alone_and_runs_mixed_types_composed() {
    let mut rng = Rng::new(13);
    let rotation = fast::Rotation {
        dims: 4,
        traditional: false,
        base: Some(1e4),
        scale: 1.0,
        freqs: None,
    };
    let cache = rand(&mut rng, &[1, 2, 6, 4], DType::F32);
    cache.eval().unwrap();
    let before = values(&cache);
    let mut current = cache.clone();
    for step in 0..3 {
        let x = rand(&mut rng, &[1, 2, 1, 4], DType::F32);
        current = fast::norm_rope(&x, None, rotation, step, Some(&current)).unwrap();
        current.eval().unwrap();
    }
    assert_eq!(values(&cache), before, "the held cache changed");
    // Rows 0..3 written, 3..6 as before.
    let got = values(&current);
    for (i, (g, b)) in got.iter().zip(&before).enumerate() {
        if i % 24 >= 12 {
            assert_eq!(g, b, "element {i} should be untouched");
        }
    }
    // A float32 weight on bfloat16 rows: the composition (the norm promotes, the cache
    // write converts back).
    let x = rand(&mut rng, &[1, 2, 2, 4], DType::BF16);
    let w = rand(&mut rng, &[4], DType::F32);
    let c = rand(&mut rng, &[1, 2, 4, 4], DType::BF16);
    let got = fast::norm_rope(&x, Some((&w, 1e-5)), rotation, 1, Some(&c)).unwrap();
    assert_eq!(got.dtype(), DType::BF16);
    let normed = fast::rms_norm(&x, Some(&w), 1e-5).unwrap();
    let r = fast::rope(
        &normed,
        4,
        false,
        Some(1e4),
        1.0,
        &Array::scalar(1i32),
        None,
    )
    .unwrap();
    let want = slice_update(
        &c,
        &r,
        &[
            SliceArg::full(),
            SliceArg::full(),
            SliceArg::new(Some(1), Some(3), 1),
        ],
    )
    .unwrap();
    check_same("mixed", &got, &want, 0.0);
    let got = fast::norm_rope(&x, Some((&w, 1e-5)), rotation, 0, None).unwrap();
    assert_eq!(got.dtype(), DType::F32);
}
