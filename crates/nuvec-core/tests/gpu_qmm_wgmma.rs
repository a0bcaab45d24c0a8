//! The quantized product `x · wᵀ` that Hopper runs on the warpgroup tensor cores (4 bits, f16
//! and bf16, 65 to 2,048 rows of `x`: `backend/cuda/quantized/wgmma.rs`; with
//! `NUVEC_QMM_WGMMA=0` the tiled kernel takes them) against the
//! CPU's `quantized_matmul` on the same packed weights, within a tolerance relative to the
//! largest output (the GPU rounds each weight once to the activation type, the CPU keeps it in
//! f32, and the sums run in other orders). The shapes take both block sizes (128 and 256 rows
//! of `x`), rows of `x` and of `w` that fill no whole block, odd and even counts of 64-value
//! steps, a half step (groups of 32), long inner axes that cycle the stages many times, and
//! enough tiles that the stream-K walk cuts some between blocks (by default; with
//! `NUVEC_QMM_WGMMA_STREAMK=0`, a block a tile).
//! On other devices the same calls run the other kernels, and the checks still hold. Each
//! test checks that no node ran on the host bridge, and skips itself, saying so, where no
//! CUDA device answers.

mod common;

use common::Rng;
use common::gpu::{gpu_available, on, uniform, values};
use nuvec_core::*;

/// The largest difference allowed, relative to the largest output, for `dtype`.
fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 4e-3,
        _ => 2e-2,
    }
}

/// `quantized_matmul(x, w)` with `w` transposed, `[m, k]` by `[n, k]` packed with 4 bits and
/// groups of `gs`, on both devices; panics where the GPU strays from the CPU or a node ran on
/// the host bridge.
fn check(rng: &mut Rng, dtype: DType, gs: usize, (m, n, k): (usize, usize, usize)) {
    let name = format!("wgmma qmm {dtype} gs={gs} m={m} n={n} k={k}");
    let w = uniform(rng, &[n, k], dtype);
    let (q, s, b) = on(Device::cpu(), || quantize(&w, gs, 4).unwrap());
    let x = uniform(rng, &[m, k], dtype);
    let cpu = on(Device::cpu(), || {
        quantized_matmul(&x, &q, &s, &b, true, gs, 4).unwrap()
    });
    let before = cuda::host_bridge_runs();
    let gpu = on(Device::gpu(0), || {
        let y = quantized_matmul(&x, &q, &s, &b, true, gs, 4)
            .unwrap_or_else(|e| panic!("{name} on the GPU: {e}"));
        eval(std::slice::from_ref(&y)).unwrap_or_else(|e| panic!("{name} on the GPU: {e}"));
        y
    });
    assert_eq!(
        cuda::host_bridge_runs(),
        before,
        "{name}: a node ran on the host bridge"
    );
    assert_eq!(gpu.shape(), cpu.shape(), "{name}: shape");
    assert_eq!(gpu.dtype(), dtype, "{name}: dtype");
    let (g, c) = (values(&gpu), values(&cpu));
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

#[test]
fn wgmma_quantized_matmul_matches_the_cpu_at_every_edge() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(41);
    // n: odd and past one block of 128 (single stores), a multiple of 8 but not of 128 (a
    // partial block, 16-byte stores), whole blocks. k: 7 steps (odd), 10 steps.
    for dtype in [DType::BF16, DType::F16] {
        for m in [65, 128, 300, 640] {
            check(&mut rng, dtype, 64, (m, 301, 448));
            check(&mut rng, dtype, 128, (m, 200, 640));
        }
        check(&mut rng, dtype, 64, (300, 384, 1024));
        check(&mut rng, dtype, 128, (640, 256, 1024));
        // 8 x 19 tiles of 5 units on one block a multiprocessor: most tiles cut.
        check(&mut rng, dtype, 64, (2000, 2400, 640));
    }
}

#[test]
fn wgmma_quantized_matmul_takes_half_steps_and_long_inner_axes() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(42);
    // Groups of 32 let k end half way through a 64-value step (416 = 6.5 steps).
    check(&mut rng, DType::BF16, 32, (130, 136, 416));
    check(&mut rng, DType::F16, 32, (257, 301, 416));
    // Many steps: every stage reused many times over.
    check(&mut rng, DType::BF16, 64, (300, 384, 4096));
    check(&mut rng, DType::F16, 128, (129, 264, 2048));
}
