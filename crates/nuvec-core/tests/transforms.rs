//! vjp, jvp and vmap against central differences in f64 and loops over the batch, for the
//! elementwise and shape primitives; nesting; errors.

mod common;

use common::Rng;
use common::autodiff::{check, random, values};
use nuvec_core::*;

type F = fn(&[Array]) -> Result<Vec<Array>>;

#[test]
fn unary_derivatives_match_central_differences() {
    let mut rng = Rng::new(10);
    let cases: &[(&str, F, (f64, f64))] = &[
        ("abs", |x| Ok(vec![abs(&x[0])?]), (0.2, 2.0)),
        ("negative", |x| Ok(vec![negative(&x[0])?]), (-2.0, 2.0)),
        ("square", |x| Ok(vec![square(&x[0])?]), (-2.0, 2.0)),
        ("sqrt", |x| Ok(vec![sqrt(&x[0])?]), (0.5, 3.0)),
        ("rsqrt", |x| Ok(vec![rsqrt(&x[0])?]), (0.5, 3.0)),
        ("reciprocal", |x| Ok(vec![reciprocal(&x[0])?]), (0.5, 3.0)),
        ("exp", |x| Ok(vec![exp(&x[0])?]), (-2.0, 2.0)),
        ("expm1", |x| Ok(vec![expm1(&x[0])?]), (-2.0, 2.0)),
        ("log", |x| Ok(vec![log(&x[0])?]), (0.5, 3.0)),
        ("log1p", |x| Ok(vec![log1p(&x[0])?]), (0.5, 3.0)),
        ("log2", |x| Ok(vec![log2(&x[0])?]), (0.5, 3.0)),
        ("log10", |x| Ok(vec![log10(&x[0])?]), (0.5, 3.0)),
        ("sin", |x| Ok(vec![sin(&x[0])?]), (-2.0, 2.0)),
        ("cos", |x| Ok(vec![cos(&x[0])?]), (-2.0, 2.0)),
        ("tan", |x| Ok(vec![tan(&x[0])?]), (-1.0, 1.0)),
        ("arcsin", |x| Ok(vec![arcsin(&x[0])?]), (-0.8, 0.8)),
        ("arccos", |x| Ok(vec![arccos(&x[0])?]), (-0.8, 0.8)),
        ("arctan", |x| Ok(vec![arctan(&x[0])?]), (-2.0, 2.0)),
        ("sinh", |x| Ok(vec![sinh(&x[0])?]), (-2.0, 2.0)),
        ("cosh", |x| Ok(vec![cosh(&x[0])?]), (-2.0, 2.0)),
        ("tanh", |x| Ok(vec![tanh(&x[0])?]), (-2.0, 2.0)),
        ("arcsinh", |x| Ok(vec![arcsinh(&x[0])?]), (-2.0, 2.0)),
        ("arccosh", |x| Ok(vec![arccosh(&x[0])?]), (1.5, 3.0)),
        ("arctanh", |x| Ok(vec![arctanh(&x[0])?]), (-0.8, 0.8)),
        ("sigmoid", |x| Ok(vec![sigmoid(&x[0])?]), (-3.0, 3.0)),
        ("erf", |x| Ok(vec![erf(&x[0])?]), (-1.5, 1.5)),
        ("erfinv", |x| Ok(vec![erfinv(&x[0])?]), (-0.8, 0.8)),
        ("floor", |x| Ok(vec![floor(&x[0])?]), (0.1, 0.9)),
        (
            "astype",
            |x| Ok(vec![x[0].astype(DType::F32)?.astype(DType::F64)?]),
            (-1.0, 1.0),
        ),
        (
            "stop_gradient",
            |x| Ok(vec![multiply(&x[0], stop_gradient(&x[0])?)?]),
            (-1.0, 1.0),
        ),
    ];
    for &(name, f, (lo, hi)) in cases {
        let x = random(&mut rng, &[2, 3], lo, hi);
        if name == "astype" {
            // Through float32 the derivative is 1 only to single precision: check directly.
            let g = vjp(
                f,
                std::slice::from_ref(&x),
                &[Array::full(&[2, 3], 1.0f64).unwrap()],
            )
            .unwrap()
            .1;
            assert_eq!(values(&g[0]), vec![1.0; 6]);
            continue;
        }
        if name == "stop_gradient" {
            let g = vjp(
                f,
                std::slice::from_ref(&x),
                &[Array::full(&[2, 3], 1.0f64).unwrap()],
            )
            .unwrap()
            .1;
            assert_eq!(values(&g[0]), values(&x), "d(x · sg(x))/dx = sg(x)");
            continue;
        }
        check(name, f, &[x], &mut rng);
    }
}

