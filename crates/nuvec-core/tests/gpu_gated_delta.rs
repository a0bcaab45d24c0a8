//! The gated delta rule's kernels against the CPU: `gated_delta`, `gated_delta_steps` and
//! `gated_delta_slots` on `Device::gpu(0)` with q, k and v in f32, bf16 and f16 (k also of
//! another type than q), gates and states in f32 and bf16, 1, 3 and 64 steps, grouped value
//! heads, key sizes 32 to 128 (96 too: accesses of one element), value sizes other than the
//! key size, and inputs read as strided views; each against the fallback graph on the CPU,
//! each checked to have recorded the fused node and run its kernel (no nested fallback).
//! Every step's state and the slots' kernel must give the plain kernel's bits. Long sequences
//! (64 to 1,000 steps) in half types take the chunked form, checked within its rounding. Each test
//! skips itself, saying so, where no CUDA device answers.

mod common;

use common::Rng;
use common::gpu::{close, gpu_available, on, random, uniform, values};
use nuvec_core::fast::FastOp;
use nuvec_core::*;

/// `(B, T, Hk, Hv, Dk, Dv)`: decoding, a few steps, a long sequence; grouped heads; Dv
/// below, above and equal to Dk, and not a multiple of a warp's rows.
const CASES: [(usize, usize, usize, usize, usize, usize); 6] = [
    (2, 1, 2, 4, 128, 64),
    (3, 1, 4, 8, 64, 128),
    (1, 3, 1, 2, 64, 48),
    (2, 3, 1, 2, 96, 40),
    (3, 64, 2, 4, 32, 17),
    (1, 64, 1, 2, 128, 96),
];

/// The element types of a run: (q and v, k, g, beta, state).
type Types = (DType, DType, DType, DType, DType);

/// The type combinations each case runs: every kernel type for q and v with float32 gates
/// and state, a bf16 state and gates, and k of another type than q.
const TYPES: [Types; 5] = [
    (DType::F32, DType::F32, DType::F32, DType::F32, DType::F32),
    (
        DType::BF16,
        DType::BF16,
        DType::F32,
        DType::BF16,
        DType::F32,
    ),
    (DType::F16, DType::F16, DType::F32, DType::F32, DType::F32),
    (
        DType::BF16,
        DType::BF16,
        DType::BF16,
        DType::BF16,
        DType::BF16,
    ),
    (DType::F16, DType::F32, DType::F16, DType::F32, DType::F16),
];

/// The largest relative difference allowed (absolute below 1) for results of `dtype`: the
/// recurrence runs in float32 on both devices, but sums in other orders, so a half-type result
/// may round to the neighbouring value.
fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 2e-4,
        DType::F16 => 2e-3,
        _ => 1e-2,
    }
}

fn assert_close(name: &str, gpu: &Array, cpu: &Array, tol: f64) {
    assert_eq!(gpu.shape(), cpu.shape(), "{name}: shape");
    assert_eq!(gpu.dtype(), cpu.dtype(), "{name}: dtype");
    let (g, c) = (values(gpu), values(cpu));
    for (i, (a, b)) in g.iter().zip(&c).enumerate() {
        assert!(close(*a, *b, tol), "{name}[{i}]: gpu {a} vs cpu {b}");
    }
}

/// Equal bit for bit (as f64 values; none is NaN here).
fn assert_same(name: &str, a: &Array, b: &Array) {
    assert_eq!(a.shape(), b.shape(), "{name}: shape");
    assert_eq!(values(a), values(b), "{name}: values");
}

/// Steps `from..to` (axis 1) or entries (axis 0) of `x`.
fn part(x: &Array, axis: usize, from: usize, to: usize) -> Array {
    let mut args = vec![SliceArg::full(); x.ndim()];
    args[axis] = SliceArg::new(Some(from as isize), Some(to as isize), 1);
    slice(x, &args).unwrap()
}

