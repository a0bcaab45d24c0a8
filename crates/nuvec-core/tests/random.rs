//! The random module: threefry against the published Random123 answers, every sampler
//! against values computed by MLX 0.32.4 (`mlx.core.random` on the CPU, and its C++ API
//! for `bits` widths that Python does not expose) from the same keys, each sampler against
//! its defining formula over dtypes and key layouts, distribution statistics, and errors.
//!
//! The MLX values below were produced once, outside the test, and pasted here; nothing runs
//! MLX at test time. Float outputs are compared through their bit patterns.

use nuvec_core::random::{self, threefry2x32};
use nuvec_core::*;

fn key(seed: u64) -> Array {
    random::key(seed)
}

/// Any array as `u32` values.
fn u32s(a: &Array) -> Vec<u32> {
    a.astype(DType::U32).unwrap().to_vec::<u32>().unwrap()
}

fn f32_bits(a: &Array) -> Vec<u32> {
    a.to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

fn f64s(a: &Array) -> Vec<f64> {
    a.astype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

/// The largest value below one of a float type, as `f32`.
fn below_one(dtype: DType) -> f32 {
    match dtype {
        DType::F16 => f16::from_bits(0x3BFF).to_f32(),
        DType::BF16 => bf16::from_bits(0x3F7F).to_f32(),
        _ => 1.0f32 - f32::EPSILON / 2.0,
    }
}

/// Checks `float32` values against MLX's bit patterns within `ulps` units in the last place:
/// the samplers through `erf`, `erfinv` and `log` inherit those functions' last bits, which
/// are MLX's own approximations there.
fn assert_ulps(got: &Array, want: &[u32], ulps: i64) {
    let got = got.to_vec::<f32>().unwrap();
    assert_eq!(got.len(), want.len());
    for (g, &w) in got.iter().zip(want) {
        let apart = (i64::from(g.to_bits() as i32) - i64::from(w as i32)).abs();
        assert!(apart <= ulps, "{g} vs {} ({apart} ulps)", f32::from_bits(w));
    }
}

/// `(mean, variance)` of values.
fn moments(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    (mean, var)
}

#[test]
fn threefry_known_answers() {
    // Random123's kat_vectors for threefry2x32 with 20 rounds: (counter, key) -> output.
    let cases = [
        ([0, 0], [0, 0], [0x6b20_0159, 0x99ba_4efe]),
        (
            [0xffff_ffff, 0xffff_ffff],
            [0xffff_ffff, 0xffff_ffff],
            [0x1cb9_96fc, 0xbb00_2be7],
        ),
        (
            [0x243f_6a88, 0x85a3_08d3],
            [0x1319_8a2e, 0x0370_7344],
            [0xc492_3a9c, 0x483d_f7a0],
        ),
    ];
    for (counter, k, want) in cases {
        assert_eq!(threefry2x32(k, counter), want, "counter {counter:x?}");
    }
}

#[test]
fn keys_and_splits_match_mlx() {
    assert_eq!(u32s(&key(42)), [0, 42]);
    assert_eq!(u32s(&key((1 << 32) + 5)), [1, 5]);
    assert_eq!(u32s(&key(u64::MAX)), [u32::MAX, u32::MAX]);
    let s = random::split(&key(0), 2).unwrap();
    assert_eq!(s.shape(), [2, 2]);
    assert_eq!(u32s(&s), [4146024105, 967050713, 2718843009, 1272950319]);
    let s = random::split(&key(42), 3).unwrap();
    assert_eq!(
        u32s(&s),
        [
            3134548294, 3733159049, 3746501087, 894150801, 801545058, 2363201431
        ]
    );
    assert_eq!(
        u32s(&random::split(&key(u64::MAX), 1).unwrap()),
        [1355514454, 2365093262]
    );
    assert_eq!(random::split(&key(1), 0).unwrap().shape(), [0, 2]);
}

#[test]
fn bits_match_mlx() {
    // From MLX's C++ `random::bits(shape, width, key(42))`: every word count parity and
    // partial last words.
    let k = key(42);
    let w4: [(usize, &[u32]); 6] = [
        (1, &[1832780943]),
        (2, &[64467757, 2916123636]),
        (3, &[2465931498, 430176367, 255383827]),
        (4, &[2465931498, 3679230171, 255383827, 267815257]),
        (
            5,
            &[3134548294, 3733159049, 843694964, 894150801, 801545058],
        ),
        (
            7,
            &[
                2954079971, 2575172198, 1139032965, 1681094280, 3276725750, 1223413151, 173471767,
            ],
        ),
    ];
    for (n, want) in w4 {
        let b = random::bits(&[n], 4, Some(&k)).unwrap();
        assert_eq!(b.dtype(), DType::U32);
        assert_eq!(b.to_vec::<u32>().unwrap(), want, "width 4, n {n}");
    }
    let w2: [(usize, &[u16]); 6] = [
        (1, &[1167]),
        (3, &[45869, 983, 33780]),
        (5, &[8426, 37627, 63599, 6563, 55571]),
        (6, &[8426, 37627, 63599, 6563, 55571, 3896]),
        (
            9,
            &[
                26950, 47829, 31881, 56963, 50036, 12873, 43153, 13643, 39778,
            ],
        ),
        (
            13,
            &[
                44771, 45075, 614, 39294, 17285, 17380, 30344, 25651, 56822, 49998, 52639, 18667,
                63511,
            ],
        ),
    ];
    for (n, want) in w2 {
        let b = random::bits(&[n], 2, Some(&k)).unwrap();
        assert_eq!(b.dtype(), DType::U16);
        assert_eq!(b.to_vec::<u16>().unwrap(), want, "width 2, n {n}");
    }
    let w1: [(usize, &[u8]); 6] = [
        (1, &[143]),
        (3, &[143, 4, 62]),
        (5, &[45, 179, 215, 3, 244]),
        (6, &[45, 179, 215, 3, 244, 131]),
        (9, &[234, 32, 251, 146, 111, 248, 163, 25, 19]),
        (
            13,
            &[234, 32, 251, 146, 219, 152, 76, 219, 19, 217, 56, 15, 89],
        ),
    ];
    for (n, want) in w1 {
        let b = random::bits(&[n], 1, Some(&k)).unwrap();
        assert_eq!(b.dtype(), DType::U8);
        assert_eq!(b.to_vec::<u8>().unwrap(), want, "width 1, n {n}");
    }
    // The layout depends only on the element count, not on the shape.
    let flat = random::bits(&[6], 2, Some(&k))
        .unwrap()
        .to_vec::<u16>()
        .unwrap();
    let grid = random::bits(&[2, 3], 2, Some(&k)).unwrap();
    assert_eq!(grid.shape(), [2, 3]);
    assert_eq!(grid.to_vec::<u16>().unwrap(), flat);
    assert_eq!(
        random::bits(&[], 4, Some(&k))
            .unwrap()
            .to_vec::<u32>()
            .unwrap(),
        [1832780943]
    );
}

/// The words a key gives, computed here from the block function and MLX's layout.
fn reference_words(k: [u32; 2], words: usize) -> Vec<u32> {
    let half = words.div_ceil(2);
    let mut out = vec![0u32; words];
    for j in 0..half {
        if words % 2 == 1 && j == half - 1 {
            out[j] = threefry2x32(k, [j as u32, 0])[0];
        } else {
            let b = threefry2x32(k, [j as u32, (j + half) as u32]);
            out[j] = b[0];
            out[j + half] = b[1];
        }
    }
    out
}

#[test]
fn bits_follow_the_layout_at_every_width_and_size() {
    // Sizes past the parallel threshold too (the kernel splits the work there).
    let k = [0xdead_beef, 0x0123_4567];
    let key = Array::from_slice(&k, &[2]).unwrap();
    for n in [0usize, 1, 2, 7, 8, 33, 1000, 70_001, 200_000] {
        for width in [1usize, 2, 4] {
            let words = reference_words(k, (n * width).div_ceil(4));
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            let b = random::bits(&[n], width, Some(&key)).unwrap();
            let got: Vec<u32> = u32s(&b);
            let want: Vec<u32> = (0..n)
                .map(|i| {
                    let at = i * width;
                    (0..width).fold(0u32, |acc, j| acc | u32::from(bytes[at + j]) << (8 * j))
                })
                .collect();
            assert_eq!(got, want, "n {n}, width {width}");
        }
    }
}

#[test]
fn keys_as_views_give_the_same_bits() {
    let keys = random::split(&key(5), 4).unwrap();
    let words = u32s(&keys);
    let third = Array::from_slice(&words[4..6], &[2]).unwrap();
    let want = u32s(&random::bits(&[5], 4, Some(&third)).unwrap());
    // A row of the split (a view with an offset).
    let row = take(&keys, &Array::scalar(2u32), Some(0)).unwrap();
    assert_eq!(u32s(&random::bits(&[5], 4, Some(&row)).unwrap()), want);
    // A column of the transpose (strided).
    let t = keys.t().unwrap();
    let col = slice(&t, &[SliceArg::full(), SliceArg::new(Some(2), Some(3), 1)])
        .unwrap()
        .reshape(&[2])
        .unwrap();
    assert_eq!(u32s(&random::bits(&[5], 4, Some(&col)).unwrap()), want);
    // A reversed key is another key.
    let rev = slice(&third, &[SliceArg::new(None, None, -1)]).unwrap();
    let swapped = Array::from_slice(&[words[5], words[4]], &[2]).unwrap();
    assert_eq!(
        u32s(&random::bits(&[5], 4, Some(&rev)).unwrap()),
        u32s(&random::bits(&[5], 4, Some(&swapped)).unwrap())
    );
    // One word broadcast to both halves.
    let same = broadcast_to(&Array::scalar(9u32), &[2]).unwrap();
    let nine = Array::from_slice(&[9u32, 9], &[2]).unwrap();
    assert_eq!(
        u32s(&random::bits(&[3], 1, Some(&same)).unwrap()),
        u32s(&random::bits(&[3], 1, Some(&nine)).unwrap())
    );
}

#[test]
fn uniform_matches_mlx() {
    let x = random::uniform(0.0, 1.0, &[4], DType::F32, Some(&key(0))).unwrap();
    assert_eq!(
        f32_bits(&x),
        [1064771407, 1046908951, 1059196481, 1050132316]
    );
    let x = random::uniform(-2, 3, &[2, 3], DType::F32, Some(&key(7))).unwrap();
    assert_eq!(
        f32_bits(&x),
        [
            3218524944, 3212778778, 1046468672, 3182788240, 1068516454, 3199986408
        ]
    );
    let x = random::uniform(0.0, 1.0, &[5], DType::F16, Some(&key(1))).unwrap();
    let got: Vec<u16> = x
        .to_vec::<f16>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect();
    assert_eq!(got, [15013, 12624, 14156, 14629, 14477]);
    let x = random::uniform(0.0, 1.0, &[5], DType::BF16, Some(&key(1))).unwrap();
    let got: Vec<u16> = x
        .to_vec::<bf16>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect();
    assert_eq!(got, [16213, 15914, 16106, 16165, 16146]);
    let low = Array::from_slice(&[0.0f32, 10.0], &[2]).unwrap();
    let high = Array::from_slice(&[1.0f32, 20.0], &[2]).unwrap();
    let x = random::uniform(&low, &high, &[3, 2], DType::F32, Some(&key(9))).unwrap();
    assert_eq!(
        f32_bits(&x),
        [
            1054854861, 1095299670, 1059398371, 1097448470, 1052287060, 1097447456
        ]
    );
}

#[test]
fn uniform_is_its_formula_over_dtypes_and_bound_layouts() {
    let k = key(11);
    let shape = [4, 3];
    let words = u32s(&random::bits(&shape, 4, Some(&k)).unwrap());
    // Bounds: a scalar pair, a row broadcast over rows, a transposed matrix.
    let row_lo = Array::from_slice(&[-1.0f64, 0.0, 2.0], &[3]).unwrap();
    let row_hi = Array::from_slice(&[1.0f64, 0.5, 6.0], &[3]).unwrap();
    let mat_lo = arange(0.0, 12.0, 1.0, DType::F64)
        .unwrap()
        .reshape(&[3, 4])
        .unwrap();
    let mat_lo = mat_lo.t().unwrap();
    let mat_hi = add(&mat_lo, 2.0).unwrap();
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        let cases: Vec<(Operand, Operand)> = vec![
            (Operand::from(-3.0), Operand::from(5.0)),
            ((&row_lo).into(), (&row_hi).into()),
            ((&mat_lo).into(), (&mat_hi).into()),
        ];
        for (ci, (lo, hi)) in cases.into_iter().enumerate() {
            let x = random::uniform(&lo, &hi, &shape, dtype, Some(&k)).unwrap();
            assert_eq!(x.dtype(), dtype);
            assert_eq!(x.shape(), shape);
            let lo_v = f64s(&broadcast_to(&lo.to_array(dtype).unwrap(), &shape).unwrap());
            let hi_v = f64s(&broadcast_to(&hi.to_array(dtype).unwrap(), &shape).unwrap());
            let got = f64s(&x);
            for i in 0..12 {
                let unit = (words[i] as f32 / u32::MAX as f32).min(below_one(dtype));
                let unit = f64s(&Array::scalar(unit).astype(dtype).unwrap())[0];
                let want = lo_v[i] + (hi_v[i] - lo_v[i]) * unit;
                // One rounding for the product and one for the sum, in `dtype`.
                let tol = match dtype {
                    DType::F64 => 1e-12,
                    DType::F32 => 1e-6,
                    DType::F16 => 2e-3,
                    _ => 1.6e-2,
                } * hi_v[i].abs().max(lo_v[i].abs()).max(1.0);
                assert!(
                    (got[i] - want).abs() <= tol,
                    "{dtype} case {ci} [{i}]: {} vs {want}",
                    got[i]
                );
                assert!(got[i] >= lo_v[i] && got[i] <= hi_v[i], "{dtype} case {ci}");
            }
        }
    }
    assert_eq!(
        random::uniform(0.0, 1.0, &[2, 0], DType::F32, Some(&k))
            .unwrap()
            .shape(),
        [2, 0]
    );
}

#[test]
fn normal_matches_mlx() {
    let close = |got: &Array, want: &[u32]| assert_ulps(got, want, 4);
    let x = random::normal(&[6], DType::F32, 0.0, 1.0, Some(&key(0))).unwrap();
    close(
        &x,
        &[
            1044404792, 3215213710, 1059471431, 1067442482, 1048204889, 3186657618,
        ],
    );
    let x = random::normal(&[2, 2], DType::F32, 1.0, 2.0, Some(&key(5))).unwrap();
    close(&x, &[1077783213, 3215398032, 1058195262, 1079744842]);
    let x = random::normal(&[4], DType::BF16, 0.0, 1.0, Some(&key(2))).unwrap();
    let got: Vec<u16> = x
        .to_vec::<bf16>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect();
    assert_eq!(got, [16091, 48997, 15911, 49102]);
    let z = random::normal(&[3], DType::C64, 0.0, 1.0, Some(&key(0))).unwrap();
    assert_eq!(z.dtype(), DType::C64);
    let re = real(&z).unwrap();
    let im = imag(&z).unwrap();
    close(&re, &[1040712578, 1055595859, 1043399652]);
    close(&im, &[3211284299, 1063393952, 3182040510]);
}

/// The uniforms in (−1, 1) that normal samples are made from.
fn signed_units(shape: &[usize], k: &Array) -> Vec<f64> {
    let low = -below_one(DType::F32);
    f64s(&random::uniform(low, 1.0f32, shape, DType::F32, Some(k)).unwrap())
}

#[test]
fn normal_is_its_formula_over_dtypes() {
    let k = key(21);
    let u = signed_units(&[50], &k);
    let loc = Array::from_slice(&[0.5f64, -2.0], &[2, 1]).unwrap();
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        let x = random::normal(&[2, 25], dtype, &loc, 3.0, Some(&k)).unwrap();
        assert_eq!((x.shape(), x.dtype()), (&[2usize, 25][..], dtype));
        let got = f64s(&x);
        let tol = match dtype {
            DType::F16 => 4e-3,
            DType::BF16 => 3e-2,
            _ => 1e-5,
        };
        for i in 0..50 {
            let m = if i < 25 { 0.5 } else { -2.0 };
            // erf((x − loc) / (scale √2)) recovers the uniform.
            let z = (got[i] - m) / 3.0;
            let back = libm::erf(z / std::f64::consts::SQRT_2);
            let slack = tol * (1.0 + z.abs()) * (-z * z / 2.0).exp().max(1e-3);
            assert!((back - u[i]).abs() <= slack.max(tol * 0.1), "{dtype} [{i}]");
        }
    }
}

