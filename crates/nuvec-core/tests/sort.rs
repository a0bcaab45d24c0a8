//! Sorting ops against a reference written here: a stable sort of each lane with NumPy's
//! order (NaN last, -0.0 equal to 0.0, complex lexicographic), over dtypes and layouts
//! (contiguous, transposed, broadcast, empty, large enough to run in parallel).

mod common;

use std::cmp::Ordering;

use common::{Rng, lanes};
use nuvec_core::*;

/// NumPy's order on reals: NaN after everything, equal NaNs.
fn order(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.partial_cmp(&b).expect("neither is NaN"),
    }
}

/// Equal, counting NaN equal to NaN and -0.0 equal to 0.0.
fn same(a: f64, b: f64) -> bool {
    order(a, b) == Ordering::Equal
}

/// The array's elements as f64, row-major.
fn values(a: &Array) -> Vec<f64> {
    a.astype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

/// The stable sort of each lane: (values, indices) laid out as the input.
fn reference(vals: &[f64], shape: &[usize], axis: usize) -> (Vec<f64>, Vec<u32>) {
    let mut out_v = vec![0.0; vals.len()];
    let mut out_i = vec![0u32; vals.len()];
    if vals.is_empty() {
        return (out_v, out_i);
    }
    for lane in lanes(shape, axis) {
        let mut idx: Vec<usize> = (0..lane.len()).collect();
        // Vec::sort_by is stable.
        idx.sort_by(|&x, &y| order(vals[lane[x]], vals[lane[y]]));
        for (j, &i) in idx.iter().enumerate() {
            out_v[lane[j]] = vals[lane[i]];
            out_i[lane[j]] = i as u32;
        }
    }
    (out_v, out_i)
}

/// Random values with repeats, both zeros, infinities and NaN (cast to `dtype`).
fn data(rng: &mut Rng, n: usize, dtype: DType) -> Vec<f64> {
    (0..n)
        .map(|_| match rng.below(20) {
            0 if dtype.is_float() => f64::NAN,
            1 if dtype.is_float() => f64::INFINITY,
            2 if dtype.is_float() => f64::NEG_INFINITY,
            3 if dtype.is_float() => -0.0,
            4 => 0.0,
            // Small values repeat (never negative for unsigned types: a wrapped u64 would not
            // survive the trip through f64 the checks take).
            5..=9 if dtype.category() == Category::Unsigned => rng.below(5) as f64,
            5..=9 => (rng.below(5) as f64) - 2.0,
            _ if dtype == DType::Bool => rng.below(2) as f64,
            _ if dtype.category() == Category::Unsigned => rng.below(200) as f64,
            _ if dtype.is_integer() => rng.range(-100.0, 100.0).round(),
            _ => rng.range(-50.0, 50.0),
        })
        .collect()
}

/// Every real element type ([`DType::ALL`] but complex64).
const DTYPES: [DType; 13] = {
    let [reals @ .., DType::C64] = DType::ALL else {
        panic!("DType::ALL ends with complex64")
    };
    reals
};

/// An array of `vals` with `shape`, cast to `dtype`.
fn typed(vals: &[f64], shape: &[usize], dtype: DType) -> Array {
    Array::from_slice(vals, shape)
        .unwrap()
        .astype(dtype)
        .unwrap()
}

/// The values of `x`, the shape they are sorted in and the axis (`None`: `x` flattened).
fn lanes_of(x: &Array, axis: Option<isize>) -> (Vec<f64>, Vec<usize>, usize) {
    match axis {
        None => (values(x), vec![x.size()], 0),
        Some(a) => {
            let ax = if a < 0 { a + x.ndim() as isize } else { a } as usize;
            (values(x), x.shape().to_vec(), ax)
        }
    }
}

/// `x` sorted along `axis` agrees with the reference in values and indices.
fn check_sort(name: &str, x: &Array, axis: Option<isize>) {
    let (vals, shape, ax) = lanes_of(x, axis);
    let (want_v, want_i) = reference(&vals, &shape, ax);
    let (v, i) = sort_with_indices(x, axis).unwrap();
    assert_eq!(v.shape(), shape.as_slice(), "{name}");
    assert_eq!(v.dtype(), x.dtype(), "{name}");
    assert_eq!(i.dtype(), DType::U32, "{name}");
    let got_v = values(&v);
    for (k, (g, w)) in got_v.iter().zip(&want_v).enumerate() {
        assert!(same(*g, *w), "{name} value {k}: {g} != {w}");
    }
    assert_eq!(i.to_vec::<u32>().unwrap(), want_i, "{name} indices");
    // sort and argsort give the same outputs separately.
    let only_v = values(&sort(x, axis).unwrap());
    assert!(
        only_v.iter().zip(&want_v).all(|(g, w)| same(*g, *w)),
        "{name}"
    );
    assert_eq!(
        argsort(x, axis).unwrap().to_vec::<u32>().unwrap(),
        want_i,
        "{name}"
    );
}

#[test]
fn sort_matches_a_stable_reference_over_dtypes_and_axes() {
    let mut rng = Rng::new(1);
    for dtype in DTYPES {
        // Short lanes (compared) and, flattened, a long one (radix-sorted).
        let shape = [4usize, 5, 30];
        let vals = data(&mut rng, 600, dtype);
        let x = typed(&vals, &shape, dtype);
        for axis in [Some(0), Some(1), Some(2), Some(-1), Some(-3), None] {
            check_sort(&format!("{dtype} {axis:?}"), &x, axis);
        }
    }
}

#[test]
fn sort_reads_transposed_and_broadcast_views() {
    let mut rng = Rng::new(2);
    for dtype in [DType::F32, DType::I16, DType::F16, DType::U64] {
        let vals = data(&mut rng, 7 * 9, dtype);
        let x = typed(&vals, &[7, 9], dtype);
        let t = x.t().unwrap();
        let p = transpose(&x.reshape(&[7, 3, 3]).unwrap(), &[2, 0, 1]).unwrap();
        for axis in [Some(0), Some(1), Some(-1), None] {
            check_sort(&format!("{dtype} transposed {axis:?}"), &t, axis);
        }
        for axis in [Some(0), Some(1), Some(2), None] {
            check_sort(&format!("{dtype} permuted {axis:?}"), &p, axis);
        }
        // A broadcast row: along axis 0 every lane repeats one element (stride 0).
        let row = typed(&vals[..9], &[1, 9], dtype);
        let b = broadcast_to(&row, &[5, 9]).unwrap();
        for axis in [Some(0), Some(1), None] {
            check_sort(&format!("{dtype} broadcast {axis:?}"), &b, axis);
        }
    }
}

#[test]
fn sort_handles_empty_scalar_and_unit_axes() {
    for shape in [vec![0usize], vec![3, 0], vec![0, 4], vec![2, 1, 3]] {
        let x = Array::from_vec(vec![1.5f32; shape.iter().product()], &shape).unwrap();
        for axis in 0..shape.len() as isize {
            check_sort(&format!("{shape:?} {axis}"), &x, Some(axis));
        }
        check_sort(&format!("{shape:?} flat"), &x, None);
    }
    // A 0-D array sorts flattened, as one element.
    let s = Array::scalar(2.5f64);
    let (v, i) = sort_with_indices(&s, None).unwrap();
    assert_eq!(v.shape(), [1]);
    assert_eq!(v.to_vec::<f64>().unwrap(), [2.5]);
    assert_eq!(i.to_vec::<u32>().unwrap(), [0]);
}

#[test]
fn sort_is_stable_and_orders_nan_and_zeros_as_numpy() {
    let x = Array::from_slice(
        &[
            f32::NAN,
            0.0,
            -0.0,
            1.0,
            f32::NEG_INFINITY,
            -0.0,
            f32::NAN,
            0.0,
        ],
        &[8],
    )
    .unwrap();
    let (v, i) = sort_with_indices(&x, Some(0)).unwrap();
    // Zeros of both signs are equal: they keep their order, signs included.
    assert_eq!(i.to_vec::<u32>().unwrap(), [4, 1, 2, 5, 7, 3, 0, 6]);
    let v = v.to_vec::<f32>().unwrap();
    let signs: Vec<bool> = v[1..5].iter().map(|z| z.is_sign_negative()).collect();
    assert_eq!(signs, [false, true, true, false]);
    assert!(v[6].is_nan() && v[7].is_nan());
}

#[test]
fn complex_sorts_lexicographically_with_nan_last() {
    let c = |re: f32, im: f32| Complex64::new(re, im);
    let items = [
        c(f32::NAN, 0.0),
        c(1.0, f32::NAN),
        c(1.0, 2.0),
        c(-1.0, 5.0),
        c(1.0, -2.0),
        c(f32::NAN, f32::NAN),
        c(1.0, 2.0),
        c(0.0, 0.0),
    ];
    // Short lanes, and below one long enough for the radix sort.
    let mut rng = Rng::new(6);
    let part = |rng: &mut Rng| match rng.below(6) {
        0 => f32::NAN,
        1 => -0.0,
        _ => rng.below(4) as f32 - 1.0,
    };
    let mut items = items.to_vec();
    items.extend((0..592).map(|_| c(part(&mut rng), part(&mut rng))));
    let x = Array::from_slice(&items, &[2, 300]).unwrap();
    // NumPy: [R + Rj, R + nanj, nan + Rj, nan + nanj]: real parts, then imaginary parts,
    // each with NaN last.
    let cmp = |a: &Complex64, b: &Complex64| {
        order(f64::from(a.re), f64::from(b.re)).then(order(f64::from(a.im), f64::from(b.im)))
    };
    for axis in [Some(1), Some(0), None] {
        let (v, i) = sort_with_indices(&x, axis).unwrap();
        let (shape, ax) = match axis {
            None => (vec![600], 0),
            Some(a) => (vec![2, 300], a as usize),
        };
        let got_v = v.to_vec::<Complex64>().unwrap();
        let got_i = i.to_vec::<u32>().unwrap();
        for lane in lanes(&shape, ax) {
            let mut idx: Vec<usize> = (0..lane.len()).collect();
            idx.sort_by(|&a, &b| cmp(&items[lane[a]], &items[lane[b]]));
            for (j, &k) in idx.iter().enumerate() {
                assert_eq!(got_i[lane[j]], k as u32, "{axis:?}");
                let (g, w) = (got_v[lane[j]], items[lane[k]]);
                assert!(
                    same(f64::from(g.re), f64::from(w.re))
                        && same(f64::from(g.im), f64::from(w.im)),
                    "{axis:?}: {g} != {w}"
                );
            }
        }
    }
}

#[test]
fn large_sorts_run_in_parallel_and_agree() {
    let mut rng = Rng::new(3);
    // Many lanes (split over the pool) and one long lane (sorted by the whole pool).
    for (shape, axis) in [
        (vec![300usize, 700], 1isize),
        (vec![700, 300], 0),
        (vec![200_000], 0),
    ] {
        let n = shape.iter().product();
        let vals = data(&mut rng, n, DType::F32);
        let x = typed(&vals, &shape, DType::F32);
        check_sort(&format!("{shape:?}"), &x, Some(axis));
    }
    let vals = data(&mut rng, 150_000, DType::I32);
    let x = typed(&vals, &[500, 300], DType::I32);
    check_sort("i32 transposed", &x.t().unwrap(), Some(1));
}

/// `partition` output checked against the stable sort: position `kth` holds the sorted
/// element (the one a stable sort puts there), nothing before it is greater and nothing
/// after it smaller, and the indices say where each value came from.
fn check_partition(name: &str, x: &Array, kth: isize, axis: Option<isize>) {
    let (vals, shape, ax) = lanes_of(x, axis);
    let n = shape[ax];
    let k = if kth < 0 { kth + n as isize } else { kth } as usize;
    let (sorted, sorted_i) = reference(&vals, &shape, ax);
    let (v, i) = partition_with_indices(x, kth, axis).unwrap();
    let (got_v, got_i) = (values(&v), i.to_vec::<u32>().unwrap());
    assert_eq!(values(&partition(x, kth, axis).unwrap()).len(), got_v.len());
    assert_eq!(
        argpartition(x, kth, axis).unwrap().to_vec::<u32>().unwrap(),
        got_i
    );
    for lane in lanes(&shape, ax) {
        let pivot = got_v[lane[k]];
        assert!(same(pivot, sorted[lane[k]]), "{name}: kth {pivot}");
        assert_eq!(got_i[lane[k]], sorted_i[lane[k]], "{name}: kth index");
        let mut seen = vec![false; n];
        for (j, &p) in lane.iter().enumerate() {
            let src = got_i[p] as usize;
            assert!(
                !std::mem::replace(&mut seen[src], true),
                "{name}: repeated index"
            );
            assert!(
                same(got_v[p], vals[lane[src]]),
                "{name}: value/index mismatch"
            );
            let o = order(got_v[p], pivot);
            assert!(
                (j < k && o != Ordering::Greater) || (j > k && o != Ordering::Less) || j == k,
                "{name}: {} at {j} around {pivot} at {k}",
                got_v[p]
            );
        }
    }
}

#[test]
fn partition_matches_the_sort_at_kth() {
    let mut rng = Rng::new(4);
    for dtype in DTYPES {
        let vals = data(&mut rng, 60, dtype);
        let x = typed(&vals, &[5, 12], dtype);
        for (kth, axis) in [
            (0, Some(1)),
            (11, Some(-1)),
            (-1, Some(1)),
            (2, Some(0)),
            (-5, Some(0)),
        ] {
            check_partition(&format!("{dtype} {kth} {axis:?}"), &x, kth, axis);
        }
        check_partition(&format!("{dtype} flat"), &x, 37, None);
        check_partition(&format!("{dtype} transposed"), &x.t().unwrap(), 3, Some(1));
    }
    let row = Array::from_slice(&[3i32, 1, 2], &[1, 3]).unwrap();
    check_partition(
        "broadcast",
        &broadcast_to(&row, &[4, 3]).unwrap(),
        1,
        Some(1),
    );
    let vals = data(&mut rng, 90_000, DType::F64);
    let big = Array::from_slice(&vals, &[300, 300]).unwrap();
    check_partition("large", &big, 150, Some(0));
}

#[test]
fn sorts_read_sliced_views_with_negative_steps() {
    let mut rng = Rng::new(7);
    for dtype in [DType::F32, DType::I64, DType::BF16, DType::U8] {
        let vals = data(&mut rng, 8 * 10, dtype);
        let x = typed(&vals, &[8, 10], dtype);
        // x[::-1, 1::3] and x[6:1:-2]
        let a = slice(
            &x,
            &[
                SliceArg::new(None, None, -1),
                SliceArg::new(Some(1), None, 3),
            ],
        )
        .unwrap();
        let b = slice(&x, &[SliceArg::new(Some(6), Some(1), -2)]).unwrap();
        assert_eq!(
            (a.shape(), b.shape()),
            ([8, 3].as_slice(), [3, 10].as_slice())
        );
        for (name, v) in [("reversed", &a), ("stepped", &b)] {
            for axis in [Some(0), Some(1), None] {
                check_sort(&format!("{dtype} {name} {axis:?}"), v, axis);
            }
            check_partition(&format!("{dtype} {name}"), v, -2, Some(0));
            check_partition(&format!("{dtype} {name}"), v, 1, Some(1));
        }
    }
}

/// `topk` holds the `k` largest of each lane (as a multiset), the `k`-th largest first.
fn check_topk(name: &str, x: &Array, k: usize, axis: Option<isize>) {
    let (vals, shape, ax) = lanes_of(x, axis);
    let n = shape[ax];
    let (sorted, _) = reference(&vals, &shape, ax);
    let top = topk(x, k, axis).unwrap();
    let mut out_shape = shape.clone();
    out_shape[ax] = k;
    assert_eq!(top.shape(), out_shape.as_slice(), "{name}");
    assert_eq!(top.dtype(), x.dtype(), "{name}");
    let got = values(&top);
    if k == 0 {
        assert!(got.is_empty(), "{name}");
        return;
    }
    for (lane, out) in lanes(&shape, ax).iter().zip(lanes(&out_shape, ax)) {
        let mut mine: Vec<f64> = out.iter().map(|&p| got[p]).collect();
        assert!(
            same(mine[0], sorted[lane[n - k]]),
            "{name}: first {}",
            mine[0]
        );
        mine.sort_by(|a, b| order(*a, *b));
        for (j, m) in mine.iter().enumerate() {
            assert!(same(*m, sorted[lane[n - k + j]]), "{name}: {m} at {j}");
        }
    }
}

#[test]
fn topk_holds_the_k_largest() {
    let mut rng = Rng::new(8);
    for dtype in [DType::F32, DType::F16, DType::I32, DType::U16, DType::Bool] {
        let vals = data(&mut rng, 6 * 40, dtype);
        let x = typed(&vals, &[6, 40], dtype);
        for (k, axis) in [
            (0, Some(1)),
            (1, Some(1)),
            (5, Some(-1)),
            (40, Some(1)),
            (3, Some(0)),
        ] {
            check_topk(&format!("{dtype} {k} {axis:?}"), &x, k, axis);
        }
        check_topk(&format!("{dtype} flat"), &x, 17, None);
        check_topk(&format!("{dtype} transposed"), &x.t().unwrap(), 4, Some(0));
        let rev = slice(&x, &[SliceArg::full(), SliceArg::new(None, None, -3)]).unwrap();
        check_topk(&format!("{dtype} reversed"), &rev, 2, Some(1));
    }
    let row = Array::from_slice(&[2.0f64, 7.0, 1.0], &[1, 3]).unwrap();
    check_topk(
        "broadcast",
        &broadcast_to(&row, &[4, 3]).unwrap(),
        2,
        Some(1),
    );
    let empty = Array::from_slice::<f32>(&[], &[3, 0]).unwrap();
    check_topk("empty", &empty, 0, Some(1));
    check_topk("empty rows", &empty, 2, Some(0));
}

#[test]
fn topk_beyond_the_axis_is_an_error() {
    let x = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let err = topk(&x, 3, Some(1)).unwrap_err();
    assert!(err.to_string().starts_with("topk"), "{err}");
    assert!(topk(&x, 5, None).is_err());
    assert!(topk(&x, 1, Some(2)).is_err());
    assert!(topk(&Array::scalar(1.0f32), 1, Some(0)).is_err());
}

#[test]
fn searchsorted_matches_counting() {
    let mut rng = Rng::new(5);
    for dtype in [DType::F32, DType::I32, DType::F16, DType::U8] {
        let raw = Array::from_slice(&data(&mut rng, 40, dtype), &[40]).unwrap();
        let mut sorted = values(&raw.astype(dtype).unwrap());
        sorted.sort_by(|a, b| order(*a, *b));
        let a = typed(&sorted, &[40], dtype);
        let queries = data(&mut rng, 24, dtype);
        let v = typed(&queries, &[4, 6], dtype);
        for v in [v.clone(), v.t().unwrap()] {
            let q = values(&v);
            for right in [false, true] {
                let got = searchsorted(&a, &v, right).unwrap();
                assert_eq!(got.shape(), v.shape());
                let want: Vec<u32> = q
                    .iter()
                    .map(|&x| {
                        sorted
                            .iter()
                            .filter(|&&e| match order(e, x) {
                                Ordering::Less => true,
                                Ordering::Equal => right,
                                Ordering::Greater => false,
                            })
                            .count() as u32
                    })
                    .collect();
                assert_eq!(got.to_vec::<u32>().unwrap(), want, "{dtype} right={right}");
            }
        }
    }
    // Mixed types promote: an int array searched for floats.
    let a = Array::from_slice(&[1i32, 2, 3], &[3]).unwrap();
    let v = Array::from_slice(&[2.5f32, -1.0], &[2]).unwrap();
    assert_eq!(
        searchsorted(&a, &v, false)
            .unwrap()
            .to_vec::<u32>()
            .unwrap(),
        [2, 0]
    );
    let empty = Array::from_slice::<f32>(&[], &[0]).unwrap();
    assert_eq!(
        searchsorted(&empty, &v, true)
            .unwrap()
            .to_vec::<u32>()
            .unwrap(),
        [0, 0]
    );
}

#[test]
fn bad_axes_are_errors() {
    let x = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    for axis in [2isize, -3] {
        assert!(sort(&x, Some(axis)).is_err());
        assert!(argsort(&x, Some(axis)).is_err());
        assert!(partition(&x, 0, Some(axis)).is_err());
        assert!(argpartition(&x, 0, Some(axis)).is_err());
    }
    let err = argsort(&Array::scalar(1.0f32), Some(0)).unwrap_err();
    assert!(err.to_string().starts_with("argsort"), "{err}");
}

#[test]
fn bad_kth_is_an_error() {
    let x = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    for kth in [2isize, -3, 100] {
        let err = partition(&x, kth, Some(1)).unwrap_err();
        assert!(err.to_string().starts_with("partition"), "{err}");
        // Flattened there are 4 elements: only 100 is out of range.
        assert_eq!(argpartition(&x, kth, None).is_err(), kth == 100, "{kth}");
    }
    let empty = Array::from_slice::<f32>(&[], &[0]).unwrap();
    assert!(partition(&empty, 0, None).is_err());
    assert!(partition(&empty, -1, Some(0)).is_err());
}

#[test]
fn lanes_longer_than_u32_indices_are_errors() {
    // A broadcast view: no memory behind its 2^32 + 1 elements.
    let huge = broadcast_to(&Array::scalar(1u8), &[(1usize << 32) + 1]).unwrap();
    let err = sort(&huge, Some(0)).unwrap_err();
    assert!(err.to_string().contains("u32"), "{err}");
    assert!(argpartition(&huge, 0, None).is_err());
}

#[test]
fn bad_searchsorted_inputs_are_errors() {
    let a = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let v = Array::from_slice(&[1.0f32], &[1]).unwrap();
    let err = searchsorted(&a, &v, false).unwrap_err();
    assert!(err.to_string().starts_with("searchsorted"), "{err}");
    assert!(searchsorted(&Array::scalar(1.0f32), &v, false).is_err());
}

#[test]
fn inputs_in_an_error_state_are_reported() {
    let bad = Array::from_error(Error::InvalidArgument("upstream: broken".into()));
    let good = Array::from_slice(&[1.0f32], &[1]).unwrap();
    assert_eq!(
        sort(&bad, None).unwrap_err().to_string(),
        "upstream: broken"
    );
    assert!(argsort(&bad, Some(0)).is_err());
    assert!(partition_with_indices(&bad, 0, None).is_err());
    assert!(searchsorted(&good, &bad, false).is_err());
    assert!(searchsorted(&bad, &good, false).is_err());
}

#[test]
fn both_outputs_come_from_one_node() {
    let x = Array::from_slice(&[3u32, 1, 2], &[3]).unwrap();
    let (v, i) = sort_with_indices(&x, None).unwrap();
    assert_eq!(v.output_index(), 0);
    assert_eq!(i.output_index(), 1);
    assert!(v.siblings().iter().any(|(k, s)| *k == 1 && s.same(&i)));
    // Evaluating one computes the other.
    v.eval().unwrap();
    assert!(i.is_evaluated());
    assert_eq!(i.to_vec::<u32>().unwrap(), [1, 2, 0]);
}
