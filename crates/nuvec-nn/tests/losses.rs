//! Every loss against PyTorch (float64 references on float32 inputs), each reduction, and
//! against the direct formula; bad input is an error.

mod common;

use common::{array, close, close_values, int_array, parse};
use nuvec_core::{Array, grad};
use nuvec_nn::losses::*;

const FIXTURE: &str = include_str!("fixtures/losses.json");

#[test]
fn cross_entropy_matches_pytorch() {
    let fx = parse(FIXTURE);
    let c = &fx["cross_entropy"];
    let (logits, targets) = (array(&c["logits"]), int_array(&c["targets"]));
    close(
        "none",
        &cross_entropy(&logits, &targets, Reduction::None).unwrap(),
        &c["none"],
    );
    let smoothed = CrossEntropy {
        label_smoothing: 0.1,
        ..CrossEntropy::default()
    };
    close(
        "smoothed",
        &smoothed.loss(&logits, &targets, None).unwrap(),
        &c["smoothed"],
    );
    let weighted = CrossEntropy {
        reduction: Reduction::Sum,
        ..CrossEntropy::default()
    };
    let w = array(&c["weights"]);
    close(
        "weighted sum",
        &weighted.loss(&logits, &targets, Some(&w)).unwrap(),
        &c["weighted_sum"],
    );
    let ignoring = CrossEntropy {
        ignore_index: Some(-100),
        ..CrossEntropy::default()
    };
    let ignored = int_array(&c["ignored"]);
    close(
        "ignore none",
        &ignoring.loss(&logits, &ignored, None).unwrap(),
        &c["ignore_none"],
    );
    let ignoring_mean = CrossEntropy {
        reduction: Reduction::Mean,
        ..ignoring
    };
    close(
        "ignore mean",
        &ignoring_mean.loss(&logits, &ignored, None).unwrap(),
        &c["ignore_mean"],
    );
    let probs = array(&c["probs"]);
    close(
        "probability targets",
        &cross_entropy(&logits, &probs, Reduction::None).unwrap(),
        &c["probs_none"],
    );
    let smoothed_probs = CrossEntropy {
        label_smoothing: 0.2,
        ..CrossEntropy::default()
    };
    close(
        "smoothed probability targets",
        &smoothed_probs.loss(&logits, &probs, None).unwrap(),
        &c["probs_smoothed"],
    );
    // The class axis in the middle, as PyTorch's [N, C, d] (the unfused path).
    let axis1 = CrossEntropy {
        axis: 1,
        ..CrossEntropy::default()
    };
    close(
        "axis 1",
        &axis1
            .loss(&array(&c["logits3"]), &int_array(&c["targets3"]), None)
            .unwrap(),
        &c["axis1_none"],
    );
}

#[test]
fn cross_entropy_gradient_matches_pytorch() {
    let fx = parse(FIXTURE);
    let c = &fx["cross_entropy"];
    let (logits, targets) = (array(&c["logits"]), int_array(&c["targets"]));
    let ce = CrossEntropy {
        label_smoothing: 0.1,
        reduction: Reduction::Mean,
        ..CrossEntropy::default()
    };
    let f = |xs: &[Array]| Ok(vec![ce.loss(&xs[0], &targets, None)?]);
    let (v, g) = nuvec_core::value_and_grad(f, &[0])(std::slice::from_ref(&logits)).unwrap();
    close("smoothed mean", &v[0], &c["smoothed_mean"]);
    close("gradient", &g[0], &c["smoothed_mean_grad"]);
}

#[test]
fn cross_entropy_matches_its_formula() {
    // logsumexp − (1 − ε) · x[t] − ε · mean(x), by hand in float64.
    let x = [1.0f32, -2.0, 0.5, 3.0, 0.0, 0.25];
    let logits = Array::from_slice(&x, &[2, 3]).unwrap();
    let targets = Array::from_slice(&[2i32, 0], &[2]).unwrap();
    let eps = 0.25;
    let want: Vec<f64> = [(0usize, 2usize), (1, 0)]
        .iter()
        .map(|&(r, t)| {
            let row: Vec<f64> = x[3 * r..3 * r + 3].iter().map(|&v| f64::from(v)).collect();
            let lse = row.iter().map(|v| v.exp()).sum::<f64>().ln();
            let mean = row.iter().sum::<f64>() / 3.0;
            lse - (1.0 - eps) * row[t] - eps * mean
        })
        .collect();
    let ce = CrossEntropy {
        label_smoothing: eps as f32,
        ..CrossEntropy::default()
    };
    close_values(
        "formula",
        &ce.loss(&logits, &targets, None)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        &want,
        1e-6,
        1e-6,
    );
    // The same in float64 (which takes the unfused path).
    let l64 = ce
        .loss(
            &logits.astype(nuvec_core::DType::F64).unwrap(),
            &targets,
            None,
        )
        .unwrap();
    assert_eq!(l64.dtype(), nuvec_core::DType::F64);
    let got = l64.to_vec::<f64>().unwrap();
    assert!((got[0] - want[0]).abs() < 1e-12 && (got[1] - want[1]).abs() < 1e-12);
}

