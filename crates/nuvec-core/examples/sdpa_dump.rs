//! Causal prefill attention at L = 16,384 (B1, H32, D128, bf16: the `sdpa_causal_16k` case)
//! on the GPU, written with its inputs to a safetensors file, so that
//! `bench/peers/sdpa_check.py` can hold nuvec's output against PyTorch's on the same inputs
//! and against a float64 reference on sampled rows.
//!
//! Run on a machine with a GPU: `cargo run --release --example sdpa_dump -- OUT.safetensors [L]
//! [gpu|cpu]` (the CPU only to try the pair out on a small L).

use std::collections::HashMap;

use nuvec_core::*;

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or_else(|| Error::Unsupported {
        op: "sdpa_dump",
        what: "no output path (usage: sdpa_dump OUT.safetensors [L] [gpu|cpu])".into(),
    })?;
    let l: usize = match args.next() {
        Some(s) => s.parse().map_err(|_| Error::Unsupported {
            op: "sdpa_dump",
            what: format!("L must be a positive integer, got {s:?}"),
        })?,
        None => 16_384,
    };
    let device = match args.next().as_deref() {
        Some("cpu") => Device::cpu(),
        _ => Device::gpu(0),
    };
    let (b, h, d) = (1, 32, 128);
    set_default_stream(Stream::default_for(device));
    let input = |seed: u64| {
        random::uniform(
            -1.0,
            1.0,
            &[b, h, l, d],
            DType::BF16,
            Some(&random::key(seed)),
        )
    };
    let (q, k, v) = (input(1)?, input(2)?, input(3)?);
    let scale = 1.0 / (d as f32).sqrt();
    let out =
        fast::scaled_dot_product_attention(&q, &k, &v, scale, fast::AttentionMask::Causal, None)?;
    let arrays: HashMap<String, Array> = [("q", q), ("k", k), ("v", v), ("out", out)]
        .into_iter()
        .map(|(n, a)| (n.to_string(), a))
        .collect();
    io::save_safetensors(&path, &arrays, None)?;
    println!("sdpa_dump: B{b} H{h} L{l} D{d} causal, bf16, scale {scale}: {path}");
    Ok(())
}
