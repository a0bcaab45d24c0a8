//! Convolutions on the CPU.
//!
//! Two paths, both over blocks of output rows (one row = one output position's channels) spread
//! over the rayon pool:
//! - depthwise (`groups = C_in = C_out`): each output row is a sum over the kernel taps of an
//!   input row times that tap's per-channel weights, vectorised along the channels. This is the
//!   short causal convolution of Mamba-style language models, and a product would waste most of
//!   its work on zeros. With fewer rows than threads (the weight's cotangent: a few outputs of
//!   very many taps) the channels are split instead, taps outermost;
//! - everything else: the block's input patches are gathered into a matrix (im2col), one row per
//!   output position and one column per (tap, channel), and multiplied by each group's weights
//!   with a single-threaded `gemm`. A block's patch matrix stays within the core's cache; a 1×1
//!   kernel over a row-major input skips the gathering.
//!
//! `f16` and `bf16` compute in `f32` (patches and weights widened, the output rounded once), as
//! the matrix products do. Any input layout whose channels are adjacent is read in place; other
//! layouts (and the weights, which are small) are copied to row-major first. Every spatial
//! problem is handled as a 3-D one, with leading axes of size 1.

use std::borrow::Cow;

use gemm::Parallelism;
use half::slice::HalfFloatSliceExt;
use num_traits::{One, Zero};
use rayon::prelude::*;

use super::copy::to_contiguous_shared;
use super::elementwise::fill;
use super::math::AccFloat;
use crate::array::{ArrayData, Layout, pool};
use crate::dtype::{Element, bf16, f16};
use crate::ops::conv::{ConvOp, dilated};
use crate::primitive::OutputSpec;
use crate::{DType, Error, Result};

/// Patch-matrix elements a block aims for (512 KiB of `f32`): small enough for the L2 cache.
const PATCH_ELEMENTS: usize = 1 << 17;
/// Output elements a depthwise block aims for.
const DEPTHWISE_ELEMENTS: usize = 1 << 16;
/// Multiply-adds below which a convolution stays on the calling thread.
const THREADED_WORK: usize = 1 << 16;
/// Marks a tap that falls on padding (or between the elements of a dilated input).
const OUTSIDE: usize = usize::MAX;

/// Computes a convolution.
pub(crate) fn eval(
    op: &ConvOp,
    inputs: &mut [ArrayData],
    outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    let (shape, dtype) = (&outputs[0].0, outputs[0].1);
    let name = op.name();
    // Channels must be adjacent for the row reads; the weights are read as a row-major matrix.
    let x = &inputs[0];
    let c_in = x.layout.shape[x.layout.shape.len() - 1];
    let x = if c_in > 1 && x.layout.strides[x.layout.strides.len() - 1] != 1 {
        super::copy::to_contiguous(x)
    } else {
        x.clone()
    };
    let w = to_contiguous_shared(&inputs[1]);
    let geo = Geometry::new(op, &x, &w, shape);
    let data = match dtype {
        DType::F32 => run::<f32>(name, &geo, &x, &w, shape)?,
        DType::F64 => run::<f64>(name, &geo, &x, &w, shape)?,
        DType::F16 => run::<f16>(name, &geo, &x, &w, shape)?,
        DType::BF16 => run::<bf16>(name, &geo, &x, &w, shape)?,
        other => {
            return Err(Error::UnsupportedDType {
                op: name,
                dtype: other,
            });
        }
    };
    Ok(vec![data])
}

/// An element type and the type it computes in, with slice conversions between the two.
trait ConvElem: Element {
    /// `f32` for `f16`, `bf16` and `f32`; `f64` for `f64`.
    type A: AccFloat + Element;
    /// `dst[i] = src[i]` widened.
    fn widen(src: &[Self], dst: &mut [Self::A]);
    /// `dst[i] = src[i]` rounded.
    fn narrow(src: &[Self::A], dst: &mut [Self]);
    /// The elements themselves when they are of the computing type.
    fn as_a(v: &[Self]) -> Option<&[Self::A]>;
    /// The elements themselves, mutably, when they are of the computing type.
    fn as_a_mut(v: &mut [Self]) -> Option<&mut [Self::A]>;
}

