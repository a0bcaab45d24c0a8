//! [`FastOp::RmsNormVjp`](crate::fast::FastOp::RmsNormVjp) and
//! [`FastOp::LayerNormVjp`](crate::fast::FastOp::LayerNormVjp): one task per block of rows.
//! Each row of `x` and of the cotangent `g` is read into float32 once; the task writes the
//! rows of `dx` and keeps its own sums of the parameters' cotangents, which are added in
//! task order at the end (the same result for the same thread count, whatever the timing).
//!
//! Per row, with `c = x − mean(x)` (`mean` is 0 for the RMS norm), `n = 1/√(mean(c²) + eps)`
//! and `wg = g · w`: `dx = (wg − mean(wg)) · n − c · mean(wg · c) · n³` (no `mean(wg)` term
//! for the RMS norm), `dw += g · c · n`, `db += g`: the fallback's formulas, in float32.

use rayon::prelude::*;

use super::{CpuKernel, Lane, dot, param, rows_of, rows_per_task, sum, sum_sq_dev, widest};
use crate::array::ArrayData;
use crate::fast::norm_grads::{LayerNormVjp, RmsNormVjp};
use crate::fast::{Arg, kernel_sized};
use crate::primitive::OutputSpec;
use crate::{DType, Result, bf16, f16};

const OP: &str = "rms_norm_vjp";

/// Whether the kernel takes `(x, params.., g)`: `x` of a kernel type, the parameters of its
/// type, each 0-D or 1-D of the row's length, and `g` of `x`'s shape and type.
fn takes_grad(args: &[Arg<'_>], params: usize) -> bool {
    if !kernel_sized(args) || args.len() != params + 2 {
        return false;
    }
    let (x, g) = (&args[0], &args[params + 1]);
    let d = x.last();
    g.dtype == x.dtype
        && g.shape == x.shape
        && args[1..=params]
            .iter()
            .all(|p| p.dtype == x.dtype && (p.shape.is_empty() || p.shape == [d]))
}

impl CpuKernel for RmsNormVjp {
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        takes_grad(inputs, 1)
    }

    fn eval(&self, inputs: &[ArrayData], _: &[OutputSpec]) -> Result<Vec<ArrayData>> {
        eval(inputs, false, self.eps)
    }
}

impl CpuKernel for LayerNormVjp {
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        takes_grad(inputs, 2)
    }

    fn eval(&self, inputs: &[ArrayData], _: &[OutputSpec]) -> Result<Vec<ArrayData>> {
        eval(inputs, true, self.eps)
    }
}

/// `(dx, dw)` of the RMS norm, or `(dx, dw, db)` of the layer norm when `centre`.
fn eval(inputs: &[ArrayData], centre: bool, eps: f32) -> Result<Vec<ArrayData>> {
    match inputs[0].dtype() {
        DType::F32 => typed::<f32>(inputs, centre, eps),
        DType::F16 => typed::<f16>(inputs, centre, eps),
        _ => typed::<bf16>(inputs, centre, eps),
    }
}

/// One gradient's inputs, read as `T`.
struct Rows<'a, T> {
    x: &'a [T],
    x_starts: &'a [usize],
    g: &'a [T],
    g_starts: &'a [usize],
    d: usize,
    weight: Option<&'a [T]>,
    eps: f32,
    centre: bool,
}

/// One task's sums of the parameters' cotangents over its rows.
struct Partial {
    dw: Vec<f32>,
    db: Vec<f32>,
}

