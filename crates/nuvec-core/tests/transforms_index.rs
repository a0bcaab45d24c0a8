//! vjp, jvp and vmap of the indexing and sorting primitives against central differences in
//! f64 and loops over the batch: gathers (clamped, negative and repeated indices), scatters in
//! every mode (skipped and repeated indices), slice updates with steps, sorts, partitions,
//! `topk` and `searchsorted`; nesting; the unsupported product-scatter derivative.

mod common;

use common::Rng;
use common::autodiff::{check, check_vmap, random, values};
use nuvec_core::*;

fn ints(v: &[i32], shape: &[usize]) -> Array {
    Array::from_slice(v, shape).unwrap()
}

/// Distinct values at least 0.4 apart in random order (no ties for sorts and max/min).
fn separated(rng: &mut Rng, shape: &[usize]) -> Array {
    let n: usize = shape.iter().product();
    let mut p: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        p.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let v: Vec<f64> = p
        .iter()
        .map(|&k| k as f64 * 0.5 - n as f64 / 4.0 + rng.range(0.0, 0.1))
        .collect();
    Array::from_slice(&v, shape).unwrap()
}

/// Random indices in `lo..hi` (some negative or out of range when the bounds say so).
fn random_ints(rng: &mut Rng, shape: &[usize], lo: i32, hi: i32) -> Array {
    let n: usize = shape.iter().product();
    let v: Vec<i32> = (0..n)
        .map(|_| lo + rng.below((hi - lo) as u64) as i32)
        .collect();
    ints(&v, shape)
}

/// The gradient of the sum of `f`'s (single) output: its vjp with a cotangent of ones.
fn gradient<G>(f: G, xs: &[Array]) -> Result<Vec<Array>>
where
    G: Fn(&[Array]) -> Result<Vec<Array>>,
{
    let shape = f(xs)?[0].shape().to_vec();
    Ok(vjp(&f, xs, &[Array::full(&shape, 1.0f64)?])?.1)
}

#[test]
fn take_derivatives() {
    let mut rng = Rng::new(1);
    let x = random(&mut rng, &[3, 4, 2], -1.0, 1.0);
    // Repeated, negative and out-of-range (clamped) indices.
    let idx = ints(&[2, -1, 0, 2, 7, -9], &[2, 3]);
    for axis in [Some(0), Some(1), Some(-1), None] {
        let f = move |v: &[Array]| Ok(vec![take(&v[0], &v[1], axis)?]);
        check(
            &format!("take {axis:?}"),
            f,
            &[x.clone(), idx.clone()],
            &mut rng,
        );
    }
    let f = |v: &[Array]| Ok(vec![take(&v[0], &Array::scalar(-2i64), Some(1))?]);
    check("take 0-d index", f, std::slice::from_ref(&x), &mut rng);
    let small = Array::from_slice(&[3u8, 0, 3], &[3]).unwrap();
    let f = move |v: &[Array]| Ok(vec![take(&v[0], &small, Some(1))?]);
    check("take u8 indices", f, std::slice::from_ref(&x), &mut rng);
}

#[test]
fn take_along_axis_derivatives() {
    let mut rng = Rng::new(2);
    let x = random(&mut rng, &[3, 4], -1.0, 1.0);
    let idx = ints(&[0, -1, 3, 3, 1, 9, -7, 2, 2], &[3, 3]);
    let f = |v: &[Array]| Ok(vec![take_along_axis(&v[0], &v[1], Some(1))?]);
    check("take_along_axis 1", f, &[x.clone(), idx], &mut rng);
    // Indices broadcast along the other axis.
    let row = ints(&[2, 0, 2, -1], &[1, 4]);
    let f = |v: &[Array]| Ok(vec![take_along_axis(&v[0], &v[1], Some(0))?]);
    check("take_along_axis broadcast", f, &[x.clone(), row], &mut rng);
    let flat = ints(&[11, 0, 5, 5, -1], &[5]);
    let f = |v: &[Array]| Ok(vec![take_along_axis(&v[0], &v[1], None)?]);
    check("take_along_axis flat", f, &[x, flat], &mut rng);
}

