//! The CPU's fast paths for large memory-bound work: the register-block transpose of 4-byte
//! elements (odd sizes, offsets, negative strides, batches, streamed and plain outputs) and
//! the streamed `f32` arithmetic, each against its direct index formula.

use nuvec_core::{Array, SliceArg, add, contiguous, divide, multiply, slice, subtract, transpose};

/// `n` distinct values that `f32`, `i32` and `u32` hold exactly.
fn ramp(n: usize) -> Vec<f32> {
    (0..n).map(|i| (i % (1 << 22)) as f32 + 0.5).collect()
}

/// Checks `contiguous(x[..].t())`-style copies: `got[(r, c)]` must be
/// `src[offset + r · s0 + c · s1]` for an output of `rows × cols` (per batch, `batch` apart).
fn check_matrix(
    got: &[f32],
    src: &[f32],
    dims: (usize, usize, usize),
    strides: (isize, isize, isize),
    offset: isize,
) {
    let (batches, rows, cols) = dims;
    let (sb, s0, s1) = strides;
    assert_eq!(got.len(), batches * rows * cols);
    for b in 0..batches {
        for r in 0..rows {
            for c in 0..cols {
                let p = offset + b as isize * sb + r as isize * s0 + c as isize * s1;
                let k = (b * rows + r) * cols + c;
                assert_eq!(got[k], src[p as usize], "element ({b}, {r}, {c})");
            }
        }
    }
}

#[test]
fn transpose_copy_matches_formula_over_sizes() {
    // Small, odd, exactly blocked, above the parallel grain, and above the streaming size with
    // output rows of whole cache lines (1040 columns) and without (1027 columns).
    for &(a, b) in &[
        (16, 16),
        (17, 33),
        (48, 64),
        (100, 37),
        (300, 517),
        (1040, 2048),
        (1027, 2049),
    ] {
        let xv = ramp(a * b);
        let x = Array::from_vec(xv.clone(), &[a, b]).unwrap();
        let got = contiguous(&x.t().unwrap())
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        // Output (j, i) is x[i, j].
        check_matrix(&got, &xv, (1, b, a), (0, 1, b as isize), 0);
    }
}

#[test]
fn transpose_copy_of_offset_and_reversed_views() {
    let (a, b) = (203, 181);
    let xv = ramp(a * b);
    let x = Array::from_vec(xv.clone(), &[a, b]).unwrap();
    let (bi, ai) = (b as isize, a as isize);
    // x[3:, 5:].T: offset 3·b + 5.
    let s = slice(
        &x,
        &[
            SliceArg::new(Some(3), None, 1),
            SliceArg::new(Some(5), None, 1),
        ],
    )
    .unwrap();
    let got = contiguous(&s.t().unwrap())
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    check_matrix(&got, &xv, (1, b - 5, a - 3), (0, 1, bi), 3 * bi + 5);
    // x[::-1, 2:].T: the source column step is negative.
    let s = slice(
        &x,
        &[
            SliceArg::new(None, None, -1),
            SliceArg::new(Some(2), None, 1),
        ],
    )
    .unwrap();
    let got = contiguous(&s.t().unwrap())
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    check_matrix(&got, &xv, (1, b - 2, a), (0, 1, -bi), (ai - 1) * bi + 2);
    // x[::-2, :].T: every other source row, backwards.
    let s = slice(&x, &[SliceArg::new(None, None, -2), SliceArg::full()]).unwrap();
    let got = contiguous(&s.t().unwrap())
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    check_matrix(
        &got,
        &xv,
        (1, b, a.div_ceil(2)),
        (0, 1, -2 * bi),
        (ai - 1) * bi,
    );
}

