//! Each optimizer's updates over 10 steps against PyTorch's on the same parameters and
//! gradients, or, where PyTorch's semantics are not MLX's (SGD with dampening, Adam without
//! bias correction, Lion, Adafactor), against MLX's formula in float64 NumPy (each fixture
//! case names its source); the state's export and restore; schedules; gradient clipping.

mod common;

use common::{array, close_tol, parse};
use nuvec_core::Array;
use nuvec_nn::optim::*;
use nuvec_nn::{Linear, Module, Params};
use serde_json::Value;

const FIXTURE: &str = include_str!("fixtures/optim.json");

fn tree(arrays: &Value) -> Params {
    [
        ("w".to_string(), array(&arrays[0])),
        ("b".to_string(), array(&arrays[1])),
    ]
    .into()
}

fn check_steps<O: Optimizer>(name: &str, mut opt: O, from: usize, mut params: Params) -> O {
    let fx = parse(FIXTURE);
    let case = &fx["cases"][name];
    let history = case["history"].as_array().unwrap();
    for step in from..history.len() {
        let grads = tree(&fx["grads"][step]);
        params = opt.apply_gradients(&grads, &params).unwrap();
        let want = &history[step];
        let what = format!("{name} ({}) step {}", case["source"], step + 1);
        close_tol(&format!("{what} w"), &params["w"], &want[0], 1e-5, 1e-6);
        close_tol(&format!("{what} b"), &params["b"], &want[1], 1e-5, 1e-6);
    }
    assert_eq!(opt.step(), history.len());
    opt
}

fn start() -> Params {
    tree(&parse(FIXTURE)["params"])
}

#[test]
fn sgd_matches_pytorch() {
    check_steps("sgd", Sgd::new(0.1), 0, start());
    check_steps(
        "sgd_momentum",
        Sgd::new(0.1).momentum(0.9).weight_decay(0.01),
        0,
        start(),
    );
    check_steps(
        "sgd_nesterov",
        Sgd::new(0.1).momentum(0.9).nesterov(true),
        0,
        start(),
    );
    check_steps(
        "sgd_dampening",
        Sgd::new(0.1).momentum(0.9).dampening(0.5),
        0,
        start(),
    );
    let mut bad = Sgd::new(0.1).nesterov(true);
    assert!(bad.apply_gradients(&start(), &start()).is_err());
}

#[test]
fn adam_matches_pytorch() {
    check_steps(
        "adam_bias_correction",
        Adam::new(0.01).bias_correction(true),
        0,
        start(),
    );
    check_steps("adam", Adam::new(0.01), 0, start());
    check_steps(
        "adamw",
        AdamW::new(0.01).weight_decay(0.1).bias_correction(true),
        0,
        start(),
    );
}

#[test]
fn lion_and_adafactor_match_mlx_formulas() {
    check_steps("lion", Lion::new(0.01).weight_decay(0.1), 0, start());
    check_steps("adafactor", Adafactor::new(), 0, start());
    check_steps(
        "adafactor_lr",
        Adafactor::new()
            .learning_rate(0.01)
            .relative_step(false)
            .beta_1(0.9)
            .weight_decay(0.01),
        0,
        start(),
    );
    let mut no_lr = Adafactor::new().relative_step(false);
    assert!(no_lr.apply_gradients(&start(), &start()).is_err());
}

/// Five steps, the state exported and restored into a fresh optimizer, five more: the same
/// trajectory.
#[test]
fn state_round_trips() {
    fn halfway<O: Optimizer>(opt: &mut O) -> Params {
        let fx = parse(FIXTURE);
        let mut params = start();
        for step in 0..5 {
            params = opt
                .apply_gradients(&tree(&fx["grads"][step]), &params)
                .unwrap();
        }
        params
    }
    let mut adam = AdamW::new(0.01).weight_decay(0.1).bias_correction(true);
    let params = halfway(&mut adam);
    let state = adam.state();
    let mut names: Vec<&String> = state.keys().collect();
    names.sort();
    assert_eq!(names, ["b.m", "b.v", "learning_rate", "step", "w.m", "w.v"]);
    assert_eq!(state["step"].item::<u64>().unwrap(), 5);
    let mut fresh = AdamW::new(0.5).weight_decay(0.1).bias_correction(true);
    fresh.set_state(&state).unwrap();
    // The stored rate (float32, as MLX's) replaces the constant.
    assert_eq!(fresh.learning_rate(), f64::from(0.01f32));
    let mut same = AdamW::new(0.01);
    same.set_state(&state).unwrap();
    // ... and leaves one it rounds from as it is.
    assert_eq!(same.learning_rate(), 0.01);
    check_steps("adamw", fresh, 5, params);

    let mut ada = Adafactor::new();
    let params = halfway(&mut ada);
    let state = ada.state();
    assert!(state.contains_key("w.exp_avg_sq_row") && state.contains_key("b.exp_avg_sq"));
    let mut fresh = Adafactor::new();
    fresh.set_state(&state).unwrap();
    check_steps("adafactor", fresh, 5, params);

    let mut bad = state.clone();
    bad.insert("w.nonsense".into(), Array::scalar(0.0f32));
    assert!(Adafactor::new().set_state(&bad).is_err());
    let mut no_step = state;
    no_step.remove("step");
    assert!(Adafactor::new().set_state(&no_step).is_err());
}

