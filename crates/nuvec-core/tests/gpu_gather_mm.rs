//! `gather_mm`'s kernel (the tiled tensor-core kernel with plain weights) against its fallback
//! graph on the CPU in f32: decoding (one row a matrix, unsorted, sorted, and unsorted positions
//! grouped by expert on the device), prefill (many
//! rows sorted by expert), index positions of many rows, `b` row-major and as transposed
//! `[E, N, K]` weights, a misaligned view, indices out of range (clamped), and the shapes left
//! to the fallback graph. Each kernel case checks that the fused node was recorded and ran
//! its kernel (no nested fallback, no host bridge); each test skips itself, saying so, where
//! no CUDA device answers.

mod common;

use common::Rng;
use common::gpu::{assert_scaled_close, gpu_available, on, on_gpu_kernels, uniform};
use nuvec_core::primitive::Primitive;
use nuvec_core::*;

/// The largest difference allowed relative to the largest output, for `dtype`.
fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 4e-3,
        _ => 1.5e-2,
    }
}

/// How the case's `b` is laid out.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Weights {
    /// `[E, K, N]` row-major.
    RowMajor,
    /// `[E, N, K]` row-major, its last axes swapped.
    Transposed,
    /// A slice one column in of a wider row-major array (not 16-byte aligned: copied).
    Offset,
}

struct Case {
    dtype: DType,
    /// `a`: `[..., m, k]`.
    x: Vec<usize>,
    experts: usize,
    n: usize,
    weights: Weights,
    shape: Vec<usize>,
    lhs: Option<Vec<u32>>,
    rhs: Vec<u32>,
    sorted: bool,
}

impl Case {
    fn run(&self, rng: &mut Rng, name: &str, kernel: bool) {
        let k = self.x[self.x.len() - 1];
        let (e, n) = (self.experts, self.n);
        let b = match self.weights {
            Weights::RowMajor => uniform(rng, &[e, k, n], self.dtype),
            Weights::Transposed => swapaxes(&uniform(rng, &[e, n, k], self.dtype), -1, -2).unwrap(),
            Weights::Offset => {
                let wide = uniform(rng, &[e, k, n + 1], self.dtype);
                slice(
                    &wide,
                    &[
                        SliceArg::full(),
                        SliceArg::full(),
                        SliceArg::new(Some(1), None, 1),
                    ],
                )
                .unwrap()
            }
        };
        let a = uniform(rng, &self.x, self.dtype);
        let lhs = self
            .lhs
            .as_ref()
            .map(|v| Array::from_slice(v, &self.shape).unwrap());
        let rhs = Array::from_slice(&self.rhs, &self.shape).unwrap();
        let f32_of = |x: &Array| x.astype(DType::F32).unwrap();
        let cpu = on(Device::cpu(), || {
            gather_mm(
                &f32_of(&a),
                &f32_of(&b),
                lhs.as_ref(),
                Some(&rhs),
                self.sorted,
            )
            .unwrap_or_else(|e| panic!("{name} on the CPU: {e}"))
            .astype(self.dtype)
            .unwrap()
        });
        let gpu = on_gpu_kernels(name, kernel, || {
            let y = gather_mm(&a, &b, lhs.as_ref(), Some(&rhs), self.sorted)
                .unwrap_or_else(|e| panic!("{name} on the GPU: {e}"));
            // The fallback ends in a product; the kernel's node (or, for grouped positions,
            // the take of its rows back into order) does not.
            let fallback = matches!(y.primitive(), Some(Primitive::Matmul(_)));
            assert_eq!(!fallback, kernel, "{name}: fused node recorded");
            y
        });
        assert_scaled_close(name, &gpu, &cpu, tol(self.dtype));
    }
}

/// `count` expert indices below `experts` (even ones only, so some experts go unpicked),
/// sorted when `sorted`.
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
fn gather_mm_decodes_and_prefills_a_mixture_of_experts() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(41);
    for dtype in [DType::BF16, DType::F16] {
        for weights in [Weights::RowMajor, Weights::Transposed] {
            // Decoding: 3 tokens through 4 of 6 experts each, unsorted and sorted.
            for sorted in [false, true] {
                let rhs = picks(&mut rng, 12, 6, sorted);
                let lhs: Vec<u32> = (0..12).map(|i| i / 4).collect();
                let case = Case {
                    dtype,
                    x: vec![3, 1, 136],
                    experts: 6,
                    n: 72,
                    weights,
                    shape: vec![12],
                    lhs: Some(lhs),
                    rhs,
                    sorted,
                };
                case.run(
                    &mut rng,
                    &format!("{dtype} {weights:?} decode sorted={sorted}"),
                    true,
                );
            }
            // 16 tokens through 8 of 20 experts, unsorted (128 positions): grouped by expert
            // on the device first.
            let case = Case {
                dtype,
                x: vec![16, 1, 136],
                experts: 20,
                n: 72,
                weights,
                shape: vec![16, 8],
                lhs: Some((0..128).map(|i| i / 8).collect()),
                rhs: picks(&mut rng, 128, 20, false),
                sorted: false,
            };
            case.run(&mut rng, &format!("{dtype} {weights:?} grouped"), true);
            // Prefill: 300 rows sorted by expert over 8 experts (about 37 rows each).
            let rhs = picks(&mut rng, 300, 8, true);
            let case = Case {
                dtype,
                x: vec![300, 1, 256],
                experts: 8,
                n: 264,
                weights,
                shape: vec![300],
                lhs: Some((0..300).collect()),
                rhs,
                sorted: true,
            };
            case.run(&mut rng, &format!("{dtype} {weights:?} prefill"), true);
            // Index positions of 150 rows each (the row tiles of one matrix), unsorted.
            let case = Case {
                dtype,
                x: vec![2, 150, 64],
                experts: 3,
                n: 48,
                weights,
                shape: vec![2, 2],
                lhs: Some(vec![0, 1, 1, 0]),
                rhs: vec![2, 0, 1, 2],
                sorted: false,
            };
            case.run(&mut rng, &format!("{dtype} {weights:?} positions"), true);
        }
    }
}

#[test]
fn gather_mm_copies_other_layouts_clamps_indices_and_falls_back() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(42);
    // A view that starts off 16 bytes: copied, then the kernel.
    let case = Case {
        dtype: DType::BF16,
        x: vec![2, 3, 64],
        experts: 3,
        n: 40,
        weights: Weights::Offset,
        shape: vec![2],
        lhs: None,
        rhs: vec![2, 0],
        sorted: false,
    };
    case.run(&mut rng, "offset view", true);
    // Indices past the end take the last matrix, sorted or not.
    for sorted in [false, true] {
        let case = Case {
            dtype: DType::BF16,
            x: vec![6, 1, 128],
            experts: 4,
            n: 40,
            weights: Weights::RowMajor,
            shape: vec![6],
            lhs: Some(vec![0, 1, 2, 9, 4, 5]),
            rhs: vec![0, 1, 1, 3, 7, 9],
            sorted,
        };
        case.run(&mut rng, &format!("clamped sorted={sorted}"), true);
    }
    // No kernel: an output size that is not a multiple of 8, and f32: the fallback graph.
    for (dtype, n) in [(DType::BF16, 36), (DType::F32, 40)] {
        let case = Case {
            dtype,
            x: vec![2, 2, 64],
            experts: 2,
            n,
            weights: Weights::RowMajor,
            shape: vec![2],
            lhs: None,
            rhs: vec![1, 0],
            sorted: false,
        };
        case.run(&mut rng, &format!("{dtype} n={n} fallback"), false);
    }
}
