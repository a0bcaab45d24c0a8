//! Matrix products (and convolutions) on the GPU against the CPU: every result computed on
//! `Device::gpu(0)` equals the CPU's on random inputs, in several layouts and dtypes. `f32`
//! is compared tightly (the GPU computes it in full `f32`, TF32 off), `f16`/`bf16` to a
//! rounding or two of the output. Each test skips itself, saying so, where no CUDA device
//! answers.

mod common;

use common::Rng;
use common::gpu::{both, gpu_available, on, uniform};
use nuvec_core::*;

/// The tolerance for sums of up to a few hundred products of values in [-1, 1].
fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 1e-12,
        DType::F32 => 2e-5,
        DType::F16 => 2e-3,
        _ => 1.6e-2,
    }
}

const FLOATS: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];

/// `x` with its last two axes swapped, as a view of a row-major array of the swapped shape
/// (what cuBLAS gets as a transpose flag).
fn transposed_view(x: &Array) -> Array {
    let nd = x.ndim();
    let mut axes: Vec<usize> = (0..nd).collect();
    axes.swap(nd - 1, nd - 2);
    let stored = contiguous(&transpose(x, &axes).unwrap()).unwrap();
    transpose(&stored, &axes).unwrap()
}

fn s(start: Option<isize>, stop: Option<isize>, step: isize) -> SliceArg {
    SliceArg::new(start, stop, step)
}

#[test]
fn matmul_shapes_match_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(11);
    let shapes: &[(&str, &[usize], &[usize])] = &[
        ("square", &[64, 64], &[64, 64]),
        ("rectangular", &[33, 17], &[17, 45]),
        ("large", &[256, 384], &[384, 320]),
        ("vector-matrix", &[17], &[17, 45]),
        ("matrix-vector", &[33, 17], &[17]),
        ("vector-vector", &[17], &[17]),
        ("row times matrix", &[1, 96], &[96, 200]),
        ("k = 1", &[9, 1], &[1, 7]),
        ("batched", &[3, 5, 7], &[3, 7, 4]),
        ("broadcast batch", &[2, 1, 5, 7], &[3, 7, 4]),
        ("shared b (tall)", &[4, 6, 5, 7], &[7, 3]),
        ("shared a", &[5, 7], &[4, 7, 3]),
        ("matrix times a 4-D batch", &[4, 7], &[2, 4, 7, 3]),
        ("vector times a batch", &[7], &[2, 7, 3]),
        ("batch times a vector", &[2, 5, 7], &[7]),
        ("empty rows", &[0, 7], &[7, 4]),
        ("empty columns", &[5, 7], &[7, 0]),
        ("empty batch", &[0, 5, 7], &[0, 7, 4]),
        ("k = 0", &[5, 0], &[0, 4]),
        ("batched k = 0", &[2, 5, 0], &[2, 0, 4]),
    ];
    for dtype in FLOATS {
        for &(name, sa, sb) in shapes {
            let a = uniform(&mut rng, sa, dtype);
            let b = uniform(&mut rng, sb, dtype);
            both(&format!("matmul {name} {dtype}"), tol(dtype), || {
                Ok(vec![matmul(&a, &b)?])
            });
        }
    }
}

