//! The CUDA attention kernel (few query rows, contiguous or paged keys) against the CPU:
//! `scaled_dot_product_attention` on `Device::gpu(0)` equals the float32 composition on
//! the CPU, and `paged_attention` equals the contiguous attention on the GPU bit for bit
//! below 1,024 keys (where both reach the kernel). Each test skips itself, saying so, where
//! no CUDA device answers.

mod common;

use common::Rng;
use common::gpu::{gpu_available, on, uniform, values};
use nuvec_core::*;

fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 1e-4,
        DType::F16 => 1e-2,
        _ => 5e-2,
    }
}

fn assert_close(name: &str, got: &Array, want: &Array, tol: f64) {
    assert_eq!(got.shape(), want.shape(), "{name}: shape");
    assert_eq!(got.dtype(), want.dtype(), "{name}: dtype");
    let (g, w) = (values(got), values(want));
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let ok = if tol == 0.0 {
            a.to_bits() == b.to_bits()
        } else {
            (a - b).abs() <= tol * b.abs().max(1.0)
        };
        assert!(ok, "{name}[{i}]: gpu {a} vs {b}");
    }
}

const TYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

#[test]
fn attention_matches_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(0xa771);
    // (B, Hq, Hkv, Lq, Lk, D): decode, GQA, causal rows, several row chunks, head sizes
    // 64..256, one pass and split passes.
    let shapes: &[(usize, usize, usize, usize, usize, usize)] = &[
        (2, 4, 4, 1, 37, 64),
        (1, 8, 2, 4, 50, 128),
        (1, 4, 4, 2, 33, 96),
        (2, 2, 2, 1, 513, 256),
        (1, 8, 2, 8, 300, 128),
        (1, 16, 8, 12, 70, 128),
        (3, 8, 2, 1, 1500, 128),
        (1, 16, 2, 1, 9000, 128),
        (1, 4, 2, 3, 2100, 256),
        // The benchmarks' grouping (4 query heads a key head), split; 8 and 12 rows a key
        // head (one and two chunks of the tensor-core kernel); 64 rows (eight chunks) over a
        // split sequence; 3 and 5 rows (padded chunks of the f32 kernel).
        (1, 32, 8, 1, 2000, 128),
        (2, 16, 2, 1, 130, 64),
        (1, 12, 1, 1, 90, 64),
        (1, 4, 1, 16, 1100, 64),
        (1, 6, 2, 1, 77, 96),
        (1, 3, 3, 5, 40, 256),
        (1, 8, 8, 1, 1030, 256),
        // Head size 512 (the block's warps split the features): MLX's shape, one pass and
        // split; two row chunks.
        (1, 8, 1, 1, 1100, 512),
        (1, 16, 1, 1, 4000, 512),
        (2, 16, 2, 2, 300, 512),
    ];
    for &(b, hq, hkv, lq, lk, d) in shapes {
        for dtype in TYPES {
            let q = uniform(&mut rng, &[b, hq, lq, d], dtype);
            // Contiguous keys, and keys as transposed views of [B, L, H, D].
            let kc = uniform(&mut rng, &[b, hkv, lk, d], dtype);
            let vc = uniform(&mut rng, &[b, hkv, lk, d], dtype);
            let kt = transpose(&uniform(&mut rng, &[b, lk, hkv, d], dtype), &[0, 2, 1, 3]).unwrap();
            let vt = transpose(&uniform(&mut rng, &[b, lk, hkv, d], dtype), &[0, 2, 1, 3]).unwrap();
            for (layout, k, v) in [("contiguous", &kc, &vc), ("transposed", &kt, &vt)] {
                for (mname, mask) in [
                    ("none", fast::AttentionMask::None),
                    ("causal", fast::AttentionMask::Causal),
                ] {
                    let scale = (d as f32).powf(-0.5);
                    let gpu = on(Device::gpu(0), || {
                        fast::scaled_dot_product_attention(&q, k, v, scale, mask, None).unwrap()
                    });
                    let f = |a: &Array| a.astype(DType::F32).unwrap();
                    let cpu = on(Device::cpu(), || {
                        fast::scaled_dot_product_attention(&f(&q), &f(k), &f(v), scale, mask, None)
                            .unwrap()
                            .astype(dtype)
                            .unwrap()
                    });
                    let name = format!("{dtype} {:?} {layout} {mname}", (b, hq, hkv, lq, lk, d));
                    assert_close(&name, &gpu, &cpu, tolerance(dtype));
                }
            }
        }
    }
}

