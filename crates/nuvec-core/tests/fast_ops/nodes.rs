//! Fused nodes built by hand (`Primitive::Fast`) on the CPU: evaluated through their
//! fallback graphs, they equal the public operations; the gradient nodes equal central
//! differences; nodes of bad inputs are refused when built.

use super::*;
use nuvec_core::fast::FastOp;

fn node(op: FastOp, inputs: &[&Array]) -> Vec<Array> {
    let inputs = inputs.iter().map(|a| (*a).clone()).collect();
    let out = Array::from_op(Primitive::Fast(op.clone()), inputs).unwrap();
    for o in &out {
        assert!(
            matches!(o.primitive(), Some(Primitive::Fast(f)) if *f == op),
            "{op:?} recorded"
        );
    }
    out
}

fn bits(x: f32) -> u32 {
    x.to_bits()
}

#[test]
fn norm_nodes_equal_the_operations() {
    let mut rng = Rng::new(61);
    for dtype in [DType::F32, DType::BF16] {
        let x = rand(&mut rng, &[3, 8], dtype);
        let r = rand(&mut rng, &[3, 8], dtype);
        let w = rand(&mut rng, &[8], dtype);
        let b = rand(&mut rng, &[8], dtype);
        let one = Array::scalar(1.0f32).astype(dtype).unwrap();
        let zero = Array::scalar(0.0f32).astype(dtype).unwrap();
        let eps = bits(1e-5);
        let got = node(FastOp::RmsNorm { eps }, &[&x, &w]);
        check_same(
            "rms",
            &got[0],
            &fast::rms_norm(&x, Some(&w), 1e-5).unwrap(),
            0.0,
        );
        let got = node(FastOp::RmsNorm { eps }, &[&x, &one]);
        check_same(
            "rms bare",
            &got[0],
            &fast::rms_norm(&x, None, 1e-5).unwrap(),
            0.0,
        );
        let got = node(FastOp::AddRmsNorm { eps }, &[&x, &r, &w]);
        let (h, y) = fast::add_rms_norm(&x, &r, Some(&w), 1e-5).unwrap();
        check_same("add_rms h", &got[0], &h, 0.0);
        check_same("add_rms y", &got[1], &y, 0.0);
        let got = node(FastOp::LayerNorm { eps }, &[&x, &w, &zero]);
        let want = fast::layer_norm(&x, Some(&w), None, 1e-5).unwrap();
        check_same("layer_norm", &got[0], &want, 0.0);
        let got = node(FastOp::LayerNorm { eps }, &[&x, &one, &b]);
        let want = fast::layer_norm(&x, None, Some(&b), 1e-5).unwrap();
        check_same("layer_norm bias", &got[0], &want, 0.0);
        let got = node(FastOp::Softmax, &[&x]);
        check_same("softmax", &got[0], &softmax(&x, &[-1]).unwrap(), 0.0);
        let got = node(FastOp::LogSumExp, &[&x]);
        check_same(
            "logsumexp",
            &got[0],
            &logsumexp(&x, &[-1], true).unwrap(),
            0.0,
        );
        let t = Array::from_slice(&[1i32, -1, 7], &[3]).unwrap();
        let got = node(FastOp::CrossEntropy, &[&x, &t]);
        check_same(
            "cross_entropy",
            &got[0],
            &fast::cross_entropy(&x, &t).unwrap(),
            0.0,
        );
    }
}

/// The central-difference vjp (step 1e-6, float64) of `f` at `xs` for input `i`, with
/// output cotangent `g`.
fn numeric_vjp(f: &dyn Fn(&[Array]) -> Array, xs: &[Array], g: &[f64], i: usize) -> Vec<f64> {
    let base = values(&xs[i]);
    (0..base.len())
        .map(|j| {
            let at = |d: f64| {
                let mut p = base.clone();
                p[j] += d;
                let mut ys = xs.to_vec();
                ys[i] = Array::from_slice(&p, xs[i].shape()).unwrap();
                values(&f(&ys))
                    .iter()
                    .zip(g)
                    .map(|(a, b)| a * b)
                    .sum::<f64>()
            };
            (at(1e-6) - at(-1e-6)) / 2e-6
        })
        .collect()
}

