//! Fused nodes on the GPU run their own kernels: after the public operations whose CUDA
//! kernels exist (the norms and their gradients, softmax, log-sum-exp, cross entropy and its
//! gradient, the rotation, norm_rope into an output and into a cache, the depthwise
//! convolution, decoding attention, paged attention) have recorded and evaluated fused nodes,
//! no fused node ran its fallback graph
//! inside the node ([`fast::nested_fallbacks`]); a node built by hand for inputs no kernel
//! takes does. One test in this binary, so no other test moves the process-wide count.
//! Skips itself, saying so, where no CUDA device answers.

mod common;

use common::Rng;
use common::gpu::{gpu_available, on, random};
use nuvec_core::fast::FastOp;
use nuvec_core::*;

/// Whether `a` is a fused node, or a view of one (the kept axis of a reduction).
fn fused(a: &Array) -> bool {
    let is_fast = |a: &Array| matches!(a.primitive(), Some(Primitive::Fast(_)));
    is_fast(a) || a.inputs().first().is_some_and(is_fast)
}

#[test]
fn fused_nodes_run_their_kernels_not_their_fallbacks() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(0x51);
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let x = random(&mut rng, &[8, 4096], -2.0, 2.0, dtype);
        let w = random(&mut rng, &[4096], -2.0, 2.0, dtype);
        let q = random(&mut rng, &[1, 8, 1, 128], -1.0, 1.0, dtype);
        let kv = random(&mut rng, &[1, 2, 300, 128], -1.0, 1.0, dtype);
        // A transposed input, as projections are: read in place or copied by the kernel.
        let xt = transpose(
            &random(&mut rng, &[2, 5, 4, 64], -1.0, 1.0, dtype),
            &[0, 2, 1, 3],
        )
        .unwrap();
        let table = Array::from_slice(&[1i32, 0, 2], &[1, 3]).unwrap();
        let targets = Array::from_slice(&[0i32, 5, 4095, -1, 7, 100, 2, 3], &[8]).unwrap();
        let lengths = Array::from_slice(&[40i32], &[1]).unwrap();
        let cache = random(&mut rng, &[3, 2, 16, 128], -1.0, 1.0, dtype);
        let w128 = random(&mut rng, &[128], -1.0, 1.0, dtype);
        let kv_cache = random(&mut rng, &[1, 8, 16, 128], -1.0, 1.0, dtype);
        let signal = random(&mut rng, &[2, 20, 6], -1.0, 1.0, dtype);
        let taps = random(&mut rng, &[6, 3, 1], -1.0, 1.0, dtype);
        let rotation = fast::Rotation {
            dims: 128,
            traditional: false,
            base: Some(1e4),
            scale: 1.0,
            freqs: None,
        };
        let before = fast::nested_fallbacks();
        let outs = on(Device::gpu(0), || {
            let none = fast::AttentionMask::None;
            let outs = vec![
                fast::rms_norm(&x, Some(&w), 1e-5).unwrap(),
                fast::add_rms_norm(&x, &x, Some(&w), 1e-5).unwrap().1,
                fast::layer_norm(&x, Some(&w), Some(&w), 1e-5).unwrap(),
                softmax(&x, &[-1]).unwrap(),
                logsumexp(&x, &[-1], true).unwrap(),
                fast::rope(&xt, 64, false, Some(1e4), 1.0, &Array::scalar(3i32), None).unwrap(),
                fast::scaled_dot_product_attention(&q, &kv, &kv, 0.1, none, None).unwrap(),
                fast::paged_attention(&q, &cache, &cache, &table, &lengths, 0.1).unwrap(),
                fast::cross_entropy(&x, &targets).unwrap(),
                fast::norm_rope(&q, Some((&w128, 1e-6)), rotation, 5, None).unwrap(),
                fast::norm_rope(&q, Some((&w128, 1e-6)), rotation, 5, Some(&kv_cache)).unwrap(),
                conv1d(&signal, &taps, 1, 1, 1, 6).unwrap(),
            ];
            // The gradient nodes: the norms' and cross entropy's.
            let rms = |xs: &[Array]| Ok(vec![fast::rms_norm(&xs[0], Some(&xs[1]), 1e-5)?]);
            let ln = |xs: &[Array]| {
                Ok(vec![fast::layer_norm(
                    &xs[0],
                    Some(&xs[1]),
                    Some(&xs[1]),
                    1e-5,
                )?])
            };
            let ce = |xs: &[Array]| Ok(vec![fast::cross_entropy(&xs[0], &targets)?]);
            let cot = std::slice::from_ref(&x);
            let mut outs = outs;
            outs.extend(vjp(rms, &[x.clone(), w.clone()], cot).unwrap().1);
            outs.extend(vjp(ln, &[x.clone(), w.clone()], cot).unwrap().1);
            let loss_cot = ones(&[8], DType::F32).unwrap();
            outs.extend(
                vjp(
                    ce,
                    std::slice::from_ref(&x),
                    std::slice::from_ref(&loss_cot),
                )
                .unwrap()
                .1,
            );
            for o in &outs {
                assert!(
                    fused(o),
                    "{dtype}: {:?} should be a fused node",
                    o.primitive()
                );
            }
            eval(&outs).unwrap();
            outs
        });
        assert_eq!(
            fast::nested_fallbacks(),
            before,
            "{dtype}: a fused node ran its fallback graph"
        );
        drop(outs);
    }
    // A node built by hand for a dtype no kernel takes runs its fallback graph, counted.
    let before = fast::nested_fallbacks();
    let x = random(&mut rng, &[2, 8], -1.0, 1.0, DType::F64);
    let y = on(Device::gpu(0), || {
        let op = FastOp::RmsNorm {
            eps: 1e-5f32.to_bits(),
        };
        let y = Array::from_op(Primitive::Fast(op), vec![x.clone(), Array::scalar(1.0f64)])
            .unwrap()
            .remove(0);
        y.eval().unwrap();
        y
    });
    assert_eq!(fast::nested_fallbacks(), before + 1);
    let want = fast::rms_norm(&x, None, 1e-5).unwrap();
    let close = allclose(&y, &want, 1e-12, 1e-12, false).unwrap();
    assert!(close.item::<bool>().unwrap());
}
