//! The CUDA backend as a whole: arrays past 2^31 elements, device memory over many steps,
//! transforms computed on the GPU, values read from another thread, and the elementwise
//! kernels' 16-byte fast path on inputs that break its alignment. Each test skips itself,
//! saying so, where no CUDA device answers.
//!
//! The tests take one lock in turn: memory counters are per process, and the large case needs
//! the device to itself.

mod common;

use std::sync::{Mutex, MutexGuard};

use common::Rng;
use common::gpu::{both, gpu_available, on, random, tol, values};
use nuvec_core::*;

/// One test at a time in this file (memory counters and device memory are shared).
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// `x[start..start + len]` of a 1-d array: contiguous, its first element `start` elements
/// into the buffer.
fn window(x: &Array, start: usize, len: usize) -> Array {
    slice(
        x,
        &[SliceArg::new(
            Some(start as isize),
            Some((start + len) as isize),
            1,
        )],
    )
    .unwrap()
}

/// u8 addition over 2^31 + 5 elements (past every 32-bit index): `a[i] = i mod 251` and
/// `b[i] = i mod 256` are built on the GPU (a strided copy of a broadcast row, then a slice),
/// `a + b` runs the 16-byte kernel, and the result read back matches `(a[i] + b[i]) mod 256`
/// at sampled positions, around 2^31 and at the end.
#[test]
fn addition_past_two_to_the_thirty_one_elements() {
    let _lock = serial();
    if !gpu_available() {
        return;
    }
    const N: usize = (1 << 31) + 5;
    let periodic = |period: usize| -> Array {
        let row = arange(0.0, period as f64, 1.0, DType::U8)
            .unwrap()
            .reshape(&[1, period as isize])
            .unwrap();
        let rows = N.div_ceil(period);
        let flat = broadcast_to(&row, &[rows, period])
            .unwrap()
            .reshape(&[(rows * period) as isize])
            .unwrap();
        window(&flat, 0, N)
    };
    let got = on(Device::gpu(0), || {
        let a = periodic(251);
        let b = periodic(256);
        let c = add(&a, &b).unwrap();
        assert_eq!(c.shape(), [N]);
        c.to_vec::<u8>().unwrap()
    });
    assert_eq!(got.len(), N);
    let expected = |i: usize| ((i % 251 + i % 256) % 256) as u8;
    let mut positions: Vec<usize> = (0..N).step_by(9973).collect();
    positions.extend((1usize << 31) - 4096..N);
    for i in positions {
        assert_eq!(got[i], expected(i), "element {i}");
    }
    drop(got);
    clear_device_cache().unwrap();
}

/// 10,000 steps that each create arrays (uploads), compute on the GPU, read a value back and
/// drop everything leave the device's active memory where it was after a warm-up; so do
/// steps with buffers large enough to go through the staging memory.
#[test]
fn active_memory_stays_flat_over_ten_thousand_steps() {
    let _lock = serial();
    if !gpu_available() {
        return;
    }
    on(Device::gpu(0), || {
        let step = |k: usize| {
            let n = 1 + k % 300;
            let v: Vec<f32> = (0..n).map(|i| (i + k) as f32).collect();
            let x = Array::from_slice(&v, &[n]).unwrap();
            let y = multiply(exp(&negative(&x).unwrap()).unwrap(), 2.0).unwrap();
            let z = where_(greater(&x, 10.0).unwrap(), &y, &x).unwrap();
            let z = z.astype(DType::BF16).unwrap();
            z.eval().unwrap();
            if k.is_multiple_of(100) {
                let got = z.to_vec::<bf16>().unwrap();
                assert_eq!(got.len(), n);
                // x[0] = k: kept below 11, else 2·e^(−k).
                let want = if k > 10 {
                    2.0 * (-(k as f64)).exp()
                } else {
                    k as f64
                };
                let g = f64::from(got[0].to_f32());
                assert!(
                    (g - want).abs() <= 1e-2 * want.abs() + 1e-30,
                    "step {k}: {g} vs {want}"
                );
            }
        };
        let big = |k: usize| {
            // 8 MiB each way: above the size that transfers go direct.
            let n = 2 << 20;
            let v: Vec<f32> = (0..n).map(|i| (i % 1000 + k) as f32).collect();
            let x = Array::from_slice(&v, &[n]).unwrap();
            let y = add(&x, 1.0).unwrap();
            let got = y.to_vec::<f32>().unwrap();
            assert_eq!(got[n - 1], ((n - 1) % 1000 + k + 1) as f32);
        };
        for k in 0..200 {
            step(k);
        }
        big(0);
        let before = memory_stats().active;
        for k in 0..10_000 {
            step(k);
            if k % 2_000 == 0 {
                big(k);
            }
        }
        assert_eq!(memory_stats().active, before, "{:?}", memory_stats());
    });
}

