//! vjp, jvp and vmap of the matrix products, `arange` and the shape primitives (split,
//! concatenate, pad, diagonal, as_strided, copy), and of the shape and linear-algebra
//! operations composed from them: central differences in f64, jvp against vjp, vmap against a
//! loop, and second derivatives against hand formulas.

mod common;

use common::Rng;
use common::autodiff::{check, check_vmap, random, values};
use nuvec_core::*;

type F = fn(&[Array]) -> Result<Vec<Array>>;

/// A batching case: its name, the function, and each input's example shape and whether it
/// is batched.
type VmapCase<'a> = (&'a str, F, &'a [(&'a [usize], bool)]);

/// Runs `check` on each case with random f64 inputs of the given shapes.
fn check_all(seed: u64, cases: &[(&str, F, &[&[usize]])]) {
    let mut rng = Rng::new(seed);
    for &(name, f, shapes) in cases {
        let xs: Vec<Array> = shapes
            .iter()
            .map(|s| random(&mut rng, s, -1.0, 1.0))
            .collect();
        check(name, f, &xs, &mut rng);
    }
}

/// Runs `check_vmap` on each case: inputs of the given shapes, the batch (size 3) in front of
/// those marked batched.
fn vmap_all(seed: u64, cases: &[VmapCase]) {
    let mut rng = Rng::new(seed);
    for &(name, f, inputs) in cases {
        let (xs, batched): (Vec<Array>, Vec<bool>) = inputs
            .iter()
            .map(|&(shape, is)| {
                let mut full = shape.to_vec();
                if is {
                    full.insert(0, 3);
                }
                (random(&mut rng, &full, -1.0, 1.0), is)
            })
            .unzip();
        check_vmap(name, f, &xs, &batched);
    }
}

#[test]
fn matmul_derivatives_match_central_differences() {
    check_all(
        20,
        &[
            (
                "batch broadcast",
                |x| Ok(vec![matmul(&x[0], &x[1])?]),
                &[&[2, 1, 3, 4], &[5, 4, 2]],
            ),
            (
                "plain",
                |x| Ok(vec![matmul(&x[0], &x[1])?]),
                &[&[3, 4], &[4, 2]],
            ),
            (
                "batch times a shared matrix",
                |x| Ok(vec![matmul(&x[0], &x[1])?]),
                &[&[2, 3, 4], &[4, 2]],
            ),
            (
                "transposed batch times a shared matrix",
                |x| Ok(vec![matmul(&swapaxes(&x[0], 0, 1)?, &x[1].t()?)?]),
                &[&[3, 2, 4], &[2, 4]],
            ),
            (
                "batch times a vector",
                |x| Ok(vec![matmul(&x[0], &x[1])?]),
                &[&[2, 1, 3, 4], &[4]],
            ),
            (
                "transposed operands",
                |x| Ok(vec![matmul(&x[0].t()?, &x[1].t()?)?]),
                &[&[4, 3], &[2, 4]],
            ),
            (
                "1-D times 2-D",
                |x| Ok(vec![matmul(&x[0], &x[1])?]),
                &[&[4], &[4, 3]],
            ),
            (
                "2-D times 1-D",
                |x| Ok(vec![matmul(&x[0], &x[1])?]),
                &[&[3, 4], &[4]],
            ),
            (
                "1-D times 1-D",
                |x| Ok(vec![matmul(&x[0], &x[1])?]),
                &[&[4], &[4]],
            ),
            (
                "1-D times batched",
                |x| Ok(vec![matmul(&x[0], &x[1])?]),
                &[&[4], &[2, 4, 3]],
            ),
            (
                "product of products",
                |x| Ok(vec![matmul(&square(&matmul(&x[0], &x[1])?)?, &x[0].t()?)?]),
                &[&[3, 4], &[4, 4]],
            ),
            (
                "addmm, full c",
                |x| Ok(vec![addmm(&x[2], &x[0], &x[1], 0.5, -2.0)?]),
                &[&[3, 4], &[4, 2], &[3, 2]],
            ),
            (
                "addmm, broadcast c",
                |x| Ok(vec![addmm(&x[2], &x[0], &x[1], 1.5, 0.25)?]),
                &[&[2, 3, 4], &[4, 2], &[2]],
            ),
            (
                "addmm, 1-D operand",
                |x| Ok(vec![addmm(&x[2], &x[0], &x[1], -1.0, 3.0)?]),
                &[&[4], &[4, 2], &[2]],
            ),
            (
                "addmm, unit factors",
                |x| Ok(vec![addmm(&x[2], &x[0], &x[1], 1.0, 1.0)?]),
                &[&[3, 4], &[4, 2], &[3, 1]],
            ),
        ],
    );
}

