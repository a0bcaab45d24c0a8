//! The fused operations ([`FastOp`]) on the CPU.
//!
//! Kernels compute the normalisations ([`FastOp::RmsNorm`], [`FastOp::LayerNorm`]) and their
//! gradients ([`FastOp::RmsNormVjp`], [`FastOp::LayerNormVjp`]), the rotary embedding ([`FastOp::Rope`]) and decoding attention ([`FastOp::Attention`] with a
//! few query rows per head, no array mask nor sinks) in float32, float16 and bfloat16. Each
//! is a [`CpuKernel`] implemented for its operation's unit, in the file of its family; its
//! [`CpuKernel::takes`] is what the public operations ask before recording a fused node on the
//! CPU stream, so everything else is recorded as its fallback graph. A fused node evaluated
//! here that no kernel takes (one built by hand, or moved from a GPU stream) runs its fallback
//! graph on the evaluated inputs.
//!
//! The kernels read one row (or one key block) at a time into float32, accumulate in float32,
//! and split their rows over the rayon pool; the inner loops are written so that the compiler
//! vectorises them, compiled for the widest vectors the CPU has.

mod attention;
mod norm_grads;
mod norms;
mod rope;

use rayon::prelude::*;

use super::math::FloatElem;
use crate::array::{ArrayData, HostData, Layout};
use crate::dtype::Element;
use crate::fast::{Arg, FastOp, Fused};
use crate::primitive::OutputSpec;
use crate::{Array, Device, Error, Result, Stream, bf16, f16};