#[test]
fn transpose_copy_of_batched_views_and_other_types() {
    // [3, 40, 50] with its last two axes swapped: batch stride 2000.
    let xv = ramp(3 * 40 * 50);
    let x = Array::from_vec(xv.clone(), &[3, 40, 50]).unwrap();
    let got = contiguous(&transpose(&x, &[0, 2, 1]).unwrap())
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    check_matrix(&got, &xv, (3, 50, 40), (2000, 1, 50), 0);
    // [40, 3, 50] as [3, 50, 40]: batch stride 50, column step 150.
    let x = Array::from_vec(xv.clone(), &[40, 3, 50]).unwrap();
    let got = contiguous(&transpose(&x, &[1, 2, 0]).unwrap())
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    check_matrix(&got, &xv, (3, 50, 40), (50, 1, 150), 0);
    // The kernel moves bits: integers come through unchanged, including ones that are NaN
    // patterns as f32.
    let (a, b) = (37, 70);
    let iv: Vec<i32> = (0..a * b)
        .map(|i| (i as i32).wrapping_mul(-1_640_531_535) | 0x7f80_0001)
        .collect();
    let x = Array::from_vec(iv.clone(), &[a, b]).unwrap();
    let got = contiguous(&x.t().unwrap())
        .unwrap()
        .to_vec::<i32>()
        .unwrap();
    for j in 0..b {
        for i in 0..a {
            assert_eq!(got[j * a + i], iv[i * b + j]);
        }
    }
    let uv: Vec<u32> = iv.iter().map(|&v| v as u32 ^ 0x8000_0000).collect();
    let x = Array::from_vec(uv.clone(), &[a, b]).unwrap();
    let got = contiguous(&x.t().unwrap())
        .unwrap()
        .to_vec::<u32>()
        .unwrap();
    for j in 0..b {
        for i in 0..a {
            assert_eq!(got[j * a + i], uv[i * b + j]);
        }
    }
}

#[test]
fn streamed_f32_arithmetic_matches_formula() {
    // Large enough to stream (over 8 MiB), with an odd length.
    let (a, b) = (1027, 2049);
    let n = a * b;
    let xv: Vec<f32> = (0..n).map(|i| (i % 1013) as f32 * 0.37 - 100.0).collect();
    let yv: Vec<f32> = (0..n).map(|i| (i % 977) as f32 * 0.11 + 0.25).collect();
    let x = Array::from_vec(xv.clone(), &[a, b]).unwrap();
    let y = Array::from_vec(yv.clone(), &[a, b]).unwrap();
    type Op = fn(&Array, &Array) -> nuvec_core::Result<Array>;
    type Formula = fn(f32, f32) -> f32;
    let ops: [(Op, Formula); 4] = [
        (|x, y| add(x, y), |u, v| u + v),
        (|x, y| subtract(x, y), |u, v| u - v),
        (|x, y| multiply(x, y), |u, v| u * v),
        (|x, y| divide(x, y), |u, v| u / v),
    ];
    for (op, f) in ops {
        // x and y stay alive, so neither can be donated: the fresh-output path.
        let got = op(&x, &y).unwrap().to_vec::<f32>().unwrap();
        for i in 0..n {
            assert_eq!(got[i].to_bits(), f(xv[i], yv[i]).to_bits(), "element {i}");
        }
        // Rows 1.. of each: the inputs start one row in, so the output's alignment differs
        // from theirs.
        let rows = [SliceArg::new(Some(1), None, 1)];
        let (xs, ys) = (slice(&x, &rows).unwrap(), slice(&y, &rows).unwrap());
        let got = op(&xs, &ys).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(got.len(), n - b);
        for i in 0..n - b {
            assert_eq!(got[i].to_bits(), f(xv[b + i], yv[b + i]).to_bits());
        }
        // x against y shifted by one element (through a flat view): misaligned to each other.
        let xf = slice(
            &x.reshape(&[-1]).unwrap(),
            &[SliceArg::new(Some(0), Some(n as isize - 1), 1)],
        )
        .unwrap();
        let yf = slice(
            &y.reshape(&[-1]).unwrap(),
            &[SliceArg::new(Some(1), None, 1)],
        )
        .unwrap();
        let got = op(&xf, &yf).unwrap().to_vec::<f32>().unwrap();
        for i in 0..n - 1 {
            assert_eq!(got[i].to_bits(), f(xv[i], yv[i + 1]).to_bits());
        }
    }
}
