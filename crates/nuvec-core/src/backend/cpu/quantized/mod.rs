//! Affine quantization on the CPU: [`QuantizedOp::Quantize`] and
//! [`QuantizedOp::Dequantize`] here, the quantized product in `matmul`.
//!
//! Values are packed as one little-endian stream of bits per row (MLX's layout): value `i`
//! of a group occupies bits `i · bits ..` of the group's words. A group of 32 values always
//! fills exactly `bits` words, so the kernels unpack 32 values at a time with the bit
//! positions known at compile time (one instantiation per width).

mod gemv;
mod matmul;

use std::borrow::Cow;

use rayon::prelude::*;

use super::elementwise::GRAIN;
use super::math::{AccFloat, FloatElem};
use crate::array::{ArrayData, pool};
use crate::dtype::{Element, bf16, f16};
use crate::ops::quantized::QuantizedOp;
use crate::primitive::OutputSpec;
use crate::{DType, Error, Result};

/// Runs `$body` with `$T` bound to the Rust type of a float [`DType`], or returns the error
/// for any other type.
macro_rules! with_float {
    ($op:expr, $dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            DType::F16 => {
                type $T = f16;
                $body
            }
            DType::BF16 => {
                type $T = bf16;
                $body
            }
            DType::F32 => {
                type $T = f32;
                $body
            }
            DType::F64 => {
                type $T = f64;
                $body
            }
            other => Err(Error::UnsupportedDType {
                op: $op,
                dtype: other,
            }),
        }
    };
}

/// Runs `$body` with the constant `$B` bound to a supported width (`bits`, checked when the
/// node was built).
macro_rules! with_bits {
    ($bits:expr, $B:ident => $body:expr) => {
        match $bits {
            2 => {
                const $B: usize = 2;
                $body
            }
            3 => {
                const $B: usize = 3;
                $body
            }
            4 => {
                const $B: usize = 4;
                $body
            }
            5 => {
                const $B: usize = 5;
                $body
            }
            6 => {
                const $B: usize = 6;
                $body
            }
            _ => {
                const $B: usize = 8;
                $body
            }
        }
    };
}
use with_bits;

/// Computes a quantization primitive.
pub(crate) fn eval(
    op: &QuantizedOp,
    inputs: &mut [ArrayData],
    outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    let name = op.name();
    match *op {
        QuantizedOp::Quantize { group_size, bits } => {
            with_float!(name, inputs[0].dtype(), T => {
                quantize::<T>(&inputs[0], group_size, bits as usize, outputs)
            })
        }
        QuantizedOp::Dequantize { group_size, bits } => {
            with_float!(name, outputs[0].1, T => {
                Ok(vec![dequantize::<T>(inputs, group_size, bits as usize, &outputs[0].0)?])
            })
        }
        QuantizedOp::Matmul {
            group_size,
            bits,
            transpose,
        } => with_float!(name, outputs[0].1, T => {
            let shape = &outputs[0].0;
            Ok(vec![matmul::eval::<T>(inputs, group_size, bits as usize, transpose, shape)?])
        }),
    }
}

/// The types values are computed in: `f32` (for the half types too) and `f64`.
pub(super) trait Compute: AccFloat + Send + Sync {
    /// A quantized value (below 256) exactly.
    fn small(q: u32) -> Self;
}

impl Compute for f32 {
    #[inline(always)]
    fn small(q: u32) -> f32 {
        // Through i32: x86 converts signed integers in one instruction, unsigned ones not.
        q as i32 as f32
    }
}

impl Compute for f64 {
    #[inline(always)]
    fn small(q: u32) -> f64 {
        f64::from(q)
    }
}

/// The elements of `data` in row-major order: borrowed where they already are.
fn row_major<'a, T: Element>(op: &'static str, data: &'a ArrayData) -> Result<Cow<'a, [T]>> {
    match data.contiguous_slice::<T>() {
        Some(s) => Ok(Cow::Borrowed(s)),
        None => Ok(Cow::Owned(data.to_vec::<T>(op)?)),
    }
}

