//! The CUDA sort and random-bits kernels against the CPU: sorts, argsorts and searchsorted
//! equal the CPU's exactly (stable order, NaN last, ties, every layout), partitions keep
//! the partition contract with the CPU's element at `kth`, and random bits (and the samplers
//! built on them) match the CPU bit for bit. Each test skips itself, saying so, where no
//! CUDA device answers.

mod common;

use common::gpu::{gpu_available, layouts, on, values};
use common::{Rng, lanes};
use nuvec_core::*;

/// `f` on both devices; results exactly equal (same bits, where NaN any NaN).
fn exact(name: &str, f: impl Fn() -> Result<Vec<Array>>) {
    let cpu = on(Device::cpu(), &f).unwrap_or_else(|e| panic!("{name} on the CPU: {e}"));
    let gpu = on(Device::gpu(0), &f).unwrap_or_else(|e| panic!("{name} on the GPU: {e}"));
    compare(name, &cpu, &gpu, 0.0);
}

/// Outputs of equal shapes, dtypes and values: bit-equal when `tol` is 0, else within `tol`
/// relative.
fn compare(name: &str, cpu: &[Array], gpu: &[Array], tol: f64) {
    assert_eq!(cpu.len(), gpu.len(), "{name}: outputs");
    for (i, (c, g)) in cpu.iter().zip(gpu).enumerate() {
        assert_eq!(c.shape(), g.shape(), "{name} #{i}: shape");
        assert_eq!(c.dtype(), g.dtype(), "{name} #{i}: dtype");
        let (cv, gv) = (values(c), values(g));
        assert_eq!(cv.len(), gv.len(), "{name} #{i}: size");
        for (k, (a, b)) in gv.iter().zip(&cv).enumerate() {
            let ok = (a.is_nan() && b.is_nan())
                || a.to_bits() == b.to_bits()
                || (tol > 0.0 && (a - b).abs() <= tol * b.abs().max(1.0));
            assert!(ok, "{name} #{i}[{k}]: gpu {a} vs cpu {b}");
        }
    }
}

/// `n` values of `dtype` with many ties; floats also hold NaN, both zeros and infinities.
fn data(rng: &mut Rng, shape: &[usize], dtype: DType) -> Array {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|_| match dtype {
            DType::Bool => rng.below(2) as f64,
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => rng.below(40) as f64,
            DType::F16 | DType::BF16 | DType::F32 | DType::F64 => match rng.below(20) {
                0 => f64::NAN,
                1 => -0.0,
                2 => 0.0,
                3 => f64::INFINITY,
                4 => f64::NEG_INFINITY,
                5 => -f64::NAN,
                _ => (rng.below(41) as f64 - 20.0) / 4.0,
            },
            _ => rng.below(61) as f64 - 30.0,
        })
        .collect();
    Array::from_slice(&v, shape).unwrap().astype(dtype).unwrap()
}

const DTYPES: &[DType] = &[
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::I32,
    DType::U8,
    DType::Bool,
    DType::F64,
    DType::I64,
    DType::I8,
    DType::U16,
];

fn sort_both(x: &Array, axis: Option<isize>) -> Result<Vec<Array>> {
    let (v, i) = sort_with_indices(x, axis)?;
    Ok(vec![v, i, sort(x, axis)?, argsort(x, axis)?])
}

#[test]
fn sorts_match_the_cpu_over_dtypes_lengths_and_axes() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(11);
    // One block per lane up to 4096, tiles and merge passes beyond (4097: one element past).
    let lengths = [1usize, 2, 7, 33, 1000, 4096, 4097, 5000, 20000];
    for &dtype in DTYPES {
        for &n in &lengths {
            let cases: [(&str, Vec<usize>, isize); 3] = [
                ("last", vec![3, n], 1),
                ("first", vec![n, 3], 0),
                ("middle", vec![2, n, 2], 1),
            ];
            for (where_, shape, axis) in cases {
                let x = data(&mut rng, &shape, dtype);
                exact(&format!("sort {dtype} n={n} {where_}"), || {
                    sort_both(&x, Some(axis))
                });
            }
        }
        let x = data(&mut rng, &[5, 300], dtype);
        exact(&format!("sort {dtype} flat"), || sort_both(&x, None));
        exact(&format!("sort {dtype} axis -2"), || sort_both(&x, Some(-2)));
    }
}

#[test]
fn long_lanes_take_several_merge_passes() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(12);
    // 70000 = 17 tiles and a bit: five merge passes, runs without a partner on the way.
    for dtype in [DType::F32, DType::I64, DType::BF16] {
        let x = data(&mut rng, &[70000], dtype);
        exact(&format!("long {dtype}"), || sort_both(&x, Some(0)));
        let x = data(&mut rng, &[9000, 2], dtype);
        exact(&format!("long {dtype} strided"), || sort_both(&x, Some(0)));
    }
}