#[test]
fn update_applies_to_a_module() {
    let mut layer = Linear::new(2, 1, true).unwrap();
    let before = layer.parameters();
    let grads: Params = before
        .iter()
        .map(|(k, v)| (k.clone(), nuvec_core::ones_like(v).unwrap()))
        .collect();
    let mut opt = Sgd::new(0.5);
    opt.update(&mut layer, &grads).unwrap();
    for (k, v) in layer.parameters() {
        let (a, b) = (
            v.to_vec::<f32>().unwrap(),
            before[&k].to_vec::<f32>().unwrap(),
        );
        for (x, y) in a.iter().zip(&b) {
            assert!((x - (y - 0.5)).abs() < 1e-6);
        }
    }
    let mut fresh = Adam::new(0.1);
    fresh.init(&layer.trainable_parameters()).unwrap();
    let mut keys: Vec<String> = fresh.state().into_keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "bias.m",
            "bias.v",
            "learning_rate",
            "step",
            "weight.m",
            "weight.v"
        ]
    );
    let mut unknown = grads.clone();
    unknown.insert("nope".into(), Array::scalar(1.0f32));
    assert!(opt.update(&mut layer, &unknown).is_err());
}

#[test]
fn schedules_match_their_formulas() {
    let pi = std::f64::consts::PI;
    let c = cosine_decay(0.1, 10, 0.01);
    for s in [0usize, 3, 10, 15] {
        let k = s.min(10) as f64;
        let want = 0.01 + 0.5 * (1.0 + (pi * k / 10.0).cos()) * 0.09;
        assert!((c.at(s) - want).abs() < 1e-15, "cosine at {s}");
    }
    let e = exponential_decay(0.1, 0.9);
    assert!((e.at(3) - 0.1 * 0.9f64.powi(3)).abs() < 1e-15);
    let st = step_decay(0.1, 0.5, 4);
    assert_eq!(
        [st.at(0), st.at(3), st.at(4), st.at(9)],
        [0.1, 0.1, 0.05, 0.025]
    );
    let l = linear_schedule(0.0, 1.0, 4);
    assert_eq!([l.at(0), l.at(1), l.at(4), l.at(8)], [0.0, 0.25, 1.0, 1.0]);
    let j = join_schedules(
        vec![linear_schedule(0.0, 0.1, 5), exponential_decay(0.1, 0.5)],
        &[5],
    )
    .unwrap();
    assert!((j.at(2) - 0.04).abs() < 1e-15);
    assert!((j.at(5) - 0.1).abs() < 1e-15);
    assert!((j.at(7) - 0.025).abs() < 1e-15);
    assert!(join_schedules(vec![l.clone()], &[3]).is_err());
    assert!(join_schedules(vec![], &[]).is_err());

    // The optimizer reads the schedule at the step count before each update: 0, 1, 2.
    let mut opt = Sgd::new(linear_schedule(1.0, 0.0, 4));
    let mut p: Params = [("x".to_string(), Array::scalar(0.0f32))].into();
    let g: Params = [("x".to_string(), Array::scalar(1.0f32))].into();
    let mut rates = Vec::new();
    for _ in 0..3 {
        p = opt.apply_gradients(&g, &p).unwrap();
        rates.push(opt.learning_rate());
    }
    assert_eq!(rates, [1.0, 0.75, 0.5]);
    assert_eq!(p["x"].item::<f32>().unwrap(), -2.25);
}

#[test]
fn clip_grad_norm_matches_pytorch() {
    let fx = parse(FIXTURE);
    let c = &fx["clip"];
    let grads = tree(&c["grads"]);
    let (clipped, norm) = clip_grad_norm(&grads, c["max_norm"].as_f64().unwrap()).unwrap();
    close_tol("norm", &norm, &c["norm"], 1e-6, 0.0);
    close_tol("w", &clipped["w"], &c["clipped"][0], 1e-6, 1e-7);
    close_tol("b", &clipped["b"], &c["clipped"][1], 1e-6, 1e-7);
    // Below the bound, unchanged.
    let (same, _) = clip_grad_norm(&grads, 1e3).unwrap();
    assert_eq!(
        same["w"].to_vec::<f32>().unwrap(),
        grads["w"].to_vec::<f32>().unwrap()
    );
}