/// The primitives of the graph that computes `a` (each node once).
fn primitives(a: &Array) -> Vec<(String, Vec<Vec<usize>>)> {
    let (mut out, mut todo, mut seen) = (Vec::new(), vec![a.clone()], Vec::<Array>::new());
    while let Some(x) = todo.pop() {
        if seen.iter().any(|s| s.same(&x)) {
            continue;
        }
        if let Some(p) = x.primitive() {
            let inputs = x.inputs();
            out.push((
                format!("{p:?}"),
                inputs.iter().map(|i| i.shape().to_vec()).collect(),
            ));
            todo.extend(inputs);
        }
        seen.push(x);
    }
    out
}

/// A batch times one matrix (a linear layer) is one tall product, and so is the gradient with
/// respect to the matrix: no product per batch entry, no sum over the batch afterwards.
#[test]
fn a_batch_times_a_shared_matrix_is_one_product() {
    let mut rng = Rng::new(22);
    let a = random(&mut rng, &[4, 3, 5], -1.0, 1.0);
    let b = random(&mut rng, &[5, 2], -1.0, 1.0);
    let g = random(&mut rng, &[4, 3, 2], -1.0, 1.0);
    let y = matmul(&a, &b).unwrap();
    assert_eq!(y.shape(), [4, 3, 2]);
    let (av, bv, gv) = (values(&a), values(&b), values(&g));
    let mut want_y = vec![0.0; 24];
    let mut want_db = vec![0.0; 10];
    for r in 0..12 {
        for j in 0..2 {
            for t in 0..5 {
                want_y[r * 2 + j] += av[r * 5 + t] * bv[t * 2 + j];
                want_db[t * 2 + j] += av[r * 5 + t] * gv[r * 2 + j];
            }
        }
    }
    close(&values(&y), &want_y, "product");
    let (_, grads) = vjp(
        |x| Ok(vec![matmul(&x[0], &x[1])?]),
        &[a.clone(), b.clone()],
        std::slice::from_ref(&g),
    )
    .unwrap();
    let graph = primitives(&grads[1]);
    let products: Vec<_> = graph
        .iter()
        .filter(|(p, _)| p.starts_with("Matmul"))
        .collect();
    assert_eq!(products.len(), 1, "{graph:?}");
    assert!(products[0].1.iter().all(|s| s.len() == 2), "{graph:?}");
    assert!(
        !graph.iter().any(|(p, _)| p.starts_with("Reduce")),
        "{graph:?}"
    );
    assert_eq!(grads[1].shape(), [5, 2]);
    close(&values(&grads[1]), &want_db, "gradient of b");
}

