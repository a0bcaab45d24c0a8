//! Every activation against PyTorch (float64 references on float32 inputs): the values, and
//! the gradients of `sum(f(x) · w)` through nuvec-core's reverse mode; and the layers
//! against their functions.

mod common;

use common::{array, close, close_tol, parse, weighted_sum};
use nuvec_core::{Array, grad};
use nuvec_nn::Forward;
use nuvec_nn::activations as act;

const FIXTURE: &str = include_str!("fixtures/activations.json");

type Act = fn(&Array) -> nuvec_nn::Result<Array>;

fn table() -> Vec<(&'static str, Act)> {
    vec![
        ("relu", act::relu),
        ("relu6", act::relu6),
        ("leaky_relu", |x| act::leaky_relu(x, 0.01)),
        ("elu", |x| act::elu(x, 1.0)),
        ("selu", act::selu),
        ("celu", |x| act::celu(x, 1.5)),
        ("gelu", act::gelu),
        ("gelu_approx", act::gelu_approx),
        ("gelu_fast_approx", act::gelu_fast_approx),
        ("silu", act::silu),
        ("softplus", act::softplus),
        ("softsign", act::softsign),
        ("mish", act::mish),
        ("hardswish", act::hardswish),
        ("hard_tanh", |x| act::hard_tanh(x, -1.0, 1.0)),
        ("hard_shrink", |x| act::hard_shrink(x, 0.5)),
        ("soft_shrink", |x| act::soft_shrink(x, 0.5)),
        ("sigmoid", act::sigmoid),
        ("tanh", act::tanh),
        ("log_sigmoid", act::log_sigmoid),
        ("log_softmax", |x| act::log_softmax(x, -1)),
        ("softmax", |x| act::softmax(x, -1)),
        ("softmin", |x| act::softmin(x, -1)),
        ("glu", |x| act::glu(x, -1)),
    ]
}

#[test]
fn activations_match_pytorch() {
    let fx = parse(FIXTURE);
    let x = array(&fx["x"]);
    for (name, f) in table() {
        let case = &fx["cases"][name];
        let y = f(&x).unwrap();
        close(name, &y, &case["y"]);
        let w = array(&case["w"]);
        let g = grad(
            |xs: &[Array]| Ok(vec![weighted_sum(&f(&xs[0])?, &w)?]),
            &[0],
        )(std::slice::from_ref(&x))
        .unwrap();
        close_tol(
            &format!("{name} gradient"),
            &g[0],
            &case["grad"],
            1e-5,
            1e-5,
        );
    }
}

#[test]
fn prelu_matches_pytorch() {
    let fx = parse(FIXTURE);
    let (x, alpha) = (array(&fx["x"]), array(&fx["prelu_alpha"]));
    let case = &fx["cases"]["prelu"];
    close("prelu", &act::prelu(&x, &alpha).unwrap(), &case["y"]);
    let w = array(&case["w"]);
    let g = grad(
        |xs: &[Array]| Ok(vec![weighted_sum(&act::prelu(&xs[0], &alpha)?, &w)?]),
        &[0],
    )(std::slice::from_ref(&x))
    .unwrap();
    close("prelu gradient", &g[0], &case["grad"]);
    let layer = nuvec_nn::PReLU::new(6, 0.25).unwrap();
    let want = act::prelu(&x, &Array::full(&[6], 0.25f32).unwrap()).unwrap();
    assert_eq!(
        layer.forward(&x).unwrap().to_vec::<f32>().unwrap(),
        want.to_vec::<f32>().unwrap()
    );
}

#[test]
fn swiglu_matches_pytorch() {
    let fx = parse(FIXTURE);
    let s = &fx["swiglu"];
    let (gate, up, w) = (array(&s["gate"]), array(&s["up"]), array(&s["w"]));
    close("swiglu", &act::swiglu(&gate, &up).unwrap(), &s["y"]);
    let g = grad(
        |xs: &[Array]| Ok(vec![weighted_sum(&act::swiglu(&xs[0], &xs[1])?, &w)?]),
        &[0, 1],
    )(&[gate, up])
    .unwrap();
    close("swiglu d/dgate", &g[0], &s["grad_gate"]);
    close("swiglu d/dup", &g[1], &s["grad_up"]);
}