#[test]
fn gather_derivatives() {
    let mut rng = Rng::new(3);
    let x = random(&mut rng, &[4, 5, 3], -1.0, 1.0);
    let rows = ints(&[0, 3, -1, 3], &[4]);
    let cols = ints(&[4, 0, 2, 4], &[4]);
    let f = |v: &[Array]| {
        Ok(vec![gather(
            &v[0],
            &[v[1].clone(), v[2].clone()],
            &[0, 1],
            &[1, 1, 3],
        )?])
    };
    check(
        "gather rows, cols",
        f,
        &[x.clone(), rows.clone(), cols.clone()],
        &mut rng,
    );
    // Axes in another order, windows wider than one (moved inside when they would overrun).
    let f = |v: &[Array]| {
        Ok(vec![gather(
            &v[0],
            &[v[1].clone(), v[2].clone()],
            &[-1, 0],
            &[2, 3, 2],
        )?])
    };
    let last = ints(&[2, 0, 1, -1], &[4]);
    check(
        "gather windows",
        f,
        &[x.clone(), last, rows.clone()],
        &mut rng,
    );
    // Index arrays that broadcast together, one indexed axis.
    let a = ints(&[1, 3], &[2, 1]);
    let b = ints(&[0, 4, 2], &[3]);
    let f = |v: &[Array]| {
        Ok(vec![gather(
            &v[0],
            &[v[1].clone(), v[2].clone()],
            &[0, 1],
            &[1, 1, 2],
        )?])
    };
    check("gather broadcast indices", f, &[x.clone(), a, b], &mut rng);
    let f = |v: &[Array]| Ok(vec![gather(&v[0], &[v[1].clone()], &[1], &[4, 1, 3])?]);
    check("gather one axis", f, &[x, cols], &mut rng);
}

/// A scatter of the array `v[0]` with updates `v[1]` at the captured indices.
type Scatter = fn(&Array, &[Array], &Array, &[isize]) -> Result<Array>;

#[test]
fn scatter_derivatives() {
    let mut rng = Rng::new(4);
    let cases: &[(&str, Scatter)] = &[
        ("scatter", scatter),
        ("scatter_add", scatter_add),
        ("scatter_max", scatter_max),
        ("scatter_min", scatter_min),
    ];
    for &(name, op) in cases {
        // Repeated rows (the last replace wins), a negative one, one out of range (skipped).
        let rows = ints(&[1, 3, 1, -1, 6], &[5]);
        let both = separated(&mut rng, &[5 * 3 + 5 * 3]);
        let a = slice(&both, &[SliceArg::new(Some(0), Some(15), 1)])
            .unwrap()
            .reshape(&[5, 3])
            .unwrap();
        let u = slice(&both, &[SliceArg::new(Some(15), None, 1)])
            .unwrap()
            .reshape(&[5, 1, 3])
            .unwrap();
        let (a, u) = (contiguous(&a).unwrap(), contiguous(&u).unwrap());
        let f = move |v: &[Array]| Ok(vec![op(&v[0], &[v[1].clone()], &v[2], &[0])?]);
        check(name, f, &[a.clone(), rows, u], &mut rng);
        // Two axes with windows of two columns: a window at column 4 does not fit (skipped).
        let rows = ints(&[0, 4, 2, 0], &[4]);
        let cols = ints(&[3, 0, 4, -2], &[4]);
        let u2 = separated(&mut rng, &[4, 1, 2]);
        let a2 = separated(&mut rng, &[5, 5]);
        let f = move |v: &[Array]| {
            Ok(vec![op(
                &v[0],
                &[v[1].clone(), v[2].clone()],
                &v[3],
                &[0, 1],
            )?])
        };
        check(
            &format!("{name} windows"),
            f,
            &[a2, rows, cols, u2],
            &mut rng,
        );
    }
}

