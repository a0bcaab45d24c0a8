//! vjp, jvp and vmap of the reduction family (reductions, arg-reductions, scans, softmax) and
//! of the composites built from them, against central differences, loops over the batch and
//! hand-derived formulas.

mod common;

use common::Rng;
use common::autodiff::{check, check_vmap, random, values};
use nuvec_core::*;

/// A function of one array.
type Unary = fn(&Array) -> Result<Array>;
type Reducer = fn(&Array, &[isize], bool) -> Result<Array>;
type Scanner = fn(&Array, isize, bool, bool) -> Result<Array>;

/// The axis choices every reduction is tried with: one, several, all, negative ones.
const AXES: &[&[isize]] = &[&[1], &[0, 2], &[], &[-1], &[-3, -1]];

fn reducers() -> Vec<(&'static str, Reducer)> {
    vec![
        ("sum", sum),
        ("prod", prod),
        ("max", max),
        ("min", min),
        ("logsumexp", logsumexp),
        ("mean", mean),
        ("var", |a, ax, k| var(a, ax, k, 0)),
        ("var ddof 1", |a, ax, k| var(a, ax, k, 1)),
        ("std", |a, ax, k| std(a, ax, k, 0)),
        ("softmax", |a, ax, _| softmax(a, ax)),
    ]
}

fn scanners() -> Vec<(&'static str, Scanner)> {
    vec![
        ("cumsum", cumsum),
        ("cumprod", cumprod),
        ("cummax", cummax),
        ("cummin", cummin),
        ("logcumsumexp", logcumsumexp),
    ]
}

/// A scan's output with the infinities an exclusive `cummax`, `cummin` or `logcumsumexp`
/// starts from clipped away (they would swamp the central differences); elsewhere unchanged.
fn finite(name: &str, y: Array) -> Result<Array> {
    match name {
        "cummin" => minimum(&y, 10.0),
        "cummax" | "logcumsumexp" => maximum(&y, -10.0),
        _ => Ok(y),
    }
}

fn f64s(v: &[f64], shape: &[usize]) -> Array {
    Array::from_slice(v, shape).unwrap()
}

#[test]
fn reductions_match_central_differences() {
    let mut rng = Rng::new(30);
    for (name, r) in reducers() {
        for &axes in AXES {
            for keepdims in [false, true] {
                // Positive values keep prod and std away from their kinks.
                let x = random(&mut rng, &[2, 3, 4], 0.5, 1.5);
                let f = move |xs: &[Array]| Ok(vec![r(&xs[0], axes, keepdims)?]);
                check(&format!("{name} {axes:?} {keepdims}"), f, &[x], &mut rng);
            }
        }
    }
}

#[test]
fn reductions_of_broadcast_inputs() {
    let mut rng = Rng::new(31);
    for (name, r) in reducers() {
        for &axes in AXES {
            // Copies along the new axis tie in max and min: the split cotangent adds back up
            // to one. (Every choice of axes also reduces over distinct values, keeping std
            // away from its kink at zero.)
            let x = random(&mut rng, &[3, 4], 0.5, 1.5);
            let f =
                move |xs: &[Array]| Ok(vec![r(&broadcast_to(&xs[0], &[2, 3, 4])?, axes, false)?]);
            check(
                &format!("{name} {axes:?} of a broadcast"),
                f,
                &[x],
                &mut rng,
            );
            let a = random(&mut rng, &[2, 1, 4], 0.5, 1.5);
            let b = random(&mut rng, &[3, 1], 0.5, 1.5);
            let g = move |xs: &[Array]| Ok(vec![r(&multiply(&xs[0], &xs[1])?, axes, true)?]);
            check(
                &format!("{name} {axes:?} of a product"),
                g,
                &[a, b],
                &mut rng,
            );
        }
    }
}

