//! Derivatives and batching of the fused operations. On the CPU the public operations
//! record their fallback graphs, so their transforms are those of the ordinary operations;
//! fused nodes built by hand (`Primitive::Fast`) exercise the fused rules themselves: the
//! dedicated reverse-mode rules (norms, rotation, softmax, log-sum-exp, cross entropy), the
//! fallback's derivatives for the rest and for forward mode, and batching.

mod common;

use common::Rng;
use common::autodiff::{check, check_vmap, random, values};
use nuvec_core::fast::FastOp;
use nuvec_core::*;

fn bits(x: f32) -> u32 {
    x.to_bits()
}

/// The single output of a fused node built by hand.
fn fused(op: &FastOp, inputs: &[Array]) -> Result<Vec<Array>> {
    Array::from_op(Primitive::Fast(op.clone()), inputs.to_vec())
}

/// Checks the vjp of a hand-built fused node for its floating inputs against central
/// differences (reverse mode only: the dedicated rules build their gradients forward).
fn check_reverse(name: &str, op: &FastOp, xs: &[Array], rng: &mut Rng) {
    let f = |xs: &[Array]| fused(op, xs);
    let outs = f(xs).unwrap();
    let cots: Vec<Array> = outs
        .iter()
        .map(|o| random(rng, o.shape(), -1.0, 1.0).astype(o.dtype()).unwrap())
        .collect();
    let cv: Vec<Vec<f64>> = cots.iter().map(values).collect();
    let project = |ys: &[Array]| -> f64 {
        f(ys)
            .unwrap()
            .iter()
            .zip(&cv)
            .map(|(o, c)| values(o).iter().zip(c).map(|(a, b)| a * b).sum::<f64>())
            .sum()
    };
    let (_, grads) = vjp(f, xs, &cots).unwrap();
    for (i, g) in grads.iter().enumerate() {
        if xs[i].dtype() != DType::F64 {
            continue;
        }
        let (gv, base) = (values(g), values(&xs[i]));
        for j in 0..base.len() {
            let at = |d: f64| {
                let mut p = base.clone();
                p[j] += d;
                let mut ys = xs.to_vec();
                ys[i] = Array::from_slice(&p, xs[i].shape()).unwrap();
                project(&ys)
            };
            let numeric = (at(1e-6) - at(-1e-6)) / 2e-6;
            assert!(
                (gv[j] - numeric).abs() <= 1e-6 * numeric.abs().max(1.0),
                "{name}: d/dx{i}[{j}]: {} vs {numeric}",
                gv[j]
            );
        }
    }
}

fn f64s(rng: &mut Rng, shape: &[usize]) -> Array {
    random(rng, shape, -1.0, 1.0)
}

fn rope_op(dims: usize, traditional: bool) -> FastOp {
    FastOp::Rope {
        dims,
        traditional,
        base: bits(100.0),
        scale: bits(0.5),
        forward: true,
    }
}

#[test]
fn dedicated_reverse_rules_match_central_differences() {
    let mut rng = Rng::new(71);
    let eps = bits(1e-3);
    let (x, w, b) = (
        f64s(&mut rng, &[3, 5]),
        f64s(&mut rng, &[5]),
        f64s(&mut rng, &[5]),
    );
    check_reverse(
        "rms_norm",
        &FastOp::RmsNorm { eps },
        &[x.clone(), w.clone()],
        &mut rng,
    );
    let layer = FastOp::LayerNorm { eps };
    check_reverse("layer_norm", &layer, &[x.clone(), w, b], &mut rng);
    check_reverse(
        "softmax",
        &FastOp::Softmax,
        std::slice::from_ref(&x),
        &mut rng,
    );
    check_reverse(
        "logsumexp",
        &FastOp::LogSumExp,
        std::slice::from_ref(&x),
        &mut rng,
    );
    let x4 = f64s(&mut rng, &[2, 3, 4, 6]);
    let offset = Array::from_slice(&[1i32, 4], &[2]).unwrap();
    for traditional in [false, true] {
        let xs = [x4.clone(), offset.clone()];
        check_reverse("rope", &rope_op(4, traditional), &xs, &mut rng);
    }
}

