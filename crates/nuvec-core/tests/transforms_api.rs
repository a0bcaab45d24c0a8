//! The transforms' API: custom functions (`custom_vjp`, `custom_function` with its own vjp,
//! jvp and vmap), `grad`/`value_and_grad` argument handling as MLX has it, nesting of the
//! transforms, and the errors of bad arguments.

mod common;

use common::Rng;
use common::autodiff::{check, check_vmap, random, values};
use nuvec_core::*;

fn close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

fn arr(v: &[f64], shape: &[usize]) -> Array {
    Array::from_slice(v, shape).unwrap()
}

/// Round forward, identity backward.
fn straight_through() -> impl Fn(&[Array]) -> Result<Vec<Array>> + Clone {
    custom_vjp(
        |x: &[Array]| Ok(vec![round(&x[0], 0)?]),
        |_primals, cotangents, _outputs| Ok(vec![cotangents[0].clone()]),
    )
}

// ---- custom functions ----

#[test]
fn custom_vjp_replaces_the_derivative_in_vjp_and_grad() {
    let mut rng = Rng::new(40);
    let x = random(&mut rng, &[2, 3], -3.0, 3.0);
    let ste = straight_through();
    let out = ste(std::slice::from_ref(&x)).unwrap();
    let rounded: Vec<f64> = values(&x).iter().map(|v| v.round_ties_even()).collect();
    assert_eq!(values(&out[0]), rounded, "the forward is f's");
    assert!(matches!(out[0].primitive(), Some(Primitive::Custom(_))));
    let ct = random(&mut rng, &[2, 3], -1.0, 1.0);
    let (o, g) = vjp(&ste, std::slice::from_ref(&x), std::slice::from_ref(&ct)).unwrap();
    assert_eq!(values(&o[0]), rounded);
    assert_eq!(
        values(&g[0]),
        values(&ct),
        "the cotangent passes straight through"
    );
    // Plain round has a zero derivative: the custom rule is what made the difference.
    let plain = |xs: &[Array]| Ok(vec![round(&xs[0], 0)?]);
    let (_, g0) = vjp(plain, std::slice::from_ref(&x), std::slice::from_ref(&ct)).unwrap();
    assert!(values(&g0[0]).iter().all(|v| *v == 0.0));
    // grad of a scalar loss through it: d/dx (3 · ste(x)²) = 6 · round(x).
    let loss = move |xs: &[Array]| Ok(vec![multiply(&square(&ste(xs)?[0])?, 3.0)?]);
    let x0 = Array::scalar(1.7f64);
    let g = grad(&loss, &[0])(std::slice::from_ref(&x0)).unwrap();
    assert_eq!(g[0].item::<f64>().unwrap(), 12.0);
}

#[test]
fn custom_vjp_sees_primals_cotangents_and_outputs() {
    // f(x, y) = (x·y, x + y) with a rule that names every argument it gets:
    // dx = c0 · out0 + 10 · c1 · y, dy = 100 · c0 + x.
    let f = custom_vjp(
        |p: &[Array]| Ok(vec![multiply(&p[0], &p[1])?, add(&p[0], &p[1])?]),
        |p, c, o| {
            Ok(vec![
                add(
                    multiply(&c[0], &o[0])?,
                    multiply(multiply(&c[1], &p[1])?, 10.0)?,
                )?,
                add(multiply(&c[0], 100.0)?, &p[0])?,
            ])
        },
    );
    let (x, y) = (arr(&[1.5, -2.0], &[2]), arr(&[0.5, 3.0], &[2]));
    let (c0, c1) = (arr(&[1.0, 2.0], &[2]), arr(&[-1.0, 0.25], &[2]));
    let (outs, g) = vjp(&f, &[x.clone(), y.clone()], &[c0.clone(), c1.clone()]).unwrap();
    let (xv, yv, c0v, c1v) = (values(&x), values(&y), values(&c0), values(&c1));
    let want_dx: Vec<f64> = (0..2)
        .map(|i| c0v[i] * xv[i] * yv[i] + 10.0 * c1v[i] * yv[i])
        .collect();
    let want_dy: Vec<f64> = (0..2).map(|i| 100.0 * c0v[i] + xv[i]).collect();
    close(&values(&g[0]), &want_dx, 1e-12, "dx");
    close(&values(&g[1]), &want_dy, 1e-12, "dy");
    close(&values(&outs[1]), &[2.0, 1.0], 1e-12, "second output");
    // Only the first output in the loss: the rule gets zeros for the second's cotangent.
    let loss = |p: &[Array]| Ok(vec![f(p)?[0].clone()]);
    let (s, t) = (Array::scalar(2.0f64), Array::scalar(-3.0f64));
    let g = grad(loss, &[0, 1])(&[s, t]).unwrap();
    assert_eq!(g[0].item::<f64>().unwrap(), -6.0, "c0 · out0 with c1 = 0");
    assert_eq!(g[1].item::<f64>().unwrap(), 102.0, "100 · c0 + x");
}