#[test]
fn prod_is_right_at_zeros() {
    let mut rng = Rng::new(32);
    let mut v = values(&random(&mut rng, &[2, 3, 4], 0.5, 1.5));
    // Groups with no zero, one zero and two zeros, whichever axes are reduced.
    for i in [0, 5, 6, 13, 17] {
        v[i] = 0.0;
    }
    let x = f64s(&v, &[2, 3, 4]);
    for &axes in AXES {
        let f = move |xs: &[Array]| Ok(vec![prod(&xs[0], axes, false)?]);
        check(
            &format!("prod {axes:?} with zeros"),
            f,
            std::slice::from_ref(&x),
            &mut rng,
        );
    }
    // By hand: d(abc)/d(a, b, c) at (2, 0, 3) is (0, 6, 0); with two zeros all vanish.
    let g = grad(|xs| Ok(vec![prod(&xs[0], &[], false)?]), &[0]);
    let at = |v: &[f64]| values(&g(&[f64s(v, &[3])]).unwrap()[0]);
    assert_eq!(at(&[2.0, 0.0, 3.0]), [0.0, 6.0, 0.0]);
    assert_eq!(at(&[0.0, 0.0, 3.0]), [0.0, 0.0, 0.0]);
}

#[test]
fn max_and_min_split_ties_equally() {
    let x = f64s(&[1.0, 3.0, 3.0, 2.0, -1.0, 5.0, -1.0, -1.0], &[2, 4]);
    let gmax = grad(
        |xs| Ok(vec![sum(&max(&xs[0], &[1], false)?, &[], false)?]),
        &[0],
    );
    let gmin = grad(
        |xs| Ok(vec![sum(&min(&xs[0], &[1], false)?, &[], false)?]),
        &[0],
    );
    let third = 1.0 / 3.0;
    assert_eq!(
        values(&gmax(std::slice::from_ref(&x)).unwrap()[0]),
        [0.0, 0.5, 0.5, 0.0, 0.0, 1.0, 0.0, 0.0]
    );
    assert_eq!(
        values(&gmin(std::slice::from_ref(&x)).unwrap()[0]),
        [1.0, 0.0, 0.0, 0.0, third, 0.0, third, third]
    );
    // The tangent is the mean of the tied elements' tangents.
    let t = f64s(&[9.0, 2.0, 4.0, 7.0, 1.0, 1.0, 2.0, 6.0], &[2, 4]);
    let f = |xs: &[Array]| Ok(vec![max(&xs[0], &[1], false)?]);
    let (_, dy) = jvp(f, &[x], &[t]).unwrap();
    assert_eq!(values(&dy[0]), [3.0, 1.0]);
}

#[test]
fn boolean_and_arg_reductions_are_constants() {
    let mut rng = Rng::new(33);
    let x = random(&mut rng, &[2, 3, 4], -1.0, 1.0);
    // The derivative of x · c(x) is c(x) when c is piecewise constant.
    let cases: Vec<(&str, Unary)> = vec![
        ("all", |x| {
            all(&greater(x, -0.9)?, &[1], true)?.astype(DType::F64)
        }),
        ("any", |x| {
            any(&greater(x, 0.5)?, &[0, 2], true)?.astype(DType::F64)
        }),
        ("argmax", |x| argmax(x, 1, true)?.astype(DType::F64)),
        ("argmin", |x| argmin(x, -1, true)?.astype(DType::F64)),
        ("count_nonzero", |x| {
            count_nonzero(&greater(x, 0.0)?, &[-1], true)?.astype(DType::F64)
        }),
    ];
    for (name, c) in cases {
        let f = move |xs: &[Array]| Ok(vec![multiply(&xs[0], &c(&xs[0])?)?]);
        check(name, f, std::slice::from_ref(&x), &mut rng);
        let g = grad(move |xs| Ok(vec![sum(&f(xs)?[0], &[], false)?]), &[0]);
        let want = values(&broadcast_to(&c(&x).unwrap(), x.shape()).unwrap());
        assert_eq!(
            values(&g(std::slice::from_ref(&x)).unwrap()[0]),
            want,
            "{name}"
        );
    }
    // The rules themselves: tangents are zeros of the output's type.
    let t = ones_like(&x).unwrap();
    let out = argmax(&x, 1, true).unwrap();
    let p = Primitive::ArgReduce {
        op: ArgReduceOp::ArgMax,
        axis: 1,
    };
    let tan = p
        .jvp(std::slice::from_ref(&x), &[Some(out)], &[Some(t)])
        .unwrap();
    assert_eq!(tan[0].dtype(), DType::U32);
    assert_eq!(tan[0].shape(), [2, 1, 4]);
    assert!(values(&tan[0]).iter().all(|&v| v == 0.0));
    let b = greater(&x, 0.0).unwrap();
    let out = all(&b, &[0, 2], true).unwrap();
    let p = Primitive::Reduce {
        op: ReduceOp::All,
        axes: vec![0, 2],
    };
    let tan = p
        .jvp(
            std::slice::from_ref(&b),
            &[Some(out)],
            &[Some(zeros_like(&b).unwrap())],
        )
        .unwrap();
    assert_eq!(tan[0].dtype(), DType::Bool);
    assert_eq!(tan[0].shape(), [1, 3, 1]);
}

