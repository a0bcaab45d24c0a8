//! Bad arguments: one test per kind, each error naming its operation.

use super::*;

fn f(shape: &[usize]) -> Array {
    zeros(shape, DType::F32).unwrap()
}

fn i(shape: &[usize]) -> Array {
    zeros(shape, DType::I32).unwrap()
}

/// An array in an error state (what a failed operator leaves).
fn failed() -> Array {
    &f(&[2]) + &f(&[3])
}

#[test]
fn norms_reject_bad_inputs() {
    let x = f(&[2, 4]);
    expect_err(fast::rms_norm(&f(&[]), None, 1e-5), "rms_norm");
    expect_err(fast::rms_norm(&x, Some(&f(&[3])), 1e-5), "rms_norm");
    expect_err(fast::rms_norm(&x, Some(&f(&[1, 4])), 1e-5), "rms_norm");
    expect_err(fast::rms_norm(&i(&[2, 4]), None, 1e-5), "rms_norm");
    expect_err(fast::rms_norm(&failed(), None, 1e-5), "add");
    expect_err(fast::layer_norm(&f(&[]), None, None, 1e-5), "layer_norm");
    expect_err(
        fast::layer_norm(&i(&[2, 4]), None, None, 1e-5),
        "layer_norm",
    );
    expect_err(
        fast::layer_norm(&x, None, Some(&f(&[5])), 1e-5),
        "layer_norm",
    );
    expect_err(
        fast::layer_norm(&x, Some(&f(&[2])), None, 1e-5),
        "layer_norm",
    );
    expect_err(fast::add_rms_norm(&x, &f(&[3, 4]), None, 1e-5), "add");
    expect_err(fast::add_rms_norm(&x, &x, Some(&f(&[5])), 1e-5), "rms_norm");
}

#[test]
fn cross_entropy_rejects_bad_targets() {
    let x = f(&[2, 4]);
    expect_err(fast::cross_entropy(&x, &i(&[3])), "cross_entropy");
    expect_err(fast::cross_entropy(&x, &i(&[2, 1])), "cross_entropy");
    expect_err(fast::cross_entropy(&x, &f(&[2])), "cross_entropy");
    expect_err(fast::cross_entropy(&f(&[]), &i(&[])), "cross_entropy");
    expect_err(fast::cross_entropy(&i(&[2, 4]), &i(&[2])), "cross_entropy");
}

#[test]
fn rope_rejects_bad_arguments() {
    let x = f(&[1, 2, 4]);
    let zero = Array::scalar(0i32);
    let rope = |x: &Array, dims, base, offset: &Array, freqs| {
        fast::rope(x, dims, false, base, 1.0, offset, freqs)
    };
    expect_err(rope(&f(&[2, 4]), 4, Some(1e4), &zero, None), "rope");
    expect_err(rope(&i(&[1, 2, 4]), 4, Some(1e4), &zero, None), "rope");
    for dims in [0, 3, 6] {
        expect_err(rope(&x, dims, Some(1e4), &zero, None), "rope");
    }
    expect_err(rope(&x, 4, None, &zero, None), "rope");
    let freqs = f(&[2]);
    expect_err(rope(&x, 4, Some(1e4), &zero, Some(&freqs)), "rope");
    let three = f(&[3]);
    expect_err(rope(&x, 4, None, &zero, Some(&three)), "rope");
    expect_err(rope(&x, 4, Some(1e4), &Array::scalar(0.5f32), None), "rope");
    expect_err(rope(&x, 4, Some(1e4), &i(&[2]), None), "rope");
    expect_err(rope(&x, 4, Some(1e4), &i(&[1, 1]), None), "rope");
}