fn typed<T: Lane>(inputs: &[ArrayData], centre: bool, eps: f32) -> Result<Vec<ArrayData>> {
    let params = if centre { 2 } else { 1 };
    let (x, x_starts) = rows_of(&inputs[0]);
    let (g, g_starts) = rows_of(&inputs[params + 1]);
    let shape = &x.layout.shape;
    let d = shape[shape.len() - 1];
    let weight = param::<T>(&inputs[1], OP)?;
    let rows = Rows {
        x: x.buffer.host()?.typed::<T>(OP)?,
        x_starts: &x_starts,
        g: g.buffer.host()?.typed::<T>(OP)?,
        g_starts: &g_starts,
        d,
        weight: weight.as_deref(),
        eps,
        centre,
    };
    let mut dx = crate::array::pool::alloc::<T>(x.layout.size());
    let count = x_starts.len();
    let per = rows_per_task(count, d);
    let partials: Vec<Partial> = if per >= count {
        vec![block::<T>(&rows, 0, &mut dx)]
    } else {
        dx.par_chunks_mut(per * d)
            .enumerate()
            .map(|(i, chunk)| block::<T>(&rows, i * per, chunk))
            .collect()
    };
    let total = |pick: fn(&Partial) -> &Vec<f32>| -> Vec<T> {
        let mut acc = vec![0f32; d];
        for p in &partials {
            for (a, &v) in acc.iter_mut().zip(pick(p)) {
                *a += v;
            }
        }
        acc.into_iter().map(T::down).collect()
    };
    // A 0-D parameter (none) gets a zero cotangent, as in the fallback.
    let param_grad = |i: usize, pick: fn(&Partial) -> &Vec<f32>| -> ArrayData {
        if inputs[i].layout.shape.is_empty() {
            ArrayData::from_vec(vec![T::down(0.0)], &[])
        } else {
            ArrayData::from_vec(total(pick), &[d])
        }
    };
    let mut out = vec![ArrayData::from_vec(dx, shape), param_grad(1, |p| &p.dw)];
    if centre {
        out.push(param_grad(2, |p| &p.db));
    }
    Ok(out)
}

widest! {
    /// [`block_body`] with the widest vectors the CPU has.
    fn block<T: Lane>(rows: &Rows<'_, T>, first: usize, out: &mut [T]) -> Partial = block_body;
}

/// The rows `first..` of `dx` into `out` (whole rows), and their parameter sums.
#[inline(always)]
fn block_body<T: Lane>(rows: &Rows<'_, T>, first: usize, out: &mut [T]) -> Partial {
    let d = rows.d;
    let n = d as f32;
    let (mut x_wide, mut g_wide) = (vec![0f32; d], vec![0f32; d]);
    let (mut c, mut wg) = (vec![0f32; d], vec![0f32; d]);
    let mut dw = vec![0f32; d];
    let mut db = vec![0f32; if rows.centre { d } else { 0 }];
    for (i, o) in out.chunks_exact_mut(d).enumerate() {
        let (xs, gs) = (rows.x_starts[first + i], rows.g_starts[first + i]);
        let x = T::widen(&rows.x[xs..xs + d], &mut x_wide);
        let g = T::widen(&rows.g[gs..gs + d], &mut g_wide);
        let mean = if rows.centre { sum(x) / n } else { 0.0 };
        let inv = 1.0 / (sum_sq_dev(x, mean) / n + rows.eps).sqrt();
        for (c, &v) in c.iter_mut().zip(x) {
            *c = v - mean;
        }
        match rows.weight {
            Some(w) => {
                for ((wg, &g), &w) in wg.iter_mut().zip(g).zip(w) {
                    *wg = g * w.up();
                }
            }
            None => wg.copy_from_slice(g),
        }
        let wg_mean = if rows.centre { sum(&wg) / n } else { 0.0 };
        let proj = dot(&wg, &c) / n;
        let cube = proj * inv * inv * inv;
        for ((o, &wg), &c) in o.iter_mut().zip(&wg).zip(&c) {
            *o = T::down((wg - wg_mean) * inv - c * cube);
        }
        for ((dw, &g), &c) in dw.iter_mut().zip(g).zip(&c) {
            *dw += g * (c * inv);
        }
        for (db, &g) in db.iter_mut().zip(g) {
            *db += g;
        }
    }
    Partial { dw, db }
}