#[test]
fn scans_match_central_differences() {
    let mut rng = Rng::new(34);
    for (name, s) in scanners() {
        let (lo, hi) = if name == "cumprod" {
            (0.5, 1.5)
        } else {
            (-2.0, 2.0)
        };
        for (shape, axis) in [(vec![3, 5], 0isize), (vec![3, 5], -1), (vec![2, 3, 4], 1)] {
            for reverse in [false, true] {
                for inclusive in [false, true] {
                    let x = random(&mut rng, &shape, lo, hi);
                    let f = move |xs: &[Array]| {
                        Ok(vec![finite(name, s(&xs[0], axis, reverse, inclusive)?)?])
                    };
                    let label = format!("{name} axis {axis} rev {reverse} incl {inclusive}");
                    check(&label, f, &[x], &mut rng);
                }
            }
        }
        // A transposed (strided) input, scanned along its last axis.
        let x = random(&mut rng, &[5, 3], lo, hi);
        let f = move |xs: &[Array]| {
            let y = s(&transpose(&xs[0], &[1, 0])?, -1, true, true)?;
            Ok(vec![finite(name, y)?])
        };
        check(&format!("{name} of a transpose"), f, &[x], &mut rng);
    }
}

#[test]
fn cumprod_is_right_at_zeros() {
    let mut rng = Rng::new(35);
    let mut v = values(&random(&mut rng, &[3, 5], 0.5, 1.5));
    // Row 0 has no zero, row 1 one, row 2 two; columns 1 and 3 hold zeros.
    for i in [7, 11, 13] {
        v[i] = 0.0;
    }
    let x = f64s(&v, &[3, 5]);
    for axis in [0isize, 1] {
        for reverse in [false, true] {
            for inclusive in [false, true] {
                let f = move |xs: &[Array]| Ok(vec![cumprod(&xs[0], axis, reverse, inclusive)?]);
                let label =
                    format!("cumprod with zeros axis {axis} rev {reverse} incl {inclusive}");
                check(&label, f, std::slice::from_ref(&x), &mut rng);
            }
        }
    }
    // By hand: cumprod(a, b, c) = (a, ab, abc); at (2, 0, 3) the gradient of its sum is
    // (1 + b + bc, a + ac, ab) = (1, 8, 0).
    let g = grad(
        |xs| Ok(vec![sum(&cumprod(&xs[0], 0, false, true)?, &[], false)?]),
        &[0],
    );
    let x = f64s(&[2.0, 0.0, 3.0], &[3]);
    assert_eq!(
        values(&g(std::slice::from_ref(&x)).unwrap()[0]),
        [1.0, 8.0, 0.0]
    );
    // Its Hessian there, row by row: (0, 1 + c, b), (1 + c, 0, a), (b, a, 0).
    let hessian = [[0.0, 4.0, 0.0], [4.0, 0.0, 2.0], [0.0, 2.0, 0.0]];
    for (j, row) in hessian.iter().enumerate() {
        let mut e = [0.0; 3];
        e[j] = 1.0;
        let e = f64s(&e, &[3]);
        let (_, back) = vjp(&g, std::slice::from_ref(&x), std::slice::from_ref(&e)).unwrap();
        let (_, fwd) = jvp(&g, std::slice::from_ref(&x), std::slice::from_ref(&e)).unwrap();
        assert_eq!(values(&back[0]), row);
        assert_eq!(values(&fwd[0]), row);
    }
}