#[test]
fn discrete_samplers_match_mlx() {
    let r = random::randint(0, 10, &[8], DType::I32, Some(&key(0))).unwrap();
    assert_eq!(r.dtype(), DType::I32);
    assert_eq!(r.to_vec::<i32>().unwrap(), [5, 3, 3, 9, 1, 9, 1, 8]);
    let r = random::randint(-5, 5, &[2, 4], DType::I16, Some(&key(3))).unwrap();
    assert_eq!(r.to_vec::<i16>().unwrap(), [-2, 3, 3, -1, -5, -5, 3, -2]);
    let r = random::randint(0, i32::MAX, &[4], DType::I32, Some(&key(11))).unwrap();
    assert_eq!(
        r.to_vec::<i32>().unwrap(),
        [1733918720, 120303504, 977614848, 82703152]
    );
    let b = random::bernoulli(0.3, Some(&[10]), Some(&key(0))).unwrap();
    assert_eq!(b.dtype(), DType::Bool);
    assert_eq!(u32s(&b), [0, 0, 0, 1, 0, 0, 1, 1, 0, 0]);
    let p = Array::from_slice(&[0.1f32, 0.9], &[2]).unwrap();
    let b = random::bernoulli(&p, Some(&[3, 2]), Some(&key(4))).unwrap();
    assert_eq!(u32s(&b), [1, 1, 0, 1, 0, 1]);
    let l1 = Array::from_slice(&[0.1f32, 0.5, 2.0, -1.0], &[4]).unwrap();
    let c = random::categorical(&l1, -1, None, Some(12), Some(&key(3))).unwrap();
    assert_eq!(c.dtype(), DType::U32);
    assert_eq!(u32s(&c), [2, 2, 3, 2, 2, 2, 2, 1, 2, 2, 0, 2]);
    let c = random::categorical(&l1, 0, Some(&[2, 3]), None, Some(&key(3))).unwrap();
    assert_eq!(c.shape(), [2, 3]);
    assert_eq!(u32s(&c), [1, 2, 2, 2, 2, 2]);
    let c = random::categorical(&l1, -1, None, None, Some(&key(3))).unwrap();
    assert_eq!((c.shape(), u32s(&c)), (&[][..], vec![2]));
    let l2 = Array::from_slice(&[0.0f32, 1.0, 2.0, 3.0, 3.0, 2.0, 1.0, 0.0], &[2, 4]).unwrap();
    let c = random::categorical(&l2, -1, None, None, Some(&key(5))).unwrap();
    assert_eq!(u32s(&c), [2, 0]);
    let c = random::categorical(&l2, 1, None, Some(6), Some(&key(5))).unwrap();
    assert_eq!(c.shape(), [2, 6]);
    assert_eq!(u32s(&c), [2, 3, 3, 2, 3, 3, 0, 0, 1, 0, 0, 0]);
    let c = random::categorical(&l2, 0, Some(&[3, 4]), None, Some(&key(6))).unwrap();
    assert_eq!(u32s(&c), [1, 0, 0, 1, 1, 1, 0, 0, 1, 1, 0, 0]);
    let p = random::permutation(10, Some(&key(0))).unwrap();
    assert_eq!(u32s(&p), [3, 6, 7, 4, 0, 2, 5, 1, 9, 8]);
    let x = arange(0.0, 12.0, 1.0, DType::I32)
        .unwrap()
        .reshape(&[3, 4])
        .unwrap();
    let y = random::permutation_of(&x, 1, Some(&key(2))).unwrap();
    assert_eq!(
        y.to_vec::<i32>().unwrap(),
        [3, 1, 2, 0, 7, 5, 6, 4, 11, 9, 10, 8]
    );
}