#[test]
fn gradient_nodes_equal_central_differences() {
    let mut rng = Rng::new(62);
    let f64s = |rng: &mut Rng, shape: &[usize]| rand(rng, shape, DType::F64);
    let (x, w, b, g) = (
        f64s(&mut rng, &[3, 5]),
        f64s(&mut rng, &[5]),
        f64s(&mut rng, &[5]),
        f64s(&mut rng, &[3, 5]),
    );
    let gv = values(&g);
    let eps = bits(1e-3);
    let rms = |xs: &[Array]| fast::rms_norm(&xs[0], Some(&xs[1]), 1e-3).unwrap();
    let got = node(FastOp::RmsNormVjp { eps }, &[&x, &w, &g]);
    let xs = [x.clone(), w.clone()];
    for i in 0..2 {
        let want = numeric_vjp(&rms, &xs, &gv, i);
        check(
            &format!("rms_norm_vjp {i}"),
            &got[i],
            xs[i].shape(),
            DType::F64,
            &want,
            1e-6,
        );
    }
    let layer = |xs: &[Array]| fast::layer_norm(&xs[0], Some(&xs[1]), Some(&xs[2]), 1e-3).unwrap();
    let got = node(FastOp::LayerNormVjp { eps }, &[&x, &w, &b, &g]);
    let xs = [x.clone(), w.clone(), b.clone()];
    for i in 0..3 {
        let want = numeric_vjp(&layer, &xs, &gv, i);
        check(
            &format!("layer_norm_vjp {i}"),
            &got[i],
            xs[i].shape(),
            DType::F64,
            &want,
            1e-6,
        );
    }
    // Without a weight: a zero cotangent for the stand-in scalar.
    let one = Array::scalar(1.0f64);
    let got = node(FastOp::RmsNormVjp { eps }, &[&x, &one, &g]);
    let bare = |xs: &[Array]| fast::rms_norm(&xs[0], None, 1e-3).unwrap();
    let want = numeric_vjp(&bare, std::slice::from_ref(&x), &gv, 0);
    check(
        "rms_norm_vjp bare",
        &got[0],
        &[3, 5],
        DType::F64,
        &want,
        1e-6,
    );
    check("rms_norm_vjp bare w", &got[1], &[], DType::F64, &[0.0], 0.0);
    // Cross entropy: float32 losses, so float32 cotangents of float64 logits.
    let t = Array::from_slice(&[4i32, 0, -2], &[3]).unwrap();
    let loss = fast::cross_entropy(&x, &t).unwrap();
    let gl = Array::from_slice(&[0.5f32, -1.0, 2.0], &[3]).unwrap();
    let got = node(FastOp::CrossEntropyVjp, &[&x, &t, &loss, &gl]);
    // g · (softmax(x) − onehot(target)), directly.
    let (xv, glv) = (values(&x), values(&gl));
    let mut want = Vec::new();
    for (r, &target) in [4usize, 0, 3].iter().enumerate() {
        let row = &xv[r * 5..r * 5 + 5];
        let total: f64 = row.iter().map(|v| v.exp()).sum();
        for (c, v) in row.iter().enumerate() {
            let hit = if c == target { 1.0 } else { 0.0 };
            want.push(glv[r] * (v.exp() / total - hit));
        }
    }
    check(
        "cross_entropy_vjp",
        &got[0],
        &[3, 5],
        DType::F64,
        &want,
        2e-4,
    );
}