#[test]
fn cummax_and_cummin_credit_the_latest_tie() {
    let x = f64s(&[1.0, 3.0, 3.0, 2.0], &[4]);
    let g = |s: Scanner, reverse: bool, inclusive: bool| {
        let f = move |xs: &[Array]| {
            let y = s(&xs[0], 0, reverse, inclusive)?;
            // The exclusive scans' starting infinity carries no derivative.
            let y = where_(isinf(&y)?, 0.0, &y)?;
            Ok(vec![sum(&y, &[], false)?])
        };
        values(&grad(f, &[0])(std::slice::from_ref(&x)).unwrap()[0])
    };
    // Forward running maxima (1, 3, 3, 3) come from positions (0, 1, 2, 2).
    assert_eq!(g(cummax, false, true), [1.0, 1.0, 2.0, 0.0]);
    // Exclusive: (−∞, 1, 3, 3) from (−, 0, 1, 2).
    assert_eq!(g(cummax, false, false), [1.0, 1.0, 1.0, 0.0]);
    // From the end, maxima (3, 3, 3, 2) come from positions (1, 1, 2, 3).
    assert_eq!(g(cummax, true, true), [0.0, 2.0, 1.0, 1.0]);
    // Running minima (1, 1, 1, 1) all come from position 0.
    assert_eq!(g(cummin, false, true), [4.0, 0.0, 0.0, 0.0]);
    // From the end, minima (1, 2, 2, 2) come from positions (0, 3, 3, 3).
    assert_eq!(g(cummin, true, true), [1.0, 0.0, 0.0, 3.0]);
}

#[test]
fn log_space_derivatives_do_not_overflow() {
    let x = f64s(&[1000.0, 1000.0, -1000.0], &[3]);
    let ones = ones_like(&x).unwrap();
    let close = |got: &Array, want: &[f64]| {
        let got = values(got);
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "{got:?} vs {want:?}");
        }
    };
    // y = (1000, 1000 + ln 2, 1000 + ln 2): dx_k = Σ_{i ≥ k} exp(x_k − y_i).
    let f = |xs: &[Array]| Ok(vec![logcumsumexp(&xs[0], 0, false, true)?]);
    let (_, g) = vjp(f, std::slice::from_ref(&x), std::slice::from_ref(&ones)).unwrap();
    close(&g[0], &[2.0, 1.0, 0.0]);
    // dy_i = Σ_{k ≤ i} exp(x_k − y_i) = 1 for a unit tangent.
    let (_, t) = jvp(f, std::slice::from_ref(&x), std::slice::from_ref(&ones)).unwrap();
    close(&t[0], &[1.0, 1.0, 1.0]);
    let f = |xs: &[Array]| Ok(vec![logsumexp(&xs[0], &[], false)?]);
    let g = grad(f, &[0])(std::slice::from_ref(&x)).unwrap();
    close(&g[0], &[0.5, 0.5, 0.0]);
    let f = |xs: &[Array]| Ok(vec![softmax(&xs[0], &[])?]);
    let (_, t) = jvp(f, std::slice::from_ref(&x), &[f64s(&[1.0, 0.0, 0.0], &[3])]).unwrap();
    close(&t[0], &[0.25, -0.25, 0.0]);
}

#[test]
fn composites_match_central_differences() {
    let mut rng = Rng::new(36);
    let x = random(&mut rng, &[3, 4], 0.5, 1.5);
    let w = random(&mut rng, &[3, 4], -1.0, 1.0);
    type G = fn(&[Array]) -> Result<Vec<Array>>;
    let cases: Vec<(&str, G)> = vec![
        ("layer norm", |v| {
            let mu = mean(&v[0], &[-1], true)?;
            let sd = std(&v[0], &[-1], true, 0)?;
            Ok(vec![multiply(
                &divide(&subtract(&v[0], &mu)?, &sd)?,
                &v[1],
            )?])
        }),
        ("cross entropy", |v| {
            let lse = logsumexp(&v[0], &[1], true)?;
            let logp = subtract(&v[0], &lse)?;
            Ok(vec![negative(&sum(
                &multiply(&logp, &softmax(&v[1], &[1])?)?,
                &[],
                false,
            )?)?])
        }),
        ("variance of a weighted mean", |v| {
            Ok(vec![var(
                &mean(&multiply(&v[0], &v[1])?, &[0], false)?,
                &[],
                false,
                1,
            )?])
        }),
        ("cumsum of a softmax", |v| {
            Ok(vec![cumsum(&softmax(&v[0], &[0, 1])?, 0, true, false)?])
        }),
        ("normalised cumprod", |v| {
            let c = cumprod(&v[0], -1, false, true)?;
            Ok(vec![divide(&c, &sum(&c, &[-1], true)?)?])
        }),
    ];
    for (name, f) in cases {
        check(name, f, &[x.clone(), w.clone()], &mut rng);
    }
}