#[test]
fn custom_function_without_rules_behaves_as_its_function() {
    let mut rng = Rng::new(41);
    let f = custom_function(|p: &[Array]| {
        Ok(vec![
            multiply(&sin(&p[0])?, &p[1])?,
            exp(&subtract(&p[0], &p[1])?)?,
        ])
    })
    .into_fn();
    let x = random(&mut rng, &[3, 4], -1.0, 1.0);
    let y = random(&mut rng, &[3, 4], -1.0, 1.0);
    check(
        "custom function, default rules",
        &f,
        &[x.clone(), y.clone()],
        &mut rng,
    );
    check_vmap("custom function, default rules", f, &[x, y], &[true, false]);
}

#[test]
fn custom_jvp_is_used_and_jvp_defaults_to_the_function() {
    let x = arr(&[0.2, -0.7, 1.1], &[3]);
    let t = arr(&[1.0, 2.0, -1.0], &[3]);
    // A jvp rule of 3·t for sin (not its derivative).
    let f = custom_function(|p: &[Array]| Ok(vec![sin(&p[0])?]))
        .jvp(|_p, t| Ok(vec![multiply(&t[0], 3.0)?]))
        .into_fn();
    let (out, tan) = jvp(&f, std::slice::from_ref(&x), std::slice::from_ref(&t)).unwrap();
    close(&values(&out[0]), &values(&sin(&x).unwrap()), 1e-15, "sin");
    close(&values(&tan[0]), &[3.0, 6.0, -3.0], 1e-15, "custom tangent");
    // Its vjp has no rule: it is sin's (cos x · c).
    let (_, g) = vjp(&f, std::slice::from_ref(&x), std::slice::from_ref(&t)).unwrap();
    let want: Vec<f64> = values(&x)
        .iter()
        .zip(values(&t))
        .map(|(x, t)| x.cos() * t)
        .collect();
    close(&values(&g[0]), &want, 1e-15, "default vjp");
    // The straight-through estimator has no jvp rule: forward mode sees round (zero).
    let (_, tan) = jvp(
        straight_through(),
        std::slice::from_ref(&x),
        std::slice::from_ref(&t),
    )
    .unwrap();
    assert!(values(&tan[0]).iter().all(|v| *v == 0.0));
}

#[test]
fn custom_vmap_is_used() {
    // A batching rule that doubles (so that its use shows) and puts the batch last.
    let f = custom_function(|p: &[Array]| Ok(vec![exp(&p[0])?]))
        .vmap(|xs, axes| {
            let moved = moveaxis(&xs[0], axes[0].unwrap_or(0) as isize, -1)?;
            let last = moved.ndim() - 1;
            Ok((vec![multiply(&exp(&moved)?, 2.0)?], vec![Some(last)]))
        })
        .into_fn();
    let xs = arr(&[0.1, 0.2, 0.3, 0.4, 0.5, 0.6], &[3, 2]);
    for (ax, out_ax) in [(0usize, 0usize), (1, 0), (0, 1)] {
        let input = if ax == 0 { xs.clone() } else { xs.t().unwrap() };
        let got = vmap(&f, &[Some(ax)], &[out_ax])(std::slice::from_ref(&input)).unwrap();
        let want = multiply(exp(&xs).unwrap(), 2.0).unwrap();
        let want = if out_ax == 0 { want } else { want.t().unwrap() };
        assert_eq!(got[0].shape(), want.shape());
        close(&values(&got[0]), &values(&want), 1e-15, "custom vmap");
    }
}

