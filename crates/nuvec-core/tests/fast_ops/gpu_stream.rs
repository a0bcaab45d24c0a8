//! Graphs recorded on a GPU stream (built only, never evaluated here): fused nodes exactly
//! where a CUDA kernel takes the work, the fallback graph elsewhere, and the fused rules' own
//! nodes where those have kernels.

use super::*;
use nuvec_core::fast::FastOp;

fn on_gpu<R>(f: impl FnOnce() -> R) -> R {
    with_stream(Stream::default_for(Device::gpu(0)), f)
}

fn fused(a: &Array) -> Option<&FastOp> {
    match a.primitive() {
        Some(Primitive::Fast(op)) => Some(op),
        _ => None,
    }
}

#[test]
fn kernels_record_fused_nodes_and_the_rest_falls_back() {
    let mut rng = Rng::new(91);
    let x = rand(&mut rng, &[4, 32], DType::F32);
    let w = rand(&mut rng, &[32], DType::F32);
    on_gpu(|| {
        let y = fast::rms_norm(&x, Some(&w), 1e-5).unwrap();
        assert!(matches!(fused(&y), Some(FastOp::RmsNorm { .. })));
        let (_, y) = fast::add_rms_norm(&x, &x, Some(&w), 1e-5).unwrap();
        assert!(matches!(fused(&y), Some(FastOp::AddRmsNorm { .. })));
        assert_eq!(y.output_index(), 1);
        let y = fast::layer_norm(&x, None, Some(&w), 1e-5).unwrap();
        assert!(matches!(fused(&y), Some(FastOp::LayerNorm { .. })));
        assert_eq!(fused(&softmax(&x, &[-1]).unwrap()), Some(&FastOp::Softmax));
        let l = logsumexp(&x, &[-1], false).unwrap();
        assert_eq!(l.shape(), [4]);
        // The squeeze of the kept axis is a reshape of the fused node.
        assert_eq!(fused(&l.inputs()[0]), Some(&FastOp::LogSumExp));
        // Other axes, and float64, keep the composed paths.
        assert!(fused(&softmax(&x, &[0]).unwrap()).is_none());
        let x64 = x.astype(DType::F64).unwrap();
        assert!(fused(&fast::rms_norm(&x64, None, 1e-5).unwrap()).is_none());
        let t = Array::from_slice(&[1i32, 2, 3, 4], &[4]).unwrap();
        // Cross entropy has a kernel for float logits; float64 logits record the graph.
        let ce = fast::cross_entropy(&x, &t).unwrap();
        assert!(matches!(fused(&ce), Some(FastOp::CrossEntropy)));
        let ce = fast::cross_entropy(&x64, &t).unwrap();
        assert!(fused(&ce).is_none());
        // Attention: a kernel's head size records the fused node, another runs the
        // composition.
        let q = zeros(&[1, 4, 1, 64], DType::F16).unwrap();
        let kv = zeros(&[1, 2, 40, 64], DType::F16).unwrap();
        let none = fast::AttentionMask::None;
        let out = fast::scaled_dot_product_attention(&q, &kv, &kv, 1.0, none, None).unwrap();
        assert!(matches!(fused(&out), Some(FastOp::Attention { .. })));
        let q = zeros(&[1, 4, 1, 48], DType::F16).unwrap();
        let kv = zeros(&[1, 2, 40, 48], DType::F16).unwrap();
        let out = fast::scaled_dot_product_attention(&q, &kv, &kv, 1.0, none, None).unwrap();
        assert!(fused(&out).is_none());
        // The gated delta kernel wants Dk a multiple of 32.
        let gd = |dk: usize| {
            let q = zeros(&[1, 2, 1, dk], DType::F32).unwrap();
            let v = zeros(&[1, 2, 2, 4], DType::F32).unwrap();
            let g = zeros(&[1, 2, 2], DType::F32).unwrap();
            let s = zeros(&[1, 2, 4, dk], DType::F32).unwrap();
            fast::gated_delta(&q, &q, &v, &g, &g, &s).unwrap().0
        };
        assert_eq!(fused(&gd(64)), Some(&FastOp::GatedDelta { steps: false }));
        assert!(fused(&gd(12)).is_none());
        let a = zeros(&[2, 3, 4], DType::F32).unwrap();
        let (lhs, rhs) = (
            Array::from_slice(&[1u32, 1, 0], &[3]).unwrap(),
            Array::from_slice(&[0u32, 1, 1], &[3]).unwrap(),
        );
        let b = swapaxes(&a, -1, -2).unwrap();
        let mm = gather_mm(&a, &b, Some(&lhs), Some(&rhs), true).unwrap();
        assert!(fused(&mm).is_none());
        // Nor for the others without CUDA kernels.
        let cache = zeros(&[2, 1, 4, 8], DType::F32).unwrap();
        let new = zeros(&[1, 1, 8], DType::F32).unwrap();
        let slots = Array::from_slice(&[3i32], &[1]).unwrap();
        assert!(fused(&fast::paged_write(&cache, &new, &slots).unwrap()).is_none());
        let x4 = zeros(&[1, 2, 3, 8], DType::F32).unwrap();
        let rotation = fast::Rotation {
            dims: 8,
            traditional: false,
            base: Some(1e4),
            scale: 1.0,
            freqs: None,
        };
        // norm_rope and the depthwise convolution have kernels.
        let nr = fast::norm_rope(&x4, None, rotation, 0, None).unwrap();
        assert!(matches!(fused(&nr), Some(FastOp::NormRope { .. })));
        let w = zeros(&[8, 3, 1], DType::F32).unwrap();
        let conv = conv1d(&x4.reshape(&[2, 3, 8]).unwrap(), &w, 1, 1, 1, 8).unwrap();
        assert!(matches!(fused(&conv), Some(FastOp::DepthwiseConv1d { .. })));
    });
}

