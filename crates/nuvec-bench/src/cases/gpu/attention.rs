//! Attention on the GPU: `sdpa_*` (prefill, bf16, causal or not), `decode_*` (one query
//! token against a cache, grouped-query), `paged_decode_*` (the same from a paged cache of
//! blocks of 16 in shuffled order) and the gated delta rule (`gated_delta_decode`, one
//! step for 64 sequences; `gated_delta_prefill` and `gated_delta_prefill_16k`, 4,096 and
//! 16,384 steps of one).

use nuvec_core::DType;
use nuvec_core::fast::{self, AttentionMask};

use super::{Affine, BF16, BF16_REL, F32, bf, bf16_input, near, read, small};
use crate::case::{Prepared, Skip};
use crate::inputs::uniform_at;

/// Query heads of the decode cases.
const HQ: usize = 32;
/// Key/value heads of the decode cases.
const HKV: usize = 8;
/// Head size of the decode cases.
const HD: usize = 128;

/// One attention row in f64: `softmax(scale · q·kⱼ) · vⱼ` over the keys `keys`, with `key(j,
/// e)` and `value(j, e)` the cache's elements; returns the `d` outputs.
fn attend(
    q: &[f64],
    keys: usize,
    scale: f64,
    key: impl Fn(usize, usize) -> f64,
    value: impl Fn(usize, usize) -> f64,
) -> Vec<f64> {
    let d = q.len();
    let scores: Vec<f64> = (0..keys)
        .map(|j| scale * (0..d).map(|e| q[e] * key(j, e)).sum::<f64>())
        .collect();
    let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let p: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
    let z: f64 = p.iter().sum();
    (0..d)
        .map(|e| (0..keys).map(|j| p[j] * value(j, e)).sum::<f64>() / z)
        .collect()
}

/// Checks the `d` outputs of one attention row starting at flat index `at`.
fn check_row(got: &[f32], at: usize, want: &[f64]) -> Result<(), String> {
    for (e, w) in want.iter().enumerate() {
        // Averages of many values: bf16 rounding of the probabilities and of the output.
        near("out", at + e, got[at + e], *w, BF16_REL, 1e-3)?;
    }
    Ok(())
}

/// Useful FLOPs of attention: q kᵀ and p v, half of them for a causal mask.
fn sdpa_flops(b: usize, h: usize, l: usize, d: usize, causal: bool) -> f64 {
    let full = 4.0 * (b * h * l * l * d) as f64;
    if causal { full / 2.0 } else { full }
}

/// Self-attention over `[b, h, l, d]` bf16 inputs.
fn sdpa(b: usize, h: usize, l: usize, d: usize, causal: bool) -> Result<Prepared, Skip> {
    let (sq, sk, sv) = (301, 302, 303);
    let shape = [b, h, l, d];
    let (q, k, v) = (
        bf16_input(&shape, sq)?,
        bf16_input(&shape, sk)?,
        bf16_input(&shape, sv)?,
    );
    let scale = 1.0 / (d as f32).sqrt();
    Ok(Prepared {
        work: sdpa_flops(b, h, l, d, causal),
        build: Box::new(move || {
            let mask = if causal {
                AttentionMask::Causal
            } else {
                AttentionMask::None
            };
            Ok(vec![fast::scaled_dot_product_attention(
                &q, &k, &v, scale, mask, None,
            )?])
        }),
        check: Box::new(move |out| {
            let got = read(out, 0, &shape, DType::BF16)?;
            let rows = [
                (0, 0, 0),
                (0, 0, l - 1),
                (b - 1, h - 1, l / 2 + 3),
                (b / 2, h / 3, 17),
            ];
            for (bi, hi, i) in rows {
                let head = (bi * h + hi) * l * d;
                let qr: Vec<f64> = (0..d).map(|e| bf(sq, head + i * d + e)).collect();
                let keys = if causal { i + 1 } else { l };
                let want = attend(
                    &qr,
                    keys,
                    f64::from(scale),
                    |j, e| bf(sk, head + j * d + e),
                    |j, e| bf(sv, head + j * d + e),
                );
                check_row(&got, head + i * d, &want)?;
            }
            Ok(())
        }),
    })
}

