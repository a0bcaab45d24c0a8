//! Trains a small decoder-only transformer (Qwen3-style blocks from nuvec-nn: RMS norms,
//! rotary embeddings, grouped-query attention with q/k norms, SwiGLU, tied embeddings) to add
//! 3-digit numbers written as text, then checks it on problems it never saw.
//!
//! ```text
//! cargo run --release --example train [-- --device cpu|gpu --steps N --batch B --out DIR --seed S]
//! ```
//!
//! The data are made here (see `data.rs`): `123+456=9750`, the answer's digits reversed
//! (least significant first), the loss only on the answer. A progress bar shows the loss and
//! tokens/s; at the end the example writes the loss curve (`loss.png`), a checkpoint of the
//! weights (`model.safetensors`, with the model's configuration in its metadata) and of the
//! optimizer (`optimizer.safetensors`) to the output folder, reloads the weights into a fresh
//! model and reports its exact-match accuracy on the held-out problems, decoding greedily
//! with the key/value cache. It also prints the resident memory after step 100 and after the
//! last step, which stays flat.

mod data;
mod plot;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use nuvec_core::{
    Array, Device, SliceArg, Stream, argmax, concatenate, eval, io, random, set_default_stream,
    slice,
};
use nuvec_nn::losses::{Reduction, cross_entropy};
use nuvec_nn::optim::{AdamW, Optimizer, cosine_decay, join_schedules, linear_schedule};
use nuvec_nn::transformer::{Transformer, TransformerConfig};
use nuvec_nn::{Module, value_and_grad};

use crate::data::{Addition, Rng, VOCAB};

/// Where the work runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Target {
    /// nuvec's CPU backend.
    Cpu,
    /// `Device::gpu(0)` through nuvec's CUDA backend.
    Gpu,
}

/// Trains a small Qwen3-style transformer on 3-digit addition and reports its held-out
/// exact-match accuracy.
#[derive(Debug, Parser)]
#[command(name = "train")]
struct Args {
    /// Where everything runs (the GPU path is the CPU one on `Device::gpu(0)`).
    #[arg(long, value_enum, default_value = "cpu")]
    device: Target,
    /// Optimizer steps.
    #[arg(long, default_value_t = 1000)]
    steps: usize,
    /// Problems per step.
    #[arg(long, default_value_t = 128)]
    batch: usize,
    /// The output folder (default: `train-out` in the target folder).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Seeds the model's initialisation and the data.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The peak learning rate (after a linear warm-up, then a cosine decay to a tenth).
    #[arg(long, default_value_t = 3e-3)]
    lr: f64,
    /// Digits of each operand.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=9))]
    digits: u32,
    /// Problems kept out of training and used for the accuracy.
    #[arg(long, default_value_t = 1000)]
    held_out: usize,
}