#[test]
fn a_custom_vmap_spares_the_inner_graph_from_batching() {
    // The inner function cannot be batched (its rule fails); the outer one says how.
    let inner = custom_function(|p: &[Array]| Ok(vec![negative(&p[0])?]))
        .vmap(|_, _| Err(Error::InvalidArgument("inner: no batching".into())))
        .into_fn();
    let outer = custom_function(move |p: &[Array]| inner(p))
        .vmap(|xs, axes| Ok((vec![negative(&xs[0])?], axes.to_vec())))
        .into_fn();
    let xs = arr(&[1.0, -2.0, 3.0], &[3]);
    let got = vmap(&outer, &[Some(0)], &[0])(std::slice::from_ref(&xs)).unwrap();
    assert_eq!(values(&got[0]), [-1.0, 2.0, -3.0]);
    let direct = outer(std::slice::from_ref(&xs)).unwrap();
    assert_eq!(values(&direct[0]), [-1.0, 2.0, -3.0]);
}

#[test]
fn custom_rules_survive_vmap() {
    // vjp of vmap: the batched straight-through estimator still passes cotangents straight.
    let ste = straight_through();
    let xs = arr(&[0.4, 1.6, -2.2, 0.9, 3.5, -0.1], &[2, 3]);
    let ct = arr(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    for ax in [0usize, 1] {
        let (input, cot) = if ax == 0 {
            (xs.clone(), ct.clone())
        } else {
            (xs.t().unwrap(), ct.t().unwrap())
        };
        let s = ste.clone();
        let batched = move |v: &[Array]| vmap(&s, &[Some(ax)], &[ax])(v);
        let (out, g) = vjp(
            &batched,
            std::slice::from_ref(&input),
            std::slice::from_ref(&cot),
        )
        .unwrap();
        let rounded: Vec<f64> = values(&input).iter().map(|v| v.round_ties_even()).collect();
        assert_eq!(values(&out[0]), rounded);
        assert_eq!(values(&g[0]), values(&cot), "batch axis {ax}");
    }
    // A primal shared by the batch gets the sum of the examples' cotangents:
    // f(x, w) = round(x · w) with the rule (c · w, c · x).
    let f = custom_vjp(
        |p: &[Array]| Ok(vec![round(&multiply(&p[0], &p[1])?, 0)?]),
        |p, c, _| Ok(vec![multiply(&c[0], &p[1])?, multiply(&c[0], &p[0])?]),
    );
    let w = arr(&[0.5, -1.5, 2.0], &[3]);
    let per_example = move |v: &[Array]| vmap(&f, &[Some(0), None], &[0])(v);
    let (_, g) = vjp(
        per_example,
        &[xs.clone(), w.clone()],
        std::slice::from_ref(&ct),
    )
    .unwrap();
    let (xv, wv, cv) = (values(&xs), values(&w), values(&ct));
    let want_dx: Vec<f64> = (0..6).map(|k| cv[k] * wv[k % 3]).collect();
    let want_dw: Vec<f64> = (0..3)
        .map(|j| (0..2).map(|b| cv[b * 3 + j] * xv[b * 3 + j]).sum())
        .collect();
    close(&values(&g[0]), &want_dx, 1e-12, "dx");
    assert_eq!(g[1].shape(), [3]);
    close(&values(&g[1]), &want_dw, 1e-12, "dw summed over the batch");
    // jvp of vmap keeps a custom jvp.
    let f = custom_function(|p: &[Array]| Ok(vec![sin(&p[0])?]))
        .jvp(|_p, t| Ok(vec![multiply(&t[0], 3.0)?]))
        .into_fn();
    let batched = move |v: &[Array]| vmap(&f, &[Some(1)], &[0])(v);
    let (_, tan) = jvp(
        batched,
        std::slice::from_ref(&xs),
        std::slice::from_ref(&ct),
    )
    .unwrap();
    let want = multiply(ct.t().unwrap(), 3.0).unwrap();
    close(
        &values(&tan[0]),
        &values(&want),
        1e-15,
        "batched custom jvp",
    );
}

#[test]
fn custom_functions_nest() {
    // grad of a custom function inside vmap: per-example straight-through gradients of
    // (ste(x) − y)², i.e. 2 · (round(x) − y).
    let ste = straight_through();
    let loss = move |p: &[Array]| Ok(vec![square(&subtract(&ste(&p[..1])?[0], &p[1])?)?]);
    let per = vmap(grad(loss, &[0]), &[Some(0), Some(0)], &[0]);
    let (x, y) = (arr(&[0.3, 1.8, -2.6], &[3]), arr(&[1.0, 0.5, -1.0], &[3]));
    let g = per(&[x.clone(), y.clone()]).unwrap();
    let want: Vec<f64> = values(&x)
        .iter()
        .zip(values(&y))
        .map(|(x, y)| 2.0 * (x.round() - y))
        .collect();
    assert_eq!(values(&g[0]), want);
    // grad of grad differentiates the custom rule itself: for x³ with the rule c · 5x²
    // (not 3x²), the second derivative is 10x.
    let cube = custom_vjp(
        |p: &[Array]| Ok(vec![multiply(&square(&p[0])?, &p[0])?]),
        |p, c, _| Ok(vec![multiply(&c[0], &multiply(&square(&p[0])?, 5.0)?)?]),
    );
    let second = grad(grad(cube, &[0]), &[0]);
    let x = Array::scalar(1.5f64);
    assert_eq!(second(&[x]).unwrap()[0].item::<f64>().unwrap(), 15.0);
}

#[test]
fn custom_rule_errors_are_reported() {
    let x = arr(&[1.0, 2.0], &[2]);
    let ct = arr(&[1.0, 1.0], &[2]);
    let too_many = custom_vjp(
        |p: &[Array]| Ok(vec![exp(&p[0])?]),
        |_, c, _| Ok(vec![c[0].clone(), c[0].clone()]),
    );
    assert!(
        vjp(
            &too_many,
            std::slice::from_ref(&x),
            std::slice::from_ref(&ct)
        )
        .is_err()
    );
    let none = custom_vjp(|p: &[Array]| Ok(vec![exp(&p[0])?]), |_, _, _| Ok(vec![]));
    assert!(vjp(&none, std::slice::from_ref(&x), std::slice::from_ref(&ct)).is_err());
    let wrong_shape = custom_vjp(
        |p: &[Array]| Ok(vec![exp(&p[0])?]),
        |_, c, _| Ok(vec![reshape(&c[0], &[2, 1])?]),
    );
    let err = vjp(
        &wrong_shape,
        std::slice::from_ref(&x),
        std::slice::from_ref(&ct),
    )
    .unwrap_err();
    assert!(err.to_string().starts_with("custom_function"), "{err}");
    let failing = custom_vjp(
        |p: &[Array]| Ok(vec![exp(&p[0])?]),
        |_, _, _| Err(Error::InvalidArgument("mine: no".into())),
    );
    let err = vjp(
        &failing,
        std::slice::from_ref(&x),
        std::slice::from_ref(&ct),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "mine: no",
        "the rule's own error comes back"
    );
    let bad_jvp = custom_function(|p: &[Array]| Ok(vec![exp(&p[0])?]))
        .jvp(|_, t| Ok(vec![t[0].clone(), t[0].clone()]))
        .into_fn();
    assert!(
        jvp(
            &bad_jvp,
            std::slice::from_ref(&x),
            std::slice::from_ref(&ct)
        )
        .is_err()
    );
    let bad_jvp_shape = custom_function(|p: &[Array]| Ok(vec![exp(&p[0])?]))
        .jvp(|_, t| Ok(vec![reshape(&t[0], &[1, 2])?]))
        .into_fn();
    assert!(
        jvp(
            &bad_jvp_shape,
            std::slice::from_ref(&x),
            std::slice::from_ref(&ct)
        )
        .is_err()
    );
    let xs = arr(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let bad_vmap = custom_function(|p: &[Array]| Ok(vec![exp(&p[0])?]))
        .vmap(|xs, _| Ok((vec![xs[0].clone(), xs[0].clone()], vec![Some(0), Some(0)])))
        .into_fn();
    assert!(vmap(&bad_vmap, &[Some(0)], &[0])(std::slice::from_ref(&xs)).is_err());
    let bad_vmap_shape = custom_function(|p: &[Array]| Ok(vec![exp(&p[0])?]))
        .vmap(|xs, _| Ok((vec![reshape(&xs[0], &[4])?], vec![Some(0)])))
        .into_fn();
    assert!(vmap(&bad_vmap_shape, &[Some(0)], &[0])(std::slice::from_ref(&xs)).is_err());
    let bad_vmap_axis = custom_function(|p: &[Array]| Ok(vec![exp(&p[0])?]))
        .vmap(|xs, _| Ok((vec![xs[0].clone()], vec![Some(5)])))
        .into_fn();
    assert!(vmap(&bad_vmap_axis, &[Some(0)], &[0])(std::slice::from_ref(&xs)).is_err());
    let nothing = custom_function(|_: &[Array]| Ok(vec![])).into_fn();
    assert!(nothing(std::slice::from_ref(&x)).is_err(), "no outputs");
    let broken = Array::from_error(Error::InvalidArgument("broken".into()));
    assert!(
        straight_through()(&[broken]).is_err(),
        "an input in an error state"
    );
}

// ---- grad and value_and_grad ----

/// f(x, y, z) = x² · y + 3z, a scalar.
fn three(p: &[Array]) -> Result<Vec<Array>> {
    Ok(vec![add(
        &multiply(&square(&p[0])?, &p[1])?,
        &multiply(&p[2], 3.0)?,
    )?])
}

#[test]
fn grad_argnums_follow_mlx() {
    let xs = [
        Array::scalar(2.0f64),
        Array::scalar(-1.5f64),
        Array::scalar(0.5f64),
    ];
    let all: Vec<f64> = grad(three, &[0, 1, 2])(&xs)
        .unwrap()
        .iter()
        .map(|g| g.item::<f64>().unwrap())
        .collect();
    assert_eq!(all, [-6.0, 4.0, 3.0], "[2xy, x², 3]");
    // A subset, in increasing input order whatever the order asked (as MLX returns them).
    let sub: Vec<f64> = grad(three, &[2, 0])(&xs)
        .unwrap()
        .iter()
        .map(|g| g.item::<f64>().unwrap())
        .collect();
    assert_eq!(sub, [-6.0, 3.0]);
    let one = grad(three, &[1])(&xs).unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].item::<f64>().unwrap(), 4.0);
    assert!(grad(three, &[0, 0])(&xs).is_err(), "repeated");
    assert!(grad(three, &[1, 2, 1])(&xs).is_err(), "repeated");
    assert!(grad(three, &[])(&xs).is_err(), "no argnums");
    assert!(grad(three, &[3])(&xs).is_err(), "out of range");
    assert!(value_and_grad(three, &[0, 5])(&xs).is_err(), "out of range");
}

