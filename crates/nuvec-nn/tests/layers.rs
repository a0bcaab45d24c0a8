//! Each layer against PyTorch on the same weights (float64 references on float32 inputs),
//! with the gradients of `sum(y · w)` where the fixtures have them, and against direct
//! formulas.

mod common;

use common::{array, close, close_tol, int_array, parse, weighted_sum};
use nuvec_core::{Array, DType, matmul};
use nuvec_nn::*;

const FIXTURE: &str = include_str!("fixtures/layers.json");

fn params(pairs: &[(&str, Array)]) -> Params {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

#[test]
fn linear_matches_pytorch() {
    let fx = parse(FIXTURE);
    let l = &fx["linear"];
    let mut layer = Linear::new(5, 3, true).unwrap();
    layer
        .load_weights(
            &params(&[("weight", array(&l["weight"])), ("bias", array(&l["bias"]))]),
            true,
        )
        .unwrap();
    let x = array(&l["x"]);
    close("y", &layer.forward(&x).unwrap(), &l["y"]);
    let w = array(&l["w"]);
    let (_, g) = value_and_grad(&mut layer, |m| Ok(weighted_sum(&m.forward(&x)?, &w)?)).unwrap();
    close("d/dweight", &g["weight"], &l["grad_weight"]);
    close("d/dbias", &g["bias"], &l["grad_bias"]);
}

#[test]
fn linear_initialises_as_mlx() {
    let layer = Linear::new(16, 64, true).unwrap();
    let bound = 0.25f32; // 1/√16
    for name in ["weight", "bias"] {
        let v = layer.parameters()[name].to_vec::<f32>().unwrap();
        assert!(v.iter().all(|x| x.abs() <= bound), "{name} out of bounds");
        assert!(v.iter().any(|x| x.abs() > bound / 2.0), "{name} too narrow");
    }
    let no_bias = Linear::new(3, 2, false).unwrap();
    assert_eq!(
        no_bias.parameters().into_keys().collect::<Vec<_>>(),
        ["weight"]
    );
    assert!(Linear::new(0, 2, true).is_err());
    assert!(Linear::from_weights(Array::scalar(1.0f32), None).is_err());
}

#[test]
fn embedding_matches_pytorch() {
    let fx = parse(FIXTURE);
    let e = &fx["embedding"];
    let mut emb = Embedding::from_weight(array(&e["weight"])).unwrap();
    let ids = int_array(&e["ids"]);
    close("lookup", &emb.forward(&ids).unwrap(), &e["y"]);
    let w = array(&e["w"]);
    let (_, g) = value_and_grad(&mut emb, |m| Ok(weighted_sum(&m.forward(&ids)?, &w)?)).unwrap();
    close("d/dweight", &g["weight"], &e["grad_weight"]);
    close(
        "as_linear",
        &emb.as_linear(&array(&e["h"])).unwrap(),
        &e["as_linear"],
    );
    assert!(emb.forward(&array(&e["h"])).is_err());
    let fresh = Embedding::new(1000, 16).unwrap();
    let v = fresh.weight.to_vec::<f32>().unwrap();
    let var = v.iter().map(|x| x * x).sum::<f32>() / v.len() as f32;
    assert!((var - 1.0 / 16.0).abs() < 0.01, "variance {var}");
}

#[test]
fn norms_match_pytorch() {
    let fx = parse(FIXTURE);
    let r = &fx["rms_norm"];
    let x = array(&r["x"]);
    let mut rms = RMSNorm::new(8, 1e-5).unwrap();
    rms.update(&params(&[("weight", array(&r["weight"]))]))
        .unwrap();
    close("rms_norm", &rms.forward(&x).unwrap(), &r["y"]);
    let w = array(&r["w"]);
    let (_, g) = value_and_grad(&mut rms, |m| Ok(weighted_sum(&m.forward(&x)?, &w)?)).unwrap();
    close_tol(
        "rms_norm d/dweight",
        &g["weight"],
        &r["grad_weight"],
        1e-5,
        1e-5,
    );
    let gx = nuvec_core::grad(
        |xs: &[Array]| Ok(vec![weighted_sum(&rms.forward(&xs[0])?, &w)?]),
        &[0],
    )(std::slice::from_ref(&x))
    .unwrap();
    close_tol("rms_norm d/dx", &gx[0], &r["grad_x"], 1e-5, 1e-5);

    let l = &fx["layer_norm"];
    let mut ln = LayerNorm::new(8, 1e-5, true, true).unwrap();
    ln.update(&params(&[
        ("weight", array(&l["weight"])),
        ("bias", array(&l["bias"])),
    ]))
    .unwrap();
    close("layer_norm", &ln.forward(&x).unwrap(), &l["y"]);
    let w = array(&l["w"]);
    let (_, g) = value_and_grad(&mut ln, |m| Ok(weighted_sum(&m.forward(&x)?, &w)?)).unwrap();
    close_tol(
        "layer_norm d/dweight",
        &g["weight"],
        &l["grad_weight"],
        1e-5,
        1e-5,
    );
    close_tol(
        "layer_norm d/dbias",
        &g["bias"],
        &l["grad_bias"],
        1e-5,
        1e-5,
    );
    let plain = LayerNorm::new(8, 1e-5, false, false).unwrap();
    assert!(plain.parameters().is_empty());
    close(
        "layer_norm without affine",
        &plain.forward(&x).unwrap(),
        &l["plain"],
    );
    let no_bias = LayerNorm::new(8, 1e-5, true, false).unwrap();
    assert_eq!(
        no_bias.parameters().into_keys().collect::<Vec<_>>(),
        ["weight"]
    );
}

#[test]
fn rope_matches_pytorch() {
    let fx = parse(FIXTURE);
    let r = &fx["rope"];
    let x = array(&r["x"]);
    let rope = RoPE::new(8, false, 10000.0, 1.0).unwrap();
    close("default", &rope.forward(&x).unwrap(), &r["default"]);
    let trad = RoPE::new(8, true, 10000.0, 0.5).unwrap();
    close(
        "traditional, offset 3",
        &trad.forward_at(&x, 3).unwrap(),
        &r["traditional_offset"],
    );
    let partial = RoPE::new(4, false, 500.0, 1.0).unwrap();
    close(
        "partial",
        &partial.forward_at(&x, 2).unwrap(),
        &r["partial"],
    );
    assert!(RoPE::new(3, false, 10000.0, 1.0).is_err());
    assert!(rope.parameters().is_empty());
}

fn attention_layer(a: &serde_json::Value) -> MultiHeadAttention {
    let mut attn = MultiHeadAttention::new(16, 4, 2, false).unwrap();
    attn.load_weights(
        &params(&[
            ("query_proj.weight", array(&a["wq"])),
            ("key_proj.weight", array(&a["wk"])),
            ("value_proj.weight", array(&a["wv"])),
            ("out_proj.weight", array(&a["wo"])),
        ]),
        true,
    )
    .unwrap();
    attn
}

#[test]
fn grouped_query_attention_matches_pytorch() {
    use nuvec_core::fast::AttentionMask;
    let fx = parse(FIXTURE);
    let a = &fx["attention"];
    let x = array(&a["x"]);
    let attn = attention_layer(a);
    let causal = attn
        .forward(&x, &x, &x, AttentionMask::Causal, None)
        .unwrap();
    close_tol("causal", &causal, &a["causal"], 1e-5, 1e-5);
    let w = array(&a["w"]);
    let mut trained = attn.clone();
    let (_, g) = value_and_grad(&mut trained, |m| {
        let y = m.forward(&x, &x, &x, AttentionMask::Causal, None)?;
        Ok(weighted_sum(&y, &w)?)
    })
    .unwrap();
    for (name, key) in [
        ("query_proj.weight", "grad_wq"),
        ("key_proj.weight", "grad_wk"),
        ("value_proj.weight", "grad_wv"),
        ("out_proj.weight", "grad_wo"),
    ] {
        close_tol(name, &g[name], &a[key], 1e-5, 1e-5);
    }
    close_tol(
        "full",
        &Forward::forward(&attn, &x).unwrap(),
        &a["full"],
        1e-5,
        1e-5,
    );
    // MLX's additive mask gives the causal result too.
    let mask = MultiHeadAttention::create_additive_causal_mask(5, DType::F32).unwrap();
    let masked = attn
        .forward(&x, &x, &x, AttentionMask::Array(&mask), None)
        .unwrap();
    close_tol("additive mask", &masked, &a["causal"], 1e-5, 1e-5);
    let roped = attn
        .clone()
        .with_rope(RoPE::new(4, false, 10000.0, 1.0).unwrap());
    let y = roped
        .forward(&x, &x, &x, AttentionMask::Causal, None)
        .unwrap();
    close_tol("causal with rope", &y, &a["causal_rope"], 1e-5, 1e-5);
}

#[test]
fn cached_attention_matches_one_pass() {
    use nuvec_core::fast::AttentionMask;
    use nuvec_core::{SliceArg, concatenate, slice};
    let fx = parse(FIXTURE);
    let a = &fx["attention"];
    let x = array(&a["x"]);
    let attn = attention_layer(a).with_rope(RoPE::new(4, false, 10000.0, 1.0).unwrap());
    let part = |lo: isize, hi: isize| {
        slice(
            &x,
            &[SliceArg::full(), SliceArg::new(Some(lo), Some(hi), 1)],
        )
        .unwrap()
    };
    for mut cache in [KvCache::new(), KvCache::preallocated(2).unwrap()] {
        // Three positions at once, then one at a time.
        let mut outs = Vec::new();
        for (lo, hi) in [(0, 3), (3, 4), (4, 5)] {
            let xs = part(lo, hi);
            outs.push(
                attn.forward(&xs, &xs, &xs, AttentionMask::Causal, Some(&mut cache))
                    .unwrap(),
            );
        }
        assert_eq!(cache.offset(), 5);
        let (k, v) = cache.state().unwrap();
        assert_eq!(k.shape(), [2, 2, 5, 4]);
        assert_eq!(v.shape(), [2, 2, 5, 4]);
        let y = concatenate(&outs, 1).unwrap();
        close_tol("cached", &y, &a["causal_rope"], 1e-5, 1e-5);
        cache.reset();
        assert_eq!(cache.offset(), 0);
        assert!(cache.state().is_none());
    }
    let mut cache = KvCache::new();
    let k = nuvec_core::zeros(&[1, 2, 3, 4], DType::F32).unwrap();
    cache.update_and_fetch(&k, &k).unwrap();
    let other = nuvec_core::zeros(&[1, 3, 1, 4], DType::F32).unwrap();
    assert!(cache.update_and_fetch(&other, &other).is_err());
    assert!(MultiHeadAttention::new(16, 4, 3, false).is_err());
    assert!(MultiHeadAttention::new(15, 4, 2, false).is_err());
}

#[test]
fn convolutions_match_pytorch() {
    let fx = parse(FIXTURE);
    let c = &fx["conv1d"];
    let mut conv = Conv1d::new(4, 6, 3, 2, 1, 1, 2, true).unwrap();
    conv.load_weights(
        &params(&[("weight", array(&c["weight"])), ("bias", array(&c["bias"]))]),
        true,
    )
    .unwrap();
    let x = array(&c["x"]);
    close_tol("conv1d", &conv.forward(&x).unwrap(), &c["y"], 1e-5, 1e-5);
    let w = array(&c["w"]);
    let (_, g) = value_and_grad(&mut conv, |m| Ok(weighted_sum(&m.forward(&x)?, &w)?)).unwrap();
    close_tol(
        "conv1d d/dweight",
        &g["weight"],
        &c["grad_weight"],
        1e-5,
        1e-5,
    );
    close_tol("conv1d d/dbias", &g["bias"], &c["grad_bias"], 1e-5, 1e-5);
    let c = &fx["conv2d"];
    let mut conv = Conv2d::new(3, 4, (3, 2), (2, 1), (1, 0), (1, 2), 1, true).unwrap();
    conv.load_weights(
        &params(&[("weight", array(&c["weight"])), ("bias", array(&c["bias"]))]),
        true,
    )
    .unwrap();
    let x = array(&c["x"]);
    close_tol("conv2d", &conv.forward(&x).unwrap(), &c["y"], 1e-5, 1e-5);
    let w = array(&c["w"]);
    let (_, g) = value_and_grad(&mut conv, |m| Ok(weighted_sum(&m.forward(&x)?, &w)?)).unwrap();
    close_tol(
        "conv2d d/dweight",
        &g["weight"],
        &c["grad_weight"],
        1e-5,
        1e-5,
    );
    close_tol("conv2d d/dbias", &g["bias"], &c["grad_bias"], 1e-5, 1e-5);
    assert_eq!(conv.weight.shape(), [4, 3, 2, 3]);
    assert!(Conv1d::new(3, 6, 3, 1, 0, 1, 2, true).is_err());
    let fresh = Conv2d::new(2, 5, 3, 1, 0, 1, 1, true).unwrap();
    assert_eq!(
        fresh.bias.as_ref().unwrap().to_vec::<f32>().unwrap(),
        [0.0; 5]
    );
    let bound = (1.0f32 / 18.0).sqrt();
    assert!(
        fresh
            .weight
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .all(|v| v.abs() <= bound)
    );
}

#[test]
fn mlp_gradients_match_pytorch() {
    let fx = parse(FIXTURE);
    let m = &fx["mlp"];
    let mut mlp = Sequential::new()
        .with(Linear::new(5, 8, true).unwrap())
        .with(ReLU)
        .with(Linear::new(8, 2, true).unwrap());
    mlp.load_weights(
        &params(&[
            ("layers.0.weight", array(&m["w1"])),
            ("layers.0.bias", array(&m["b1"])),
            ("layers.2.weight", array(&m["w2"])),
            ("layers.2.bias", array(&m["b2"])),
        ]),
        true,
    )
    .unwrap();
    let (x, target) = (array(&m["x"]), array(&m["target"]));
    let (loss, g) = value_and_grad(&mut mlp, |model| {
        losses::mse_loss(&model.forward(&x)?, &target, losses::Reduction::Mean)
    })
    .unwrap();
    close("loss", &loss, &m["loss"]);
    close("w1", &g["layers.0.weight"], &m["grad_w1"]);
    close("b1", &g["layers.0.bias"], &m["grad_b1"]);
    close("w2", &g["layers.2.weight"], &m["grad_w2"]);
    close("b2", &g["layers.2.bias"], &m["grad_b2"]);
    assert_eq!(g.len(), 4);
}

#[test]
fn quantized_linear_matches_its_formula() {
    let lin = Linear::new(128, 16, true).unwrap();
    let q = QuantizedLinear::from_linear(&lin, 64, 4).unwrap();
    assert_eq!(q.weight.shape(), [16, 16]);
    assert_eq!(q.scales.shape(), [16, 2]);
    assert_eq!(q.weight.dtype(), DType::U32);
    let x = nuvec_core::random::normal(&[3, 128], DType::F32, 0.0, 1.0, None).unwrap();
    // x · dequantize(W)ᵀ + b.
    let w_hat = q.dequantized_weight().unwrap();
    let want = nuvec_core::add(
        matmul(&x, &w_hat.t().unwrap()).unwrap(),
        lin.bias.as_ref().unwrap().value(),
    )
    .unwrap();
    let got = q.forward(&x).unwrap();
    common::close_values(
        "quantized",
        &got.to_vec::<f32>().unwrap(),
        &want
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|&v| f64::from(v))
            .collect::<Vec<_>>(),
        1e-4,
        1e-4,
    );
    // Close to the float layer: 4 bits over [-1/√128, 1/√128].
    let exact = lin.forward(&x).unwrap().to_vec::<f32>().unwrap();
    let err = got
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .zip(&exact)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(err < 0.2, "quantization error {err}");
    // The quantized parameters are frozen and stay so; the bias taken from the Linear trains.
    let mut q = q;
    let trainable = |q: &QuantizedLinear| q.trainable_parameters().into_keys().collect::<Vec<_>>();
    assert_eq!(trainable(&q), ["bias"]);
    q.freeze();
    assert!(trainable(&q).is_empty());
    q.unfreeze();
    assert_eq!(trainable(&q), ["bias"]);
    let built = QuantizedLinear::new(64, 8, true, 64, 4).unwrap();
    assert!(trainable(&built).is_empty());
    assert_eq!(
        q.parameters().into_keys().collect::<Vec<_>>(),
        ["bias", "biases", "scales", "weight"]
    );
    assert!(QuantizedLinear::new(100, 8, false, 64, 4).is_err());
    let fresh = QuantizedLinear::new(64, 8, false, 32, 8).unwrap();
    assert_eq!(
        fresh
            .forward(&x.reshape(&[6, 64]).unwrap())
            .unwrap()
            .shape(),
        [6, 8]
    );
}