/// A fused operation's CPU kernel.
pub(crate) trait CpuKernel {
    /// Whether the kernel computes the operation for inputs of these shapes and types (any
    /// layouts).
    fn takes(&self, inputs: &[Arg<'_>]) -> bool;

    /// The outputs, from inputs the kernel takes, their data on the host.
    fn eval(&self, inputs: &[ArrayData], outputs: &[OutputSpec]) -> Result<Vec<ArrayData>>;
}

/// The inputs of a node being evaluated as [`Arg`]s.
pub(crate) fn args_of_data(inputs: &[ArrayData]) -> Vec<Arg<'_>> {
    inputs
        .iter()
        .map(|d| Arg {
            shape: &d.layout.shape,
            dtype: d.dtype(),
        })
        .collect()
}

/// Computes a fused node's outputs: with its CPU kernel where that takes the inputs, else
/// through the fallback graph.
pub(super) fn eval(
    op: &FastOp,
    inputs: &mut [ArrayData],
    outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    let unit = op.unit();
    match unit.cpu() {
        Some(kernel) if kernel.takes(&args_of_data(inputs)) => {
            for data in inputs.iter() {
                data.buffer.ensure_host()?;
            }
            kernel.eval(inputs, outputs)
        }
        _ => fallback_on(Stream::default_for(Device::cpu()), &*unit, inputs, outputs),
    }
}

/// Runs a fused node's fallback graph on `stream` over arrays made from the inputs' data:
/// for nodes no kernel takes (built by hand) and the GPU operations whose kernels are
/// pending. The inputs are moved into those arrays, so that a buffer this node owned alone
/// (a cache written in place, say) can still be donated inside the graph.
pub(crate) fn fallback_on(
    stream: Stream,
    unit: &dyn Fused,
    inputs: &mut [ArrayData],
    outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    crate::fast::count_nested_fallback();
    let empty = || ArrayData::from_host(HostData::Bool(Vec::new()), &[0]);
    crate::with_stream(stream, || {
        let leaves: Vec<Array> = inputs
            .iter_mut()
            .map(|data| Array::from_data(std::mem::replace(data, empty())))
            .collect();
        let results = unit.fallback(&leaves)?;
        // Only the graph holds the leaves now.
        drop(leaves);
        crate::eval(&results)?;
        if results.len() != outputs.len() {
            return Err(mismatch(unit, "a different number of outputs"));
        }
        results
            .iter()
            .zip(outputs)
            .map(|(a, (shape, dtype))| {
                if a.shape() != shape.as_slice() || a.dtype() != *dtype {
                    return Err(mismatch(unit, "an output of another shape or type"));
                }
                a.data().cloned().ok_or_else(|| {
                    Error::Device(format!("{}: an output was not computed", unit.name()))
                })
            })
            .collect()
    })
}

fn mismatch(unit: &dyn Fused, what: &str) -> Error {
    Error::Device(format!(
        "{}: the fallback graph produced {what} than the node declares",
        unit.name()
    ))
}

/// The element types the kernels take, computed in float32.
pub(super) trait Lane: FloatElem<Acc = f32> + Element + Default {
    /// `row` as float32: the row itself for `f32`, else converted into `scratch` (at least
    /// as long).
    fn widen<'a>(row: &'a [Self], scratch: &'a mut [f32]) -> &'a [f32];
}

impl Lane for f32 {
    #[inline(always)]
    fn widen<'a>(row: &'a [f32], _: &'a mut [f32]) -> &'a [f32] {
        row
    }
}

macro_rules! half_lane {
    ($t:ty, $up:expr) => {
        impl Lane for $t {
            #[inline(always)]
            fn widen<'a>(row: &'a [$t], scratch: &'a mut [f32]) -> &'a [f32] {
                let out = &mut scratch[..row.len()];
                for (o, &v) in out.iter_mut().zip(row) {
                    #[allow(clippy::redundant_closure_call)]
                    let w = ($up)(v);
                    *o = w;
                }
                out
            }
        }
    };
}

half_lane!(f16, f16::to_f32);
// A bfloat16 is the top half of a float32 (NaNs included): a shift, which vectorises.
half_lane!(bf16, |v: bf16| f32::from_bits(u32::from(v.to_bits()) << 16));

/// Runs `$body::<T>` compiled for AVX-512, AVX2 or the baseline, the widest the CPU has.
macro_rules! widest {
    ($(#[$doc:meta])* fn $name:ident<T: Lane>($($arg:ident: $ty:ty),*) $(-> $ret:ty)? = $body:ident;) => {
        $(#[$doc])*
        fn $name<T: Lane>($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512vl,avx2,fma,f16c")]
                fn avx512<T: Lane>($($arg: $ty),*) $(-> $ret)? {
                    $body::<T>($($arg),*)
                }
                #[target_feature(enable = "avx2,fma,f16c")]
                fn avx2<T: Lane>($($arg: $ty),*) $(-> $ret)? {
                    $body::<T>($($arg),*)
                }
                let f16c = std::arch::is_x86_feature_detected!("f16c");
                if crate::backend::cpu::simd::has_avx512() && f16c {
                    // SAFETY: `avx512` needs AVX-512F/VL, AVX2, FMA and F16C, which the CPU has.
                    return unsafe { avx512::<T>($($arg),*) };
                }
                if crate::backend::cpu::simd::has_avx2() && f16c {
                    // SAFETY: `avx2` needs AVX2, FMA and F16C, which the CPU has.
                    return unsafe { avx2::<T>($($arg),*) };
                }
            }
            $body::<T>($($arg),*)
        }
    };
}
pub(super) use widest;

/// The buffer position of the first element of every row (last axis) of `layout`, in
/// row-major order of the rows, when each row is unit-stride; `None` otherwise.
pub(super) fn row_starts(layout: &Layout) -> Option<Vec<usize>> {
    let nd = layout.shape.len();
    let d = layout.shape.last().copied().unwrap_or(1);
    if nd == 0 || (d > 1 && layout.strides[nd - 1] != 1) {
        return None;
    }
    let lead = &layout.shape[..nd - 1];
    let strides = &layout.strides[..nd - 1];
    let rows: usize = lead.iter().product();
    let mut starts = Vec::with_capacity(rows);
    let mut index = vec![0usize; lead.len()];
    let mut at = layout.offset as isize;
    for _ in 0..rows {
        starts.push(at as usize);
        // The next row: an odometer over the leading axes.
        for ax in (0..lead.len()).rev() {
            index[ax] += 1;
            at += strides[ax];
            if index[ax] < lead[ax] {
                break;
            }
            at -= strides[ax] * lead[ax] as isize;
            index[ax] = 0;
        }
    }
    Some(starts)
}

/// `data` (copied row-major when its rows are not unit-stride) with its row starts.
pub(super) fn rows_of(data: &ArrayData) -> (ArrayData, Vec<usize>) {
    match row_starts(&data.layout) {
        Some(starts) => (data.clone(), starts),
        None => {
            let copy = super::copy::to_contiguous(data);
            let starts = row_starts(&copy.layout).expect("a row-major copy has unit-stride rows");
            (copy, starts)
        }
    }
}

/// A 1-D parameter as a row-major slice of `T`, or `None` for a 0-D one (no parameter).
pub(super) fn param<T: Element>(data: &ArrayData, op: &'static str) -> Result<Option<Vec<T>>> {
    if data.layout.shape.is_empty() {
        return Ok(None);
    }
    Ok(Some(data.to_vec::<T>(op)?))
}

/// Rows of `d` elements per task: enough for the pool's overhead to vanish, few enough
/// that every thread gets several tasks.
pub(super) fn rows_per_task(rows: usize, d: usize) -> usize {
    const TASK_ELEMENTS: usize = 1 << 14;
    let by_size = TASK_ELEMENTS.div_ceil(d.max(1));
    let by_count = rows.div_ceil(4 * rayon::current_num_threads());
    by_size.min(by_count).max(1)
}

/// Fills `out` (rows of `d` elements) by `f(first_row, chunk)` over blocks of whole rows,
/// over the pool when there are several blocks. `f` is a trait object so that the pool's
/// machinery is built once per element type.
pub(super) fn fill_rows<U: Send>(out: &mut [U], d: usize, f: &(dyn Fn(usize, &mut [U]) + Sync)) {
    let rows = out.len() / d.max(1);
    let per = rows_per_task(rows, d);
    if per >= rows {
        f(0, out);
        return;
    }
    out.par_chunks_mut(per * d)
        .enumerate()
        .for_each(|(i, chunk)| f(i * per, chunk));
}

/// `f(i)` for `i` in `0..n`, over the pool.
pub(super) fn par_map<R: Send>(n: usize, f: &(dyn Fn(usize) -> R + Sync)) -> Vec<R> {
    (0..n).into_par_iter().map(f).collect()
}

/// `Σ a[i] · b[i]` in float32 over 16 running sums (one vector register).
#[inline(always)]
pub(super) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0f32; 16];
    let (ca, cb) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    // One row of accumulators updated in step: the loop vectoriser's form.
    for (xa, xb) in ca.zip(cb) {
        for ((s, &x), &y) in acc.iter_mut().zip(xa).zip(xb) {
            *s += x * y;
        }
    }
    reduce16(acc) + tail
}