#[test]
fn rotation_nodes_equal_the_operations_and_invert() {
    let mut rng = Rng::new(63);
    let x = rand(&mut rng, &[2, 3, 4, 8], DType::F32);
    let offset = Array::from_slice(&[2i32, 5], &[2]).unwrap();
    let freqs = uniform(&mut rng, &[3], 1.0, 4.0, DType::F32);
    for traditional in [false, true] {
        let rope = |forward| FastOp::Rope {
            dims: 6,
            traditional,
            base: bits(100.0),
            scale: bits(0.5),
            forward,
        };
        let got = node(rope(true), &[&x, &offset]);
        let want = fast::rope(&x, 6, traditional, Some(100.0), 0.5, &offset, None).unwrap();
        check_same("rope", &got[0], &want, 0.0);
        let back = node(rope(false), &[&got[0], &offset]);
        check_same("rope inverse", &back[0], &x, 1e-6);
        let got = node(rope(true), &[&x, &offset, &freqs]);
        let want = fast::rope(&x, 6, traditional, None, 0.5, &offset, Some(&freqs)).unwrap();
        check_same("rope freqs", &got[0], &want, 0.0);
    }
    // norm_rope with a cache.
    let rotation = fast::Rotation {
        dims: 8,
        traditional: false,
        base: Some(1e4),
        scale: 1.0,
        freqs: None,
    };
    let w = rand(&mut rng, &[8], DType::F32);
    let cache = rand(&mut rng, &[2, 3, 9, 8], DType::F32);
    let op = FastOp::NormRope {
        eps: Some(bits(1e-6)),
        dims: 8,
        traditional: false,
        base: bits(1e4),
        scale: bits(1.0),
        offset: 3,
        cache: true,
    };
    let got = node(op, &[&cache, &x, &w]);
    let want = fast::norm_rope(&x, Some((&w, 1e-6)), rotation, 3, Some(&cache)).unwrap();
    check_same("norm_rope", &got[0], &want, 0.0);
}

#[test]
fn sequence_nodes_equal_the_operations() {
    let mut rng = Rng::new(64);
    let (b, hq, hkv, lq, lk, d) = (2, 4, 2, 3, 5, 8);
    let q = rand(&mut rng, &[b, hq, lq, d], DType::F32);
    let k = rand(&mut rng, &[b, hkv, lk, d], DType::F32);
    let v = rand(&mut rng, &[b, hkv, lk, d], DType::F32);
    let m = rand(&mut rng, &[b, hq, lq, lk], DType::F32);
    let sinks = rand(&mut rng, &[hq], DType::F32);
    let op = FastOp::Attention {
        scale: bits(0.3),
        causal: false,
        mask: true,
        sinks: true,
    };
    let got = node(op, &[&q, &k, &v, &m, &sinks]);
    let mask = fast::AttentionMask::Array(&m);
    let want = fast::scaled_dot_product_attention(&q, &k, &v, 0.3, mask, Some(&sinks)).unwrap();
    check_same("attention", &got[0], &want, 0.0);
    // Paged attention over a cache of 4 blocks of 4 positions.
    let kc = rand(&mut rng, &[4, hkv, 4, d], DType::F32);
    let vc = rand(&mut rng, &[4, hkv, 4, d], DType::F32);
    let table = Array::from_slice(&[3i32, 1, 0, 2], &[2, 2]).unwrap();
    let lens = Array::from_slice(&[6i32, 8], &[2]).unwrap();
    let got = node(
        FastOp::PagedAttention { scale: bits(0.5) },
        &[&q, &kc, &vc, &table, &lens],
    );
    let want = fast::paged_attention(&q, &kc, &vc, &table, &lens, 0.5).unwrap();
    check_same("paged_attention", &got[0], &want, 0.0);
    let new = rand(&mut rng, &[3, hkv, d], DType::F32);
    let slots = Array::from_slice(&[1i32, 14, 7], &[3]).unwrap();
    kc.eval().unwrap();
    let before = values(&kc);
    let got = node(FastOp::PagedWrite, &[&kc, &new, &slots]);
    let want = fast::paged_write(&kc, &new, &slots).unwrap();
    check_same("paged_write", &got[0], &want, 0.0);
    assert_eq!(values(&kc), before, "a held cache changed");
    // The gated delta rule, every step's state, and slots.
    let (t, hk, hv, dk, dv) = (3, 1, 2, 4, 3);
    let gq = rand(&mut rng, &[b, t, hk, dk], DType::F32);
    let gk = multiply(rand(&mut rng, &[b, t, hk, dk], DType::F32), 0.5).unwrap();
    let gv = rand(&mut rng, &[b, t, hv, dv], DType::F32);
    let gg = uniform(&mut rng, &[b, t, hv], 0.5, 1.0, DType::F32);
    let gb = uniform(&mut rng, &[b, t, hv], 0.2, 1.0, DType::F32);
    let state = rand(&mut rng, &[b, hv, dv, dk], DType::F32);
    let got = node(
        FastOp::GatedDelta { steps: true },
        &[&gq, &gk, &gv, &gg, &gb, &state],
    );
    let (y, s) = fast::gated_delta_steps(&gq, &gk, &gv, &gg, &gb, &state).unwrap();
    check_same("gated_delta y", &got[0], &y, 0.0);
    check_same("gated_delta states", &got[1], &s, 0.0);
    let pool = rand(&mut rng, &[4, hv, dv, dk], DType::F32);
    let ids = Array::from_slice(&[2i32, 0], &[2]).unwrap();
    let got = node(
        FastOp::GatedDeltaSlots,
        &[&gq, &gk, &gv, &gg, &gb, &pool, &ids],
    );
    let (y, p) = fast::gated_delta_slots(&gq, &gk, &gv, &gg, &gb, &pool, &ids).unwrap();
    check_same("slots y", &got[0], &y, 0.0);
    check_same("slots pool", &got[1], &p, 0.0);
}

