//! Checks shared by the transform tests: vjp against central differences in f64, jvp against
//! vjp, and vmap against a loop over the batch.

use super::Rng;
use nuvec_core::*;

/// The values of `a` as f64.
pub fn values(a: &Array) -> Vec<f64> {
    a.astype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

/// An f64 array of `shape` uniform in `[lo, hi)`.
pub fn random(rng: &mut Rng, shape: &[usize], lo: f64, hi: f64) -> Array {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|_| rng.range(lo, hi)).collect();
    Array::from_slice(&v, shape).unwrap()
}

fn is_float(a: &Array) -> bool {
    matches!(
        a.dtype(),
        DType::F64 | DType::F32 | DType::F16 | DType::BF16
    )
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `Σ_outputs ⟨cotangent, f(x)⟩` as a number.
fn project(f: &dyn Fn(&[Array]) -> Result<Vec<Array>>, xs: &[Array], cots: &[Vec<f64>]) -> f64 {
    let outs = f(xs).unwrap();
    outs.iter().zip(cots).map(|(o, c)| dot(&values(o), c)).sum()
}

/// Checks the vjp of `f` at `xs` against central differences (step 1e-6, so `f` should work in
/// f64), and the jvp against the vjp: `Σ ⟨u, J v⟩ = Σ ⟨Jᵀ u, v⟩` for random `u`, `v`.
/// Inputs that are not floating point (indices, masks) are constants: their cotangents must be
/// zero and their tangents are zero.
pub fn check<G>(name: &str, f: G, xs: &[Array], rng: &mut Rng)
where
    G: Fn(&[Array]) -> Result<Vec<Array>>,
{
    let outs = f(xs).unwrap();
    let cots: Vec<Array> = outs
        .iter()
        .map(|o| random(rng, o.shape(), -1.0, 1.0).astype(o.dtype()).unwrap())
        .collect();
    let cot_vals: Vec<Vec<f64>> = cots.iter().map(values).collect();
    let (_, grads) = vjp(&f, xs, &cots).unwrap();
    assert_eq!(grads.len(), xs.len(), "{name}: one cotangent per input");
    let h = 1e-6;
    for (i, g) in grads.iter().enumerate() {
        assert_eq!(g.shape(), xs[i].shape(), "{name}: grad {i} shape");
        let gv = values(g);
        if !is_float(&xs[i]) {
            assert!(
                gv.iter().all(|v| *v == 0.0),
                "{name}: input {i} is not differentiable"
            );
            continue;
        }
        let base = values(&xs[i]);
        for j in 0..base.len() {
            let shifted = |d: f64| {
                let mut p = base.clone();
                p[j] += d;
                let mut ys = xs.to_vec();
                ys[i] = Array::from_slice(&p, xs[i].shape())
                    .unwrap()
                    .astype(xs[i].dtype())
                    .unwrap();
                project(&f, &ys, &cot_vals)
            };
            let numeric = (shifted(h) - shifted(-h)) / (2.0 * h);
            assert!(
                (gv[j] - numeric).abs() <= 1e-6 * numeric.abs().max(1.0),
                "{name}: d/dx{i}[{j}]: vjp {} vs numeric {numeric}",
                gv[j]
            );
        }
    }
    let tans: Vec<Array> = xs
        .iter()
        .map(|x| {
            if is_float(x) {
                random(rng, x.shape(), -1.0, 1.0).astype(x.dtype()).unwrap()
            } else {
                zeros_like(x).unwrap()
            }
        })
        .collect();
    let (_, jv) = jvp(&f, xs, &tans).unwrap();
    assert_eq!(jv.len(), outs.len(), "{name}: one tangent per output");
    for (t, o) in jv.iter().zip(&outs) {
        assert_eq!(t.shape(), o.shape(), "{name}: tangent shape");
    }
    let lhs: f64 = jv
        .iter()
        .zip(&cot_vals)
        .map(|(t, u)| dot(&values(t), u))
        .sum();
    let rhs: f64 = grads
        .iter()
        .zip(&tans)
        .map(|(g, v)| dot(&values(g), &values(v)))
        .sum();
    assert!(
        (lhs - rhs).abs() <= 1e-9 * lhs.abs().max(1.0),
        "{name}: jvp {lhs} vs vjp {rhs}"
    );
}

/// Checks `vmap(f)` against a loop over the batch. `xs[i]` carries the batch on axis 0 where
/// `batched[i]`, and is passed whole to every call where not. The batch axis is tried first,
/// in the middle and last (the arrays are made contiguous in that layout), and every output is
/// asked for with the batch first and last.
pub fn check_vmap<G>(name: &str, f: G, xs: &[Array], batched: &[bool])
where
    G: Fn(&[Array]) -> Result<Vec<Array>> + Clone,
{
    let size = xs
        .iter()
        .zip(batched)
        .find_map(|(x, &b)| b.then(|| x.shape()[0]))
        .expect("one input is batched");
    // The loop: one call per example, stacked along a new leading axis.
    let mut per_example: Vec<Vec<Array>> = Vec::new();
    for b in 0..size {
        let args: Vec<Array> = xs
            .iter()
            .zip(batched)
            .map(|(x, &is)| {
                if is {
                    take(x, &Array::scalar(b as u32), Some(0)).unwrap()
                } else {
                    x.clone()
                }
            })
            .collect();
        per_example.push(f(&args).unwrap());
    }
    let outputs = per_example[0].len();
    let want: Vec<Array> = (0..outputs)
        .map(|o| {
            let parts: Vec<Array> = per_example.iter().map(|r| r[o].clone()).collect();
            stack(&parts, 0).unwrap()
        })
        .collect();
    for place in ["first", "middle", "last"] {
        let mut moved = Vec::new();
        let mut in_axes = Vec::new();
        for (x, &is) in xs.iter().zip(batched) {
            if !is {
                moved.push(x.clone());
                in_axes.push(None);
                continue;
            }
            let last = x.ndim() - 1;
            let axis = match place {
                "first" => 0,
                "middle" => last.div_ceil(2),
                _ => last,
            };
            moved.push(contiguous(&moveaxis(x, 0, axis as isize).unwrap()).unwrap());
            in_axes.push(Some(axis));
        }
        for out_last in [false, true] {
            let out_axes: Vec<usize> = want
                .iter()
                .map(|w| if out_last { w.ndim() - 1 } else { 0 })
                .collect();
            let got = vmap(f.clone(), &in_axes, &out_axes)(&moved)
                .unwrap_or_else(|e| panic!("{name}: vmap with the batch {place}: {e}"));
            assert_eq!(got.len(), want.len(), "{name}: output count");
            for (o, (g, w)) in got.iter().zip(&want).enumerate() {
                let g = moveaxis(g, out_axes[o] as isize, 0).unwrap();
                assert_eq!(g.shape(), w.shape(), "{name}: output {o}, batch {place}");
                assert_eq!(g.dtype(), w.dtype(), "{name}: output {o} dtype");
                let (gv, wv) = (values(&g), values(w));
                for (k, (a, b)) in gv.iter().zip(&wv).enumerate() {
                    let ok = (a - b).abs() <= 1e-9 * b.abs().max(1.0) || (a.is_nan() && b.is_nan());
                    assert!(ok, "{name}: output {o}[{k}], batch {place}: {a} vs {b}");
                }
            }
        }
    }
}