#[test]
fn cross_entropy_node_gradient_is_softmax_minus_onehot() {
    let mut rng = Rng::new(72);
    let x = f64s(&mut rng, &[3, 4]);
    let t = Array::from_slice(&[2i32, -1, 0], &[3]).unwrap();
    let g = Array::from_slice(&[1.0f32, -0.5, 2.0], &[3]).unwrap();
    let f = |xs: &[Array]| fused(&FastOp::CrossEntropy, &[xs[0].clone(), t.clone()]);
    let (_, grads) = vjp(f, std::slice::from_ref(&x), std::slice::from_ref(&g)).unwrap();
    let xv = values(&x);
    let mut want = Vec::new();
    for (r, target) in [2usize, 3, 0].into_iter().enumerate() {
        let row = &xv[r * 4..r * 4 + 4];
        let total: f64 = row.iter().map(|v| v.exp()).sum();
        for (c, v) in row.iter().enumerate() {
            let hit = if c == target { 1.0 } else { 0.0 };
            want.push(values(&g)[r] * (v.exp() / total - hit));
        }
    }
    for (a, b) in values(&grads[0]).iter().zip(&want) {
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }
}

#[test]
fn row_wise_nodes_batch_as_a_loop() {
    let mut rng = Rng::new(73);
    let eps = bits(1e-3);
    let w = f64s(&mut rng, &[5]);
    let no_bias = Array::scalar(0.0f64);
    let xs = f64s(&mut rng, &[3, 2, 5]);
    let ops: [(FastOp, Vec<Array>); 4] = [
        (FastOp::RmsNorm { eps }, vec![w.clone()]),
        (FastOp::LayerNorm { eps }, vec![w.clone(), no_bias]),
        (FastOp::Softmax, vec![]),
        (FastOp::LogSumExp, vec![]),
    ];
    for (op, rest) in ops {
        let f = |a: &[Array]| {
            let mut all = vec![a[0].clone()];
            all.extend(rest.iter().cloned());
            fused(&op, &all)
        };
        check_vmap(op.name(), f, std::slice::from_ref(&xs), &[true]);
    }
    // Rope with one offset for all, the rotation's frequencies shared.
    let x = f64s(&mut rng, &[3, 2, 2, 4, 6]);
    let offset = Array::scalar(3i32);
    let op = rope_op(6, true);
    let f = |a: &[Array]| fused(&op, &[a[0].clone(), offset.clone()]);
    check_vmap("rope", f, std::slice::from_ref(&x), &[true]);
    // Cross entropy with logits and targets batched, or the targets shared.
    let logits = f64s(&mut rng, &[3, 2, 4]);
    let targets = Array::from_slice(&[0i32, 3, 1, 2, 3, 0], &[3, 2]).unwrap();
    let f = |a: &[Array]| fused(&FastOp::CrossEntropy, a);
    check_vmap(
        "cross_entropy",
        f,
        &[logits.clone(), targets.clone()],
        &[true, true],
    );
    let shared = Array::from_slice(&[1i32, 2], &[2]).unwrap();
    check_vmap("cross_entropy shared", f, &[logits, shared], &[true, false]);
}

// -------------------------------------------------------------------------------------
// Through the fallback graphs: these need the ordinary operations' rules (reductions,
// indexing, products, shapes).