/// `(q, k, v, g, beta, state)` for `case` and `types`: q a transposed view (as projections
/// reshape to it), keys of unit length (the recurrence is stable for β‖k‖² ≤ 2), decays in
/// (0.5, 1), β in (0.2, 1).
fn inputs(rng: &mut Rng, case: (usize, usize, usize, usize, usize, usize), t: Types) -> Vec<Array> {
    let (b, steps, hk, hv, dk, dv) = case;
    let (qt, kt, gt, bt, st) = t;
    let q = transpose(&uniform(rng, &[b, hk, steps, dk], qt), &[0, 2, 1, 3]).unwrap();
    let k = uniform(rng, &[b, steps, hk, dk], DType::F64);
    let norm = sqrt(&sum(&multiply(&k, &k).unwrap(), &[-1], true).unwrap()).unwrap();
    let k = divide(&k, &norm).unwrap().astype(kt).unwrap();
    vec![
        q,
        k,
        uniform(rng, &[b, steps, hv, dv], qt),
        random(rng, &[b, steps, hv], 0.5, 1.0, gt),
        random(rng, &[b, steps, hv], 0.2, 1.0, bt),
        uniform(rng, &[b, hv, dv, dk], st),
    ]
}

/// `f` on the GPU, evaluated there: its outputs, after checking that each is the fused node
/// `op` and that no fused node ran its fallback graph.
fn on_gpu(name: &str, op: &FastOp, f: impl FnOnce() -> Vec<Array>) -> Vec<Array> {
    let before = fast::nested_fallbacks();
    let outs = on(Device::gpu(0), || {
        let outs = f();
        for o in &outs {
            assert_eq!(
                o.primitive(),
                Some(&Primitive::Fast(op.clone())),
                "{name}: should be a fused node"
            );
        }
        eval(&outs).unwrap();
        outs
    });
    assert_eq!(
        fast::nested_fallbacks(),
        before,
        "{name}: a fused node ran its fallback graph"
    );
    outs
}

fn name_of(case: (usize, usize, usize, usize, usize, usize), t: Types) -> String {
    format!("{case:?} {:?}", [t.0, t.1, t.2, t.3, t.4])
}

#[test]
fn gated_delta_matches_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(0x6701);
    let op = FastOp::GatedDelta { steps: false };
    for case in CASES {
        for types in TYPES {
            let x = inputs(&mut rng, case, types);
            let name = name_of(case, types);
            let run = || {
                let (y, s) = fast::gated_delta(&x[0], &x[1], &x[2], &x[3], &x[4], &x[5]).unwrap();
                vec![y, s]
            };
            let gpu = on_gpu(&name, &op, run);
            let cpu = on(Device::cpu(), run);
            assert_close(&format!("{name} y"), &gpu[0], &cpu[0], tol(types.0));
            assert_close(&format!("{name} state"), &gpu[1], &cpu[1], tol(types.4));
        }
    }
}

#[test]
fn gated_delta_reads_strided_and_misaligned_inputs() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(0x6702);
    let op = FastOp::GatedDelta { steps: false };
    let (b, t, hk, hv, dk, dv) = (2, 3, 2, 4, 64, 24);
    for dtype in [DType::F32, DType::BF16] {
        let x = inputs(
            &mut rng,
            (b, t, hk, hv, dk, dv),
            (dtype, dtype, dtype, dtype, dtype),
        );
        // k, v and the gates every other step of a longer sequence; the state as a transposed
        // view (copied by the kernel's host code) and one element into a larger block (a start
        // that no 16-byte access reaches: copied too).
        let every_other = |a: &Array| {
            let doubled = repeat(a, 2, Some(1)).unwrap();
            let mut args = vec![SliceArg::full(); a.ndim()];
            args[1] = SliceArg::new(None, None, 2);
            slice(&doubled, &args).unwrap()
        };
        let (k, v, g, beta) = (
            every_other(&x[1]),
            every_other(&x[2]),
            every_other(&x[3]),
            every_other(&x[4]),
        );
        let transposed =
            swapaxes(&contiguous(&swapaxes(&x[5], 2, 3).unwrap()).unwrap(), 2, 3).unwrap();
        let flat = reshape(&x[5], &[-1]).unwrap();
        let padded = concatenate(&[zeros(&[1], dtype).unwrap(), flat], 0).unwrap();
        let shifted = reshape(
            &part(&padded, 0, 1, padded.size()),
            &[b as isize, hv as isize, dv as isize, dk as isize],
        )
        .unwrap();
        for (layout, state) in [("transposed", transposed), ("shifted", shifted)] {
            let name = format!("{dtype} {layout}");
            let run = || {
                let (y, s) = fast::gated_delta(&x[0], &k, &v, &g, &beta, &state).unwrap();
                vec![y, s]
            };
            let gpu = on_gpu(&name, &op, run);
            let want = on(Device::cpu(), || {
                let (y, s) = fast::gated_delta(&x[0], &x[1], &x[2], &x[3], &x[4], &x[5]).unwrap();
                vec![y, s]
            });
            assert_close(&format!("{name} y"), &gpu[0], &want[0], tol(dtype));
            assert_close(&format!("{name} state"), &gpu[1], &want[1], tol(dtype));
        }
    }
}