/// The model trained here, for `digits`-digit addition (nuvec-bench's `train_step` case
/// times a step of this configuration at the default batch).
fn model_config() -> TransformerConfig {
    TransformerConfig {
        vocab_size: VOCAB.len(),
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

/// Steps of linear warm-up before the cosine decay.
fn warmup_steps(steps: usize) -> usize {
    (steps / 20).clamp(1, 100)
}

type Error = Box<dyn std::error::Error>;

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("train: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), Error> {
    let started = Instant::now();
    if args.device == Target::Gpu {
        set_default_stream(Stream::default_for(Device::gpu(0)));
    }
    let out = args.out.clone().unwrap_or_else(default_out);
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;

    let mut rng = Rng::new(args.seed);
    let task = Addition::new(args.digits as usize, args.held_out, &mut rng);
    let config = model_config();
    random::seed(args.seed);
    let mut model = Transformer::new(&config)?;
    println!(
        "{}-digit addition ({}+{}={} reversed); {} held-out problems; model: {} layers of {}, \
         {} heads over {} kv heads, {} parameters; {} steps of {} problems on {}",
        task.digits,
        "1".repeat(task.digits),
        "2".repeat(task.digits),
        "3".repeat(task.digits),
        task.held_out.len(),
        config.n_layers,
        config.dims,
        config.n_heads,
        config.n_kv_heads,
        model.num_parameters(),
        args.steps,
        args.batch,
        match args.device {
            Target::Cpu => "the CPU",
            Target::Gpu => "gpu(0)",
        }
    );

    let warmup = warmup_steps(args.steps);
    let schedule = join_schedules(
        vec![
            linear_schedule(0.0, args.lr, warmup),
            cosine_decay(args.lr, args.steps.saturating_sub(warmup), args.lr * 0.1),
        ],
        &[warmup],
    )?;
    let mut opt = AdamW::new(schedule)
        .betas(0.9, 0.98)
        .bias_correction(true)
        .weight_decay(0.01);

    let losses = train(&mut model, &mut opt, &task, &args, &mut rng)?;
    let train_s = started.elapsed().as_secs_f64();

    let plot_path = out.join("loss.png");
    plot::loss_curve(
        &plot_path,
        &losses,
        &format!(
            "nuvec: {}-digit addition, {} steps of {}",
            task.digits, args.steps, args.batch
        ),
    )?;
    let weights = out.join("model.safetensors");
    io::save_safetensors(&weights, &model.weights(), Some(&metadata(&config)))?;
    opt.save_state(out.join("optimizer.safetensors"))?;
    drop(model);

    // A fresh model, initialised differently, made from the checkpoint alone.
    let (loaded, meta) = io::load_safetensors_with_metadata(&weights)?;
    random::seed(args.seed.wrapping_add(1));
    let mut fresh = Transformer::new(&config_from(&meta)?)?;
    fresh.load_weights(&loaded, true)?;
    let (correct, examples) = accuracy(&fresh, &task)?;
    let n = task.held_out.len();
    for line in examples {
        println!("  {line}");
    }
    println!(
        "held-out exact match: {correct}/{n} = {:.2}% (reloaded from {}, greedy decoding with \
         the KV cache)",
        100.0 * correct as f64 / n.max(1) as f64,
        weights.display()
    );
    println!(
        "wrote {}, {} and {}; training took {train_s:.1} s, {:.1} s in all",
        plot_path.display(),
        weights.display(),
        out.join("optimizer.safetensors").display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `train-out` beside the example's binary's profile folder (`target/train-out`), or in the
/// working folder when that cannot be told.
fn default_out() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.parent()?.join("train-out")))
        .unwrap_or_else(|| PathBuf::from("train-out"))
}

/// The mean cross entropy of the answer tokens: the model reads `inputs: [B, L]` and predicts
/// `targets: [B, answer_len]` from its last `answer_len` positions.
fn answer_loss(model: &Transformer, inputs: &Array, targets: &Array) -> nuvec_nn::Result<Array> {
    let answer = targets.shape()[1] as isize;
    let h = model.hidden(inputs, None)?;
    let full = SliceArg::full();
    let h = slice(&h, &[full, SliceArg::new(Some(-answer), None, 1), full])?;
    cross_entropy(&model.logits(&h)?, targets, Reduction::Mean)
}

/// One optimizer step on a batch; returns the loss, evaluated with the new parameters and the
/// optimizer's state.
fn step(
    model: &mut Transformer,
    opt: &mut AdamW,
    inputs: &Array,
    targets: &Array,
) -> nuvec_nn::Result<f32> {
    let (loss, grads) = value_and_grad(model, |m| answer_loss(m, inputs, targets))?;
    opt.update(model, &grads)?;
    let mut live = vec![loss.clone()];
    live.extend(model.parameters().into_values());
    live.extend(opt.state().into_values());
    eval(&live)?;
    Ok(loss.item::<f32>()?)
}

/// Trains for `args.steps` steps with a progress bar; returns each step's loss.
fn train(
    model: &mut Transformer,
    opt: &mut AdamW,
    task: &Addition,
    args: &Args,
    rng: &mut Rng,
) -> Result<Vec<f32>, Error> {
    let tokens_per_step = args.batch * (task.seq_len() - 1);
    let bar = ProgressBar::new(args.steps as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30.cyan/blue}] {pos}/{len} {msg} (eta {eta})",
        )?
        .progress_chars("=> "),
    );
    let mut losses = Vec::with_capacity(args.steps);
    // The resident memory (and the GPU memory arrays hold, with `--device gpu`) after the
    // first 100 steps and after the last: flat when nothing accumulates from step to step
    // (graphs, optimizer state, caches).
    let mut resident = Vec::new();
    let mut device = Vec::new();
    let mut window = (Instant::now(), 0usize);
    let mut rate = 0.0;
    for i in 0..args.steps {
        let (x, y) = task.batch(args.batch, rng);
        let x = Array::from_vec(x, &[args.batch, task.seq_len() - 1])?;
        let y = Array::from_vec(y, &[args.batch, task.answer_len()])?;
        let loss = step(model, opt, &x, &y)?;
        if !loss.is_finite() {
            bar.abandon();
            return Err(format!("the loss is {loss} at step {i}").into());
        }
        losses.push(loss);
        window.1 += 1;
        let elapsed = window.0.elapsed().as_secs_f64();
        if elapsed >= 1.0 || i + 1 == args.steps {
            rate = (window.1 * tokens_per_step) as f64 / elapsed;
            window = (Instant::now(), 0);
        }
        let recent = &losses[losses.len().saturating_sub(20)..];
        let mean = recent.iter().sum::<f32>() / recent.len() as f32;
        bar.set_message(format!(
            "loss {mean:.4} | {:.1}k tok/s | lr {:.1e}",
            rate / 1e3,
            opt.learning_rate()
        ));
        bar.inc(1);
        if i + 1 == 100.min(args.steps) || i + 1 == args.steps {
            resident.extend(resident_mib().map(|mib| (i + 1, mib)));
            device.push((i + 1, nuvec_core::memory_stats().active as f64 / MIB));
        }
        // Without a terminal the bar is hidden: a line every tenth of the run instead.
        if bar.is_hidden() && ((i + 1) % (args.steps / 10).max(1) == 0 || i + 1 == args.steps) {
            println!(
                "step {:>5}/{}: loss {mean:.4} | {:.1}k tok/s | {:.0} s",
                i + 1,
                args.steps,
                rate / 1e3,
                bar.elapsed().as_secs_f64()
            );
        }
    }
    bar.finish();
    if let [(s0, m0), .., (s1, m1)] = resident[..] {
        println!("resident memory: {m0:.0} MiB after step {s0}, {m1:.0} MiB after step {s1}");
    }
    if let (Target::Gpu, [(s0, m0), .., (s1, m1)]) = (args.device, &device[..]) {
        println!(
            "GPU memory held by arrays: {m0:.1} MiB after step {s0}, {m1:.1} MiB after step {s1}"
        );
    }
    Ok(losses)
}

