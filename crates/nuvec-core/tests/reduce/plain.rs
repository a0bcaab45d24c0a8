//! `sum`, `prod`, `max`, `min`, `all`, `any` and `count_nonzero` over every axis list.

use nuvec_core::{DType, all, any, count_nonzero, max, min, prod, sum};

use super::*;

/// 1 for true, 0 for false.
fn truth(b: bool) -> f64 {
    f64::from(u8::from(b))
}

#[test]
fn sum_matches_reference() {
    for shapes in [SHAPES, EMPTY_SHAPES] {
        let op: &ReduceFn = &|x, a, k| sum(x, a, k);
        sweep_fold(
            "sum",
            Values::General,
            op,
            &widened,
            0.0,
            &|x, y| x + y,
            shapes,
        );
    }
}

#[test]
fn prod_matches_reference() {
    for shapes in [SHAPES, EMPTY_SHAPES] {
        let op: &ReduceFn = &|x, a, k| prod(x, a, k);
        sweep_fold(
            "prod",
            Values::Products,
            op,
            &widened,
            1.0,
            &|x, y| x * y,
            shapes,
        );
    }
}

#[test]
fn max_and_min_match_reference() {
    let (max_op, min_op): (&ReduceFn, &ReduceFn) =
        (&|x, a, k| max(x, a, k), &|x, a, k| min(x, a, k));
    let same = &|d: DType| d;
    sweep_fold(
        "max",
        Values::General,
        max_op,
        same,
        f64::NEG_INFINITY,
        &f64::max,
        SHAPES,
    );
    sweep_fold(
        "min",
        Values::General,
        min_op,
        same,
        f64::INFINITY,
        &f64::min,
        SHAPES,
    );
}

#[test]
fn all_and_any_match_reference() {
    let boolean = &|_: DType| DType::Bool;
    for shapes in [SHAPES, EMPTY_SHAPES] {
        let op: &ReduceFn = &|x, a, k| all(x, a, k);
        let f = &|x: f64, y: f64| truth(x != 0.0 && y != 0.0);
        sweep_fold("all", Values::Sparse, op, boolean, 1.0, f, shapes);
        let op: &ReduceFn = &|x, a, k| any(x, a, k);
        let f = &|x: f64, y: f64| truth(x != 0.0 || y != 0.0);
        sweep_fold("any", Values::Sparse, op, boolean, 0.0, f, shapes);
    }
}

#[test]
fn count_nonzero_matches_reference() {
    let op: &ReduceFn = &|x, a, k| count_nonzero(x, a, k);
    let f = &|x: f64, y: f64| x + truth(y != 0.0);
    sweep_fold(
        "count_nonzero",
        Values::Sparse,
        op,
        &|_| DType::I32,
        0.0,
        f,
        SHAPES,
    );
}
