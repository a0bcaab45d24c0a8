//! [`FastOp::RmsNorm`](crate::fast::FastOp::RmsNorm) and
//! [`FastOp::LayerNorm`](crate::fast::FastOp::LayerNorm): one task per block of rows, each row
//! read into float32 once (in cache for the passes over it), its statistics accumulated in
//! float32 and the result written with the fallback's roundings (normalised value rounded to
//! the element type, then the weight, then the bias).

use super::{CpuKernel, Lane, fill_rows, param, rows_of, sum, sum_sq_dev, widest};
use crate::Result;
use crate::array::ArrayData;
use crate::fast::norms::{LayerNorm, RmsNorm};
use crate::fast::{Arg, kernel_sized};
use crate::primitive::OutputSpec;
use crate::{DType, bf16, f16};

/// Whether the kernel takes `(x, params..)`: `x` of a kernel type, the parameters of its
/// type, each 0-D or 1-D of the row's length.
fn takes_norm(args: &[Arg<'_>], params: usize) -> bool {
    if !kernel_sized(args) || args.len() != 1 + params {
        return false;
    }
    let (dtype, d) = (args[0].dtype, args[0].last());
    args[1..]
        .iter()
        .all(|p| p.dtype == dtype && (p.shape.is_empty() || p.shape == [d]))
}

impl CpuKernel for RmsNorm {
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        takes_norm(inputs, 1)
    }

    fn eval(&self, inputs: &[ArrayData], _: &[OutputSpec]) -> Result<Vec<ArrayData>> {
        Ok(vec![eval(inputs, None, self.eps)?])
    }
}

impl CpuKernel for LayerNorm {
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        takes_norm(inputs, 2)
    }

    fn eval(&self, inputs: &[ArrayData], _: &[OutputSpec]) -> Result<Vec<ArrayData>> {
        Ok(vec![eval(inputs, Some(&inputs[2]), self.eps)?])
    }
}

const OP: &str = "rms_norm";

/// One norm's inputs, read as `T`.
struct Rows<'a, T> {
    x: &'a [T],
    starts: &'a [usize],
    d: usize,
    weight: Option<&'a [T]>,
    bias: Option<&'a [T]>,
    eps: f32,
    /// Layer normalisation (centred) rather than RMS.
    centre: bool,
}

/// `(x, w)` RMS-normalised, or `(x, w, b)` layer-normalised when `bias` is given (0-D
/// parameters stand for none).
fn eval(inputs: &[ArrayData], bias: Option<&ArrayData>, eps: f32) -> Result<ArrayData> {
    let (x, starts) = rows_of(&inputs[0]);
    match x.dtype() {
        DType::F32 => typed::<f32>(&x, &starts, &inputs[1], bias, eps),
        DType::F16 => typed::<f16>(&x, &starts, &inputs[1], bias, eps),
        _ => typed::<bf16>(&x, &starts, &inputs[1], bias, eps),
    }
}

fn typed<T: Lane>(
    x: &ArrayData,
    starts: &[usize],
    weight: &ArrayData,
    bias: Option<&ArrayData>,
    eps: f32,
) -> Result<ArrayData> {
    let shape = &x.layout.shape;
    let d = shape[shape.len() - 1];
    let weight = param::<T>(weight, OP)?;
    let centre = bias.is_some();
    let bias = match bias {
        Some(b) => param::<T>(b, OP)?,
        None => None,
    };
    let rows = Rows {
        x: x.buffer.host()?.typed::<T>(OP)?,
        starts,
        d,
        weight: weight.as_deref(),
        bias: bias.as_deref(),
        eps,
        centre,
    };
    let mut out = crate::array::pool::alloc::<T>(x.layout.size());
    fill_rows(&mut out, d, &|first, chunk| block::<T>(&rows, first, chunk));
    Ok(ArrayData::from_vec(out, shape))
}

widest! {
    /// [`block_body`] with the widest vectors the CPU has.
    fn block<T: Lane>(rows: &Rows<'_, T>, first: usize, out: &mut [T]) = block_body;
}

/// Normalises the rows `first..` into `out` (whole rows).
#[inline(always)]
fn block_body<T: Lane>(rows: &Rows<'_, T>, first: usize, out: &mut [T]) {
    let d = rows.d;
    let mut scratch = vec![0f32; d];
    for (i, o) in out.chunks_exact_mut(d).enumerate() {
        let start = rows.starts[first + i];
        let x = T::widen(&rows.x[start..start + d], &mut scratch);
        let n = d as f32;
        let mean = if rows.centre { sum(x) / n } else { 0.0 };
        let inv = 1.0 / (sum_sq_dev(x, mean) / n + rows.eps).sqrt();
        match (rows.weight, rows.bias) {
            (None, None) => {
                for (o, &v) in o.iter_mut().zip(x) {
                    *o = T::down((v - mean) * inv);
                }
            }
            (Some(w), None) => {
                for ((o, &v), &w) in o.iter_mut().zip(x).zip(w) {
                    *o = T::down(T::down((v - mean) * inv).up() * w.up());
                }
            }
            (None, Some(b)) => {
                for ((o, &v), &b) in o.iter_mut().zip(x).zip(b) {
                    *o = T::down(T::down((v - mean) * inv).up() + b.up());
                }
            }
            (Some(w), Some(b)) => {
                for (((o, &v), &w), &b) in o.iter_mut().zip(x).zip(w).zip(b) {
                    let y = T::down(T::down((v - mean) * inv).up() * w.up());
                    *o = T::down(y.up() + b.up());
                }
            }
        }
    }
}