#[test]
fn norm_rope_rejects_bad_caches_and_rotations() {
    let rotation = fast::Rotation {
        dims: 8,
        traditional: false,
        base: Some(1e4),
        scale: 1.0,
        freqs: None,
    };
    let x = f(&[1, 2, 3, 8]);
    for bad in [
        &[1, 2, 4, 8][..],
        &[1, 3, 8, 8],
        &[1, 2, 8, 4],
        &[2, 8, 8],
        &[2, 2, 8, 8],
    ] {
        expect_err(
            fast::norm_rope(&x, None, rotation, 2, Some(&f(bad))),
            "norm_rope",
        );
    }
    let odd = fast::Rotation {
        dims: 5,
        ..rotation
    };
    expect_err(fast::norm_rope(&x, None, odd, 0, None), "rope");
    let neither = fast::Rotation {
        base: None,
        ..rotation
    };
    expect_err(fast::norm_rope(&x, None, neither, 0, None), "rope");
    let freqs = f(&[4]);
    let both = fast::Rotation {
        freqs: Some(&freqs),
        ..rotation
    };
    expect_err(fast::norm_rope(&x, None, both, 0, None), "rope");
    expect_err(
        fast::norm_rope(&x, Some((&f(&[4]), 1e-5)), rotation, 0, None),
        "rms_norm",
    );
    expect_err(
        fast::norm_rope(&f(&[2, 8]), None, rotation, 0, None),
        "rope",
    );
}

#[test]
fn attention_rejects_bad_shapes_masks_and_sinks() {
    const OP: &str = "scaled_dot_product_attention";
    let q = f(&[1, 4, 3, 8]);
    let kv = f(&[1, 2, 5, 8]);
    let none = fast::AttentionMask::None;
    let sdpa = |q: &Array, k: &Array, v: &Array, mask, sinks| {
        fast::scaled_dot_product_attention(q, k, v, 1.0, mask, sinks)
    };
    expect_err(sdpa(&f(&[4, 3, 8]), &kv, &kv, none, None), OP);
    expect_err(
        sdpa(&q, &f(&[1, 3, 5, 8]), &f(&[1, 3, 5, 8]), none, None),
        OP,
    );
    expect_err(
        sdpa(&q, &f(&[1, 2, 5, 4]), &f(&[1, 2, 5, 4]), none, None),
        OP,
    );
    expect_err(sdpa(&q, &kv, &f(&[1, 2, 6, 8]), none, None), OP);
    expect_err(
        sdpa(&q, &f(&[2, 2, 5, 8]), &f(&[2, 2, 5, 8]), none, None),
        OP,
    );
    expect_err(
        sdpa(&q, &f(&[1, 0, 5, 8]), &f(&[1, 0, 5, 8]), none, None),
        OP,
    );
    expect_err(
        sdpa(
            &i(&[1, 4, 3, 8]),
            &i(&[1, 2, 5, 8]),
            &i(&[1, 2, 5, 8]),
            none,
            None,
        ),
        OP,
    );
    let m5 = f(&[1, 1, 4, 3, 5]);
    expect_err(
        sdpa(&q, &kv, &kv, fast::AttentionMask::Array(&m5), None),
        OP,
    );
    let wrong = f(&[3, 4]);
    expect_err(
        sdpa(&q, &kv, &kv, fast::AttentionMask::Array(&wrong), None),
        "broadcast",
    );
    let m64 = zeros(&[3, 5], DType::F64).unwrap();
    expect_err(
        sdpa(&q, &kv, &kv, fast::AttentionMask::Array(&m64), None),
        OP,
    );
    let (two, s64) = (f(&[2]), zeros(&[4], DType::F64).unwrap());
    expect_err(sdpa(&q, &kv, &kv, none, Some(&two)), OP);
    expect_err(sdpa(&q, &kv, &kv, none, Some(&s64)), OP);
}