#[test]
fn empty_and_invalid_attention() {
    if !gpu_available() {
        return;
    }
    on(Device::gpu(0), || {
        let z = |s: &[usize]| zeros(s, DType::F32).unwrap();
        let y = fast::scaled_dot_product_attention(
            &z(&[0, 4, 1, 64]),
            &z(&[0, 2, 5, 64]),
            &z(&[0, 2, 5, 64]),
            1.0,
            fast::AttentionMask::None,
            None,
        )
        .unwrap();
        assert_eq!(y.shape(), [0, 4, 1, 64]);
        assert_eq!(y.size(), 0);
        let bad = fast::scaled_dot_product_attention(
            &z(&[1, 4, 1, 64]),
            &z(&[1, 3, 5, 64]),
            &z(&[1, 3, 5, 64]),
            1.0,
            fast::AttentionMask::None,
            None,
        );
        assert!(bad.is_err(), "4 query heads over 3 key heads");
    });
}

/// Keys `[B, Hkv, n, D]` written into a paged cache of `bs` positions per block, each
/// sequence's blocks at shuffled places (one spare block left unused), and the table.
fn paged(x: &Array, bs: usize, order: &[usize]) -> Array {
    let (b, h, n, d) = (x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3]);
    let per = n.div_ceil(bs);
    let blocks = b * per + 1;
    let src = values(x);
    let mut cache = vec![0.0f64; blocks * h * bs * d];
    for s in 0..b {
        for p in 0..n {
            let blk = order[s * per + p / bs];
            for hh in 0..h {
                for e in 0..d {
                    cache[((blk * h + hh) * bs + p % bs) * d + e] =
                        src[((s * h + hh) * n + p) * d + e];
                }
            }
        }
    }
    Array::from_slice(&cache, &[blocks, h, bs, d])
        .unwrap()
        .astype(x.dtype())
        .unwrap()
}

/// A shuffled placement of the blocks of `b` sequences of at most `n` positions
/// in blocks of `bs` (one spare block): the order [`paged`] writes by, the `[B, blocks]`
/// table and the `[B]` lengths.
fn block_table(
    rng: &mut Rng,
    b: usize,
    n: usize,
    bs: usize,
    lengths: &[usize],
) -> (Vec<usize>, Array, Array) {
    assert_eq!(lengths.len(), b, "a length a sequence");
    let per = n.div_ceil(bs);
    let mut order: Vec<usize> = (0..b * per + 1).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let table: Vec<i32> = order[..b * per].iter().map(|&x| x as i32).collect();
    let table = Array::from_slice(&table, &[b, per]).unwrap();
    let lens: Vec<i32> = lengths.iter().map(|&l| l as i32).collect();
    let lens = Array::from_slice(&lens, &[b]).unwrap();
    (order, table, lens)
}

