//! Copies that change layout: any strided view to row-major, and the joins (concatenate,
//! pad) that write several sources into one new array.
//!
//! A view read across its rows (a transpose) is copied in tiles: a block of output rows is
//! filled a few columns at a time, so that the source lines a tile reads stay in cache until
//! every element on them has been used. Work is split over the pool by [`fill`].

use std::mem::MaybeUninit;

use super::elementwise::fill;
use crate::array::{ArrayData, Layout, collapse};
use crate::dtype::Element;

/// Output rows per tile: their source elements sit side by side in a transpose.
const TILE_ROWS: usize = 128;
/// Output columns per tile.
const TILE_COLS: usize = 16;

/// The elements of `x` in a new row-major buffer.
pub(crate) fn to_contiguous(x: &ArrayData) -> ArrayData {
    crate::with_host!(x.buffer.resident_host(), src, T => {
        ArrayData::from_vec(gather::<T>(src, &x.layout), &x.layout.shape)
    })
}

/// `x` itself when row-major, else a row-major copy.
pub(crate) fn to_contiguous_shared(x: &ArrayData) -> ArrayData {
    if x.layout.is_row_contiguous() {
        x.clone()
    } else {
        to_contiguous(x)
    }
}

/// A vector of `n` elements, written chunk by chunk over the pool by `write(start, chunk)`,
/// which must write every element of its chunk. The vector comes from the buffer cache, so a
/// repeated copy does not fault its pages in again, and its old contents are never read.
fn build<T: Element>(n: usize, write: &(dyn Fn(usize, &mut [MaybeUninit<T>]) + Sync)) -> Vec<T> {
    let mut out = crate::array::pool::alloc::<T>(n);
    let ptr = out.as_mut_ptr().cast::<MaybeUninit<T>>();
    // SAFETY: `MaybeUninit<T>` has the layout of `T`, the slice covers the vector's `n`
    // initialised elements and borrows it exclusively, and `write` only ever stores
    // initialised values, so the vector stays initialised.
    let slots = unsafe { std::slice::from_raw_parts_mut(ptr, n) };
    fill(slots, write);
    out
}

/// Writes the first `dst.len()` elements of `src` into `dst` (a `memcpy`).
fn write_slice<T: Copy>(dst: &mut [MaybeUninit<T>], src: &[T]) {
    let src = &src[..dst.len()];
    for (d, &v) in dst.iter_mut().zip(src) {
        d.write(v);
    }
}

/// The elements `layout` selects from `src`, in row-major order.
fn gather<T: Element>(src: &[T], layout: &Layout) -> Vec<T> {
    let n = layout.size();
    if layout.is_row_contiguous() {
        let from = &src[layout.offset..layout.offset + n];
        return build(n, &|start, chunk| {
            write_slice(chunk, &from[start..]);
        });
    }
    if n == 0 {
        return Vec::new();
    }
    let (shape, strides) = collapse(&layout.shape, &[&layout.strides]);
    if shape.is_empty() {
        // Every axis has size 1.
        return vec![src[layout.offset]];
    }
    if let Some(out) = transposed(src, &shape, &strides[0], layout.offset) {
        return out;
    }
    let view = Strided {
        src,
        shape: &shape,
        strides: &strides[0],
        offset: layout.offset as isize,
    };
    build(n, &|start, chunk| view.copy_range(start, chunk))
}