#[test]
fn scatter_prod_derivative_for_the_array() {
    let mut rng = Rng::new(5);
    let a = random(&mut rng, &[4, 3], -1.0, 1.0);
    let u = random(&mut rng, &[4, 1, 3], 0.5, 1.5);
    let rows = ints(&[2, 2, -1, 9], &[4]);
    let f = move |v: &[Array]| Ok(vec![scatter_prod(&v[0], &[v[1].clone()], &u, &[0])?]);
    check("scatter_prod", f, &[a, rows], &mut rng);
}

#[test]
fn scatter_prod_derivative_for_the_updates_is_unsupported() {
    let a = Array::from_slice(&[1.0f64, 2.0, 3.0], &[3]).unwrap();
    let u = Array::from_slice(&[4.0f64, 5.0], &[2, 1]).unwrap();
    let rows = ints(&[0, 2], &[2]);
    let f = move |v: &[Array]| {
        Ok(vec![scatter_prod(
            &v[0],
            std::slice::from_ref(&rows),
            &v[1],
            &[0],
        )?])
    };
    let ones = Array::full(&[3], 1.0f64).unwrap();
    let err = vjp(&f, &[a.clone(), u.clone()], &[ones]).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Unsupported {
                op: "scatter_prod",
                ..
            }
        ),
        "{err}"
    );
    let err = jvp(&f, &[a.clone(), u.clone()], &[a.clone(), u.clone()]).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Unsupported {
                op: "scatter_prod",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().starts_with("scatter_prod:"), "{err}");
    // The array alone is fine.
    let g = gradient(|v: &[Array]| f(&[v[0].clone(), u.clone()]), &[a]).unwrap();
    assert_eq!(values(&g[0]), [4.0, 1.0, 5.0]);
}

#[test]
fn scatter_along_axis_derivatives() {
    let mut rng = Rng::new(6);
    let x = random(&mut rng, &[3, 4], -1.0, 1.0);
    // Distinct per row for put_along_axis except row 1 (repeat: the last one wins); -1 and
    // an out-of-range 7 (skipped).
    let idx = ints(&[0, 2, 3, 1, 1, -1, 3, 7, 0], &[3, 3]);
    let vals = random(&mut rng, &[3, 3], -1.0, 1.0);
    let f = |v: &[Array]| Ok(vec![put_along_axis(&v[0], &v[1], &v[2], Some(1))?]);
    check(
        "put_along_axis",
        f,
        &[x.clone(), idx.clone(), vals.clone()],
        &mut rng,
    );
    let f = |v: &[Array]| Ok(vec![scatter_add_axis(&v[0], &v[1], &v[2], Some(1))?]);
    check(
        "scatter_add_axis",
        f,
        &[x.clone(), idx.clone(), vals],
        &mut rng,
    );
    // Values broadcast against the indices.
    let col = random(&mut rng, &[3, 1], -1.0, 1.0);
    let f = |v: &[Array]| Ok(vec![scatter_add_axis(&v[0], &v[1], &v[2], Some(1))?]);
    check(
        "scatter_add_axis broadcast",
        f,
        &[x.clone(), idx, col],
        &mut rng,
    );
    let flat = ints(&[11, 0, 5, -1, 20], &[5]);
    let vals = random(&mut rng, &[5], -1.0, 1.0);
    let f = |v: &[Array]| Ok(vec![put_along_axis(&v[0], &v[1], &v[2], None)?]);
    check("put_along_axis flat", f, &[x, flat, vals], &mut rng);
}

type SliceUpdate = fn(&Array, &Array, &[SliceArg]) -> Result<Array>;

const SLICE_UPDATES: &[(&str, SliceUpdate)] = &[
    ("slice_update", slice_update),
    ("slice_update_add", slice_update_add),
    ("slice_update_prod", slice_update_prod),
    ("slice_update_max", slice_update_max),
    ("slice_update_min", slice_update_min),
];

