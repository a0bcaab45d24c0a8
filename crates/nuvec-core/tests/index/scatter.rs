//! `put_along_axis`, `scatter_add_axis`, `scatter` and its reductions.

use super::*;

// ---------------------------------------------------------------------------------------------
// put_along_axis, scatter_add_axis

/// The scatter along an axis, element by element in row-major order of the index shape.
#[allow(clippy::too_many_arguments)]
fn scatter_axis_reference(
    mode: ScatterMode,
    dtype: DType,
    a: &[f64],
    shape: &[usize],
    idx: &[i64],
    ishape: &[usize],
    values: &[f64],
    vshape: &[usize],
    axis: usize,
) -> Vec<f64> {
    let mut out = a.to_vec();
    for (k, &v) in idx.iter().enumerate() {
        let q = unravel(k, ishape);
        let Some(i) = in_range(v, shape[axis], 1) else {
            continue;
        };
        let mut t = q.clone();
        t[axis] = i;
        let t = ravel(&t, shape);
        combine_into(&mut out[t], mode, dtype, at_broadcast(values, vshape, &q));
    }
    out
}

#[test]
fn put_along_axis_and_scatter_add_axis_match_formula() {
    let mut rng = Rng(6);
    // (a's shape, indices' shape, values' shape, axis)
    let cases: [AxisCase; 4] = [
        (&[3, 4, 2], &[3, 6, 2], &[3, 6, 2], 1),
        (&[3, 4, 2], &[3, 5, 2], &[5, 1], -2),
        (&[4, 3], &[7, 3], &[], 0),
        (&[2, 3], &[2, 0], &[2, 0], 1),
    ];
    let mut step = 0usize;
    for dtype in DTYPES {
        for kind in KINDS {
            for idt in INDEX_DTYPES {
                for (shape, ishape, vshape, axis) in cases {
                    for mode in [ScatterMode::Replace, ScatterMode::Sum] {
                        let (a, av) = make(shape, dtype, kind, &mut rng);
                        let ax = axis.rem_euclid(shape.len() as isize) as usize;
                        let ni: usize = ishape.iter().product();
                        let iv = rng.indices(ni, shape[ax], idt);
                        let idx = index_array(&iv, ishape, idt);
                        // Values of every layout; as float32 (cast by the op) for integer
                        // indices, else of `a`'s type (views reach the kernel as they are).
                        step += 1;
                        let vkind = KINDS[step % KINDS.len()];
                        let vtype = if idt == DType::I32 { DType::F32 } else { dtype };
                        let (v, vv) = make(vshape, vtype, vkind, &mut rng);
                        let vv: Vec<f64> = vv.iter().map(|&x| held(x, dtype)).collect();
                        let got = match mode {
                            ScatterMode::Replace => put_along_axis(&a, &idx, &v, Some(axis)),
                            _ => scatter_add_axis(&a, &idx, &v, Some(axis)),
                        }
                        .unwrap();
                        let want = scatter_axis_reference(
                            mode, dtype, &av, shape, &iv, ishape, &vv, vshape, ax,
                        );
                        let what = format!("{mode:?} {dtype} {kind:?} {idt} {shape:?} {ishape:?}");
                        check(&got, shape, &want, &what);
                        // The input is untouched.
                        assert_eq!(read(&a), av, "{what}: input changed");
                    }
                }
            }
        }
    }
}

#[test]
fn put_along_axis_none_keeps_the_shape() {
    let mut rng = Rng(7);
    let (a, av) = make(&[3, 4], DType::F32, Kind::Transposed, &mut rng);
    let iv = [11i64, -1, 0, 13, -20, 5];
    let idx = index_array(&iv, &[6], DType::I32);
    let v = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[6]).unwrap();
    let vv = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let put = put_along_axis(&a, &idx, &v, None).unwrap();
    let add = scatter_add_axis(&a, &idx, &v, None).unwrap();
    for (got, mode) in [(put, ScatterMode::Replace), (add, ScatterMode::Sum)] {
        let want = scatter_axis_reference(mode, DType::F32, &av, &[12], &iv, &[6], &vv, &[6], 0);
        check(&got, &[3, 4], &want, &format!("flat {mode:?}"));
    }
}

