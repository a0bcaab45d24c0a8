//! Affine quantization: quantize/dequantize round trips and packing against references
//! written here, quantized products against float64 math and against `matmul` of the
//! dequantized weights, MLX's own outputs (mlx.rs), and bad input (errors.rs).

#[path = "../common/mod.rs"]
mod common;
mod errors;
mod mlx;

use common::Rng;
use nuvec_core::*;

const BITS: [u32; 6] = [2, 3, 4, 5, 6, 8];
const GROUPS: [usize; 3] = [32, 64, 128];

/// The array's elements as f64, in row-major order.
pub fn values(a: &Array) -> Vec<f64> {
    a.astype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

/// An array of `dtype` from f64 values.
pub fn array(v: &[f64], shape: &[usize], dtype: DType) -> Array {
    Array::from_slice(v, shape).unwrap().astype(dtype).unwrap()
}

pub fn random_vec(rng: &mut Rng, n: usize) -> Vec<f64> {
    (0..n).map(|_| rng.f64()).collect()
}

/// The integers of one packed row, bit by bit: value `i` is bits `i · bits ..` of the row's
/// stream of bits, lowest first, word after word.
pub fn unpack_ref(words: &[u32], bits: usize) -> Vec<u32> {
    let n = words.len() * 32 / bits;
    (0..n)
        .map(|i| {
            (0..bits).fold(0u32, |v, t| {
                let bit = i * bits + t;
                v | (((words[bit / 32] >> (bit % 32)) & 1) << t)
            })
        })
        .collect()
}

/// `ints` packed into words, bit by bit (the inverse of `unpack_ref`).
pub fn pack_ref(ints: &[u32], bits: usize) -> Vec<u32> {
    let mut words = vec![0u32; ints.len() * bits / 32];
    for (i, &q) in ints.iter().enumerate() {
        for t in 0..bits {
            let bit = i * bits + t;
            words[bit / 32] |= ((q >> t) & 1) << (bit % 32);
        }
    }
    words
}

/// The quantized integers of `wq` (any leading axes), row by row.
pub fn ints_of(wq: &Array, bits: u32) -> Vec<u32> {
    let words = wq.to_vec::<u32>().unwrap();
    let per_row = wq.shape()[wq.ndim() - 1];
    if per_row == 0 {
        return Vec::new();
    }
    words
        .chunks(per_row)
        .flat_map(|row| unpack_ref(row, bits as usize))
        .collect()
}

/// The matrix `(wq, scales, biases)` stand for, in f64 (row-major, rows of `wq`'s shape).
pub fn dequantized_ref(
    wq: &Array,
    scales: &Array,
    biases: &Array,
    group_size: usize,
    bits: u32,
) -> Vec<f64> {
    let (s, b) = (values(scales), values(biases));
    ints_of(wq, bits)
        .iter()
        .enumerate()
        .map(|(i, &q)| s[i / group_size] * f64::from(q) + b[i / group_size])
        .collect()
}

fn assert_close(name: &str, got: &[f64], want: &[f64], rel: f64, abs: f64) {
    assert_eq!(got.len(), want.len(), "{name}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= rel * w.abs() + abs,
            "{name}[{i}]: {g} vs {w} (rel {rel}, abs {abs})"
        );
    }
}

/// Rounding of a value of `dtype` relative to its magnitude.
fn eps(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 1.0 / 1024.0,
        DType::BF16 => 1.0 / 128.0,
        DType::F32 => 1.2e-7,
        _ => 2.3e-16,
    }
}