#[test]
fn matmul_batches_with_any_batch_axis() {
    vmap_all(
        21,
        &[
            (
                "lhs batched",
                |x| Ok(vec![matmul(&x[0], &x[1])?]),
                &[(&[2, 4], true), (&[4, 3], false)],
            ),
            (
                "rhs batched",
                |x| Ok(vec![matmul(&x[0], &x[1])?]),
                &[(&[2, 4], false), (&[4, 3], true)],
            ),
            (
                "both batched",
                |x| Ok(vec![matmul(&x[0], &x[1])?]),
                &[(&[2, 4], true), (&[4, 3], true)],
            ),
            (
                "batch broadcast inside",
                |x| Ok(vec![matmul(&x[0], &x[1])?]),
                &[(&[2, 1, 3, 4], true), (&[5, 4, 2], false)],
            ),
            (
                "1-D lhs batched",
                |x| Ok(vec![matmul(&x[0], &x[1])?]),
                &[(&[4], true), (&[4, 3], false)],
            ),
            (
                "1-D rhs batched",
                |x| Ok(vec![matmul(&x[0], &x[1])?]),
                &[(&[3, 4], false), (&[4], true)],
            ),
            (
                "1-D both batched",
                |x| Ok(vec![matmul(&x[0], &x[1])?]),
                &[(&[4], true), (&[4], true)],
            ),
            (
                "addmm, c batched alone",
                |x| Ok(vec![addmm(&x[2], &x[0], &x[1], 0.5, 2.0)?]),
                &[(&[2, 4], false), (&[4, 3], false), (&[2, 3], true)],
            ),
            (
                "addmm, lhs batched",
                |x| Ok(vec![addmm(&x[2], &x[0], &x[1], 0.5, 2.0)?]),
                &[(&[2, 4], true), (&[4, 3], false), (&[3], false)],
            ),
            (
                "addmm, rhs and c batched",
                |x| Ok(vec![addmm(&x[2], &x[0], &x[1], -1.0, 0.5)?]),
                &[(&[2, 4], false), (&[4, 3], true), (&[2, 3], true)],
            ),
            (
                "addmm, all batched",
                |x| Ok(vec![addmm(&x[2], &x[0], &x[1], 2.0, 1.0)?]),
                &[(&[2, 4], true), (&[4, 3], true), (&[2, 3], true)],
            ),
        ],
    );
}

/// `xᵀ M` for a vector `x` and matrix `M` (row-major `rows × cols`), in plain f64.
fn vec_mat(x: &[f64], m: &[f64], cols: usize) -> Vec<f64> {
    (0..cols)
        .map(|j| {
            x.iter()
                .enumerate()
                .map(|(i, xi)| xi * m[i * cols + j])
                .sum()
        })
        .collect()
}

/// `M v` for a matrix `M` (row-major `rows × cols`) and vector `v`, in plain f64.
fn mat_vec(m: &[f64], v: &[f64], cols: usize) -> Vec<f64> {
    m.chunks(cols)
        .map(|row| row.iter().zip(v).map(|(a, b)| a * b).sum())
        .collect()
}

fn close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-10 * w.abs().max(1.0),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

#[test]
fn second_derivatives_through_matmul_match_hand_formulas() {
    let (k, m) = (4, 3);
    let mut rng = Rng::new(22);
    let w = random(&mut rng, &[k, m], -1.0, 1.0);
    let x = random(&mut rng, &[k], -1.0, 1.0);
    let v = random(&mut rng, &[k], -1.0, 1.0);
    let (wv, xv, vv) = (values(&w), values(&x), values(&v));
    let y = vec_mat(&xv, &wv, m);
    let wt_v = vec_mat(&vv, &wv, m);

    // f(x) = Σ_j (x·W)_j²: the Hessian is 2 W Wᵀ, so H v = 2 W (Wᵀ v). The sum is a product
    // with ones, so that only matrix products and elementwise rules are involved.
    let quad = {
        let w = w.clone();
        move |xs: &[Array]| -> Result<Vec<Array>> {
            let y = matmul(&xs[0], &w)?;
            let ones = ones(&[y.shape()[0]], DType::F64)?;
            Ok(vec![matmul(&square(&y)?, &ones)?])
        }
    };
    // ⟨∇f(x), v⟩, whose gradient is H v.
    let directional = {
        let (quad, v) = (quad.clone(), v.clone());
        move |xs: &[Array]| -> Result<Vec<Array>> {
            let g = grad(quad.clone(), &[0])(xs)?;
            Ok(vec![matmul(&g[0], &v)?])
        }
    };
    let hv = grad(directional, &[0])(std::slice::from_ref(&x)).unwrap();
    let want: Vec<f64> = mat_vec(&wv, &wt_v, m).iter().map(|e| 2.0 * e).collect();
    close(&values(&hv[0]), &want, "grad of grad, quadratic");

    // f(x) = Σ_j (x·W)_j³: ∇f = 3 W y², H = 6 W diag(y) Wᵀ, so H v = 6 W (y ∘ Wᵀ v).
    let cubic = {
        let w = w.clone();
        move |xs: &[Array]| -> Result<Vec<Array>> {
            let y = matmul(&xs[0], &w)?;
            let ones = ones(&[y.shape()[0]], DType::F64)?;
            Ok(vec![matmul(&multiply(&square(&y)?, &y)?, &ones)?])
        }
    };
    let gradient = {
        let cubic = cubic.clone();
        move |xs: &[Array]| grad(cubic.clone(), &[0])(xs)
    };
    let g = gradient(std::slice::from_ref(&x)).unwrap();
    let y2: Vec<f64> = y.iter().map(|e| 3.0 * e * e).collect();
    close(&values(&g[0]), &mat_vec(&wv, &y2, m), "gradient, cubic");
    let yw: Vec<f64> = y.iter().zip(&wt_v).map(|(a, b)| 6.0 * a * b).collect();
    let want = mat_vec(&wv, &yw, m);
    // H v three ways: the vjp and the jvp of the gradient (H is symmetric), and the vmap of
    // the jvp over the basis directions (rows of H).
    let (_, back) = vjp(
        gradient.clone(),
        std::slice::from_ref(&x),
        std::slice::from_ref(&v),
    )
    .unwrap();
    close(&values(&back[0]), &want, "vjp of grad, cubic");
    let (_, fwd) = jvp(
        gradient.clone(),
        std::slice::from_ref(&x),
        std::slice::from_ref(&v),
    )
    .unwrap();
    close(&values(&fwd[0]), &want, "jvp of grad, cubic");
    let basis = eye(k, None, 0, DType::F64).unwrap();
    let rows = vmap(
        {
            let (gradient, x) = (gradient.clone(), x.clone());
            move |d: &[Array]| Ok(jvp(gradient.clone(), std::slice::from_ref(&x), d)?.1)
        },
        &[Some(0)],
        &[0],
    )(std::slice::from_ref(&basis))
    .unwrap();
    let hessian = values(&rows[0]);
    for i in 0..k {
        for j in 0..k {
            let h: f64 = (0..m)
                .map(|c| 6.0 * wv[i * m + c] * y[c] * wv[j * m + c])
                .sum();
            close(&[hessian[i * k + j]], &[h], "hessian");
        }
    }
}

