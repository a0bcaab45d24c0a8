//! `take`, `take_along_axis` and `gather`.

use super::*;

// ---------------------------------------------------------------------------------------------
// take

fn take_reference(
    a: &[f64],
    shape: &[usize],
    idx: &[i64],
    idx_shape: &[usize],
    axis: usize,
) -> (Vec<usize>, Vec<f64>) {
    let mut out_shape = shape[..axis].to_vec();
    out_shape.extend_from_slice(idx_shape);
    out_shape.extend_from_slice(&shape[axis + 1..]);
    let n: usize = out_shape.iter().product();
    let out = (0..n)
        .map(|k| {
            let o = unravel(k, &out_shape);
            let j = ravel(&o[axis..axis + idx_shape.len()], idx_shape);
            let mut src = o[..axis].to_vec();
            src.push(clamped(idx[j], shape[axis], 1));
            src.extend_from_slice(&o[axis + idx_shape.len()..]);
            a[ravel(&src, shape)]
        })
        .collect();
    (out_shape, out)
}

#[test]
fn take_matches_formula() {
    let mut rng = Rng(1);
    let shape = [3usize, 4, 2];
    for dtype in DTYPES {
        for kind in KINDS {
            for idt in INDEX_DTYPES {
                for axis in [None, Some(0isize), Some(1), Some(-1)] {
                    for idx_shape in [vec![5usize], vec![2, 3], vec![]] {
                        let (a, av) = make(&shape, dtype, kind, &mut rng);
                        let ni: usize = idx_shape.iter().product();
                        let (flat, ax, dim_shape) = match axis {
                            None => (true, 0, vec![24usize]),
                            Some(x) => (false, x.rem_euclid(3) as usize, shape.to_vec()),
                        };
                        let iv = rng.indices(ni, dim_shape[ax], idt);
                        let idx = index_array(&iv, &idx_shape, idt);
                        let got = take(&a, &idx, axis).unwrap();
                        let (ws, want) = take_reference(&av, &dim_shape, &iv, &idx_shape, ax);
                        let what = format!("{dtype} {kind:?} {idt} {axis:?} {idx_shape:?}");
                        check(&got, &ws, &want, &what);
                        assert!(flat || got.ndim() == 2 + idx_shape.len());
                    }
                }
            }
        }
    }
}

#[test]
fn take_handles_empty_inputs() {
    let mut rng = Rng(2);
    for dtype in DTYPES {
        // An empty array, indexed on a non-empty axis.
        let (a, _) = make(&[3, 0, 2], dtype, Kind::Contiguous, &mut rng);
        let idx = index_array(&[2, -1], &[2], DType::I32);
        let got = take(&a, &idx, Some(0)).unwrap();
        check(&got, &[2, 0, 2], &[], "empty array");
        // No indices.
        let (a, _) = make(&[3, 4], dtype, Kind::Transposed, &mut rng);
        let none = index_array(&[], &[0], DType::I64);
        check(
            &take(&a, &none, Some(1)).unwrap(),
            &[3, 0],
            &[],
            "no indices",
        );
        check(
            &take(&a, &none, None).unwrap(),
            &[0],
            &[],
            "no flat indices",
        );
        // An empty axis with no indices.
        let (a, _) = make(&[0, 4], dtype, Kind::Contiguous, &mut rng);
        check(
            &take(&a, &none, Some(0)).unwrap(),
            &[0, 4],
            &[],
            "empty axis",
        );
    }
}

#[test]
fn take_of_a_scalar_index_drops_the_axis() {
    let mut rng = Rng(3);
    let (a, av) = make(&[3, 4], DType::F32, Kind::Transposed, &mut rng);
    let got = take(&a, &Array::scalar(-2i32), Some(1)).unwrap();
    let want: Vec<f64> = (0..3).map(|i| av[i * 4 + 2]).collect();
    check(&got, &[3], &want, "column -2");
    let got = take(&a, &Array::scalar(7u32), None).unwrap();
    check(&got, &[], &[av[7]], "flat 7");
}