#[test]
fn round_trip_is_within_a_scale_for_every_width_and_group() {
    let mut rng = Rng::new(1);
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        for &bits in &BITS {
            for &gs in &GROUPS {
                let (rows, cols) = (5, 2 * gs);
                let v = random_vec(&mut rng, rows * cols);
                let w = array(&v, &[rows, cols], dtype);
                let wv = values(&w);
                let (wq, scales, biases) = quantize(&w, gs, bits).unwrap();
                let name = format!("{dtype} bits={bits} gs={gs}");
                assert_eq!(wq.shape(), [rows, cols * bits as usize / 32], "{name}");
                assert_eq!(wq.dtype(), DType::U32, "{name}");
                assert_eq!(scales.shape(), [rows, 2], "{name}");
                assert_eq!((scales.dtype(), biases.dtype()), (dtype, dtype), "{name}");
                let back = values(&dequantize(&wq, &scales, &biases, gs, bits).unwrap());
                let ints = ints_of(&wq, bits);
                let (s, b) = (values(&scales), values(&biases));
                let top = (1u32 << bits) - 1;
                for (i, (&x, &y)) in wv.iter().zip(&back).enumerate() {
                    let step = s[i / gs].abs();
                    // The dequantized value is rounded to `dtype` (twice, as in MLX).
                    let slack = 3.0 * eps(dtype) * (x.abs() + step + b[i / gs].abs()) + 1e-12;
                    // Values are rounded to the nearest step; only the clipped end of a
                    // range can be further, and never by more than one step.
                    let bound = if ints[i] == 0 || ints[i] == top {
                        step
                    } else {
                        step / 2.0
                    };
                    assert!(
                        (x - y).abs() <= bound + slack,
                        "{name}: element {i}: {x} came back as {y} (scale {step})"
                    );
                    assert!(ints[i] <= top, "{name}: element {i}");
                }
                // Each group's extreme of larger magnitude comes back (almost) exactly.
                for (g, group) in wv.chunks(gs).enumerate() {
                    // The minimum when its magnitude is larger, else the maximum.
                    let lo = group.iter().fold(f64::INFINITY, |m, &x| m.min(x));
                    let hi = group.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x));
                    let edge = if lo.abs() > hi.abs() { lo } else { hi };
                    let j = g * gs + group.iter().position(|&x| x == edge).unwrap();
                    assert!(
                        (back[j] - edge).abs() <= 4.0 * eps(dtype) * edge.abs() + 1e-12,
                        "{name}: group {g}'s edge {edge} came back as {}",
                        back[j]
                    );
                }
            }
        }
    }
}

#[test]
fn quantize_takes_batches_and_views() {
    let mut rng = Rng::new(2);
    let v = random_vec(&mut rng, 2 * 3 * 64);
    let w = array(&v, &[2, 3, 64], DType::F32);
    let (wq, s, b) = quantize(&w, 32, 4).unwrap();
    assert_eq!(wq.shape(), [2, 3, 8]);
    assert_eq!(s.shape(), [2, 3, 2]);
    // Row by row, the same as quantizing each row alone.
    for r in 0..6 {
        let row = array(&v[r * 64..(r + 1) * 64], &[1, 64], DType::F32);
        let (rq, rs, rb) = quantize(&row, 32, 4).unwrap();
        assert_eq!(
            rq.to_vec::<u32>().unwrap(),
            wq.to_vec::<u32>().unwrap()[r * 8..(r + 1) * 8]
        );
        assert_eq!(values(&rs), values(&s)[r * 2..(r + 1) * 2]);
        assert_eq!(values(&rb), values(&b)[r * 2..(r + 1) * 2]);
    }
    // A transposed view quantizes like its contiguous copy.
    let t = array(&v[..64 * 6], &[64, 6], DType::F32).t().unwrap();
    let (tq, ts, tb) = quantize(&t, 64, 3).unwrap();
    let (cq, cs, cb) = quantize(&contiguous(&t).unwrap(), 64, 3).unwrap();
    assert_eq!(tq.to_vec::<u32>().unwrap(), cq.to_vec::<u32>().unwrap());
    assert_eq!(values(&ts), values(&cs));
    assert_eq!(values(&tb), values(&cb));
    // Empty rows and empty matrices.
    let (eq, es, _) = quantize(&zeros(&[0, 64], DType::F32).unwrap(), 64, 4).unwrap();
    assert_eq!((eq.shape(), es.shape()), (&[0, 8][..], &[0, 1][..]));
    let (eq, es, _) = quantize(&zeros(&[3, 0], DType::F32).unwrap(), 64, 4).unwrap();
    assert_eq!((eq.shape(), es.shape()), (&[3, 0][..], &[3, 0][..]));
    // A constant group: zero scale would divide by zero; the values still come back.
    let c = full(&[2, 32], 0.75f32, DType::F32).unwrap();
    let (cq, cs, cb) = quantize(&c, 32, 4).unwrap();
    let back = values(&dequantize(&cq, &cs, &cb, 32, 4).unwrap());
    assert!(back.iter().all(|&x| (x - 0.75).abs() < 1e-6), "{back:?}");
}