#[test]
fn continuous_samplers_match_mlx() {
    let t = random::truncated_normal(-1, 1, Some(&[5]), DType::F32, Some(&key(0))).unwrap();
    assert_ulps(
        &t,
        &[1040377731, 3208637959, 3191621066, 1060922200, 1042939443],
        16,
    );
    let g = random::gumbel(&[5], DType::F32, Some(&key(0))).unwrap();
    assert_ulps(
        &g,
        &[1058476769, 3210075283, 1032640828, 1074541245, 1059658276],
        2,
    );
    let l = random::laplace(&[4], DType::F32, 0.0, 1.0, Some(&key(0))).unwrap();
    assert_ulps(&l, &[3224029316, 1061960881, 3198050368, 1057349803], 2);
}

#[test]
fn discrete_samplers_follow_their_formulas() {
    let k = key(8);
    let shape = [3, 7];
    // randint: floor of the float32 uniform, clipped; bounds broadcast per column.
    let lo = Array::from_slice(&[-4i64, 0, 100, -1, 7, 0, 1 << 20], &[7]).unwrap();
    let hi = add(
        &lo,
        Array::from_slice(&[3i64, 1, 50, 2, 9, 1000, 77], &[7]).unwrap(),
    )
    .unwrap();
    let u = f64s(&random::uniform(&lo, &hi, &shape, DType::F32, Some(&k)).unwrap());
    let (lo_v, hi_v) = (f64s(&lo), f64s(&hi));
    for dtype in [DType::I32, DType::I64, DType::F32] {
        if dtype == DType::F32 {
            assert!(random::randint(&lo, &hi, &shape, dtype, Some(&k)).is_err());
            continue;
        }
        let r = f64s(&random::randint(&lo, &hi, &shape, dtype, Some(&k)).unwrap());
        for i in 0..21 {
            let want = u[i].floor().min(hi_v[i % 7] - 1.0).max(lo_v[i % 7]);
            assert_eq!(r[i], want, "{dtype} [{i}]");
        }
    }
    // bernoulli: 32 bits against p · 2³² (with p per row, transposed).
    let p = Array::from_slice(&[0.0f32, 0.25, 0.5, 1.0, 0.75, 0.1], &[2, 3])
        .unwrap()
        .t()
        .unwrap();
    let b = u32s(&random::bernoulli(&p, None, Some(&k)).unwrap());
    let words = u32s(&random::bits(&[3, 2], 4, Some(&k)).unwrap());
    let pv = p.to_vec::<f32>().unwrap();
    let upper = f32::from_bits((u32::MAX as f32).to_bits() + 1);
    for i in 0..6 {
        let want = ((words[i] as f32) < pv[i] * upper) as u32;
        assert_eq!(b[i], want, "[{i}]");
    }
    assert!(b[0] == 0 && b[1] == 1, "p = 0 never, p = 1 always: {b:?}");
    // permutation: the stable argsort of 32-bit words; rows of `x` move whole.
    let words = u32s(&random::bits(&[9], 4, Some(&k)).unwrap());
    let mut order: Vec<u32> = (0..9).collect();
    order.sort_by_key(|&i| words[i as usize]);
    assert_eq!(u32s(&random::permutation(9, Some(&k)).unwrap()), order);
    let x = arange(0.0, 18.0, 1.0, DType::F32)
        .unwrap()
        .reshape(&[9, 2])
        .unwrap();
    let y = random::permutation_of(&x, -2, Some(&k))
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    for (row, &src) in order.iter().enumerate() {
        assert_eq!(
            y[2 * row..2 * row + 2],
            [2.0 * src as f32, 2.0 * src as f32 + 1.0]
        );
    }
    assert_eq!(random::permutation(0, Some(&k)).unwrap().shape(), [0]);
}