#[test]
fn binary_and_where_derivatives_match_central_differences() {
    let mut rng = Rng::new(11);
    let cases: &[(&str, F)] = &[
        ("add", |x| Ok(vec![add(&x[0], &x[1])?])),
        ("subtract", |x| Ok(vec![subtract(&x[0], &x[1])?])),
        ("multiply", |x| Ok(vec![multiply(&x[0], &x[1])?])),
        ("divide", |x| Ok(vec![divide(&x[0], &x[1])?])),
        ("power", |x| Ok(vec![power(&x[0], &x[1])?])),
        ("maximum", |x| Ok(vec![maximum(&x[0], &x[1])?])),
        ("minimum", |x| Ok(vec![minimum(&x[0], &x[1])?])),
        ("arctan2", |x| Ok(vec![arctan2(&x[0], &x[1])?])),
        ("logaddexp", |x| Ok(vec![logaddexp(&x[0], &x[1])?])),
        ("remainder", |x| Ok(vec![remainder(&x[0], &x[1])?])),
        ("where", |x| {
            Ok(vec![where_(
                greater(&x[0], &x[1])?,
                &x[0],
                multiply(&x[1], 3.0)?,
            )?])
        }),
        ("two outputs", |x| {
            Ok(vec![multiply(&x[0], &x[1])?, exp(&x[0])?])
        }),
    ];
    for &(name, f) in cases {
        let a = random(&mut rng, &[3, 4], 0.5, 2.0);
        let b = random(&mut rng, &[3, 4], 0.6, 1.9);
        check(name, f, &[a, b], &mut rng);
    }
}

#[test]
fn shape_derivatives_match_central_differences() {
    let mut rng = Rng::new(12);
    let cases: &[(&str, F)] = &[
        ("reshape", |x| {
            Ok(vec![multiply(&x[0].reshape(&[4, 3])?, &x[1])?])
        }),
        ("transpose", |x| {
            Ok(vec![multiply(
                &transpose(&x[0], &[1, 0])?,
                &x[1].reshape(&[4, 3])?,
            )?])
        }),
        ("contiguous", |x| {
            Ok(vec![multiply(
                &contiguous(&x[0].t()?)?,
                &x[1].reshape(&[4, 3])?,
            )?])
        }),
        ("expand and squeeze", |x| {
            Ok(vec![squeeze(
                &expand_dims(&multiply(&x[0], &x[1])?, 1)?,
                &[1],
            )?])
        }),
    ];
    for &(name, f) in cases {
        let a = random(&mut rng, &[3, 4], -1.0, 1.0);
        let b = random(&mut rng, &[3, 4], -1.0, 1.0);
        if name == "reshape" {
            let b = random(&mut rng, &[4, 3], -1.0, 1.0);
            check(name, f, &[a, b], &mut rng);
        } else {
            check(name, f, &[a, b], &mut rng);
        }
    }
}

#[test]
fn transforms_nest() {
    // d²/dx² of x³ is 6x: grad of a vjp.
    let x = Array::from_slice(&[0.5f64, -2.0], &[2]).unwrap();
    let first = |xs: &[Array]| {
        let f = |ys: &[Array]| Ok(vec![multiply(&multiply(&ys[0], &ys[0])?, &ys[0])?]);
        let ones = ones_like(&xs[0])?;
        Ok(vjp(f, xs, &[ones])?.1)
    };
    let (_, second) = vjp(first, std::slice::from_ref(&x), &[ones_like(&x).unwrap()]).unwrap();
    assert_eq!(values(&second[0]), [3.0, -12.0]);
    // jvp of a vjp: the same second derivative.
    let (_, jv) = jvp(first, std::slice::from_ref(&x), &[ones_like(&x).unwrap()]).unwrap();
    assert_eq!(values(&jv[0]), [3.0, -12.0]);
    // vmap of vmap: an outer product of rows.
    let a = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let inner = |v: &[Array]| Ok(vec![multiply(&v[0], &v[1])?]);
    let outer = move |v: &[Array]| vmap(inner, &[Some(0), None], &[0])(v);
    let got = vmap(outer, &[None, Some(0)], &[0])(&[a.clone(), a.clone()]).unwrap();
    assert_eq!(got[0].shape(), [2, 2, 3]);
    let want: Vec<f32> = (0..2)
        .flat_map(|i| {
            (0..2)
                .flat_map(move |j| (0..3).map(move |k| ((j * 3 + k + 1) * (i * 3 + k + 1)) as f32))
        })
        .collect();
    assert_eq!(got[0].to_vec::<f32>().unwrap(), want);
    // vmap of a vjp: per-example gradients of x², with the batch in the middle.
    let xs = Array::from_slice(&[1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]).unwrap();
    let per = vmap(
        |v: &[Array]| {
            let f = |ys: &[Array]| Ok(vec![square(&ys[0])?]);
            Ok(vjp(f, v, &[ones_like(&v[0])?])?.1)
        },
        &[Some(1)],
        &[1],
    )(std::slice::from_ref(&xs))
    .unwrap();
    assert_eq!(values(&per[0]), values(&multiply(&xs, 2.0).unwrap()));
}

