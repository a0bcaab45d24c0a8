//! Composite shape operations (flatten, axis moves, flip, roll, tile, repeat, pad, diagonal,
//! diag) against references computed with explicit index math on `Vec<f64>`, over
//! contiguous, transposed, broadcast, sliced (negative steps) and empty inputs of several
//! element types.

mod shape_ref;

use nuvec_core::{
    Array, DType, atleast_1d, atleast_2d, atleast_3d, diag, diagonal, flatten, flip, moveaxis, pad,
    repeat, roll, swapaxes, tile, transpose, unflatten,
};
use shape_ref::*;

// ---------------------------------------------------------------------------------------------
// flatten, unflatten, atleast

#[test]
fn flatten_and_unflatten_keep_row_major_order() {
    for (name, dtype, x, r) in cases(&[3, 4, 5], &[3, 0, 5]) {
        let [a, b, c] = [r.shape[0], r.shape[1], r.shape[2]];
        let flats: [(isize, isize, Vec<usize>); 6] = [
            (0, -1, vec![a * b * c]),
            (1, 2, vec![a, b * c]),
            (0, 1, vec![a * b, c]),
            (-2, -2, vec![a, b, c]),
            (-9, 0, vec![a, b, c]),
            (2, 9, vec![a, b, c]),
        ];
        for (start, end, shape) in flats {
            let got = flatten(&x, start, end).unwrap();
            check(
                &got,
                &with_shape(&r, &shape),
                dtype,
                &format!("{name} {start}..{end}"),
            );
        }
        let got = unflatten(&x, 2, &[c as isize, 1]).unwrap();
        check(
            &got,
            &with_shape(&r, &[a, b, c, 1]),
            dtype,
            &format!("{name} unflatten"),
        );
        if b == 4 {
            let got = unflatten(&x, -2, &[2, -1]).unwrap();
            check(
                &got,
                &with_shape(&r, &[a, 2, 2, c]),
                dtype,
                &format!("{name} infer"),
            );
        }
        let got = unflatten(
            &flatten(&x, 0, -1).unwrap(),
            0,
            &[a as isize, b as isize, -1],
        );
        if b > 0 {
            check(&got.unwrap(), &r, dtype, &format!("{name} round trip"));
        }
    }
    let s = Array::scalar(3.5f32);
    assert_eq!(flatten(&s, 0, -1).unwrap().shape(), [1]);
}

#[test]
fn atleast_adds_axes() {
    for dtype in DTYPES {
        let s = make(&Nd::from_fn(&[], |_| 4.0), dtype).0;
        let v = make(&Nd::from_fn(&[3], |i| value(i[0])), dtype).0;
        let m = make(&Nd::from_fn(&[2, 3], |i| value(i[0] + i[1])), dtype).0;
        let t = make(&Nd::from_fn(&[2, 1, 3], |i| value(i[0] + i[2])), dtype).0;
        let shapes = |x: &Array| {
            [atleast_1d(x), atleast_2d(x), atleast_3d(x)].map(|y| y.unwrap().shape().to_vec())
        };
        assert_eq!(shapes(&s), [vec![1], vec![1, 1], vec![1, 1, 1]]);
        assert_eq!(shapes(&v), [vec![3], vec![1, 3], vec![1, 3, 1]]);
        assert_eq!(shapes(&m), [vec![2, 3], vec![2, 3], vec![2, 3, 1]]);
        assert_eq!(shapes(&t), [vec![2, 1, 3], vec![2, 1, 3], vec![2, 1, 3]]);
        for x in [&s, &v, &m, &t] {
            let want = values(x, dtype);
            assert_eq!(values(&atleast_3d(x).unwrap(), dtype), want);
        }
    }
}

#[test]
fn flatten_and_unflatten_reject_bad_input() {
    let x = Array::from_slice(&[0i32; 12], &[3, 4]).unwrap();
    // start after end, start past the last axis, end before the first.
    is_invalid(flatten(&x, 1, 0), "flatten");
    is_invalid(flatten(&x, 2, 3), "flatten");
    is_invalid(flatten(&x, 0, -3), "flatten");
    // Sizes that do not match, two inferred axes, an empty shape, a bad axis.
    is_invalid(unflatten(&x, 1, &[3, 2]), "unflatten");
    is_invalid(unflatten(&x, 1, &[-1, -1]), "unflatten");
    is_invalid(unflatten(&x, 1, &[-2, -2]), "unflatten");
    is_invalid(unflatten(&x, 1, &[]), "unflatten");
    is_invalid(unflatten(&x, 2, &[4]), "unflatten");
}

