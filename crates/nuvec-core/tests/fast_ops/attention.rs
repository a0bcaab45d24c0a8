//! `scaled_dot_product_attention`: grouped heads, masks (causal, boolean, additive), sinks,
//! value heads of their own size, strided keys.

use super::*;

/// How a reference masks the score of query `i` and key `j` of head `h`, batch `b`:
/// `None` hides it, `Some(a)` adds `a`.
pub type MaskFn<'a> = &'a dyn Fn(usize, usize, usize, usize) -> Option<f64>;

/// Attention in float64: `[B, Hq, Lq, Dv]` from `q` (`[B, Hq, Lq, D]`) and `k`, `v`
/// (`[B, Hkv, Lk, D]` and `[.., Dv]`).
pub fn attention_ref(
    q: (&[f64], [usize; 4]),
    k: (&[f64], [usize; 4]),
    v: &[f64],
    dv: usize,
    scale: f64,
    mask: MaskFn<'_>,
    sinks: Option<&[f64]>,
) -> Vec<f64> {
    let ([b, hq, lq, d], [_, hkv, lk, _]) = (q.1, k.1);
    let group = hq / hkv;
    let mut out = vec![0.0; b * hq * lq * dv];
    for bi in 0..b {
        for h in 0..hq {
            let kh = h / group;
            for i in 0..lq {
                let qrow = &q.0[flat(&q.1, &[bi, h, i, 0])..][..d];
                let mut logits: Vec<(usize, f64)> = Vec::new();
                for j in 0..lk {
                    let Some(extra) = mask(bi, h, i, j) else {
                        continue;
                    };
                    let krow = &k.0[flat(&k.1, &[bi, kh, j, 0])..][..d];
                    let dot: f64 = qrow.iter().zip(krow).map(|(a, b)| a * b).sum();
                    logits.push((j, scale * dot + extra));
                }
                let sink = sinks.map(|s| s[h]);
                let top = logits
                    .iter()
                    .map(|l| l.1)
                    .chain(sink)
                    .fold(f64::NEG_INFINITY, f64::max);
                let total: f64 = logits.iter().map(|l| (l.1 - top).exp()).sum::<f64>()
                    + sink.map_or(0.0, |s| (s - top).exp());
                let o = flat(&[b, hq, lq, dv], &[bi, h, i, 0]);
                for &(j, l) in &logits {
                    let p = (l - top).exp() / total;
                    let vrow = &v[flat(&[b, hkv, lk, dv], &[bi, kh, j, 0])..][..dv];
                    for c in 0..dv {
                        out[o + c] += p * vrow[c];
                    }
                }
            }
        }
    }
    out
}

/// (B, Hq, Hkv, Lq, Lk, D, Dv)
const SHAPES: &[(usize, usize, usize, usize, usize, usize, usize)] = &[
    (2, 4, 4, 3, 5, 8, 8),
    (1, 8, 2, 4, 7, 16, 16),
    (1, 4, 1, 1, 9, 8, 4),
    (2, 2, 2, 6, 6, 4, 4),
];