#[test]
fn dropout_trains_and_evaluates() {
    nuvec_core::random::seed(7);
    let mut drop = Dropout::new(0.25).unwrap();
    let x = nuvec_core::ones(&[20000], DType::F32).unwrap();
    let y = drop.forward(&x).unwrap().to_vec::<f32>().unwrap();
    let kept = y.iter().filter(|&&v| v != 0.0).count() as f32 / y.len() as f32;
    assert!((kept - 0.75).abs() < 0.02, "kept {kept}");
    assert!(y.iter().all(|&v| v == 0.0 || (v - 1.0 / 0.75).abs() < 1e-6));
    // The mean is kept.
    let mean = y.iter().sum::<f32>() / y.len() as f32;
    assert!((mean - 1.0).abs() < 0.03);
    // Evaluation mode passes the input, also inside a container.
    let mut seq = Sequential::new()
        .with(Dropout::new(0.5).unwrap())
        .with(Identity);
    seq.eval();
    assert_eq!(
        seq.forward(&x).unwrap().to_vec::<f32>().unwrap(),
        vec![1.0; 20000]
    );
    seq.train(true);
    assert!(
        seq.forward(&x)
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
            .contains(&0.0)
    );
    drop.eval();
    assert!(!drop.training);
    assert!(Dropout::new(1.0).is_err());
    assert!(Dropout::new(-0.1).is_err());
}
