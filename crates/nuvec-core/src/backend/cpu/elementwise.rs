//! The shared machinery of elementwise kernels: how each input is read (contiguous, one
//! broadcast element, or strided), chunking over the rayon pool, and donation of an input's
//! buffer to the output. Layout is classified here once for every elementwise family.

use std::sync::Arc;

use rayon::prelude::*;

use crate::Result;
use crate::array::{ArrayData, Layout, collapse, for_each_strided};
use crate::backend::common::donation::donatable;
use crate::dtype::Element;

use super::stream::{Arith, arith_f32, fill_fresh};

/// Elements per task: below twice this, work stays on the calling thread.
pub(crate) const GRAIN: usize = 1 << 15;

/// Fills `out` chunk by chunk with `f(start, chunk)`, over the pool when it is large. `f` is
/// a trait object so that the pool's machinery is built once per element type, not once per
/// kernel (which kept compile times in check).
pub(crate) fn fill<U: Send>(out: &mut [U], f: &(dyn Fn(usize, &mut [U]) + Sync)) {
    let n = out.len();
    if n <= 2 * GRAIN {
        f(0, out);
        return;
    }
    let chunk = GRAIN.max(n.div_ceil(rayon::current_num_threads() * 4));
    out.par_chunks_mut(chunk)
        .enumerate()
        .for_each(|(i, c)| f(i * chunk, c));
}

/// How an input is read, decided once per kernel.
enum Source<'a, T> {
    /// Row-major elements, the output's index is theirs.
    Contiguous(&'a [T]),
    /// One element for every index.
    Broadcast(T),
    /// Anything else.
    Strided(&'a [T], &'a Layout),
}

impl<'a, T: Element> Source<'a, T> {
    fn new(data: &'a ArrayData, op: &'static str) -> Result<Source<'a, T>> {
        let src = data.buffer.host()?.typed::<T>(op)?;
        let layout = &data.layout;
        let n = layout.size();
        Ok(if layout.is_row_contiguous() {
            Source::Contiguous(&src[layout.offset..layout.offset + n])
        } else if layout.is_scalar_broadcast() && n > 0 {
            Source::Broadcast(src[layout.offset])
        } else {
            Source::Strided(src, layout)
        })
    }
}

/// A strided input read in row-major order, its axes merged where they allow it (once, before
/// the work is split into chunks).
pub(super) struct Walk<'a, T> {
    src: &'a [T],
    shape: Vec<usize>,
    strides: Vec<isize>,
    offset: usize,
}

