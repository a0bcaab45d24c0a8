//! Affine quantization's kernels against the CPU: `dequantize` and `quantize` bit for bit for
//! every width, group size and float type (f16, bf16, f32, f64), and `quantized_matmul` with
//! `w` transposed or not for 1 to 8 rows of `x` (and more), on the same packed weights, within
//! a tolerance (the sums run in other orders). Each test checks that no node ran on the host
//! bridge, and skips itself, saying so, where no CUDA device answers.

mod common;

use common::Rng;
use common::gpu::{assert_scaled_close, gpu_available, on, on_gpu_kernels, uniform, values};
use nuvec_core::*;

const BITS: [u32; 6] = [2, 3, 4, 5, 6, 8];
const GROUPS: [usize; 3] = [32, 64, 128];
const TYPES: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];

/// `f` on the GPU, evaluated there, after checking that no node ran on the host bridge.
fn on_gpu(name: &str, f: impl FnOnce() -> Result<Vec<Array>>) -> Vec<Array> {
    let before = cuda::host_bridge_runs();
    let outs = on(Device::gpu(0), || {
        let outs = f().unwrap_or_else(|e| panic!("{name} on the GPU: {e}"));
        eval(&outs).unwrap_or_else(|e| panic!("{name} on the GPU: {e}"));
        outs
    });
    assert_eq!(
        cuda::host_bridge_runs(),
        before,
        "{name}: a node ran on the host bridge"
    );
    outs
}

/// Whether `a` and `b` hold the same values of the same type and shape, bit for bit (NaN
/// where NaN).
fn assert_same(name: &str, gpu: &Array, cpu: &Array) {
    assert_eq!(gpu.shape(), cpu.shape(), "{name}: shape");
    assert_eq!(gpu.dtype(), cpu.dtype(), "{name}: dtype");
    if gpu.dtype() == DType::U32 {
        let (g, c) = (gpu.to_vec::<u32>().unwrap(), cpu.to_vec::<u32>().unwrap());
        if let Some(i) = (0..g.len()).find(|&i| g[i] != c[i]) {
            panic!("{name}[{i}]: gpu {:#010x} vs cpu {:#010x}", g[i], c[i]);
        }
        return;
    }
    let (g, c) = (values(gpu), values(cpu));
    for (i, (a, b)) in g.iter().zip(&c).enumerate() {
        let same = a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        assert!(same, "{name}[{i}]: gpu {a:e} vs cpu {b:e}");
    }
}

/// Weights of `shape` in `dtype` with some awkward groups: a constant one, one of zeros, one
/// whose extremes tie in magnitude.
fn weights(rng: &mut Rng, shape: &[usize], dtype: DType) -> Array {
    let n: usize = shape.iter().product();
    let mut v: Vec<f64> = (0..n).map(|_| rng.range(-1.0, 1.0)).collect();
    let k = shape[shape.len() - 1];
    v[..32].fill(0.25);
    if n >= 2 * k {
        v[k..k + 32].fill(0.0);
    }
    if n >= 3 * k {
        v[2 * k] = 0.75;
        v[2 * k + 1] = -0.75;
    }
    Array::from_slice(&v, shape).unwrap().astype(dtype).unwrap()
}

#[test]
fn quantize_and_dequantize_match_the_cpu_bit_for_bit() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(17);
    for dtype in TYPES {
        for bits in BITS {
            for gs in GROUPS {
                let name = format!("{dtype} bits={bits} gs={gs}");
                let w = weights(&mut rng, &[5, 3 * 128], dtype);
                let cpu = on(Device::cpu(), || {
                    let (q, s, b) = quantize(&w, gs, bits).unwrap();
                    let d = dequantize(&q, &s, &b, gs, bits).unwrap();
                    vec![q, s, b, d]
                });
                let gpu = on_gpu(&format!("quantize {name}"), || {
                    let (q, s, b) = quantize(&w, gs, bits)?;
                    Ok(vec![q, s, b])
                });
                for (i, what) in ["wq", "scales", "biases"].iter().enumerate() {
                    assert_same(&format!("quantize {name}: {what}"), &gpu[i], &cpu[i]);
                }
                // Dequantization of the CPU's packing, on the GPU.
                let d = on_gpu(&format!("dequantize {name}"), || {
                    Ok(vec![dequantize(&cpu[0], &cpu[1], &cpu[2], gs, bits)?])
                });
                assert_same(&format!("dequantize {name}"), &d[0], &cpu[3]);
            }
        }
    }
}