#[test]
fn every_steps_state_matches_the_cpu_and_the_final_state() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(0x6703);
    let steps_op = FastOp::GatedDelta { steps: true };
    let last_op = FastOp::GatedDelta { steps: false };
    for case in CASES {
        for types in TYPES {
            let (b, t, _, hv, dk, dv) = case;
            let x = inputs(&mut rng, case, types);
            let name = name_of(case, types);
            let run = || {
                let (y, s) =
                    fast::gated_delta_steps(&x[0], &x[1], &x[2], &x[3], &x[4], &x[5]).unwrap();
                vec![y, s]
            };
            let gpu = on_gpu(&name, &steps_op, run);
            assert_eq!(gpu[1].shape(), [b, t, hv, dv, dk], "{name}: states");
            let cpu = on(Device::cpu(), run);
            assert_close(&format!("{name} steps y"), &gpu[0], &cpu[0], tol(types.0));
            assert_close(&format!("{name} states"), &gpu[1], &cpu[1], tol(types.4));
            // The same bits as the final state's kernel: y, the last state, and (a step in
            // the middle) the state of the first steps alone.
            let mid = t.div_ceil(2);
            let head = |a: &Array| part(a, 1, 0, mid);
            let plain = on_gpu(&name, &last_op, || {
                let (y, s) = fast::gated_delta(&x[0], &x[1], &x[2], &x[3], &x[4], &x[5]).unwrap();
                let (_, sm) = fast::gated_delta(
                    &head(&x[0]),
                    &head(&x[1]),
                    &head(&x[2]),
                    &head(&x[3]),
                    &head(&x[4]),
                    &x[5],
                )
                .unwrap();
                vec![y, s, sm]
            });
            let step = |i: usize| squeeze(&part(&gpu[1], 1, i, i + 1), &[1]).unwrap();
            assert_same(&format!("{name} y"), &gpu[0], &plain[0]);
            assert_same(&format!("{name} last"), &step(t - 1), &plain[1]);
            assert_same(
                &format!("{name} step {}", mid - 1),
                &step(mid - 1),
                &plain[2],
            );
        }
    }
}