impl<'a, T: Copy> Walk<'a, T> {
    /// The walk over `src` laid out as `layout`.
    pub(super) fn new(src: &'a [T], layout: &Layout) -> Walk<'a, T> {
        let (shape, mut strides) = collapse(&layout.shape, &[&layout.strides]);
        Walk {
            src,
            shape,
            strides: strides.swap_remove(0),
            offset: layout.offset,
        }
    }

    /// `f(&mut chunk[k], element start + k)` for each `k` of the chunk.
    #[inline(always)]
    pub(super) fn each<U>(&self, start: usize, chunk: &mut [U], mut f: impl FnMut(&mut U, T)) {
        let mut k = 0;
        for_each_strided(
            &self.shape,
            [&self.strides],
            [self.offset],
            start,
            chunk.len(),
            |[p]| {
                f(&mut chunk[k], self.src[p]);
                k += 1;
            },
        );
    }
}

/// The data of `shape` owning `out`, row-major.
fn output<U: Element>(out: Vec<U>, shape: &[usize]) -> ArrayData {
    ArrayData::from_vec(out, shape)
}

/// The input's elements, mutably, when its buffer may be written in place for a row-major
/// result of the same type and size ([`donatable`]).
pub(super) fn donated<T: Element>(data: &mut ArrayData) -> Option<&mut [T]> {
    let shape = data.layout.shape.clone();
    if !donatable(data, (&shape, T::DTYPE)) {
        return None;
    }
    T::host_slice_mut(Arc::get_mut(&mut data.buffer)?.host_mut().ok()?)
}

/// The donated input's buffer, laid out row-major as `shape`.
fn donated_output(data: &ArrayData, shape: &[usize]) -> ArrayData {
    data.view(Layout::contiguous(shape))
}

/// `f` of each element of `x`.
pub(crate) fn map<T: Element, U: Element>(
    x: &ArrayData,
    op: &'static str,
    f: impl Fn(T) -> U + Sync,
) -> Result<ArrayData> {
    let shape = &x.layout.shape;
    let mut out = crate::array::pool::alloc::<U>(x.layout.size());
    match Source::<T>::new(x, op)? {
        Source::Contiguous(src) => fill_fresh(&mut out, &|start, chunk| {
            for (o, &v) in chunk.iter_mut().zip(&src[start..]) {
                *o = f(v);
            }
        }),
        Source::Broadcast(v) => {
            let y = f(v);
            fill_fresh(&mut out, &|_, chunk| chunk.fill(y));
        }
        Source::Strided(src, layout) => {
            let walk = Walk::new(src, layout);
            fill_fresh(&mut out, &|start, chunk| {
                walk.each(start, chunk, |o, v| *o = f(v))
            });
        }
    }
    Ok(output(out, shape))
}

/// `f` of each element of `x`, written over `x` when its buffer can be donated.
pub(crate) fn map_same<T: Element>(
    x: &mut ArrayData,
    op: &'static str,
    f: impl Fn(T) -> T + Sync,
) -> Result<ArrayData> {
    let each = |chunk: &mut [T]| {
        for v in chunk.iter_mut() {
            *v = f(*v);
        }
    };
    if let Some(out) = in_place(x, &each) {
        return Ok(out);
    }
    map(x, op, f)
}

/// `x`'s own buffer with `f` run over its elements chunk by chunk, when it can be donated.
fn in_place<T: Element>(x: &mut ArrayData, f: &(dyn Fn(&mut [T]) + Sync)) -> Option<ArrayData> {
    let shape = x.layout.shape.clone();
    fill(donated::<T>(x)?, &|_, chunk| f(chunk));
    Some(donated_output(x, &shape))
}

/// [`map_same`] for compute-bound `f` (the exponential): the contiguous loops are compiled
/// for the widest vectors the CPU has, so one build of the crate runs AVX-512 code where it
/// can and baseline code elsewhere.
pub(crate) fn map_same_wide<T: Element>(
    x: &mut ArrayData,
    op: &'static str,
    f: impl Fn(T) -> T + Sync,
) -> Result<ArrayData> {
    if let Some(out) = in_place(x, &|chunk| apply_wide(chunk, None, &f)) {
        return Ok(out);
    }
    if !x.layout.is_row_contiguous() {
        // A row-major copy (the tiled one), then the wide loop over it in place.
        let mut copy = super::copy::to_contiguous(x);
        if let Some(out) = in_place(&mut copy, &|chunk| apply_wide(chunk, None, &f)) {
            return Ok(out);
        }
        return map(x, op, f);
    }
    let src = x.buffer.host()?.typed::<T>(op)?;
    let src = &src[x.layout.offset..x.layout.offset + x.layout.size()];
    let mut out = crate::array::pool::alloc::<T>(src.len());
    // Plain stores, not `fill_fresh`'s streamed blocks: with a dozen vector operations per
    // element the extra pass over the L1 buffer costs more than the cache it spares
    // (`exp` on [1024, 4096] f32: about 72 GB/s against 50 streamed).
    fill(&mut out, &|start, chunk| {
        apply_wide(chunk, Some(&src[start..start + chunk.len()]), &f)
    });
    Ok(output(out, &x.layout.shape))
}

/// `dst[i] = f(src[i])`, or `f(dst[i])` in place without `src`, with the widest vectors the
/// CPU has.
fn apply_wide<T: Copy, F: Fn(T) -> T>(dst: &mut [T], src: Option<&[T]>, f: &F) {
    #[inline(always)]
    fn body<T: Copy, F: Fn(T) -> T>(dst: &mut [T], src: Option<&[T]>, f: &F) {
        match src {
            Some(src) => dst.iter_mut().zip(src).for_each(|(o, &v)| *o = f(v)),
            None => dst.iter_mut().for_each(|o| *o = f(*o)),
        }
    }
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx512vl,avx2,fma,f16c")]
        fn avx512<T: Copy, F: Fn(T) -> T>(dst: &mut [T], src: Option<&[T]>, f: &F) {
            body(dst, src, f)
        }
        #[target_feature(enable = "avx2,fma,f16c")]
        fn avx2<T: Copy, F: Fn(T) -> T>(dst: &mut [T], src: Option<&[T]>, f: &F) {
            body(dst, src, f)
        }
        if super::simd::has_avx512() && std::arch::is_x86_feature_detected!("f16c") {
            // SAFETY: `avx512` needs AVX-512F/VL, AVX2, FMA and F16C, which the CPU has.
            return unsafe { avx512(dst, src, f) };
        }
        if super::simd::has_avx2() && std::arch::is_x86_feature_detected!("f16c") {
            // SAFETY: `avx2` needs AVX2, FMA and F16C, which the CPU has.
            return unsafe { avx2(dst, src, f) };
        }
    }
    body(dst, src, f)
}