#[test]
fn value_and_grad_returns_auxiliary_outputs() {
    // The loss first, then values to report: only the loss is differentiated.
    let f = |p: &[Array]| {
        let loss = multiply(&sin(&p[0])?, &p[1])?;
        Ok(vec![loss, exp(&p[0])?, multiply(&p[1], &p[1])?])
    };
    let (x, y) = (Array::scalar(0.7f64), Array::scalar(2.0f64));
    let (values_out, grads) = value_and_grad(f, &[0, 1])(&[x, y]).unwrap();
    assert_eq!(values_out.len(), 3);
    close(
        &values(&values_out[0]),
        &[0.7f64.sin() * 2.0],
        1e-15,
        "loss",
    );
    close(&values(&values_out[1]), &[0.7f64.exp()], 1e-15, "aux");
    close(&values(&grads[0]), &[0.7f64.cos() * 2.0], 1e-15, "d/dx");
    close(&values(&grads[1]), &[0.7f64.sin()], 1e-15, "d/dy");
    // A loss of one element in any shape is fine; more elements are not.
    let g = grad(|p: &[Array]| Ok(vec![square(&p[0])?]), &[0])(&[arr(&[3.0], &[1, 1])]).unwrap();
    assert_eq!(g[0].shape(), [1, 1]);
    assert_eq!(values(&g[0]), [6.0]);
    let empty = grad(|_: &[Array]| Ok(vec![]), &[0]);
    assert!(empty(&[Array::scalar(1.0f64)]).is_err(), "no outputs");
}