/// A collapsed layout (at least one element) whose last two axes are a transpose of 4-byte
/// elements (the next-to-last axis contiguous in the source), copied by the AVX-512 kernel of
/// [`super::transpose`]; `None` when that kernel does not apply.
fn transposed<T: Element>(
    src: &[T],
    shape: &[usize],
    strides: &[isize],
    offset: usize,
) -> Option<Vec<T>> {
    let k = shape.len();
    if size_of::<T>() != 4 || k < 2 || strides[k - 2] != 1 || shape[k - 2] < 16 {
        return None;
    }
    if !super::transpose::available() {
        return None;
    }
    // The kernel reads without bounds checks: every position the layout reaches must be in
    // `src` (a valid view's always are; checked once here, not per element).
    let (mut lo, mut hi) = (offset as isize, offset as isize);
    for (&n, &s) in shape.iter().zip(strides) {
        let reach = (n as isize - 1) * s;
        if reach < 0 {
            lo += reach;
        } else {
            hi += reach;
        }
    }
    if lo < 0 || hi >= src.len() as isize {
        return None;
    }
    let (rows, cols, step) = (shape[k - 2], shape[k - 1], strides[k - 1]);
    let (batch, batch_strides) = (&shape[..k - 2], &strides[..k - 2]);
    let n: usize = shape.iter().product();
    let stream = n * 4 >= super::stream::STREAM_BYTES;
    // The source position of output (0, 0) of matrix `b`.
    let origin = |mut b: usize| {
        let mut pos = offset as isize;
        for d in (0..batch.len()).rev() {
            pos += (b % batch[d]) as isize * batch_strides[d];
            b /= batch[d];
        }
        pos
    };
    Some(build(n, &|start, chunk| {
        let base = src.as_ptr().cast::<f32>();
        let mut done = 0;
        while done < chunk.len() {
            let at = start + done;
            let (row, c) = (at / cols, at % cols);
            let (b, r) = (row / rows, row % rows);
            let pos = origin(b);
            let left = chunk.len() - done;
            if c != 0 || left < cols {
                // A piece of a row at either end of the chunk, element by element.
                let m = (cols - c).min(left);
                for (j, o) in chunk[done..done + m].iter_mut().enumerate() {
                    o.write(src[(pos + r as isize + (c + j) as isize * step) as usize]);
                }
                done += m;
                continue;
            }
            let end = rows.min(r + left / cols);
            let band = super::transpose::Band {
                src: base.wrapping_offset(pos),
                step,
                first: r,
                end,
                cols,
                stream,
            };
            let out = chunk[done..].as_mut_ptr().cast::<f32>();
            // SAFETY: the kernel is available (checked above); the band's source positions
            // lie inside `src` (its extent was checked above) and `T`, being 4 bytes like
            // every 4-byte element type here (f32, i32, u32), has `f32`'s size and alignment,
            // and any bits are a valid value of it; the `(end - r) · cols` output elements
            // are the next ones of this chunk, borrowed exclusively.
            unsafe { super::transpose::copy_band(&band, out) };
            done += (end - r) * cols;
        }
    }))
}

/// A collapsed strided view of a source buffer (at least one axis).
struct Strided<'a, T> {
    src: &'a [T],
    shape: &'a [usize],
    strides: &'a [isize],
    offset: isize,
}

/// The buffer position of the first element of each row (last axis) in turn.
struct Rows<'a> {
    shape: &'a [usize],
    strides: &'a [isize],
    index: Vec<usize>,
    pos: isize,
}

impl<'a> Rows<'a> {
    /// Starts at row `row` of a layout whose outer axes are `shape` and `strides`.
    fn new(shape: &'a [usize], strides: &'a [isize], offset: isize, mut row: usize) -> Rows<'a> {
        let mut index = vec![0; shape.len()];
        let mut pos = offset;
        for d in (0..shape.len()).rev() {
            index[d] = row % shape[d];
            row /= shape[d];
            pos += index[d] as isize * strides[d];
        }
        Rows {
            shape,
            strides,
            index,
            pos,
        }
    }

    /// Moves to the next row.
    fn advance(&mut self) {
        for d in (0..self.shape.len()).rev() {
            self.index[d] += 1;
            self.pos += self.strides[d];
            if self.index[d] < self.shape[d] {
                return;
            }
            self.pos -= self.strides[d] * self.shape[d] as isize;
            self.index[d] = 0;
        }
    }
}

/// A tile: rows `i, i + 1, ..` of one outer axis, all else fixed. Its rows are `out_step`
/// apart in the output and `src_step` apart in the source.
struct Tile {
    /// The source position of the first row.
    src: isize,
    /// Between rows in the source.
    src_step: isize,
    /// The first row's offset in the output chunk.
    out: usize,
    /// Between rows in the output chunk.
    out_step: usize,
    /// The number of rows.
    rows: usize,
}