/// Writes `f(out[i], b[i])` over `out`, `b` read through its source.
fn zip_into_first<T: Element, B: Element>(
    out: &mut [T],
    b: &Source<'_, B>,
    f: impl Fn(T, B) -> T + Sync,
) {
    match b {
        Source::Contiguous(src) => fill(out, &|start, chunk| {
            for (o, &v) in chunk.iter_mut().zip(&src[start..]) {
                *o = f(*o, v);
            }
        }),
        Source::Broadcast(v) => fill(out, &|_, chunk| {
            for o in chunk.iter_mut() {
                *o = f(*o, *v);
            }
        }),
        Source::Strided(src, layout) => {
            let walk = Walk::new(src, layout);
            fill(out, &|start, chunk| {
                walk.each(start, chunk, |o, v| *o = f(*o, v))
            });
        }
    }
}

/// `f(a[i], b[i])` for two inputs of one shape.
pub(crate) fn zip<A: Element, B: Element, U: Element>(
    a: &ArrayData,
    b: &ArrayData,
    op: &'static str,
    f: impl Fn(A, B) -> U + Sync,
) -> Result<ArrayData> {
    let shape = &a.layout.shape;
    let mut out = crate::array::pool::alloc::<U>(a.layout.size());
    match (Source::<A>::new(a, op)?, Source::<B>::new(b, op)?) {
        (Source::Contiguous(x), Source::Contiguous(y)) => fill_fresh(&mut out, &|start, chunk| {
            let n = chunk.len();
            for ((o, &u), &v) in chunk
                .iter_mut()
                .zip(&x[start..start + n])
                .zip(&y[start..start + n])
            {
                *o = f(u, v);
            }
        }),
        (Source::Broadcast(u), Source::Contiguous(y)) => fill_fresh(&mut out, &|start, chunk| {
            for (o, &v) in chunk.iter_mut().zip(&y[start..]) {
                *o = f(u, v);
            }
        }),
        (Source::Contiguous(x), Source::Broadcast(v)) => fill_fresh(&mut out, &|start, chunk| {
            for (o, &u) in chunk.iter_mut().zip(&x[start..]) {
                *o = f(u, v);
            }
        }),
        (Source::Broadcast(u), Source::Broadcast(v)) => {
            let y = f(u, v);
            fill_fresh(&mut out, &|_, chunk| chunk.fill(y));
        }
        _ => {
            let (sa, sb) = (
                a.buffer.host()?.typed::<A>(op)?,
                b.buffer.host()?.typed::<B>(op)?,
            );
            let (cshape, cs) = collapse(shape, &[&a.layout.strides, &b.layout.strides]);
            let offsets = [a.layout.offset, b.layout.offset];
            fill_fresh(&mut out, &|start, chunk| {
                let mut k = 0;
                for_each_strided(
                    &cshape,
                    [&cs[0], &cs[1]],
                    offsets,
                    start,
                    chunk.len(),
                    |[p, q]| {
                        chunk[k] = f(sa[p], sb[q]);
                        k += 1;
                    },
                );
            });
        }
    }
    Ok(output(out, shape))
}

/// `f(a[i], b[i])` of one type, written over `a` or `b` when one of them can be donated.
pub(crate) fn zip_same<T: Element>(
    inputs: &mut [ArrayData],
    op: &'static str,
    f: impl Fn(T, T) -> T + Sync,
) -> Result<ArrayData> {
    let shape = inputs[0].layout.shape.clone();
    let (first, rest) = inputs.split_at_mut(1);
    let (a, b) = (&mut first[0], &mut rest[0]);
    if let Some(out) = donated::<T>(a) {
        zip_into_first(out, &Source::<T>::new(b, op)?, &f);
        return Ok(donated_output(a, &shape));
    }
    if let Some(out) = donated::<T>(b) {
        zip_into_first(out, &Source::<T>::new(a, op)?, |y, x| f(x, y));
        return Ok(donated_output(b, &shape));
    }
    zip(a, b, op, f)
}