#[test]
fn cross_entropy_rejects_bad_targets() {
    let logits = Array::from_slice(&[0.0f32; 6], &[2, 3]).unwrap();
    let wrong_shape = Array::from_slice(&[0i32; 3], &[3]).unwrap();
    assert!(cross_entropy(&logits, &wrong_shape, Reduction::None).is_err());
    let floats = Array::from_slice(&[0.0f32; 2], &[2]).unwrap();
    assert!(cross_entropy(&logits, &floats, Reduction::None).is_err());
    let probs = Array::from_slice(&[0.0f32; 6], &[2, 3]).unwrap();
    let ignoring = CrossEntropy {
        ignore_index: Some(-1),
        ..CrossEntropy::default()
    };
    assert!(ignoring.loss(&logits, &probs, None).is_err());
    let w = Array::from_slice(&[1.0f32; 3], &[3]).unwrap();
    let t = Array::from_slice(&[0i32, 1], &[2]).unwrap();
    assert!(CrossEntropy::default().loss(&logits, &t, Some(&w)).is_err());
    let too_smooth = CrossEntropy {
        label_smoothing: 1.0,
        ..CrossEntropy::default()
    };
    assert!(too_smooth.loss(&logits, &t, None).is_err());
}

#[test]
fn binary_cross_entropy_matches_pytorch() {
    let fx = parse(FIXTURE);
    let b = &fx["binary_cross_entropy"];
    let (x, t, p, w) = (
        array(&b["logits"]),
        array(&b["targets"]),
        array(&b["probs"]),
        array(&b["weights"]),
    );
    let bce = |i: &Array, w: Option<&Array>, logits: bool, r: Reduction| {
        binary_cross_entropy(i, &t, w, logits, r).unwrap()
    };
    close(
        "logits none",
        &bce(&x, None, true, Reduction::None),
        &b["logits_none"],
    );
    close(
        "logits mean",
        &bce(&x, None, true, Reduction::Mean),
        &b["logits_mean"],
    );
    close(
        "logits weighted sum",
        &bce(&x, Some(&w), true, Reduction::Sum),
        &b["logits_weighted_sum"],
    );
    close(
        "probs none",
        &bce(&p, None, false, Reduction::None),
        &b["probs_none"],
    );
    close(
        "probs mean",
        &bce(&p, None, false, Reduction::Mean),
        &b["probs_mean"],
    );
    // A probability of exactly 0 or 1 is clipped at log = −100, as in MLX and PyTorch.
    let edge = Array::from_slice(&[0.0f32, 1.0], &[2]).unwrap();
    let tt = Array::from_slice(&[1.0f32, 0.0], &[2]).unwrap();
    let l = binary_cross_entropy(&edge, &tt, None, false, Reduction::None).unwrap();
    assert_eq!(l.to_vec::<f32>().unwrap(), [100.0, 100.0]);
    assert!(binary_cross_entropy(&x, &edge, None, true, Reduction::Mean).is_err());
    let row = w.reshape(&[-1]).unwrap();
    assert!(binary_cross_entropy(&x, &t, Some(&row), true, Reduction::Mean).is_err());
}