impl<T: Element> Strided<'_, T> {
    /// Writes elements `start..start + out.len()` (row-major) into `out`.
    fn copy_range(&self, start: usize, out: &mut [MaybeUninit<T>]) {
        let k = self.shape.len();
        let cols = self.shape[k - 1];
        let step = self.strides[k - 1];
        let (outer, outer_strides) = (&self.shape[..k - 1], &self.strides[..k - 1]);
        let mut rows = Rows::new(outer, outer_strides, self.offset, start / cols);
        let mut done = 0;
        let col = start % cols;
        if col != 0 {
            let n = (cols - col).min(out.len());
            self.copy_row(rows.pos + col as isize * step, step, &mut out[..n]);
            rows.advance();
            done = n;
        }
        let full = (out.len() - done) / cols;
        // Tiles pay off when rows are read with a stride and another axis is read more
        // densely: a tile walks that axis, so each source line it loads serves many rows.
        let tile_axis = (0..outer.len())
            .filter(|&d| outer[d] > 1)
            .min_by_key(|&d| outer_strides[d].unsigned_abs())
            .filter(|&d| outer_strides[d].unsigned_abs() < step.unsigned_abs() && cols >= 4);
        match tile_axis {
            None => {
                for r in 0..full {
                    let at = done + r * cols;
                    self.copy_row(rows.pos, step, &mut out[at..at + cols]);
                    rows.advance();
                }
            }
            Some(p) => {
                // Rows along axis p are `apart` rows apart; tiles cover TILE_ROWS of them,
                // aligned on that axis, and never leave this chunk.
                let apart: usize = outer[p + 1..].iter().product();
                for r in 0..full {
                    let i = rows.index[p];
                    // A row starts a tile when its stretch of axis p starts here, or when
                    // the row before it on that axis (`apart` rows back) is not in the chunk;
                    // other rows were written by their tile's first row.
                    if i.is_multiple_of(TILE_ROWS) || r < apart {
                        let n = (TILE_ROWS - i % TILE_ROWS)
                            .min(outer[p] - i)
                            .min((full - 1 - r) / apart + 1);
                        let tile = Tile {
                            src: rows.pos,
                            src_step: outer_strides[p],
                            out: done + r * cols,
                            out_step: apart * cols,
                            rows: n,
                        };
                        self.copy_tile(&tile, cols, step, out);
                    }
                    rows.advance();
                }
            }
        }
        done += full * cols;
        if done < out.len() {
            self.copy_row(rows.pos, step, &mut out[done..]);
        }
    }

    /// `out.len()` elements from position `pos`, `step` apart.
    fn copy_row(&self, pos: isize, step: isize, out: &mut [MaybeUninit<T>]) {
        match step {
            1 => {
                let p = pos as usize;
                write_slice(out, &self.src[p..p + out.len()]);
            }
            0 => out.fill(MaybeUninit::new(self.src[pos as usize])),
            _ => {
                let mut p = pos;
                for o in out.iter_mut() {
                    o.write(self.src[p as usize]);
                    p += step;
                }
            }
        }
    }

    /// The rows of `tile`, `cols` elements each, `step` apart, written [`TILE_COLS`] columns
    /// at a time.
    fn copy_tile(&self, tile: &Tile, cols: usize, step: isize, out: &mut [MaybeUninit<T>]) {
        // The register blocks are built only for 2- and 4-byte elements (f16, bf16, f32,
        // 16- and 32-bit integers): unrolled for every type, they doubled the build time.
        if const { matches!(size_of::<T>(), 2 | 4) } && tile.src_step == 1 && step > 0 {
            return self.copy_transposed(tile, cols, step as usize, out);
        }
        for c0 in (0..cols).step_by(TILE_COLS) {
            let c1 = (c0 + TILE_COLS).min(cols);
            for r in 0..tile.rows {
                let mut p = tile.src + r as isize * tile.src_step + c0 as isize * step;
                let o = tile.out + r * tile.out_step;
                for d in &mut out[o + c0..o + c1] {
                    d.write(self.src[p as usize]);
                    p += step;
                }
            }
        }
    }

    /// A tile whose rows are adjacent in the source (a transpose): column `c` is `rows`
    /// consecutive source elements from `src + c · step`. Moves [`BLOCK`]-square blocks
    /// through registers (contiguous loads, contiguous stores), a strip of [`TILE_COLS`]
    /// columns at a time; the rows and columns left over go one by one.
    // Large once unrolled: one copy per type, not one per caller.
    #[inline(never)]
    fn copy_transposed(&self, tile: &Tile, cols: usize, step: usize, out: &mut [MaybeUninit<T>]) {
        let first = tile.src as usize;
        let rows = tile.rows;
        let (main_rows, main_cols) = (rows - rows % BLOCK, cols - cols % BLOCK);
        for c0 in (0..main_cols).step_by(TILE_COLS) {
            let c1 = (c0 + TILE_COLS).min(main_cols);
            for r0 in (0..main_rows).step_by(BLOCK) {
                for cb in (c0..c1).step_by(BLOCK) {
                    let mut t = [[T::default(); BLOCK]; BLOCK];
                    for (i, line) in t.iter_mut().enumerate() {
                        let q = first + (cb + i) * step + r0;
                        line.copy_from_slice(&self.src[q..q + BLOCK]);
                    }
                    // Row r of the output block is column r of `t`.
                    #[allow(clippy::needless_range_loop)]
                    for r in 0..BLOCK {
                        let o = tile.out + (r0 + r) * tile.out_step + cb;
                        let dst: &mut [MaybeUninit<T>; BLOCK] =
                            (&mut out[o..o + BLOCK]).try_into().expect("a block row");
                        for (c, d) in dst.iter_mut().enumerate() {
                            d.write(t[c][r]);
                        }
                    }
                }
            }
        }
        let one = |r: usize, c: usize, o: &mut MaybeUninit<T>| {
            o.write(self.src[first + c * step + r]);
        };
        for r in 0..rows {
            let o = tile.out + r * tile.out_step;
            let from = if r < main_rows { main_cols } else { 0 };
            for c in from..cols {
                one(r, c, &mut out[o + c]);
            }
        }
    }
}