#[test]
fn product_nodes_equal_the_operations() {
    let mut rng = Rng::new(65);
    let a = rand(&mut rng, &[3, 2, 4], DType::F32);
    let b = rand(&mut rng, &[2, 4, 5], DType::F32);
    let lhs = Array::from_slice(&[2u32, 0, 1], &[3]).unwrap();
    let rhs = Array::from_slice(&[0u32, 0, 1], &[3]).unwrap();
    let got = node(FastOp::GatherMm, &[&a, &b, &lhs, &rhs]);
    let want = gather_mm(&a, &b, Some(&lhs), Some(&rhs), false).unwrap();
    check_same("gather_mm", &got[0], &want, 0.0);
    // With the (unused on the CPU) row offsets.
    let offsets = Array::from_slice(&[0i32, 2], &[2]).unwrap();
    let got = node(FastOp::GatherMm, &[&a, &b, &lhs, &rhs, &offsets]);
    check_same("gather_mm offsets", &got[0], &want, 0.0);
    let x = rand(&mut rng, &[2, 10, 4], DType::F32);
    let w = rand(&mut rng, &[4, 3, 1], DType::F32);
    let op = FastOp::DepthwiseConv1d {
        stride: 2,
        padding: 1,
        dilation: 2,
    };
    let got = node(op, &[&x, &w]);
    check_same("conv1d", &got[0], &conv1d(&x, &w, 2, 1, 2, 4).unwrap(), 0.0);
}