#[test]
fn fused_nodes_differentiate_through_their_fallbacks() {
    let mut rng = Rng::new(74);
    let eps = bits(1e-3);
    let (x, r, w) = (
        f64s(&mut rng, &[2, 5]),
        f64s(&mut rng, &[2, 5]),
        f64s(&mut rng, &[5]),
    );
    let f = |a: &[Array]| fused(&FastOp::AddRmsNorm { eps }, a);
    check("add_rms_norm node", f, &[x.clone(), r, w.clone()], &mut rng);
    let f = |a: &[Array]| fused(&FastOp::RmsNorm { eps }, a);
    check("rms_norm node", f, &[x, w], &mut rng);
    let (q, k, v) = (
        f64s(&mut rng, &[1, 4, 2, 3]),
        f64s(&mut rng, &[1, 2, 3, 3]),
        f64s(&mut rng, &[1, 2, 3, 2]),
    );
    let (m, s) = (f64s(&mut rng, &[1, 4, 2, 3]), f64s(&mut rng, &[4]));
    let op = FastOp::Attention {
        scale: bits(0.5),
        causal: true,
        mask: true,
        sinks: true,
    };
    let f = |a: &[Array]| fused(&op, a);
    check("attention node", f, &[q, k, v, m, s], &mut rng);
    let (b, t, hk, hv, dk, dv) = (1, 2, 1, 2, 3, 2);
    let gd = [
        f64s(&mut rng, &[b, t, hk, dk]),
        multiply(f64s(&mut rng, &[b, t, hk, dk]), 0.5).unwrap(),
        f64s(&mut rng, &[b, t, hv, dv]),
        random(&mut rng, &[b, t, hv], 0.5, 1.0),
        random(&mut rng, &[b, t, hv], 0.2, 1.0),
        f64s(&mut rng, &[b, hv, dv, dk]),
    ];
    let f = |a: &[Array]| fused(&FastOp::GatedDelta { steps: true }, a);
    check("gated_delta node", f, &gd, &mut rng);
    let x = f64s(&mut rng, &[1, 7, 3]);
    let wc = f64s(&mut rng, &[3, 3, 1]);
    let op = FastOp::DepthwiseConv1d {
        stride: 2,
        padding: 1,
        dilation: 1,
    };
    let f = |a: &[Array]| fused(&op, a);
    check("conv1d node", f, &[x, wc], &mut rng);
    let x4 = f64s(&mut rng, &[2, 3, 4, 6]);
    let offset = Array::scalar(2i32);
    let f = |a: &[Array]| fused(&rope_op(6, false), &[a[0].clone(), offset.clone()]);
    check("rope node", f, &[x4], &mut rng);
}

#[test]
fn norm_gradients_of_the_operations() {
    let mut rng = Rng::new(75);
    let (x, r, w, b) = (
        f64s(&mut rng, &[3, 6]),
        f64s(&mut rng, &[3, 6]),
        f64s(&mut rng, &[6]),
        f64s(&mut rng, &[6]),
    );
    check(
        "rms_norm",
        |a: &[Array]| Ok(vec![fast::rms_norm(&a[0], Some(&a[1]), 1e-3)?]),
        &[x.clone(), w.clone()],
        &mut rng,
    );
    check(
        "layer_norm",
        |a: &[Array]| {
            Ok(vec![fast::layer_norm(
                &a[0],
                Some(&a[1]),
                Some(&a[2]),
                1e-3,
            )?])
        },
        &[x.clone(), w.clone(), b],
        &mut rng,
    );
    check(
        "add_rms_norm",
        |a: &[Array]| {
            let (h, y) = fast::add_rms_norm(&a[0], &a[1], Some(&a[2]), 1e-3)?;
            Ok(vec![h, y])
        },
        &[x.clone(), r.clone(), w.clone()],
        &mut rng,
    );
    // Only the normalised output used.
    check(
        "add_rms_norm y",
        |a: &[Array]| Ok(vec![fast::add_rms_norm(&a[0], &a[1], None, 1e-3)?.1]),
        &[x, r],
        &mut rng,
    );
}