pub(super) fn sdpa_causal_4k() -> Result<Prepared, Skip> {
    sdpa(4, 32, 4096, 128, true)
}

pub(super) fn sdpa_full_4k() -> Result<Prepared, Skip> {
    sdpa(4, 32, 4096, 128, false)
}

pub(super) fn sdpa_causal_8k_d64() -> Result<Prepared, Skip> {
    sdpa(2, 16, 8192, 64, true)
}

pub(super) fn sdpa_causal_16k() -> Result<Prepared, Skip> {
    sdpa(1, 32, 16384, 128, true)
}

/// Bytes of the keys and values of `b` sequences of `l` positions.
fn kv_bytes(b: usize, l: usize) -> f64 {
    (2 * b * HKV * l * HD * BF16) as f64
}

/// The (sequence, query head) pairs a decode check recomputes.
fn decode_heads(b: usize) -> [(usize, usize); 4] {
    [(0, 0), (0, 13), (b - 1, HQ - 1), (b / 2, 6)]
}

/// One query token per sequence against contiguous `[b, 8, l, 128]` caches.
fn decode(b: usize, l: usize) -> Result<Prepared, Skip> {
    decode_heads_of((b, HQ, HKV, l, HD), (311, 312, 313), decode_heads(b))
}

/// Decoding of `(B, Hq, Hkv, L, D)` (q `[B, Hq, 1, D]`, k/v `[B, Hkv, L, D]`, inputs of seeds
/// `seeds`), checked at the `(sequence, query head)` rows `check`; GB/s of k and v.
fn decode_heads_of(
    (b, hq, hkv, l, d): (usize, usize, usize, usize, usize),
    (sq, sk, sv): (u64, u64, u64),
    check: [(usize, usize); 4],
) -> Result<Prepared, Skip> {
    let q = bf16_input(&[b, hq, 1, d], sq)?;
    let k = bf16_input(&[b, hkv, l, d], sk)?;
    let v = bf16_input(&[b, hkv, l, d], sv)?;
    let scale = 1.0 / (d as f32).sqrt();
    Ok(Prepared {
        work: (2 * b * hkv * l * d * BF16) as f64,
        build: Box::new(move || {
            Ok(vec![fast::scaled_dot_product_attention(
                &q,
                &k,
                &v,
                scale,
                AttentionMask::None,
                None,
            )?])
        }),
        check: Box::new(move |out| {
            let got = read(out, 0, &[b, hq, 1, d], DType::BF16)?;
            for (bi, h) in check {
                let at = (bi * hq + h) * d;
                let qr: Vec<f64> = (0..d).map(|e| bf(sq, at + e)).collect();
                let head = (bi * hkv + h / (hq / hkv)) * l * d;
                let want = attend(
                    &qr,
                    l,
                    f64::from(scale),
                    |j, e| bf(sk, head + j * d + e),
                    |j, e| bf(sv, head + j * d + e),
                );
                check_row(&got, at, &want)?;
            }
            Ok(())
        }),
    })
}

/// Decoding at head size 512 (MLX's shape for its kernel: one query row, 8 query heads a key
/// head): q `[8, 16, 1, 512]`, k/v `[8, 2, 4096, 512]`; GB/s of k and v.
pub(super) fn decode_d512_b8_4k() -> Result<Prepared, Skip> {
    decode_heads_of(
        (8, 16, 2, 4096, 512),
        (315, 316, 317),
        [(0, 0), (0, 9), (7, 15), (4, 6)],
    )
}

pub(super) fn decode_b1_8k() -> Result<Prepared, Skip> {
    decode(1, 8192)
}

pub(super) fn decode_b8_8k() -> Result<Prepared, Skip> {
    decode(8, 8192)
}

