//! Shape primitives (slice, split, concatenate, pad, diagonal, as_strided, copies) against
//! references computed with explicit index math on `Vec<f64>`, over contiguous, transposed,
//! broadcast, sliced (negative steps) and empty inputs of several element types; and random
//! chains of views against the same math.

mod shape_ref;

use nuvec_core::{
    Array, DType, SliceArg, as_strided, broadcast_to, concatenate, contiguous, copy, slice, split,
    split_at, stack, transpose, unstack,
};
use proptest::prelude::*;
use shape_ref::*;

// ---------------------------------------------------------------------------------------------
// slice

#[test]
fn slice_matches_index_formula() {
    let argsets: Vec<Vec<SliceArg>> = vec![
        vec![],
        vec![SliceArg::new(Some(1), None, 1)],
        vec![SliceArg::full(), SliceArg::new(None, None, -1)],
        vec![
            SliceArg::new(Some(-1), None, -1),
            SliceArg::new(Some(0), Some(3), 2),
            SliceArg::new(Some(3), Some(0), -2),
        ],
        vec![SliceArg::index(-1), SliceArg::index(1), SliceArg::full()],
        vec![
            SliceArg::new(Some(5), Some(100), 1),
            SliceArg::new(Some(-100), Some(2), 3),
        ],
        vec![SliceArg::full(), SliceArg::new(Some(2), Some(2), 1)],
        vec![SliceArg::new(Some(2), Some(0), 1)],
    ];
    for (name, dtype, x, r) in cases(&[3, 4, 5], &[3, 0, 5]) {
        for args in &argsets {
            let got = slice(&x, args).unwrap();
            check(
                &got,
                &ref_slice(&r, args),
                dtype,
                &format!("{name} {args:?}"),
            );
        }
    }
}

#[test]
fn slice_of_slice_composes() {
    let base = Nd::from_fn(&[9, 8], |i| value(i[0] * 8 + i[1]));
    let (x, r) = make(&base, DType::I32);
    let a1 = [
        SliceArg::new(Some(-2), None, -3),
        SliceArg::new(Some(1), None, 2),
    ];
    let a2 = [
        SliceArg::new(None, None, -1),
        SliceArg::new(Some(-1), Some(0), -2),
    ];
    let got = slice(&slice(&x, &a1).unwrap(), &a2).unwrap();
    check(
        &got,
        &ref_slice(&ref_slice(&r, &a1), &a2),
        DType::I32,
        "twice",
    );
    // 0-D: no arguments is the array itself.
    let s = Array::scalar(7i32);
    assert_eq!(slice(&s, &[]).unwrap().to_vec::<i32>().unwrap(), [7]);
}

#[test]
fn slice_rejects_bad_input() {
    let x = Array::from_slice(&[1.0f32; 6], &[2, 3]).unwrap();
    // More arguments than axes.
    is_invalid(slice(&x, &[SliceArg::full(); 3]), "slice");
    // A zero step.
    is_invalid(slice(&x, &[SliceArg::new(None, None, 0)]), "slice");
}

// ---------------------------------------------------------------------------------------------
// contiguous, copy, as_strided

#[test]
fn contiguous_and_copy_keep_values() {
    for (name, dtype, x, r) in cases(&[3, 4, 5], &[3, 0, 5]) {
        check(
            &contiguous(&x).unwrap(),
            &r,
            dtype,
            &format!("contiguous {name}"),
        );
        check(&copy(&x).unwrap(), &r, dtype, &format!("copy {name}"));
    }
}