#[test]
fn paged_attention_equals_contiguous_attention_bitwise() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(0xa772);
    // (B, Hq, Hkv, Lq, D, block size, lengths)
    type Case = (usize, usize, usize, usize, usize, usize, &'static [usize]);
    let cases: &[Case] = &[
        (1, 4, 4, 1, 128, 16, &[37]),
        (3, 8, 2, 1, 128, 32, &[1, 64, 300]),
        (2, 4, 1, 4, 64, 16, &[4, 77]),
        (2, 8, 2, 16, 128, 16, &[16, 200]),
        (2, 2, 2, 1, 256, 8, &[9, 513]),
        (2, 8, 1, 1, 512, 16, &[30, 1000]),
        (2, 4, 2, 1, 96, 16, &[100, 1023]),
        // Long sequences: split passes (tolerance), with a short one that stays exact.
        (3, 8, 2, 1, 128, 32, &[1500, 3000, 700]),
        (1, 8, 2, 4, 128, 64, &[2100]),
        // Blocks of 1 and of sizes that are not powers of two; 64 rows a key head (eight
        // chunks of rows); grouping 4 and 12.
        (2, 4, 1, 16, 64, 3, &[20, 90]),
        (1, 16, 2, 1, 96, 1, &[50]),
        (2, 8, 2, 2, 128, 24, &[1030, 500]),
        (2, 32, 8, 1, 128, 16, &[1100, 600]),
        (1, 12, 1, 1, 64, 16, &[600]),
    ];
    for &(b, hq, hkv, lq, d, bs, lengths) in cases {
        let n = *lengths.iter().max().unwrap();
        let (order, table, lens) = block_table(&mut rng, b, n, bs, lengths);
        for dtype in TYPES {
            let keys = uniform(&mut rng, &[b, hkv, n, d], dtype);
            let vals = uniform(&mut rng, &[b, hkv, n, d], dtype);
            let q = uniform(&mut rng, &[b, hq, lq, d], dtype);
            let (kc, vc) = (paged(&keys, bs, &order), paged(&vals, bs, &order));
            let scale = (d as f32).powf(-0.5);
            let name = format!("{dtype} {:?}", (b, hq, hkv, lq, d, bs, lengths));
            let pick = |a: &Array, s: usize, end: usize| {
                slice(
                    a,
                    &[
                        SliceArg::new(Some(s as isize), Some(s as isize + 1), 1),
                        SliceArg::full(),
                        SliceArg::new(Some(0), Some(end as isize), 1),
                        SliceArg::full(),
                    ],
                )
                .unwrap()
            };
            let mask = if lq > 1 {
                fast::AttentionMask::Causal
            } else {
                fast::AttentionMask::None
            };
            let got = on(Device::gpu(0), || {
                fast::paged_attention(&q, &kc, &vc, &table, &lens, scale).unwrap()
            });
            for (s, &len) in lengths.iter().enumerate() {
                let want = on(Device::gpu(0), || {
                    fast::scaled_dot_product_attention(
                        &pick(&q, s, lq),
                        &pick(&keys, s, len),
                        &pick(&vals, s, len),
                        scale,
                        mask,
                        None,
                    )
                    .unwrap()
                });
                // Head size 512 below 1,024 keys: MLX's routing leaves the contiguous call
                // to the fallback graph, so only the paged one runs the kernel.
                let kernel_both = d != 512 || len >= 1024;
                let tol = if len < 1024 && kernel_both {
                    0.0
                } else {
                    tolerance(dtype)
                };
                assert_close(&format!("{name} seq {s}"), &pick(&got, s, lq), &want, tol);
            }
            // Against the fallback on the CPU, in float32.
            let f = |a: &Array| a.astype(DType::F32).unwrap();
            let cpu = on(Device::cpu(), || {
                fast::paged_attention(&f(&q), &f(&kc), &f(&vc), &table, &lens, scale)
                    .unwrap()
                    .astype(dtype)
                    .unwrap()
            });
            assert_close(&format!("{name} vs cpu"), &got, &cpu, tolerance(dtype));
        }
    }
}