#[test]
fn dequantize_unpacks_mlx_layout() {
    let mut rng = Rng::new(3);
    for &bits in &BITS {
        for &gs in &GROUPS {
            let (rows, cols) = (3, 2 * gs);
            let top = 1u64 << bits;
            let ints: Vec<u32> = (0..rows * cols).map(|_| rng.below(top) as u32).collect();
            let words: Vec<u32> = ints
                .chunks(cols)
                .flat_map(|row| pack_ref(row, bits as usize))
                .collect();
            let wq = Array::from_slice(&words, &[rows, cols * bits as usize / 32]).unwrap();
            let s = random_vec(&mut rng, rows * 2);
            let b = random_vec(&mut rng, rows * 2);
            for dtype in [DType::F32, DType::F64, DType::F16] {
                let scales = array(&s, &[rows, 2], dtype);
                let biases = array(&b, &[rows, 2], dtype);
                let got = dequantize(&wq, &scales, &biases, gs, bits).unwrap();
                assert_eq!(got.dtype(), dtype);
                assert_eq!(got.shape(), [rows, cols]);
                let (sv, bv) = (values(&scales), values(&biases));
                let want: Vec<f64> = ints
                    .iter()
                    .enumerate()
                    .map(|(i, &q)| sv[i / gs] * f64::from(q) + bv[i / gs])
                    .collect();
                let rel = 3.0 * eps(dtype);
                assert_close(
                    &format!("{dtype} bits={bits} gs={gs}"),
                    &values(&got),
                    &want,
                    rel,
                    rel,
                );
            }
        }
    }
    // Views: the packed words transposed, the scales broadcast; biases of another type.
    let ints: Vec<u32> = (0..4 * 64).map(|i| (i * 7 % 16) as u32).collect();
    let words: Vec<u32> = ints.chunks(64).flat_map(|r| pack_ref(r, 4)).collect();
    let mut t = vec![0u32; words.len()];
    for r in 0..4 {
        for c in 0..8 {
            t[c * 4 + r] = words[r * 8 + c];
        }
    }
    let wq = Array::from_slice(&t, &[8, 4]).unwrap().t().unwrap();
    let scales = broadcast_to(&array(&[0.5], &[1, 1], DType::F32), &[4, 1]).unwrap();
    let biases = array(&[1.0, 2.0, 3.0, 4.0], &[4, 1], DType::F64);
    let got = values(&dequantize(&wq, &scales, &biases, 64, 4).unwrap());
    let want: Vec<f64> = ints
        .iter()
        .enumerate()
        .map(|(i, &q)| 0.5 * f64::from(q) + (i / 64 + 1) as f64)
        .collect();
    assert_eq!(got, want);
}

/// A random quantized weight of `shape` (the unpacked shape), in `dtype`.
fn quantized(
    rng: &mut Rng,
    shape: &[usize],
    gs: usize,
    bits: u32,
    dtype: DType,
) -> (Array, Array, Array) {
    let n: usize = shape.iter().product();
    quantize(&array(&random_vec(rng, n), shape, dtype), gs, bits).unwrap()
}

/// `x · wᵀ` or `x · w` in f64 for `x: [batch.., m, k]` (values `xv`, batch `count`) and the
/// dequantized `wd: [batch.., rows, cols]` (one matrix, or one per batch entry).
fn product_ref(
    xv: &[f64],
    wd: &[f64],
    (count, m, k, n): (usize, usize, usize, usize),
    w_batched: bool,
    transpose: bool,
) -> Vec<f64> {
    let mut out = vec![0.0; count * m * n];
    for b in 0..count {
        let w = if w_batched {
            &wd[b * n * k..(b + 1) * n * k]
        } else {
            wd
        };
        for i in 0..m {
            for j in 0..n {
                out[(b * m + i) * n + j] = (0..k)
                    .map(|t| {
                        let wv = if transpose {
                            w[j * k + t]
                        } else {
                            w[t * n + j]
                        };
                        xv[(b * m + i) * k + t] * wv
                    })
                    .sum();
            }
        }
    }
    out
}