#[test]
fn slice_update_derivatives() {
    let mut rng = Rng::new(7);
    // Rows 4, 2, 0 and columns 1, 3, 5.
    let region = [
        SliceArg::new(Some(4), None, -2),
        SliceArg::new(Some(1), Some(6), 2),
    ];
    for &(name, op) in SLICE_UPDATES {
        let src = separated(&mut rng, &[5, 6]);
        let upd = separated(&mut rng, &[3, 3]);
        let f = move |v: &[Array]| Ok(vec![op(&v[0], &v[1], &region)?]);
        check(name, f, &[src.clone(), upd], &mut rng);
        // An update broadcast over the region's rows; a region of the leading axis only.
        let row = separated(&mut rng, &[3]);
        check(
            &format!("{name} broadcast"),
            f,
            &[src.clone(), row],
            &mut rng,
        );
        let g = move |v: &[Array]| {
            Ok(vec![op(
                &v[0],
                &v[1],
                &[SliceArg::new(Some(1), Some(3), 1)],
            )?])
        };
        let block = separated(&mut rng, &[2, 6]);
        check(&format!("{name} rows"), g, &[src, block], &mut rng);
    }
}

#[test]
fn sort_derivatives() {
    let mut rng = Rng::new(8);
    let x = separated(&mut rng, &[3, 5]);
    for axis in [Some(0), Some(1), Some(-1), None] {
        // The indices output is unused.
        let f = move |v: &[Array]| Ok(vec![sort(&v[0], axis)?]);
        check(
            &format!("sort {axis:?}"),
            f,
            std::slice::from_ref(&x),
            &mut rng,
        );
        let f = move |v: &[Array]| {
            let (s, i) = sort_with_indices(&v[0], axis)?;
            Ok(vec![s, i])
        };
        check(
            &format!("sort_with_indices {axis:?}"),
            f,
            std::slice::from_ref(&x),
            &mut rng,
        );
        let f = move |v: &[Array]| {
            let i = argsort(&v[0], axis)?.astype(DType::F64)?;
            Ok(vec![multiply(&sort(&v[0], axis)?, &i)?])
        };
        check(
            &format!("x * argsort {axis:?}"),
            f,
            std::slice::from_ref(&x),
            &mut rng,
        );
    }
    for kth in [0isize, 2, -1] {
        let f = move |v: &[Array]| Ok(vec![partition(&v[0], kth, Some(1))?]);
        check(
            &format!("partition {kth}"),
            f,
            std::slice::from_ref(&x),
            &mut rng,
        );
        let f = move |v: &[Array]| {
            let (p, i) = partition_with_indices(&v[0], kth, Some(0))?;
            Ok(vec![p, i])
        };
        check(
            &format!("partition_with_indices {kth}"),
            f,
            std::slice::from_ref(&x),
            &mut rng,
        );
        let f = move |v: &[Array]| {
            let i = argpartition(&v[0], kth, None)?;
            Ok(vec![take(&v[0], &i, None)?])
        };
        check(
            &format!("take argpartition {kth}"),
            f,
            std::slice::from_ref(&x),
            &mut rng,
        );
    }
    for (k, axis) in [(2, Some(1)), (3, Some(0)), (4, None), (0, Some(1))] {
        let f = move |v: &[Array]| Ok(vec![topk(&v[0], k, axis)?]);
        check(
            &format!("topk {k} {axis:?}"),
            f,
            std::slice::from_ref(&x),
            &mut rng,
        );
    }
}

#[test]
fn searchsorted_has_zero_derivative() {
    let mut rng = Rng::new(9);
    let a = sort(&separated(&mut rng, &[6]), None).unwrap();
    let v = separated(&mut rng, &[2, 3]);
    for right in [false, true] {
        // v · position(v): the derivative for v is the position, for a zero.
        let f = move |x: &[Array]| {
            let pos = searchsorted(&x[0], &x[1], right)?;
            Ok(vec![multiply(&x[1], pos.astype(DType::F64)?)?, pos])
        };
        check(
            &format!("searchsorted {right}"),
            f,
            &[a.clone(), v.clone()],
            &mut rng,
        );
    }
}