macro_rules! native_elem {
    ($t:ty) => {
        impl ConvElem for $t {
            type A = $t;
            fn widen(src: &[$t], dst: &mut [$t]) {
                dst.copy_from_slice(src);
            }
            fn narrow(src: &[$t], dst: &mut [$t]) {
                dst.copy_from_slice(src);
            }
            fn as_a(v: &[$t]) -> Option<&[$t]> {
                Some(v)
            }
            fn as_a_mut(v: &mut [$t]) -> Option<&mut [$t]> {
                Some(v)
            }
        }
    };
}

macro_rules! half_elem {
    ($t:ty, $widen:expr, $narrow:expr) => {
        impl ConvElem for $t {
            type A = f32;
            fn widen(src: &[$t], dst: &mut [f32]) {
                $widen(src, dst);
            }
            fn narrow(src: &[f32], dst: &mut [$t]) {
                $narrow(src, dst);
            }
            fn as_a(_: &[$t]) -> Option<&[f32]> {
                None
            }
            fn as_a_mut(_: &mut [$t]) -> Option<&mut [f32]> {
                None
            }
        }
    };
}

native_elem!(f32);
native_elem!(f64);
// `half` converts `f16` slices with F16C where the CPU has it, and `bf16` ones a scalar at a
// time: the latter get vectorised loops here.
half_elem!(
    f16,
    |s: &[f16], d: &mut [f32]| s.convert_to_f32_slice(d),
    |s: &[f32], d: &mut [f16]| d.convert_from_f32_slice(s)
);
half_elem!(bf16, widen_bf16, narrow_bf16);

/// The sizes of a convolution, every spatial problem seen as 3-D, and where each tap of each
/// output position reads.
struct Geometry {
    n: usize,
    out_sp: [usize; 3],
    k_sp: [usize; 3],
    c_in: usize,
    c_out: usize,
    groups: usize,
    /// Input channels per group.
    cg: usize,
    /// Output channels per group.
    og: usize,
    /// Kernel taps (the product of `k_sp`).
    taps: usize,
    /// Per spatial axis, `table[a][o · K + k]`: the input coordinate that output `o` reads at
    /// tap `k` (of the weight as stored, so the flip lives here), or [`OUTSIDE`].
    table: [Vec<usize>; 3],
    /// The input's offset when the patch matrix is the input itself.
    patches_in_place: Option<usize>,
    /// The input's offset and its strides along N and the three spatial axes.
    x_offset: isize,
    x_strides: [isize; 4],
}

