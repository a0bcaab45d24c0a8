//! The Qwen3-style transformer: its parameter names, causality, decoding with caches against
//! the full forward pass, a checkpoint round trip, and a few steps of training.

use nuvec_core::{Array, SliceArg, random, slice};
use nuvec_nn::losses::{Reduction, cross_entropy};
use nuvec_nn::optim::{AdamW, Optimizer};
use nuvec_nn::transformer::{Transformer, TransformerConfig};
use nuvec_nn::{Module, value_and_grad};

fn config() -> TransformerConfig {
    TransformerConfig {
        vocab_size: 11,
        dims: 16,
        n_layers: 2,
        n_heads: 4,
        n_kv_heads: 2,
        head_dim: 6,
        hidden_dims: 24,
        rope_base: 10_000.0,
        ..TransformerConfig::default()
    }
}

fn model(seed: u64, config: &TransformerConfig) -> Transformer {
    random::seed(seed);
    Transformer::new(config).unwrap()
}

fn tokens() -> Array {
    Array::from_slice(&[1u32, 4, 2, 9, 3, 0, 7, 7, 5, 10, 6, 8], &[2, 6]).unwrap()
}

fn close(a: &[f32], b: &[f32], tol: f32) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()), "[{i}]: {x} vs {y}");
    }
}

/// Positions `start..stop` of `[B, L, V]` logits.
fn positions(x: &Array, start: isize, stop: isize) -> Vec<f32> {
    let full = SliceArg::full();
    slice(x, &[full, SliceArg::new(Some(start), Some(stop), 1), full])
        .unwrap()
        .to_vec::<f32>()
        .unwrap()
}

#[test]
fn parameters_have_qwen3_names_and_shapes() {
    let m = model(0, &config());
    let p = m.parameters();
    let names: Vec<&str> = p
        .keys()
        .filter(|k| k.starts_with("model.layers.0.") || !k.starts_with("model.layers."))
        .map(String::as_str)
        .collect();
    assert_eq!(
        names,
        [
            "model.embed_tokens.weight",
            "model.layers.0.input_layernorm.weight",
            "model.layers.0.mlp.down_proj.weight",
            "model.layers.0.mlp.gate_proj.weight",
            "model.layers.0.mlp.up_proj.weight",
            "model.layers.0.post_attention_layernorm.weight",
            "model.layers.0.self_attn.k_norm.weight",
            "model.layers.0.self_attn.k_proj.weight",
            "model.layers.0.self_attn.o_proj.weight",
            "model.layers.0.self_attn.q_norm.weight",
            "model.layers.0.self_attn.q_proj.weight",
            "model.layers.0.self_attn.v_proj.weight",
            "model.norm.weight",
        ]
    );
    assert_eq!(
        p["model.layers.0.self_attn.q_proj.weight"].shape(),
        [24, 16]
    );
    assert_eq!(
        p["model.layers.0.self_attn.k_proj.weight"].shape(),
        [12, 16]
    );
    assert_eq!(
        p["model.layers.0.self_attn.o_proj.weight"].shape(),
        [16, 24]
    );
    assert_eq!(p["model.layers.0.self_attn.q_norm.weight"].shape(), [6]);
    assert_eq!(p["model.layers.0.mlp.gate_proj.weight"].shape(), [24, 16]);
    assert_eq!(p.len(), 2 + 2 * 11);

    let untied = model(
        0,
        &TransformerConfig {
            tie_embeddings: false,
            qk_norm: false,
            ..config()
        },
    );
    let p = untied.parameters();
    assert_eq!(p["lm_head.weight"].shape(), [11, 16]);
    assert!(!p.contains_key("model.layers.0.self_attn.q_norm.weight"));
    assert_eq!(untied.forward(&tokens(), None).unwrap().shape(), [2, 6, 11]);
}