#[test]
fn large_scatters_along_an_axis_match_formula() {
    // Many blocks of positions, over a transposed target and broadcast values.
    let mut rng = Rng(12);
    let (rows, cols, m) = (50usize, 300usize, 400usize);
    let (a, av) = make(&[rows, cols], DType::I32, Kind::Transposed, &mut rng);
    let iv = rng.indices(rows * m, cols, DType::I64);
    let idx = index_array(&iv, &[rows, m], DType::I64);
    let vv = rng.values(m, DType::I32);
    let v = Array::from_vec(vv.iter().map(|&x| x as i32).collect::<Vec<_>>(), &[1, m]).unwrap();
    for mode in [ScatterMode::Replace, ScatterMode::Sum] {
        let got = match mode {
            ScatterMode::Replace => put_along_axis(&a, &idx, &v, Some(-1)),
            _ => scatter_add_axis(&a, &idx, &v, Some(-1)),
        }
        .unwrap();
        let want = scatter_axis_reference(
            mode,
            DType::I32,
            &av,
            &[rows, cols],
            &iv,
            &[rows, m],
            &vv,
            &[1, m],
            1,
        );
        check(&got, &[rows, cols], &want, &format!("{mode:?}"));
    }
}

// ---------------------------------------------------------------------------------------------
// scatter and its reductions

fn scatter_mode(
    mode: ScatterMode,
    a: &Array,
    indices: &[Array],
    updates: &Array,
    axes: &[isize],
) -> nuvec_core::Result<Array> {
    match mode {
        ScatterMode::Replace => scatter(a, indices, updates, axes),
        ScatterMode::Sum => scatter_add(a, indices, updates, axes),
        ScatterMode::Prod => scatter_prod(a, indices, updates, axes),
        ScatterMode::Max => scatter_max(a, indices, updates, axes),
        ScatterMode::Min => scatter_min(a, indices, updates, axes),
    }
}

#[test]
fn scatter_matches_formula() {
    let mut rng = Rng(9);
    let shape = [4usize, 3, 5];
    // (axes, index shapes (broadcast together), window)
    let cases: [IndexCase; 5] = [
        (&[0, 2], &[&[3, 1], &[4]], &[1, 3, 2]),
        (&[-3], &[&[6]], &[1, 2, 5]),
        (&[1, 0], &[&[5], &[5]], &[1, 1, 5]),
        (&[], &[], &[2, 2, 3]),
        (&[2], &[&[0]], &[4, 3, 1]),
    ];
    for dtype in DTYPES {
        for kind in KINDS {
            for mode in MODES {
                for (c, &case) in cases.iter().enumerate() {
                    let (axes, ishapes, window) = case;
                    let idt = INDEX_DTYPES[c % 3];
                    let (a, av) = make(&shape, dtype, kind, &mut rng);
                    let ix = Indices::random(&mut rng, &shape, case, idt);
                    let bshape = &ix.shape;
                    let mut ushape = bshape.clone();
                    ushape.extend_from_slice(window);
                    // Updates laid out every way too (transposed, broadcast).
                    let (u, uv) = make(&ushape, dtype, KINDS[(c + 1) % KINDS.len()], &mut rng);
                    let got = scatter_mode(mode, &a, &ix.arrays, &u, axes).unwrap();
                    let np: usize = bshape.iter().product();
                    let wn: usize = window.iter().product();
                    let mut want = av.clone();
                    'positions: for p in 0..np {
                        let pi = unravel(p, bshape);
                        let mut start = [0usize; 3];
                        for (j, ishape) in ishapes.iter().enumerate() {
                            let ax = axes[j].rem_euclid(3) as usize;
                            let v = ix.at(j, ishape, &pi);
                            match in_range(v, shape[ax], window[ax]) {
                                Some(s) => start[ax] = s,
                                None => continue 'positions,
                            }
                        }
                        for w in 0..wn {
                            let s = unravel(w, window);
                            let t: Vec<usize> = (0..3).map(|d| start[d] + s[d]).collect();
                            let t = ravel(&t, &shape);
                            want[t] = combine(mode, dtype, want[t], uv[p * wn + w]);
                        }
                    }
                    let what = format!("{mode:?} {dtype} {kind:?} {idt} {axes:?} {ishapes:?}");
                    check(&got, &shape, &want, &what);
                    assert_eq!(read(&a), av, "{what}: input changed");
                }
            }
        }
    }
}

#[test]
fn scatter_into_an_empty_array() {
    let a = Array::from_vec(Vec::<f32>::new(), &[0, 3]).unwrap();
    let idx = index_array(&[], &[0], DType::I32);
    let u = Array::from_vec(Vec::<f32>::new(), &[0, 0, 3]).unwrap();
    check(
        &scatter_add(&a, std::slice::from_ref(&idx), &u, &[0]).unwrap(),
        &[0, 3],
        &[],
        "scatter",
    );
    let i2 = index_array(&[], &[0, 3], DType::I32);
    let v = Array::from_vec(Vec::<f32>::new(), &[0, 3]).unwrap();
    check(
        &put_along_axis(&a, &i2, &v, Some(0)).unwrap(),
        &[0, 3],
        &[],
        "put",
    );
}
