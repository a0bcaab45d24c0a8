//! Bad input: each kind is an error naming the operation.

use nuvec_core::*;

fn expect_err<T: std::fmt::Debug>(r: Result<T>, op: &str) {
    match r {
        Err(e) => assert!(e.to_string().starts_with(op), "{e}"),
        Ok(v) => panic!("{op}: expected an error, got {v:?}"),
    }
}

fn weights() -> (Array, Array, Array) {
    quantize(&ones(&[8, 64], DType::F32).unwrap(), 32, 4).unwrap()
}

#[test]
fn group_size_must_divide_the_last_axis() {
    let w = ones(&[4, 96], DType::F32).unwrap();
    expect_err(quantize(&w, 64, 4), "quantize");
}

#[test]
fn unsupported_widths_and_groups() {
    let w = ones(&[4, 128], DType::F32).unwrap();
    for bits in [0, 1, 7, 9, 16, 32] {
        expect_err(quantize(&w, 64, bits), "quantize");
    }
    for gs in [0, 1, 16, 48, 256] {
        expect_err(quantize(&w, gs, 4), "quantize");
    }
    let (wq, s, b) = weights();
    let x = ones(&[2, 64], DType::F32).unwrap();
    expect_err(dequantize(&wq, &s, &b, 32, 7), "dequantize");
    expect_err(dequantize(&wq, &s, &b, 16, 4), "dequantize");
    expect_err(
        quantized_matmul(&x, &wq, &s, &b, true, 32, 7),
        "quantized_matmul",
    );
    expect_err(
        quantized_matmul(&x, &wq, &s, &b, true, 48, 4),
        "quantized_matmul",
    );
}

#[test]
fn shapes_must_fit() {
    let (wq, s, b) = weights(); // wq [8, 8], scales [8, 2]
    // The parameters do not match the packing.
    expect_err(dequantize(&wq, &s, &b, 64, 4), "dequantize");
    expect_err(dequantize(&wq, &s, &b, 32, 3), "dequantize");
    // Scales and biases of different shapes, or not matching the rows.
    let b1 = ones(&[8, 1], DType::F32).unwrap();
    expect_err(dequantize(&wq, &s, &b1, 32, 4), "dequantize");
    let s7 = ones(&[7, 2], DType::F32).unwrap();
    expect_err(dequantize(&wq, &s7, &s7, 32, 4), "dequantize");
    let flat = ones(&[16], DType::F32).unwrap();
    expect_err(dequantize(&wq, &flat, &flat, 32, 4), "dequantize");
    // A 1-D packed matrix, a 1-D matrix to quantize.
    let w1 = Array::from_slice(&[0u32; 8], &[8]).unwrap();
    expect_err(dequantize(&w1, &s, &b, 32, 4), "dequantize");
    expect_err(
        quantize(&ones(&[64], DType::F32).unwrap(), 32, 4),
        "quantize",
    );
    // x's inner axis against w's.
    let x = ones(&[2, 63], DType::F32).unwrap();
    expect_err(
        quantized_matmul(&x, &wq, &s, &b, true, 32, 4),
        "quantized_matmul",
    );
    let x = ones(&[2, 64], DType::F32).unwrap();
    expect_err(
        quantized_matmul(&x, &wq, &s, &b, false, 32, 4),
        "quantized_matmul",
    );
    let x0 = Array::scalar(1.0f32);
    expect_err(
        quantized_matmul(&x0, &wq, &s, &b, true, 32, 4),
        "quantized_matmul",
    );
    expect_err(
        quantized_matmul(&x, &wq, &s, &b1, true, 32, 4),
        "quantized_matmul",
    );
    expect_err(
        quantized_matmul(&x, &wq, &s7, &s7, true, 32, 4),
        "quantized_matmul",
    );
    // Batches that do not broadcast.
    let stack3 = |a: &Array| stack(&[a.clone(), a.clone(), a.clone()], 0).unwrap();
    let x2 = ones(&[2, 5, 64], DType::F32).unwrap();
    let r = quantized_matmul(&x2, &stack3(&wq), &stack3(&s), &stack3(&b), true, 32, 4);
    assert!(r.is_err());
    let stack2 = |a: &Array| stack(&[a.clone(), a.clone()], 0).unwrap();
    let r = quantized_matmul(&x, &stack3(&wq), &stack2(&s), &stack2(&b), true, 32, 4);
    assert!(r.is_err());
}

#[test]
fn types_must_fit() {
    let (wq, s, b) = weights();
    // Integer or complex matrices cannot be quantized.
    expect_err(
        quantize(&ones(&[4, 64], DType::I32).unwrap(), 32, 4),
        "quantize",
    );
    expect_err(
        quantize(&ones(&[4, 64], DType::U32).unwrap(), 32, 4),
        "quantize",
    );
    expect_err(
        quantize(&ones(&[4, 64], DType::C64).unwrap(), 32, 4),
        "quantize",
    );
    // The packed matrix must be uint32.
    for dtype in [DType::I32, DType::U8, DType::F32] {
        let w = wq.astype(dtype).unwrap();
        expect_err(dequantize(&w, &s, &b, 32, 4), "dequantize");
        let x = ones(&[2, 64], DType::F32).unwrap();
        expect_err(
            quantized_matmul(&x, &w, &s, &b, true, 32, 4),
            "quantized_matmul",
        );
    }
    // Integer scales, and integer x with integer scales.
    let si = s.astype(DType::I32).unwrap();
    expect_err(dequantize(&wq, &si, &si, 32, 4), "dequantize");
    let xi = ones(&[2, 64], DType::I32).unwrap();
    expect_err(
        quantized_matmul(&xi, &wq, &si, &si, true, 32, 4),
        "quantized_matmul",
    );
    let xc = ones(&[2, 64], DType::C64).unwrap();
    expect_err(
        quantized_matmul(&xc, &wq, &s, &b, true, 32, 4),
        "quantized_matmul",
    );
    // An integer x with float scales is promoted, as in MLX.
    let y = quantized_matmul(&xi, &wq, &s, &b, true, 32, 4).unwrap();
    assert_eq!(y.dtype(), DType::F32);
    // The primitive built directly checks its inputs too.
    let op = Primitive::Quantized(QuantizedOp::Matmul {
        group_size: 32,
        bits: 4,
        transpose: true,
    });
    let xh = ones(&[2, 64], DType::F16).unwrap();
    assert!(Array::from_op(op.clone(), vec![xh, wq.clone(), s.clone(), b.clone()]).is_err());
    assert!(Array::from_op(op, vec![wq.clone(), s, b]).is_err());
}