/// The gradient of `Σ w · op(x)` with respect to `x`, as a function of `(x, w)`.
fn gradient_of(op: Unary) -> impl Fn(&[Array]) -> Result<Vec<Array>> + Clone {
    move |v: &[Array]| {
        let w = v[1].clone();
        let loss = move |ys: &[Array]| Ok(vec![sum(&multiply(&op(&ys[0])?, &w)?, &[], false)?]);
        grad(loss, &[0])(&v[..1])
    }
}

/// The tangent of `op` at `x` along `t`, as a function of `(x, t)`.
fn tangent_of(op: Unary) -> impl Fn(&[Array]) -> Result<Vec<Array>> + Clone {
    move |v: &[Array]| {
        let f = move |ys: &[Array]| Ok(vec![op(&ys[0])?]);
        Ok(jvp(f, &v[..1], &v[1..])?.1)
    }
}

#[test]
fn second_derivatives_match_central_differences() {
    let mut rng = Rng::new(37);
    let cases: Vec<(&str, Unary)> = vec![
        ("sum", |x| sum(&square(x)?, &[1], true)),
        ("prod", |x| prod(x, &[0, 1], false)),
        ("max", |x| max(&square(x)?, &[-1], true)),
        ("logsumexp", |x| logsumexp(x, &[1], false)),
        ("softmax", |x| softmax(x, &[-1])),
        ("mean, var, std", |x| {
            add(
                &var(x, &[0], false, 0)?,
                &std(&mean(x, &[1], true)?, &[], false, 0)?,
            )
        }),
        ("cumsum", |x| cumsum(&square(x)?, 1, true, false)),
        ("cumprod", |x| cumprod(x, 1, false, true)),
        ("cumprod exclusive reversed", |x| cumprod(x, 0, true, false)),
        ("logcumsumexp", |x| logcumsumexp(x, -1, false, true)),
        ("logcumsumexp reversed", |x| logcumsumexp(x, 0, true, true)),
    ];
    for (name, op) in cases {
        let x = random(&mut rng, &[3, 4], 0.5, 1.5);
        let w = random(&mut rng, op(&x).unwrap().shape(), -1.0, 1.0);
        check(name, gradient_of(op), &[x.clone(), w], &mut rng);
        // Reverse over forward: the derivatives of the jvp rule's graph.
        let t = random(&mut rng, &[3, 4], -1.0, 1.0);
        check(
            &format!("{name} tangent"),
            tangent_of(op),
            &[x, t],
            &mut rng,
        );
    }
    // One zero per scan line (row 1) and per product: second derivatives stay exact there.
    let mut v = values(&random(&mut rng, &[3, 4], 0.5, 1.5));
    v[5] = 0.0;
    let x = f64s(&v, &[3, 4]);
    let w = random(&mut rng, &[3, 4], -1.0, 1.0);
    check(
        "cumprod at a zero, second order",
        gradient_of(|x| cumprod(x, 1, false, true)),
        &[x.clone(), w],
        &mut rng,
    );
    let t = random(&mut rng, &[3, 4], -1.0, 1.0);
    check(
        "cumprod tangent at a zero",
        tangent_of(|x| cumprod(x, 1, true, false)),
        &[x.clone(), t],
        &mut rng,
    );
    check(
        "prod at a zero, second order",
        gradient_of(|x| prod(x, &[1], true)),
        &[x, random(&mut rng, &[3, 1], -1.0, 1.0)],
        &mut rng,
    );
}