/// Keys, values and queries that 16-byte loads cannot read (rows one element apart from
/// alignment) go through the kernels' element-by-element loads, which must give the bits
/// of the aligned ones: the same sums in the same order, below and above 1,024 keys.
#[test]
fn unaligned_rows_give_the_bits_of_aligned_ones() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(0xa773);
    // (B, Hq, Hkv, Lq, Lk, D)
    let shapes: &[(usize, usize, usize, usize, usize, usize)] = &[
        (2, 8, 2, 1, 300, 128),
        (1, 8, 2, 4, 1500, 64),
        (1, 4, 4, 3, 100, 96),
        (1, 2, 1, 1, 40, 256),
    ];
    for &(b, hq, hkv, lq, lk, d) in shapes {
        for dtype in TYPES {
            // Each input's values sit at features 1..=D of rows of D + 1.
            let wide = |rng: &mut Rng, h: usize, l: usize| uniform(rng, &[b, h, l, d + 1], dtype);
            let (qw, kw, vw) = (
                wide(&mut rng, hq, lq),
                wide(&mut rng, hkv, lk),
                wide(&mut rng, hkv, lk),
            );
            let inner = |a: &Array| {
                let all = SliceArg::full();
                let f = SliceArg::new(Some(1), Some(d as isize + 1), 1);
                slice(a, &[all, all, all, f]).unwrap()
            };
            let packed = |a: &Array| {
                let x = inner(a);
                Array::from_slice(&values(&x), x.shape())
                    .unwrap()
                    .astype(dtype)
                    .unwrap()
            };
            let (qa, ka, va) = (packed(&qw), packed(&kw), packed(&vw));
            let scale = (d as f32).powf(-0.5);
            for mask in [fast::AttentionMask::None, fast::AttentionMask::Causal] {
                let run = |q: &Array, k: &Array, v: &Array| {
                    fast::scaled_dot_product_attention(q, k, v, scale, mask, None).unwrap()
                };
                let (aligned, unaligned) = on(Device::gpu(0), || {
                    let u = run(&inner(&qw), &inner(&kw), &inner(&vw));
                    (run(&qa, &ka, &va), u)
                });
                let name = format!("{dtype} {:?} {mask:?} unaligned", (b, hq, hkv, lq, lk, d));
                assert_close(&name, &unaligned, &aligned, 0.0);
            }
        }
    }
}

/// Paged attention takes every head size that is a multiple of 32 up to 256 (and 512), also those
/// that no contiguous kernel takes (so there is nothing to compare bits with): against the
/// fallback on the CPU, in float32.
#[test]
fn paged_attention_of_every_head_size_matches_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(0xa774);
    // (B, Hq, Hkv, Lq, D, block size, lengths)
    type Case = (usize, usize, usize, usize, usize, usize, &'static [usize]);
    let cases: &[Case] = &[
        (2, 8, 2, 1, 32, 16, &[40, 1200]),
        (1, 4, 1, 3, 160, 5, &[70]),
        (2, 6, 3, 2, 192, 8, &[33, 1100]),
        (1, 2, 2, 16, 224, 16, &[300]),
        (2, 8, 1, 1, 512, 16, &[1500, 20]),
    ];
    for &(b, hq, hkv, lq, d, bs, lengths) in cases {
        let n = *lengths.iter().max().unwrap();
        let (order, table, lens) = block_table(&mut rng, b, n, bs, lengths);
        for dtype in TYPES {
            let keys = uniform(&mut rng, &[b, hkv, n, d], dtype);
            let vals = uniform(&mut rng, &[b, hkv, n, d], dtype);
            let q = uniform(&mut rng, &[b, hq, lq, d], dtype);
            let (kc, vc) = (paged(&keys, bs, &order), paged(&vals, bs, &order));
            let scale = (d as f32).powf(-0.5);
            let got = on(Device::gpu(0), || {
                fast::paged_attention(&q, &kc, &vc, &table, &lens, scale).unwrap()
            });
            let f = |a: &Array| a.astype(DType::F32).unwrap();
            let cpu = on(Device::cpu(), || {
                fast::paged_attention(&f(&q), &f(&kc), &f(&vc), &table, &lens, scale)
                    .unwrap()
                    .astype(dtype)
                    .unwrap()
            });
            let name = format!("{dtype} {:?} vs cpu", (b, hq, hkv, lq, d, bs, lengths));
            assert_close(&name, &got, &cpu, tolerance(dtype));
        }
    }
}