#[test]
fn quantize_reads_strided_and_batched_weights() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(18);
    let w = weights(&mut rng, &[2, 3, 256], DType::BF16);
    let t = transpose(&w, &[1, 0, 2]).unwrap();
    for (bits, gs) in [(4, 64), (3, 128), (6, 32)] {
        let cpu = on(Device::cpu(), || {
            let (q, s, b) = quantize(&t, gs, bits).unwrap();
            vec![q, s, b]
        });
        let gpu = on_gpu("quantize strided", || {
            let (q, s, b) = quantize(&t, gs, bits)?;
            Ok(vec![q, s, b])
        });
        for i in 0..3 {
            assert_same(
                &format!("strided bits={bits} gs={gs} #{i}"),
                &gpu[i],
                &cpu[i],
            );
        }
    }
}

/// The largest relative difference allowed (absolute below 1) for a product of `dtype`.
fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 1e-4,
        DType::F16 => 4e-3,
        _ => 2e-2,
    }
}

/// `quantized_matmul` on both devices over the CPU's packing of random weights.
fn product(rng: &mut Rng, dtype: DType, (bits, gs, transpose): (u32, usize, bool), m: usize) {
    let (n, k) = (72, 384);
    let name = format!("qmm {dtype} bits={bits} gs={gs} transpose={transpose} m={m}");
    // Packed along the last axis: k with transpose, n without.
    let wshape = if transpose { [n, k] } else { [k, 2 * 64 * 3] };
    let w = weights(rng, &wshape, dtype);
    let (q, s, b) = on(Device::cpu(), || quantize(&w, gs, bits).unwrap());
    let x = uniform(rng, &[m, k], dtype);
    let cpu = on(Device::cpu(), || {
        quantized_matmul(&x, &q, &s, &b, transpose, gs, bits).unwrap()
    });
    let gpu = on_gpu(&name, || {
        Ok(vec![quantized_matmul(&x, &q, &s, &b, transpose, gs, bits)?])
    });
    // Relative to the size of the terms: the sums cancel.
    assert_scaled_close(&name, &gpu[0], &cpu, tol(dtype));
}

#[test]
fn quantized_matmul_matches_the_cpu_for_every_width_and_group() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(19);
    for dtype in [DType::BF16, DType::F16, DType::F32] {
        for bits in BITS {
            for gs in GROUPS {
                for transpose in [true, false] {
                    product(&mut rng, dtype, (bits, gs, transpose), 1);
                }
            }
        }
    }
}

#[test]
fn quantized_matmul_takes_one_to_many_rows() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(20);
    for m in (1..=8).chain([13, 40]) {
        for transpose in [true, false] {
            product(&mut rng, DType::BF16, (4, 64, transpose), m);
            product(&mut rng, DType::F32, (3, 32, transpose), m);
        }
    }
    // f32 past 128 rows: the dequantized weights in one f32 product.
    for transpose in [true, false] {
        for (bits, gs) in [(4, 64), (3, 32), (8, 128)] {
            product(&mut rng, DType::F32, (bits, gs, transpose), 300);
        }
    }
}

#[test]
fn quantized_matmul_splits_a_long_inner_axis() {
    if !gpu_available() {
        return;
    }
    // Few outputs, a long inner axis: the kernel splits k and sums the pieces.
    let mut rng = Rng::new(21);
    let (n, k) = (16, 8192);
    for (bits, gs) in [(4, 64), (5, 128), (8, 32)] {
        let w = weights(&mut rng, &[n, k], DType::BF16);
        let (q, s, b) = on(Device::cpu(), || quantize(&w, gs, bits).unwrap());
        let x = uniform(&mut rng, &[2, k], DType::BF16);
        let cpu = on(Device::cpu(), || {
            quantized_matmul(&x, &q, &s, &b, true, gs, bits).unwrap()
        });
        let gpu = on_gpu("split", || {
            Ok(vec![quantized_matmul(&x, &q, &s, &b, true, gs, bits)?])
        });
        assert_scaled_close(&format!("split bits={bits}"), &gpu[0], &cpu, 2e-2);
    }
}

