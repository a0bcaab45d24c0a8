//! The CUDA backend against the CPU: every result computed on `Device::gpu(0)` equals the
//! CPU's on random inputs in several layouts and dtypes. Each test skips itself, saying so,
//! where no CUDA device answers.

mod common;

use common::Rng;
use common::gpu::{both, gpu_available, layouts, on, random, tol};
use nuvec_core::*;

#[test]
fn unary_functions_match_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(1);
    type U = fn(&Array) -> Result<Array>;
    let ops: &[(&str, U, (f64, f64))] = &[
        ("abs", |x| abs(x), (-2.0, 2.0)),
        ("negative", |x| negative(x), (-2.0, 2.0)),
        ("sign", |x| sign(x), (-2.0, 2.0)),
        ("square", |x| square(x), (-2.0, 2.0)),
        ("sqrt", |x| sqrt(x), (0.1, 4.0)),
        ("rsqrt", |x| rsqrt(x), (0.1, 4.0)),
        ("reciprocal", |x| reciprocal(x), (0.5, 4.0)),
        ("exp", |x| exp(x), (-3.0, 3.0)),
        ("expm1", |x| expm1(x), (-1.0, 1.0)),
        ("log", |x| log(x), (0.1, 4.0)),
        ("log1p", |x| log1p(x), (0.1, 4.0)),
        ("log2", |x| log2(x), (0.1, 4.0)),
        ("log10", |x| log10(x), (0.1, 4.0)),
        ("sin", |x| sin(x), (-3.0, 3.0)),
        ("cos", |x| cos(x), (-3.0, 3.0)),
        ("tan", |x| tan(x), (-1.0, 1.0)),
        ("arcsin", |x| arcsin(x), (-0.9, 0.9)),
        ("arccos", |x| arccos(x), (-0.9, 0.9)),
        ("arctan", |x| arctan(x), (-3.0, 3.0)),
        ("sinh", |x| sinh(x), (-2.0, 2.0)),
        ("cosh", |x| cosh(x), (-2.0, 2.0)),
        ("tanh", |x| tanh(x), (-2.0, 2.0)),
        ("arcsinh", |x| arcsinh(x), (-2.0, 2.0)),
        ("arccosh", |x| arccosh(x), (1.1, 3.0)),
        ("arctanh", |x| arctanh(x), (-0.9, 0.9)),
        ("sigmoid", |x| sigmoid(x), (-4.0, 4.0)),
        ("erf", |x| erf(x), (-2.0, 2.0)),
        ("erfinv", |x| erfinv(x), (-0.9, 0.9)),
        ("floor", |x| floor(x), (-3.0, 3.0)),
        ("ceil", |x| ceil(x), (-3.0, 3.0)),
        ("round", |x| round(x, 0), (-3.0, 3.0)),
        ("isnan", |x| isnan(x), (-3.0, 3.0)),
        ("isfinite", |x| isfinite(x), (-3.0, 3.0)),
        ("logical_not", |x| logical_not(x), (-1.0, 1.0)),
    ];
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        for &(name, f, (lo, hi)) in ops {
            let x = random(&mut rng, &[33, 20], lo, hi, dtype);
            for (layout, xl) in layouts(&x, &[-2]) {
                both(
                    &format!("{name} {dtype} {layout}"),
                    tol(dtype) * 4.0,
                    || Ok(vec![f(&xl)?]),
                );
            }
        }
    }
}