#[test]
fn per_example_gradients_through_matmul() {
    // vmap of grad: for each row x_b, ∇ Σ_j (x_b·W)_j² = 2 W (Wᵀ x_b).
    let (k, m) = (4, 3);
    let mut rng = Rng::new(23);
    let w = random(&mut rng, &[k, m], -1.0, 1.0);
    let xs = random(&mut rng, &[k, 5], -1.0, 1.0);
    let f = {
        let w = w.clone();
        move |v: &[Array]| -> Result<Vec<Array>> {
            let quad = {
                let w = w.clone();
                move |x: &[Array]| -> Result<Vec<Array>> {
                    let y = matmul(&x[0], &w)?;
                    Ok(vec![matmul(&y, &y)?])
                }
            };
            grad(quad, &[0])(v)
        }
    };
    // The examples are the columns of xs; the gradients come out as columns too.
    let got = vmap(f, &[Some(1)], &[1])(std::slice::from_ref(&xs)).unwrap();
    assert_eq!(got[0].shape(), [k, 5]);
    let (wv, xv, gv) = (values(&w), values(&xs), values(&got[0]));
    for b in 0..5 {
        let x: Vec<f64> = (0..k).map(|i| xv[i * 5 + b]).collect();
        let y = vec_mat(&x, &wv, m);
        let want: Vec<f64> = mat_vec(&wv, &y, m).iter().map(|e| 2.0 * e).collect();
        let col: Vec<f64> = (0..k).map(|i| gv[i * 5 + b]).collect();
        close(&col, &want, "per-example gradient");
    }
}