#[test]
fn slots_match_the_cpu_and_the_plain_kernel() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(0x6704);
    let op = FastOp::GatedDeltaSlots;
    let plain = FastOp::GatedDelta { steps: false };
    let entries = 6;
    // Entry 3, the last one counted from the end, and 1; 2 and 4 untouched.
    let (slots, ids) = (
        Array::from_slice(&[3i32, -1, 1], &[3]).unwrap(),
        [3usize, 5, 1],
    );
    for case in CASES {
        for types in TYPES {
            let (_, _, _, hv, dk, dv) = case;
            let case = (3, case.1, case.2, hv, dk, dv);
            let x = inputs(&mut rng, case, types);
            let pool = uniform(&mut rng, &[entries, hv, dv, dk], types.4);
            pool.eval().unwrap();
            let before = values(&pool);
            let name = name_of(case, types);
            let run = || {
                let (y, p) =
                    fast::gated_delta_slots(&x[0], &x[1], &x[2], &x[3], &x[4], &pool, &slots)
                        .unwrap();
                vec![y, p]
            };
            let gpu = on_gpu(&name, &op, run);
            assert_eq!(values(&pool), before, "{name}: a held pool changed");
            let cpu = on(Device::cpu(), run);
            assert_close(&format!("{name} y"), &gpu[0], &cpu[0], tol(types.0));
            assert_close(&format!("{name} pool"), &gpu[1], &cpu[1], tol(types.4));
            for untouched in [0, 2, 4] {
                let entry = |p: &Array| part(p, 0, untouched, untouched + 1);
                assert_same(
                    &format!("{name} entry {untouched}"),
                    &entry(&gpu[1]),
                    &entry(&pool),
                );
            }
            // Each sequence as the plain kernel computes it from its entry, bit for bit.
            for (i, &slot) in ids.iter().enumerate() {
                let row = |a: &Array| part(a, 0, i, i + 1);
                let one = on_gpu(&name, &plain, || {
                    let (y, s) = fast::gated_delta(
                        &row(&x[0]),
                        &row(&x[1]),
                        &row(&x[2]),
                        &row(&x[3]),
                        &row(&x[4]),
                        &part(&pool, 0, slot, slot + 1),
                    )
                    .unwrap();
                    vec![y, s]
                });
                assert_same(&format!("{name} y {i}"), &row(&gpu[0]), &one[0]);
                let entry = part(&gpu[1], 0, slot, slot + 1);
                assert_same(&format!("{name} state {i}"), &entry, &one[1]);
            }
        }
    }
}

#[test]
fn slots_write_a_pool_held_by_nobody_else_and_skip_slots_outside_it() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(0x6705);
    let op = FastOp::GatedDeltaSlots;
    let case = (3, 3, 2, 4, 128, 128);
    let (_, _, _, hv, dk, dv) = case;
    let types = (
        DType::BF16,
        DType::BF16,
        DType::F32,
        DType::BF16,
        DType::F32,
    );
    let x = inputs(&mut rng, case, types);
    let pool = uniform(&mut rng, &[5, hv, dv, dk], DType::F32);
    // Entry 2, entry 0 (counted from the end), and 9: outside the pool, so read from the last
    // entry (gathers clamp) and written nowhere (scatters skip), as the fallback does.
    let slots = Array::from_slice(&[2i32, -5, 9], &[3]).unwrap();
    // A pool made in the evaluation, which nothing else holds: written in place.
    let run = || {
        let fresh = multiply(&pool, 1.0).unwrap();
        let (y, p) =
            fast::gated_delta_slots(&x[0], &x[1], &x[2], &x[3], &x[4], &fresh, &slots).unwrap();
        vec![y, p]
    };
    let gpu = on_gpu("fresh pool", &op, run);
    let cpu = on(Device::cpu(), run);
    assert_close("fresh pool y", &gpu[0], &cpu[0], tol(types.0));
    assert_close("fresh pool", &gpu[1], &cpu[1], tol(types.4));
    for untouched in [1, 3, 4] {
        let entry = |p: &Array| part(p, 0, untouched, untouched + 1);
        assert_same(
            &format!("entry {untouched}"),
            &entry(&gpu[1]),
            &entry(&pool),
        );
    }
}

/// Long sequences, `(B, T, Hk, Hv, Dk, Dv)`: one chunk exactly, one and a step, a partial last
/// chunk, many chunks; grouped value heads; Dk and Dv 64 and 128 in each pairing.
const LONG: [(usize, usize, usize, usize, usize, usize); 6] = [
    (1, 64, 1, 1, 64, 64),
    (2, 65, 2, 4, 128, 64),
    (1, 200, 1, 2, 64, 128),
    (1, 1000, 2, 4, 128, 128),
    (2, 130, 1, 1, 128, 128),
    (1, 256, 4, 4, 64, 64),
];

