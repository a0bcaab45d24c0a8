//! Derivatives and batching of the convolutions: central differences in f64, second
//! derivatives, and vmap against a loop.

use super::*;

type Fun = fn(&[Array]) -> Result<Vec<Array>>;

#[test]
fn derivatives() {
    let mut rng = Rng::new(10);
    let cases: Vec<(&str, Fun, Vec<usize>, Vec<usize>)> = vec![
        (
            "conv1d",
            |v| Ok(vec![conv1d(&v[0], &v[1], 2, 1, 1, 1)?]),
            vec![2, 7, 3],
            vec![2, 3, 3],
        ),
        (
            "conv1d groups dilation",
            |v| Ok(vec![conv1d(&v[0], &v[1], 1, 2, 2, 2)?]),
            vec![1, 8, 4],
            vec![4, 2, 2],
        ),
        (
            "conv1d depthwise",
            |v| Ok(vec![conv1d(&v[0], &v[1], 1, 3, 1, 3)?]),
            vec![2, 6, 3],
            vec![3, 4, 1],
        ),
        (
            "conv2d",
            |v| Ok(vec![conv2d(&v[0], &v[1], (2, 1), (1, 0), (1, 2), 1)?]),
            vec![1, 5, 6, 2],
            vec![3, 2, 2, 2],
        ),
        (
            "conv2d groups",
            |v| Ok(vec![conv2d(&v[0], &v[1], 1, 1, 1, 2)?]),
            vec![2, 3, 3, 4],
            vec![2, 2, 2, 2],
        ),
        (
            "conv3d",
            |v| Ok(vec![conv3d(&v[0], &v[1], (1, 2, 1), 1, 1, 1)?]),
            vec![1, 3, 4, 2, 2],
            vec![2, 2, 2, 2, 2],
        ),
        (
            "conv_general",
            |v| {
                Ok(vec![conv_general(
                    &v[0],
                    &v[1],
                    &[2],
                    &[2],
                    &[0],
                    &[2],
                    &[3],
                    1,
                    true,
                )?])
            },
            vec![2, 4, 2],
            vec![3, 2, 2],
        ),
        (
            "conv_general 2d negative padding",
            |v| {
                Ok(vec![conv_general(
                    &v[0],
                    &v[1],
                    &[1, 2],
                    &[-1, 2],
                    &[1, -1],
                    &[1, 2],
                    &[2, 1],
                    2,
                    false,
                )?])
            },
            vec![1, 4, 5, 2],
            vec![2, 2, 2, 1],
        ),
        (
            "conv_transpose1d",
            |v| Ok(vec![conv_transpose1d(&v[0], &v[1], 2, 1, 1, 1, 1)?]),
            vec![2, 4, 2],
            vec![3, 3, 2],
        ),
        (
            "conv_transpose2d groups",
            |v| {
                Ok(vec![conv_transpose2d(
                    &v[0],
                    &v[1],
                    (2, 1),
                    (0, 1),
                    (1, 2),
                    (1, 0),
                    2,
                )?])
            },
            vec![1, 3, 3, 4],
            vec![2, 2, 2, 2],
        ),
    ];
    for (name, f, xs, ws) in cases {
        let x = random(&mut rng, &xs, -1.0, 1.0);
        let w = random(&mut rng, &ws, -1.0, 1.0);
        check(name, f, &[x, w], &mut rng);
    }
    // Only the input, or only the weight, asked for.
    let x = random(&mut rng, &[1, 6, 2], -1.0, 1.0);
    let w = random(&mut rng, &[2, 3, 2], -1.0, 1.0);
    let f = |v: &[Array]| Ok(vec![conv1d(&v[0], &w, 1, 1, 1, 1)?]);
    check("conv1d wrt x", f, std::slice::from_ref(&x), &mut rng);
    let f = |v: &[Array]| Ok(vec![conv1d(&x, &v[0], 1, 1, 1, 1)?]);
    check("conv1d wrt w", f, std::slice::from_ref(&w), &mut rng);
}

