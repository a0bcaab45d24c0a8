//! `mean`, `var`, `std`, `logsumexp` and `softmax` over every axis list.

use nuvec_core::{Array, logsumexp, mean, softmax, std, var};

use super::*;

#[test]
fn mean_var_std_match_reference() {
    sweep_floats("mean", &|x, a, k| mean(x, a, k), &ref_mean);
    for ddof in [0, 1] {
        sweep_floats(
            "var",
            &move |x, a, k| var(x, a, k, ddof),
            &move |v, s, a| ref_var(v, s, a, ddof),
        );
        sweep_floats(
            "std",
            &move |x, a, k| std(x, a, k, ddof),
            &move |v, s, a| ref_var(v, s, a, ddof).iter().map(|x| x.sqrt()).collect(),
        );
    }
}

#[test]
fn mean_of_nothing_is_nan_and_var_with_large_ddof_is_infinite() {
    let x = Array::from_slice::<f32>(&[], &[0, 3]).unwrap();
    assert!(
        f64s(&mean(&x, &[0], false).unwrap())
            .iter()
            .all(|v| v.is_nan())
    );
    let y = Array::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    assert_eq!(f64s(&var(&y, &[], false, 2).unwrap()), [f64::INFINITY]);
    let y = Array::from_slice(&[1.0f32, 1.0], &[2]).unwrap();
    assert!(f64s(&var(&y, &[], false, 2).unwrap())[0].is_nan());
}

#[test]
fn logsumexp_matches_reference() {
    sweep_floats("logsumexp", &|x, a, k| logsumexp(x, a, k), &ref_lse);
}

#[test]
fn softmax_matches_reference() {
    let mut rng = Rng(11);
    for dtype in FLOATISH {
        for &shape in SHAPES.iter().chain(EMPTY_SHAPES) {
            let vals = values(&mut rng, shape.iter().product(), dtype, Values::General);
            for lay in LAYS {
                let (x, logical) = build(&vals, shape, dtype, lay);
                for axes in axes_cases(shape.len()) {
                    let what = format!("softmax {dtype} {shape:?} {lay:?} {axes:?}");
                    let y = softmax(&x, &axes).unwrap();
                    assert_eq!(y.dtype(), floated(dtype), "{what}");
                    assert_eq!(y.shape(), shape, "{what}");
                    let want = ref_softmax(&logical, shape, &norm_axes(&axes, shape.len()));
                    check(&f64s(&y), &want, tol(floated(dtype)).max(1e-6), &what);
                }
            }
        }
    }
}