#[test]
fn split_concatenate_pad_derivatives_match_central_differences() {
    check_all(
        24,
        &[
            (
                "split, middle piece unused",
                |x| {
                    let p = split(&x[0], 3, 0)?;
                    Ok(vec![p[0].clone(), multiply(&p[2], &p[2])?])
                },
                &[&[6, 4]],
            ),
            (
                "split_at, one piece used",
                |x| Ok(vec![split_at(&x[0], &[1, 3], -1)?[1].clone()]),
                &[&[3, 5]],
            ),
            (
                "split_at, overlapping pieces",
                |x| {
                    // Points out of order: pieces [0, 3), empty, and [1, 5) overlapping.
                    let p = split_at(&x[0], &[3, 1], 0)?;
                    Ok(vec![p[0].clone(), exp(&p[2])?])
                },
                &[&[5, 2]],
            ),
            ("split, all pieces", |x| split(&x[0], 2, 1), &[&[2, 4, 3]]),
            (
                "concatenate",
                |x| {
                    Ok(vec![concatenate(
                        &[x[0].clone(), square(&x[1])?, x[2].clone()],
                        -1,
                    )?])
                },
                &[&[2, 3], &[2, 1], &[2, 4]],
            ),
            (
                "concatenate, shared input",
                |x| Ok(vec![concatenate(&[x[0].clone(), x[0].t()?], 0)?]),
                &[&[3, 3]],
            ),
            (
                "pad, constant value",
                |x| Ok(vec![pad(&multiply(&x[0], &x[0])?, &[(1, 0), (2, 1)], 0.5)?]),
                &[&[2, 3]],
            ),
            (
                "pad, value as an input",
                |x| Ok(vec![pad(&x[0], &[(0, 2), (1, 1), (0, 0)], &x[1])?]),
                &[&[2, 3, 2], &[]],
            ),
            (
                "pad, one width pair, value of one element",
                |x| Ok(vec![pad(&x[0], &[(1, 2)], &square(&x[1])?)?]),
                &[&[2, 2], &[1]],
            ),
            (
                "copy",
                |x| Ok(vec![multiply(&copy(&x[0].t()?)?, &x[1])?]),
                &[&[3, 2], &[2, 3]],
            ),
        ],
    );
    // An integer input joined to floats is a constant.
    let mut rng = Rng::new(25);
    let ints = Array::from_slice(&[1i32, 2, 3, 4], &[2, 2]).unwrap();
    let x = random(&mut rng, &[2, 3], -1.0, 1.0);
    check(
        "concatenate with integers",
        |v| Ok(vec![concatenate(&[v[0].clone(), v[1].clone()], 1)?]),
        &[x, ints],
        &mut rng,
    );
}

#[test]
fn diagonal_and_strided_derivatives_match_central_differences() {
    check_all(
        26,
        &[
            (
                "diagonal",
                |x| Ok(vec![diagonal(&x[0], 0, 0, 1)?]),
                &[&[3, 4]],
            ),
            (
                "diagonal above",
                |x| Ok(vec![square(&diagonal(&x[0], 1, 0, 1)?)?]),
                &[&[3, 4]],
            ),
            (
                "diagonal below",
                |x| Ok(vec![diagonal(&x[0], -2, 0, 1)?]),
                &[&[4, 3]],
            ),
            (
                "diagonal, empty",
                |x| Ok(vec![diagonal(&x[0], 5, 0, 1)?, x[0].clone()]),
                &[&[3, 4]],
            ),
            (
                "diagonal of a batch",
                |x| Ok(vec![diagonal(&x[0], 1, 0, 2)?]),
                &[&[3, 2, 4]],
            ),
            (
                "diagonal, axes reversed",
                |x| Ok(vec![diagonal(&x[0], -1, -1, 0)?]),
                &[&[3, 2, 4]],
            ),
            (
                "as_strided, windows",
                |x| Ok(vec![square(&as_strided(&x[0], &[3, 3], &[2, 1], 1)?)?]),
                &[&[3, 4]],
            ),
            (
                "as_strided, negative stride",
                |x| Ok(vec![as_strided(&x[0], &[4], &[-3], 11)?]),
                &[&[3, 4]],
            ),
            (
                "as_strided, zero stride",
                |x| Ok(vec![as_strided(&x[0], &[2, 3], &[0, 4], 1)?]),
                &[&[3, 4]],
            ),
            (
                "as_strided of a transposed view",
                |x| Ok(vec![as_strided(&x[0].t()?, &[2, 2], &[3, 1], 2)?]),
                &[&[3, 4]],
            ),
            (
                "as_strided, 0-D",
                |x| Ok(vec![as_strided(&x[0], &[], &[], 5)?]),
                &[&[2, 3]],
            ),
            (
                "as_strided, empty",
                |x| Ok(vec![as_strided(&x[0], &[0, 2], &[1, 1], 0)?, x[0].clone()]),
                &[&[2, 3]],
            ),
        ],
    );
}