#[test]
fn vmap_matches_a_loop_with_any_batch_axis() {
    let mut rng = Rng::new(13);
    let f: F = |v| {
        Ok(vec![
            add(&exp(&v[0])?, &multiply(&v[1], &v[0])?)?,
            transpose(&v[0], &[1, 0])?,
        ])
    };
    let x = random(&mut rng, &[4, 3, 5], -1.0, 1.0);
    let y = random(&mut rng, &[3, 5], -1.0, 1.0);
    for ax in 0..3 {
        let moved = transpose(
            &x,
            &match ax {
                0 => vec![0, 1, 2],
                1 => vec![1, 0, 2],
                _ => vec![1, 2, 0],
            },
        )
        .unwrap();
        for out_ax in [0usize, 1] {
            let got =
                vmap(f, &[Some(ax), None], &[out_ax, 2])(&[moved.clone(), y.clone()]).unwrap();
            let xv = values(&x);
            for b in 0..4 {
                let xb = Array::from_slice(&xv[b * 15..(b + 1) * 15], &[3, 5]).unwrap();
                let want = f(&[xb, y.clone()]).unwrap();
                // Output 0 has the batch at `out_ax`, output 1 at 2.
                let pick0: Vec<f64> = values(&got[0]);
                let shape0 = got[0].shape().to_vec();
                let w0 = values(&want[0]);
                for i in 0..3 {
                    for j in 0..5 {
                        let idx = if out_ax == 0 {
                            (b * 3 + i) * 5 + j
                        } else {
                            (i * shape0[1] + b) * 5 + j
                        };
                        assert!(
                            (pick0[idx] - w0[i * 5 + j]).abs() < 1e-12,
                            "axis {ax} out {out_ax}"
                        );
                    }
                }
                let w1 = values(&want[1]);
                let g1 = values(&got[1]);
                for i in 0..5 {
                    for j in 0..3 {
                        assert!((g1[(i * 3 + j) * 4 + b] - w1[i * 3 + j]).abs() < 1e-12);
                    }
                }
            }
        }
    }
}

#[test]
fn transform_errors_are_reported() {
    let x = Array::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    let f: F = |v| Ok(vec![exp(&v[0])?]);
    let bad = Array::from_slice(&[1.0f32; 3], &[3]).unwrap();
    assert!(
        vjp(f, std::slice::from_ref(&x), std::slice::from_ref(&bad)).is_err(),
        "cotangent shape"
    );
    assert!(
        vjp(f, std::slice::from_ref(&x), &[]).is_err(),
        "cotangent count"
    );
    assert!(
        jvp(f, std::slice::from_ref(&x), std::slice::from_ref(&bad)).is_err(),
        "tangent shape"
    );
    let nothing: F = |_| Ok(vec![]);
    assert!(
        vjp(nothing, std::slice::from_ref(&x), &[]).is_err(),
        "no outputs"
    );
    let y = Array::from_slice(&[1.0f32; 6], &[3, 2]).unwrap();
    let g: F = |v| Ok(vec![add(&v[0], &v[1])?]);
    assert!(
        vmap(g, &[Some(0), Some(0)], &[0])(&[x.clone(), y.clone()]).is_err(),
        "batch sizes"
    );
    assert!(
        vmap(g, &[Some(2), None], &[0])(&[x.clone(), y.clone()]).is_err(),
        "in_axes range"
    );
    assert!(
        vmap(g, &[Some(0)], &[0])(&[x.clone(), y.clone()]).is_err(),
        "in_axes count"
    );
    assert!(
        vmap(nothing, &[Some(0)], &[0])(std::slice::from_ref(&x)).is_err(),
        "no outputs"
    );
    let reads: F = |v| Ok(vec![Array::scalar(v[0].to_vec::<f32>()?[0])]);
    assert!(
        vmap(reads, &[Some(0)], &[0])(std::slice::from_ref(&x)).is_err(),
        "reading values"
    );
    assert!(
        grad(f, &[0])(std::slice::from_ref(&x)).is_err(),
        "grad needs a scalar"
    );
    assert!(grad(f, &[3])(std::slice::from_ref(&x)).is_err(), "argnums");
}

#[test]
fn vmap_helper_matches_a_loop_for_elementwise_and_shape_ops() {
    let mut rng = Rng::new(14);
    let x = random(&mut rng, &[3, 4, 5], -1.0, 1.0);
    let y = random(&mut rng, &[4, 5], -1.0, 1.0);
    let f = |v: &[Array]| {
        Ok(vec![
            multiply(&exp(&v[0])?, &v[1])?,
            transpose(&v[0], &[1, 0])?,
        ])
    };
    common::autodiff::check_vmap(
        "exp, multiply, transpose",
        f,
        &[x.clone(), y.clone()],
        &[true, false],
    );
    let g = |v: &[Array]| Ok(vec![subtract(&v[0], &v[1])?.reshape(&[-1])?]);
    let y3 = random(&mut rng, &[3, 4, 5], -1.0, 1.0);
    common::autodiff::check_vmap("subtract, reshape", g, &[x, y3], &[true, true]);
}
