//! `gather_qmm`'s kernels against its fallback graph on the CPU, on the same packed weights:
//! decoding (one row a matrix, unsorted or sorted with offsets), prefill (many rows sorted by
//! expert, the tiled kernel), index positions of many rows each, `x · w`, f32, and indices out
//! of range (clamped). Each case checks that no node ran on the host bridge and no fused node
//! fell back inside itself; each test skips itself, saying so, where no CUDA device answers.

mod common;

use common::Rng;
use common::gpu::{assert_scaled_close, gpu_available, on, on_gpu_kernels, uniform};
use nuvec_core::*;

/// The largest difference allowed relative to the largest output, for `dtype`.
fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 1e-4,
        DType::F16 => 4e-3,
        _ => 2e-2,
    }
}

/// One gathered product: experts (matrices of `w`) and the indices that pick them.
struct Case {
    dtype: DType,
    bits: u32,
    gs: usize,
    transpose: bool,
    /// `x`: `[..., m, k]`.
    x: Vec<usize>,
    /// Matrices of `w`, and `[n, k]` (`transpose`) or `[k, n]` each.
    experts: usize,
    n: usize,
    /// The indices (their shape and values); `lhs` `None` takes every matrix of `x` in order.
    shape: Vec<usize>,
    lhs: Option<Vec<u32>>,
    rhs: Vec<u32>,
    sorted: bool,
}

impl Case {
    fn run(&self, rng: &mut Rng, name: &str, kernel: bool) {
        let k = self.x[self.x.len() - 1];
        let wshape = if self.transpose {
            [self.experts, self.n, k]
        } else {
            [self.experts, k, self.n]
        };
        let w = uniform(rng, &wshape, self.dtype);
        let (q, s, b) = on(Device::cpu(), || quantize(&w, self.gs, self.bits).unwrap());
        let x = uniform(rng, &self.x, self.dtype);
        let lhs = self
            .lhs
            .as_ref()
            .map(|v| Array::from_slice(v, &self.shape).unwrap());
        let rhs = Array::from_slice(&self.rhs, &self.shape).unwrap();
        let f = || {
            gather_qmm(
                &x,
                &q,
                &s,
                &b,
                lhs.as_ref(),
                Some(&rhs),
                self.transpose,
                self.gs,
                self.bits,
                self.sorted,
            )
        };
        let cpu = on(Device::cpu(), || {
            let y = f().unwrap_or_else(|e| panic!("{name} on the CPU: {e}"));
            y.eval()
                .unwrap_or_else(|e| panic!("{name} on the CPU: {e}"));
            y
        });
        let gpu = on_gpu_kernels(name, kernel, || {
            f().unwrap_or_else(|e| panic!("{name} on the GPU: {e}"))
        });
        assert_scaled_close(name, &gpu, &cpu, tol(self.dtype));
    }
}

/// `count` expert indices below `experts`, sorted when `sorted`, leaving some experts out.
fn picks(rng: &mut Rng, count: usize, experts: usize, sorted: bool) -> Vec<u32> {
    let mut v: Vec<u32> = (0..count)
        .map(|_| (rng.below(experts as u64) as u32) & !1)
        .collect();
    if sorted {
        v.sort_unstable();
    }
    v
}

#[test]
fn gather_qmm_decodes_with_unsorted_and_sorted_indices() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(31);
    for (dtype, bits, gs) in [
        (DType::BF16, 4, 64),
        (DType::F16, 3, 32),
        (DType::BF16, 8, 128),
        (DType::F32, 4, 64),
    ] {
        // Three tokens, each through 4 of 6 experts: `x` [3, 1, 1, k], indices [3, 4].
        let rhs = picks(&mut rng, 12, 6, false);
        let case = Case {
            dtype,
            bits,
            gs,
            transpose: true,
            x: vec![3, 1, 1, 256],
            experts: 6,
            n: 72,
            shape: vec![3, 4],
            lhs: Some((0..12).map(|i| i / 4).collect()),
            rhs,
            sorted: false,
        };
        case.run(
            &mut rng,
            &format!("decode unsorted {dtype} bits={bits}"),
            true,
        );
        // The same without lhs: its broadcast ([3, 1] to [3, 4]) read in place, each entry
        // for 4 positions; and for rows of 20 (the tiled kernel), 2 positions an entry.
        for (x, shape) in [
            (vec![3, 1, 1, 256], vec![3, 4]),
            (vec![3, 1, 20, 256], vec![3, 2]),
        ] {
            let positions = shape.iter().product();
            let case = Case {
                x,
                shape,
                lhs: None,
                rhs: picks(&mut rng, positions, 6, false),
                ..case
            };
            case.run(
                &mut rng,
                &format!("decode broadcast lhs {dtype} bits={bits} {:?}", case.x),
                true,
            );
        }
        // The same rows sorted by expert (one row a position), offsets given.
        for tokens in [12, 40] {
            let case = Case {
                x: vec![tokens, 1, 256],
                shape: vec![tokens],
                lhs: None,
                rhs: picks(&mut rng, tokens, 6, true),
                sorted: true,
                ..case
            };
            case.run(
                &mut rng,
                &format!("decode sorted {dtype} bits={bits} t={tokens}"),
                true,
            );
        }
        // 16 tokens through 8 of 20 experts, unsorted (128 positions): grouped by expert
        // inside the node (4 bits in f16 and bf16: each block of the tensor-core product finds
        // its expert's positions; else a grouping launch, then the product read and written
        // through the positions' order).
        let case = Case {
            x: vec![16, 1, 1, 256],
            experts: 20,
            shape: vec![16, 8],
            lhs: Some((0..128).map(|i| i / 8).collect()),
            rhs: picks(&mut rng, 128, 20, false),
            sorted: false,
            ..case
        };
        case.run(
            &mut rng,
            &format!("decode grouped {dtype} bits={bits}"),
            true,
        );
        // Grouped without lhs (each token's row for its 8 positions, read in place).
        let case = Case {
            lhs: None,
            rhs: picks(&mut rng, 128, 20, false),
            ..case
        };
        case.run(
            &mut rng,
            &format!("decode grouped broadcast lhs {dtype} bits={bits}"),
            true,
        );
        // The same positions sorted: grouped by the kernel as if unsorted (no offsets).
        let mut rhs = case.rhs.clone();
        rhs.sort_unstable();
        let case = Case {
            rhs,
            sorted: true,
            ..case
        };
        case.run(
            &mut rng,
            &format!("decode sorted, grouped by the kernel {dtype} bits={bits}"),
            true,
        );
        // 160 tokens through 8 of 96 experts (1,280 positions): more than the tensor-core
        // product's blocks group themselves, so a grouping launch runs first for every form.
        let case = Case {
            x: vec![160, 1, 1, 256],
            experts: 96,
            shape: vec![160, 8],
            rhs: picks(&mut rng, 1280, 96, false),
            sorted: false,
            ..case
        };
        case.run(
            &mut rng,
            &format!("decode grouped by a launch {dtype} bits={bits}"),
            true,
        );
    }
}