impl Geometry {
    fn new(op: &ConvOp, x: &ArrayData, w: &ArrayData, out: &[usize]) -> Geometry {
        let d = op.spatial();
        let (xs, ws) = (&x.layout.shape, &w.layout.shape);
        let lead = 3 - d;
        let mut in_sp = [1; 3];
        let mut out_sp = [1; 3];
        let mut k_sp = [1; 3];
        let mut x_strides = [x.layout.strides[0], 0, 0, 0];
        let mut table: [Vec<usize>; 3] = [vec![0], vec![0], vec![0]];
        for i in 0..d {
            let a = lead + i;
            in_sp[a] = xs[i + 1];
            out_sp[a] = out[i + 1];
            k_sp[a] = ws[i + 1];
            x_strides[a + 1] = x.layout.strides[i + 1];
            let (stride, kd, id) = (op.strides[i], op.kernel_dilation[i], op.input_dilation[i]);
            let extent = dilated(in_sp[a], id) as isize;
            let lo = op.padding_lo[i];
            let k = k_sp[a];
            let mut t = Vec::with_capacity(out_sp[a] * k);
            for o in 0..out_sp[a] {
                for j in 0..k {
                    let tap = if op.flip { k - 1 - j } else { j };
                    let q = (o * stride + tap * kd) as isize - lo;
                    let inside = q >= 0 && q < extent && (q as usize).is_multiple_of(id);
                    t.push(if inside { q as usize / id } else { OUTSIDE });
                }
            }
            table[a] = t;
        }
        let (c_in, c_out, groups) = (xs[d + 1], ws[0], op.groups);
        let taps = k_sp.iter().product();
        // A 1×1 kernel at stride 1 without padding or dilation over a row-major input: the
        // patch matrix is the input itself.
        let in_place = taps == 1
            && op.strides.iter().all(|&s| s == 1)
            && op.input_dilation.iter().all(|&s| s == 1)
            && op.padding_lo.iter().chain(&op.padding_hi).all(|&p| p == 0)
            && x.layout.is_row_contiguous();
        Geometry {
            n: xs[0],
            out_sp,
            k_sp,
            c_in,
            c_out,
            groups,
            cg: c_in / groups,
            og: c_out / groups,
            taps,
            table,
            patches_in_place: in_place.then_some(x.layout.offset),
            x_offset: x.layout.offset as isize,
            x_strides,
        }
    }

    /// The number of output rows (positions).
    fn rows(&self) -> usize {
        self.n * self.out_sp.iter().product::<usize>()
    }

    /// Calls `f(tap, position)` for every kernel tap of output row `r`, in the weight's tap
    /// order, with the buffer position of the input row the tap reads (`None` on padding).
    #[inline(always)]
    fn for_taps(&self, r: usize, mut f: impl FnMut(usize, Option<usize>)) {
        let [o0, o1, o2] = [
            r / (self.out_sp[1] * self.out_sp[2]) % self.out_sp[0],
            r / self.out_sp[2] % self.out_sp[1],
            r % self.out_sp[2],
        ];
        let n = r / (self.out_sp[0] * self.out_sp[1] * self.out_sp[2]);
        let [k0, k1, k2] = self.k_sp;
        let s = self.x_strides;
        let base = self.x_offset + n as isize * s[0];
        let (t0, t1, t2) = (
            &self.table[0][o0 * k0..(o0 + 1) * k0],
            &self.table[1][o1 * k1..(o1 + 1) * k1],
            &self.table[2][o2 * k2..(o2 + 1) * k2],
        );
        let mut tap = 0;
        for &i0 in t0 {
            for &i1 in t1 {
                for &i2 in t2 {
                    let pos = if i0 == OUTSIDE || i1 == OUTSIDE || i2 == OUTSIDE {
                        None
                    } else {
                        let p = base + i0 as isize * s[1] + i1 as isize * s[2] + i2 as isize * s[3];
                        Some(p as usize)
                    };
                    f(tap, pos);
                    tap += 1;
                }
            }
        }
    }
}

/// Runs `f(first_row, block)` over consecutive blocks of `rows` output rows of `len` elements
/// each, over the pool when `parallel`.
fn for_blocks<U: Send>(
    out: &mut [U],
    rows: usize,
    len: usize,
    parallel: bool,
    f: &(dyn Fn(usize, &mut [U]) + Sync),
) {
    let block = rows * len;
    if parallel {
        out.par_chunks_mut(block)
            .enumerate()
            .for_each(|(i, b)| f(i * rows, b));
    } else {
        out.chunks_mut(block)
            .enumerate()
            .for_each(|(i, b)| f(i * rows, b));
    }
}

