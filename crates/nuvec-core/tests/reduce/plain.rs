//! `sum`, `prod`, `max`, `min`, `all`, `any` and `count_nonzero` over every axis list.

use nuvec_core::{DType, all, any, count_nonzero, max, min, prod, sum};

use super::*;

#[test]
fn sum_matches_reference() {
    for shapes in [SHAPES, EMPTY_SHAPES] {
        Sweep {
            name: "sum",
            dtypes: &DTYPES,
            kind: Values::General,
            op: &|x, a, k| sum(x, a, k),
            out_dtype: &widened,
            reference: &|v, s, a| ref_reduce(v, s, a, 0.0, &|x, y| x + y),
            shapes,
        }
        .run();
    }
}

#[test]
fn prod_matches_reference() {
    for shapes in [SHAPES, EMPTY_SHAPES] {
        Sweep {
            name: "prod",
            dtypes: &DTYPES,
            kind: Values::Products,
            op: &|x, a, k| prod(x, a, k),
            out_dtype: &widened,
            reference: &|v, s, a| ref_reduce(v, s, a, 1.0, &|x, y| x * y),
            shapes,
        }
        .run();
    }
}

#[test]
fn max_and_min_match_reference() {
    Sweep {
        name: "max",
        dtypes: &DTYPES,
        kind: Values::General,
        op: &|x, a, k| max(x, a, k),
        out_dtype: &|d| d,
        reference: &|v, s, a| ref_reduce(v, s, a, f64::NEG_INFINITY, &f64::max),
        shapes: SHAPES,
    }
    .run();
    Sweep {
        name: "min",
        dtypes: &DTYPES,
        kind: Values::General,
        op: &|x, a, k| min(x, a, k),
        out_dtype: &|d| d,
        reference: &|v, s, a| ref_reduce(v, s, a, f64::INFINITY, &f64::min),
        shapes: SHAPES,
    }
    .run();
}

#[test]
fn all_and_any_match_reference() {
    for shapes in [SHAPES, EMPTY_SHAPES] {
        Sweep {
            name: "all",
            dtypes: &DTYPES,
            kind: Values::Sparse,
            op: &|x, a, k| all(x, a, k),
            out_dtype: &|_| DType::Bool,
            reference: &|v, s, a| {
                ref_reduce(v, s, a, 1.0, &|x, y| {
                    f64::from(u8::from(x != 0.0 && y != 0.0))
                })
            },
            shapes,
        }
        .run();
        Sweep {
            name: "any",
            dtypes: &DTYPES,
            kind: Values::Sparse,
            op: &|x, a, k| any(x, a, k),
            out_dtype: &|_| DType::Bool,
            reference: &|v, s, a| {
                ref_reduce(v, s, a, 0.0, &|x, y| {
                    f64::from(u8::from(x != 0.0 || y != 0.0))
                })
            },
            shapes,
        }
        .run();
    }
}

#[test]
fn count_nonzero_matches_reference() {
    Sweep {
        name: "count_nonzero",
        dtypes: &DTYPES,
        kind: Values::Sparse,
        op: &|x, a, k| count_nonzero(x, a, k),
        out_dtype: &|_| DType::I32,
        reference: &|v, s, a| ref_reduce(v, s, a, 0.0, &|x, y| x + f64::from(u8::from(y != 0.0))),
        shapes: SHAPES,
    }
    .run();
}