/// Long sequences' types: half-type q and v take the chunked form (bf16 and f16, a bf16
/// state, k of another type), float32 ones the recurrent kernel.
const LONG_TYPES: [Types; 4] = [
    (DType::BF16, DType::BF16, DType::F32, DType::F32, DType::F32),
    (DType::F16, DType::F16, DType::F32, DType::F32, DType::F32),
    (
        DType::BF16,
        DType::F32,
        DType::BF16,
        DType::BF16,
        DType::BF16,
    ),
    (DType::F32, DType::F32, DType::F32, DType::F32, DType::F32),
];

/// Every element within `tol` of the CPU's, relative to the CPU result's largest magnitude
/// (at least 1): the chunked form rounds its operands to the half type, so an error is the
/// size of the largest terms' rounding, not of the element's own.
fn assert_near(name: &str, gpu: &Array, cpu: &Array, tol: f64) {
    assert_eq!(gpu.shape(), cpu.shape(), "{name}: shape");
    assert_eq!(gpu.dtype(), cpu.dtype(), "{name}: dtype");
    let (g, c) = (values(gpu), values(cpu));
    let scale = c.iter().fold(1.0f64, |m, x| m.max(x.abs()));
    for (i, (a, b)) in g.iter().zip(&c).enumerate() {
        assert!(
            (a - b).abs() <= tol * scale,
            "{name}[{i}]: gpu {a} vs cpu {b} (scale {scale})"
        );
    }
}

#[test]
fn gated_delta_long_sequences_match_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(0x6703);
    let op = FastOp::GatedDelta { steps: false };
    for case in LONG {
        for types in LONG_TYPES {
            let x = inputs(&mut rng, case, types);
            let name = name_of(case, types);
            let run = || {
                let (y, s) = fast::gated_delta(&x[0], &x[1], &x[2], &x[3], &x[4], &x[5]).unwrap();
                vec![y, s]
            };
            let gpu = on_gpu(&name, &op, run);
            let cpu = on(Device::cpu(), run);
            // The chunked form's tensor-core rounding (scripts/gated_delta_chunk.py --round
            // sees 2.5e-2 of the largest output at most); float32 runs the recurrent kernel.
            let (ty, ts) = if types.0 == DType::F32 {
                (tol(DType::F32), tol(types.4))
            } else {
                (4e-2, 2e-2)
            };
            assert_near(&format!("{name} y"), &gpu[0], &cpu[0], ty);
            assert_near(&format!("{name} state"), &gpu[1], &cpu[1], ts);
        }
    }
}

/// The chunked form against every step's recurrence: `gated_delta_steps` keeps the recurrent
/// kernel, so its last state and its outputs check the chunked `gated_delta` on the GPU alone.
#[test]
fn gated_delta_chunked_matches_the_recurrent_kernel() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(0x6704);
    let case = (1, 300, 2, 4, 128, 128);
    let types = LONG_TYPES[0];
    let x = inputs(&mut rng, case, types);
    let name = name_of(case, types);
    let chunked = on_gpu(&name, &FastOp::GatedDelta { steps: false }, || {
        let (y, s) = fast::gated_delta(&x[0], &x[1], &x[2], &x[3], &x[4], &x[5]).unwrap();
        vec![y, s]
    });
    let steps = on_gpu(&name, &FastOp::GatedDelta { steps: true }, || {
        let (y, s) = fast::gated_delta_steps(&x[0], &x[1], &x[2], &x[3], &x[4], &x[5]).unwrap();
        vec![y, s]
    });
    let last = on(Device::gpu(0), || {
        squeeze(&part(&steps[1], 1, 299, 300), &[1]).unwrap()
    });
    assert_near(&format!("{name} y"), &chunked[0], &steps[0], 4e-2);
    assert_near(&format!("{name} state"), &chunked[1], &last, 2e-2);
}
