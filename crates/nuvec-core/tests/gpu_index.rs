//! The CUDA indexing, creation and join kernels against the CPU: every result computed on
//! `Device::gpu(0)` equals the CPU's on random inputs, over element types, index types,
//! negative and out-of-range indices, and contiguous, transposed, reversed, broadcast and
//! empty inputs. Scatters with repeated indices are compared within a tolerance where the
//! order of the updates rounds differently. Each test skips itself, saying so, where no CUDA
//! device answers.

mod common;

use common::Rng;
use common::gpu::{both, close, gpu_available, layouts, on, random, tol, values};
use nuvec_core::*;

const DTYPES: [DType; 6] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::I32,
    DType::U8,
    DType::Bool,
];
const INDEX_DTYPES: [DType; 3] = [DType::I32, DType::U32, DType::I64];
const MODES: [ScatterMode; 5] = [
    ScatterMode::Replace,
    ScatterMode::Sum,
    ScatterMode::Prod,
    ScatterMode::Max,
    ScatterMode::Min,
];

/// Random indices in `lo..hi` of `shape` and `dtype` (from 0 for unsigned types).
fn indices(rng: &mut Rng, shape: &[usize], lo: i64, hi: i64, dtype: DType) -> Array {
    let lo = if dtype.category() == Category::Unsigned {
        lo.max(0)
    } else {
        lo
    };
    let n: usize = shape.iter().product();
    let v: Vec<i64> = (0..n)
        .map(|_| lo + rng.below((hi - lo) as u64) as i64)
        .collect();
    Array::from_slice(&v, shape).unwrap().astype(dtype).unwrap()
}

/// `k` distinct indices into an axis of `dim`, each written as `i` or `i - dim` at random
/// (the same position either way; negative only for signed types).
fn distinct(rng: &mut Rng, k: usize, dim: usize, dtype: DType) -> Vec<i64> {
    let mut all: Vec<i64> = (0..dim as i64).collect();
    for i in (1..all.len()).rev() {
        all.swap(i, rng.below(i as u64 + 1) as usize);
    }
    all.truncate(k);
    let signed = dtype.category() == Category::Signed;
    for v in &mut all {
        if signed && rng.below(2) == 0 {
            *v -= dim as i64;
        }
    }
    all
}

/// A 2-D index array with transposed strides (the same values as `idx`).
fn transposed(idx: &Array) -> Array {
    contiguous(idx).unwrap().t().unwrap()
}

/// The relative tolerance of a scatter in `mode`: exact where the order of repeated updates
/// cannot change the result.
fn scatter_tol(mode: ScatterMode, dtype: DType) -> f64 {
    let reorders = matches!(mode, ScatterMode::Sum | ScatterMode::Prod) && dtype.is_float();
    if reorders { tol(dtype) * 8.0 } else { 0.0 }
}

/// `case(rng, x, dtype, idt)` for each element type `dtype` of [`DTYPES`] and index type
/// `idt` of [`INDEX_DTYPES`], with `rng` seeded `seed`: `x` is drawn once per element type
/// (of `shape`, in `[lo, hi)`), before the cases of its index types draw their indices.
fn each_type(
    seed: u64,
    shape: &[usize],
    (lo, hi): (f64, f64),
    mut case: impl FnMut(&mut Rng, &Array, DType, DType),
) {
    let mut rng = Rng::new(seed);
    for dtype in DTYPES {
        let x = random(&mut rng, shape, lo, hi, dtype);
        for idt in INDEX_DTYPES {
            case(&mut rng, &x, dtype, idt);
        }
    }
}

#[test]
fn take_matches_the_cpu() {
    if !gpu_available() {
        return;
    }
    each_type(11, &[7, 5], (-20.0, 20.0), |rng, x, dtype, idt| {
        // Out of range on both sides: clamped.
        let rows = indices(rng, &[3, 4], -9, 10, idt);
        let cols = transposed(&indices(rng, &[2, 3], -7, 8, idt));
        let flat = indices(rng, &[6], -40, 40, idt);
        let none = indices(rng, &[0, 2], 0, 1, idt);
        let one = Array::scalar(-2i32).astype(idt).unwrap();
        for (layout, xl) in layouts(x, &[-2]) {
            both(&format!("take {dtype} {idt} {layout}"), 0.0, || {
                let mut out = vec![
                    take(&xl, &cols, Some(1))?,
                    take(&xl, &cols, Some(-1))?,
                    take(&xl, &none, Some(0))?,
                ];
                if xl.size() > 0 {
                    out.push(take(&xl, &rows, Some(0))?);
                    out.push(take(&xl, &flat, None)?);
                    out.push(take(&xl, &one, Some(0))?);
                }
                Ok(out)
            });
        }
    });
}