#[test]
fn sorts_read_every_layout() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(13);
    for &dtype in DTYPES {
        for shape in [[33usize, 20], [6, 5000]] {
            let x = data(&mut rng, &shape, dtype);
            // Reversed along both axes, plus a view of every other column.
            let mut views = layouts(&x, &[-2, -1]);
            let part = slice(&x, &[SliceArg::full(), SliceArg::new(Some(1), None, 2)]).unwrap();
            views.insert(3, ("sliced", part));
            for (layout, xl) in views {
                for axis in [0, 1, -1] {
                    exact(&format!("sort {dtype} {shape:?} {layout} {axis}"), || {
                        sort_both(&xl, Some(axis))
                    });
                }
            }
        }
    }
}

#[test]
fn empty_and_scalar_sorts() {
    if !gpu_available() {
        return;
    }
    for shape in [vec![0usize, 5], vec![4, 0], vec![0]] {
        let x = zeros(&shape, DType::F32).unwrap();
        for axis in [Some(0), Some(-1), None] {
            exact(&format!("empty {shape:?} {axis:?}"), || sort_both(&x, axis));
        }
    }
    let s = Array::scalar(2.5f32);
    exact("scalar", || sort_both(&s, None));
}

/// The GPU's partition of `x` against the CPU's stable sort: at `kth` the same element
/// (value and index); before it exactly the elements the sort puts before it, after it the
/// rest, each value next to its own index.
fn check_partition(name: &str, x: &Array, kth: isize, axis: isize) {
    let (sv, si) = on(Device::cpu(), || sort_with_indices(x, Some(axis))).unwrap();
    let (pv, pi) = on(Device::gpu(0), || {
        partition_with_indices(x, kth, Some(axis))
    })
    .unwrap_or_else(|e| panic!("{name} on the GPU: {e}"));
    let only_i = on(Device::gpu(0), || argpartition(x, kth, Some(axis))).unwrap();
    assert_eq!(pv.shape(), x.shape(), "{name}: shape");
    assert_eq!(pv.dtype(), x.dtype(), "{name}: dtype");
    let (sv, si, pv, pi) = (
        values(&sv),
        si.to_vec::<u32>().unwrap(),
        values(&pv),
        pi.to_vec::<u32>().unwrap(),
    );
    assert_eq!(only_i.to_vec::<u32>().unwrap(), pi, "{name}: argpartition");
    let ax = if axis < 0 {
        axis + x.ndim() as isize
    } else {
        axis
    } as usize;
    let n = x.shape()[ax] as isize;
    let k = if kth < 0 { kth + n } else { kth } as usize;
    for lane in lanes(x.shape(), ax) {
        // (index, value bits) of a range of positions, ordered by index.
        let side = |idx: &[u32], val: &[f64], range: std::ops::Range<usize>| {
            let mut v: Vec<(u32, u64)> = lane[range]
                .iter()
                .map(|&p| {
                    let bits = if val[p].is_nan() { 1 } else { val[p].to_bits() };
                    (idx[p], bits)
                })
                .collect();
            v.sort_unstable();
            v
        };
        for range in [0..k, k..k + 1, k + 1..lane.len()] {
            assert_eq!(
                side(&pi, &pv, range.clone()),
                side(&si, &sv, range.clone()),
                "{name}: positions {range:?}"
            );
        }
    }
}

#[test]
fn partitions_keep_the_contract() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(14);
    for &dtype in DTYPES {
        for n in [1usize, 7, 1000, 5000] {
            let x = data(&mut rng, &[3, n], dtype);
            for kth in [0, (n / 2) as isize, -1] {
                check_partition(&format!("{dtype} n={n} kth={kth}"), &x, kth, 1);
            }
            let y = data(&mut rng, &[n, 4], dtype);
            check_partition(&format!("{dtype} n={n} first"), &y, (n / 3) as isize, 0);
            let t = y.t().unwrap();
            check_partition(&format!("{dtype} n={n} transposed"), &t, -1, 1);
        }
    }
}

/// Positions `start..stop` of `x` along `axis`.
fn slice_axis(x: &Array, axis: isize, start: usize, stop: usize) -> Array {
    let mut args = vec![SliceArg::full(); x.ndim()];
    args[axis as usize] = SliceArg::new(Some(start as isize), Some(stop as isize), 1);
    slice(x, &args).unwrap()
}

#[test]
fn topk_matches_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(15);
    for dtype in [DType::F32, DType::I32, DType::F16] {
        for (shape, k, axis) in [([4usize, 1000], 10, 1), ([300, 3], 300, 0), ([2, 9], 0, 1)] {
            let x = data(&mut rng, &shape, dtype);
            let get = |d: Device| on(d, || topk(&x, k, Some(axis))).unwrap();
            let (c, g) = (get(Device::cpu()), get(Device::gpu(0)));
            assert_eq!(c.shape(), g.shape());
            // The k-th largest first; the others in no particular order.
            let summary = |t: &Array| {
                let first = slice_axis(t, axis, 0, k.min(1));
                vec![sort(t, Some(axis)).unwrap(), first]
            };
            compare(
                &format!("topk {dtype} {shape:?}"),
                &summary(&c),
                &summary(&g),
                0.0,
            );
        }
    }
}