/// Checks `quantized_matmul` against the f64 product with the dequantized weights, for
/// `x: [count, m, k]` against a 2-D `w` (`x` with its leading axes) and a batched `w`.
fn check_product(
    rng: &mut Rng,
    (m, n, k): (usize, usize, usize),
    gs: usize,
    bits: u32,
    transpose: bool,
    dtype: DType,
) {
    let name = format!("{dtype} m={m} n={n} k={k} gs={gs} bits={bits} t={transpose}");
    let wshape = if transpose { [n, k] } else { [k, n] };
    let (wq, s, b) = quantized(rng, &wshape, gs, bits, dtype);
    let wd = dequantized_ref(&wq, &s, &b, gs, bits);
    let x = array(&random_vec(rng, 2 * m * k), &[2, m, k], dtype);
    let xv = values(&x);
    let y = quantized_matmul(&x, &wq, &s, &b, transpose, gs, bits).unwrap();
    assert_eq!(y.shape(), [2, m, n], "{name}");
    assert_eq!(y.dtype(), dtype, "{name}");
    let want = product_ref(&xv, &wd, (2, m, k, n), false, transpose);
    // Sums of k products of values below 1, rounded once to `dtype`.
    let (rel, abs) = match dtype {
        DType::F64 => (1e-12, 1e-12),
        DType::F32 => (1e-5, 1e-5 * (k as f64).sqrt()),
        _ => (eps(dtype), 1e-4 * (k as f64).sqrt() + eps(dtype)),
    };
    assert_close(&name, &values(&y), &want, rel, abs);
    // The same with a batch of weights: x[i] against w[i].
    let (wq2, s2, b2) = quantized(rng, &[2, wshape[0], wshape[1]], gs, bits, dtype);
    let wd2 = dequantized_ref(&wq2, &s2, &b2, gs, bits);
    let y2 = quantized_matmul(&x, &wq2, &s2, &b2, transpose, gs, bits).unwrap();
    assert_eq!(y2.shape(), [2, m, n], "{name}, batched");
    let want2 = product_ref(&xv, &wd2, (2, m, k, n), true, transpose);
    assert_close(&format!("{name}, batched"), &values(&y2), &want2, rel, abs);
}

#[test]
fn products_match_f64_math_for_every_width_and_group() {
    let mut rng = Rng::new(4);
    for &bits in &BITS {
        for &gs in &GROUPS {
            for transpose in [true, false] {
                // One row (the vector path) and several (the panel path).
                check_product(&mut rng, (1, gs, 2 * gs), gs, bits, transpose, DType::F32);
                check_product(&mut rng, (9, gs, gs), gs, bits, transpose, DType::F32);
            }
        }
    }
}

#[test]
fn products_in_every_float_type() {
    let mut rng = Rng::new(5);
    for dtype in [DType::F16, DType::BF16, DType::F64] {
        for transpose in [true, false] {
            for m in [1, 3, 8] {
                check_product(&mut rng, (m, 64, 128), 32, 4, transpose, dtype);
                check_product(&mut rng, (m, 128, 64), 64, 3, transpose, dtype);
            }
        }
    }
}

#[test]
fn large_products_split_over_threads_and_depth() {
    // Bands over several threads, panels that slice the inner axis, ragged last bands.
    let mut rng = Rng::new(6);
    for transpose in [true, false] {
        check_product(&mut rng, (1, 320, 2048), 64, 4, transpose, DType::F32);
        check_product(&mut rng, (4, 192, 1024), 32, 5, transpose, DType::F32);
        check_product(&mut rng, (33, 384, 1152), 128, 6, transpose, DType::F32);
        check_product(&mut rng, (20, 96, 4096), 32, 2, transpose, DType::F32);
        // Whole runs of units straddling words, then a ragged tail.
        check_product(&mut rng, (1, 64, 1056), 32, 3, transpose, DType::F32);
        check_product(&mut rng, (2, 96, 800), 32, 6, transpose, DType::F32);
        check_product(&mut rng, (1, 64, 1184), 32, 5, transpose, DType::BF16);
    }
}

#[test]
fn products_agree_with_matmul_of_the_dequantized_weights() {
    let mut rng = Rng::new(7);
    for transpose in [true, false] {
        let (wq, s, b) = quantized(&mut rng, &[128, 256], 64, 4, DType::F64);
        let w = dequantize(&wq, &s, &b, 64, 4).unwrap();
        let w = if transpose { w.t().unwrap() } else { w };
        let k = if transpose { 256 } else { 128 };
        for m in [1, 5, 12] {
            let x = array(&random_vec(&mut rng, 3 * m * k), &[3, m, k], DType::F64);
            let got = values(&quantized_matmul(&x, &wq, &s, &b, transpose, 64, 4).unwrap());
            let want = values(&matmul(&x, &w).unwrap());
            assert_close(&format!("m={m} t={transpose}"), &got, &want, 1e-12, 1e-12);
        }
    }
}