#[test]
fn blocked_copies_of_large_strided_views() {
    // Sizes past the parallel threshold, not multiples of the tile sizes, so that chunks
    // start and end inside rows and tiles.
    for dtype in [DType::F32, DType::I32, DType::Bool, DType::F16, DType::F64] {
        let base = Nd::from_fn(&[37, 130, 61], |i| value(i[0] * 7919 + i[1] * 61 + i[2]));
        let (x, r) = make(&base, dtype);
        for perm in [[2, 1, 0], [1, 0, 2], [0, 2, 1], [2, 0, 1], [1, 2, 0]] {
            let t = transpose(&x, &perm).unwrap();
            check(
                &contiguous(&t).unwrap(),
                &ref_transpose(&r, &perm),
                dtype,
                &format!("{dtype} {perm:?}"),
            );
        }
        // A matrix transpose (rows adjacent in the source), alone and inside a batch.
        let m = Nd::from_fn(&[300, 517], |i| value(i[0] * 517 + i[1]));
        let (xm, rm) = make(&m, dtype);
        let t = transpose(&xm, &[1, 0]).unwrap();
        check(
            &contiguous(&t).unwrap(),
            &ref_transpose(&rm, &[1, 0]),
            dtype,
            "matrix",
        );
        let t = transpose(&x, &[0, 2, 1]).unwrap();
        check(
            &contiguous(&t).unwrap(),
            &ref_transpose(&r, &[0, 2, 1]),
            dtype,
            "batch",
        );
        // Transposes of sliced views: read backwards on one axis, every other row; every
        // other element along the last axis (tiles read with a step).
        let s = SliceArg::new;
        for (args, what) in [
            (
                [SliceArg::full(), s(None, None, -2), s(Some(3), None, 1)],
                "sliced",
            ),
            (
                [SliceArg::full(), SliceArg::full(), s(None, None, 2)],
                "step 2",
            ),
        ] {
            let t = transpose(&slice(&x, &args).unwrap(), &[2, 1, 0]).unwrap();
            let want = ref_transpose(&ref_slice(&r, &args), &[2, 1, 0]);
            let what = format!("{dtype} {what}");
            check(&contiguous(&t).unwrap(), &want, dtype, &what);
        }
        // Broadcast rows and columns.
        let row = Nd::from_fn(&[1, 517], |i| value(i[1]));
        let (xr, rr) = make(&row, dtype);
        let b = broadcast_to(&xr, &[300, 517]).unwrap();
        let want = Nd::from_fn(&[300, 517], |i| rr.at(&[0, i[1]]));
        check(&contiguous(&b).unwrap(), &want, dtype, "rows");
        let col = transpose(&xr, &[1, 0]).unwrap();
        let b = broadcast_to(&col, &[517, 300]).unwrap();
        let want = Nd::from_fn(&[517, 300], |i| rr.at(&[0, i[0]]));
        check(&contiguous(&b).unwrap(), &want, dtype, "columns");
    }
}

#[test]
fn as_strided_reads_row_major_data() {
    for (name, dtype, x, r) in cases(&[3, 4, 5], &[3, 0, 5]) {
        let n = r.data.len();
        let views: Vec<(Vec<usize>, Vec<isize>, usize)> = if n == 0 {
            vec![(vec![0, 4], vec![3, 1], 0)]
        } else {
            vec![
                (vec![n - 2, 3], vec![1, 1], 0),
                (vec![4, 5], vec![-3, 2], 20),
                (vec![2, 3, 2], vec![0, 7, -1], 9),
                (vec![], vec![], n - 1),
            ]
        };
        for (shape, strides, offset) in views {
            let got = as_strided(&x, &shape, &strides, offset).unwrap();
            let want = Nd::from_fn(&shape, |i| {
                let mut k = offset as isize;
                for (&j, &s) in i.iter().zip(&strides) {
                    k += j as isize * s;
                }
                r.data[k as usize]
            });
            check(&got, &want, dtype, &format!("{name} {shape:?} {strides:?}"));
        }
    }
}

#[test]
fn as_strided_rejects_views_outside_the_array() {
    let x = Array::from_slice(&[0i32; 6], &[2, 3]).unwrap();
    is_invalid(as_strided(&x, &[2, 3], &[3, 2], 0), "as_strided");
    is_invalid(as_strided(&x, &[2], &[-1], 0), "as_strided");
    is_invalid(as_strided(&x, &[2], &[1, 1], 0), "as_strided");
}

// ---------------------------------------------------------------------------------------------
// split, split_at, unstack

#[test]
fn split_matches_index_formula() {
    for (name, dtype, x, r) in cases(&[3, 4, 5], &[3, 0, 5]) {
        for axis in 0..3usize {
            let dim = r.shape[axis];
            let mut point_sets = vec![vec![1, 3], vec![0], vec![2, 2, 9], vec![3, 1]];
            point_sets.push(vec![dim]);
            for points in point_sets {
                let parts = split_at(&x, &points, axis as isize - 3).unwrap();
                assert_eq!(parts.len(), points.len() + 1);
                let mut bounds = vec![0];
                bounds.extend(points.iter().copied());
                bounds.push(dim);
                for (k, part) in parts.iter().enumerate() {
                    // Python's a[b_k:b_{k+1}] along the axis.
                    let mut args = vec![SliceArg::full(); 3];
                    args[axis] =
                        SliceArg::new(Some(bounds[k] as isize), Some(bounds[k + 1] as isize), 1);
                    let what = format!("{name} axis {axis} {points:?} part {k}");
                    check(part, &ref_slice(&r, &args), dtype, &what);
                }
            }
            for sections in [1usize, dim].into_iter().filter(|&s| s > 0 && dim % s == 0) {
                let parts = split(&x, sections, axis as isize).unwrap();
                assert_eq!(parts.len(), sections);
                let size = dim / sections;
                for (k, part) in parts.iter().enumerate() {
                    let mut shape = r.shape.clone();
                    shape[axis] = size;
                    let want = remap(&r, &shape, |i| {
                        let mut j = i.to_vec();
                        j[axis] += k * size;
                        j
                    });
                    check(part, &want, dtype, &format!("{name} {sections} sections"));
                }
            }
        }
    }
}