#[test]
fn second_derivatives() {
    // The rules are made of convolutions, so they differentiate again.
    let mut rng = Rng::new(11);
    let w = random(&mut rng, &[2, 3, 2], -1.0, 1.0);
    let x = random(&mut rng, &[1, 7, 2], -1.0, 1.0);
    let cot = random(&mut rng, &[1, 4, 2], -1.0, 1.0);
    let f = |v: &[Array]| {
        let conv = |u: &[Array]| Ok(vec![conv1d(&u[0], &u[1], 2, 1, 1, 1)?]);
        Ok(vjp(conv, v, std::slice::from_ref(&cot))?.1)
    };
    check("vjp of conv1d", f, &[x, w], &mut rng);
}

#[test]
fn batching() {
    let mut rng = Rng::new(12);
    let cases: Vec<(&str, Fun, Vec<usize>, Vec<usize>)> = vec![
        (
            "conv1d",
            |v| Ok(vec![conv1d(&v[0], &v[1], 2, 1, 1, 1)?]),
            vec![3, 2, 7, 3],
            vec![3, 2, 3, 3],
        ),
        (
            "conv1d groups",
            |v| Ok(vec![conv1d(&v[0], &v[1], 1, 1, 2, 2)?]),
            vec![2, 1, 8, 4],
            vec![2, 4, 2, 2],
        ),
        (
            "conv1d depthwise",
            |v| Ok(vec![conv1d(&v[0], &v[1], 1, 3, 1, 3)?]),
            vec![3, 2, 6, 3],
            vec![3, 3, 4, 1],
        ),
        (
            "conv2d groups",
            |v| Ok(vec![conv2d(&v[0], &v[1], (1, 2), 1, 1, 2)?]),
            vec![2, 1, 4, 5, 4],
            vec![2, 6, 2, 2, 2],
        ),
        (
            "conv_transpose1d",
            |v| Ok(vec![conv_transpose1d(&v[0], &v[1], 2, 0, 1, 1, 1)?]),
            vec![2, 1, 4, 2],
            vec![2, 3, 2, 2],
        ),
        (
            "conv_general flip",
            |v| {
                Ok(vec![conv_general(
                    &v[0],
                    &v[1],
                    &[1],
                    &[1],
                    &[2],
                    &[1],
                    &[2],
                    1,
                    true,
                )?])
            },
            vec![2, 2, 4, 2],
            vec![2, 2, 3, 2],
        ),
    ];
    for (name, f, xs, ws) in cases {
        let x = random(&mut rng, &xs, -1.0, 1.0);
        let w = random(&mut rng, &ws, -1.0, 1.0);
        let x0 = take(&x, &Array::scalar(0u32), Some(0)).unwrap();
        let w0 = take(&w, &Array::scalar(0u32), Some(0)).unwrap();
        check_vmap(
            &format!("{name} both"),
            f,
            &[x.clone(), w.clone()],
            &[true, true],
        );
        check_vmap(&format!("{name} input"), f, &[x, w0], &[true, false]);
        check_vmap(&format!("{name} weight"), f, &[x0, w], &[false, true]);
    }
    // Batching the derivative.
    let x = random(&mut rng, &[3, 1, 6, 2], -1.0, 1.0);
    let w = random(&mut rng, &[2, 3, 1], -1.0, 1.0);
    let cot = random(&mut rng, &[1, 6, 2], -1.0, 1.0);
    let f = |v: &[Array]| {
        let conv = |u: &[Array]| Ok(vec![conv1d(&u[0], &u[1], 1, 1, 1, 2)?]);
        Ok(vjp(conv, v, std::slice::from_ref(&cot))?.1)
    };
    check_vmap("vjp of conv1d", f, &[x, w], &[true, false]);
}
