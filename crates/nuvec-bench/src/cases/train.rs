//! `train_step`: one training step of nuvec-nn's `train` example (its Qwen3-style
//! transformer, `crates/nuvec-nn/examples/train/main.rs`, at its default batch of 3-digit
//! addition problems): the forward pass, the backward pass through `value_and_grad`, and
//! AdamW's update, evaluated with the new parameters and the optimizer's state. The figure
//! is the input tokens of one step over its time (tokens/s); each run is the next step of the
//! same training run, on one fixed batch.

use nuvec_core::{Array, SliceArg, random, slice};
use nuvec_nn::losses::{Reduction, cross_entropy};
use nuvec_nn::optim::{AdamW, Optimizer};
use nuvec_nn::transformer::{Transformer, TransformerConfig};
use nuvec_nn::{Module, value_and_grad};

use crate::case::{Case, Prepared, Skip, Target, Unit};
use crate::inputs::{array, output_f32, uniform};

/// Problems in the batch (the example's default `--batch`).
pub(crate) const BATCH: usize = 128;
/// Input tokens of a problem: `123+456=975` (the last answer token is only a target).
pub(crate) const INPUT: usize = 11;
/// Answer tokens, on which the loss is taken.
const ANSWER: usize = 4;
/// The vocabulary: ten digits, `+` and `=`.
const VOCAB: usize = 12;

/// The shape text of the case (the peers' scripts use the same).
pub(crate) const SHAPE: &str = "2 x 128 Qwen3-style, B128 L11, AdamW";

/// The example's model (`model_config` there).
pub(crate) fn config() -> TransformerConfig {
    TransformerConfig {
        vocab_size: VOCAB,
        dims: 128,
        n_layers: 2,
        n_heads: 4,
        n_kv_heads: 2,
        head_dim: 32,
        hidden_dims: 384,
        rope_base: 10_000.0,
        norm_eps: 1e-6,
        tie_embeddings: true,
        qk_norm: true,
    }
}

/// The CPU cases of this family.
pub fn cpu() -> Vec<Case> {
    let mut c = Case::new(
        "train_step",
        Target::Cpu,
        SHAPE,
        "f32",
        Unit::TokensPerS,
        30,
        prepare,
    );
    c.warmup = 3;
    vec![c]
}

fn nn(e: nuvec_nn::Error) -> Skip {
    Skip::Failed(e.to_string())
}

/// The mean cross entropy of the answer tokens, predicted from the last positions.
fn answer_loss(m: &Transformer, x: &Array, y: &Array) -> nuvec_nn::Result<Array> {
    let full = SliceArg::full();
    let h = m.hidden(x, None)?;
    let h = slice(
        &h,
        &[full, SliceArg::new(Some(-(ANSWER as isize)), None, 1), full],
    )?;
    cross_entropy(&m.logits(&h)?, y, Reduction::Mean)
}

/// The case, on the thread's default stream (the CPU's or the GPU's).
pub(crate) fn prepare() -> Result<Prepared, Skip> {
    random::seed(0);
    let mut model = Transformer::new(&config()).map_err(nn)?;
    let token = |v: f32| ((v + 1.0) * 0.5 * VOCAB as f32).min(VOCAB as f32 - 1.0) as u32;
    let x = array(
        uniform(BATCH * INPUT, 71).into_iter().map(token).collect(),
        &[BATCH, INPUT],
    )?;
    let y = array(
        uniform(BATCH * ANSWER, 72)
            .into_iter()
            .map(|v| token(v).min(9))
            .collect(),
        &[BATCH, ANSWER],
    )?;
    nuvec_core::eval(&model.parameters().into_values().collect::<Vec<_>>())?;
    let mut opt = AdamW::new(1e-3).betas(0.9, 0.98).bias_correction(true);
    Ok(Prepared {
        work: (BATCH * INPUT) as f64,
        build: Box::new(move || {
            let (loss, grads) = value_and_grad(&mut model, |m| answer_loss(m, &x, &y))?;
            opt.update(&mut model, &grads)?;
            let mut out = vec![loss];
            out.extend(model.parameters().into_values());
            out.extend(opt.state().into_values());
            Ok(out)
        }),
        check: Box::new(|out| {
            // A few steps in, on one batch of random tokens: the loss is finite and has not
            // grown past the uniform guess's (ln 12) by much.
            let loss = output_f32(out)?[0];
            let uniform = (VOCAB as f32).ln();
            if loss.is_finite() && loss > 0.0 && loss < 1.5 * uniform {
                Ok(())
            } else {
                Err(format!("the loss is {loss} (ln {VOCAB} = {uniform})"))
            }
        }),
    })
}