#[test]
fn gather_matches_the_cpu() {
    if !gpu_available() {
        return;
    }
    each_type(12, &[6, 5, 4], (-20.0, 20.0), |rng, x, dtype, idt| {
        let rows = transposed(&indices(rng, &[2, 3], -8, 9, idt));
        let cols = indices(rng, &[2], -5, 6, idt);
        let mids = indices(rng, &[4], -6, 7, idt);
        for (layout, xl) in layouts(x, &[-1]) {
            let d0 = xl.shape()[0];
            both(&format!("gather {dtype} {idt} {layout}"), 0.0, || {
                Ok(vec![
                    // Two index arrays broadcast together; windows clamped inside.
                    gather(
                        &xl,
                        &[rows.clone(), cols.clone()],
                        &[0, 2],
                        &[d0.min(2), 5, 3],
                    )?,
                    gather(&xl, std::slice::from_ref(&mids), &[-2], &[d0, 2, 4])?,
                    gather(&xl, &[], &[], &[d0.min(3), 2, 1])?,
                ])
            });
        }
    });
}

#[test]
fn take_along_axis_matches_the_cpu() {
    if !gpu_available() {
        return;
    }
    each_type(13, &[7, 5], (-20.0, 20.0), |rng, x, dtype, idt| {
        let across = indices(rng, &[7, 3], -7, 8, idt);
        let down = transposed(&indices(rng, &[5, 4], -9, 10, idt));
        let wide = indices(rng, &[1, 3], -5, 6, idt);
        let flat = indices(rng, &[9], -40, 40, idt);
        for (layout, xl) in layouts(x, &[-2]) {
            both(
                &format!("take_along_axis {dtype} {idt} {layout}"),
                0.0,
                || {
                    let mut out = vec![take_along_axis(&xl, &wide, Some(1))?];
                    if xl.size() > 0 {
                        out.push(take_along_axis(&xl, &across, Some(1))?);
                        out.push(take_along_axis(&xl, &down, Some(0))?);
                        out.push(take_along_axis(&xl, &flat, None)?);
                    }
                    Ok(out)
                },
            );
        }
    });
}

/// MLX's scatter in `mode`.
fn scatter_mode(
    mode: ScatterMode,
    a: &Array,
    idx: &[Array],
    upd: &Array,
    axes: &[isize],
) -> Result<Array> {
    match mode {
        ScatterMode::Replace => scatter(a, idx, upd, axes),
        ScatterMode::Sum => scatter_add(a, idx, upd, axes),
        ScatterMode::Prod => scatter_prod(a, idx, upd, axes),
        ScatterMode::Max => scatter_max(a, idx, upd, axes),
        ScatterMode::Min => scatter_min(a, idx, upd, axes),
    }
}

#[test]
fn scatter_matches_the_cpu() {
    if !gpu_available() {
        return;
    }
    each_type(14, &[6, 4], (-3.0, 3.0), |rng, x, dtype, idt| {
        for mode in MODES {
            // Replace: distinct rows (one of the repeated updates would win, which one
            // is not fixed); the others repeat rows, and rows out of range are dropped.
            let (rows, cols) = if mode == ScatterMode::Replace {
                let mut r = distinct(rng, 4, 6, idt);
                r.push(9);
                let c = distinct(rng, 5, 5, idt);
                (
                    Array::from_slice(&r, &[5]).unwrap().astype(idt).unwrap(),
                    Array::from_slice(&c, &[5]).unwrap().astype(idt).unwrap(),
                )
            } else {
                (
                    indices(rng, &[5], -7, 8, idt),
                    indices(rng, &[5], -4, 5, idt),
                )
            };
            for (layout, xl) in layouts(x, &[-2]) {
                let d0 = xl.shape()[0].min(1);
                let u1 = random(rng, &[5, d0, 4], -3.0, 3.0, dtype);
                let u2 = random(rng, &[5, d0, 2], -3.0, 3.0, dtype);
                let tol = scatter_tol(mode, dtype);
                let name = format!("scatter {mode:?} {dtype} {idt} {layout}");
                both(&name, tol, || {
                    // Windows of two columns: a start past column 2 is dropped.
                    let idx = [rows.clone(), cols.clone()];
                    Ok(vec![
                        scatter_mode(mode, &xl, std::slice::from_ref(&rows), &u1, &[0])?,
                        scatter_mode(mode, &xl, &idx, &u2, &[0, 1])?,
                    ])
                });
            }
        }
    });
}