#[test]
fn grad_of_grad_of_logsumexp_and_softmax_match_hand_formulas() {
    let xv = [0.3, -1.2, 0.8, 0.1];
    let cv = [1.0, -0.5, 0.25, 2.0];
    let wv = [0.7, -0.2, 1.5, -1.1];
    let x = f64s(&xv, &[4]);
    let c = f64s(&cv, &[4]);
    let z: f64 = xv.iter().map(|v| v.exp()).sum();
    let p: Vec<f64> = xv.iter().map(|v| v.exp() / z).collect();
    let close = |got: &[f64], want: &[f64]| {
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "{got:?} vs {want:?}");
        }
    };
    // logsumexp: the gradient is p, the Hessian diag(p) − p pᵀ, so H c = p·c − p (p·c).
    let first = |xs: &[Array]| grad(|ys| Ok(vec![logsumexp(&ys[0], &[], false)?]), &[0])(xs);
    let pc: f64 = p.iter().zip(&cv).map(|(a, b)| a * b).sum();
    let want: Vec<f64> = (0..4).map(|i| p[i] * cv[i] - p[i] * pc).collect();
    let (g1, hc) = vjp(first, std::slice::from_ref(&x), std::slice::from_ref(&c)).unwrap();
    close(&values(&g1[0]), &p);
    close(&values(&hc[0]), &want);
    let (_, hc) = jvp(first, std::slice::from_ref(&x), std::slice::from_ref(&c)).unwrap();
    close(&values(&hc[0]), &want);
    // Σ w · softmax(x): with s = p·w the gradient is g_i = p_i (w_i − s) and
    // H_ij = δ_ij p_i (w_i − s) − p_i p_j (w_i − s) − p_i p_j (w_j − s).
    let w = f64s(&wv, &[4]);
    let first = move |xs: &[Array]| {
        let w = w.clone();
        grad(
            move |ys| {
                Ok(vec![sum(
                    &multiply(&softmax(&ys[0], &[0])?, &w)?,
                    &[],
                    false,
                )?])
            },
            &[0],
        )(xs)
    };
    let s: f64 = p.iter().zip(&wv).map(|(a, b)| a * b).sum();
    let h = |i: usize, j: usize| {
        let d = if i == j { p[i] * (wv[i] - s) } else { 0.0 };
        d - p[i] * p[j] * (wv[i] - s) - p[i] * p[j] * (wv[j] - s)
    };
    let want: Vec<f64> = (0..4)
        .map(|i| (0..4).map(|j| h(i, j) * cv[j]).sum())
        .collect();
    let (g1, hc) = vjp(&first, std::slice::from_ref(&x), std::slice::from_ref(&c)).unwrap();
    let grad_want: Vec<f64> = (0..4).map(|i| p[i] * (wv[i] - s)).collect();
    close(&values(&g1[0]), &grad_want);
    close(&values(&hc[0]), &want);
    let (_, hc) = jvp(&first, std::slice::from_ref(&x), std::slice::from_ref(&c)).unwrap();
    close(&values(&hc[0]), &want);
}

#[test]
fn reductions_batch_like_a_loop() {
    let mut rng = Rng::new(38);
    for (name, r) in reducers() {
        for &axes in AXES {
            for keepdims in [false, true] {
                let x = random(&mut rng, &[3, 2, 3, 4], 0.5, 1.5);
                let f = move |v: &[Array]| Ok(vec![r(&v[0], axes, keepdims)?]);
                check_vmap(&format!("{name} {axes:?} {keepdims}"), f, &[x], &[true]);
            }
        }
    }
    let x = random(&mut rng, &[3, 2, 3, 4], -1.0, 1.0);
    type G = fn(&[Array]) -> Result<Vec<Array>>;
    let cases: Vec<(&str, G)> = vec![
        ("argmax", |v| Ok(vec![argmax(&v[0], 1, false)?])),
        ("argmin", |v| Ok(vec![argmin(&v[0], -1, true)?])),
        ("all", |v| {
            Ok(vec![all(&greater(&v[0], -0.5)?, &[0, 2], false)?])
        }),
        ("any", |v| Ok(vec![any(&greater(&v[0], 0.5)?, &[], true)?])),
        ("count_nonzero", |v| {
            Ok(vec![count_nonzero(&greater(&v[0], 0.0)?, &[1], false)?])
        }),
    ];
    for (name, f) in cases {
        check_vmap(name, f, std::slice::from_ref(&x), &[true]);
    }
}

