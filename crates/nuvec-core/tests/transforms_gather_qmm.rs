//! Derivatives and batching of `gather_qmm`: the public operation (whose CPU graph is its
//! fallback) and the fused node built by hand, whose rules differentiate and batch that
//! fallback. The packed weights and the indices are constants; `x`, the scales and the biases
//! are differentiable.

mod common;

use common::Rng;
use common::autodiff::{check, check_vmap, random};
use nuvec_core::fast::FastOp;
use nuvec_core::*;

const GROUP: usize = 32;
const BITS: u32 = 4;

/// float64 weights `[batches, n, 32]` quantized along their rows.
fn weights(rng: &mut Rng, batches: usize, n: usize) -> (Array, Array, Array) {
    quantize(&random(rng, &[batches, n, GROUP], -1.0, 1.0), GROUP, BITS).unwrap()
}

fn node(inputs: &[Array]) -> Result<Vec<Array>> {
    let op = FastOp::GatherQmm {
        group_size: GROUP,
        bits: BITS as u8,
        transpose: true,
    };
    Array::from_op(Primitive::Fast(op), inputs.to_vec())
}

#[test]
fn gather_qmm_gradients() {
    let mut rng = Rng::new(95);
    let (wq, s, b) = weights(&mut rng, 3, 4);
    let x = random(&mut rng, &[2, 2, GROUP], -1.0, 1.0);
    let lhs = Array::from_slice(&[1u32, 0, 1, 1], &[4]).unwrap();
    let rhs = Array::from_slice(&[2u32, 2, 0, 1], &[4]).unwrap();
    let f = |a: &[Array]| {
        Ok(vec![gather_qmm(
            &a[0],
            &a[1],
            &a[2],
            &a[3],
            Some(&lhs),
            Some(&rhs),
            true,
            GROUP,
            BITS,
            false,
        )?])
    };
    let xs = [x.clone(), wq.clone(), s.clone(), b.clone()];
    check("gather_qmm", f, &xs, &mut rng);
    // The fused node: its rules go through the fallback graph.
    let g = |a: &[Array]| {
        node(&[
            a[0].clone(),
            a[1].clone(),
            a[2].clone(),
            a[3].clone(),
            lhs.clone(),
            rhs.clone(),
        ])
    };
    check("gather_qmm node", g, &xs, &mut rng);
    // Broadcast indices and a weight that is not transposed (`[k, n]`, quantized along n).
    let (wn, sn, bn) = weights(&mut rng, 2, 3);
    let xn = random(&mut rng, &[1, 2, 3], -1.0, 1.0);
    let l = Array::from_slice(&[0u32], &[1, 1]).unwrap();
    let r = Array::from_slice(&[1u32, 0], &[2, 1]).unwrap();
    let h = |a: &[Array]| {
        Ok(vec![gather_qmm(
            &a[0],
            &a[1],
            &a[2],
            &a[3],
            Some(&l),
            Some(&r),
            false,
            GROUP,
            BITS,
            true,
        )?])
    };
    check("gather_qmm plain", h, &[xn, wn, sn, bn], &mut rng);
}

#[test]
fn gather_qmm_batching() {
    let mut rng = Rng::new(96);
    let (wq, s, b) = weights(&mut rng, 3, 4);
    let idx = Array::from_slice(&[2u32, 0], &[2]).unwrap();
    let zero = Array::from_slice(&[0u32, 0], &[2]).unwrap();
    let f = |a: &[Array]| {
        Ok(vec![gather_qmm(
            &a[0],
            &a[1],
            &a[2],
            &a[3],
            Some(&zero),
            Some(&idx),
            true,
            GROUP,
            BITS,
            false,
        )?])
    };
    // x batched alone, then x and the scales and biases batched together.
    let x = random(&mut rng, &[3, 1, 2, GROUP], -1.0, 1.0);
    let xs = [x.clone(), wq.clone(), s.clone(), b.clone()];
    check_vmap("gather_qmm x", f, &xs, &[true, false, false, false]);
    let sb = random(&mut rng, &[3, 3, 4, 1], 0.5, 1.0);
    let bb = random(&mut rng, &[3, 3, 4, 1], -0.5, 0.5);
    check_vmap(
        "gather_qmm x s b",
        f,
        &[x.clone(), wq.clone(), sb, bb],
        &[true, false, true, true],
    );
    // The hand-built node batches its fallback, the indices batched too.
    let ib = Array::from_slice(&[0u32, 1, 2, 2, 1, 0], &[3, 2]).unwrap();
    let g = |a: &[Array]| {
        node(&[
            a[0].clone(),
            a[1].clone(),
            a[2].clone(),
            a[3].clone(),
            zero.clone(),
            a[4].clone(),
        ])
    };
    check_vmap(
        "gather_qmm node",
        g,
        &[x, wq, s, b, ib],
        &[true, false, false, false, true],
    );
}
