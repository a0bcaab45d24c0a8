//! `slice_update`, its reductions, and donation.

use super::*;

// ---------------------------------------------------------------------------------------------
// slice_update and its reductions

fn slice_update_mode(
    mode: ScatterMode,
    src: &Array,
    update: &Array,
    slices: &[SliceArg],
) -> nuvec_core::Result<Array> {
    match mode {
        ScatterMode::Replace => slice_update(src, update, slices),
        ScatterMode::Sum => slice_update_add(src, update, slices),
        ScatterMode::Prod => slice_update_prod(src, update, slices),
        ScatterMode::Max => slice_update_max(src, update, slices),
        ScatterMode::Min => slice_update_min(src, update, slices),
    }
}

/// `src` with the region of `slices` combined with `update` (broadcast to the region).
fn slice_update_reference(
    mode: ScatterMode,
    dtype: DType,
    src: &[f64],
    shape: &[usize],
    slices: &[SliceArg],
    update: &[f64],
    ushape: &[usize],
) -> (Vec<usize>, Vec<f64>) {
    let lists: Vec<Vec<usize>> = (0..shape.len())
        .map(|d| shape_ref::py_range(shape[d], slices.get(d).copied().unwrap_or(SliceArg::full())))
        .collect();
    let region: Vec<usize> = lists.iter().map(Vec::len).collect();
    let n: usize = region.iter().product();
    let mut out = src.to_vec();
    for k in 0..n {
        let r = unravel(k, &region);
        let t: Vec<usize> = r.iter().enumerate().map(|(d, &i)| lists[d][i]).collect();
        let t = ravel(&t, shape);
        combine_into(&mut out[t], mode, dtype, at_broadcast(update, ushape, &r));
    }
    (region, out)
}

#[test]
fn slice_update_matches_formula() {
    let mut rng = Rng(10);
    let shape = [4usize, 3, 5];
    let s = SliceArg::new;
    let cases: Vec<Vec<SliceArg>> = vec![
        vec![s(Some(1), Some(3), 1)],
        vec![
            SliceArg::full(),
            s(None, None, -1),
            s(Some(-1), Some(0), -2),
        ],
        vec![
            s(Some(3), None, -2),
            SliceArg::index(-1),
            s(Some(1), Some(9), 3),
        ],
        vec![s(Some(2), Some(2), 1), SliceArg::full(), SliceArg::full()],
        vec![],
        vec![SliceArg::full(), SliceArg::full(), s(Some(-9), Some(99), 1)],
        vec![s(Some(1), Some(3), 1), s(Some(0), Some(2), 1)],
    ];
    for dtype in DTYPES {
        for kind in KINDS {
            for mode in MODES {
                for slices in &cases {
                    let (a, av) = make(&shape, dtype, kind, &mut rng);
                    let lists: Vec<usize> = (0..3)
                        .map(|d| {
                            shape_ref::py_range(
                                shape[d],
                                slices.get(d).copied().unwrap_or(SliceArg::full()),
                            )
                            .len()
                        })
                        .collect();
                    // The update: the region's shape, a broadcastable one, or a scalar, each
                    // laid out every way.
                    for ushape in [lists.clone(), vec![1, lists[2]], vec![]] {
                        for ukind in KINDS {
                            let (u, uv) = make(&ushape, DType::F32, ukind, &mut rng);
                            let got = slice_update_mode(mode, &a, &u, slices).unwrap();
                            let (_, want) = slice_update_reference(
                                mode, dtype, &av, &shape, slices, &uv, &ushape,
                            );
                            let what = format!(
                                "{mode:?} {dtype} {kind:?} {slices:?} {ushape:?} {ukind:?}"
                            );
                            check(&got, &shape, &want, &what);
                        }
                    }
                    let what = format!("{mode:?} {dtype} {kind:?} {slices:?}");
                    assert_eq!(read(&a), av, "{what}: input changed");
                }
            }
        }
    }
}

#[test]
fn slice_update_of_empty_arrays_and_regions() {
    let mut rng = Rng(11);
    for dtype in DTYPES {
        let (a, _) = make(&[0, 3], dtype, Kind::Contiguous, &mut rng);
        let u = Array::scalar(1.0f32);
        check(
            &slice_update(&a, &u, &[]).unwrap(),
            &[0, 3],
            &[],
            "empty array",
        );
        let (a, av) = make(&[2, 3], dtype, Kind::Transposed, &mut rng);
        let empty = [SliceArg::full(), SliceArg::new(Some(2), Some(1), 1)];
        let none = Array::from_vec(Vec::<f32>::new(), &[2, 0]).unwrap();
        check(
            &slice_update_add(&a, &none, &empty).unwrap(),
            &[2, 3],
            &av,
            "empty region",
        );
    }
}