/// `a op b` for two row-major `f32` inputs of one shape, neither of which can be donated,
/// by the streaming kernel of [`arith_f32`]; `None` where that kernel does not apply.
pub(crate) fn zip_f32_streamed(inputs: &mut [ArrayData], op: Arith) -> Option<ArrayData> {
    let (first, rest) = inputs.split_at_mut(1);
    let (a, b) = (&mut first[0], &mut rest[0]);
    if !a.layout.is_row_contiguous()
        || !b.layout.is_row_contiguous()
        || donated::<f32>(a).is_some()
        || donated::<f32>(b).is_some()
    {
        return None;
    }
    let n = a.layout.size();
    let x = a.buffer.host().ok()?.typed::<f32>(op.name()).ok()?;
    let y = b.buffer.host().ok()?.typed::<f32>(op.name()).ok()?;
    let (x, y) = (
        &x[a.layout.offset..a.layout.offset + n],
        &y[b.layout.offset..b.layout.offset + n],
    );
    if y.len() != n || b.layout.shape != a.layout.shape {
        return None;
    }
    let mut out = crate::array::pool::alloc::<f32>(n);
    if !arith_f32(op, &mut out, x, y) {
        crate::array::pool::release(<f32 as Element>::into_host(out));
        return None;
    }
    Some(output(out, &a.layout.shape))
}

/// `f(a[i], b[i], c[i])` for three inputs of one shape.
pub(crate) fn zip3<A: Element, B: Element, C: Element, U: Element>(
    a: &ArrayData,
    b: &ArrayData,
    c: &ArrayData,
    op: &'static str,
    f: impl Fn(A, B, C) -> U + Sync,
) -> Result<ArrayData> {
    let shape = &a.layout.shape;
    let mut out = crate::array::pool::alloc::<U>(a.layout.size());
    match (
        Source::<A>::new(a, op)?,
        Source::<B>::new(b, op)?,
        Source::<C>::new(c, op)?,
    ) {
        (Source::Contiguous(x), Source::Contiguous(y), Source::Contiguous(z)) => {
            fill_fresh(&mut out, &|start, chunk| {
                let n = chunk.len();
                let it = chunk
                    .iter_mut()
                    .zip(&x[start..start + n])
                    .zip(&y[start..start + n])
                    .zip(&z[start..start + n]);
                for (((o, &u), &v), &w) in it {
                    *o = f(u, v, w);
                }
            })
        }
        (Source::Contiguous(x), Source::Contiguous(y), Source::Broadcast(w)) => {
            fill_fresh(&mut out, &|start, chunk| {
                let n = chunk.len();
                for ((o, &u), &v) in chunk
                    .iter_mut()
                    .zip(&x[start..start + n])
                    .zip(&y[start..start + n])
                {
                    *o = f(u, v, w);
                }
            })
        }
        (Source::Contiguous(x), Source::Broadcast(v), Source::Contiguous(z)) => {
            fill_fresh(&mut out, &|start, chunk| {
                let n = chunk.len();
                for ((o, &u), &w) in chunk
                    .iter_mut()
                    .zip(&x[start..start + n])
                    .zip(&z[start..start + n])
                {
                    *o = f(u, v, w);
                }
            })
        }
        _ => {
            let sa = a.buffer.host()?.typed::<A>(op)?;
            let sb = b.buffer.host()?.typed::<B>(op)?;
            let sc = c.buffer.host()?.typed::<C>(op)?;
            let (cshape, cs) = collapse(
                shape,
                &[&a.layout.strides, &b.layout.strides, &c.layout.strides],
            );
            let offsets = [a.layout.offset, b.layout.offset, c.layout.offset];
            fill_fresh(&mut out, &|start, chunk| {
                let mut k = 0;
                for_each_strided(
                    &cshape,
                    [&cs[0], &cs[1], &cs[2]],
                    offsets,
                    start,
                    chunk.len(),
                    |[p, q, r]| {
                        chunk[k] = f(sa[p], sb[q], sc[r]);
                        k += 1;
                    },
                );
            });
        }
    }
    Ok(output(out, shape))
}