#[test]
fn bad_nodes_are_refused_when_built() {
    let f = |shape: &[usize]| zeros(shape, DType::F32).unwrap();
    let i = |shape: &[usize]| zeros(shape, DType::I32).unwrap();
    let h = |shape: &[usize]| zeros(shape, DType::F16).unwrap();
    let eps = bits(1e-5);
    let rope = FastOp::Rope {
        dims: 4,
        traditional: false,
        base: bits(1e4),
        scale: bits(1.0),
        forward: true,
    };
    let attention = FastOp::Attention {
        scale: bits(1.0),
        causal: false,
        mask: false,
        sinks: false,
    };
    let norm_rope = FastOp::NormRope {
        eps: None,
        dims: 4,
        traditional: false,
        base: bits(1e4),
        scale: bits(1.0),
        offset: 3,
        cache: true,
    };
    let cases: Vec<(FastOp, Vec<Array>)> = vec![
        (FastOp::RmsNorm { eps }, vec![f(&[2, 4])]),
        (FastOp::RmsNorm { eps }, vec![f(&[2, 4]), f(&[3])]),
        (FastOp::RmsNorm { eps }, vec![f(&[2, 4]), h(&[4])]),
        (FastOp::RmsNorm { eps }, vec![i(&[2, 4]), i(&[4])]),
        (FastOp::RmsNorm { eps }, vec![f(&[]), f(&[])]),
        (
            FastOp::AddRmsNorm { eps },
            vec![f(&[2, 4]), f(&[1, 4]), f(&[4])],
        ),
        (
            FastOp::LayerNormVjp { eps },
            vec![f(&[2, 4]), f(&[4]), f(&[4]), f(&[2, 3])],
        ),
        (rope.clone(), vec![f(&[2, 4]), i(&[])]),
        (rope.clone(), vec![f(&[2, 3, 4]), f(&[])]),
        (rope.clone(), vec![f(&[2, 3, 4]), i(&[3])]),
        (rope.clone(), vec![f(&[2, 3, 2]), i(&[])]),
        (rope, vec![f(&[2, 3, 4]), i(&[]), f(&[3])]),
        (
            norm_rope.clone(),
            vec![f(&[1, 1, 4, 4]), f(&[1, 1, 2, 4]), f(&[])],
        ),
        (norm_rope, vec![f(&[1, 1, 5, 4]), f(&[1, 1, 2, 4])]),
        (FastOp::Softmax, vec![f(&[])]),
        (FastOp::LogSumExp, vec![f(&[3, 0])]),
        (FastOp::CrossEntropy, vec![f(&[2, 4]), f(&[2])]),
        (FastOp::CrossEntropy, vec![f(&[2, 4]), i(&[4])]),
        (
            attention.clone(),
            vec![f(&[1, 2, 3, 4]), f(&[1, 3, 5, 4]), f(&[1, 3, 5, 4])],
        ),
        (
            attention.clone(),
            vec![f(&[1, 2, 3, 4]), f(&[1, 2, 5, 4]), f(&[1, 2, 6, 4])],
        ),
        (
            attention,
            vec![f(&[2, 3, 4]), f(&[1, 2, 5, 4]), f(&[1, 2, 5, 4])],
        ),
        (
            FastOp::GatedDelta { steps: false },
            vec![
                f(&[1, 2, 1, 4]),
                f(&[1, 2, 1, 4]),
                f(&[1, 2, 3, 2]),
                f(&[1, 2, 3]),
                f(&[1, 2, 3]),
                f(&[1, 3, 2, 3]),
            ],
        ),
        (
            FastOp::GatedDeltaSlots,
            vec![
                f(&[1, 2, 1, 4]),
                f(&[1, 2, 1, 4]),
                f(&[1, 2, 1, 2]),
                f(&[1, 2, 1]),
                f(&[1, 2, 1]),
                f(&[3, 1, 2, 4]),
                f(&[1]),
            ],
        ),
        (
            FastOp::PagedAttention { scale: bits(1.0) },
            vec![
                f(&[1, 4, 1, 8]),
                f(&[3, 3, 2, 8]),
                f(&[3, 3, 2, 8]),
                i(&[1, 2]),
                i(&[1]),
            ],
        ),
        (
            FastOp::PagedAttention { scale: bits(1.0) },
            vec![
                f(&[1, 4, 1, 8]),
                f(&[3, 2, 2, 8]),
                f(&[3, 2, 2, 8]),
                i(&[2]),
                i(&[1]),
            ],
        ),
        (
            FastOp::PagedWrite,
            vec![f(&[3, 2, 2, 8]), f(&[4, 2, 8]), i(&[3])],
        ),
        (
            FastOp::GatherMm,
            vec![f(&[2, 3]), f(&[4, 5]), i(&[1]), i(&[1])],
        ),
        (
            FastOp::GatherMm,
            vec![f(&[2, 3]), f(&[3, 5]), i(&[1]), i(&[2])],
        ),
        (
            FastOp::DepthwiseConv1d {
                stride: 1,
                padding: 0,
                dilation: 1,
            },
            vec![f(&[1, 5, 3]), f(&[2, 2, 1])],
        ),
        (
            FastOp::DepthwiseConv1d {
                stride: 0,
                padding: 0,
                dilation: 1,
            },
            vec![f(&[1, 5, 3]), f(&[3, 2, 1])],
        ),
    ];
    for (op, inputs) in cases {
        let shapes: Vec<Vec<usize>> = inputs.iter().map(|a| a.shape().to_vec()).collect();
        match Array::from_op(Primitive::Fast(op.clone()), inputs) {
            Err(e) => assert!(e.to_string().contains(op.name()), "{e}"),
            Ok(_) => panic!("{op:?} accepted inputs of shapes {shapes:?}"),
        }
    }
    assert_eq!(Primitive::Fast(FastOp::GatherMm).name(), "gather_mm");
}