/// Bytes in a MiB.
const MIB: f64 = (1 << 20) as f64;

/// The process's resident memory in MiB (`VmRSS` of Linux's `/proc/self/status`; `None`
/// elsewhere).
fn resident_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024.0 / MIB)
}

/// The held-out problems answered by greedy decoding with the key/value cache: the number
/// answered exactly, and a few examples as text.
fn accuracy(model: &Transformer, task: &Addition) -> Result<(usize, Vec<String>), Error> {
    const CHUNK: usize = 500;
    let (p, a) = (task.prompt_len(), task.answer_len());
    let mut correct = 0;
    let mut examples = Vec::new();
    for problems in task.held_out.chunks(CHUNK) {
        let n = problems.len();
        let mut prompts = Vec::with_capacity(n * p);
        for &(x, y) in problems {
            task.push_prompt(&mut prompts, x, y);
        }
        let mut caches = model.make_caches();
        let mut next = Array::from_vec(prompts.clone(), &[n, p])?;
        let mut answer = Vec::with_capacity(a);
        for _ in 0..a {
            let h = model.hidden(&next, Some(&mut caches))?;
            let full = SliceArg::full();
            let last = slice(&h, &[full, SliceArg::new(Some(-1), None, 1), full])?;
            next = argmax(&model.logits(&last)?, -1, false)?;
            next.eval()?;
            answer.push(next.clone());
        }
        let answer = concatenate(&answer, 1)?.to_vec::<u32>()?;
        for (i, &(x, y)) in problems.iter().enumerate() {
            let got = &answer[i * a..(i + 1) * a];
            let want = task.answer(x, y);
            let ok = got == want.as_slice();
            correct += usize::from(ok);
            if examples.len() < 4 || (!ok && examples.len() < 8) {
                examples.push(format!(
                    "{}{}  (the sum {}: {})",
                    Addition::show(&prompts[i * p..(i + 1) * p]),
                    Addition::show(got),
                    Addition::read_reversed(got),
                    if ok { "right" } else { "wrong" }
                ));
            }
        }
    }
    Ok((correct, examples))
}

/// The configuration as safetensors metadata (strings).
fn metadata(c: &TransformerConfig) -> HashMap<String, String> {
    [
        ("format", "mlx".to_string()),
        ("model", "nuvec-nn transformer (Qwen3-style)".to_string()),
        ("vocab", VOCAB.to_string()),
        ("vocab_size", c.vocab_size.to_string()),
        ("dims", c.dims.to_string()),
        ("n_layers", c.n_layers.to_string()),
        ("n_heads", c.n_heads.to_string()),
        ("n_kv_heads", c.n_kv_heads.to_string()),
        ("head_dim", c.head_dim.to_string()),
        ("hidden_dims", c.hidden_dims.to_string()),
        ("rope_base", c.rope_base.to_string()),
        ("norm_eps", c.norm_eps.to_string()),
        ("tie_embeddings", c.tie_embeddings.to_string()),
        ("qk_norm", c.qk_norm.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The configuration [`metadata`] wrote.
fn config_from(meta: &HashMap<String, String>) -> Result<TransformerConfig, Error> {
    fn get<T: std::str::FromStr>(meta: &HashMap<String, String>, key: &str) -> Result<T, Error> {
        meta.get(key)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("the checkpoint's metadata has no valid {key}").into())
    }
    Ok(TransformerConfig {
        vocab_size: get(meta, "vocab_size")?,
        dims: get(meta, "dims")?,
        n_layers: get(meta, "n_layers")?,
        n_heads: get(meta, "n_heads")?,
        n_kv_heads: get(meta, "n_kv_heads")?,
        head_dim: get(meta, "head_dim")?,
        hidden_dims: get(meta, "hidden_dims")?,
        rope_base: get(meta, "rope_base")?,
        norm_eps: get(meta, "norm_eps")?,
        tie_embeddings: get(meta, "tie_embeddings")?,
        qk_norm: get(meta, "qk_norm")?,
    })
}