pub(super) fn decode_b64_4k() -> Result<Prepared, Skip> {
    decode(64, 4096)
}

pub(super) fn decode_b1_128k() -> Result<Prepared, Skip> {
    decode(1, 131072)
}

/// Positions per block of the paged cache.
const BLOCK: usize = 16;

/// The decode cases from paged caches (`[blocks, 8, 16, 128]`), each sequence's blocks in
/// a shuffled order.
fn paged(b: usize, l: usize) -> Result<Prepared, Skip> {
    let (sq, sk, sv) = (321, 322, 323);
    let per_seq = l / BLOCK;
    let blocks = b * per_seq;
    // A fixed permutation of the blocks: sorted by a random key.
    let mut order: Vec<usize> = (0..blocks).collect();
    order.sort_by(|&x, &y| uniform_at(324, x).total_cmp(&uniform_at(324, y)));
    let table = small(
        order.iter().map(|&n| n as i32).collect::<Vec<i32>>(),
        &[b, per_seq],
    )?;
    let lengths = small(vec![l as i32; b], &[b])?;
    let q = bf16_input(&[b, HQ, 1, HD], sq)?;
    let kc = bf16_input(&[blocks, HKV, BLOCK, HD], sk)?;
    let vc = bf16_input(&[blocks, HKV, BLOCK, HD], sv)?;
    let scale = 1.0 / (HD as f32).sqrt();
    Ok(Prepared {
        work: kv_bytes(b, l),
        build: Box::new(move || {
            Ok(vec![fast::paged_attention(
                &q, &kc, &vc, &table, &lengths, scale,
            )?])
        }),
        check: Box::new(move |out| {
            let got = read(out, 0, &[b, HQ, 1, HD], DType::BF16)?;
            for (bi, h) in decode_heads(b) {
                let at = (bi * HQ + h) * HD;
                let qr: Vec<f64> = (0..HD).map(|e| bf(sq, at + e)).collect();
                let g = h / (HQ / HKV);
                // Position j of sequence bi: row j % 16 of block table[bi, j / 16].
                let place = |j: usize, e: usize| {
                    let block = order[bi * per_seq + j / BLOCK];
                    ((block * HKV + g) * BLOCK + j % BLOCK) * HD + e
                };
                let want = attend(
                    &qr,
                    l,
                    f64::from(scale),
                    |j, e| bf(sk, place(j, e)),
                    |j, e| bf(sv, place(j, e)),
                );
                check_row(&got, at, &want)?;
            }
            Ok(())
        }),
    })
}

pub(super) fn paged_decode_b1_8k() -> Result<Prepared, Skip> {
    paged(1, 8192)
}

pub(super) fn paged_decode_b8_8k() -> Result<Prepared, Skip> {
    paged(8, 8192)
}

pub(super) fn paged_decode_b64_4k() -> Result<Prepared, Skip> {
    paged(64, 4096)
}

/// Key heads of the gated delta cases.
const GK: usize = 16;
/// Value heads.
const GV: usize = 32;
/// Key and value head size.
const GD: usize = 128;

/// The inputs of the gated delta cases: `k` scaled so that `|k|² ≈ 1` (as the layer's
/// normalised keys; with `β < 1` the recurrence then stays bounded), decays `g` in
/// (0.9, 1), `β` in (0, 1), an f32 state.
struct Delta {
    q: Affine,
    k: Affine,
    v: Affine,
    g: Affine,
    beta: Affine,
    state: Affine,
}

const DELTA: Delta = Delta {
    q: Affine::bf16(331, 0.1, 0.0),
    k: Affine::bf16(332, 0.153, 0.0),
    v: Affine::bf16(333, 1.0, 0.0),
    g: Affine::bf16(334, 0.05, 0.95),
    beta: Affine::bf16(335, 0.5, 0.5),
    state: Affine::f32(336, 0.1, 0.0),
};