/// The convolution in element type `T`.
fn run<T: ConvElem>(
    name: &'static str,
    geo: &Geometry,
    x: &ArrayData,
    w: &ArrayData,
    shape: &[usize],
) -> Result<ArrayData> {
    let xs = x.buffer.host()?.typed::<T>(name)?;
    let ws = w.buffer.host()?.typed::<T>(name)?;
    let ws = &ws[w.layout.offset..w.layout.offset + w.layout.size()];
    let mut out = pool::alloc::<T>(shape.iter().product());
    if out.is_empty() {
        return Ok(ArrayData::from_vec(out, shape));
    }
    if geo.cg == 0 {
        // No input channels: every output is an empty sum.
        out.fill(T::default());
    } else if geo.cg == 1 && geo.og == 1 {
        depthwise::<T>(name, geo, xs, w, &mut out)?;
    } else {
        general::<T>(geo, xs, ws, &mut out);
    }
    Ok(ArrayData::from_vec(out, shape))
}

/// Runs `f(dst, src, w)` compiled for the widest vectors the CPU has: `f` (a closure) is
/// inlined into one copy of its caller per instruction set, as `map_same_wide` does.
fn widest<D, S, W>(dst: &mut [D], src: &[S], w: &[W], f: impl Fn(&mut [D], &[S], &[W])) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
        fn avx512<D, S, W>(dst: &mut [D], src: &[S], w: &[W], f: impl Fn(&mut [D], &[S], &[W])) {
            f(dst, src, w)
        }
        #[target_feature(enable = "avx2,fma")]
        fn avx2<D, S, W>(dst: &mut [D], src: &[S], w: &[W], f: impl Fn(&mut [D], &[S], &[W])) {
            f(dst, src, w)
        }
        if super::simd::has_avx512() {
            // SAFETY: `avx512` needs AVX-512F/VL, AVX2 and FMA, which the CPU has.
            return unsafe { avx512(dst, src, w, f) };
        }
        if super::simd::has_avx2() {
            // SAFETY: `avx2` needs AVX2 and FMA, which the CPU has.
            return unsafe { avx2(dst, src, w, f) };
        }
    }
    f(dst, src, w)
}

/// `acc[i] = x[i] · w[i]` for the first tap (so that the output needs no zeroing pass), then
/// `acc[i] += x[i] · w[i]`.
fn axpy<A: AccFloat>(acc: &mut [A], x: &[A], w: &[A], first: bool) {
    if first {
        widest(acc, x, w, |acc, x, w| {
            for ((a, &x), &w) in acc.iter_mut().zip(x).zip(w) {
                *a = x * w;
            }
        });
    } else {
        widest(acc, x, w, |acc, x, w| {
            for ((a, &x), &w) in acc.iter_mut().zip(x).zip(w) {
                *a = *a + x * w;
            }
        });
    }
}

/// `bf16` to `f32`: the bits shifted into the high half.
fn widen_bf16(src: &[bf16], dst: &mut [f32]) {
    widest(dst, src, &[(); 0], |dst, src, _| {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = f32::from_bits(u32::from(s.to_bits()) << 16);
        }
    });
}

/// `f32` to `bf16`, rounding to nearest even (NaN stays a quiet NaN), as `bf16::from_f32`
/// does, without branches so that it vectorises.
fn narrow_bf16(src: &[f32], dst: &mut [bf16]) {
    widest(dst, src, &[(); 0], |dst, src, _| {
        for (d, &v) in dst.iter_mut().zip(src) {
            let b = v.to_bits();
            let rounded = (b.wrapping_add(0x7fff + ((b >> 16) & 1)) >> 16) as u16;
            let nan = ((b >> 16) as u16) | 0x40;
            *d = bf16::from_bits(if v.is_nan() { nan } else { rounded });
        }
    });
}