#[test]
fn unstack_inverts_stack() {
    for (name, dtype, x, r) in cases(&[3, 4, 5], &[3, 0, 5]) {
        for axis in [0isize, 1, -1] {
            let ax = axis.rem_euclid(3) as usize;
            let parts = unstack(&x, axis).unwrap();
            assert_eq!(parts.len(), r.shape[ax]);
            for (k, part) in parts.iter().enumerate() {
                let shape: Vec<usize> = (0..3).filter(|&d| d != ax).map(|d| r.shape[d]).collect();
                let want = remap(&r, &shape, |i| {
                    let mut j = i.to_vec();
                    j.insert(ax, k);
                    j
                });
                check(part, &want, dtype, &format!("{name} axis {axis} part {k}"));
            }
            if !parts.is_empty() {
                check(
                    &stack(&parts, axis).unwrap(),
                    &r,
                    dtype,
                    &format!("{name} restack"),
                );
            }
        }
    }
}

#[test]
fn split_rejects_bad_input() {
    let x = Array::from_slice(&[0i32; 12], &[3, 4]).unwrap();
    // Uneven sections, zero sections.
    is_invalid(split(&x, 3, 1), "split");
    is_invalid(split(&x, 0, 1), "split");
    // Axis out of range.
    is_invalid(split(&x, 2, 2), "split");
    is_invalid(split_at(&x, &[1], -3), "split");
    is_invalid(unstack(&x, 2), "unstack");
}

// ---------------------------------------------------------------------------------------------
// concatenate, stack

#[test]
fn concatenate_matches_index_formula() {
    for (name, dtype, x, r) in cases(&[3, 4, 5], &[3, 0, 5]) {
        for axis in 0..3usize {
            // Another array of the same type with a different length on the axis, contiguous.
            let mut shape = r.shape.clone();
            shape[axis] = 2;
            let (y, ry) = make(
                &Nd::from_fn(&shape, |i| value(i.iter().sum::<usize>() + 5)),
                dtype,
            );
            let got = concatenate(&[x.clone(), y.clone(), x.clone()], axis as isize).unwrap();
            let want = ref_concat(&[r.clone(), ry.clone(), r.clone()], axis);
            check(&got, &want, dtype, &format!("{name} axis {axis}"));
        }
    }
}

#[test]
fn concatenate_promotes_types() {
    let a = Nd::from_fn(&[2, 3], |i| value(i[0] * 3 + i[1]));
    let b = Nd::from_fn(&[1, 3], |i| value(i[1] + 17));
    let pairs = [
        (DType::I32, DType::F32, DType::F32),
        (DType::Bool, DType::I32, DType::I32),
        (DType::F16, DType::BF16, DType::F32),
        (DType::U8, DType::I8, DType::I16),
        (DType::F16, DType::I32, DType::F16),
    ];
    // Non-negative values: the unsigned type holds them too.
    let abs = |x: &Nd| Nd {
        shape: x.shape.clone(),
        data: x.data.iter().map(|v| v.abs()).collect(),
    };
    for (da, db, want_dtype) in pairs {
        let (xa, ra) = make(&abs(&a), da);
        let (xb, rb) = make(&abs(&b), db);
        let got = concatenate(&[xa, xb], 0).unwrap();
        check(
            &got,
            &ref_concat(&[ra, rb], 0),
            want_dtype,
            &format!("{da} {db}"),
        );
    }
}

#[test]
fn stack_matches_index_formula() {
    for (name, dtype, x, r) in cases(&[3, 4, 5], &[3, 0, 5]) {
        let y = slice(&x, &[SliceArg::new(None, None, -1)]).unwrap();
        let ry = ref_slice(&r, &[SliceArg::new(None, None, -1)]);
        for axis in [0isize, 2, 3, -1, -4] {
            let ax = axis.rem_euclid(4) as usize;
            let got = stack(&[x.clone(), y.clone()], axis).unwrap();
            let mut shape = r.shape.clone();
            shape.insert(ax, 2);
            let want = Nd::from_fn(&shape, |i| {
                let mut j = i.to_vec();
                let k = j.remove(ax);
                if k == 0 { r.at(&j) } else { ry.at(&j) }
            });
            check(&got, &want, dtype, &format!("{name} axis {axis}"));
        }
    }
}