#[test]
fn composed_shape_ops_differentiate() {
    check_all(
        27,
        &[
            (
                "stack",
                |x| {
                    Ok(vec![stack(
                        &[x[0].clone(), square(&x[1])?, x[0].clone()],
                        1,
                    )?])
                },
                &[&[2, 3], &[2, 3]],
            ),
            (
                "stack, last axis",
                |x| Ok(vec![stack(&[x[0].clone(), x[1].clone()], -1)?]),
                &[&[2, 3], &[2, 3]],
            ),
            (
                "unstack, one slice unused",
                |x| {
                    let parts = unstack(&x[0], 1)?;
                    Ok(vec![parts[0].clone(), exp(&parts[2])?])
                },
                &[&[2, 3, 2]],
            ),
            (
                "flatten",
                |x| Ok(vec![flatten(&x[0].t()?, 0, 1)?]),
                &[&[2, 3, 4]],
            ),
            (
                "unflatten",
                |x| Ok(vec![unflatten(&x[0], -1, &[2, -1])?]),
                &[&[3, 6]],
            ),
            (
                "swapaxes",
                |x| Ok(vec![multiply(&swapaxes(&x[0], 0, -1)?, &x[1])?]),
                &[&[2, 3, 4], &[4, 3, 2]],
            ),
            (
                "moveaxis",
                |x| Ok(vec![square(&moveaxis(&x[0], 0, -1)?)?]),
                &[&[2, 3, 4]],
            ),
            (
                "flip",
                |x| Ok(vec![flip(&x[0], &[1])?, flip(&square(&x[0])?, &[])?]),
                &[&[2, 3]],
            ),
            (
                "roll",
                |x| Ok(vec![roll(&x[0], 2, Some(1))?, roll(&x[0], -1, None)?]),
                &[&[2, 3]],
            ),
            ("tile", |x| Ok(vec![tile(&x[0], &[2, 1, 2])?]), &[&[2, 3]]),
            (
                "repeat",
                |x| Ok(vec![repeat(&x[0], 2, Some(1))?, repeat(&x[0], 3, None)?]),
                &[&[2, 3]],
            ),
            (
                "diag of a vector",
                |x| Ok(vec![diag(&x[0], 0)?, diag(&x[0], 2)?, diag(&x[0], -1)?]),
                &[&[3]],
            ),
            (
                "diag of a matrix",
                |x| Ok(vec![diag(&x[0], 1)?]),
                &[&[3, 4]],
            ),
            (
                "squeeze and expand_dims",
                |x| Ok(vec![expand_dims(&squeeze(&x[0], &[])?, -1)?]),
                &[&[2, 1, 3]],
            ),
            (
                "broadcast_arrays",
                |x| {
                    let b = broadcast_arrays(&[x[0].clone(), x[1].clone()])?;
                    Ok(vec![multiply(&b[0], &b[1])?, b[0].clone()])
                },
                &[&[3, 1], &[4]],
            ),
            (
                // A diagonal of length one sums without a reduction primitive.
                "trace",
                |x| Ok(vec![trace(&x[0], 3, 0, 1)?, trace(&x[1], 0, 0, 2)?]),
                &[&[3, 4], &[1, 2, 3]],
            ),
            (
                "kron",
                |x| Ok(vec![kron(&x[0], &x[1])?]),
                &[&[2, 3], &[2, 2]],
            ),
            (
                "outer",
                |x| Ok(vec![outer(&x[0], &x[1])?]),
                &[&[3], &[2, 2]],
            ),
            (
                "inner",
                |x| Ok(vec![inner(&x[0], &x[1])?]),
                &[&[2, 4], &[3, 4]],
            ),
            (
                "tensordot",
                |x| Ok(vec![tensordot(&x[0], &x[1], 2)?]),
                &[&[2, 3, 4], &[3, 4, 2]],
            ),
            (
                "tensordot, pairs",
                |x| Ok(vec![tensordot(&x[0], &x[1], ([0, 2], [2, 1]))?]),
                &[&[2, 3, 4], &[3, 4, 2]],
            ),
            (
                "tril and triu",
                |x| Ok(vec![tril(&x[0], 0)?, triu(&x[0], 1)?, tril(&x[0], -1)?]),
                &[&[2, 3, 4]],
            ),
            (
                "meshgrid",
                |x| {
                    let g = meshgrid(&[x[0].clone(), x[1].clone(), x[2].clone()], true)?;
                    Ok(vec![multiply(&g[0], &g[1])?, g[2].clone()])
                },
                &[&[3], &[2], &[2]],
            ),
        ],
    );
}