// ---------------------------------------------------------------------------------------------
// transpose, swapaxes, moveaxis

#[test]
fn axis_moves_match_index_formula() {
    for (name, dtype, x, r) in cases(&[3, 4, 5], &[3, 0, 5]) {
        for (a1, a2) in [(0isize, 2isize), (-1, 1), (1, 1)] {
            let (p, q) = (a1.rem_euclid(3) as usize, a2.rem_euclid(3) as usize);
            let mut shape = r.shape.clone();
            shape.swap(p, q);
            let want = remap(&r, &shape, |i| {
                let mut j = i.to_vec();
                j.swap(p, q);
                j
            });
            check(
                &swapaxes(&x, a1, a2).unwrap(),
                &want,
                dtype,
                &format!("{name} swap"),
            );
        }
        for (src, dst) in [(0isize, 2isize), (2, 0), (-1, 1), (1, 1)] {
            let (s, d) = (src.rem_euclid(3) as usize, dst.rem_euclid(3) as usize);
            // Output axis d is input axis s; the others keep their order.
            let mut order: Vec<usize> = (0..3).filter(|&k| k != s).collect();
            order.insert(d, s);
            let shape: Vec<usize> = order.iter().map(|&k| r.shape[k]).collect();
            let want = remap(&r, &shape, |i| {
                let mut j = vec![0; 3];
                for (out_axis, &in_axis) in order.iter().enumerate() {
                    j[in_axis] = i[out_axis];
                }
                j
            });
            check(
                &moveaxis(&x, src, dst).unwrap(),
                &want,
                dtype,
                &format!("{name} move"),
            );
        }
        let want = ref_transpose(&r, &[1, 2, 0]);
        check(
            &transpose(&x, &[1, 2, 0]).unwrap(),
            &want,
            dtype,
            &format!("{name} transpose"),
        );
    }
}

#[test]
fn axis_moves_reject_bad_input() {
    let x = Array::from_slice(&[0i32; 12], &[3, 4]).unwrap();
    // Bad permutations: a repeat, too short, out of range.
    is_invalid(transpose(&x, &[0, 0]), "transpose");
    is_invalid(transpose(&x, &[0]), "transpose");
    is_invalid(transpose(&x, &[0, 2]), "transpose");
    is_invalid(swapaxes(&x, 0, 2), "swapaxes");
    is_invalid(moveaxis(&x, -3, 0), "moveaxis");
    // A bad reshape.
    is_invalid(x.reshape(&[5, -1]), "reshape");
}

// ---------------------------------------------------------------------------------------------
// flip, roll

#[test]
fn flip_matches_index_formula() {
    for (name, dtype, x, r) in cases(&[3, 4, 5], &[3, 0, 5]) {
        for axes in [vec![], vec![0isize], vec![-1, 1], vec![2, 0, 1]] {
            let flipped: Vec<usize> = if axes.is_empty() {
                vec![0, 1, 2]
            } else {
                axes.iter().map(|a| a.rem_euclid(3) as usize).collect()
            };
            let want = remap(&r, &r.shape, |i| {
                (0..3)
                    .map(|d| {
                        if flipped.contains(&d) {
                            r.shape[d] - 1 - i[d]
                        } else {
                            i[d]
                        }
                    })
                    .collect()
            });
            check(
                &flip(&x, &axes).unwrap(),
                &want,
                dtype,
                &format!("{name} {axes:?}"),
            );
        }
    }
    let x = Array::from_slice(&[0i32; 6], &[2, 3]).unwrap();
    is_invalid(flip(&x, &[2]), "flip");
    is_invalid(flip(&x, &[1, -1]), "flip");
}

#[test]
fn roll_matches_index_formula() {
    for (name, dtype, x, r) in cases(&[3, 4, 5], &[3, 0, 5]) {
        for shift in [0isize, 1, -2, 7, -13, isize::MIN] {
            for axis in [None, Some(0isize), Some(-1), Some(1)] {
                let got = roll(&x, shift, axis).unwrap();
                let want = match axis {
                    None => {
                        let n = r.data.len() as i128;
                        let data = (0..n)
                            .map(|k| r.data[(k - shift as i128).rem_euclid(n.max(1)) as usize])
                            .collect();
                        Nd {
                            shape: r.shape.clone(),
                            data,
                        }
                    }
                    Some(a) => {
                        let ax = a.rem_euclid(3) as usize;
                        let n = r.shape[ax] as i128;
                        remap(&r, &r.shape, |i| {
                            let mut j = i.to_vec();
                            j[ax] = (i[ax] as i128 - shift as i128).rem_euclid(n) as usize;
                            j
                        })
                    }
                };
                check(&got, &want, dtype, &format!("{name} {shift} {axis:?}"));
            }
        }
    }
    let x = Array::from_slice(&[0i32; 6], &[2, 3]).unwrap();
    is_invalid(roll(&x, 1, Some(2)), "roll");
}