#[test]
fn slice_update_of_the_whole_array_is_the_update() {
    let a = Array::from_slice(&[1i32, 2, 3, 4], &[2, 2]).unwrap();
    let u = Array::from_slice(&[7.9f32, -8.2], &[2]).unwrap();
    let got = slice_update(&a, &u, &[]).unwrap();
    check(&got, &[2, 2], &[7.0, -8.0, 7.0, -8.0], "whole");
    // Reversed: the region is all of `a`, but not in order.
    let got = slice_update(&a, &u, &[SliceArg::full(), SliceArg::new(None, None, -1)]).unwrap();
    check(&got, &[2, 2], &[-8.0, 7.0, -8.0, 7.0], "reversed");
}

// ---------------------------------------------------------------------------------------------
// Donation: an input still held elsewhere is never written.

#[test]
fn slice_update_never_writes_a_held_input() {
    let a = Array::from_slice(&[0.0f32; 6], &[2, 3]).unwrap();
    let kept = a.clone();
    let u = Array::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
    let b = slice_update(&a, &u, &[SliceArg::index(1)]).unwrap();
    drop(a);
    assert_eq!(b.to_vec::<f32>().unwrap(), [0.0, 0.0, 0.0, 1.0, 2.0, 3.0]);
    assert_eq!(kept.to_vec::<f32>().unwrap(), [0.0; 6]);
    // An evaluated intermediate held by the caller is not written either.
    let c = &kept + 1.0;
    c.eval().unwrap();
    let d = slice_update_add(&c, &u, &[SliceArg::index(0)]).unwrap();
    assert_eq!(d.to_vec::<f32>().unwrap(), [2.0, 3.0, 4.0, 1.0, 1.0, 1.0]);
    assert_eq!(c.to_vec::<f32>().unwrap(), [1.0; 6]);
}

#[test]
fn slice_update_chains_write_in_place_correctly() {
    // The cache pattern: each step's old cache is dropped, so its buffer is donated.
    let (len, width) = (8usize, 4usize);
    let mut cache = Array::from_vec(vec![0i32; len * width], &[len, width]).unwrap();
    let mut snapshots = Vec::new();
    for step in 0..len {
        let row: Vec<i32> = (0..width as i32).map(|j| step as i32 * 10 + j).collect();
        let u = Array::from_vec(row, &[1, width]).unwrap();
        let at = step as isize;
        cache = slice_update(&cache, &u, &[SliceArg::new(Some(at), Some(at + 1), 1)]).unwrap();
        cache.eval().unwrap();
        if step == 2 {
            snapshots.push(cache.clone());
        }
    }
    let want: Vec<i32> = (0..len as i32)
        .flat_map(|s| (0..width as i32).map(move |j| s * 10 + j))
        .collect();
    assert_eq!(cache.to_vec::<i32>().unwrap(), want);
    // The snapshot was held when step 3 ran: it still shows three rows.
    let snap = snapshots[0].to_vec::<i32>().unwrap();
    assert_eq!(snap[..3 * width], want[..3 * width]);
    assert!(snap[3 * width..].iter().all(|&v| v == 0));
}

#[test]
fn scatters_never_write_a_held_input() {
    let a = Array::from_slice(&[1i32, 2, 3, 4], &[4]).unwrap();
    let kept = a.clone();
    let idx = Array::from_slice(&[0u32, 0, 3], &[3]).unwrap();
    let u = Array::from_slice(&[10i32, 20, 30], &[3, 1]).unwrap();
    let s = scatter_add(&a, std::slice::from_ref(&idx), &u, &[0]).unwrap();
    drop(a);
    assert_eq!(s.to_vec::<i32>().unwrap(), [31, 2, 3, 34]);
    let p = put_along_axis(&kept, &idx, &u.reshape(&[3]).unwrap(), Some(0)).unwrap();
    assert_eq!(p.to_vec::<i32>().unwrap(), [20, 2, 3, 30]);
    assert_eq!(kept.to_vec::<i32>().unwrap(), [1, 2, 3, 4]);
    // A chain where every target is owned alone.
    let mut acc = Array::from_vec(vec![0i32; 4], &[4]).unwrap();
    for k in 0..5 {
        acc = scatter_add_axis(&acc, &idx, &Array::scalar(k), Some(0)).unwrap();
    }
    assert_eq!(acc.to_vec::<i32>().unwrap(), [20, 0, 0, 10]);
}
