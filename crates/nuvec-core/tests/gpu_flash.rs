//! The tiled (prefill) attention kernels against the CPU: `scaled_dot_product_attention` in
//! f16, bf16 and f32 on `Device::gpu(0)` over head sizes 64 to 256 (and differing value heads),
//! grouped query heads, no mask, the causal one, boolean and additive masks, sinks, query and
//! key lengths that are not multiples of a tile, and keys read as transposed views; each
//! against the float32 composition on the CPU, and each checked to have run the kernel (no
//! nested fallback). Each test skips itself, saying so, where no CUDA device answers.

mod common;

use common::Rng;
use common::gpu::{gpu_available, on, random, uniform, values};
use nuvec_core::*;

/// The largest difference allowed: a fraction of the reference's largest magnitude (so that
/// a kernel writing zeros fails however small the outputs are), with a floor.
fn within(dtype: DType) -> (f64, f64) {
    match dtype {
        DType::F32 => (2e-5, 2e-6),
        DType::F16 => (4e-3, 2e-4),
        _ => (2e-2, 1e-3),
    }
}

fn assert_close(name: &str, got: &Array, want: &Array, dtype: DType) {
    assert_eq!(got.shape(), want.shape(), "{name}: shape");
    assert_eq!(got.dtype(), dtype, "{name}: dtype");
    let (g, w) = (values(got), values(want));
    let top = w.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let (rel, floor) = within(dtype);
    let allowed = rel * top + floor;
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!(
            (a - b).abs() <= allowed,
            "{name}[{i}]: gpu {a} vs cpu {b} (allowed {allowed})"
        );
    }
}

/// The masks a case runs: none, causal (where every query row sees a key), a boolean mask
/// broadcast over batch and heads whose first row hides every key, and an additive one.
fn masks(
    rng: &mut Rng,
    b: usize,
    hq: usize,
    lq: usize,
    lk: usize,
) -> Vec<(&'static str, Option<Array>, bool)> {
    let keep: Vec<bool> = (0..lq * lk)
        .map(|i| i >= lk && rng.range(0.0, 1.0) < 0.7)
        .collect();
    let keep = Array::from_slice(&keep, &[1, 1, lq, lk]).unwrap();
    let add = random(rng, &[b, hq, lq, lk], -3.0, 1.0, DType::F32);
    let mut out = vec![
        ("none", None, false),
        ("boolean", Some(keep), false),
        ("additive", Some(add), false),
    ];
    if lq <= lk {
        out.push(("causal", None, true));
    }
    out
}

/// GPU and CPU attention of one case and mask, compared; `sinks` adds per-head sinks.
#[allow(clippy::too_many_arguments)]
fn check(
    name: &str,
    q: &Array,
    k: &Array,
    v: &Array,
    mask: Option<&Array>,
    causal: bool,
    sinks: Option<&Array>,
    dtype: DType,
) {
    let scale = 2.0 / (q.shape()[3] as f32).sqrt();
    check_scaled(name, [q, k, v], mask, causal, sinks, scale, dtype);
}

/// [`check`] at a given scale.
fn check_scaled(
    name: &str,
    [q, k, v]: [&Array; 3],
    mask: Option<&Array>,
    causal: bool,
    sinks: Option<&Array>,
    scale: f32,
    dtype: DType,
) {
    let run = |q: &Array, k: &Array, v: &Array, m: Option<Array>, s: Option<Array>| {
        let mask = match (&m, causal) {
            (Some(m), _) => fast::AttentionMask::Array(m),
            (None, true) => fast::AttentionMask::Causal,
            (None, false) => fast::AttentionMask::None,
        };
        fast::scaled_dot_product_attention(q, k, v, scale, mask, s.as_ref()).unwrap()
    };
    let typed = |a: &Array| {
        if a.dtype() == DType::Bool {
            a.clone()
        } else {
            a.astype(dtype).unwrap()
        }
    };
    let f32_ = |a: &Array| {
        if a.dtype() == DType::Bool {
            a.clone()
        } else {
            a.astype(DType::F32).unwrap()
        }
    };
    let before = fast::nested_fallbacks();
    let gpu = on(Device::gpu(0), || {
        let y = run(q, k, v, mask.map(typed), sinks.map(typed));
        y.eval().unwrap();
        y
    });
    assert_eq!(fast::nested_fallbacks(), before, "{name}: the kernel ran");
    let cpu = on(Device::cpu(), || {
        run(
            &f32_(q),
            &f32_(k),
            &f32_(v),
            mask.map(f32_),
            sinks.map(f32_),
        )
        .astype(dtype)
        .unwrap()
    });
    assert_close(name, &gpu, &cpu, dtype);
}