#[test]
fn matmul_views_match_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(12);
    for dtype in FLOATS {
        let a = uniform(&mut rng, &[3, 24, 40], dtype);
        let b = uniform(&mut rng, &[3, 40, 16], dtype);
        let t = tol(dtype);
        let name = |what: &str| format!("matmul {what} {dtype}");
        both(&name("a transposed"), t, || {
            Ok(vec![matmul(&transposed_view(&a), &b)?])
        });
        both(&name("b transposed"), t, || {
            Ok(vec![matmul(&a, &transposed_view(&b))?])
        });
        both(&name("both transposed"), t, || {
            Ok(vec![matmul(&transposed_view(&a), &transposed_view(&b))?])
        });
        // `x.T @ y` on plain matrices: the transposes of row-major arrays.
        let (p, q) = (
            uniform(&mut rng, &[40, 24], dtype),
            uniform(&mut rng, &[16, 40], dtype),
        );
        both(&name(".T operands"), t, || {
            Ok(vec![matmul(&p.t()?, &q.t()?)?])
        });
        // A column slice (larger leading dimension, at an offset) and a row slice.
        let wide = uniform(&mut rng, &[24, 50], dtype);
        both(&name("column slice"), t, || {
            let x = slice(&wide, &[SliceArg::full(), s(Some(3), Some(43), 1)])?;
            Ok(vec![matmul(&x, &b)?])
        });
        both(&name("row step 2"), t, || {
            let x = slice(&wide, &[s(None, None, 2), s(Some(0), Some(40), 1)])?;
            Ok(vec![matmul(&x, &b)?])
        });
        // Negative steps and steps in both axes: copied first.
        both(&name("reversed"), t, || {
            let x = slice(&a, &[SliceArg::full(), s(None, None, -1), SliceArg::full()])?;
            Ok(vec![matmul(&x, &b)?])
        });
        let tall = uniform(&mut rng, &[50, 51], dtype);
        both(&name("steps in both axes"), t, || {
            let x = slice(&wide, &[s(None, None, 2), s(Some(0), Some(80), 2)])?;
            let x = slice(&x, &[SliceArg::full(), s(Some(0), Some(25), 1)])?;
            let y = slice(&tall, &[s(None, None, 2), s(None, None, 3)])?;
            Ok(vec![matmul(&x, &y)?])
        });
        // A broadcast row: its rows repeat (row stride 0), copied first.
        let row = uniform(&mut rng, &[1, 40], dtype);
        both(&name("broadcast rows"), t, || {
            let x = broadcast_to(&row, &[24, 40])?;
            Ok(vec![matmul(&x, &b)?])
        });
        // Batch axes that do not merge: a loop over the outer axis, and, past 64 outer
        // calls, a copy.
        let a4 = uniform(&mut rng, &[3, 4, 6, 8], dtype);
        let b4 = uniform(&mut rng, &[3, 1, 8, 5], dtype);
        both(&name("outer loop"), t, || Ok(vec![matmul(&a4, &b4)?]));
        let a_many = uniform(&mut rng, &[70, 2, 3, 4], dtype);
        let b_many = uniform(&mut rng, &[70, 1, 4, 5], dtype);
        both(&name("many outer calls"), t, || {
            Ok(vec![matmul(&a_many, &b_many)?])
        });
        // A transposed batch whose matrices are transposed views too.
        both(&name("batch-major transpose"), t, || {
            let x = transpose(&random_like(&a), &[1, 0, 2])?; // [24, 3, 40] -> [3, 24, 40]
            Ok(vec![matmul(&x, &b)?])
        });
    }
}

/// A row-major `[24, 3, 40]` array whose axes 0 and 1 swapped give `a`'s shape.
fn random_like(a: &Array) -> Array {
    let mut rng = Rng::new(99);
    let sh = a.shape();
    uniform(&mut rng, &[sh[1], sh[0], sh[2]], a.dtype())
}

#[test]
fn addmm_matches_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(13);
    for dtype in FLOATS {
        let t = tol(dtype);
        let a = uniform(&mut rng, &[2, 20, 30], dtype);
        let b = uniform(&mut rng, &[2, 30, 12], dtype);
        let bias = uniform(&mut rng, &[12], dtype);
        let full = uniform(&mut rng, &[2, 20, 12], dtype);
        for (alpha, beta) in [(1.0, 1.0), (2.0, -0.5), (0.5, 0.0), (0.0, 3.0)] {
            let name = |what: &str| format!("addmm {what} {dtype} alpha {alpha} beta {beta}");
            both(&name("bias"), t, || {
                Ok(vec![addmm(&bias, &a, &b, alpha, beta)?])
            });
            both(&name("full c"), t, || {
                Ok(vec![addmm(&full, &a, &b, alpha, beta)?])
            });
            both(&name("transposed c and a"), t, || {
                let c = transposed_view(&full);
                Ok(vec![addmm(&c, &transposed_view(&a), &b, alpha, beta)?])
            });
        }
        // 2-D, vectors, and an empty inner axis (`beta · c`, on the CPU bridge).
        let m = uniform(&mut rng, &[7, 9], dtype);
        let v = uniform(&mut rng, &[9], dtype);
        let c7 = uniform(&mut rng, &[7], dtype);
        both(&format!("addmm matrix-vector {dtype}"), t, || {
            Ok(vec![addmm(&c7, &m, &v, 1.5, 0.5)?])
        });
        let e1 = uniform(&mut rng, &[7, 0], dtype);
        let e2 = uniform(&mut rng, &[0, 4], dtype);
        let c4 = uniform(&mut rng, &[7, 4], dtype);
        both(&format!("addmm k = 0 {dtype}"), t, || {
            Ok(vec![addmm(&c4, &e1, &e2, 1.0, 2.0)?])
        });
        let e3 = uniform(&mut rng, &[0, 9], dtype);
        let c0 = uniform(&mut rng, &[0, 4], dtype);
        let m94 = uniform(&mut rng, &[9, 4], dtype);
        both(&format!("addmm m = 0 {dtype}"), t, || {
            Ok(vec![addmm(&c0, &e3, &m94, 1.0, 1.0)?])
        });
    }
}