#[test]
fn second_derivatives_through_gathers_and_scatters() {
    let mut rng = Rng::new(10);
    let x = random(&mut rng, &[4, 3], -1.0, 1.0);
    let idx = ints(&[3, 0, 3, -1], &[4]);
    // The gradient of Σ sin(take(x)) is a scatter_add of cos(take(x)): differentiate it again.
    let f = move |v: &[Array]| {
        let inner = |w: &[Array]| Ok(vec![sin(&take(&w[0], &idx, Some(0))?)?]);
        gradient(inner, v)
    };
    check("grad of take", f, std::slice::from_ref(&x), &mut rng);
    let s = separated(&mut rng, &[3, 4]);
    let f = |v: &[Array]| {
        let inner = |w: &[Array]| Ok(vec![exp(&sort(&w[0], Some(1))?)?]);
        gradient(inner, v)
    };
    check("grad of sort", f, &[s], &mut rng);
}

// --- vmap -------------------------------------------------------------------------------

/// Every mix of batched and unbatched inputs, except none batched.
fn mixes(n: usize) -> Vec<Vec<bool>> {
    (1..1u32 << n)
        .map(|m| (0..n).map(|i| m >> i & 1 == 1).collect())
        .collect()
}

/// `x` when batched, else its first example.
fn example(x: &Array, batched: bool) -> Array {
    if batched {
        x.clone()
    } else {
        take(x, &Array::scalar(0u32), Some(0)).unwrap()
    }
}

fn vmap_all<G>(name: &str, f: G, xs: &[Array])
where
    G: Fn(&[Array]) -> Result<Vec<Array>> + Clone,
{
    for batched in mixes(xs.len()) {
        let args: Vec<Array> = xs
            .iter()
            .zip(&batched)
            .map(|(x, &b)| example(x, b))
            .collect();
        check_vmap(&format!("{name} {batched:?}"), f.clone(), &args, &batched);
    }
}

const B: usize = 3;

#[test]
fn vmap_take() {
    let mut rng = Rng::new(11);
    let x = random(&mut rng, &[B, 4, 5], -1.0, 1.0);
    let idx = random_ints(&mut rng, &[B, 2, 3], -6, 6);
    for axis in [Some(0), Some(1), Some(-1), None] {
        let f = move |v: &[Array]| Ok(vec![take(&v[0], &v[1], axis)?]);
        vmap_all(&format!("take {axis:?}"), f, &[x.clone(), idx.clone()]);
    }
    let idx1 = random_ints(&mut rng, &[B], -4, 4);
    let f = |v: &[Array]| Ok(vec![take(&v[0], &v[1], Some(1))?]);
    vmap_all("take 0-d index", f, &[x.clone(), idx1]);
    let x4 = random(&mut rng, &[B, 2, 3, 4], -1.0, 1.0);
    let idx4 = random_ints(&mut rng, &[B, 2], -3, 3);
    let f = |v: &[Array]| Ok(vec![take(&v[0], &v[1], Some(1))?]);
    vmap_all("take 3-d", f, &[x4, idx4]);
}

#[test]
fn vmap_take_along_axis() {
    let mut rng = Rng::new(12);
    let x = random(&mut rng, &[B, 4, 5], -1.0, 1.0);
    let idx = random_ints(&mut rng, &[B, 4, 2], -5, 6);
    let f = |v: &[Array]| Ok(vec![take_along_axis(&v[0], &v[1], Some(1))?]);
    vmap_all("take_along_axis 1", f, &[x.clone(), idx]);
    let idx0 = random_ints(&mut rng, &[B, 3, 1], -4, 4);
    let f = |v: &[Array]| Ok(vec![take_along_axis(&v[0], &v[1], Some(0))?]);
    vmap_all("take_along_axis broadcast", f, &[x.clone(), idx0]);
    let flat = random_ints(&mut rng, &[B, 7], -20, 20);
    let f = |v: &[Array]| Ok(vec![take_along_axis(&v[0], &v[1], None)?]);
    vmap_all("take_along_axis flat", f, &[x, flat]);
}