#[test]
fn shape_primitives_batch_with_any_batch_axis() {
    vmap_all(
        28,
        &[
            (
                "split, one piece unused",
                |x| {
                    let p = split(&x[0], 3, -1)?;
                    Ok(vec![p[0].clone(), p[2].clone()])
                },
                &[(&[2, 6], true)],
            ),
            (
                "split_at, overlapping",
                |x| split_at(&x[0], &[3, 1], 0),
                &[(&[5, 2], true)],
            ),
            (
                "concatenate, mixed",
                |x| {
                    Ok(vec![concatenate(
                        &[x[0].clone(), x[1].clone(), x[2].clone()],
                        1,
                    )?])
                },
                &[(&[2, 3], true), (&[2, 1], false), (&[2, 2], true)],
            ),
            (
                "concatenate, one batched",
                |x| Ok(vec![concatenate(&[x[0].clone(), x[1].clone()], 0)?]),
                &[(&[2, 3], false), (&[1, 3], true)],
            ),
            (
                "pad, x batched",
                |x| Ok(vec![pad(&x[0], &[(1, 0), (0, 2)], 0.5)?]),
                &[(&[2, 3], true)],
            ),
            (
                "pad, value batched",
                |x| Ok(vec![pad(&x[0], &[(1, 0), (0, 2)], &x[1])?]),
                &[(&[2, 3], false), (&[], true)],
            ),
            (
                "pad, both batched",
                |x| Ok(vec![pad(&x[0], &[(0, 1), (2, 1)], &x[1])?]),
                &[(&[2, 3], true), (&[], true)],
            ),
            (
                "pad, x batched, value shared",
                |x| Ok(vec![pad(&x[0], &[(1, 1)], &x[1])?]),
                &[(&[2, 3], true), (&[1], false)],
            ),
            (
                "diagonal",
                |x| Ok(vec![diagonal(&x[0], 1, 0, 1)?, diagonal(&x[0], -1, 1, 0)?]),
                &[(&[3, 4], true)],
            ),
            (
                "diagonal of a batch",
                |x| Ok(vec![diagonal(&x[0], 0, 2, 0)?]),
                &[(&[3, 2, 3], true)],
            ),
            (
                "as_strided",
                |x| {
                    Ok(vec![
                        as_strided(&x[0], &[3, 3], &[2, 1], 1)?,
                        as_strided(&x[0], &[4], &[-3], 11)?,
                    ])
                },
                &[(&[3, 4], true)],
            ),
            (
                "copy",
                |x| Ok(vec![copy(&x[0])?, copy(&x[0].t()?)?]),
                &[(&[3, 4], true)],
            ),
        ],
    );
}