#[test]
fn products_take_views_and_broadcast_batches() {
    let mut rng = Rng::new(8);
    let (gs, bits) = (32, 4);
    let (wq, s, b) = quantized(&mut rng, &[3, 48, 64], gs, bits, DType::F32);
    let wd = dequantized_ref(&wq, &s, &b, gs, bits);
    // x transposed, with two leading axes, against a 2-D slice of w.
    let xt = array(&random_vec(&mut rng, 64 * 10), &[64, 5, 2], DType::F32);
    let x = transpose(&xt, &[2, 1, 0]).unwrap(); // [2, 5, 64]
    let xv = values(&x);
    let w1 = take(&wq, &Array::scalar(1u32), Some(0)).unwrap();
    let s1 = take(&s, &Array::scalar(1u32), Some(0)).unwrap();
    let b1 = take(&b, &Array::scalar(1u32), Some(0)).unwrap();
    let y = quantized_matmul(&x, &w1, &s1, &b1, true, gs, bits).unwrap();
    assert_eq!(y.shape(), [2, 5, 48]);
    let want = product_ref(&xv, &wd[48 * 64..2 * 48 * 64], (2, 5, 64, 48), false, true);
    assert_close("view", &values(&y), &want, 1e-5, 1e-5);
    // Every other row of w (a strided view of the packed words and scales).
    let step = SliceArg::new(None, None, 2);
    let all = SliceArg::new(None, None, 1);
    let (ws, ss, bs) = (
        slice(&w1, &[step, all]).unwrap(),
        slice(&s1, &[step, all]).unwrap(),
        slice(&b1, &[step, all]).unwrap(),
    );
    let y = quantized_matmul(&x, &ws, &ss, &bs, true, gs, bits).unwrap();
    let wd_rows: Vec<f64> = (0..24)
        .flat_map(|r| wd[(48 + 2 * r) * 64..(48 + 2 * r + 1) * 64].to_vec())
        .collect();
    let want = product_ref(&xv, &wd_rows, (2, 5, 64, 24), false, true);
    assert_close("strided rows", &values(&y), &want, 1e-5, 1e-5);
    // x [2, 1, 5, 64] against w [3, 48, ..]: batch axes broadcast to [2, 3].
    let x4 = expand_dims(&x, 1).unwrap();
    let y = quantized_matmul(&x4, &wq, &s, &b, true, gs, bits).unwrap();
    assert_eq!(y.shape(), [2, 3, 5, 48]);
    let got = values(&y);
    for i in 0..2 {
        for j in 0..3 {
            let want = product_ref(
                &xv[i * 5 * 64..(i + 1) * 5 * 64],
                &wd[j * 48 * 64..(j + 1) * 48 * 64],
                (1, 5, 64, 48),
                false,
                true,
            );
            let at = (i * 3 + j) * 5 * 48;
            assert_close("broadcast batch", &got[at..at + 5 * 48], &want, 1e-5, 1e-5);
        }
    }
    // A 1-D x against a batch of weights: one row each, its axis dropped.
    let x1 = take(&x, &Array::scalar(0u32), Some(0)).unwrap();
    let x1 = take(&x1, &Array::scalar(0u32), Some(0)).unwrap();
    let y = quantized_matmul(&x1, &wq, &s, &b, true, gs, bits).unwrap();
    assert_eq!(y.shape(), [3, 48]);
    let want: Vec<f64> = (0..3)
        .flat_map(|j| {
            product_ref(
                &xv[..64],
                &wd[j * 48 * 64..(j + 1) * 48 * 64],
                (1, 1, 64, 48),
                false,
                true,
            )
        })
        .collect();
    assert_close("1-D x", &values(&y), &want, 1e-5, 1e-5);
    // Mixed types promote: f16 x with f32 scales gives f32.
    let xh = x.astype(DType::F16).unwrap();
    let y = quantized_matmul(&xh, &w1, &s1, &b1, true, gs, bits).unwrap();
    assert_eq!(y.dtype(), DType::F32);
}

#[test]
fn empty_products() {
    let (wq, s, b) = quantize(&zeros(&[64, 32], DType::F32).unwrap(), 32, 4).unwrap();
    let x = zeros(&[0, 32], DType::F32).unwrap();
    let y = quantized_matmul(&x, &wq, &s, &b, true, 32, 4).unwrap();
    assert_eq!(y.shape(), [0, 64]);
    assert!(y.to_vec::<f32>().unwrap().is_empty());
    // No inner axis: sums of nothing.
    let (wq, s, b) = quantize(&zeros(&[5, 0], DType::F32).unwrap(), 32, 4).unwrap();
    let x = ones(&[2, 0], DType::F32).unwrap();
    let y = quantized_matmul(&x, &wq, &s, &b, true, 32, 4).unwrap();
    assert_eq!(y.shape(), [2, 5]);
    assert_eq!(y.to_vec::<f32>().unwrap(), [0.0; 10]);
}
