//! The transforms' cases, each a ratio of two timings (the reference is timed while the case
//! is prepared, as a median, and becomes the case's work):
//!
//! - `vjp_chain`: building the graphs of `vjp` (the traced forward and the backward) of a
//!   chain of 1,000 elementwise operations on a `[64]` array, over building the forward graph
//!   alone. Nothing is evaluated in either timing: this is the cost of the transform itself.
//!   (The backward alone costs the figure minus one forward.)
//! - `vmap_mlp`: a 2-layer MLP (256 → 512 → 10, tanh) written for one example and
//!   `vmap`ped over a batch of 64, built and evaluated, over the same MLP written for the
//!   batch by hand.

use std::time::Instant;

use nuvec_core::{Array, Error, add, matmul, multiply, sin, tanh, vjp, vmap};

use crate::case::{Case, Prepared, Skip, Target, Unit, unavailable};
use crate::inputs::{array, expect_close, expect_shape, output_f32, uniform};

/// Operations in the chain.
const CHAIN: usize = 1000;
/// Elements of the chain's array.
const LEN: usize = 64;
/// The MLP's input features.
const IN: usize = 256;
/// Its hidden features.
const HIDDEN: usize = 512;
/// Its outputs.
const OUT: usize = 10;
/// Examples in the batch.
const BATCH: usize = 64;

/// The CPU cases of this family.
pub fn cpu() -> Vec<Case> {
    let mut chain = Case::new(
        "vjp_chain",
        Target::Cpu,
        "[64], 1000 ops: vjp / forward (graphs built)",
        "f32",
        Unit::Ratio,
        30,
        prepare_vjp_chain,
    );
    chain.warmup = 3;
    let mut mlp = Case::new(
        "vmap_mlp",
        Target::Cpu,
        "64 x (256 -> 512 -> 10, tanh): vmap / by hand",
        "f32",
        Unit::Ratio,
        30,
        prepare_vmap_mlp,
    );
    mlp.warmup = 3;
    vec![chain, mlp]
}