#[test]
fn statistics_of_uniform_and_normal() {
    let n = 100_000;
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        let u = f64s(&random::uniform(2.0, 4.0, &[n], dtype, Some(&key(100))).unwrap());
        let (m, v) = moments(&u);
        assert!((m - 3.0).abs() < 0.01, "{dtype} uniform mean {m}");
        assert!(
            (v - 4.0 / 12.0).abs() < 0.01,
            "{dtype} uniform variance {v}"
        );
        // In half precision `low + range · u` may round up onto `high` (as in MLX).
        let top = if matches!(dtype, DType::F16 | DType::BF16) {
            4.0
        } else {
            4.0 - 1e-12
        };
        assert!(
            u.iter().all(|x| (2.0..=top).contains(x)),
            "{dtype} uniform range"
        );
        let z = f64s(&random::normal(&[n], dtype, -1.0, 2.0, Some(&key(101))).unwrap());
        let (m, v) = moments(&z);
        assert!((m + 1.0).abs() < 0.03, "{dtype} normal mean {m}");
        assert!((v - 4.0).abs() < 0.1, "{dtype} normal variance {v}");
    }
    let z = random::normal(&[n], DType::C64, 0.0, 1.0, Some(&key(102))).unwrap();
    let (re, im) = (f64s(&real(&z).unwrap()), f64s(&imag(&z).unwrap()));
    let (mr, vr) = moments(&re);
    let (mi, vi) = moments(&im);
    assert!(
        mr.abs() < 0.01 && mi.abs() < 0.01,
        "complex means {mr} {mi}"
    );
    assert!(
        (vr - 0.5).abs() < 0.02 && (vi - 0.5).abs() < 0.02,
        "{vr} {vi}"
    );
}