/// The depthwise path: one filter per channel, vectorised along the channels.
fn depthwise<T: ConvElem>(
    name: &'static str,
    geo: &Geometry,
    xs: &[T],
    w: &ArrayData,
    out: &mut [T],
) -> Result<()> {
    let c = geo.c_out;
    let taps = geo.taps;
    // The weights as `[taps, C]` in the computing type, so that a tap's weights are a row:
    // the row-major `[C, taps]` weights transposed by the tiled copy (the weight's cotangent
    // has as many taps as the input has positions).
    let transposed = super::copy::to_contiguous(&w.view(Layout {
        shape: vec![taps, c],
        strides: vec![1, taps as isize],
        offset: w.layout.offset,
    }));
    let wt_t = transposed.buffer.host()?.typed::<T>(name)?;
    let wt: Cow<[T::A]> = match T::as_a(wt_t) {
        Some(native) => Cow::Borrowed(native),
        None => {
            let mut v = pool::alloc::<T::A>(wt_t.len());
            fill(&mut v, &|start, chunk| {
                T::widen(&wt_t[start..start + chunk.len()], chunk)
            });
            Cow::Owned(v)
        }
    };
    let wt = &wt[..];
    // Output rows `first..` restricted to channels `c0..c0 + width`, in `block`.
    let work = |first: usize, c0: usize, width: usize, block: &mut [T]| {
        let native = T::as_a(xs).is_some();
        // For the half types: the accumulator row and the recently read input rows, widened.
        let (mut acc_row, mut recent) = if native {
            (Vec::new(), Widened::new(0, width))
        } else {
            (
                vec![T::A::default(); width],
                Widened::new(taps.clamp(1, 64), width),
            )
        };
        for (i, o) in block.chunks_mut(width).enumerate() {
            let acc: &mut [T::A] = match T::as_a_mut(o) {
                Some(native) => native,
                None => &mut acc_row,
            };
            let mut empty = true;
            geo.for_taps(first + i, |t, pos| {
                let Some(p) = pos else { return };
                let p = p + c0;
                let row: &[T::A] = match T::as_a(&xs[p..p + width]) {
                    Some(native) => native,
                    None => recent.row(xs, p),
                };
                let at = t * c + c0;
                axpy(acc, row, &wt[at..at + width], empty);
                empty = false;
            });
            if empty {
                // Every tap fell on padding.
                acc.fill(T::A::default());
            }
            if !native {
                T::narrow(&acc_row, o);
            }
        }
    };
    let rows = geo.rows();
    let threads = rayon::current_num_threads();
    let parallel = rows * c * taps >= THREADED_WORK && threads > 1;
    if !parallel || rows >= 4 * threads {
        let per_block = (DEPTHWISE_ELEMENTS / c).max(1);
        for_blocks(out, per_block, c, parallel, &|first, block| {
            work(first, 0, c, block)
        });
    } else {
        // Few outputs with many taps (the weight's cotangent is one): split the channels, each
        // task computing every row of its channels.
        let mut positions = vec![OUTSIDE; rows * taps];
        for r in 0..rows {
            geo.for_taps(r, |t, pos| {
                if let Some(p) = pos {
                    positions[r * taps + t] = p;
                }
            });
        }
        let part = c.div_ceil(4 * threads).next_multiple_of(16);
        let positions = &positions[..];
        let piece = |j: usize| {
            let c0 = j * part;
            few_rows(geo, xs, wt, positions, c0, part.min(c - c0))
        };
        let piece: &(dyn Fn(usize) -> Vec<T> + Sync) = &piece;
        let pieces: Vec<Vec<T>> = (0..c.div_ceil(part)).into_par_iter().map(piece).collect();
        for (j, values) in pieces.iter().enumerate() {
            let width = values.len() / rows;
            for (r, src) in values.chunks(width).enumerate() {
                out[r * c + j * part..][..width].copy_from_slice(src);
            }
        }
    }
    Ok(())
}