#[test]
fn rules_on_a_gpu_stream_record_their_own_fused_nodes() {
    let mut rng = Rng::new(92);
    let x = rand(&mut rng, &[3, 16], DType::F32);
    let w = rand(&mut rng, &[16], DType::F32);
    let g = rand(&mut rng, &[3, 16], DType::F32);
    on_gpu(|| {
        let rms = |xs: &[Array]| Ok(vec![fast::rms_norm(&xs[0], Some(&xs[1]), 1e-5)?]);
        // The norms' gradients are fused nodes of their own (CUDA kernels take them).
        let (_, grads) = vjp(rms, &[x.clone(), w.clone()], std::slice::from_ref(&g)).unwrap();
        assert!(matches!(fused(&grads[0]), Some(FastOp::RmsNormVjp { .. })));
        let ln = |xs: &[Array]| Ok(vec![fast::layer_norm(&xs[0], Some(&xs[1]), None, 1e-5)?]);
        let (_, grads) = vjp(ln, &[x.clone(), w.clone()], std::slice::from_ref(&g)).unwrap();
        assert!(matches!(
            fused(&grads[1]),
            Some(FastOp::LayerNormVjp { .. })
        ));
        // Batching a row-wise node keeps it fused, with the batch first.
        let xs = rand(&mut rng, &[3, 16, 2], DType::F32);
        let out = vmap(rms, &[Some(2), None], &[0])(&[xs, w.clone()]).unwrap();
        assert_eq!(out[0].shape(), [2, 3, 16]);
        assert!(matches!(fused(&out[0]), Some(FastOp::RmsNorm { .. })));
        // Rope's gradient is the rotation backwards.
        let x4 = rand(&mut rng, &[1, 2, 3, 8], DType::F32);
        let rope = |xs: &[Array]| {
            Ok(vec![fast::rope(
                &xs[0],
                8,
                false,
                Some(1e4),
                1.0,
                &Array::scalar(0i32),
                None,
            )?])
        };
        let (_, grads) = vjp(rope, std::slice::from_ref(&x4), std::slice::from_ref(&x4)).unwrap();
        assert!(matches!(
            fused(&grads[0]),
            Some(FastOp::Rope { forward: false, .. })
        ));
    });
}
