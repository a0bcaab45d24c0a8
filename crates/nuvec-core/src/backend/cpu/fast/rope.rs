//! [`FastOp::Rope`](crate::fast::FastOp::Rope): the cosines and sines of every (batch offset,
//! position, frequency) computed once into a table (as the fallback computes them, in
//! float32), then each row rotated in one pass.

use super::{CpuKernel, Lane, fill_rows, rows_of, widest};
use crate::array::ArrayData;
use crate::fast::Arg;
use crate::fast::rope::Rope;
use crate::primitive::OutputSpec;
use crate::{DType, Error, Result, bf16, f16};

const OP: &str = "rope";

impl CpuKernel for Rope {
    /// `(x, offset[, freqs])`: `x` of a kernel type with at least 3 axes, 32-bit integer
    /// offsets (one, or one per batch entry), float32 frequencies of `dims / 2`.
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        self.kernel_takes(inputs)
    }

    fn eval(&self, inputs: &[ArrayData], _: &[OutputSpec]) -> Result<Vec<ArrayData>> {
        Ok(vec![eval(inputs, self)?])
    }
}

/// `(x, offset[, freqs])` rotated.
fn eval(inputs: &[ArrayData], p: &Rope) -> Result<ArrayData> {
    let (x, starts) = rows_of(&inputs[0]);
    let shape = &x.layout.shape;
    let nd = shape.len();
    let (t, d) = (shape[nd - 2], shape[nd - 1]);
    let offsets: Vec<f32> = match inputs[1].dtype() {
        DType::I32 => inputs[1]
            .to_vec::<i32>(OP)?
            .iter()
            .map(|&o| o as f32)
            .collect(),
        DType::U32 => inputs[1]
            .to_vec::<u32>(OP)?
            .iter()
            .map(|&o| o as f32)
            .collect(),
        other => {
            return Err(Error::UnsupportedDType {
                op: OP,
                dtype: other,
            });
        }
    };
    let half = p.angles.dims / 2;
    let inverse_freqs: Vec<f32> = match inputs.get(2) {
        Some(f) => f.to_vec::<f32>(OP)?.iter().map(|&f| 1.0 / f).collect(),
        None => {
            // As the fallback: exp(i · step) in float32, step = −ln(base) / half.
            let step = (-f64::from(p.angles.base).ln() / half as f64) as f32;
            (0..half).map(|i| (i as f32 * step).exp()).collect()
        }
    };
    // One table per distinct offset: `[offset][position][cos (half) | sin (half)]`.
    let mut table = vec![0f32; offsets.len() * t * 2 * half];
    fill_rows(&mut table, 2 * half, &|first, chunk| {
        for (i, row) in chunk.chunks_exact_mut(2 * half).enumerate() {
            let at = first + i;
            let position = (at % t) as f32 + offsets[at / t];
            let position = position * p.angles.scale;
            let (c, s) = row.split_at_mut(half);
            for ((c, s), &f) in c.iter_mut().zip(s.iter_mut()).zip(&inverse_freqs) {
                let (sin, cos) = (position * f).sin_cos();
                *c = cos;
                *s = if p.forward { sin } else { -sin };
            }
        }
    });
    // Rows per batch entry (heads times positions), for the per-entry offsets.
    let per_batch = (x.layout.size() / shape[0].max(1)) / d.max(1);
    let job = Job {
        starts: &starts,
        d,
        t,
        half,
        per_batch,
        shared: offsets.len() == 1,
        table: &table,
        traditional: p.angles.traditional,
    };
    match x.dtype() {
        DType::F32 => typed::<f32>(&x, &job),
        DType::F16 => typed::<f16>(&x, &job),
        _ => typed::<bf16>(&x, &job),
    }
}

/// What every row's rotation needs, whatever the element type.
struct Job<'a> {
    starts: &'a [usize],
    d: usize,
    t: usize,
    half: usize,
    per_batch: usize,
    /// One offset for every batch entry.
    shared: bool,
    table: &'a [f32],
    traditional: bool,
}

fn typed<T: Lane>(x: &ArrayData, job: &Job<'_>) -> Result<ArrayData> {
    let src = x.buffer.host()?.typed::<T>(OP)?;
    let mut out = crate::array::pool::alloc::<T>(x.layout.size());
    fill_rows(&mut out, job.d, &|first, chunk| {
        block::<T>(src, job, first, chunk)
    });
    Ok(ArrayData::from_vec(out, &x.layout.shape))
}

widest! {
    /// [`block_body`] with the widest vectors the CPU has.
    fn block<T: Lane>(src: &[T], job: &Job<'_>, first: usize, out: &mut [T]) = block_body;
}

/// Rotates the rows `first..` into `out` (whole rows). With the table's sines negated for
/// the inverse, both directions are `(x1 c − x2 s, x1 s + x2 c)`.
#[inline(always)]
fn block_body<T: Lane>(src: &[T], job: &Job<'_>, first: usize, out: &mut [T]) {
    let (d, half) = (job.d, job.half);
    let mut scratch = vec![0f32; d];
    for (i, o) in out.chunks_exact_mut(d).enumerate() {
        let r = first + i;
        let entry = if job.shared { 0 } else { r / job.per_batch };
        let at = (entry * job.t + r % job.t) * 2 * half;
        let (cos, sin) = job.table[at..at + 2 * half].split_at(half);
        let start = job.starts[r];
        let x = T::widen(&src[start..start + d], &mut scratch);
        if job.traditional {
            let (xr, or) = (&x[..2 * half], &mut o[..2 * half]);
            for (((o, x), &c), &s) in or
                .chunks_exact_mut(2)
                .zip(xr.chunks_exact(2))
                .zip(cos)
                .zip(sin)
            {
                o[0] = T::down(x[0] * c - x[1] * s);
                o[1] = T::down(x[0] * s + x[1] * c);
            }
        } else {
            let (x1, x2) = (&x[..half], &x[half..2 * half]);
            let (o1, rest) = o.split_at_mut(half);
            let o2 = &mut rest[..half];
            for ((((o1, o2), (&a, &b)), &c), &s) in o1
                .iter_mut()
                .zip(o2.iter_mut())
                .zip(x1.iter().zip(x2))
                .zip(cos)
                .zip(sin)
            {
                *o1 = T::down(a * c - b * s);
                *o2 = T::down(a * s + b * c);
            }
        }
        for (o, &v) in o[2 * half..].iter_mut().zip(&x[2 * half..]) {
            *o = T::down(v);
        }
    }
}