#[test]
fn statistics_of_the_other_samplers() {
    let n = 100_000;
    // Truncated normal on [-0.5, 2]: inside the bounds, with the truncated mean.
    let t =
        f64s(&random::truncated_normal(-0.5, 2.0, Some(&[n]), DType::F32, Some(&key(1))).unwrap());
    assert!(t.iter().all(|x| (-0.5..=2.0).contains(x)));
    let pdf = |x: f64| (-x * x / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt();
    let cdf = |x: f64| 0.5 * (1.0 + libm::erf(x / std::f64::consts::SQRT_2));
    let want = (pdf(-0.5) - pdf(2.0)) / (cdf(2.0) - cdf(-0.5));
    let (m, _) = moments(&t);
    assert!((m - want).abs() < 0.01, "truncated mean {m} vs {want}");
    // Array bounds per column, and the bounds' shape by default.
    let lo = Array::from_slice(&[-3.0f32, 0.0, 1.0], &[3]).unwrap();
    let hi = Array::from_slice(&[-2.0f32, 0.1, 5.0], &[1, 3]).unwrap();
    let t = random::truncated_normal(&lo, &hi, None, DType::F32, Some(&key(2))).unwrap();
    assert_eq!(t.shape(), [1, 3]);
    let t = f64s(
        &random::truncated_normal(&lo, &hi, Some(&[500, 3]), DType::F16, Some(&key(2))).unwrap(),
    );
    for (i, x) in t.iter().enumerate() {
        let (a, b) = ([-3.0, 0.0, 1.0][i % 3], [-2.0, 0.1, 5.0][i % 3]);
        assert!((a..=b).contains(x), "[{i}] {x} outside [{a}, {b}]");
    }
    // Gumbel: mean γ, variance π²/6.
    let g = f64s(&random::gumbel(&[n], DType::F32, Some(&key(3))).unwrap());
    let (m, v) = moments(&g);
    assert!((m - 0.577_215_66).abs() < 0.02, "gumbel mean {m}");
    assert!(
        (v - std::f64::consts::PI.powi(2) / 6.0).abs() < 0.05,
        "gumbel var {v}"
    );
    // Laplace(1, 2): mean 1, variance 8.
    let l = f64s(&random::laplace(&[n], DType::F32, 1.0, 2.0, Some(&key(4))).unwrap());
    let (m, v) = moments(&l);
    assert!(
        (m - 1.0).abs() < 0.05 && (v - 8.0).abs() < 0.3,
        "laplace {m} {v}"
    );
    // randint: each value about equally often.
    let r = u32s(&random::randint(3, 8, &[n], DType::U8, Some(&key(5))).unwrap());
    for v in 3..8 {
        let f = r.iter().filter(|&&x| x == v).count() as f64 / n as f64;
        assert!((f - 0.2).abs() < 0.01, "randint {v}: {f}");
    }
    // bernoulli: frequency p.
    let b = u32s(&random::bernoulli(0.3, Some(&[n]), Some(&key(6))).unwrap());
    let f = b.iter().sum::<u32>() as f64 / n as f64;
    assert!((f - 0.3).abs() < 0.01, "bernoulli {f}");
}

#[test]
fn categorical_frequencies_follow_softmax() {
    let n = 60_000;
    let logits = [0.5f64, -1.0, 2.0, 0.0, 1.0];
    let z: f64 = logits.iter().map(|l| l.exp()).sum();
    let probs: Vec<f64> = logits.iter().map(|l| l.exp() / z).collect();
    let freq = |draws: &[u32], cats: usize| -> Vec<f64> {
        (0..cats as u32)
            .map(|c| draws.iter().filter(|&&d| d == c).count() as f64 / draws.len() as f64)
            .collect()
    };
    // One distribution, many draws: the inverse-distribution path.
    for dtype in [DType::F32, DType::F16, DType::F64] {
        let l = Array::from_slice(&logits, &[5])
            .unwrap()
            .astype(dtype)
            .unwrap();
        let d = u32s(&random::categorical(&l, 0, None, Some(n), Some(&key(9))).unwrap());
        for (c, (f, p)) in freq(&d, 5).iter().zip(&probs).enumerate() {
            assert!((f - p).abs() < 0.01, "{dtype} category {c}: {f} vs {p}");
        }
    }
    // Many distributions along axis 0 of a transposed matrix: the Gumbel path.
    let rows = 2000;
    let mut table = Vec::new();
    for _ in 0..rows {
        table.extend_from_slice(&logits);
    }
    let l = Array::from_slice(&table, &[rows, 5]).unwrap().t().unwrap();
    let d = random::categorical(&l, 0, None, Some(30), Some(&key(10))).unwrap();
    assert_eq!(d.shape(), [rows, 30]);
    for (c, (f, p)) in freq(&u32s(&d), 5).iter().zip(&probs).enumerate() {
        assert!((f - p).abs() < 0.01, "gumbel category {c}: {f} vs {p}");
    }
    // Infinite logits: only the maxima.
    let l = Array::from_slice(&[1.0f32, f32::INFINITY, 0.0, f32::INFINITY], &[4]).unwrap();
    let d = u32s(&random::categorical(&l, 0, Some(&[1000]), None, Some(&key(11))).unwrap());
    assert!(d.iter().all(|&c| c == 1 || c == 3));
    assert!(d.contains(&1) && d.contains(&3));
    let e = random::categorical(&l, 0, None, Some(0), Some(&key(11))).unwrap();
    assert_eq!(e.shape(), [0]);
}

#[test]
fn the_global_key_follows_mlx() {
    // The only test drawing from the process-wide key (tests run in parallel).
    random::seed(7);
    let a = random::uniform(0.0, 1.0, &[3], DType::F32, None).unwrap();
    let b = random::normal(&[2], DType::F32, 0.0, 1.0, None).unwrap();
    let c = random::randint(0, 100, &[4], DType::I32, None).unwrap();
    assert_eq!(f32_bits(&a), [1033845045, 1043506214, 1062545487]);
    let b = b.to_vec::<f32>().unwrap();
    for (g, w) in b.iter().zip([1062773742u32, 3211135854]) {
        let w = f32::from_bits(w);
        assert!((g - w).abs() <= 4.0 * f32::EPSILON * w.abs(), "{g} vs {w}");
    }
    assert_eq!(c.to_vec::<i32>().unwrap(), [44, 44, 24, 7]);
    // Reseeding repeats the sequence; an error does not advance it.
    random::seed(7);
    assert!(random::uniform(0.0, 1.0, &[3], DType::I32, None).is_err());
    let again = random::uniform(0.0, 1.0, &[3], DType::F32, None).unwrap();
    assert_eq!(f32_bits(&again), f32_bits(&a));
    // Threads share the sequence: every draw gets its own key.
    let draws: Vec<Vec<u32>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    (0..50)
                        .map(|_| {
                            random::bits(&[2], 4, None)
                                .unwrap()
                                .to_vec::<u32>()
                                .unwrap()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let mut unique = draws.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), draws.len());
}

#[test]
fn bad_keys_are_errors() {
    let bad = [
        Array::from_slice(&[1i32, 2], &[2]).unwrap(),
        Array::from_slice(&[1u32, 2, 3], &[3]).unwrap(),
        random::split(&key(0), 2).unwrap(),
        Array::scalar(1u32),
        Array::from_slice(&[1.0f32, 2.0], &[2]).unwrap(),
        Array::from_error(Error::InvalidArgument("earlier".into())),
    ];
    for key in &bad {
        assert!(random::split(key, 2).is_err());
        let k = Some(key);
        assert!(random::bits(&[2], 4, k).is_err());
        assert!(random::uniform(0.0, 1.0, &[2], DType::F32, k).is_err());
        assert!(random::normal(&[2], DType::F32, 0.0, 1.0, k).is_err());
        assert!(random::truncated_normal(0.0, 1.0, Some(&[2]), DType::F32, k).is_err());
        assert!(random::gumbel(&[2], DType::F32, k).is_err());
        assert!(random::laplace(&[2], DType::F32, 0.0, 1.0, k).is_err());
        assert!(random::randint(0, 5, &[2], DType::I32, k).is_err());
        assert!(random::bernoulli(0.5, Some(&[2]), k).is_err());
        let l = Array::from_slice(&[0.0f32, 1.0], &[2]).unwrap();
        assert!(random::categorical(&l, 0, None, Some(2), k).is_err());
        assert!(random::permutation(3, k).is_err());
        assert!(random::permutation_of(&l, 0, k).is_err());
    }
    let msg = random::bits(&[2], 4, Some(&bad[1]))
        .unwrap_err()
        .to_string();
    assert!(msg.starts_with("bits:"), "{msg}");
}

#[test]
fn bad_arguments_are_errors() {
    let k = key(0);
    let k = Some(&k);
    // bits: widths other than 1, 2, 4; sizes past the address space.
    for w in [0, 3, 8] {
        assert!(random::bits(&[2], w, k).is_err(), "width {w}");
    }
    assert!(random::bits(&[usize::MAX, 2], 4, k).is_err());
    // Types.
    for dtype in [DType::I32, DType::U32, DType::Bool, DType::C64] {
        assert!(
            random::uniform(0.0, 1.0, &[2], dtype, k).is_err(),
            "uniform {dtype}"
        );
        assert!(random::gumbel(&[2], dtype, k).is_err(), "gumbel {dtype}");
        assert!(
            random::laplace(&[2], dtype, 0.0, 1.0, k).is_err(),
            "laplace {dtype}"
        );
        assert!(random::truncated_normal(0.0, 1.0, None, dtype, k).is_err());
    }
    for dtype in [DType::I32, DType::Bool] {
        assert!(
            random::normal(&[2], dtype, 0.0, 1.0, k).is_err(),
            "normal {dtype}"
        );
    }
    for dtype in [DType::F32, DType::F16, DType::C64] {
        assert!(
            random::randint(0, 5, &[2], dtype, k).is_err(),
            "randint {dtype}"
        );
    }
    // Bounds and shapes.
    let two = Array::from_slice(&[0.0f32, 1.0], &[2]).unwrap();
    let three = Array::from_slice(&[0.0f32, 1.0, 2.0], &[3]).unwrap();
    assert!(random::uniform(&three, 5.0, &[2], DType::F32, k).is_err());
    assert!(random::uniform(&two, 5.0, &[], DType::F32, k).is_err());
    assert!(random::uniform(f64::NAN, 1.0, &[2], DType::F32, k).is_err());
    assert!(random::uniform(0.0, f64::INFINITY, &[2], DType::F32, k).is_err());
    assert!(random::normal(&[3], DType::F32, &two, 1.0, k).is_err());
    assert!(random::normal(&[2], DType::F32, 0.0, &three, k).is_err());
    assert!(random::randint(5, 5, &[2], DType::I32, k).is_err());
    assert!(random::randint(6, 2, &[2], DType::I32, k).is_err());
    assert!(random::randint(&three, 9, &[2], DType::I32, k).is_err());
    assert!(random::bernoulli(1.5, Some(&[2]), k).is_err());
    assert!(random::bernoulli(-0.1, None, k).is_err());
    assert!(random::bernoulli(1, None, k).is_err());
    let ints = Array::from_slice(&[0i32, 1], &[2]).unwrap();
    assert!(random::bernoulli(&ints, None, k).is_err());
    assert!(random::bernoulli(&three, Some(&[2]), k).is_err());
    assert!(random::truncated_normal(1.0, -1.0, None, DType::F32, k).is_err());
    assert!(random::truncated_normal(f64::NAN, 1.0, None, DType::F32, k).is_err());
    assert!(random::truncated_normal(&two, &three, None, DType::F32, k).is_err());
    assert!(random::truncated_normal(&three, 1.0, Some(&[2]), DType::F32, k).is_err());
    assert!(random::laplace(&[2], DType::F32, f64::NAN, 1.0, k).is_err());
    // categorical.
    let l = Array::from_slice(&[0.0f32; 6], &[2, 3]).unwrap();
    assert!(random::categorical(&l, 2, None, None, k).is_err());
    assert!(random::categorical(&l, -3, None, None, k).is_err());
    assert!(random::categorical(&l, 1, Some(&[2]), Some(3), k).is_err());
    assert!(random::categorical(&l, 1, Some(&[3]), None, k).is_err());
    assert!(random::categorical(&Array::scalar(1.0f32), 0, None, None, k).is_err());
    let empty = zeros(&[2, 0], DType::F32).unwrap();
    assert!(random::categorical(&empty, 1, None, None, k).is_err());
    let c = l.astype(DType::C64).unwrap();
    assert!(random::categorical(&c, 1, None, None, k).is_err());
    // permutation.
    assert!(random::permutation_of(&l, 2, k).is_err());
    assert!(random::permutation_of(&Array::scalar(1.0f32), 0, k).is_err());
    let msg = random::uniform(0.0, 1.0, &[2], DType::I32, k)
        .unwrap_err()
        .to_string();
    assert!(msg.starts_with("uniform:"), "{msg}");
}