/// Side of the square blocks a transpose moves through registers.
const BLOCK: usize = 16;

/// How a join reads one input: in place when row-major, else from a row-major copy.
enum Part<'a, T> {
    /// Row-major elements.
    Slice(&'a [T]),
    /// One element for every index.
    Value(T),
    /// A row-major copy of a strided input.
    Owned(Vec<T>),
}

impl<'a, T: Element> Part<'a, T> {
    fn new(x: &'a ArrayData) -> Part<'a, T> {
        let src = x
            .buffer
            .resident_host()
            .typed::<T>("copy")
            .expect("inputs share the output type");
        let layout = &x.layout;
        let n = layout.size();
        if layout.is_row_contiguous() {
            Part::Slice(&src[layout.offset..layout.offset + n])
        } else if layout.is_scalar_broadcast() && n > 0 {
            Part::Value(src[layout.offset])
        } else {
            Part::Owned(gather(src, layout))
        }
    }

    /// Writes row-major elements `start..start + out.len()` into `out`.
    fn read(&self, start: usize, out: &mut [MaybeUninit<T>]) {
        match self {
            Part::Slice(s) => {
                write_slice(out, &s[start..start + out.len()]);
            }
            Part::Owned(v) => {
                write_slice(out, &v[start..start + out.len()]);
            }
            Part::Value(v) => out.fill(MaybeUninit::new(*v)),
        }
    }
}

/// The inputs, all of the output's type, joined along `axis` into `shape`.
pub(crate) fn concatenate(inputs: &[ArrayData], axis: usize, shape: &[usize]) -> ArrayData {
    crate::with_dtype!(inputs[0].dtype(), T => concatenate_typed::<T>(inputs, axis, shape))
}

fn concatenate_typed<T: Element>(inputs: &[ArrayData], axis: usize, shape: &[usize]) -> ArrayData {
    let inner: usize = shape[axis + 1..].iter().product();
    // Each output row (axes axis.. merged) is the inputs' rows one after another.
    let widths: Vec<usize> = inputs
        .iter()
        .map(|x| x.layout.shape[axis] * inner)
        .collect();
    let mut ends = Vec::with_capacity(widths.len());
    let mut acc = 0;
    for w in &widths {
        acc += w;
        ends.push(acc);
    }
    let row = acc;
    let parts: Vec<Part<'_, T>> = inputs.iter().map(Part::new).collect();
    let n = shape.iter().product();
    if row == 0 {
        return ArrayData::from_vec(Vec::<T>::new(), shape);
    }
    let out = build(n, &|start, chunk| {
        let mut done = 0;
        while done < chunk.len() {
            let at = start + done;
            let (r, c) = (at / row, at % row);
            // The input whose columns hold `c` (skipping empty ones).
            let i = ends.partition_point(|&e| e <= c);
            let first = ends[i] - widths[i];
            let n = (ends[i] - c).min(chunk.len() - done);
            parts[i].read(r * widths[i] + c - first, &mut chunk[done..done + n]);
            done += n;
        }
    });
    ArrayData::from_vec(out, shape)
}

/// `x` with `widths[d].0` and `widths[d].1` copies of the one-element `value` before and
/// after each axis `d`, as a new array of `shape`.
pub(crate) fn pad(
    x: &ArrayData,
    value: &ArrayData,
    widths: &[(usize, usize)],
    shape: &[usize],
) -> ArrayData {
    crate::with_dtype!(x.dtype(), T => pad_typed::<T>(x, value, widths, shape))
}

fn pad_typed<T: Element>(
    x: &ArrayData,
    value: &ArrayData,
    widths: &[(usize, usize)],
    shape: &[usize],
) -> ArrayData {
    let fill_value = value
        .buffer
        .resident_host()
        .typed::<T>("pad")
        .expect("the value has the array's type")[value.layout.offset];
    let part = Part::<T>::new(x);
    // A 0-D array pads as one of shape [1].
    let (shape_in, widths, out_shape): (Vec<usize>, Vec<(usize, usize)>, Vec<usize>) =
        if shape.is_empty() {
            (vec![1], vec![(0, 0)], vec![1])
        } else {
            (x.layout.shape.clone(), widths.to_vec(), shape.to_vec())
        };
    let k = out_shape.len();
    let cols = out_shape[k - 1];
    let (lo, xcols) = (widths[k - 1].0, shape_in[k - 1]);
    let n = out_shape.iter().product();
    if x.layout.size() == 0 {
        return ArrayData::from_vec(vec![fill_value; n], shape);
    }
    let outer = &out_shape[..k - 1];
    let out = build(n, &|start, chunk| {
        let value = MaybeUninit::new(fill_value);
        let mut done = 0;
        while done < chunk.len() {
            let at = start + done;
            let (mut r, c0) = (at / cols, at % cols);
            let c1 = cols.min(c0 + chunk.len() - done);
            let row = &mut chunk[done..done + c1 - c0];
            // The input row this output row shows, if any.
            let mut src_row = Some(0usize);
            for d in (0..outer.len()).rev() {
                let i = r % outer[d];
                r /= outer[d];
                src_row = match src_row {
                    Some(base) if i >= widths[d].0 && i < widths[d].0 + shape_in[d] => {
                        let stride: usize = shape_in[d + 1..].iter().product();
                        Some(base + (i - widths[d].0) * stride)
                    }
                    _ => None,
                };
            }
            // Columns lo..lo + xcols come from the input, the rest is the value.
            let (a, b) = (c0.max(lo).min(c1), c1.min(lo + xcols).max(c0));
            match src_row {
                Some(base) if a < b => {
                    row[..a - c0].fill(value);
                    part.read(base + a - lo, &mut row[a - c0..b - c0]);
                    row[b - c0..].fill(value);
                }
                _ => row.fill(value),
            }
            done += c1 - c0;
        }
    });
    ArrayData::from_vec(out, shape)
}