#[test]
fn composed_shape_ops_batch() {
    vmap_all(
        29,
        &[
            (
                "stack, mixed",
                |x| Ok(vec![stack(&[x[0].clone(), x[1].clone()], 1)?]),
                &[(&[2, 3], true), (&[2, 3], false)],
            ),
            ("unstack", |x| unstack(&x[0], -1), &[(&[2, 3], true)]),
            (
                "flatten and unflatten",
                |x| {
                    let f = flatten(&x[0], 0, 1)?;
                    Ok(vec![unflatten(&f, 0, &[3, -1])?, f])
                },
                &[(&[2, 3, 2], true)],
            ),
            (
                "swapaxes and moveaxis",
                |x| Ok(vec![swapaxes(&x[0], 0, 2)?, moveaxis(&x[0], -1, 0)?]),
                &[(&[2, 3, 4], true)],
            ),
            (
                "flip and roll",
                |x| {
                    Ok(vec![
                        flip(&x[0], &[0])?,
                        roll(&x[0], 1, Some(1))?,
                        roll(&x[0], 2, None)?,
                    ])
                },
                &[(&[2, 3], true)],
            ),
            (
                "tile and repeat",
                |x| Ok(vec![tile(&x[0], &[2, 1, 2])?, repeat(&x[0], 2, Some(0))?]),
                &[(&[2, 3], true)],
            ),
            (
                "diag",
                |x| Ok(vec![diag(&x[0], 1)?, diag(&diag(&x[0], -1)?, 0)?]),
                &[(&[3], true)],
            ),
            (
                "squeeze and expand_dims",
                |x| Ok(vec![squeeze(&expand_dims(&x[0], 1)?, &[])?]),
                &[(&[2, 3], true)],
            ),
            (
                "broadcast_arrays",
                |x| broadcast_arrays(&[x[0].clone(), x[1].clone()]),
                &[(&[3, 1], true), (&[4], false)],
            ),
            (
                "trace, length-one diagonal",
                |x| Ok(vec![trace(&x[0], 2, 0, 1)?]),
                &[(&[2, 3], true)],
            ),
            (
                "kron and outer",
                |x| Ok(vec![kron(&x[0], &x[1])?, outer(&x[0], &x[1])?]),
                &[(&[2, 2], true), (&[3], false)],
            ),
            (
                "inner and tensordot",
                |x| {
                    Ok(vec![
                        inner(&x[0], &x[1])?,
                        tensordot(&x[0], &x[1], ([1], [1]))?,
                    ])
                },
                &[(&[2, 4], false), (&[3, 4], true)],
            ),
            (
                "tril and triu",
                |x| Ok(vec![tril(&x[0], 1)?, triu(&x[0], 0)?]),
                &[(&[3, 4], true)],
            ),
            (
                "meshgrid",
                |x| meshgrid(&[x[0].clone(), x[1].clone()], false),
                &[(&[3], true), (&[2], false)],
            ),
            (
                "arange inside",
                |x| Ok(vec![multiply(&x[0], &arange(0.0, 3.0, 1.0, DType::F64)?)?]),
                &[(&[2, 3], true)],
            ),
        ],
    );
}

#[test]
fn arange_rules() {
    let op = CreationOp::Arange {
        start: 1.0,
        step: 0.5,
        n: 4,
        dtype: DType::F32,
    };
    let p = Primitive::Creation(op);
    let out = arange(1.0, 3.0, 0.5, DType::F32).unwrap();
    // No inputs: no cotangents, and a zero tangent of the output's shape and type.
    let back = p
        .vjp(
            &[],
            &[Some(out.clone())],
            &[Some(ones_like(&out).unwrap())],
            &[],
        )
        .unwrap();
    assert!(back.is_empty());
    let fwd = p.jvp(&[], &[Some(out.clone())], &[]).unwrap();
    assert_eq!(fwd.len(), 1);
    assert_eq!(fwd[0].shape(), [4]);
    assert_eq!(fwd[0].dtype(), DType::F32);
    assert_eq!(fwd[0].to_vec::<f32>().unwrap(), [0.0; 4]);
    // Batching: the same values, not batched.
    let (outs, axes) = p.vmap(&[], &[]).unwrap();
    assert_eq!(axes, [None]);
    assert_eq!(outs[0].to_vec::<f32>().unwrap(), [1.0, 1.5, 2.0, 2.5]);
    // Integer outputs get integer zeros.
    let ints = Primitive::Creation(CreationOp::Arange {
        start: 0.0,
        step: 1.0,
        n: 3,
        dtype: DType::I32,
    });
    let fwd = ints.jvp(&[], &[None], &[]).unwrap();
    assert_eq!(fwd[0].dtype(), DType::I32);
    assert_eq!(fwd[0].to_vec::<i32>().unwrap(), [0, 0, 0]);
    // Through a function: arange is a constant.
    let mut rng = Rng::new(30);
    let x = random(&mut rng, &[2, 3], -1.0, 1.0);
    check(
        "times arange",
        |v| Ok(vec![multiply(&v[0], &arange(0.0, 3.0, 1.0, DType::F64)?)?]),
        &[x],
        &mut rng,
    );
}