#[test]
fn vmap_gather() {
    let mut rng = Rng::new(13);
    let x = random(&mut rng, &[B, 4, 5, 3], -1.0, 1.0);
    let rows = random_ints(&mut rng, &[B, 2, 3], -4, 5);
    let cols = random_ints(&mut rng, &[B, 2, 3], -5, 6);
    let f = |v: &[Array]| {
        Ok(vec![gather(
            &v[0],
            &[v[1].clone(), v[2].clone()],
            &[0, 1],
            &[1, 2, 3],
        )?])
    };
    vmap_all("gather 2 axes", f, &[x.clone(), rows.clone(), cols]);
    let f = |v: &[Array]| Ok(vec![gather(&v[0], &[v[1].clone()], &[2], &[2, 5, 1])?]);
    vmap_all("gather 1 axis", f, &[x.clone(), rows]);
    let f = |v: &[Array]| Ok(vec![gather(&v[0], &[], &[], &[2, 3, 1])?]);
    check_vmap("gather no indices", f, &[x], &[true]);
}

#[test]
fn vmap_scatters() {
    let mut rng = Rng::new(14);
    let cases: &[(&str, Scatter)] = &[
        ("scatter", scatter),
        ("scatter_add", scatter_add),
        ("scatter_prod", scatter_prod),
        ("scatter_max", scatter_max),
        ("scatter_min", scatter_min),
    ];
    let a = random(&mut rng, &[B, 5, 4], -1.0, 1.0);
    let rows = random_ints(&mut rng, &[B, 3], -6, 7);
    let cols = random_ints(&mut rng, &[B, 3], -4, 4);
    let u = random(&mut rng, &[B, 3, 1, 2], -1.0, 1.0);
    let u1 = random(&mut rng, &[B, 3, 1, 4], -1.0, 1.0);
    for &(name, op) in cases {
        let f = move |v: &[Array]| {
            Ok(vec![op(
                &v[0],
                &[v[1].clone(), v[2].clone()],
                &v[3],
                &[0, 1],
            )?])
        };
        vmap_all(name, f, &[a.clone(), rows.clone(), cols.clone(), u.clone()]);
        let f = move |v: &[Array]| Ok(vec![op(&v[0], &[v[1].clone()], &v[2], &[-2])?]);
        vmap_all(
            &format!("{name} rows"),
            f,
            &[a.clone(), rows.clone(), u1.clone()],
        );
    }
    let idx = random_ints(&mut rng, &[B, 5, 2], -4, 5);
    let vals = random(&mut rng, &[B, 5, 2], -1.0, 1.0);
    let f = |v: &[Array]| Ok(vec![put_along_axis(&v[0], &v[1], &v[2], Some(1))?]);
    vmap_all("put_along_axis", f, &[a.clone(), idx.clone(), vals.clone()]);
    let f = |v: &[Array]| Ok(vec![scatter_add_axis(&v[0], &v[1], &v[2], Some(-1))?]);
    vmap_all("scatter_add_axis", f, &[a.clone(), idx, vals]);
    let flat = random_ints(&mut rng, &[B, 6], -20, 22);
    let fv = random(&mut rng, &[B, 6], -1.0, 1.0);
    let f = |v: &[Array]| Ok(vec![scatter_add_axis(&v[0], &v[1], &v[2], None)?]);
    vmap_all("scatter_add_axis flat", f, &[a, flat, fv]);
}

#[test]
fn vmap_slice_updates() {
    let mut rng = Rng::new(15);
    let src = random(&mut rng, &[B, 5, 6], -1.0, 1.0);
    let upd = random(&mut rng, &[B, 3, 3], -1.0, 1.0);
    for &(name, op) in SLICE_UPDATES {
        let f = move |v: &[Array]| {
            let region = [
                SliceArg::new(Some(4), None, -2),
                SliceArg::new(Some(1), Some(6), 2),
            ];
            Ok(vec![op(&v[0], &v[1], &region)?])
        };
        vmap_all(name, f, &[src.clone(), upd.clone()]);
    }
}