/// `Σ a[i]` in float32 over 16 running sums.
#[inline(always)]
pub(super) fn sum(a: &[f32]) -> f32 {
    let mut acc = [0f32; 16];
    let chunks = a.chunks_exact(16);
    let tail: f32 = chunks.remainder().iter().sum();
    for xa in chunks {
        for (s, &x) in acc.iter_mut().zip(xa) {
            *s += x;
        }
    }
    reduce16(acc) + tail
}

/// `Σ (a[i] − c)²` in float32 over 16 running sums.
#[inline(always)]
pub(super) fn sum_sq_dev(a: &[f32], c: f32) -> f32 {
    let mut acc = [0f32; 16];
    let chunks = a.chunks_exact(16);
    let tail: f32 = chunks.remainder().iter().map(|v| (v - c) * (v - c)).sum();
    for xa in chunks {
        for (s, &x) in acc.iter_mut().zip(xa) {
            *s += (x - c) * (x - c);
        }
    }
    reduce16(acc) + tail
}

/// The sum of 16 partial sums, pairwise.
#[inline(always)]
fn reduce16(acc: [f32; 16]) -> f32 {
    let mut h = [0f32; 8];
    for (i, h) in h.iter_mut().enumerate() {
        *h = acc[i] + acc[i + 8];
    }
    let q = [h[0] + h[4], h[1] + h[5], h[2] + h[6], h[3] + h[7]];
    (q[0] + q[2]) + (q[1] + q[3])
}