#[test]
fn matmul_results_are_exact_where_they_can_be() {
    if !gpu_available() {
        return;
    }
    // Small integers: every product and partial sum is exact in every float type, so the
    // GPU must give exactly the CPU's values (no tolerance).
    let mut rng = Rng::new(14);
    for dtype in FLOATS {
        let n = 48;
        let va: Vec<f64> = (0..n * n).map(|_| rng.below(5) as f64 - 2.0).collect();
        let vb: Vec<f64> = (0..n * n).map(|_| rng.below(5) as f64 - 2.0).collect();
        let a = Array::from_slice(&va, &[n, n])
            .unwrap()
            .astype(dtype)
            .unwrap();
        let b = Array::from_slice(&vb, &[n, n])
            .unwrap()
            .astype(dtype)
            .unwrap();
        both(&format!("exact {dtype}"), 0.0, || Ok(vec![matmul(&a, &b)?]));
    }
}

#[test]
fn bad_matmul_inputs_are_errors_on_the_gpu() {
    if !gpu_available() {
        return;
    }
    on(Device::gpu(0), || {
        let i = Array::from_slice(&[1i32, 2, 3, 4], &[2, 2]).unwrap();
        assert!(matmul(&i, &i).is_err());
        let a = Array::from_slice(&[1.0f32; 6], &[2, 3]).unwrap();
        assert!(matmul(&a, &a).is_err());
        let c = Array::from_slice(&[1.0f32; 3], &[3]).unwrap();
        assert!(addmm(&c, &a, &a.t().unwrap(), 1.0, 1.0).is_err());
    });
}

/// A random input and weight for a convolution, in `dtype`.
fn conv_pair(rng: &mut Rng, x: &[usize], w: &[usize], dtype: DType) -> (Array, Array) {
    (uniform(rng, x, dtype), uniform(rng, w, dtype))
}