#[test]
fn grad_treats_integer_inputs_as_constants() {
    // d/dk (x · k) for an integer k: zeros of k's type, as the vjp driver treats integers.
    let f = |p: &[Array]| Ok(vec![multiply(&p[0], &p[1].astype(DType::F64)?)?]);
    let (x, k) = (Array::scalar(1.5f64), Array::scalar(4i32));
    let g = grad(f, &[0, 1])(&[x, k]).unwrap();
    assert_eq!(g[0].item::<f64>().unwrap(), 4.0);
    assert_eq!(g[1].dtype(), DType::I32);
    assert_eq!(g[1].item::<i32>().unwrap(), 0);
}

// ---- nesting ----

#[test]
fn grad_of_grad_matches_the_formula() {
    // f = x³ sin x; f'' = 6x sin x + 6x² cos x − x³ sin x; f''' as well.
    let f = |p: &[Array]| {
        let x = &p[0];
        Ok(vec![multiply(&multiply(&square(x)?, x)?, &sin(x)?)?])
    };
    for x in [-1.3f64, 0.4, 2.1] {
        let second = grad(grad(f, &[0]), &[0])(&[Array::scalar(x)]).unwrap();
        let want = 6.0 * x * x.sin() + 6.0 * x * x * x.cos() - x.powi(3) * x.sin();
        close(&values(&second[0]), &[want], 1e-12, "f''");
        let third = grad(grad(grad(f, &[0]), &[0]), &[0])(&[Array::scalar(x)]).unwrap();
        let want3 =
            6.0 * x.sin() + 18.0 * x * x.cos() - 9.0 * x * x * x.sin() - x.powi(3) * x.cos();
        close(&values(&third[0]), &[want3], 1e-12, "f'''");
    }
}