#[test]
fn regression_losses_match_pytorch() {
    let fx = parse(FIXTURE);
    let r = &fx["regression"];
    let (p, t) = (array(&r["pred"]), array(&r["targ"]));
    close(
        "mse none",
        &mse_loss(&p, &t, Reduction::None).unwrap(),
        &r["mse_none"],
    );
    close(
        "mse mean",
        &mse_loss(&p, &t, Reduction::Mean).unwrap(),
        &r["mse_mean"],
    );
    close(
        "l1 sum",
        &l1_loss(&p, &t, Reduction::Sum).unwrap(),
        &r["l1_sum"],
    );
    close(
        "l1 mean",
        &l1_loss(&p, &t, Reduction::Mean).unwrap(),
        &r["l1_mean"],
    );
    close(
        "smooth l1 none",
        &smooth_l1_loss(&p, &t, 0.5, Reduction::None).unwrap(),
        &r["smooth_l1_none"],
    );
    close(
        "smooth l1 mean",
        &smooth_l1_loss(&p, &t, 0.5, Reduction::Mean).unwrap(),
        &r["smooth_l1_mean"],
    );
    close(
        "huber none",
        &huber_loss(&p, &t, 0.7, Reduction::None).unwrap(),
        &r["huber_none"],
    );
    close(
        "huber sum",
        &huber_loss(&p, &t, 0.7, Reduction::Sum).unwrap(),
        &r["huber_sum"],
    );
    let short = Array::from_slice(&[0.0f32; 5], &[5]).unwrap();
    for f in [mse_loss, l1_loss] {
        assert!(f(&p, &short, Reduction::Mean).is_err());
    }
}

#[test]
fn regression_losses_match_formulas() {
    let (pv, tv) = ([0.0f32, 1.5, -2.0, 0.2], [0.1f32, -1.0, -2.0, 1.0]);
    let (p, t) = (
        Array::from_slice(&pv, &[4]).unwrap(),
        Array::from_slice(&tv, &[4]).unwrap(),
    );
    let d: Vec<f64> = pv
        .iter()
        .zip(&tv)
        .map(|(&a, &b)| f64::from(a) - f64::from(b))
        .collect();
    let v = |a: Array| a.to_vec::<f32>().unwrap();
    let smooth: Vec<f64> = d
        .iter()
        .map(|e| {
            let e = e.abs();
            if e < 1.0 { 0.5 * e * e } else { e - 0.5 }
        })
        .collect();
    close_values(
        "smooth l1",
        &v(smooth_l1_loss(&p, &t, 1.0, Reduction::None).unwrap()),
        &smooth,
        1e-6,
        1e-7,
    );
    let huber: Vec<f64> = d
        .iter()
        .map(|e| {
            let e = e.abs();
            if e <= 2.0 {
                0.5 * e * e
            } else {
                2.0 * (e - 1.0)
            }
        })
        .collect();
    close_values(
        "huber",
        &v(huber_loss(&p, &t, 2.0, Reduction::None).unwrap()),
        &huber,
        1e-6,
        1e-7,
    );
    let mse = d.iter().map(|e| e * e).sum::<f64>() / 4.0;
    close_values(
        "mse",
        &v(mse_loss(&p, &t, Reduction::Mean).unwrap()),
        &[mse],
        1e-6,
        0.0,
    );
}

#[test]
fn divergences_match_pytorch() {
    let fx = parse(FIXTURE);
    let d = &fx["divergence"];
    let (i, t, c) = (
        array(&d["inputs"]),
        array(&d["targets"]),
        int_array(&d["classes"]),
    );
    close(
        "kl none",
        &kl_div_loss(&i, &t, -1, Reduction::None).unwrap(),
        &d["kl_none"],
    );
    close(
        "nll none",
        &nll_loss(&i, &c, -1, Reduction::None).unwrap(),
        &d["nll_none"],
    );
    close(
        "nll mean",
        &nll_loss(&i, &c, -1, Reduction::Mean).unwrap(),
        &d["nll_mean"],
    );
    assert!(nll_loss(&i, &t, -1, Reduction::None).is_err());
    // The gradient of the mean NLL: −1/N at each target.
    let g = grad(
        |xs: &[Array]| Ok(vec![nll_loss(&xs[0], &c, -1, Reduction::Mean)?]),
        &[0],
    )(std::slice::from_ref(&i))
    .unwrap();
    let classes = c.to_vec::<i32>().unwrap();
    let gv = g[0].to_vec::<f32>().unwrap();
    for (row, &k) in classes.iter().enumerate() {
        for col in 0..6 {
            let want = if col == k as usize { -0.25 } else { 0.0 };
            assert_eq!(gv[row * 6 + col], want);
        }
    }
}