/// The recurrence of value head `h` of sequence `b` over `t` steps in f64: `y` for every
/// step (`[t][GD]`) and the final state (`[GD · GD]`, `[Dv, Dk]`).
fn delta_reference(b: usize, h: usize, t: usize) -> (Vec<Vec<f64>>, Vec<f64>) {
    let d = &DELTA;
    let kh = h / (GV / GK);
    let mut s: Vec<f64> = (0..GD * GD)
        .map(|i| d.state.at((b * GV + h) * GD * GD + i))
        .collect();
    let mut ys = Vec::with_capacity(t);
    for step in 0..t {
        let bt = b * t + step;
        let q: Vec<f64> = (0..GD).map(|e| d.q.at((bt * GK + kh) * GD + e)).collect();
        let k: Vec<f64> = (0..GD).map(|e| d.k.at((bt * GK + kh) * GD + e)).collect();
        let v: Vec<f64> = (0..GD).map(|e| d.v.at((bt * GV + h) * GD + e)).collect();
        let (g, beta) = (d.g.at(bt * GV + h), d.beta.at(bt * GV + h));
        let mut y = vec![0.0; GD];
        for (r, s_row) in s.chunks_mut(GD).enumerate() {
            s_row.iter_mut().for_each(|x| *x *= g);
            let sk: f64 = s_row.iter().zip(&k).map(|(a, b)| a * b).sum();
            let delta = beta * (v[r] - sk);
            s_row
                .iter_mut()
                .zip(&k)
                .for_each(|(x, ke)| *x += delta * ke);
            y[r] = s_row.iter().zip(&q).map(|(a, b)| a * b).sum();
        }
        ys.push(y);
    }
    (ys, s)
}

/// The gated delta rule over `b` sequences of `t` steps; the work is the state's bytes
/// (`bytes`) or the tokens.
fn gated_delta(b: usize, t: usize, bytes: bool) -> Result<Prepared, Skip> {
    let d = &DELTA;
    let q = d.q.input(&[b, t, GK, GD])?;
    let k = d.k.input(&[b, t, GK, GD])?;
    let v = d.v.input(&[b, t, GV, GD])?;
    let g = d.g.input(&[b, t, GV])?;
    let beta = d.beta.input(&[b, t, GV])?;
    let state = d.state.input(&[b, GV, GD, GD])?;
    let work = if bytes {
        (2 * b * GV * GD * GD * F32) as f64
    } else {
        (b * t) as f64
    };
    let steps = [0, t / 2, t - 1];
    Ok(Prepared {
        work,
        build: Box::new(move || {
            let (y, s) = fast::gated_delta(&q, &k, &v, &g, &beta, &state)?;
            Ok(vec![y, s])
        }),
        check: Box::new(move |out| {
            let y = read(out, 0, &[b, t, GV, GD], DType::BF16)?;
            let s = read(out, 1, &[b, GV, GD, GD], DType::F32)?;
            for (bi, h) in [(0, 5), (b - 1, GV - 2)] {
                let (ys, state) = delta_reference(bi, h, t);
                for &step in &steps {
                    for e in [0, 1, 64, GD - 1] {
                        let i = ((bi * t + step) * GV + h) * GD + e;
                        near("y", i, y[i], ys[step][e], BF16_REL, 1e-2)?;
                    }
                }
                for j in (0..GD * GD).step_by(257) {
                    let i = (bi * GV + h) * GD * GD + j;
                    near("state", i, s[i], state[j], 1e-3, 1e-3)?;
                }
            }
            Ok(())
        }),
    })
}

pub(super) fn gated_delta_decode() -> Result<Prepared, Skip> {
    gated_delta(64, 1, true)
}

pub(super) fn gated_delta_prefill() -> Result<Prepared, Skip> {
    gated_delta(1, 4096, false)
}

pub(super) fn gated_delta_prefill_16k() -> Result<Prepared, Skip> {
    gated_delta(1, 16384, false)
}