#[test]
fn paged_operations_reject_bad_arguments() {
    const OP: &str = "paged_attention";
    let q = f(&[1, 4, 1, 64]);
    let c = f(&[4, 2, 8, 64]);
    let t = Array::from_slice(&[0i32, 1], &[1, 2]).unwrap();
    let l = Array::from_slice(&[9i32], &[1]).unwrap();
    assert!(fast::paged_attention(&q, &c, &c, &t, &l, 1.0).is_ok());
    let c3 = f(&[4, 3, 8, 64]);
    expect_err(fast::paged_attention(&q, &c3, &c3, &t, &l, 1.0), OP);
    expect_err(fast::paged_attention(&q, &c, &c, &l, &l, 1.0), OP);
    expect_err(fast::paged_attention(&q, &c, &c, &t, &f(&[1]), 1.0), OP);
    expect_err(fast::paged_attention(&q, &c, &c, &f(&[1, 2]), &l, 1.0), OP);
    expect_err(fast::paged_attention(&q, &c, &c, &t, &i(&[2]), 1.0), OP);
    expect_err(fast::paged_attention(&q, &c, &c, &i(&[2, 2]), &l, 1.0), OP);
    expect_err(
        fast::paged_attention(&q, &c, &f(&[4, 2, 4, 64]), &t, &l, 1.0),
        OP,
    );
    expect_err(
        fast::paged_attention(&q, &f(&[4, 2, 8, 32]), &c, &t, &l, 1.0),
        OP,
    );
    expect_err(
        fast::paged_attention(&f(&[4, 1, 64]), &c, &c, &t, &l, 1.0),
        OP,
    );
    let ci = i(&[4, 2, 8, 64]);
    expect_err(
        fast::paged_attention(&i(&[1, 4, 1, 64]), &ci, &ci, &t, &l, 1.0),
        OP,
    );
    const W: &str = "paged_write";
    let new = f(&[2, 2, 64]);
    let slots = Array::from_slice(&[1i32, 2], &[2]).unwrap();
    assert!(fast::paged_write(&c, &new, &slots).is_ok());
    expect_err(fast::paged_write(&c, &f(&[2, 3, 64]), &slots), W);
    expect_err(fast::paged_write(&c, &f(&[2, 2, 32]), &slots), W);
    expect_err(fast::paged_write(&c, &f(&[2, 64]), &slots), W);
    expect_err(fast::paged_write(&c, &new, &i(&[3])), W);
    expect_err(fast::paged_write(&c, &new, &f(&[2])), W);
    expect_err(fast::paged_write(&f(&[4, 2, 64]), &new, &slots), W);
    expect_err(fast::paged_write(&i(&[4, 2, 8, 64]), &new, &slots), W);
}

