//! Bad input, one test per kind, and a property test of `sum` over random shapes and axes.

use nuvec_core::{
    Array, DType, Error, all, any, argmax, argmin, cummin, cumprod, cumsum, logcumsumexp,
    logsumexp, max, mean, min, prod, softmax, sum, var,
};
use proptest::prelude::*;

use super::*;

fn is_invalid(r: Res, op: &str) {
    match r {
        Err(Error::InvalidArgument(msg)) => assert!(msg.starts_with(op), "{msg}"),
        Err(Error::AxisOutOfRange { op: o, .. }) => assert_eq!(o, op),
        Err(other) => panic!("{op}: unexpected error {other}"),
        Ok(_) => panic!("{op}: expected an error"),
    }
}

#[test]
fn axis_out_of_range_is_an_error() {
    let x = Array::from_slice(&[1.0f32; 6], &[2, 3]).unwrap();
    is_invalid(sum(&x, &[2], false), "sum");
    is_invalid(max(&x, &[-3], false), "max");
    is_invalid(mean(&x, &[5], false), "mean");
    is_invalid(var(&x, &[2], false, 0), "var");
    is_invalid(logsumexp(&x, &[-3], false), "logsumexp");
    is_invalid(softmax(&x, &[2]), "softmax");
    is_invalid(argmax(&x, 2, false), "argmax");
    is_invalid(argmin(&x, -3, false), "argmin");
    is_invalid(cumsum(&x, 2, false, true), "cumsum");
    is_invalid(logcumsumexp(&x, -3, false, true), "logcumsumexp");
    // A 0-D array has no axis to scan or arg-reduce.
    let s = Array::scalar(1.0f32);
    is_invalid(cumprod(&s, 0, false, true), "cumprod");
    is_invalid(argmax(&s, 0, false), "argmax");
}

#[test]
fn repeated_axes_are_an_error() {
    let x = Array::from_slice(&[1.0f32; 6], &[2, 3]).unwrap();
    is_invalid(sum(&x, &[1, 1], false), "sum");
    is_invalid(prod(&x, &[0, -2], false), "prod");
    is_invalid(all(&x, &[1, -1], false), "all");
    is_invalid(softmax(&x, &[0, -2]), "softmax");
    is_invalid(logsumexp(&x, &[1, -1], true), "logsumexp");
}

#[test]
fn reducing_nothing_without_an_identity_is_an_error() {
    let x = Array::from_slice::<f32>(&[], &[3, 0]).unwrap();
    is_invalid(max(&x, &[1], false), "max");
    is_invalid(min(&x, &[], false), "min");
    is_invalid(argmax(&x, 1, false), "argmax");
    is_invalid(argmin(&x, -1, true), "argmin");
    is_invalid(logsumexp(&x, &[1], false), "logsumexp");
    // Along the non-empty axis there is nothing to reduce per output, and no error.
    assert_eq!(max(&x, &[0], false).unwrap().shape(), [0]);
    assert_eq!(argmax(&x, 0, false).unwrap().shape(), [0]);
    // Sums, products, all and any have identities.
    assert_eq!(f64s(&sum(&x, &[1], false).unwrap()), [0.0; 3]);
    assert_eq!(f64s(&prod(&x, &[1], false).unwrap()), [1.0; 3]);
    assert_eq!(f64s(&all(&x, &[1], false).unwrap()), [1.0; 3]);
    assert_eq!(f64s(&any(&x, &[1], false).unwrap()), [0.0; 3]);
}

#[test]
fn unsupported_types_are_an_error() {
    let c = Array::from_slice(&[1.0f32, 2.0], &[2])
        .unwrap()
        .astype(DType::C64)
        .unwrap();
    for (name, r) in [
        ("max", max(&c, &[], false)),
        ("min", min(&c, &[], false)),
        ("argmax", argmax(&c, 0, false)),
        ("logsumexp", logsumexp(&c, &[], false)),
        ("softmax", softmax(&c, &[])),
        ("cummin", cummin(&c, 0, false, true)),
        ("logcumsumexp", logcumsumexp(&c, 0, false, true)),
    ] {
        match r {
            Err(Error::UnsupportedDType { op, dtype }) => {
                assert_eq!((op, dtype), (name, DType::C64));
            }
            other => panic!(
                "{name}: expected UnsupportedDType, got {:?}",
                other.map(|a| a.dtype())
            ),
        }
    }
}

#[test]
fn arrays_in_an_error_state_report_their_error() {
    let x = Array::from_slice(&[1.0f32; 4], &[4]).unwrap();
    let bad = &x + &Array::from_slice(&[1.0f32; 3], &[3]).unwrap();
    let want = bad.error().expect("the shapes do not broadcast");
    assert_eq!(sum(&bad, &[], false).err(), Some(want.clone()));
    assert_eq!(softmax(&bad, &[]).err(), Some(want.clone()));
    assert_eq!(argmax(&bad, 0, false).err(), Some(want.clone()));
    assert_eq!(cumsum(&bad, 0, false, true).err(), Some(want.clone()));
    assert_eq!(var(&bad, &[], false, 0).err(), Some(want));
}

#[test]
fn primitives_check_their_axes_when_recorded_directly() {
    use nuvec_core::Primitive;
    use nuvec_core::ops::ReduceOp;
    let x = Array::from_slice(&[1.0f32; 6], &[2, 3]).unwrap();
    let rec =
        |op, axes: Vec<usize>| Array::from_op(Primitive::Reduce { op, axes }, vec![x.clone()]);
    assert!(rec(ReduceOp::Sum, vec![1, 0]).is_err());
    assert!(rec(ReduceOp::Sum, vec![2]).is_err());
    assert!(rec(ReduceOp::LogSumExp, vec![0]).is_err());
    assert!(rec(ReduceOp::All, vec![0]).is_err()); // the primitive takes booleans
    assert!(rec(ReduceOp::Sum, vec![0, 1]).is_ok());
}

// ---------------------------------------------------------------------------------------
// Random shapes and axes.

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn sum_over_random_axes_matches_reference(
        shape in prop::collection::vec(0usize..5, 0..5),
        pick in prop::collection::vec(prop::bool::ANY, 5),
        keepdims in prop::bool::ANY,
        seed in prop::num::u64::ANY,
        layout in 0usize..3,
    ) {
        let n: usize = shape.iter().product();
        let mut rng = Rng(seed);
        // Integers: exact in every type tried, and their sums too.
        let vals = values(&mut rng, n, DType::I32, Values::General);
        let axes: Vec<isize> = (0..shape.len())
            .filter(|&i| pick[i])
            .map(|i| if seed % 2 == 0 { i as isize } else { i as isize - shape.len() as isize })
            .collect();
        let ax = norm_axes(&axes, shape.len());
        for dtype in [DType::F64, DType::F32, DType::I32] {
            let (x, logical) = build(&vals, &shape, dtype, LAYS[layout]);
            let y = sum(&x, &axes, keepdims).unwrap();
            prop_assert_eq!(y.shape(), &out_shape(&shape, &ax, keepdims)[..]);
            let want = ref_reduce(&logical, &shape, &ax, 0.0, &|a, b| a + b);
            prop_assert_eq!(f64s(&y), want);
        }
    }
}