#[test]
fn vmap_of_grad_gives_per_example_gradients() {
    // loss(w, b, x, y) = (tanh(w·x + b) − y)² per example; gradients with respect to the
    // shared w and b, one per example.
    let loss = |p: &[Array]| {
        let pred = tanh(&add(&multiply(&p[0], &p[2])?, &p[1])?)?;
        Ok(vec![square(&subtract(&pred, &p[3])?)?])
    };
    let mut rng = Rng::new(42);
    let (w, b) = (Array::scalar(0.8f64), Array::scalar(-0.3f64));
    let x = random(&mut rng, &[5], -2.0, 2.0);
    let y = random(&mut rng, &[5], -1.0, 1.0);
    let per = vmap(
        grad(loss, &[0, 1]),
        &[None, None, Some(0), Some(0)],
        &[0, 0],
    );
    let g = per(&[w, b, x.clone(), y.clone()]).unwrap();
    assert_eq!(g[0].shape(), [5]);
    let (mut dw, mut db) = (Vec::new(), Vec::new());
    for (x, y) in values(&x).into_iter().zip(values(&y)) {
        let t = (0.8 * x - 0.3f64).tanh();
        let common = 2.0 * (t - y) * (1.0 - t * t);
        dw.push(common * x);
        db.push(common);
    }
    close(&values(&g[0]), &dw, 1e-12, "dw");
    close(&values(&g[1]), &db, 1e-12, "db");
}

#[test]
fn jvp_of_grad_is_a_hessian_vector_product() {
    // f(x, y) = x² y + sin(x y); H · (u, v) by forward mode over reverse mode.
    let f = |p: &[Array]| {
        let (x, y) = (&p[0], &p[1]);
        Ok(vec![add(
            &multiply(&square(x)?, y)?,
            &sin(&multiply(x, y)?)?,
        )?])
    };
    let (x, y, u, v) = (0.6f64, -1.2f64, 0.5f64, 2.0f64);
    let (_, hv) = jvp(
        grad(f, &[0, 1]),
        &[Array::scalar(x), Array::scalar(y)],
        &[Array::scalar(u), Array::scalar(v)],
    )
    .unwrap();
    let s = (x * y).sin();
    let c = (x * y).cos();
    let hxx = 2.0 * y - y * y * s;
    let hxy = 2.0 * x + c - x * y * s;
    let hyy = -x * x * s;
    close(&values(&hv[0]), &[hxx * u + hxy * v], 1e-12, "(Hv)x");
    close(&values(&hv[1]), &[hxy * u + hyy * v], 1e-12, "(Hv)y");
}