/// Unpacks whole groups of 32 values (`B` words each) from `words` into `out`.
#[inline(always)]
pub(super) fn unpack<const B: usize, C: Compute>(words: &[u32], out: &mut [C]) {
    let mask = (1u32 << B) - 1;
    if 32 % B == 0 {
        for (w, o) in words.iter().zip(out.chunks_exact_mut(32 / B)) {
            for (j, v) in o.iter_mut().enumerate() {
                *v = C::small((w >> (B * j)) & mask);
            }
        }
    } else {
        for (w, o) in words.chunks_exact(B).zip(out.chunks_exact_mut(32)) {
            // Constant bit positions once the 32 steps are unrolled.
            for (i, v) in o.iter_mut().enumerate() {
                let (at, off) = (i * B / 32, i * B % 32);
                let mut q = w[at] >> off;
                if off + B > 32 {
                    q |= w[at + 1] << (32 - off);
                }
                *v = C::small(q & mask);
            }
        }
    }
}

/// Packs `values` (each below `2^bits`) into `out`, a group's words.
fn pack(values: &[u32], bits: usize, out: &mut [u32]) {
    out.fill(0);
    for (i, &q) in values.iter().enumerate() {
        let (at, off) = (i * bits / 32, i * bits % 32);
        out[at] |= q << off;
        if off + bits > 32 {
            out[at + 1] |= q >> (32 - off);
        }
    }
}

/// Unpacks whole groups of 32 values of `bits` bits (see [`unpack`]), choosing the width at
/// run time: for the kernels that unpack a few dozen values or more per call, where one
/// instantiation per width would only cost build time.
pub(super) fn unpack_dyn<C: Compute>(bits: usize, words: &[u32], out: &mut [C]) {
    with_bits!(bits, B => unpack::<B, C>(words, out))
}

/// Groups per parallel task: about [`GRAIN`] values.
fn groups_per_task(group_size: usize) -> usize {
    (GRAIN / group_size).max(1)
}

/// Runs `f(first_unit, chunk)` over `out` cut into chunks of whole units of `unit` elements,
/// over the pool when it is large (a trait object: the pool's machinery is built once per
/// element type).
fn for_units<U: Send>(out: &mut [U], unit: usize, f: &(dyn Fn(usize, &mut [U]) + Sync)) {
    let per = groups_per_task(unit);
    if out.len() <= per * unit {
        f(0, out);
    } else {
        out.par_chunks_mut(per * unit)
            .enumerate()
            .for_each(|(i, chunk)| f(i * per, chunk));
    }
}

/// `data`'s elements in the compute type, row-major: borrowed when they already are.
fn in_compute<'a, T: FloatElem>(op: &'static str, data: &'a ArrayData) -> Result<Cow<'a, [T::Acc]>>
where
    T::Acc: Compute + Element,
{
    if data.dtype() == <T::Acc as Element>::DTYPE {
        return row_major::<T::Acc>(op, data);
    }
    let values = row_major::<T>(op, data)?;
    Ok(Cow::Owned(values.iter().map(|&v| v.up()).collect()))
}