#[test]
fn large_gathers_run_in_parallel_chunks() {
    // Large enough for the chunked path, with rows of 100 so that chunks start mid-row.
    let (rows, cols, n) = (700usize, 100usize, 2000usize);
    let table: Vec<f32> = (0..rows * cols).map(|v| v as f32).collect();
    let a = Array::from_vec(table.clone(), &[rows, cols]).unwrap();
    let iv: Vec<i64> = (0..n as i64).map(|k| (k * 7919) % 900 - 100).collect();
    let idx = Array::from_vec(iv.clone(), &[n]).unwrap();
    let got = take(&a, &idx, Some(0)).unwrap().to_vec::<f32>().unwrap();
    for (k, &i) in iv.iter().enumerate() {
        let r = clamped(i, rows, 1);
        assert_eq!(
            got[k * cols..(k + 1) * cols],
            table[r * cols..(r + 1) * cols]
        );
    }
    // The transpose: columns of `a` are strided blocks (axis 0), single elements (axis 1).
    let at = a.t().unwrap();
    let iv_c: Vec<i64> = iv.iter().map(|&i| i % 120).collect();
    let idx_c = Array::from_vec(iv_c.clone(), &[n]).unwrap();
    let got = take(&at, &idx_c, Some(0)).unwrap();
    assert_eq!(got.shape(), [n, rows]);
    let got = got.to_vec::<f32>().unwrap();
    for (k, &i) in iv_c.iter().enumerate() {
        let c = clamped(i, cols, 1);
        for r in 0..rows {
            assert_eq!(got[k * rows + r], table[r * cols + c]);
        }
    }
    let got = take(&at, &idx, Some(1)).unwrap();
    assert_eq!(got.shape(), [cols, n]);
    let got = got.to_vec::<f32>().unwrap();
    for c in 0..cols {
        for (k, &i) in iv.iter().enumerate() {
            assert_eq!(got[c * n + k], table[clamped(i, rows, 1) * cols + c]);
        }
    }
    // take_along_axis over the transpose, indices broadcast along axis 0.
    let ia = Array::from_vec(iv.clone(), &[1, n]).unwrap();
    let got = take_along_axis(&at, &ia, Some(1)).unwrap();
    assert_eq!(got.shape(), [cols, n]);
    let got = got.to_vec::<f32>().unwrap();
    for c in 0..cols {
        for (k, &i) in iv.iter().enumerate() {
            assert_eq!(got[c * n + k], table[clamped(i, rows, 1) * cols + c]);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// take_along_axis

#[test]
fn take_along_axis_matches_formula() {
    let mut rng = Rng(4);
    // (a's shape, indices' shape, axis): equal shapes, indices broadcasting, `a` broadcasting.
    let cases: [(&[usize], &[usize], isize); 5] = [
        (&[3, 4, 2], &[3, 5, 2], 1),
        (&[3, 4, 2], &[1, 6, 2], -2),
        (&[3, 4, 2], &[3, 4, 1], 0),
        (&[3, 1, 2], &[3, 4, 3], 2),
        (&[2, 3], &[2, 0], 1),
    ];
    for dtype in DTYPES {
        for kind in KINDS {
            for idt in INDEX_DTYPES {
                for (shape, ishape, axis) in cases {
                    let (a, av) = make(shape, dtype, kind, &mut rng);
                    let ax = axis.rem_euclid(shape.len() as isize) as usize;
                    let ni: usize = ishape.iter().product();
                    let iv = rng.indices(ni, shape[ax], idt);
                    let idx = index_array(&iv, ishape, idt);
                    let got = take_along_axis(&a, &idx, Some(axis)).unwrap();
                    let out_shape: Vec<usize> = (0..shape.len())
                        .map(|d| {
                            if d == ax {
                                ishape[d]
                            } else {
                                shape[d].max(ishape[d])
                            }
                        })
                        .collect();
                    let n: usize = out_shape.iter().product();
                    let want: Vec<f64> = (0..n)
                        .map(|k| {
                            let mut q = unravel(k, &out_shape);
                            let i = at_broadcast(
                                &iv.iter().map(|&v| v as f64).collect::<Vec<_>>(),
                                ishape,
                                &q,
                            );
                            q[ax] = clamped(i as i64, shape[ax], 1);
                            at_broadcast(&av, shape, &q)
                        })
                        .collect();
                    let what = format!("{dtype} {kind:?} {idt} {shape:?} {ishape:?} {axis}");
                    check(&got, &out_shape, &want, &what);
                }
            }
        }
    }
}

#[test]
fn take_along_axis_none_flattens() {
    let mut rng = Rng(5);
    let (a, av) = make(&[3, 4], DType::I32, Kind::Transposed, &mut rng);
    let iv = [11i64, -1, 0, 13, -20];
    let idx = index_array(&iv, &[5], DType::I64);
    let got = take_along_axis(&a, &idx, None).unwrap();
    let want: Vec<f64> = iv.iter().map(|&i| av[clamped(i, 12, 1)]).collect();
    check(&got, &[5], &want, "flat");
}
// ---------------------------------------------------------------------------------------------
// gather

#[test]
fn gather_matches_formula() {
    let mut rng = Rng(8);
    let shape = [4usize, 3, 5];
    // (axes, index shapes (broadcast together), slice sizes)
    let cases: [IndexCase; 5] = [
        (&[0, 2], &[&[2, 1], &[3]], &[2, 3, 2]),
        (&[-1], &[&[4]], &[4, 1, 1]),
        (&[1, 0, 2], &[&[2], &[2], &[1]], &[1, 1, 5]),
        (&[], &[], &[3, 2, 4]),
        (&[0], &[&[0, 2]], &[1, 3, 5]),
    ];
    for dtype in DTYPES {
        for kind in KINDS {
            for idt in INDEX_DTYPES {
                for case in cases {
                    let (axes, ishapes, sizes) = case;
                    let (a, av) = make(&shape, dtype, kind, &mut rng);
                    let ix = Indices::random(&mut rng, &shape, case, idt);
                    let bshape = &ix.shape;
                    let got = gather(&a, &ix.arrays, axes, sizes).unwrap();
                    let mut out_shape = bshape.clone();
                    out_shape.extend_from_slice(sizes);
                    let np: usize = bshape.iter().product();
                    let wn: usize = sizes.iter().product();
                    let mut want = Vec::new();
                    for p in 0..np {
                        let pi = unravel(p, bshape);
                        let mut start = [0usize; 3];
                        for (j, ishape) in ishapes.iter().enumerate() {
                            let ax = axes[j].rem_euclid(3) as usize;
                            let v = ix.at(j, ishape, &pi);
                            start[ax] = clamped(v, shape[ax], sizes[ax]);
                        }
                        for w in 0..wn {
                            let s = unravel(w, sizes);
                            let src: Vec<usize> = (0..3).map(|d| start[d] + s[d]).collect();
                            want.push(av[ravel(&src, &shape)]);
                        }
                    }
                    let what = format!("{dtype} {kind:?} {idt} {axes:?} {ishapes:?}");
                    check(&got, &out_shape, &want, &what);
                }
            }
        }
    }
}