#[test]
fn rotation_gradients_of_the_operations() {
    let mut rng = Rng::new(76);
    let x = f64s(&mut rng, &[2, 2, 3, 6]);
    let offset = Array::from_slice(&[1i32, 3], &[2]).unwrap();
    for traditional in [false, true] {
        check(
            "rope",
            |a: &[Array]| {
                Ok(vec![fast::rope(
                    &a[0],
                    4,
                    traditional,
                    Some(100.0),
                    0.5,
                    &offset,
                    None,
                )?])
            },
            std::slice::from_ref(&x),
            &mut rng,
        );
    }
    let rotation = fast::Rotation {
        dims: 6,
        traditional: false,
        base: Some(1e4),
        scale: 1.0,
        freqs: None,
    };
    let (w, cache) = (f64s(&mut rng, &[6]), f64s(&mut rng, &[2, 2, 5, 6]));
    check(
        "norm_rope",
        |a: &[Array]| {
            Ok(vec![fast::norm_rope(
                &a[0],
                Some((&a[1], 1e-3)),
                rotation,
                2,
                Some(&a[2]),
            )?])
        },
        &[x, w, cache],
        &mut rng,
    );
}

#[test]
fn attention_gradients_of_the_operations() {
    let mut rng = Rng::new(77);
    let (q, k, v) = (
        f64s(&mut rng, &[1, 4, 3, 4]),
        f64s(&mut rng, &[1, 2, 5, 4]),
        f64s(&mut rng, &[1, 2, 5, 3]),
    );
    let sinks = f64s(&mut rng, &[4]);
    let additive = f64s(&mut rng, &[1, 1, 3, 5]);
    let keep = greater(f64s(&mut rng, &[3, 5]), -0.6).unwrap();
    let keep = logical_or(
        &keep,
        equal(arange(0.0, 5.0, 1.0, DType::I32).unwrap(), 0).unwrap(),
    )
    .unwrap();
    let masks: [(&str, fast::AttentionMask<'_>); 4] = [
        ("none", fast::AttentionMask::None),
        ("causal", fast::AttentionMask::Causal),
        ("bool", fast::AttentionMask::Array(&keep)),
        ("additive", fast::AttentionMask::Array(&additive)),
    ];
    for (name, mask) in masks {
        for with_sinks in [false, true] {
            check(
                &format!("attention {name} sinks {with_sinks}"),
                |a: &[Array]| {
                    let s = with_sinks.then_some(&a[3]);
                    Ok(vec![fast::scaled_dot_product_attention(
                        &a[0], &a[1], &a[2], 0.5, mask, s,
                    )?])
                },
                &[q.clone(), k.clone(), v.clone(), sinks.clone()],
                &mut rng,
            );
        }
    }
}

#[test]
fn paged_gradients_of_the_operations() {
    let mut rng = Rng::new(78);
    let q = f64s(&mut rng, &[2, 2, 2, 3]);
    let (kc, vc) = (f64s(&mut rng, &[5, 1, 2, 3]), f64s(&mut rng, &[5, 1, 2, 3]));
    let table = Array::from_slice(&[4i32, 0, 2, 1, 3, 0], &[2, 3]).unwrap();
    let lens = Array::from_slice(&[5i32, 3], &[2]).unwrap();
    check(
        "paged_attention",
        |a: &[Array]| {
            Ok(vec![fast::paged_attention(
                &a[0], &a[1], &a[2], &table, &lens, 0.7,
            )?])
        },
        &[q, kc.clone(), vc],
        &mut rng,
    );
    let new = f64s(&mut rng, &[3, 1, 3]);
    let slots = Array::from_slice(&[7i32, -1, 2], &[3]).unwrap();
    check(
        "paged_write",
        |a: &[Array]| Ok(vec![fast::paged_write(&a[0], &a[1], &slots)?]),
        &[kc, new],
        &mut rng,
    );
}

#[test]
fn recurrence_gradients_of_the_operations() {
    let mut rng = Rng::new(79);
    let (b, t, hk, hv, dk, dv) = (2, 3, 1, 2, 3, 2);
    let xs = [
        f64s(&mut rng, &[b, t, hk, dk]),
        multiply(f64s(&mut rng, &[b, t, hk, dk]), 0.5).unwrap(),
        f64s(&mut rng, &[b, t, hv, dv]),
        random(&mut rng, &[b, t, hv], 0.5, 1.0),
        random(&mut rng, &[b, t, hv], 0.2, 1.0),
        f64s(&mut rng, &[b, hv, dv, dk]),
    ];
    for steps in [false, true] {
        check(
            &format!("gated_delta steps {steps}"),
            |a: &[Array]| {
                let (y, s) = if steps {
                    fast::gated_delta_steps(&a[0], &a[1], &a[2], &a[3], &a[4], &a[5])?
                } else {
                    fast::gated_delta(&a[0], &a[1], &a[2], &a[3], &a[4], &a[5])?
                };
                Ok(vec![y, s])
            },
            &xs,
            &mut rng,
        );
    }
    let pool = f64s(&mut rng, &[3, hv, dv, dk]);
    let slots = Array::from_slice(&[2i32, 0], &[2]).unwrap();
    let mut with_pool = xs[..5].to_vec();
    with_pool.push(pool);
    check(
        "gated_delta_slots",
        |a: &[Array]| {
            let (y, p) = fast::gated_delta_slots(&a[0], &a[1], &a[2], &a[3], &a[4], &a[5], &slots)?;
            Ok(vec![y, p])
        },
        &with_pool,
        &mut rng,
    );
}

#[test]
fn product_gradients_of_the_operations() {
    let mut rng = Rng::new(80);
    let (a, b) = (f64s(&mut rng, &[3, 2, 4]), f64s(&mut rng, &[2, 4, 3]));
    let lhs = Array::from_slice(&[2u32, 0, 0, 1], &[4]).unwrap();
    let rhs = Array::from_slice(&[1u32, 1, 0, 0], &[4]).unwrap();
    check(
        "gather_mm",
        |x: &[Array]| {
            Ok(vec![gather_mm(
                &x[0],
                &x[1],
                Some(&lhs),
                Some(&rhs),
                false,
            )?])
        },
        &[a, b],
        &mut rng,
    );
    let (x, w) = (f64s(&mut rng, &[2, 7, 4]), f64s(&mut rng, &[4, 3, 1]));
    check(
        "conv1d depthwise",
        |a: &[Array]| Ok(vec![conv1d(&a[0], &a[1], 2, 1, 2, 4)?]),
        &[x.clone(), w],
        &mut rng,
    );
    let wg = f64s(&mut rng, &[6, 2, 2]);
    check(
        "conv1d grouped",
        |a: &[Array]| Ok(vec![conv1d(&a[0], &a[1], 1, 1, 1, 2)?]),
        &[x, wg],
        &mut rng,
    );
}

#[test]
fn operations_batch_as_a_loop() {
    let mut rng = Rng::new(81);
    let (x, w) = (f64s(&mut rng, &[3, 2, 5]), f64s(&mut rng, &[3, 5]));
    let shared = f64s(&mut rng, &[5]);
    let rms = |a: &[Array]| Ok(vec![fast::rms_norm(&a[0], Some(&a[1]), 1e-3)?]);
    check_vmap("rms_norm", rms, &[x.clone(), shared], &[true, false]);
    check_vmap(
        "rms_norm weights",
        rms,
        &[x.clone(), w.clone()],
        &[true, true],
    );
    let layer = |a: &[Array]| Ok(vec![fast::layer_norm(&a[0], Some(&a[1]), None, 1e-3)?]);
    check_vmap("layer_norm weights", layer, &[x.clone(), w], &[true, true]);
    let targets = Array::from_slice(&[0i32, 4, 1, 2, 3, 0], &[3, 2]).unwrap();
    let ce = |a: &[Array]| Ok(vec![fast::cross_entropy(&a[0], &a[1])?]);
    check_vmap("cross_entropy", ce, &[x.clone(), targets], &[true, true]);
    let x4 = f64s(&mut rng, &[3, 2, 2, 3, 4]);
    let offsets = Array::from_slice(&[1i32, 5], &[2]).unwrap();
    let rope = |a: &[Array]| {
        Ok(vec![fast::rope(
            &a[0],
            4,
            false,
            Some(100.0),
            1.0,
            &offsets,
            None,
        )?])
    };
    check_vmap(
        "rope per-batch offsets",
        rope,
        std::slice::from_ref(&x4),
        &[true],
    );
    let (q, k, v) = (
        f64s(&mut rng, &[3, 1, 4, 2, 3]),
        f64s(&mut rng, &[3, 1, 2, 4, 3]),
        f64s(&mut rng, &[1, 2, 4, 3]),
    );
    let sdpa = |a: &[Array]| {
        Ok(vec![fast::scaled_dot_product_attention(
            &a[0],
            &a[1],
            &a[2],
            0.5,
            fast::AttentionMask::Causal,
            None,
        )?])
    };
    check_vmap("attention", sdpa, &[q, k, v], &[true, true, false]);
    let (b, t, hk, hv, dk, dv) = (1, 2, 1, 2, 3, 2);
    let qs = f64s(&mut rng, &[3, b, t, hk, dk]);
    let rest = [
        multiply(f64s(&mut rng, &[b, t, hk, dk]), 0.5).unwrap(),
        f64s(&mut rng, &[b, t, hv, dv]),
        random(&mut rng, &[b, t, hv], 0.5, 1.0),
        random(&mut rng, &[b, t, hv], 0.2, 1.0),
        f64s(&mut rng, &[b, hv, dv, dk]),
    ];
    let gd = |a: &[Array]| {
        let (y, s) = fast::gated_delta(&a[0], &a[1], &a[2], &a[3], &a[4], &a[5])?;
        Ok(vec![y, s])
    };
    let mut all = vec![qs];
    all.extend(rest);
    check_vmap(
        "gated_delta",
        gd,
        &all,
        &[true, false, false, false, false, false],
    );
    let (a, bm) = (f64s(&mut rng, &[3, 2, 2, 4]), f64s(&mut rng, &[2, 4, 3]));
    let idx = Array::from_slice(&[1u32, 0], &[2]).unwrap();
    let gm = |x: &[Array]| Ok(vec![gather_mm(&x[0], &x[1], None, Some(&idx), false)?]);
    check_vmap("gather_mm", gm, &[a, bm], &[true, false]);
    let xc = f64s(&mut rng, &[3, 1, 6, 2]);
    let wc = f64s(&mut rng, &[2, 3, 1]);
    let conv = |a: &[Array]| Ok(vec![conv1d(&a[0], &a[1], 1, 1, 1, 2)?]);
    check_vmap("conv1d", conv, &[xc, wc], &[true, false]);
}

#[test]
fn more_fused_nodes_differentiate_through_their_fallbacks() {
    let mut rng = Rng::new(82);
    let eps = bits(1e-3);
    let (x, w, b) = (
        f64s(&mut rng, &[2, 5]),
        f64s(&mut rng, &[5]),
        f64s(&mut rng, &[5]),
    );
    // Forward mode of the dedicated ones goes through the fallback too.
    let f = |a: &[Array]| fused(&FastOp::LayerNorm { eps }, a);
    check("layer_norm node", f, &[x.clone(), w.clone(), b], &mut rng);
    let t = Array::from_slice(&[3i32, -1], &[2]).unwrap();
    let f = |a: &[Array]| fused(&FastOp::LogSumExp, a);
    check("logsumexp node", f, std::slice::from_ref(&x), &mut rng);
    let f = |a: &[Array]| fused(&FastOp::Softmax, a);
    check("softmax node", f, std::slice::from_ref(&x), &mut rng);
    // Cross entropy's loss is float32: its forward tangent against the formula instead.
    let tx = f64s(&mut rng, &[2, 5]);
    let ce = |a: &[Array]| fused(&FastOp::CrossEntropy, &[a[0].clone(), t.clone()]);
    let (_, tan) = jvp(ce, std::slice::from_ref(&x), std::slice::from_ref(&tx)).unwrap();
    let (xv, tv) = (values(&x), values(&tx));
    for (r, target) in [3usize, 4].into_iter().enumerate() {
        let row = &xv[r * 5..r * 5 + 5];
        let total: f64 = row.iter().map(|v| v.exp()).sum();
        let want: f64 = (0..5)
            .map(|c| (row[c].exp() / total) * tv[r * 5 + c])
            .sum::<f64>()
            - tv[r * 5 + target];
        let got = values(&tan[0])[r];
        assert!(
            (got - want).abs() < 1e-6,
            "cross_entropy jvp {r}: {got} vs {want}"
        );
    }
    // Paged attention and writes, slots, gathered products, norm_rope with a cache.
    let q = f64s(&mut rng, &[2, 2, 2, 3]);
    let (kc, vc) = (f64s(&mut rng, &[4, 1, 2, 3]), f64s(&mut rng, &[4, 1, 2, 3]));
    let table = Array::from_slice(&[3i32, 0, 2, 1], &[2, 2]).unwrap();
    let lens = Array::from_slice(&[4i32, 3], &[2]).unwrap();
    let op = FastOp::PagedAttention { scale: bits(0.7) };
    let f = |a: &[Array]| {
        fused(
            &op,
            &[
                a[0].clone(),
                a[1].clone(),
                a[2].clone(),
                table.clone(),
                lens.clone(),
            ],
        )
    };
    check("paged_attention node", f, &[q, kc.clone(), vc], &mut rng);
    let new = f64s(&mut rng, &[2, 1, 3]);
    let slots = Array::from_slice(&[5i32, 0], &[2]).unwrap();
    let f = |a: &[Array]| {
        fused(
            &FastOp::PagedWrite,
            &[a[0].clone(), a[1].clone(), slots.clone()],
        )
    };
    check("paged_write node", f, &[kc, new], &mut rng);
    let (bt, t_len, hk, hv, dk, dv) = (2, 2, 1, 2, 3, 2);
    let mut xs = vec![
        f64s(&mut rng, &[bt, t_len, hk, dk]),
        multiply(f64s(&mut rng, &[bt, t_len, hk, dk]), 0.5).unwrap(),
        f64s(&mut rng, &[bt, t_len, hv, dv]),
        random(&mut rng, &[bt, t_len, hv], 0.5, 1.0),
        random(&mut rng, &[bt, t_len, hv], 0.2, 1.0),
        f64s(&mut rng, &[3, hv, dv, dk]),
    ];
    xs.push(Array::from_slice(&[2i32, 0], &[2]).unwrap());
    let f = |a: &[Array]| fused(&FastOp::GatedDeltaSlots, a);
    check("gated_delta_slots node", f, &xs, &mut rng);
    let (a, bm) = (f64s(&mut rng, &[3, 2, 4]), f64s(&mut rng, &[2, 4, 2]));
    let lhs = Array::from_slice(&[2u32, 0, 1], &[3]).unwrap();
    let rhs = Array::from_slice(&[1u32, 1, 0], &[3]).unwrap();
    let f = |x: &[Array]| {
        fused(
            &FastOp::GatherMm,
            &[x[0].clone(), x[1].clone(), lhs.clone(), rhs.clone()],
        )
    };
    check("gather_mm node", f, &[a, bm], &mut rng);
    let op = FastOp::NormRope {
        eps: Some(bits(1e-3)),
        dims: 4,
        traditional: true,
        base: bits(1e4),
        scale: bits(1.0),
        offset: 1,
        cache: true,
    };
    let (cache, xr, wr) = (
        f64s(&mut rng, &[1, 2, 4, 4]),
        f64s(&mut rng, &[1, 2, 2, 4]),
        f64s(&mut rng, &[4]),
    );
    let f = |a: &[Array]| fused(&op, a);
    check("norm_rope node", f, &[cache, xr, wr], &mut rng);
}

#[test]
fn other_fused_nodes_batch_through_their_fallbacks() {
    let mut rng = Rng::new(83);
    let eps = bits(1e-3);
    // A batched weight: not row-wise any more.
    let (x, w) = (f64s(&mut rng, &[3, 2, 5]), f64s(&mut rng, &[3, 5]));
    let f = |a: &[Array]| fused(&FastOp::RmsNorm { eps }, a);
    check_vmap("rms_norm weights", f, &[x.clone(), w], &[true, true]);
    // Per-batch offsets.
    let x4 = f64s(&mut rng, &[3, 2, 2, 3, 4]);
    let offsets = Array::from_slice(&[2i32, 7], &[2]).unwrap();
    let f = |a: &[Array]| fused(&rope_op(4, false), &[a[0].clone(), offsets.clone()]);
    check_vmap("rope offsets", f, std::slice::from_ref(&x4), &[true]);
    let op = FastOp::Attention {
        scale: bits(0.5),
        causal: true,
        mask: false,
        sinks: true,
    };
    let (q, k, v, s) = (
        f64s(&mut rng, &[3, 1, 4, 2, 3]),
        f64s(&mut rng, &[3, 1, 2, 4, 3]),
        f64s(&mut rng, &[1, 2, 4, 2]),
        f64s(&mut rng, &[4]),
    );
    let f = |a: &[Array]| fused(&op, a);
    check_vmap(
        "attention node",
        f,
        &[q, k, v, s],
        &[true, true, false, false],
    );
    let (b, t, hk, hv, dk, dv) = (1, 2, 1, 2, 3, 2);
    let xs = vec![
        f64s(&mut rng, &[3, b, t, hk, dk]),
        multiply(f64s(&mut rng, &[b, t, hk, dk]), 0.5).unwrap(),
        f64s(&mut rng, &[b, t, hv, dv]),
        random(&mut rng, &[b, t, hv], 0.5, 1.0),
        random(&mut rng, &[b, t, hv], 0.2, 1.0),
        f64s(&mut rng, &[3, b, hv, dv, dk]),
    ];
    let f = |a: &[Array]| fused(&FastOp::GatedDelta { steps: false }, a);
    let batched = [true, false, false, false, false, true];
    check_vmap("gated_delta node", f, &xs, &batched);
    let cache = f64s(&mut rng, &[3, 4, 1, 2, 3]);
    let new = f64s(&mut rng, &[2, 1, 3]);
    let slots = Array::from_slice(&[5i32, 0], &[2]).unwrap();
    let f = |a: &[Array]| {
        fused(
            &FastOp::PagedWrite,
            &[a[0].clone(), a[1].clone(), slots.clone()],
        )
    };
    check_vmap("paged_write node", f, &[cache, new], &[true, false]);
}

#[test]
fn second_derivatives_through_the_dedicated_rules() {
    let mut rng = Rng::new(84);
    let eps = bits(1e-3);
    let (x, w, g) = (
        f64s(&mut rng, &[2, 4]),
        f64s(&mut rng, &[4]),
        f64s(&mut rng, &[2, 4]),
    );
    // The vjp of rms_norm (its RmsNormVjp node) as a function of x and w, checked itself.
    let first = |a: &[Array]| {
        let f = |b: &[Array]| fused(&FastOp::RmsNorm { eps }, b);
        Ok(vjp(f, a, std::slice::from_ref(&g))?.1)
    };
    check("rms_norm vjp", first, &[x.clone(), w.clone()], &mut rng);
    let first = |a: &[Array]| {
        let f = |b: &[Array]| fused(&FastOp::Softmax, b);
        Ok(vjp(f, a, std::slice::from_ref(&g))?.1)
    };
    check("softmax vjp", first, std::slice::from_ref(&x), &mut rng);
    let x4 = f64s(&mut rng, &[1, 2, 3, 4]);
    let first = |a: &[Array]| {
        let f = |b: &[Array]| fused(&rope_op(4, false), &[b[0].clone(), Array::scalar(1i32)]);
        Ok(vjp(f, a, std::slice::from_ref(&x4))?.1)
    };
    check("rope vjp", first, std::slice::from_ref(&x4), &mut rng);
}