/// `put_along_axis` in `mode`, built as the primitive for the modes without a function.
fn scatter_axis_mode(
    mode: ScatterMode,
    a: &Array,
    idx: &Array,
    vals: &Array,
    axis: usize,
) -> Result<Array> {
    match mode {
        ScatterMode::Replace => put_along_axis(a, idx, vals, Some(axis as isize)),
        ScatterMode::Sum => scatter_add_axis(a, idx, vals, Some(axis as isize)),
        _ => Ok(Array::from_op(
            Primitive::Index(IndexOp::ScatterAxis { axis, mode }),
            vec![a.clone(), idx.clone(), vals.clone()],
        )?
        .remove(0)),
    }
}

#[test]
fn put_along_axis_matches_the_cpu() {
    if !gpu_available() {
        return;
    }
    each_type(15, &[6, 5], (-3.0, 3.0), |rng, x, dtype, idt| {
        for mode in MODES {
            for (layout, xl) in layouts(x, &[-2]) {
                let rows = xl.shape()[0];
                // Replace: distinct columns per row, plus one out of range (dropped).
                let idx = if mode == ScatterMode::Replace {
                    let mut v = Vec::new();
                    for _ in 0..rows {
                        v.extend(distinct(rng, 3, 5, idt));
                        v.push(7);
                    }
                    Array::from_slice(&v, &[rows, 4])
                        .unwrap()
                        .astype(idt)
                        .unwrap()
                } else {
                    indices(rng, &[rows, 4], -7, 8, idt)
                };
                let vals = random(rng, &[rows, 4], -3.0, 3.0, dtype);
                // Along the rows, from a transposed index array.
                let down = transposed(&indices(rng, &[5, 3], -7, 8, idt));
                let v = random(rng, &[3, 5], -3.0, 3.0, dtype);
                let name = format!("put_along_axis {mode:?} {dtype} {idt} {layout}");
                both(&name, scatter_tol(mode, dtype), || {
                    let mut out = vec![scatter_axis_mode(mode, &xl, &idx, &vals, 1)?];
                    if mode != ScatterMode::Replace && rows > 0 {
                        out.push(scatter_axis_mode(mode, &xl, &down, &v, 0)?);
                    }
                    Ok(out)
                });
            }
        }
    });
}

/// `slice_update` in `mode`.
fn slice_update_mode(
    mode: ScatterMode,
    src: &Array,
    upd: &Array,
    slices: &[SliceArg],
) -> Result<Array> {
    match mode {
        ScatterMode::Replace => slice_update(src, upd, slices),
        ScatterMode::Sum => slice_update_add(src, upd, slices),
        ScatterMode::Prod => slice_update_prod(src, upd, slices),
        ScatterMode::Max => slice_update_max(src, upd, slices),
        ScatterMode::Min => slice_update_min(src, upd, slices),
    }
}

#[test]
fn slice_update_matches_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(16);
    let s = SliceArg::new;
    for dtype in DTYPES {
        let x = random(&mut rng, &[6, 5], -3.0, 3.0, dtype);
        for mode in MODES {
            for (layout, xl) in layouts(&x, &[-2]) {
                let region = [s(Some(1), Some(5), 2), s(None, None, -2)];
                let rows = if xl.size() > 0 { 2 } else { 0 };
                let u = random(&mut rng, &[rows, 3], -3.0, 3.0, dtype);
                let ut = transposed(&random(&mut rng, &[3, rows], -3.0, 3.0, dtype));
                let wide = random(&mut rng, &[1, 3], -3.0, 3.0, dtype);
                let name = format!("slice_update {mode:?} {dtype} {layout}");
                // No position repeats: the same roundings in the same order.
                both(&name, 0.0, || {
                    let mut out = vec![
                        slice_update_mode(mode, &xl, &u, &region)?,
                        slice_update_mode(mode, &xl, &ut, &region)?,
                        slice_update_mode(mode, &xl, &wide, &region)?,
                    ];
                    if xl.size() > 0 {
                        let last = [SliceArg::index(-1)];
                        out.push(slice_update_mode(
                            mode,
                            &xl,
                            &Array::scalar(1i32).astype(dtype)?,
                            &last,
                        )?);
                    }
                    Ok(out)
                });
            }
        }
    }
}