/// The direct formulas, element by element in float64.
#[test]
fn activations_match_formulas() {
    let xs = [-3.5f32, -1.0, -0.25, 0.0, 0.3, 1.0, 2.5, 7.0];
    let x = Array::from_slice(&xs, &[8]).unwrap();
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    let erf = |v: f64| {
        // Abramowitz-Stegun 7.1.26 is too coarse; integrate instead (Simpson, 2000 steps).
        let n = 2000;
        let h = v / n as f64;
        let f = |t: f64| (-t * t).exp();
        let mut s = f(0.0) + f(v);
        for i in 1..n {
            s += f(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
        }
        s * h / 3.0 * 2.0 / std::f64::consts::PI.sqrt()
    };
    type Formula = Box<dyn Fn(f64) -> f64>;
    let cases: Vec<(&str, Act, Formula)> = vec![
        ("relu", act::relu, Box::new(|v| v.max(0.0))),
        ("relu6", act::relu6, Box::new(|v| v.clamp(0.0, 6.0))),
        ("silu", act::silu, Box::new(move |v| v * sig(v))),
        (
            "gelu",
            act::gelu,
            Box::new(move |v| 0.5 * v * (1.0 + erf(v / 2f64.sqrt()))),
        ),
        (
            "gelu_fast_approx",
            act::gelu_fast_approx,
            Box::new(move |v| v * sig(1.702 * v)),
        ),
        (
            "softplus",
            act::softplus,
            Box::new(|v| (1.0 + v.exp()).ln()),
        ),
        ("softsign", act::softsign, Box::new(|v| v / (1.0 + v.abs()))),
        (
            "mish",
            act::mish,
            Box::new(|v| v * (1.0 + v.exp()).ln().tanh()),
        ),
        (
            "hardswish",
            act::hardswish,
            Box::new(|v| v * (v + 3.0).clamp(0.0, 6.0) / 6.0),
        ),
        (
            "log_sigmoid",
            act::log_sigmoid,
            Box::new(move |v| sig(v).ln()),
        ),
        (
            "selu",
            act::selu,
            Box::new(|v| {
                1.050_700_987_355_480_5
                    * if v > 0.0 {
                        v
                    } else {
                        1.673_263_242_354_377_3 * (v.exp() - 1.0)
                    }
            }),
        ),
        (
            "step",
            |x| act::step(x, 0.0),
            Box::new(|v| if v > 0.0 { 1.0 } else { 0.0 }),
        ),
        (
            "elu(0.5)",
            |x| act::elu(x, 0.5),
            Box::new(|v| if v > 0.0 { v } else { 0.5 * (v.exp() - 1.0) }),
        ),
        (
            "leaky_relu(0.2)",
            |x| act::leaky_relu(x, 0.2),
            Box::new(|v| if v > 0.0 { v } else { 0.2 * v }),
        ),
    ];
    for (name, f, formula) in cases {
        let want: Vec<f64> = xs.iter().map(|&v| formula(f64::from(v))).collect();
        common::close_values(
            name,
            &f(&x).unwrap().to_vec::<f32>().unwrap(),
            &want,
            1e-5,
            1e-6,
        );
    }
}

#[test]
fn layers_apply_their_functions() {
    use nuvec_nn::*;
    let x = Array::from_slice(&[-2.0f32, -0.5, 0.0, 0.7, 3.0, 8.0], &[2, 3]).unwrap();
    let v = |a: nuvec_nn::Result<Array>| a.unwrap().to_vec::<f32>().unwrap();
    let layers: Vec<(Box<dyn Layer>, Act)> = vec![
        (Box::new(ReLU), act::relu),
        (Box::new(ReLU6), act::relu6),
        (Box::new(SELU), act::selu),
        (Box::new(SiLU), act::silu),
        (Box::new(Softplus), act::softplus),
        (Box::new(Softsign), act::softsign),
        (Box::new(Mish), act::mish),
        (Box::new(Hardswish), act::hardswish),
        (Box::new(Sigmoid), act::sigmoid),
        (Box::new(LogSigmoid), act::log_sigmoid),
        (Box::new(Tanh), act::tanh),
        (Box::new(LeakyReLU::default()), |x| act::leaky_relu(x, 0.01)),
        (Box::new(ELU::default()), |x| act::elu(x, 1.0)),
        (Box::new(CELU::new(2.0)), |x| act::celu(x, 2.0)),
        (Box::new(HardTanh::default()), |x| {
            act::hard_tanh(x, -1.0, 1.0)
        }),
        (Box::new(HardShrink::default()), |x| {
            act::hard_shrink(x, 0.5)
        }),
        (Box::new(SoftShrink::default()), |x| {
            act::soft_shrink(x, 0.5)
        }),
        (Box::new(Step::default()), |x| act::step(x, 0.0)),
        (Box::new(Softmax::default()), |x| act::softmax(x, -1)),
        (Box::new(LogSoftmax::default()), |x| act::log_softmax(x, -1)),
        (Box::new(Softmin::default()), |x| act::softmin(x, -1)),
        (Box::new(GELU::default()), act::gelu),
        (Box::new(GELU::new(GeluApprox::Tanh)), act::gelu_approx),
        (Box::new(GELU::new(GeluApprox::Fast)), act::gelu_fast_approx),
    ];
    for (layer, f) in layers {
        assert_eq!(v(layer.forward(&x)), v(f(&x)));
    }
    let glu = GLU::default()
        .forward(&x.reshape(&[3, 2]).unwrap())
        .unwrap();
    assert_eq!(glu.shape(), [3, 1]);
    assert!(act::glu(&Array::from_slice(&[1.0f32; 3], &[3]).unwrap(), -1).is_err());
}