/// `grad` and `vmap` evaluated on the GPU's default stream equal the CPU's.
#[test]
fn transforms_on_the_gpu_match_the_cpu() {
    let _lock = serial();
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(11);
    let x = random(&mut rng, &[6, 5], -1.0, 1.0, DType::F32);
    let w = random(&mut rng, &[6, 5], -1.0, 1.0, DType::F32);
    // d/dx sum(tanh(x·w) + exp(x)) = w·(1 − tanh²(x·w)) + exp(x), and likewise for w.
    both("grad", 1e-5, || {
        let f = |v: &[Array]| {
            let t = tanh(&multiply(&v[0], &v[1])?)?;
            Ok(vec![sum(&add(&t, &exp(&v[0])?)?, &[], false)?])
        };
        grad(f, &[0, 1])(&[x.clone(), w.clone()])
    });
    // The formula as well, on the GPU.
    let (gx, formula) = on(Device::gpu(0), || {
        let f = |v: &[Array]| {
            let t = tanh(&multiply(&v[0], &v[1])?)?;
            Ok(vec![sum(&add(&t, &exp(&v[0])?)?, &[], false)?])
        };
        let g = grad(f, &[0])(&[x.clone(), w.clone()]).unwrap();
        let t = tanh(&multiply(&x, &w).unwrap()).unwrap();
        let sech2 = subtract(1.0, square(&t).unwrap()).unwrap();
        let formula = add(multiply(&w, &sech2).unwrap(), exp(&x).unwrap()).unwrap();
        (values(&g[0]), values(&formula))
    });
    for (k, (a, b)) in gx.iter().zip(&formula).enumerate() {
        assert!(
            (a - b).abs() <= 1e-5 * b.abs().max(1.0),
            "[{k}]: {a} vs {b}"
        );
    }
    // vmap over rows of x, batch axis 0, with w shared; and over columns (axis 1).
    both("vmap rows", 1e-5, || {
        let f = |v: &[Array]| Ok(vec![sum(&multiply(&exp(&v[0])?, &v[1])?, &[-1], false)?]);
        vmap(f, &[Some(0), None], &[0])(&[
            x.clone(),
            slice(&w, &[SliceArg::new(Some(0), Some(1), 1)])?.reshape(&[5])?,
        ])
    });
    both("vmap columns", 1e-5, || {
        let f = |v: &[Array]| Ok(vec![maximum(&tanh(&v[0])?, &v[1])?]);
        vmap(f, &[Some(1), Some(1)], &[1])(&[x.clone(), w.clone()])
    });
}

/// `async_eval` returns at once with work queued; other threads then read the values (several
/// at the same time, so that one goes through the staging memory while the others copy
/// directly) and each sees the right elements.
#[test]
fn async_values_read_from_other_threads() {
    let _lock = serial();
    if !gpu_available() {
        return;
    }
    let n = 3 << 20;
    let ys: Vec<Array> = on(Device::gpu(0), || {
        let x = arange(0.0, n as f64, 1.0, DType::F32).unwrap();
        let ys: Vec<Array> = (1..=4)
            .map(|k| add(multiply(&x, k as f64).unwrap(), 1.0).unwrap())
            .collect();
        async_eval(&ys).unwrap();
        ys
    });
    let handles: Vec<_> = ys
        .into_iter()
        .enumerate()
        .map(|(j, y)| std::thread::spawn(move || (j + 1, y.to_vec::<f32>().unwrap())))
        .collect();
    for h in handles {
        let (k, got) = h.join().unwrap();
        assert_eq!(got.len(), n);
        for i in (0..n).step_by(997).chain(n - 10..n) {
            assert_eq!(got[i], (i * k + 1) as f32, "y{k}[{i}]");
        }
    }
}

/// Contiguous inputs whose first element is not 16-byte aligned (windows from element 1, 3
/// or 8 of a buffer) and whose lengths leave a tail past the last whole pack, in the types
/// whose packs differ in width: unary, binary (both contiguous, and one a broadcast element),
/// `where_` and casts agree with the CPU.
#[test]
fn sixteen_byte_path_handles_offsets_and_tails() {
    let _lock = serial();
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(5);
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::I8] {
        let float = dtype != DType::I8;
        let (lo, hi) = if float { (-2.0, 2.0) } else { (-60.0, 60.0) };
        let base_a = random(&mut rng, &[4200], lo, hi, dtype);
        let base_b = random(&mut rng, &[4200], lo, hi, dtype);
        let cond = greater(random(&mut rng, &[4200], -1.0, 1.0, DType::F32), 0.0).unwrap();
        // Integer results have no rounding: compared exactly.
        let t = if float { tol(dtype) } else { 0.0 };
        for (sa, sb) in [(0, 0), (1, 1), (0, 1), (3, 8), (8, 0)] {
            for len in [1, 7, 9, 17, 33, 4099] {
                let a = window(&base_a, sa, len);
                let b = window(&base_b, sb, len);
                let c = window(&cond, sa, len);
                let tag = format!("{dtype:?} a@{sa} b@{sb} len {len}");
                both(&format!("binary {tag}"), t, || {
                    Ok(vec![
                        add(&a, &b)?,
                        multiply(&a, &b)?,
                        maximum(&a, &b)?,
                        less(&a, &b)?,
                        add(&a, &full(&[len], 3, dtype)?)?,
                        subtract(&full(&[len], 3, dtype)?, &b)?,
                        where_(&c, &a, &b)?,
                    ])
                });
                both(&format!("unary and casts {tag}"), t.max(1e-2), || {
                    let mut out = vec![
                        logical_not(&a)?,
                        a.astype(DType::F32)?,
                        a.astype(DType::BF16)?,
                        a.astype(DType::I8)?,
                        a.astype(DType::F64)?,
                        a.astype(DType::Bool)?,
                    ];
                    if float {
                        out.extend([exp(&a)?, negative(&a)?, isnan(&a)?]);
                    }
                    Ok(out)
                });
            }
        }
    }
}