#[test]
fn gated_delta_rejects_bad_shapes() {
    let (q, v) = (f(&[2, 3, 1, 4]), f(&[2, 3, 2, 5]));
    let gates = f(&[2, 3, 2]);
    let state = f(&[2, 2, 5, 4]);
    let gd = |q: &Array, k: &Array, v: &Array, g: &Array, b: &Array, s: &Array| {
        fast::gated_delta(q, k, v, g, b, s)
    };
    assert!(gd(&q, &q, &v, &gates, &gates, &state).is_ok());
    expect_err(
        gd(&q, &f(&[2, 3, 1, 5]), &v, &gates, &gates, &state),
        "gated_delta",
    );
    // Three value heads over two key heads.
    let q2 = f(&[2, 3, 2, 4]);
    let g3 = f(&[2, 3, 3]);
    expect_err(
        gd(&q2, &q2, &f(&[2, 3, 3, 5]), &g3, &g3, &f(&[2, 3, 5, 4])),
        "gated_delta",
    );
    expect_err(
        gd(&q, &q, &f(&[2, 2, 2, 5]), &gates, &gates, &state),
        "gated_delta",
    );
    expect_err(
        gd(&q, &q, &v, &f(&[2, 3, 2, 1]), &gates, &state),
        "gated_delta",
    );
    expect_err(gd(&q, &q, &v, &gates, &f(&[2, 3]), &state), "gated_delta");
    expect_err(
        gd(&q, &q, &v, &gates, &gates, &f(&[2, 2, 4, 5])),
        "gated_delta",
    );
    expect_err(
        gd(&f(&[2, 3, 4]), &f(&[2, 3, 4]), &v, &gates, &gates, &state),
        "gated_delta",
    );
    expect_err(
        gd(&q, &q, &v, &i(&[2, 3, 2]), &gates, &state),
        "gated_delta",
    );
    expect_err(
        fast::gated_delta_steps(&q, &q, &v, &gates, &gates, &f(&[1, 2, 5, 4])),
        "gated_delta",
    );
    const S: &str = "gated_delta_slots";
    let pool = f(&[6, 2, 5, 4]);
    let slots = Array::from_slice(&[0i32, 3], &[2]).unwrap();
    let gs = |pool: &Array, slots: &Array| {
        fast::gated_delta_slots(&q, &q, &v, &gates, &gates, pool, slots)
    };
    assert!(gs(&pool, &slots).is_ok());
    expect_err(gs(&f(&[6, 2, 4, 5]), &slots), S);
    expect_err(gs(&f(&[2, 5, 4]), &slots), S);
    expect_err(gs(&pool, &i(&[3])), S);
    expect_err(gs(&pool, &f(&[2])), S);
    expect_err(gs(&i(&[6, 2, 5, 4]), &slots), S);
    expect_err(
        fast::gated_delta_slots(&q, &q, &f(&[2, 3, 3, 5]), &gates, &gates, &pool, &slots),
        S,
    );
}

#[test]
fn gather_mm_and_conv1d_reject_bad_arguments() {
    let (a, b) = (f(&[3, 2, 4]), f(&[2, 4, 5]));
    let idx = Array::from_slice(&[0u32, 1], &[2]).unwrap();
    expect_err(gather_mm(&f(&[4]), &b, None, None, false), "gather_mm");
    expect_err(
        gather_mm(&a, &f(&[2, 3, 5]), None, None, false),
        "gather_mm",
    );
    expect_err(
        gather_mm(&i(&[3, 2, 4]), &i(&[2, 4, 5]), None, None, false),
        "gather_mm",
    );
    expect_err(
        gather_mm(&a, &b, Some(&f(&[2])), Some(&idx), false),
        "gather_mm",
    );
    let three = Array::from_slice(&[0u32, 1, 1], &[3]).unwrap();
    expect_err(
        gather_mm(&a, &b, Some(&idx), Some(&three), false),
        "gather_mm",
    );
    // Defaults over batch shapes that do not broadcast.
    expect_err(gather_mm(&a, &b, None, None, false), "gather_mm");
    const C: &str = "conv1d";
    let x = f(&[1, 10, 4]);
    expect_err(conv1d(&f(&[10, 4]), &f(&[4, 3, 1]), 1, 0, 1, 4), C);
    expect_err(conv1d(&x, &f(&[4, 3]), 1, 0, 1, 4), C);
    expect_err(conv1d(&x, &f(&[4, 3, 1]), 0, 0, 1, 4), C);
    expect_err(conv1d(&x, &f(&[4, 3, 1]), 1, 0, 0, 4), C);
    expect_err(conv1d(&x, &f(&[4, 3, 1]), 1, 0, 1, 0), C);
    expect_err(conv1d(&x, &f(&[4, 3, 1]), 1, 0, 1, 3), C);
    expect_err(conv1d(&x, &f(&[6, 3, 2]), 1, 0, 1, 1), C);
    expect_err(conv1d(&x, &f(&[4, 11, 1]), 1, 0, 1, 4), C);
    expect_err(conv1d(&x, &f(&[4, 0, 1]), 1, 0, 1, 4), C);
    expect_err(conv1d(&i(&[1, 10, 4]), &i(&[4, 3, 1]), 1, 0, 1, 4), C);
}
