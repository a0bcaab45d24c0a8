//! The initialisers: shapes, types, bounds and moments, and MLX's fans.

use nuvec_core::{DType, random};
use nuvec_nn::init::{self, FanMode};

fn moments(v: &[f32]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
    let var = v
        .iter()
        .map(|&x| (f64::from(x) - mean).powi(2))
        .sum::<f64>()
        / n;
    (mean, var.sqrt())
}

#[test]
fn fans_follow_mlx() {
    assert_eq!(init::fans(&[8, 3]).unwrap(), (3, 8));
    // A convolution's [out, kh, kw, in]: the kernel multiplies both.
    assert_eq!(init::fans(&[8, 3, 2, 5]).unwrap(), (30, 48));
    assert!(init::fans(&[4]).is_err());
    assert!(init::glorot_uniform(&[4], 1.0, DType::F32).is_err());
}

#[test]
fn distributions_have_their_moments_and_bounds() {
    random::seed(3);
    let n = [200, 100];
    let c = init::constant(0.5, &n, DType::F16).unwrap();
    assert_eq!(c.dtype(), DType::F16);
    assert!(
        c.astype(DType::F32)
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .all(|&v| v == 0.5)
    );

    let u = init::uniform(-2.0, 1.0, &n, DType::F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert!(u.iter().all(|&v| (-2.0..1.0).contains(&v)));
    let (m, s) = moments(&u);
    assert!((m + 0.5).abs() < 0.03 && (s - 3.0 / 12f64.sqrt()).abs() < 0.03);

    let g = init::normal(1.0, 0.5, &n, DType::F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let (m, s) = moments(&g);
    assert!((m - 1.0).abs() < 0.01 && (s - 0.5).abs() < 0.01);

    // Glorot: fan_in 100, fan_out 200.
    let limit = 2.0 * (6.0f64 / 300.0).sqrt();
    let gu = init::glorot_uniform(&n, 2.0, DType::F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert!(gu.iter().all(|&v| f64::from(v.abs()) <= limit));
    let (_, s) = moments(&gu);
    assert!((s - limit / 3f64.sqrt()).abs() < 0.01);
    let gn = init::glorot_normal(&n, 1.0, DType::F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let (_, s) = moments(&gn);
    assert!((s - (2.0f64 / 300.0).sqrt()).abs() < 0.003);

    // He: by fan_in (100) or fan_out (200).
    let hn = init::he_normal(&n, FanMode::FanIn, 1.0, DType::F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let (_, s) = moments(&hn);
    assert!((s - 0.1).abs() < 0.003, "{s}");
    let hu = init::he_uniform(&n, FanMode::FanOut, 1.0, DType::F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let limit = (3.0f64 / 200.0).sqrt();
    assert!(hu.iter().all(|&v| f64::from(v.abs()) <= limit));
    let (_, s) = moments(&hu);
    assert!((s - limit / 3f64.sqrt()).abs() < 0.003);

    let eye = init::identity(3, DType::F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(eye, [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
}