/// The median time of `runs` calls of `f`, after a few untimed ones.
fn median_time(runs: usize, mut f: impl FnMut() -> nuvec_core::Result<()>) -> Result<f64, Skip> {
    for _ in 0..3 {
        f()?;
    }
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        f()?;
        times.push(started.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Ok(times[runs / 2])
}

/// The chain's operation `i` (sin, times `c`, plus `d`, tanh, in turn).
fn step(i: usize, y: &Array, c: &Array, d: &Array) -> nuvec_core::Result<Array> {
    match i % 4 {
        0 => sin(y),
        1 => multiply(y, c),
        2 => add(y, d),
        _ => tanh(y),
    }
}

/// The chain's output and the gradient of `Σ ct · output`, in f64 for one element.
fn chain_reference(x: f64, c: f64, d: f64, ct: f64) -> (f64, f64) {
    let mut y = x;
    let mut ys = Vec::with_capacity(CHAIN);
    for i in 0..CHAIN {
        ys.push(y);
        y = match i % 4 {
            0 => y.sin(),
            1 => y * c,
            2 => y + d,
            _ => y.tanh(),
        };
    }
    let mut g = ct;
    for i in (0..CHAIN).rev() {
        let v = ys[i];
        g *= match i % 4 {
            0 => v.cos(),
            1 => c,
            2 => 1.0,
            _ => 1.0 - v.tanh().powi(2),
        };
    }
    (y, g)
}

fn prepare_vjp_chain() -> Result<Prepared, Skip> {
    let (xv, cv, dv, ctv) = (
        uniform(LEN, 51),
        uniform(LEN, 52)
            .iter()
            .map(|v| 1.0 + 0.1 * v)
            .collect::<Vec<f32>>(),
        uniform(LEN, 53)
            .iter()
            .map(|v| 0.1 * v)
            .collect::<Vec<f32>>(),
        uniform(LEN, 54),
    );
    let x = array(xv.clone(), &[LEN])?;
    let c = array(cv.clone(), &[LEN])?;
    let d = array(dv.clone(), &[LEN])?;
    let ct = array(ctv.clone(), &[LEN])?;
    let f = move |xs: &[Array]| -> nuvec_core::Result<Vec<Array>> {
        let mut y = xs[0].clone();
        for i in 0..CHAIN {
            y = step(i, &y, &c, &d)?;
        }
        Ok(vec![y])
    };
    // Check the transform once, evaluated, against the f64 chain rule.
    let (out, grads) = vjp(&f, std::slice::from_ref(&x), std::slice::from_ref(&ct))?;
    let (got_out, got_grad) = (out[0].to_vec::<f32>()?, grads[0].to_vec::<f32>()?);
    for i in 0..LEN {
        let (y, g) = chain_reference(
            f64::from(xv[i]),
            f64::from(cv[i]),
            f64::from(dv[i]),
            f64::from(ctv[i]),
        );
        let wrong = |e: String| Skip::Failed(format!("wrong result: {e}"));
        expect_close("output", i, got_out[i], y, 1e-3).map_err(wrong)?;
        expect_close("gradient", i, got_grad[i], g, 1e-3 * g.abs().max(1e-3)).map_err(wrong)?;
    }
    let forward = median_time(51, || {
        let _graph = f(std::slice::from_ref(&x))?;
        Ok(())
    })?;
    Ok(Prepared {
        work: forward,
        // The graphs are built and dropped, never evaluated: nothing is returned.
        build: Box::new(move || {
            let _graphs = vjp(&f, std::slice::from_ref(&x), std::slice::from_ref(&ct))?;
            Ok(Vec::new())
        }),
        check: Box::new(|_| Ok(())),
    })
}

/// One example's MLP: `tanh(x W1 + b1) W2 + b2`.
fn mlp(x: &Array, p: &[Array]) -> nuvec_core::Result<Array> {
    let h = tanh(&add(&matmul(x, &p[0])?, &p[1])?)?;
    add(&matmul(&h, &p[2])?, &p[3])
}

fn prepare_vmap_mlp() -> Result<Prepared, Skip> {
    let scaled = |n: usize, seed: u64, s: f32| -> Vec<f32> {
        uniform(n, seed).iter().map(|v| v * s).collect()
    };
    let xv = uniform(BATCH * IN, 61);
    let pv = [
        scaled(IN * HIDDEN, 62, 1.0 / 16.0),
        scaled(HIDDEN, 63, 0.1),
        scaled(HIDDEN * OUT, 64, 1.0 / 22.0),
        scaled(OUT, 65, 0.1),
    ];
    let x = array(xv.clone(), &[BATCH, IN])?;
    let params = vec![
        array(pv[0].clone(), &[IN, HIDDEN])?,
        array(pv[1].clone(), &[HIDDEN])?,
        array(pv[2].clone(), &[HIDDEN, OUT])?,
        array(pv[3].clone(), &[OUT])?,
    ];
    let p = params.clone();
    let one = move |v: &[Array]| Ok(vec![mlp(&v[0], &p)?]);
    let batched = vmap(one, &[Some(0)], &[0]);
    match batched(std::slice::from_ref(&x)) {
        Err(Error::Unsupported { op, what }) => {
            return unavailable(&format!("the {what} rule of {op}"));
        }
        Err(e) => return Err(e.into()),
        Ok(_) => {}
    }
    let by_hand = {
        let x = x.clone();
        move || -> nuvec_core::Result<()> {
            let y = mlp(&x, &params)?;
            y.eval()
        }
    };
    let hand = median_time(31, by_hand)?;
    Ok(Prepared {
        work: hand,
        build: Box::new(move || batched(std::slice::from_ref(&x))),
        check: Box::new(move |out| {
            expect_shape(out, &[BATCH, OUT])?;
            let got = output_f32(out)?;
            for b in 0..BATCH {
                let h: Vec<f64> = (0..HIDDEN)
                    .map(|j| {
                        let s: f64 = (0..IN)
                            .map(|k| f64::from(xv[b * IN + k]) * f64::from(pv[0][k * HIDDEN + j]))
                            .sum();
                        (s + f64::from(pv[1][j])).tanh()
                    })
                    .collect();
                for o in 0..OUT {
                    let want: f64 = (0..HIDDEN)
                        .map(|j| h[j] * f64::from(pv[2][j * OUT + o]))
                        .sum::<f64>()
                        + f64::from(pv[3][o]);
                    expect_close("out", b * OUT + o, got[b * OUT + o], want, 1e-4)?;
                }
            }
            Ok(())
        }),
    })
}