/// The depthwise outputs of channels `c0..c0 + width` for every row, `[rows, width]`, with
/// the taps in the outer loop: each tap's weights are read once for all the rows, and the
/// input rows the rows read at one tap are read again at the next one, still in cache.
fn few_rows<T: ConvElem>(
    geo: &Geometry,
    xs: &[T],
    wt: &[T::A],
    positions: &[usize],
    c0: usize,
    width: usize,
) -> Vec<T> {
    let (rows, taps, c) = (geo.rows(), geo.taps, geo.c_out);
    let mut acc = vec![T::A::default(); rows * width];
    let slots = if T::as_a(xs).is_some() {
        0
    } else {
        (rows + 1).min(64)
    };
    let mut recent = Widened::new(slots, width);
    for t in 0..taps {
        let w_row = &wt[t * c + c0..t * c + c0 + width];
        for (r, acc_row) in acc.chunks_mut(width).enumerate() {
            let p = positions[r * taps + t];
            if p == OUTSIDE {
                continue;
            }
            let p = p + c0;
            let x_row: &[T::A] = match T::as_a(&xs[p..p + width]) {
                Some(native) => native,
                None => recent.row(xs, p),
            };
            axpy(acc_row, x_row, w_row, false);
        }
    }
    // From the buffer cache, as every kernel's output (`narrow` writes every element).
    let mut out = crate::array::pool::alloc::<T>(rows * width);
    T::narrow(&acc, &mut out);
    out
}

/// The input rows read last, widened to the computing type and replaced oldest first:
/// neighbouring outputs share most of their taps' rows (all but one at stride 1 in 1-D), so
/// each row is widened about once instead of once per tap.
struct Widened<A> {
    c: usize,
    /// The buffer position of the row in each slot.
    keys: Vec<usize>,
    rows: Vec<A>,
    next: usize,
}

impl<A: AccFloat> Widened<A> {
    fn new(slots: usize, c: usize) -> Widened<A> {
        Widened {
            c,
            keys: vec![OUTSIDE; slots],
            rows: vec![A::default(); slots * c],
            next: 0,
        }
    }

    /// The row at buffer position `p` of `xs`, widened.
    fn row<T: ConvElem<A = A>>(&mut self, xs: &[T], p: usize) -> &[A] {
        let c = self.c;
        let slot = match self.keys.iter().position(|&k| k == p) {
            Some(slot) => slot,
            None => {
                let slot = self.next;
                self.next = (slot + 1) % self.keys.len();
                self.keys[slot] = p;
                T::widen(&xs[p..p + c], &mut self.rows[slot * c..(slot + 1) * c]);
                slot
            }
        };
        &self.rows[slot * c..(slot + 1) * c]
    }
}

/// The general path: per block of output rows, the patch matrix times each group's weights.
fn general<T: ConvElem>(geo: &Geometry, xs: &[T], ws: &[T], out: &mut [T]) {
    let (cg, og, c_out) = (geo.cg, geo.og, geo.c_out);
    let kc = geo.taps * cg;
    // The weights as `[C_out, taps · cg]` in the computing type: row `co` is output channel
    // `co`'s filter, read by gemm as the columns of a `kc × og` matrix per group.
    let w_a: Cow<[T::A]> = match T::as_a(ws) {
        Some(native) => Cow::Borrowed(native),
        None => {
            let mut v = pool::alloc::<T::A>(ws.len());
            T::widen(ws, &mut v);
            Cow::Owned(v)
        }
    };
    let total_rows = geo.rows();
    let threads = rayon::current_num_threads().max(1);
    let rows = (PATCH_ELEMENTS / kc)
        .clamp(16, 1024)
        .min(total_rows.div_ceil(2 * threads))
        .max(1);
    let parallel = total_rows * c_out * kc >= THREADED_WORK && total_rows > rows;
    let native_x = T::as_a(xs);
    for_blocks(out, rows, c_out, parallel, &|first, block| {
        let m = block.len() / c_out;
        let mut acc_scratch = Vec::new();
        let acc: &mut [T::A] = match T::as_a_mut(block) {
            Some(native) => native,
            None => {
                acc_scratch = pool::alloc::<T::A>(m * c_out);
                &mut acc_scratch
            }
        };
        let mut patches = Vec::new();
        for g in 0..geo.groups {
            let (lhs, lhs_rs): (*const T::A, usize) = match (geo.patches_in_place, native_x) {
                (Some(start), Some(x_a)) => {
                    (x_a[start + first * geo.c_in + g * cg..].as_ptr(), geo.c_in)
                }
                _ => {
                    if patches.is_empty() {
                        patches = pool::alloc::<T::A>(m * kc);
                    }
                    gather::<T>(geo, xs, first, m, g, &mut patches);
                    (patches.as_ptr(), kc)
                }
            };
            let rhs = w_a[g * og * kc..].as_ptr();
            // SAFETY: `acc` holds `m × c_out` elements and the destination is its `m × og`
            // block of columns `g·og..(g + 1)·og` (row stride `c_out`); `lhs` is `m × kc`
            // with row stride `lhs_rs`, inside `patches` (`m · kc` elements) or inside the
            // row-major input (rows `first..first + m` of `c_in` channels, from channel
            // `g·cg`); `rhs` reads `w_a[(g·og + j)·kc + i]` for `j < og`, `i < kc`, inside
            // the `c_out · kc` weights. All outlive the call, and no other task writes `acc`.
            unsafe {
                gemm::gemm(
                    m,
                    og,
                    kc,
                    acc.as_mut_ptr().add(g * og),
                    1,
                    c_out as isize,
                    false,
                    lhs,
                    1,
                    lhs_rs as isize,
                    rhs,
                    kc as isize,
                    1,
                    T::A::zero(),
                    T::A::one(),
                    false,
                    false,
                    false,
                    Parallelism::None,
                );
            }
        }
        if !patches.is_empty() {
            pool::release(T::A::into_host(patches));
        }
        if !acc_scratch.is_empty() {
            T::narrow(&acc_scratch, block);
            pool::release(T::A::into_host(acc_scratch));
        }
    });
    if let Cow::Owned(v) = w_a {
        pool::release(T::A::into_host(v));
    }
}