#[test]
fn bad_configurations_and_inputs_are_errors() {
    for bad in [
        TransformerConfig {
            n_kv_heads: 3,
            ..config()
        },
        TransformerConfig {
            head_dim: 5,
            ..config()
        },
        TransformerConfig {
            dims: 0,
            ..config()
        },
    ] {
        assert!(Transformer::new(&bad).is_err(), "{bad:?}");
    }
    let m = model(0, &config());
    let flat = Array::from_slice(&[1u32, 2, 3], &[3]).unwrap();
    assert!(m.forward(&flat, None).is_err());
    let mut too_few = vec![nuvec_nn::KvCache::new()];
    assert!(m.forward(&tokens(), Some(&mut too_few)).is_err());
}

#[test]
fn attention_is_causal() {
    let m = model(1, &config());
    let a = m.forward(&tokens(), None).unwrap();
    // The same rows with their last two tokens changed.
    let changed = Array::from_slice(&[1u32, 4, 2, 9, 0, 1, 7, 7, 5, 10, 2, 2], &[2, 6]).unwrap();
    let b = m.forward(&changed, None).unwrap();
    assert_eq!(positions(&a, 0, 4), positions(&b, 0, 4));
    assert_ne!(positions(&a, 4, 6), positions(&b, 4, 6));
}

#[test]
fn decoding_with_caches_matches_the_full_pass() {
    let m = model(2, &config());
    let full = m.forward(&tokens(), None).unwrap();
    let mut caches = m.make_caches();
    // A prompt of three tokens, then one token at a time.
    let prompt = slice(
        &tokens(),
        &[SliceArg::full(), SliceArg::new(Some(0), Some(3), 1)],
    )
    .unwrap();
    let first = m.forward(&prompt, Some(&mut caches)).unwrap();
    close(
        &first.to_vec::<f32>().unwrap(),
        &positions(&full, 0, 3),
        1e-5,
    );
    for t in 3..6 {
        let one = slice(
            &tokens(),
            &[SliceArg::full(), SliceArg::new(Some(t), Some(t + 1), 1)],
        )
        .unwrap();
        let got = m.forward(&one, Some(&mut caches)).unwrap();
        assert_eq!(got.shape(), [2, 1, 11]);
        close(
            &got.to_vec::<f32>().unwrap(),
            &positions(&full, t, t + 1),
            1e-5,
        );
    }
    assert!(caches.iter().all(|c| c.offset() == 6));
}

#[test]
fn a_checkpoint_reloads_into_a_fresh_model() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors");
    let m = model(3, &config());
    m.save_weights(&path).unwrap();
    let mut fresh = model(4, &config());
    let before = fresh
        .forward(&tokens(), None)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let want = m.forward(&tokens(), None).unwrap().to_vec::<f32>().unwrap();
    assert_ne!(before, want);
    fresh.load_weights_file(&path, true).unwrap();
    assert_eq!(
        fresh
            .forward(&tokens(), None)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        want
    );
    // A model of another shape does not take it.
    let mut other = model(
        5,
        &TransformerConfig {
            hidden_dims: 32,
            ..config()
        },
    );
    assert!(other.load_weights_file(&path, true).is_err());
}

#[test]
fn a_few_steps_fit_one_batch() {
    let mut m = model(6, &config());
    let x = tokens();
    // Next-token targets: each row shifted by one (the last target repeats).
    let y = Array::from_slice(&[4u32, 2, 9, 3, 0, 0, 7, 5, 10, 6, 8, 8], &[2, 6]).unwrap();
    let mut opt = AdamW::new(1e-2).bias_correction(true);
    let mut losses = Vec::new();
    for _ in 0..30 {
        let (loss, grads) = value_and_grad(&mut m, |m| {
            cross_entropy(&m.forward(&x, None)?, &y, Reduction::Mean)
        })
        .unwrap();
        assert_eq!(grads.len(), m.trainable_parameters().len());
        opt.update(&mut m, &grads).unwrap();
        losses.push(loss.item::<f32>().unwrap());
    }
    assert!(losses[29] < losses[0] / 4.0, "{losses:?}");
}