#[test]
fn attention_matches_the_formula() {
    let mut rng = Rng::new(21);
    for &(b, hq, hkv, lq, lk, d, dv) in SHAPES {
        for dtype in FLOATS {
            let q = rand(&mut rng, &[b, hq, lq, d], dtype);
            // Keys and values as transposed views of [B, L, H, D].
            let k = transpose(&rand(&mut rng, &[b, lk, hkv, d], dtype), &[0, 2, 1, 3]).unwrap();
            let v = transpose(&rand(&mut rng, &[b, lk, hkv, dv], dtype), &[0, 2, 1, 3]).unwrap();
            // A boolean mask over [Lq, Lk] that keeps key 0, an additive one per head.
            let keep: Vec<bool> = (0..lq * lk)
                .map(|i| i % lk == 0 || rng.f64() > -0.4)
                .collect();
            let bmask = Array::from_slice(&keep, &[lq, lk]).unwrap();
            let amask = rand(&mut rng, &[1, hq, lq, lk], dtype);
            let sinks = rand(&mut rng, &[hq], dtype);
            let (qv, kv, vv, av) = (values(&q), values(&k), values(&v), values(&amask));
            let sv = values(&sinks);
            let none = |_: usize, _: usize, _: usize, _: usize| Some(0.0);
            let causal = |_: usize, _: usize, i: usize, j: usize| (j <= i + lk - lq).then_some(0.0);
            let boolean = |_: usize, _: usize, i: usize, j: usize| keep[i * lk + j].then_some(0.0);
            let additive = |_: usize, h: usize, i: usize, j: usize| {
                Some(av[flat(&[1, hq, lq, lk], &[0, h, i, j])])
            };
            let cases: [(&str, fast::AttentionMask<'_>, MaskFn<'_>); 4] = [
                ("none", fast::AttentionMask::None, &none),
                ("causal", fast::AttentionMask::Causal, &causal),
                ("bool", fast::AttentionMask::Array(&bmask), &boolean),
                ("additive", fast::AttentionMask::Array(&amask), &additive),
            ];
            for (mname, mask, reference) in cases {
                for with_sinks in [false, true] {
                    let s = with_sinks.then_some(&sinks);
                    let got = fast::scaled_dot_product_attention(&q, &k, &v, 0.3, mask, s).unwrap();
                    let want = attention_ref(
                        (&qv, [b, hq, lq, d]),
                        (&kv, [b, hkv, lk, d]),
                        &vv,
                        dv,
                        f64::from(0.3f32),
                        reference,
                        with_sinks.then_some(&sv[..]),
                    );
                    let name = format!(
                        "attention {:?} {dtype} {mname} sinks {with_sinks}",
                        (b, hq, hkv, lq, lk, d, dv)
                    );
                    check(
                        &name,
                        &got,
                        &[b, hq, lq, dv],
                        dtype,
                        &want,
                        2.0 * tol(dtype),
                    );
                }
            }
        }
    }
}

#[test]
fn attention_promotes_and_broadcasts_masks() {
    let mut rng = Rng::new(22);
    let q = rand(&mut rng, &[2, 2, 3, 4], DType::F16);
    let k = rand(&mut rng, &[2, 1, 5, 4], DType::F32);
    let v = rand(&mut rng, &[2, 1, 5, 4], DType::F32);
    // A per-batch additive mask [B, 1, 1, Lk] in float16 promotes to the inputs' float32.
    let m = rand(&mut rng, &[2, 1, 1, 5], DType::F16);
    let got =
        fast::scaled_dot_product_attention(&q, &k, &v, 0.5, fast::AttentionMask::Array(&m), None)
            .unwrap();
    let mv = values(&m);
    let mask = |b: usize, _: usize, _: usize, j: usize| Some(mv[b * 5 + j]);
    let want = attention_ref(
        (&values(&q), [2, 2, 3, 4]),
        (&values(&k), [2, 1, 5, 4]),
        &values(&v),
        4,
        0.5,
        &mask,
        None,
    );
    check("promoted", &got, &[2, 2, 3, 4], DType::F32, &want, 2e-5);
    // Empty keys attend to nothing: zeros.
    let k0 = zeros(&[2, 1, 0, 4], DType::F32).unwrap();
    let got =
        fast::scaled_dot_product_attention(&q, &k0, &k0, 1.0, fast::AttentionMask::None, None)
            .unwrap();
    check("no keys", &got, &[2, 2, 3, 4], DType::F32, &[0.0; 48], 0.0);
    // A float64 mask does not promote to float32.
    let m64 = rand(&mut rng, &[3, 5], DType::F64);
    expect_err(
        fast::scaled_dot_product_attention(&q, &k, &v, 1.0, fast::AttentionMask::Array(&m64), None),
        "scaled_dot_product_attention",
    );
}