#[test]
fn binary_operations_and_where_match_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(2);
    type B = fn(&Array, &Array) -> Result<Array>;
    let float_ops: &[(&str, B)] = &[
        ("add", |a, b| add(a, b)),
        ("subtract", |a, b| subtract(a, b)),
        ("multiply", |a, b| multiply(a, b)),
        ("divide", |a, b| divide(a, b)),
        ("floor_divide", |a, b| floor_divide(a, b)),
        ("remainder", |a, b| remainder(a, b)),
        ("power", |a, b| power(&abs(a)?, b)),
        ("maximum", |a, b| maximum(a, b)),
        ("minimum", |a, b| minimum(a, b)),
        ("arctan2", |a, b| arctan2(a, b)),
        ("logaddexp", |a, b| logaddexp(a, b)),
        ("equal", |a, b| equal(a, &floor(b)?)),
        ("less", |a, b| less(a, b)),
        ("greater_equal", |a, b| greater_equal(a, b)),
        ("logical_and", |a, b| logical_and(a, b)),
        ("where", |a, b| where_(&less(a, b)?, a, b)),
    ];
    for dtype in [DType::F32, DType::BF16, DType::F64] {
        for &(name, f) in float_ops {
            let a = random(&mut rng, &[17, 40], -3.0, 3.0, dtype);
            let b = random(&mut rng, &[17, 40], 0.5, 3.0, dtype);
            for (layout, al) in layouts(&a, &[-2]) {
                let bl = if al.size() == 0 {
                    al.clone()
                } else {
                    b.clone()
                };
                both(
                    &format!("{name} {dtype} {layout}"),
                    tol(dtype) * 4.0,
                    || Ok(vec![f(&al, &bl)?]),
                );
            }
            // A scalar and a row, broadcast.
            let row = random(&mut rng, &[40], 0.5, 3.0, dtype);
            both(&format!("{name} {dtype} row"), tol(dtype) * 4.0, || {
                Ok(vec![
                    f(&a, &row)?,
                    f(&a, &Array::scalar(1.5f32).astype(dtype)?)?,
                ])
            });
        }
    }
    // Integers wrap; bools are logic.
    let int_ops: &[(&str, B)] = &[
        ("add", |a, b| add(a, b)),
        ("subtract", |a, b| subtract(a, b)),
        ("multiply", |a, b| multiply(a, b)),
        ("maximum", |a, b| maximum(a, b)),
        ("bitwise_xor", |a, b| bitwise_xor(a, b)),
        ("not_equal", |a, b| not_equal(a, b)),
        ("floor_divide", |a, b| floor_divide(a, b)),
    ];
    for dtype in [DType::I32, DType::U8, DType::I64, DType::I8] {
        for &(name, f) in int_ops {
            let a = random(&mut rng, &[9, 31], -100.0, 100.0, dtype);
            let b = random(&mut rng, &[9, 31], 1.0, 90.0, dtype);
            both(&format!("{name} {dtype}"), 0.0, || {
                Ok(vec![f(&a, &b)?, f(&a.t()?, &b.t()?)?])
            });
        }
    }
    let p = greater(random(&mut rng, &[50], -1.0, 1.0, DType::F32), 0.0).unwrap();
    let q = greater(random(&mut rng, &[50], -1.0, 1.0, DType::F32), 0.0).unwrap();
    both("bool logic", 0.0, || {
        Ok(vec![
            add(&p, &q)?,
            multiply(&p, &q)?,
            logical_or(&p, &q)?,
            logical_not(&p)?,
        ])
    });
}

#[test]
fn casts_and_copies_match_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(3);
    let all = [
        DType::Bool,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];
    for &from in &all {
        let x = random(&mut rng, &[11, 13], -300.0, 300.0, from);
        for &to in &all {
            for (layout, xl) in layouts(&x, &[-2]) {
                both(&format!("{from} -> {to} {layout}"), 0.0, || {
                    Ok(vec![xl.astype(to)?])
                });
            }
        }
    }
    // Out-of-range floats wrap like the CPU's casts.
    let wide = Array::from_slice(&[3e9f64, -3e9, 1e20, f64::NAN, 255.9, -0.5], &[6]).unwrap();
    for to in [DType::U8, DType::I32, DType::U32, DType::I64] {
        both(&format!("wide f64 -> {to}"), 0.0, || {
            Ok(vec![wide.astype(to)?])
        });
    }
    // Shape views and copies: reshape of a transpose copies, slices and broadcasts do not.
    let x = random(&mut rng, &[6, 8], -1.0, 1.0, DType::F32);
    both("shape views", 0.0, || {
        let t = x.t()?;
        Ok(vec![
            t.reshape(&[-1])?,
            contiguous(&t)?,
            copy(&x)?,
            slice(&t, &[SliceArg::new(Some(7), None, -3), SliceArg::full()])?,
            expand_dims(&x, 1)?,
            flip(&x, &[1])?,
        ])
    });
}

#[test]
fn ops_without_kernels_run_and_agree() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(4);
    let x = random(&mut rng, &[8, 16], -1.0, 1.0, DType::F32);
    let w = random(&mut rng, &[16, 4], -1.0, 1.0, DType::F32);
    both("mixed graph", 1e-5, || {
        let h = matmul(&exp(&x)?, &w)?;
        Ok(vec![
            sum(&h, &[-1], false)?,
            softmax(&h, &[-1])?,
            sort(&x, Some(-1))?,
            concatenate(&[x.clone(), x.clone()], 0)?,
        ])
    });
    // Gradients computed on the GPU equal the CPU's.
    both("grad", 1e-5, || {
        let f = |v: &[Array]| Ok(vec![sum(&tanh(&matmul(&v[0], &w)?)?, &[], false)?]);
        grad(f, &[0])(std::slice::from_ref(&x))
    });
}

#[test]
fn gpu_values_are_readable_from_another_thread() {
    if !gpu_available() {
        return;
    }
    let y = on(Device::gpu(0), || {
        let x = Array::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
        let y = multiply(&x, 2.0).unwrap();
        async_eval(std::slice::from_ref(&y)).unwrap();
        y
    });
    let got = std::thread::spawn(move || y.to_vec::<f32>().unwrap())
        .join()
        .unwrap();
    assert_eq!(got, [2.0, 4.0, 6.0]);
}

#[test]
fn a_missing_device_is_an_error() {
    let a = Array::scalar(1.0f32);
    assert!(on(Device::gpu(1000), || (&a + &a).eval()).is_err());
}