// ---------------------------------------------------------------------------------------------
// tile, repeat

#[test]
fn tile_matches_index_formula() {
    for (name, dtype, x, r) in cases(&[3, 4, 5], &[3, 0, 5]) {
        for reps in [
            vec![],
            vec![2],
            vec![1, 3, 1],
            vec![2, 1, 2, 2],
            vec![2, 0, 1],
        ] {
            let nd = reps.len().max(3);
            let mut shape = vec![1; nd - 3];
            shape.extend(r.shape.iter().copied());
            let mut all = vec![1; nd - reps.len()];
            all.extend(reps.iter().copied());
            let out: Vec<usize> = shape.iter().zip(&all).map(|(n, k)| n * k).collect();
            let want = remap(&r, &out, |i| {
                (nd - 3..nd).map(|d| i[d] % shape[d]).collect()
            });
            check(
                &tile(&x, &reps).unwrap(),
                &want,
                dtype,
                &format!("{name} {reps:?}"),
            );
        }
    }
}

#[test]
fn repeat_matches_index_formula() {
    for (name, dtype, x, r) in cases(&[3, 4, 5], &[3, 0, 5]) {
        for times in [0usize, 1, 3] {
            for axis in [Some(0isize), Some(-1), Some(1)] {
                let ax = axis.unwrap().rem_euclid(3) as usize;
                let mut shape = r.shape.clone();
                shape[ax] *= times;
                let want = remap(&r, &shape, |i| {
                    let mut j = i.to_vec();
                    j[ax] /= times;
                    j
                });
                let got = repeat(&x, times, axis).unwrap();
                check(&got, &want, dtype, &format!("{name} {times} {axis:?}"));
            }
            let n = r.data.len();
            let want = Nd {
                shape: vec![n * times],
                data: (0..n * times).map(|k| r.data[k / times]).collect(),
            };
            check(
                &repeat(&x, times, None).unwrap(),
                &want,
                dtype,
                &format!("{name} flat"),
            );
        }
    }
    let x = Array::from_slice(&[0i32; 6], &[2, 3]).unwrap();
    is_invalid(repeat(&x, 2, Some(-3)), "repeat");
    is_invalid(repeat(&x, usize::MAX, Some(0)), "repeat");
    is_invalid(tile(&x, &[usize::MAX, 2]), "tile");
}

// ---------------------------------------------------------------------------------------------
// pad

#[test]
fn pad_matches_index_formula() {
    for (name, dtype, x, r) in cases(&[3, 4, 5], &[3, 0, 5]) {
        let width_sets: [Vec<(usize, usize)>; 4] = [
            vec![(1, 2)],
            vec![(0, 0), (2, 1), (0, 3)],
            vec![(3, 0), (0, 0), (0, 0)],
            vec![(0, 0); 3],
        ];
        for widths in width_sets {
            let w = if widths.len() == 1 {
                vec![widths[0]; 3]
            } else {
                widths.clone()
            };
            let shape: Vec<usize> = (0..3).map(|d| r.shape[d] + w[d].0 + w[d].1).collect();
            let fill = cast(7.0, dtype);
            let want = Nd::from_fn(&shape, |i| {
                let inside = (0..3).all(|d| i[d] >= w[d].0 && i[d] < w[d].0 + r.shape[d]);
                if inside {
                    r.at(&(0..3).map(|d| i[d] - w[d].0).collect::<Vec<_>>())
                } else {
                    fill
                }
            });
            let got = pad(&x, &widths, 7).unwrap();
            check(&got, &want, dtype, &format!("{name} {widths:?}"));
            // The value as a one-element array of another type.
            let v = Array::from_slice(&[7.0f64], &[1, 1]).unwrap();
            let got = pad(&x, &widths, &v).unwrap();
            check(
                &got,
                &want,
                dtype,
                &format!("{name} {widths:?} array value"),
            );
        }
    }
    // A 0-D array pads to itself; large pads run in parallel chunks.
    let s = Array::scalar(2i32);
    assert_eq!(pad(&s, &[], 0).unwrap().to_vec::<i32>().unwrap(), [2]);
    let big = Nd::from_fn(&[200, 300], |i| value(i[0] * 300 + i[1]));
    let (x, r) = make(&big, DType::F32);
    let t = transpose(&x, &[1, 0]).unwrap();
    let want = Nd::from_fn(&[305, 211], |i| {
        if (1..301).contains(&i[0]) && (10..210).contains(&i[1]) {
            r.at(&[i[1] - 10, i[0] - 1])
        } else {
            -1.5
        }
    });
    check(
        &pad(&t, &[(1, 4), (10, 1)], -1.5).unwrap(),
        &want,
        DType::F32,
        "big",
    );
}