#[test]
fn concatenate_and_stack_reject_bad_input() {
    let a = Array::from_slice(&[0i32; 6], &[2, 3]).unwrap();
    let b = Array::from_slice(&[0i32; 8], &[2, 4]).unwrap();
    let c = Array::from_slice(&[0i32; 6], &[6]).unwrap();
    // Shapes that differ off the axis, ranks that differ, nothing to join, axis out of range.
    is_invalid(concatenate(&[a.clone(), b.clone()], 0), "concatenate");
    is_invalid(concatenate(&[a.clone(), c.clone()], 0), "concatenate");
    is_invalid(concatenate(&[], 0), "concatenate");
    is_invalid(concatenate(&[a.clone(), a.clone()], 2), "concatenate");
    is_invalid(
        concatenate(&[Array::scalar(1i32), Array::scalar(2i32)], 0),
        "concatenate",
    );
    is_invalid(stack(&[a.clone(), b.clone()], 0), "stack");
    is_invalid(stack(&[], 0), "stack");
    is_invalid(stack(&[a.clone(), a], 3), "stack");
}

// ---------------------------------------------------------------------------------------------
// Random chains of views against index math.

/// A view operation; its parameters are read against the current shape when applied.
#[derive(Clone, Debug)]
enum Step {
    Reshape(u64),
    Transpose(u64),
    Slice(Vec<(Option<i8>, Option<i8>, i8)>),
    Copy,
}

fn step_strategy() -> impl Strategy<Value = Step> {
    let bound = proptest::option::of(-7i8..7);
    let arg = (bound.clone(), bound, prop_oneof![-3i8..0, 1i8..4]);
    prop_oneof![
        any::<u64>().prop_map(Step::Reshape),
        any::<u64>().prop_map(Step::Transpose),
        proptest::collection::vec(arg, 0..4).prop_map(Step::Slice),
        Just(Step::Copy),
    ]
}

/// A small deterministic generator for the choices a step makes.
fn next(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *seed >> 33
}

/// A random shape of `size` elements: its prime factors, shuffled and grouped.
fn random_shape(size: usize, seed: &mut u64) -> Vec<usize> {
    if size == 0 {
        let mut shape: Vec<usize> = (0..next(seed) % 3)
            .map(|_| (next(seed) % 4) as usize)
            .collect();
        shape.insert((next(seed) as usize) % (shape.len() + 1), 0);
        return shape;
    }
    let mut factors = Vec::new();
    let mut n = size;
    let mut p = 2;
    while n > 1 {
        while n.is_multiple_of(p) {
            factors.push(p);
            n /= p;
        }
        p += 1;
    }
    for i in (1..factors.len()).rev() {
        factors.swap(i, next(seed) as usize % (i + 1));
    }
    let mut shape = Vec::new();
    let mut cur = 1;
    for f in factors {
        cur *= f;
        if next(seed).is_multiple_of(2) {
            shape.push(cur);
            cur = 1;
        }
    }
    if cur > 1 {
        shape.push(cur);
    }
    for _ in 0..next(seed) % 2 {
        let at = next(seed) as usize % (shape.len() + 1);
        shape.insert(at, 1);
    }
    shape
}

proptest! {
    #[test]
    fn view_chains_match_index_math(
        shape in proptest::collection::vec(0usize..6, 0..4),
        steps in proptest::collection::vec(step_strategy(), 1..6),
        dtype in prop_oneof![Just(DType::F32), Just(DType::I32), Just(DType::I64)],
    ) {
        let base = Nd::from_fn(&shape, |i| {
            i.iter().fold(0usize, |acc, &k| acc * 7 + k) as f64
        });
        let (mut x, mut r) = make(&base, dtype);
        for step in &steps {
            match step {
                Step::Reshape(seed) => {
                    let mut seed = *seed;
                    let new = random_shape(r.data.len(), &mut seed);
                    let signed: Vec<isize> = new.iter().map(|&d| d as isize).collect();
                    x = x.reshape(&signed).unwrap();
                    r = with_shape(&r, &new);
                }
                Step::Transpose(seed) => {
                    let mut seed = *seed;
                    let mut perm: Vec<usize> = (0..r.shape.len()).collect();
                    for i in (1..perm.len()).rev() {
                        perm.swap(i, next(&mut seed) as usize % (i + 1));
                    }
                    x = transpose(&x, &perm).unwrap();
                    r = ref_transpose(&r, &perm);
                }
                Step::Slice(args) => {
                    let args: Vec<SliceArg> = args
                        .iter()
                        .take(r.shape.len())
                        .map(|&(a, b, s)| {
                            SliceArg::new(a.map(isize::from), b.map(isize::from), isize::from(s))
                        })
                        .collect();
                    x = slice(&x, &args).unwrap();
                    r = ref_slice(&r, &args);
                }
                Step::Copy => x = contiguous(&x).unwrap(),
            }
            prop_assert_eq!(x.shape(), &r.shape[..]);
        }
        prop_assert_eq!(values(&x, dtype), r.data);
    }
}