/// Decoding shapes through the tensor-core matrix-vector kernel: inner axes of 1,024 to 4,096
/// values, rows of `w` not a multiple of 16, 1 to 8 rows of `x`, both half types, groups of
/// 32, 64 and 128.
#[test]
fn quantized_matmul_takes_decoding_shapes() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(22);
    let n = 100;
    for (k, gs, m, dtype) in [
        (1024, 64, 1, DType::BF16),
        (2560, 32, 3, DType::BF16),
        (4096, 128, 8, DType::BF16),
        (2560, 64, 2, DType::F16),
        (1024, 32, 5, DType::F16),
        (2048, 32, 2, DType::BF16),
    ] {
        let name = format!("decoding {dtype} k={k} gs={gs} m={m}");
        let w = weights(&mut rng, &[n, k], dtype);
        let (q, s, b) = on(Device::cpu(), || quantize(&w, gs, 4).unwrap());
        let x = uniform(&mut rng, &[m, k], dtype);
        let cpu = on(Device::cpu(), || {
            quantized_matmul(&x, &q, &s, &b, true, gs, 4).unwrap()
        });
        let gpu = on_gpu(&name, || {
            Ok(vec![quantized_matmul(&x, &q, &s, &b, true, gs, 4)?])
        });
        assert_scaled_close(&name, &gpu[0], &cpu, tol(dtype));
    }
}

/// `quantized_matmul` of `[m, k]` rows against an `[n, k]` (`transpose`) or `[k, n]` weight on
/// both devices, over the CPU's packing; the GPU within `tol(dtype)` of the largest output (the
/// tensor cores take each weight rounded to `dtype`, the CPU keeps it in f32, and the sums run
/// in other orders: the error grows like the outputs, with `√k`). Below 256 rows the tiled
/// kernel runs; from 256, the weights dequantized for one cuBLASLt product.
fn tiled(
    rng: &mut Rng,
    dtype: DType,
    (bits, gs, transpose): (u32, usize, bool),
    (m, n, k): (usize, usize, usize),
) {
    let name = format!("tiled {dtype} bits={bits} gs={gs} transpose={transpose} m={m} n={n} k={k}");
    let wshape = if transpose { [n, k] } else { [k, n] };
    let w = weights(rng, &wshape, dtype);
    let (q, s, b) = on(Device::cpu(), || quantize(&w, gs, bits).unwrap());
    let x = uniform(rng, &[m, k], dtype);
    let cpu = on(Device::cpu(), || {
        quantized_matmul(&x, &q, &s, &b, transpose, gs, bits).unwrap()
    });
    let gpu = on_gpu(&name, || {
        Ok(vec![quantized_matmul(&x, &q, &s, &b, transpose, gs, bits)?])
    });
    assert_eq!(gpu[0].shape(), cpu.shape(), "{name}: shape");
    let (g, c) = (values(&gpu[0]), values(&cpu));
    let scale = c.iter().fold(1.0f64, |a, v| a.max(v.abs()));
    for (i, (a, e)) in g.iter().zip(&c).enumerate() {
        assert!(
            (a - e).abs() <= tol(dtype) * scale,
            "{name}[{i}] (row {}, column {}): gpu {a} vs cpu {e}",
            i / n,
            i % n
        );
    }
}

/// The sizes of a tiled product for `gs` and `transpose`: `n` past one tile of 256 outputs and
/// not a multiple of it (odd with `transpose`), `k` not a multiple of the 64-value step where
/// the group size allows (and, with some widths, rows of `w` not on 16 bytes).
fn tiled_sizes(gs: usize, transpose: bool, m: usize) -> (usize, usize, usize) {
    let k = match gs {
        32 => 416,
        64 => 448,
        _ => 640,
    };
    if transpose {
        (m, 301, k)
    } else {
        // Packed along n: a multiple of the group size; k is any multiple of 8.
        (m, 9 * gs.max(32), 200)
    }
}