#[test]
fn gather_qmm_prefills_rows_sorted_by_expert() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(32);
    for (dtype, bits, gs, transpose) in [
        (DType::BF16, 4, 64, true),
        (DType::F16, 5, 32, true),
        (DType::BF16, 2, 128, false),
        (DType::BF16, 6, 64, false),
    ] {
        for rows in [300, 1030] {
            let case = Case {
                dtype,
                bits,
                gs,
                transpose,
                x: vec![rows, 1, 384],
                experts: 6,
                n: 384,
                shape: vec![rows],
                lhs: None,
                rhs: picks(&mut rng, rows, 6, true),
                sorted: true,
            };
            let name =
                format!("prefill sorted {dtype} bits={bits} transpose={transpose} rows={rows}");
            case.run(&mut rng, &name, true);
        }
    }
}

#[test]
fn gather_qmm_takes_positions_of_many_rows_and_x_w() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(33);
    // Two matrices of x of 20 rows, each through three of five experts, unsorted: the tiled
    // kernel over each index position's rows (f16/bf16), the gathered rows 8 at a time (f32).
    for (dtype, transpose) in [
        (DType::BF16, true),
        (DType::F16, false),
        (DType::F32, true),
        (DType::BF16, false),
    ] {
        let case = Case {
            dtype,
            bits: 4,
            gs: 32,
            transpose,
            x: vec![2, 20, 96],
            experts: 5,
            n: 288,
            shape: vec![2, 3],
            lhs: Some(vec![1, 0, 1, 0, 0, 1]),
            rhs: vec![4, 0, 2, 2, 3, 1],
            sorted: false,
        };
        case.run(
            &mut rng,
            &format!("positions {dtype} transpose={transpose}"),
            true,
        );
    }
    // One row a position, x · w: the tiled kernel too.
    let case = Case {
        dtype: DType::BF16,
        bits: 8,
        gs: 64,
        transpose: false,
        x: vec![4, 1, 64],
        experts: 3,
        n: 128,
        shape: vec![4, 2],
        lhs: Some(vec![0, 0, 1, 1, 2, 2, 3, 3]),
        rhs: vec![2, 0, 1, 1, 0, 2, 2, 2],
        sorted: false,
    };
    case.run(&mut rng, "x · w one row a position", true);
}

#[test]
fn gather_qmm_clamps_indices_and_falls_back_where_no_kernel_takes_it() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(34);
    // Indices past the end pick the last matrix, sorted or not.
    for sorted in [false, true] {
        let case = Case {
            dtype: DType::BF16,
            bits: 4,
            gs: 64,
            transpose: true,
            x: vec![6, 1, 128],
            experts: 4,
            n: 40,
            shape: vec![6],
            lhs: Some(vec![0, 1, 2, 9, 4, 5]),
            rhs: vec![0, 1, 1, 3, 7, 9],
            sorted,
        };
        case.run(&mut rng, &format!("clamped sorted={sorted}"), true);
    }
    // x · w in f32 has no kernel: the fallback graph, with the same values.
    let case = Case {
        dtype: DType::F32,
        bits: 4,
        gs: 32,
        transpose: false,
        x: vec![3, 2, 40],
        experts: 3,
        n: 64,
        shape: vec![3],
        lhs: None,
        rhs: vec![2, 0, 1],
        sorted: false,
    };
    case.run(&mut rng, "f32 x · w", false);
    // Bad input is an error, not a launch.
    let x = zeros(&[2, 1, 64], DType::BF16).unwrap();
    let w = zeros(&[3, 8, 8], DType::U32).unwrap();
    let s = zeros(&[3, 8, 1], DType::BF16).unwrap();
    let bad = Array::from_slice(&[0.5f32, 1.0], &[2]).unwrap();
    let r = on(Device::gpu(0), || {
        gather_qmm(&x, &w, &s, &s, None, Some(&bad), true, 64, 4, false)
    });
    assert!(r.is_err(), "float indices must be refused");
}