#[test]
fn convolutions_match_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(15);
    for dtype in FLOATS {
        let t = tol(dtype);
        let name = |what: &str| format!("conv {what} {dtype}");
        // 1-D: plain, strided with padding and dilation, grouped.
        let (x, w) = conv_pair(&mut rng, &[2, 20, 6], &[8, 3, 6], dtype);
        both(&name("1d"), t, || Ok(vec![conv1d(&x, &w, 1, 0, 1, 1)?]));
        both(&name("1d stride 2 pad 1 dilation 2"), t, || {
            Ok(vec![conv1d(&x, &w, 2, 1, 2, 1)?])
        });
        let wg = uniform(&mut rng, &[8, 3, 3], dtype);
        both(&name("1d groups 2"), t, || {
            Ok(vec![conv1d(&x, &wg, 1, 2, 1, 2)?])
        });
        // 2-D: strides, padding and dilation per axis, groups, depthwise, 1×1 kernels.
        let (x, w) = conv_pair(&mut rng, &[2, 9, 11, 4], &[6, 3, 3, 4], dtype);
        both(&name("2d"), t, || Ok(vec![conv2d(&x, &w, 1, 0, 1, 1)?]));
        both(&name("2d stride (2, 1) pad 1 dilation (1, 2)"), t, || {
            Ok(vec![conv2d(&x, &w, (2, 1), 1, (1, 2), 1)?])
        });
        let wg = uniform(&mut rng, &[6, 3, 3, 2], dtype);
        both(&name("2d groups 2"), t, || {
            Ok(vec![conv2d(&x, &wg, 1, 1, 1, 2)?])
        });
        let wd = uniform(&mut rng, &[4, 3, 3, 1], dtype);
        both(&name("2d depthwise"), t, || {
            Ok(vec![conv2d(&x, &wd, 1, 1, 1, 4)?])
        });
        let w1 = uniform(&mut rng, &[5, 1, 1, 4], dtype);
        both(&name("2d 1x1 (in place)"), t, || {
            Ok(vec![conv2d(&x, &w1, 1, 0, 1, 1)?])
        });
        both(&name("2d 1x1 stride 2"), t, || {
            Ok(vec![conv2d(&x, &w1, 2, 0, 1, 1)?])
        });
        let w1g = uniform(&mut rng, &[6, 1, 1, 2], dtype);
        both(&name("2d 1x1 groups 2 (in place)"), t, || {
            Ok(vec![conv2d(&x, &w1g, 1, 0, 1, 2)?])
        });
        // Strided views: an input stored channels-first, a weight stored transposed.
        let stored = uniform(&mut rng, &[2, 4, 9, 11], dtype);
        both(&name("2d channels-first input"), t, || {
            let xv = transpose(&stored, &[0, 2, 3, 1])?;
            Ok(vec![
                conv2d(&xv, &w, 1, 1, 1, 1)?,
                conv2d(&xv, &w1, 1, 0, 1, 1)?,
            ])
        });
        let w_stored = uniform(&mut rng, &[4, 3, 3, 6], dtype);
        both(&name("2d transposed weight"), t, || {
            let wv = transpose(&w_stored, &[3, 1, 2, 0])?;
            Ok(vec![conv2d(&x, &wv, 1, 1, 1, 1)?])
        });
        both(&name("2d reversed input"), t, || {
            let xv = slice(&x, &[SliceArg::full(), s(None, None, -1)])?;
            Ok(vec![conv2d(&xv, &w, 1, 1, 1, 1)?])
        });
        // 3-D.
        let (x3, w3) = conv_pair(&mut rng, &[1, 5, 6, 7, 3], &[4, 2, 3, 2, 3], dtype);
        both(&name("3d"), t, || Ok(vec![conv3d(&x3, &w3, 1, 0, 1, 1)?]));
        both(&name("3d stride 2 pad 1"), t, || {
            Ok(vec![conv3d(&x3, &w3, 2, 1, 1, 1)?])
        });
        // Transposed convolutions (input dilation, a flipped kernel) and negative padding.
        let (xt, wt) = conv_pair(&mut rng, &[2, 5, 6, 4], &[3, 3, 3, 4], dtype);
        both(
            &name("transpose 2d stride 2 pad 1 output padding 1"),
            t,
            || Ok(vec![conv_transpose2d(&xt, &wt, 2, 1, 1, 1, 1)?]),
        );
        let (x1, w1d) = conv_pair(&mut rng, &[1, 7, 2], &[3, 4, 2], dtype);
        both(&name("transpose 1d dilation 2"), t, || {
            Ok(vec![conv_transpose1d(&x1, &w1d, 3, 0, 2, 0, 1)?])
        });
        both(&name("general negative padding"), t, || {
            Ok(vec![conv_general(
                &x,
                &w,
                &[1, 2],
                &[-1, 2],
                &[1, -1],
                &[1, 1],
                &[2, 1],
                1,
                true,
            )?])
        });
        // Empty: no batch, no input channels.
        let (xe, we) = conv_pair(&mut rng, &[0, 9, 11, 4], &[6, 3, 3, 4], dtype);
        both(&name("empty batch"), t, || {
            Ok(vec![conv2d(&xe, &we, 1, 1, 1, 1)?])
        });
        let (xc, wc) = conv_pair(&mut rng, &[2, 9, 11, 0], &[6, 3, 3, 0], dtype);
        both(&name("no input channels"), t, || {
            Ok(vec![conv2d(&xc, &wc, 1, 1, 1, 1)?])
        });
    }
}