/// The values of `f()`'s result computed on the CPU.
fn cpu_values(f: impl FnOnce() -> Result<Array>) -> Vec<f64> {
    on(Device::cpu(), || values(&f().unwrap()))
}

/// An update of its target array.
type Update<'a> = &'a dyn Fn(&Array) -> Result<Array>;

#[test]
fn updates_write_owned_targets_in_place_and_leave_shared_ones() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(17);
    let region = [
        SliceArg::new(Some(3), Some(60), 3),
        SliceArg::new(None, None, -1),
    ];
    for dtype in [DType::F32, DType::F16, DType::I32, DType::Bool] {
        let base = random(&mut rng, &[64, 33], -3.0, 3.0, dtype);
        let u = random(&mut rng, &[19, 33], -3.0, 3.0, dtype);
        let rows = indices(&mut rng, &[40], -64, 64, DType::I64);
        let upd = random(&mut rng, &[40, 1, 33], -3.0, 3.0, dtype);
        let write = |a: &Array| slice_update(a, &u, &region);
        let add = |a: &Array| scatter_add(a, std::slice::from_ref(&rows), &upd, &[0]);
        let want_slice = cpu_values(|| write(&copy(&base)?));
        let want_add = cpu_values(|| add(&copy(&base)?));
        let add_tol = scatter_tol(ScatterMode::Sum, dtype);
        // Each update with the CPU's result on a copy of `base` and the tolerance it is held to.
        let updates: [(&str, Update, &[f64], f64); 2] = [
            ("slice_update", &write, &want_slice, 0.0),
            ("scatter_add", &add, &want_add, add_tol),
        ];
        let before = values(&base);
        let check = |name: &str, got: &[f64], want: &[f64], tol: f64| {
            assert_eq!(got.len(), want.len(), "{name} {dtype}");
            for (k, (g, w)) in got.iter().zip(want).enumerate() {
                assert!(
                    close(*g, *w, tol),
                    "{name} {dtype}[{k}]: gpu {g} vs cpu {w}"
                );
            }
        };
        on(Device::gpu(0), || {
            // Targets nobody else holds, made on the device: written in place.
            for (name, update, want, tol) in &updates {
                let a = copy(&base).unwrap();
                a.eval().unwrap();
                let b = update(&a).unwrap();
                drop(a);
                check(&format!("{name}, owned"), &values(&b), want, *tol);
            }
            // A host array nobody else holds: uploaded, then written there.
            let h = on(Device::cpu(), || {
                let h = copy(&base).unwrap();
                h.eval().unwrap();
                h
            });
            let d = write(&h).unwrap();
            drop(h);
            check("slice_update, host", &values(&d), &want_slice, 0.0);
            // Held targets keep their values.
            let a = copy(&base).unwrap();
            a.eval().unwrap();
            let keep = a.clone();
            let got: Vec<Array> = updates.iter().map(|(_, f, ..)| f(&a).unwrap()).collect();
            drop(a);
            for ((name, _, want, tol), b) in updates.iter().zip(&got) {
                check(&format!("{name}, shared"), &values(b), want, *tol);
            }
            check("shared target", &values(&keep), &before, 0.0);
            // A chain: each update owns the previous result.
            let mut chain = copy(&base).unwrap();
            for _ in 0..3 {
                chain = slice_update_add(&chain, &u, &region).unwrap();
            }
            let want_chain = cpu_values(|| {
                let mut c = copy(&base)?;
                for _ in 0..3 {
                    c = slice_update_add(&c, &u, &region)?;
                }
                Ok(c)
            });
            check(
                "slice_update_add chain",
                &values(&chain),
                &want_chain,
                tol(dtype),
            );
        });
    }
}

#[test]
fn scatter_add_with_many_repeats_sums_every_update() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(18);
    for dtype in [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::U8,
        DType::I64,
    ] {
        // 20000 updates of 1 into 61 elements: atomics on few addresses, at every byte
        // position of a word. Adding ones gives the same sums in any order (halves stop
        // growing at the same point), so the results are exact.
        let x = Array::from_slice(&[0i32; 61], &[61])
            .unwrap()
            .astype(dtype)
            .unwrap();
        let idx = indices(&mut rng, &[20000], -61, 61, DType::I32);
        let ones = Array::from_slice(&[1i32; 20000], &[20000])
            .unwrap()
            .astype(dtype)
            .unwrap();
        both(&format!("scatter_add_axis repeats {dtype}"), 0.0, || {
            Ok(vec![
                scatter_add_axis(&x, &idx, &ones, Some(0))?,
                scatter_add(
                    &x,
                    std::slice::from_ref(&idx),
                    &ones.reshape(&[-1, 1])?,
                    &[0],
                )?,
            ])
        });
    }
}