#[test]
fn searchsorted_matches_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(16);
    for &dtype in DTYPES {
        for (na, vshape) in [
            (100usize, [7usize, 9]),
            (5000, [40, 30]),
            (1, [3, 1]),
            (0, [2, 2]),
        ] {
            let raw = data(&mut rng, &[na], dtype);
            let a = on(Device::cpu(), || sort(&raw, None)).unwrap();
            a.eval().unwrap();
            // The same sorted values through a negative stride: a descending copy, reversed.
            let down = contiguous(&slice(&a, &[SliceArg::new(None, None, -1)]).unwrap()).unwrap();
            let a_rev = slice(&down, &[SliceArg::new(None, None, -1)]).unwrap();
            let v = data(&mut rng, &vshape, dtype);
            let vt = v.t().unwrap();
            for right in [false, true] {
                exact(&format!("searchsorted {dtype} {na} {right}"), || {
                    Ok(vec![
                        searchsorted(&a, &v, right)?,
                        searchsorted(&a, &vt, right)?,
                        searchsorted(&a, &v.reshape(&[-1])?, right)?,
                        searchsorted(&a_rev, &v, right)?,
                    ])
                });
            }
        }
    }
}

/// Keys in several layouts, with the axis that batches them (`None`: one key): a batch of
/// three (contiguous), a batch read through a step of two, and a batch along the last axis
/// (the key pairs down the columns, moved into place by `vmap` as a strided view).
fn keys() -> Vec<(&'static str, Array, Option<usize>)> {
    let six = random::split(&random::key(5), 6).unwrap();
    let stepped = slice(&six, &[SliceArg::new(None, None, 2), SliceArg::full()]).unwrap();
    let columns = contiguous(&six.t().unwrap()).unwrap();
    vec![
        ("single", random::key(42), None),
        ("batch", random::split(&random::key(7), 3).unwrap(), Some(0)),
        ("stepped", stepped, Some(0)),
        ("columns", columns, Some(1)),
    ]
}

/// `random::bits` of `shape` for each key of `key` (batched along `axis`, through `vmap`).
fn bits_of(key: &Array, axis: Option<usize>, shape: &[usize], width: usize) -> Result<Array> {
    match axis {
        None => random::bits(shape, width, Some(key)),
        Some(ax) => {
            let f = |xs: &[Array]| Ok(vec![random::bits(shape, width, Some(&xs[0]))?]);
            Ok(vmap(f, &[Some(ax)], &[0])(std::slice::from_ref(key))?.remove(0))
        }
    }
}

#[test]
fn random_bits_match_the_cpu_bit_for_bit() {
    if !gpu_available() {
        return;
    }
    let shapes: [&[usize]; 9] = [
        &[],
        &[0],
        &[1],
        &[2],
        &[3],
        &[7],
        &[3, 5],
        &[1001],
        &[2, 3, 4],
    ];
    for (name, key, axis) in keys() {
        for shape in shapes {
            for width in [1, 2, 4] {
                exact(&format!("bits {name} {shape:?} width {width}"), || {
                    Ok(vec![bits_of(&key, axis, shape, width)?])
                });
            }
        }
    }
    // Splitting is the bits primitive too.
    let k = random::key(3);
    exact("split", || Ok(vec![random::split(&k, 5)?]));
    // Lengths around word and block boundaries for each width.
    let k = random::key(9);
    for n in 0..40usize {
        for width in [1, 2, 4] {
            exact(&format!("bits [{n}] width {width}"), || {
                Ok(vec![random::bits(&[n], width, Some(&k))?])
            });
        }
    }
}

#[test]
fn samplers_match_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(17);
    let shapes: [&[usize]; 4] = [&[], &[5], &[3, 7], &[1000]];
    let k = random::key(21);
    for shape in shapes {
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            exact(&format!("uniform {dtype} {shape:?}"), || {
                Ok(vec![random::uniform(-2.0, 3.0, shape, dtype, Some(&k))?])
            });
        }
        for dtype in [DType::I32, DType::U8, DType::I64] {
            exact(&format!("randint {dtype} {shape:?}"), || {
                Ok(vec![random::randint(3, 200, shape, dtype, Some(&k))?])
            });
        }
        // Normal samples go through erfinv, whose GPU and CPU implementations may differ in
        // the last bits: a few units in the last place are allowed.
        for (dtype, tol) in [(DType::F32, 2e-6), (DType::F16, 1e-3), (DType::BF16, 8e-3)] {
            let name = format!("normal {dtype} {shape:?}");
            let f = || random::normal(shape, dtype, 0.5, 2.0, Some(&k));
            let cpu = on(Device::cpu(), f).unwrap();
            let gpu = on(Device::gpu(0), f).unwrap_or_else(|e| panic!("{name} on the GPU: {e}"));
            compare(&name, &[cpu], &[gpu], tol);
        }
    }
    // Array bounds.
    let v: Vec<f32> = (0..4).map(|_| rng.range(-5.0, 5.0) as f32).collect();
    let lo = Array::from_slice(&v, &[4, 1]).unwrap();
    exact("uniform array bounds", || {
        let hi = add(&lo, 10.0)?;
        Ok(vec![random::uniform(
            &lo,
            &hi,
            &[4, 6],
            DType::F32,
            Some(&k),
        )?])
    });
}