#[test]
fn tiled_quantized_matmul_matches_the_cpu_for_every_width_group_and_orientation() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(22);
    for bits in BITS {
        for gs in GROUPS {
            for transpose in [true, false] {
                for m in [9, 17, 100, 257] {
                    let dims = tiled_sizes(gs, transpose, m);
                    tiled(&mut rng, DType::BF16, (bits, gs, transpose), dims);
                }
            }
        }
    }
}

#[test]
fn tiled_quantized_matmul_takes_f16() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(23);
    for (bits, gs) in [(4, 64), (3, 32), (8, 128), (6, 64)] {
        for transpose in [true, false] {
            for m in [17, 257] {
                let dims = tiled_sizes(gs, transpose, m);
                tiled(&mut rng, DType::F16, (bits, gs, transpose), dims);
            }
        }
    }
}

#[test]
fn tiled_quantized_matmul_takes_long_and_exact_shapes() {
    if !gpu_available() {
        return;
    }
    // Whole tiles (n a multiple of 256, k of 64) with many steps of k, the tuned case (4 bits,
    // groups of 64) among them; and an x · w whose inner axis is no multiple of 8, which stays
    // on the plain kernel.
    let mut rng = Rng::new(24);
    tiled(&mut rng, DType::BF16, (4, 64, true), (300, 512, 2048));
    tiled(&mut rng, DType::BF16, (4, 64, false), (130, 512, 1024));
    tiled(&mut rng, DType::F16, (2, 128, true), (64, 256, 1024));
    tiled(&mut rng, DType::BF16, (4, 32, false), (33, 96, 100));
}

/// A batched `w` (its batch axes broadcast against `x`'s as the output's): one matrix of `w`
/// over many of `x`, matrices of `w` paired with those of `x`, and `x` repeated over the
/// matrices of `w`, for few rows (the gathered matrix-vector kernel) and many (the tiled
/// kernel), both orientations; none on the host bridge. `w` repeated over part of the batch
/// (the host bridge) gives the same values.
#[test]
fn quantized_matmul_takes_a_batched_w() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(23);
    let (n, k, gs, bits) = (128, 64, 64, 4);
    // (x's shape, w's batch axes, on the device's kernels)
    let cases: &[(&[usize], &[usize], bool)] = &[
        (&[3, 2, k], &[3], true),
        (&[3, 20, k], &[3], true),
        (&[2, 5, k], &[1], true),
        (&[2, 3, 4, k], &[1, 1], true),
        (&[4, k], &[2, 3], true),
        (&[1, 12, k], &[2, 3], true),
        (&[1, 3, 2, k], &[2, 1], false),
    ];
    for dtype in [DType::BF16, DType::F16, DType::F32] {
        for transpose in [true, false] {
            for &(xshape, wbatch, kernel) in cases {
                let name =
                    format!("batched qmm {dtype} transpose={transpose} {xshape:?} w{wbatch:?}");
                let mut wshape = wbatch.to_vec();
                wshape.extend(if transpose { [n, k] } else { [k, n] });
                let w = weights(&mut rng, &wshape, dtype);
                let (q, s, b) = on(Device::cpu(), || quantize(&w, gs, bits).unwrap());
                let x = uniform(&mut rng, xshape, dtype);
                let f = || quantized_matmul(&x, &q, &s, &b, transpose, gs, bits);
                let cpu = on(Device::cpu(), || f().unwrap());
                // f32 x · w has no gathered kernel (one matrix of w is a plain product).
                let one = wbatch.iter().product::<usize>() == 1;
                let taken = kernel && (transpose || dtype != DType::F32 || one);
                let gpu = on_gpu_kernels(&name, taken, || f().unwrap());
                assert_scaled_close(&name, &gpu, &cpu, tol(dtype));
            }
        }
    }
}