#[test]
fn arange_matches_the_cpu_exactly() {
    if !gpu_available() {
        return;
    }
    let cases = [
        (0.0, 10.0, 1.0),
        (-3.5, 4.25, 0.75),
        (5.0, -5.0, -1.5),
        (0.1, 1.0, 0.1),
        (1e6, 1e6 + 100.0, 0.37),
        (-2.7, 9.2, 1.3),
        (0.0, 70000.0, 1.0),
        (3.0, 3.0, 1.0),
    ];
    for dtype in [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::I32,
        DType::U8,
        DType::I16,
        DType::I64,
        DType::U64,
    ] {
        for (start, stop, step) in cases {
            both(
                &format!("arange {start} {stop} {step} {dtype}"),
                0.0,
                || Ok(vec![arange(start, stop, step, dtype)?]),
            );
        }
    }
}

/// `arange(0, n, 1)` of u32 and i32 is a view of a sequence the device keeps: each length
/// counts from zero, growing the kept one leaves earlier views whole, and outputs and updates
/// of such a view (whose buffer looks free to reuse) never write into the kept sequence.
#[test]
fn kept_counting_sequences_count_and_are_never_written() {
    if !gpu_available() {
        return;
    }
    let counting = |n: usize| (0..n).map(|i| i as f64).collect::<Vec<f64>>();
    on(Device::gpu(0), || {
        for dtype in [DType::U32, DType::I32] {
            let short = arange(0.0, 7.0, 1.0, dtype).unwrap();
            short.eval().unwrap();
            for n in [1, 7, 4096, 4097, 70_000, 3] {
                let a = arange(0.0, n as f64, 1.0, dtype).unwrap();
                assert_eq!(values(&a), counting(n), "arange {n} {dtype}");
            }
            assert_eq!(
                values(&short),
                counting(7),
                "{dtype}: a view from before the growth"
            );
            // Each would take its input's buffer if nothing else held it.
            let plus = add(arange(0.0, 16.0, 1.0, dtype).unwrap(), 5).unwrap();
            let want: Vec<f64> = (5..21).map(f64::from).collect();
            assert_eq!(values(&plus), want, "{dtype}: arange + 5");
            let updated = slice_update(
                &arange(0.0, 16.0, 1.0, dtype).unwrap(),
                &full(&[4], 100, dtype).unwrap(),
                &[SliceArg::new(Some(2), Some(6), 1)],
            )
            .unwrap();
            let mut want = counting(16);
            want[2..6].fill(100.0);
            assert_eq!(values(&updated), want, "{dtype}: slice_update");
            for n in [16, 70_000] {
                let a = arange(0.0, n as f64, 1.0, dtype).unwrap();
                assert_eq!(
                    values(&a),
                    counting(n),
                    "{dtype}: arange {n} after the writes"
                );
            }
        }
    });
}

#[test]
fn concatenate_and_pad_match_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(19);
    for dtype in DTYPES {
        let x = random(&mut rng, &[7, 5], -20.0, 20.0, dtype);
        let y = random(&mut rng, &[3, 5], -20.0, 20.0, dtype);
        let z = random(&mut rng, &[7, 2], -20.0, 20.0, dtype);
        let yt = transposed(&random(&mut rng, &[5, 3], -20.0, 20.0, dtype));
        for (layout, xl) in layouts(&x, &[-2]) {
            both(&format!("concatenate/pad {dtype} {layout}"), 0.0, || {
                let empty = slice(&y, &[SliceArg::new(Some(0), Some(0), 1)])?;
                let mut out = vec![
                    concatenate(&[xl.clone(), y.clone()], 0)?,
                    concatenate(&[yt.clone(), empty, xl.clone(), xl.clone()], 0)?,
                    pad(&xl, &[(1, 2), (0, 3)], 1)?,
                    pad(&xl, &[(2, 0)], Array::scalar(-4.5f32))?,
                    // Copies that the shape family makes.
                    contiguous(&xl)?,
                    copy(&xl)?,
                    xl.reshape(&[-1])?,
                ];
                if xl.size() > 0 {
                    out.push(concatenate(&[z.clone(), xl.clone(), z.clone()], 1)?);
                    out.push(concatenate(&[xl.clone(), xl.clone()], -1)?);
                }
                Ok(out)
            });
        }
    }
}