/// Quantizes every group of `w` (row-major, rows of whole groups), computing in `T::Acc`.
fn quantize<T: FloatElem>(
    w: &ArrayData,
    group_size: usize,
    bits: usize,
    outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>>
where
    T::Acc: Compute + Element,
{
    let src = in_compute::<T>("quantize", w)?;
    let (wq, scales, biases) = quantize_groups(&src, group_size, bits);
    let narrow = |v: Vec<T::Acc>| -> Vec<T> { v.into_iter().map(T::down).collect() };
    Ok(vec![
        ArrayData::from_vec(wq, &outputs[0].0),
        ArrayData::from_vec(narrow(scales), &outputs[1].0),
        ArrayData::from_vec(narrow(biases), &outputs[2].0),
    ])
}

/// The packed words, scales and biases of every group of `src`.
fn quantize_groups<C: Compute + Element>(
    src: &[C],
    group_size: usize,
    bits: usize,
) -> (Vec<u32>, Vec<C>, Vec<C>) {
    let groups = src.len() / group_size;
    let words = group_size * bits / 32;
    let mut wq = pool::alloc::<u32>(groups * words);
    let mut scales = pool::alloc::<C>(groups);
    let mut biases = pool::alloc::<C>(groups);
    let per = groups_per_task(group_size);
    let task = |i: usize, (q, (s, b)): (&mut [u32], (&mut [C], &mut [C]))| {
        let first = i * per;
        let mut ints = [0u32; 128];
        for (j, (words, (scale, bias))) in q
            .chunks_exact_mut(words)
            .zip(s.iter_mut().zip(b.iter_mut()))
            .enumerate()
        {
            let at = (first + j) * group_size;
            let ints = &mut ints[..group_size];
            (*scale, *bias) = quantize_group(&src[at..at + group_size], bits, ints);
            pack(ints, bits, words);
        }
    };
    if groups <= per {
        task(0, (&mut wq, (&mut scales, &mut biases)));
    } else {
        wq.par_chunks_mut(per * words)
            .zip(scales.par_chunks_mut(per).zip(biases.par_chunks_mut(per)))
            .enumerate()
            .for_each(|(i, parts)| task(i, parts));
    }
    (wq, scales, biases)
}

/// MLX's affine quantization of one group, step for step (so that the words, scales and
/// biases agree bit for bit): the extreme of larger magnitude becomes the bias, and the scale
/// (negative when that extreme is the maximum) is refitted so that the extreme is an exact
/// multiple of it. Writes the integers to `ints` and returns the scale and bias.
fn quantize_group<C: Compute>(w: &[C], bits: usize, ints: &mut [u32]) -> (C, C) {
    let n_bins = C::c(((1u32 << bits) - 1) as f64);
    let eps = C::c(1e-7);
    let zero = C::c(0.0);
    let mut hi = C::neg_infinity();
    let mut lo = C::infinity();
    for &v in w {
        // C++'s std::max and std::min, which keep the first argument on ties and NaN.
        if hi < v {
            hi = v;
        }
        if v < lo {
            lo = v;
        }
    }
    let low_edge = lo.abs() > hi.abs();
    let spread = (hi - lo) / n_bins;
    let mut scale = if spread < eps { eps } else { spread };
    if !low_edge {
        scale = -scale;
    }
    let edge = if low_edge { lo } else { hi };
    let q0 = (edge / scale).round_even();
    let mut bias = zero;
    if q0 != zero {
        scale = edge / q0;
        bias = edge;
    }
    for (q, &v) in ints.iter_mut().zip(w) {
        let r = ((v - bias) / scale).round_even();
        let r = if r < zero { zero } else { r };
        let r = if n_bins < r { n_bins } else { r };
        *q = r.to_u32().unwrap_or(0);
    }
    (scale, bias)
}

/// `scales · q + biases` for every value, rounded to `T` after the product and after the
/// sum (as MLX's dequantization, a multiply then an add of `T` arrays).
fn dequantize<T: FloatElem>(
    inputs: &[ArrayData],
    group_size: usize,
    bits: usize,
    shape: &[usize],
) -> Result<ArrayData>
where
    T::Acc: Compute,
{
    const OP: &str = "dequantize";
    let wq = row_major::<u32>(OP, &inputs[0])?;
    let scales = row_major::<T>(OP, &inputs[1])?;
    let biases = row_major::<T>(OP, &inputs[2])?;
    let mut out = pool::alloc::<T>(shape.iter().product());
    let words = group_size * bits / 32;
    for_units(&mut out, group_size, &|first, chunk| {
        let mut q = [T::Acc::c(0.0); 128];
        let q = &mut q[..group_size];
        for (j, o) in chunk.chunks_exact_mut(group_size).enumerate() {
            let g = first + j;
            unpack_dyn(bits, &wq[g * words..(g + 1) * words], q);
            let (s, b) = (scales[g].up(), biases[g].up());
            for (o, &v) in o.iter_mut().zip(q.iter()) {
                *o = T::down(T::down(v * s).up() + b);
            }
        }
    });
    Ok(ArrayData::from_vec(out, shape))
}