#[test]
fn flash_attention_matches_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(0xf1a5);
    // (B, Hq, Hkv, Lq, Lk, D, Dv)
    let cases: &[(usize, usize, usize, usize, usize, usize, usize)] = &[
        (1, 2, 2, 127, 127, 64, 64),
        (2, 4, 2, 33, 1000, 128, 128),
        (1, 8, 1, 200, 200, 80, 80),
        (1, 2, 2, 100, 300, 72, 72),
        (1, 3, 1, 65, 65, 96, 64),
        (1, 2, 1, 40, 77, 192, 128),
        (1, 2, 2, 64, 129, 256, 256),
        (1, 2, 2, 17, 7, 96, 96),
        (1, 4, 4, 1, 50, 128, 128),
        (2, 2, 1, 7, 1, 64, 64),
    ];
    for &(b, hq, hkv, lq, lk, d, dv) in cases {
        for dtype in [DType::BF16, DType::F16, DType::F32] {
            let q = uniform(&mut rng, &[b, hq, lq, d], dtype);
            let k = uniform(&mut rng, &[b, hkv, lk, d], dtype);
            let v = uniform(&mut rng, &[b, hkv, lk, dv], dtype);
            let sinks = uniform(&mut rng, &[hq], dtype);
            for (mname, mask, causal) in masks(&mut rng, b, hq, lq, lk) {
                for with_sinks in [false, true] {
                    let name = format!(
                        "{dtype} {:?} {mname} sinks {with_sinks}",
                        (b, hq, hkv, lq, lk, d, dv)
                    );
                    let s = with_sinks.then_some(&sinks);
                    check(&name, &q, &k, &v, mask.as_ref(), causal, s, dtype);
                }
            }
        }
    }
}

#[test]
fn flash_attention_reads_transposed_projections_in_place() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(0xf1a6);
    // Queries, keys and values as the [B, L, H, D] projections viewed as [B, H, L, D].
    let (b, hq, hkv, l, d) = (2, 8, 2, 300, 128);
    for dtype in [DType::BF16, DType::F16, DType::F32] {
        let view = |x: Array| transpose(&x, &[0, 2, 1, 3]).unwrap();
        let q = view(uniform(&mut rng, &[b, l, hq, d], dtype));
        let k = view(uniform(&mut rng, &[b, l, hkv, d], dtype));
        let v = view(uniform(&mut rng, &[b, l, hkv, d], dtype));
        for causal in [false, true] {
            let name = format!("{dtype} transposed causal {causal}");
            check(&name, &q, &k, &v, None, causal, None, dtype);
        }
    }
}

#[test]
fn flash_attention_over_long_sequences() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(0xf1a7);
    for &(lq, lk) in &[(1000, 1000), (4097, 4097), (127, 4097)] {
        let dtype = DType::BF16;
        let q = uniform(&mut rng, &[1, 2, lq, 64], dtype);
        let k = uniform(&mut rng, &[1, 1, lk, 64], dtype);
        let v = uniform(&mut rng, &[1, 1, lk, 64], dtype);
        for causal in [false, true] {
            let name = format!("{dtype} Lq {lq} Lk {lk} causal {causal}");
            check(&name, &q, &k, &v, None, causal, None, dtype);
        }
    }
}

#[test]
fn flash_attention_at_negative_and_zero_scales() {
    if !gpu_available() {
        return;
    }
    // A positive scale is folded into the exponentials (each row's maximum taken over the
    // unscaled scores); these are not, and must still weigh the keys by exp(scale · score).
    let mut rng = Rng::new(0xf1a8);
    let (b, hq, hkv, l) = (1, 4, 2, 300);
    for d in [64, 128] {
        for dtype in [DType::BF16, DType::F16] {
            let q = uniform(&mut rng, &[b, hq, l, d], dtype);
            let k = uniform(&mut rng, &[b, hkv, l, d], dtype);
            let v = uniform(&mut rng, &[b, hkv, l, d], dtype);
            for scale in [-2.0 / (d as f32).sqrt(), 0.0, 0.3] {
                for causal in [false, true] {
                    let name = format!("{dtype} d {d} scale {scale} causal {causal}");
                    check_scaled(&name, [&q, &k, &v], None, causal, None, scale, dtype);
                }
            }
        }
    }
}