/// Writes group `g`'s patches of output rows `first..first + m` into `patches` (`m × kc`,
/// row-major, columns in the weight's (tap, channel) order), zeros where a tap falls outside
/// the input.
fn gather<T: ConvElem>(
    geo: &Geometry,
    xs: &[T],
    first: usize,
    m: usize,
    g: usize,
    patches: &mut [T::A],
) {
    let cg = geo.cg;
    let kc = geo.taps * cg;
    let from = g * cg;
    for (i, row) in patches[..m * kc].chunks_mut(kc).enumerate() {
        geo.for_taps(first + i, |t, pos| {
            let dst = &mut row[t * cg..(t + 1) * cg];
            match pos {
                Some(p) => T::widen(&xs[p + from..p + from + cg], dst),
                None => dst.fill(T::A::default()),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_conversions_match_the_half_crate() {
        // Bit patterns spread over every exponent, with the rounding cases (ties, carries
        // into the exponent, the largest finite value), infinities, NaNs and subnormals.
        let mut bits: Vec<u32> = (0..1 << 16)
            .map(|i: u32| i.wrapping_mul(0x9e37_79b9))
            .collect();
        bits.extend([
            0x3f80_8000,
            0x3f81_8000,
            0x3f80_7fff,
            0x7f7f_ffff,
            0x7f80_0000,
            0xff80_0000,
            0x7fc0_0000,
            0x7f80_0001,
            0xffff_ffff,
            0x0000_0001,
            0x8000_8000,
            0x0000_0000,
        ]);
        let src: Vec<f32> = bits.iter().map(|&b| f32::from_bits(b)).collect();
        let mut got = vec![bf16::ZERO; src.len()];
        narrow_bf16(&src, &mut got);
        for (v, g) in src.iter().zip(&got) {
            assert_eq!(
                g.to_bits(),
                bf16::from_f32(*v).to_bits(),
                "{:#x}",
                v.to_bits()
            );
        }
        let mut back = vec![0.0f32; got.len()];
        widen_bf16(&got, &mut back);
        for (g, b) in got.iter().zip(&back) {
            assert_eq!(b.to_bits(), g.to_f32().to_bits());
        }
    }
}