#[test]
fn vmap_sorts() {
    let mut rng = Rng::new(16);
    let x = separated(&mut rng, &[B, 4, 5]);
    for axis in [Some(0), Some(1), Some(-1), None] {
        let f = move |v: &[Array]| {
            let (s, i) = sort_with_indices(&v[0], axis)?;
            Ok(vec![s, i])
        };
        check_vmap(
            &format!("sort {axis:?}"),
            f,
            std::slice::from_ref(&x),
            &[true],
        );
        let f = move |v: &[Array]| {
            let (p, i) = partition_with_indices(&v[0], 1, axis)?;
            Ok(vec![p, i, argsort(&v[0], axis)?])
        };
        check_vmap(
            &format!("partition {axis:?}"),
            f,
            std::slice::from_ref(&x),
            &[true],
        );
        let f = move |v: &[Array]| Ok(vec![topk(&v[0], 2, axis)?, argpartition(&v[0], -1, axis)?]);
        check_vmap(
            &format!("topk {axis:?}"),
            f,
            std::slice::from_ref(&x),
            &[true],
        );
    }
}

#[test]
fn vmap_searchsorted() {
    let nan = f64::NAN;
    // Sorted rows with repeats and NaN last; values that hit them exactly.
    let a = Array::from_slice(
        &[
            0.0, 1.0, 1.0, 3.0, nan, nan, //
            -2.0, -2.0, 0.0, 0.5, 4.0, 4.0, //
            1.0, 1.0, 1.0, 1.0, 2.0, nan,
        ],
        &[B, 6],
    )
    .unwrap();
    let v = Array::from_slice(
        &[
            1.0, nan, -3.0, 3.0, 0.0, 9.0, //
            4.0, -2.0, 0.25, nan, 0.5, 1.0, //
            1.0, 2.0, 0.0, 5.0, nan, 1.5,
        ],
        &[B, 3, 2],
    )
    .unwrap();
    let ai = ints(
        &[0, 1, 1, 3, 9, 9, -2, -2, 0, 1, 4, 4, 1, 1, 1, 1, 2, 5],
        &[B, 6],
    );
    let vi = ints(
        &[1, 9, -3, 3, 0, 10, 4, -2, 2, 5, 0, 1, 1, 2, 0, 5, 6, -1],
        &[B, 3, 2],
    );
    for right in [false, true] {
        let f = move |x: &[Array]| Ok(vec![searchsorted(&x[0], &x[1], right)?]);
        vmap_all(&format!("searchsorted {right}"), f, &[a.clone(), v.clone()]);
        vmap_all(
            &format!("searchsorted i32 {right}"),
            f,
            &[ai.clone(), vi.clone()],
        );
    }
}

#[test]
fn vmap_of_derivatives() {
    let mut rng = Rng::new(17);
    let x = random(&mut rng, &[B, 4, 3], -1.0, 1.0);
    let idx = random_ints(&mut rng, &[B, 5], -4, 4);
    // Per example: the gradient of Σ take(x)², a scatter_add of the gathered values.
    let f = |v: &[Array]| {
        let idx = v[1].clone();
        let inner = move |w: &[Array]| Ok(vec![square(&take(&w[0], &idx, Some(0))?)?]);
        gradient(inner, &v[..1])
    };
    vmap_all("grad of take", f, &[x.clone(), idx]);
    let s = separated(&mut rng, &[B, 4, 3]);
    let f = |v: &[Array]| {
        let inner = |w: &[Array]| Ok(vec![exp(&sort(&w[0], Some(0))?)?]);
        gradient(inner, v)
    };
    check_vmap("grad of sort", f, &[s], &[true]);
}

#[test]
fn slice_update_of_an_empty_region_at_the_end_of_an_axis() {
    // The transpose of an empty slice (topk with k = 0) writes nothing past the last column.
    let src = Array::from_slice(&(0..15).map(f64::from).collect::<Vec<_>>(), &[3, 5]).unwrap();
    let empty = Array::from_slice::<f64>(&[], &[3, 0]).unwrap();
    let region = [SliceArg::full(), SliceArg::new(Some(5), None, 1)];
    for &(name, op) in SLICE_UPDATES {
        let out = op(&src, &empty, &region).unwrap();
        assert_eq!(values(&out), values(&src), "{name}");
    }
}