#[test]
fn vmap_of_vmap_with_different_axes() {
    // g(a, b) = a · exp(b) on one pair of vectors [4]; the inner vmap maps a's axis 1 and
    // b's axis 0 (sizes 3), the outer maps a's axis 0 and b's axis 1 (sizes 2), and the
    // outputs put the inner batch last and the outer batch in the middle.
    let mut rng = Rng::new(43);
    let a = random(&mut rng, &[2, 4, 3], -1.0, 1.0); // [outer, feature, inner]
    let b = random(&mut rng, &[3, 2, 4], -1.0, 1.0); // [inner, outer, feature]
    let g = |v: &[Array]| Ok(vec![multiply(&v[0], &exp(&v[1])?)?]);
    // Inside the outer map a is [4, 3] (inner batch at 1) and b is [3, 4] (at 0); the inner
    // result [4] gets the inner batch at 1: [4, 3]. The outer puts its batch at 1: [4, 2, 3].
    let inner = move |v: &[Array]| vmap(g, &[Some(1), Some(0)], &[1])(v);
    let got = vmap(inner, &[Some(0), Some(1)], &[1])(&[a.clone(), b.clone()]).unwrap();
    assert_eq!(got[0].shape(), [4, 2, 3]);
    let (av, bv, gv) = (values(&a), values(&b), values(&got[0]));
    for o in 0..2 {
        for i in 0..3 {
            for f in 0..4 {
                let want = av[(o * 4 + f) * 3 + i] * bv[(i * 2 + o) * 4 + f].exp();
                let at = (f * 2 + o) * 3 + i;
                assert!(
                    (gv[at] - want).abs() < 1e-12,
                    "outer {o}, inner {i}, feature {f}"
                );
            }
        }
    }
}

// ---- errors of the drivers ----

#[test]
fn more_transform_errors_are_reported() {
    let x = arr(&[1.0, 2.0], &[2]);
    let f = |p: &[Array]| Ok(vec![exp(&p[0])?]);
    let nothing = |_: &[Array]| Ok(vec![]);
    assert!(
        jvp(f, std::slice::from_ref(&x), &[]).is_err(),
        "tangent count"
    );
    assert!(
        jvp(nothing, std::slice::from_ref(&x), std::slice::from_ref(&x)).is_err(),
        "jvp: no outputs"
    );
    let broken = Array::from_error(Error::InvalidArgument("broken".into()));
    assert!(vjp(f, std::slice::from_ref(&broken), std::slice::from_ref(&x)).is_err());
    assert!(jvp(f, std::slice::from_ref(&broken), std::slice::from_ref(&x)).is_err());
    assert!(vmap(f, &[Some(0)], &[0])(std::slice::from_ref(&broken)).is_err());
    assert!(grad(f, &[0])(std::slice::from_ref(&broken)).is_err());
    let xs = arr(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]);
    assert!(
        vmap(f, &[Some(0)], &[2])(std::slice::from_ref(&xs)).is_err(),
        "out_axes out of range"
    );
    assert!(
        vmap(f, &[Some(0)], &[0, 1])(std::slice::from_ref(&xs)).is_err(),
        "out_axes count"
    );
    assert!(
        vmap(f, &[None], &[0])(std::slice::from_ref(&xs)).is_err(),
        "nothing batched"
    );
    // Batch sizes that differ with the batch on different axes ([3, 2] on 1 is 2, not 3).
    let g = |p: &[Array]| Ok(vec![add(&p[0], &p[1])?]);
    assert!(vmap(g, &[Some(0), Some(1)], &[0])(&[xs.clone(), xs.clone()]).is_err());
    // Out-of-range in_axes on the second input, after a valid first one.
    assert!(vmap(g, &[Some(0), Some(2)], &[0])(&[xs.clone(), xs.clone()]).is_err());
}

// ---- devices ----

#[test]
fn custom_functions_run_on_a_gpu_stream() {
    // The node hands on its graph's outputs wherever they live; its rules build ordinary ops.
    let previous = default_stream();
    set_default_stream(Stream::default_for(Device::gpu(0)));
    let probe = add(Array::scalar(1.0f32), 1.0).and_then(|a| a.eval());
    if let Err(e) = probe {
        set_default_stream(previous);
        eprintln!("skipped: no CUDA device ({e})");
        return;
    }
    let x = Array::from_slice(&[0.4f32, 1.6, -2.2], &[3]).unwrap();
    let ct = Array::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
    let scaled = custom_vjp(
        |p: &[Array]| Ok(vec![multiply(&round(&p[0], 0)?, 2.0)?]),
        |_, c, _| Ok(vec![multiply(&c[0], 2.0)?]),
    );
    let (out, g) = vjp(&scaled, std::slice::from_ref(&x), std::slice::from_ref(&ct)).unwrap();
    set_default_stream(previous);
    assert_eq!(out[0].to_vec::<f32>().unwrap(), [0.0, 4.0, -4.0]);
    assert_eq!(g[0].to_vec::<f32>().unwrap(), [2.0, 4.0, 6.0]);
}
