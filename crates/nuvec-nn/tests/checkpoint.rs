//! Checkpoints: a module's weights and an optimizer's state written to safetensors (or
//! `.npz`) files and read back into fresh objects, which then compute exactly what the
//! originals compute.

use nuvec_core::{Array, DType, random};
use nuvec_nn::losses::{Reduction, cross_entropy};
use nuvec_nn::optim::{AdamW, Optimizer, cosine_decay};
use nuvec_nn::{Embedding, Error, Forward, Linear, Module, RMSNorm, value_and_grad};

#[derive(Module)]
struct Tiny {
    embed: Embedding,
    norm: RMSNorm,
    layers: Vec<Linear>,
}

impl Tiny {
    fn new(seed: u64) -> Tiny {
        random::seed(seed);
        Tiny {
            embed: Embedding::new(12, 8).unwrap(),
            norm: RMSNorm::new(8, 1e-5).unwrap(),
            layers: vec![
                Linear::new(8, 16, true).unwrap(),
                Linear::new(16, 12, false).unwrap(),
            ],
        }
    }

    fn logits(&self, tokens: &Array) -> nuvec_nn::Result<Array> {
        let h = self.norm.forward(&self.embed.forward(tokens)?)?;
        let h = nuvec_nn::activations::silu(&self.layers[0].forward(&h)?)?;
        self.layers[1].forward(&h)
    }
}

fn tokens() -> (Array, Array) {
    let x = Array::from_slice(&[1i32, 5, 7, 11, 0, 3], &[2, 3]).unwrap();
    let y = Array::from_slice(&[5i32, 7, 11, 0, 3, 2], &[2, 3]).unwrap();
    (x, y)
}

fn values(m: &Tiny) -> Vec<f32> {
    m.logits(&tokens().0).unwrap().to_vec::<f32>().unwrap()
}

fn same_parameters(a: &Tiny, b: &Tiny) {
    let (pa, pb) = (a.parameters(), b.parameters());
    assert_eq!(pa.keys().collect::<Vec<_>>(), pb.keys().collect::<Vec<_>>());
    for (name, x) in &pa {
        assert_eq!(x.dtype(), pb[name].dtype(), "{name}");
        assert_eq!(x.shape(), pb[name].shape(), "{name}");
        let (x, y) = (
            x.astype(DType::F32).unwrap().to_vec::<f32>().unwrap(),
            pb[name]
                .astype(DType::F32)
                .unwrap()
                .to_vec::<f32>()
                .unwrap(),
        );
        assert_eq!(x, y, "{name}");
    }
}

#[test]
fn weights_round_trip_into_a_fresh_model() {
    let dir = tempfile::tempdir().unwrap();
    let model = Tiny::new(1);
    for file in ["tiny.safetensors", "tiny.npz"] {
        let path = dir.path().join(file);
        model.save_weights(&path).unwrap();
        let mut fresh = Tiny::new(2);
        assert_ne!(values(&fresh), values(&model));
        fresh.load_weights_file(&path, true).unwrap();
        same_parameters(&fresh, &model);
        assert_eq!(values(&fresh), values(&model), "{file}");
    }
    let meta = nuvec_core::io::load_safetensors_metadata(dir.path().join("tiny.safetensors"));
    assert_eq!(meta.unwrap()["format"], "mlx");
}

#[test]
fn weights_keep_their_dtype() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("half.safetensors");
    let mut model = Tiny::new(3);
    model.set_dtype(DType::BF16);
    model.save_weights(&path).unwrap();
    let mut fresh = Tiny::new(4);
    fresh.load_weights_file(&path, true).unwrap();
    assert_eq!(fresh.norm.weight.dtype(), DType::BF16);
    same_parameters(&fresh, &model);
}

#[test]
fn loading_checks_names_and_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("layer.safetensors");
    // A file holding only the first layer's weights, under the model's names.
    let model = Tiny::new(5);
    let part: std::collections::HashMap<String, Array> = model
        .weights()
        .into_iter()
        .filter(|(k, _)| k.starts_with("layers.0."))
        .collect();
    nuvec_core::io::save_safetensors(&path, &part, None).unwrap();
    let mut fresh = Tiny::new(6);
    let before = values(&fresh);
    assert!(matches!(
        fresh.load_weights_file(&path, true),
        Err(Error::MissingParameters(names)) if names.contains(&"embed.weight".to_string())
    ));
    assert_eq!(values(&fresh), before, "a failed load changes nothing");
    fresh.load_weights_file(&path, false).unwrap();
    assert_eq!(
        fresh.layers[0].weight.to_vec::<f32>().unwrap(),
        model.layers[0].weight.to_vec::<f32>().unwrap()
    );

    // Only the extensions of a known format; a missing or corrupt file is an error.
    assert!(matches!(
        model.save_weights(dir.path().join("w.bin")),
        Err(Error::InvalidArgument(m)) if m.starts_with("save_weights")
    ));
    assert!(matches!(
        fresh.load_weights_file(dir.path().join("absent.safetensors"), true),
        Err(Error::Core(nuvec_core::Error::Io(_)))
    ));
    let junk = dir.path().join("junk.safetensors");
    std::fs::write(&junk, b"not a safetensors file").unwrap();
    assert!(matches!(
        fresh.load_weights_file(&junk, true),
        Err(Error::Core(nuvec_core::Error::Format { .. }))
    ));
}

/// One AdamW step of the tiny model on the fixed batch.
fn train_step(model: &mut Tiny, opt: &mut AdamW) {
    let (x, y) = tokens();
    let (_, grads) = value_and_grad(model, |m| {
        cross_entropy(&m.logits(&x)?, &y, Reduction::Mean)
    })
    .unwrap();
    opt.update(model, &grads).unwrap();
}

fn adamw() -> AdamW {
    AdamW::new(cosine_decay(0.05, 20, 0.001)).bias_correction(true)
}

#[test]
fn training_resumes_from_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let (weights, state) = (
        dir.path().join("model.safetensors"),
        dir.path().join("optimizer.safetensors"),
    );
    let mut model = Tiny::new(7);
    let mut opt = adamw();
    for _ in 0..4 {
        train_step(&mut model, &mut opt);
    }
    model.save_weights(&weights).unwrap();
    opt.save_state(&state).unwrap();

    let mut resumed = Tiny::new(8);
    resumed.load_weights_file(&weights, true).unwrap();
    let mut resumed_opt = adamw();
    resumed_opt.load_state(&state).unwrap();
    assert_eq!(resumed_opt.step(), 4);
    for _ in 0..3 {
        train_step(&mut model, &mut opt);
        train_step(&mut resumed, &mut resumed_opt);
    }
    same_parameters(&resumed, &model);
    assert_eq!(resumed_opt.learning_rate(), opt.learning_rate());

    // The same through .npz, and a state file an optimizer cannot take.
    let npz = dir.path().join("optimizer.npz");
    opt.save_state(&npz).unwrap();
    let mut again = adamw();
    again.load_state(&npz).unwrap();
    assert_eq!(again.step(), 7);
    assert!(adamw().load_state(&weights).is_err());
}