#[test]
fn scans_batch_like_a_loop() {
    let mut rng = Rng::new(39);
    for (name, s) in scanners() {
        for axis in [0isize, 1, -1] {
            for reverse in [false, true] {
                for inclusive in [false, true] {
                    let x = random(&mut rng, &[3, 4, 5], 0.5, 1.5);
                    let f = move |v: &[Array]| {
                        Ok(vec![finite(name, s(&v[0], axis, reverse, inclusive)?)?])
                    };
                    let label = format!("{name} axis {axis} rev {reverse} incl {inclusive}");
                    check_vmap(&label, f, &[x], &[true]);
                }
            }
        }
    }
}

#[test]
fn batched_and_shared_inputs_mix() {
    let mut rng = Rng::new(40);
    let x = random(&mut rng, &[3, 4, 5], -1.0, 1.0);
    let y = random(&mut rng, &[5], -1.0, 1.0);
    let y2 = random(&mut rng, &[4, 5], -1.0, 1.0);
    type G = fn(&[Array]) -> Result<Vec<Array>>;
    let cases: Vec<(&str, G)> = vec![
        ("sum(x) * y", |v| {
            Ok(vec![multiply(&sum(&v[0], &[0], false)?, &v[1])?])
        }),
        ("max(x) + sum(y)", |v| {
            Ok(vec![add(
                &max(&v[0], &[], false)?,
                &sum(&v[1], &[], false)?,
            )?])
        }),
        ("logsumexp(x) - y", |v| {
            Ok(vec![subtract(&logsumexp(&v[0], &[-1], true)?, &v[1])?])
        }),
        ("softmax(x) * y", |v| {
            Ok(vec![multiply(&softmax(&v[0], &[-1])?, &v[1])?])
        }),
        ("cumsum(x * y)", |v| {
            Ok(vec![cumsum(&multiply(&v[0], &v[1])?, 1, false, true)?])
        }),
        ("argmax(x + y), cummax(x)", |v| {
            Ok(vec![
                argmax(&add(&v[0], &v[1])?, 0, false)?,
                cummax(&v[0], -1, true, true)?,
            ])
        }),
    ];
    for (name, f) in cases {
        check_vmap(name, f, &[x.clone(), y.clone()], &[true, false]);
    }
    // Both batched, and a reduction of the shared input only.
    let z = random(&mut rng, &[3, 5], -1.0, 1.0);
    let f = |v: &[Array]| {
        let s = sum(&v[2], &[0], false)?;
        Ok(vec![multiply(
            &prod(&v[0], &[0], false)?,
            &add(&v[1], &s)?,
        )?])
    };
    check_vmap(
        "prod(x) * (z + sum(y))",
        f,
        &[x, z, y2],
        &[true, true, false],
    );
}

#[test]
fn derivatives_batch_like_a_loop() {
    let mut rng = Rng::new(41);
    let x = random(&mut rng, &[3, 4, 5], -1.0, 1.0);
    let w = random(&mut rng, &[4, 5], -1.0, 1.0);
    // Per-example gradients (vmap of a vjp) with a shared weight.
    let ops: Vec<Unary> = vec![
        |x| softmax(x, &[-1]),
        |x| broadcast_to(&logsumexp(x, &[0], true)?, x.shape()),
        |x| cumsum(x, 1, true, false),
        |x| logcumsumexp(x, 0, false, true),
        |x| cumprod(x, -1, false, true),
        |x| broadcast_to(&max(x, &[1], true)?, x.shape()),
        |x| broadcast_to(&prod(x, &[0, 1], true)?, x.shape()),
    ];
    for (i, op) in ops.into_iter().enumerate() {
        check_vmap(
            &format!("per-example gradient {i}"),
            gradient_of(op),
            &[x.clone(), w.clone()],
            &[true, false],
        );
    }
}
