//! Module trees: names, the derive's attributes, freezing, updates, loading weights (and its
//! errors), and gradients over a module.

use std::collections::{BTreeMap, HashMap};

use nuvec_core::{Array, DType, sum};
use nuvec_nn::*;

#[derive(Module)]
struct Attention {
    wq: Linear,
    #[module(rename = "wo")]
    output: Linear,
    #[module(skip)]
    _note: std::cell::Cell<u8>,
    heads: usize,
}

#[derive(Module)]
struct Block {
    attention: Attention,
    norm: Option<RMSNorm>,
    missing: Option<RMSNorm>,
    drop: Dropout,
}

#[derive(Module)]
struct Model {
    embed: Embedding,
    layers: Vec<Block>,
    extra: BTreeMap<String, Param>,
    scale: Param,
    constant: Array,
}

#[derive(Module)]
struct Residual<L> {
    inner: L,
    gain: Param,
}

#[derive(Module)]
struct Pair(Linear, #[module(skip)] String, Param);

fn model() -> Model {
    let block = || Block {
        attention: Attention {
            wq: Linear::new(4, 4, false).unwrap(),
            output: Linear::new(4, 4, true).unwrap(),
            _note: std::cell::Cell::new(0),
            heads: 2,
        },
        norm: Some(RMSNorm::new(4, 1e-5).unwrap()),
        missing: None,
        drop: Dropout::new(0.1).unwrap(),
    };
    Model {
        embed: Embedding::new(10, 4).unwrap(),
        layers: vec![block(), block()],
        extra: [("gate".to_string(), Param::new(Array::scalar(1.0f32)))].into(),
        scale: Param::new(nuvec_core::ones(&[4], DType::F32).unwrap()),
        constant: Array::scalar(3.0f32),
    }
}

#[test]
fn names_follow_the_tree() {
    let m = model();
    let names: Vec<String> = m.parameters().into_keys().collect();
    assert_eq!(
        names,
        [
            "embed.weight",
            "extra.gate",
            "layers.0.attention.wo.bias",
            "layers.0.attention.wo.weight",
            "layers.0.attention.wq.weight",
            "layers.0.norm.weight",
            "layers.1.attention.wo.bias",
            "layers.1.attention.wo.weight",
            "layers.1.attention.wq.weight",
            "layers.1.norm.weight",
            "scale",
        ]
    );
    assert_eq!(m.num_parameters(), 40 + 1 + 2 * (4 + 16 + 16 + 4) + 4);
    let w = m.weights();
    assert_eq!(w.len(), 11);
    assert!(w["layers.1.norm.weight"].same(m.layers[1].norm.as_ref().unwrap().weight.value()));
    let pair = Pair(
        Linear::new(2, 2, false).unwrap(),
        String::new(),
        Param::new(Array::scalar(0.0f32)),
    );
    assert_eq!(
        pair.parameters().into_keys().collect::<Vec<_>>(),
        ["0.weight", "2"]
    );
    assert!(pair.1.is_empty());
    let res = Residual {
        inner: Sequential::new().with(Linear::new(2, 2, true).unwrap()),
        gain: Param::new(Array::scalar(1.0f32)),
    };
    assert_eq!(
        res.parameters().into_keys().collect::<Vec<_>>(),
        ["gain", "inner.layers.0.bias", "inner.layers.0.weight"]
    );
}

#[test]
fn freezing_by_name_prefix_and_whole() {
    let mut m = model();
    m.freeze_params(&["layers.0", "scale"]).unwrap();
    let trainable: Vec<String> = m.trainable_parameters().into_keys().collect();
    assert_eq!(trainable.len(), 6);
    assert!(
        trainable
            .iter()
            .all(|n| !n.starts_with("layers.0.") && n != "scale")
    );
    assert_eq!(m.frozen_parameters().len(), 5);
    // A prefix must end at a dot: "layers.1.attention.w" names nothing.
    assert_eq!(
        m.freeze_params(&["layers.1.attention.w"]),
        Err(Error::UnknownParameter("layers.1.attention.w".into()))
    );
    m.unfreeze_params(&["layers.0.norm.weight"]).unwrap();
    assert_eq!(m.trainable_parameters().len(), 7);
    m.freeze();
    assert!(m.trainable_parameters().is_empty());
    m.unfreeze();
    assert_eq!(m.trainable_parameters().len(), 11);
    // Freezing a submodule directly.
    m.layers[1].attention.freeze();
    assert_eq!(m.trainable_parameters().len(), 8);
}

#[test]
fn update_replaces_named_parameters() {
    let mut m = model();
    let new = nuvec_core::zeros(&[4], DType::F32).unwrap();
    let mut p = Params::new();
    p.insert("scale".into(), new.clone());
    m.update(&p).unwrap();
    assert!(m.scale.value().same(&new));
    p.insert("nope".into(), new.clone());
    assert_eq!(
        m.update(&p),
        Err(Error::UnexpectedParameters(vec!["nope".into()]))
    );
    // Frozen flags survive updates.
    m.freeze_params(&["scale"]).unwrap();
    p.remove("nope");
    m.update(&p).unwrap();
    assert!(m.scale.is_frozen());
}

#[test]
fn load_weights_reports_missing_unexpected_and_misshaped() {
    let mut m = model();
    let mut w: HashMap<String, Array> = m.weights();
    let zeros = |s: &[usize]| nuvec_core::zeros(s, DType::F32).unwrap();
    w.remove("layers.1.norm.weight");
    w.remove("embed.weight");
    let err = m.load_weights(&w, true).unwrap_err();
    assert_eq!(
        err,
        Error::MissingParameters(vec!["embed.weight".into(), "layers.1.norm.weight".into()])
    );
    assert!(err.to_string().contains("layers.1.norm.weight"));
    // Not strict: the present ones load.
    w.insert("scale".into(), zeros(&[4]));
    m.load_weights(&w, false).unwrap();
    assert_eq!(m.scale.to_vec::<f32>().unwrap(), [0.0; 4]);
    let mut w = m.weights();
    w.insert("layers.2.norm.weight".into(), zeros(&[4]));
    assert_eq!(
        m.load_weights(&w, true),
        Err(Error::UnexpectedParameters(vec![
            "layers.2.norm.weight".into()
        ]))
    );
    m.load_weights(&w, false).unwrap();
    let mut w = m.weights();
    w.insert("layers.0.attention.wq.weight".into(), zeros(&[4, 5]));
    let err = m.load_weights(&w, false).unwrap_err();
    assert_eq!(
        err,
        Error::ShapeMismatch {
            name: "layers.0.attention.wq.weight".into(),
            expected: vec![4, 4],
            got: vec![4, 5],
        }
    );
    assert!(err.to_string().contains("layers.0.attention.wq.weight"));
    // Nothing changed on error.
    assert_eq!(m.layers[0].attention.wq.weight.shape(), [4, 4]);
    // A round trip through weights().
    let mut other = model();
    other.load_weights(&m.weights(), true).unwrap();
    for (k, v) in other.parameters() {
        assert!(v.same(&m.parameters()[&k]), "{k}");
    }
}

#[test]
fn set_dtype_converts_float_parameters() {
    let mut m = model();
    m.freeze_params(&["scale"]).unwrap();
    m.set_dtype(DType::BF16);
    assert!(m.parameters().values().all(|p| p.dtype() == DType::BF16));
    assert!(m.scale.is_frozen());
    let mut q = QuantizedLinear::new(64, 4, true, 64, 4).unwrap();
    q.set_dtype(DType::F16);
    assert_eq!(q.weight.dtype(), DType::U32);
    assert_eq!(q.scales.dtype(), DType::F16);
}

#[test]
fn training_mode_reaches_nested_layers() {
    let mut m = model();
    assert!(m.layers[0].drop.training);
    m.eval();
    assert!(m.layers.iter().all(|b| !b.drop.training));
    m.train(true);
    assert!(m.layers.iter().all(|b| b.drop.training));
    assert_eq!(m.layers[0].attention.heads, 2);
    assert_eq!(m.constant.item::<f32>().unwrap(), 3.0);
}

#[test]
fn value_and_grad_covers_trainable_parameters_only() {
    let mut lin = Linear::from_weights(
        Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap(),
        Some(Array::from_slice(&[0.5f32, -0.5], &[2]).unwrap()),
    )
    .unwrap();
    let x = Array::from_slice(&[1.0f32, -1.0], &[1, 2]).unwrap();
    let weight_before = lin.weight.value().clone();
    let loss_fn = |m: &Linear| Ok(sum(&m.forward(&x)?, &[], false)?);
    let (loss, g) = value_and_grad(&mut lin, loss_fn).unwrap();
    // y = [1 - 2 + 0.5, 3 - 4 - 0.5] = [-0.5, -1.5].
    assert_eq!(loss.item::<f32>().unwrap(), -2.0);
    assert_eq!(g["weight"].to_vec::<f32>().unwrap(), [1.0, -1.0, 1.0, -1.0]);
    assert_eq!(g["bias"].to_vec::<f32>().unwrap(), [1.0, 1.0]);
    // The model holds its own arrays again.
    assert!(lin.weight.value().same(&weight_before));
    lin.freeze_params(&["weight"]).unwrap();
    let (_, g) = value_and_grad(&mut lin, loss_fn).unwrap();
    assert_eq!(g.keys().collect::<Vec<_>>(), ["bias"]);
    // Everything frozen: the loss and no gradients.
    lin.freeze();
    let (loss, g) = value_and_grad(&mut lin, loss_fn).unwrap();
    assert_eq!(loss.item::<f32>().unwrap(), -2.0);
    assert!(g.is_empty());
}

#[test]
fn value_and_grad_returns_the_closures_error() {
    let mut lin = Linear::new(2, 2, false).unwrap();
    let before = lin.weight.value().clone();
    let err = value_and_grad(&mut lin, |_| {
        Err(Error::InvalidArgument("my loss failed".into()))
    })
    .unwrap_err();
    assert_eq!(err, Error::InvalidArgument("my loss failed".into()));
    assert!(lin.weight.value().same(&before));
    // A loss of more than one element is nuvec-core's error.
    let x = nuvec_core::ones(&[3, 2], DType::F32).unwrap();
    let err = value_and_grad(&mut lin, |m| m.forward(&x)).unwrap_err();
    assert!(matches!(err, Error::Core(_)), "{err}");
    assert!(lin.weight.value().same(&before));
}

#[test]
fn errors_convert_to_core_errors() {
    let e: nuvec_core::Error = Error::UnknownParameter("w".into()).into();
    assert_eq!(e.to_string(), "no parameter named w");
    let core = nuvec_core::Error::Io("x".into());
    let back: nuvec_core::Error = Error::Core(core.clone()).into();
    assert_eq!(back, core);
}