#[test]
fn pad_rejects_bad_input() {
    let x = Array::from_slice(&[0i32; 6], &[2, 3]).unwrap();
    // Wrong number of width pairs; a value that is not one element.
    is_invalid(pad(&x, &[(1, 1); 3], 0), "pad");
    is_invalid(pad(&x, &[(1, 1), (1, 1)], &x), "pad");
    // Widths too large for the result's size.
    is_invalid(pad(&x, &[(usize::MAX, 1), (0, 0)], 0), "pad");
    is_invalid(pad(&x, &[(1 << 40, 0), (1 << 40, 0)], 0), "pad");
}

// ---------------------------------------------------------------------------------------------
// diagonal, diag

#[test]
fn diagonal_matches_index_formula() {
    for (name, dtype, x, r) in cases(&[3, 4, 5], &[3, 0, 5]) {
        for (offset, a1, a2) in [
            (0isize, 0isize, 1isize),
            (1, 1, 2),
            (-2, 2, 0),
            (2, -1, -3),
            (9, 0, 2),
        ] {
            let (p, q) = (a1.rem_euclid(3) as usize, a2.rem_euclid(3) as usize);
            let (sp, sq) = if offset >= 0 {
                (0, offset as usize)
            } else {
                ((-offset) as usize, 0)
            };
            let len = r.shape[p]
                .saturating_sub(sp)
                .min(r.shape[q].saturating_sub(sq));
            let rest: Vec<usize> = (0..3).filter(|&d| d != p && d != q).collect();
            let mut shape: Vec<usize> = rest.iter().map(|&d| r.shape[d]).collect();
            shape.push(len);
            let want = remap(&r, &shape, |i| {
                let mut j = vec![0; 3];
                for (k, &d) in rest.iter().enumerate() {
                    j[d] = i[k];
                }
                j[p] = i[rest.len()] + sp;
                j[q] = i[rest.len()] + sq;
                j
            });
            let got = diagonal(&x, offset, a1, a2).unwrap();
            check(&got, &want, dtype, &format!("{name} {offset} {a1} {a2}"));
        }
    }
}

#[test]
fn diag_matches_index_formula() {
    for (name, dtype, x, r) in cases(&[3, 4, 5], &[3, 0, 5]) {
        for dims in [1, 2] {
            let (y, ry) = lower(&x, &r, dims);
            for k in [0isize, 1, -2, 5] {
                let got = diag(&y, k).unwrap();
                let want = if dims == 1 {
                    let m = ry.shape[0] + k.unsigned_abs();
                    Nd::from_fn(&[m, m], |i| {
                        let (row, col) = (i[0] as isize, i[1] as isize);
                        if col - row == k {
                            ry.at(&[row.min(col) as usize])
                        } else {
                            0.0
                        }
                    })
                } else {
                    let (sp, sq) = if k >= 0 {
                        (0, k as usize)
                    } else {
                        ((-k) as usize, 0)
                    };
                    let len = ry.shape[0]
                        .saturating_sub(sp)
                        .min(ry.shape[1].saturating_sub(sq));
                    Nd::from_fn(&[len], |i| ry.at(&[i[0] + sp, i[0] + sq]))
                };
                check(&got, &want, dtype, &format!("{name} {dims}-D k {k}"));
            }
        }
    }
}

#[test]
fn diagonal_rejects_bad_input() {
    let x = Array::from_slice(&[0i32; 6], &[2, 3]).unwrap();
    let v = Array::from_slice(&[0i32; 6], &[6]).unwrap();
    let t = Array::from_slice(&[0i32; 6], &[1, 2, 3]).unwrap();
    // Too few dimensions, the same axis twice, an axis out of range.
    is_invalid(diagonal(&v, 0, 0, 1), "diagonal");
    is_invalid(diagonal(&x, 0, 1, -1), "diagonal");
    is_invalid(diagonal(&x, 0, 0, 2), "diagonal");
    is_invalid(diag(&t, 0), "diag");
    is_invalid(diag(&Array::scalar(1i32), 0), "diag");
}
