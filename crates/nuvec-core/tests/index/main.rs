//! The indexing family against direct formulas: every result is recomputed here with explicit
//! index loops over the inputs' logical values, for contiguous, transposed, broadcast,
//! negative-step sliced and empty inputs, several element types and index types, negative
//! and out-of-range indices. This file holds the helpers; the tests are in its modules.

mod errors;
mod gather;
mod scatter;
mod slice_update;

#[path = "../shape_ref/mod.rs"]
mod shape_ref;

use nuvec_core::{
    Array, DType, Element, Error, IndexOp, Primitive, ScatterMode, SliceArg, broadcast_to, gather,
    put_along_axis, scatter, scatter_add, scatter_add_axis, scatter_max, scatter_min, scatter_prod,
    slice, slice_update, slice_update_add, slice_update_max, slice_update_min, slice_update_prod,
    take, take_along_axis, transpose,
};

const DTYPES: [DType; 4] = [DType::F32, DType::I32, DType::F16, DType::Bool];
const INDEX_DTYPES: [DType; 3] = [DType::I32, DType::U32, DType::I64];
const MODES: [ScatterMode; 5] = [
    ScatterMode::Replace,
    ScatterMode::Sum,
    ScatterMode::Prod,
    ScatterMode::Max,
    ScatterMode::Min,
];

/// A gather or scatter case: the axes, the index arrays' shapes, the window.
type IndexCase = (
    &'static [isize],
    &'static [&'static [usize]],
    &'static [usize],
);

/// A scatter along an axis: `a`'s shape, the indices' shape, the values' shape, the axis.
type AxisCase = (&'static [usize], &'static [usize], &'static [usize], isize);

/// How a test input is laid out.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Contiguous,
    /// The transpose of a row-major array of the reversed shape.
    Transposed,
    /// A row-major array with a first axis of 1, broadcast along it.
    Broadcast,
    /// Every other row of an array twice as long on axis 0, last first (`[::-2]`).
    Sliced,
    /// All rows but the first of an array one longer on axis 0 (`[1:]`): row-major, but
    /// not from the buffer's first element.
    Offset,
}
const KINDS: [Kind; 5] = [
    Kind::Contiguous,
    Kind::Transposed,
    Kind::Broadcast,
    Kind::Sliced,
    Kind::Offset,
];

/// A small deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    /// An integer in `lo..=hi`.
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }

    /// Values every test type holds exactly (small integers; 0 or 1 for booleans), kept
    /// small so that products of a few stay exact in float16.
    fn values(&mut self, n: usize, dtype: DType) -> Vec<f64> {
        (0..n)
            .map(|_| match dtype {
                DType::Bool => self.int(0, 1) as f64,
                _ => self.int(-4, 4) as f64,
            })
            .collect()
    }

    /// Indices for an axis of `dim`: some negative (for signed types) and some out of range.
    fn indices(&mut self, n: usize, dim: usize, dtype: DType) -> Vec<i64> {
        let d = dim as i64;
        let lo = if dtype == DType::U32 { 0 } else { -d - 2 };
        (0..n).map(|_| self.int(lo, d + 1)).collect()
    }
}

fn unravel(mut k: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = k % shape[d];
        k /= shape[d];
    }
    idx
}

fn ravel(idx: &[usize], shape: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |acc, (&i, &n)| acc * n + i)
}

/// The element of row-major `values` of `shape` that index `idx` (of a possibly higher rank)
/// reads under NumPy broadcasting.
fn at_broadcast(values: &[f64], shape: &[usize], idx: &[usize]) -> f64 {
    let lead = idx.len() - shape.len();
    let own: Vec<usize> = shape
        .iter()
        .enumerate()
        .map(|(d, &n)| if n == 1 { 0 } else { idx[lead + d] })
        .collect();
    values[ravel(&own, shape)]
}

/// An input of `shape` and `dtype` laid out as `kind`, with its logical row-major values.
fn make(shape: &[usize], dtype: DType, kind: Kind, rng: &mut Rng) -> (Array, Vec<f64>) {
    let n: usize = shape.iter().product();
    match kind {
        Kind::Transposed if shape.len() >= 2 => {
            let rev: Vec<usize> = shape.iter().rev().copied().collect();
            let w = rng.values(n, dtype);
            let base = typed(&w, &rev, dtype);
            let perm: Vec<usize> = (0..shape.len()).rev().collect();
            let a = transpose(&base, &perm).unwrap();
            let logical = (0..n)
                .map(|k| {
                    let i: Vec<usize> = unravel(k, shape).into_iter().rev().collect();
                    w[ravel(&i, &rev)]
                })
                .collect();
            (a, logical)
        }
        Kind::Broadcast if !shape.is_empty() && shape[0] > 1 => {
            let mut small = shape.to_vec();
            small[0] = 1;
            let w = rng.values(n / shape[0], dtype);
            let base = typed(&w, &small, dtype);
            let a = broadcast_to(&base, shape).unwrap();
            let logical = (0..n)
                .map(|k| at_broadcast(&w, &small, &unravel(k, shape)))
                .collect();
            (a, logical)
        }
        Kind::Sliced if !shape.is_empty() => {
            let mut big = shape.to_vec();
            big[0] *= 2;
            let w = rng.values(2 * n, dtype);
            let base = typed(&w, &big, dtype);
            let a = slice(&base, &[SliceArg::new(None, None, -2)]).unwrap();
            let logical = (0..n)
                .map(|k| {
                    let mut i = unravel(k, shape);
                    i[0] = big[0] - 1 - 2 * i[0];
                    w[ravel(&i, &big)]
                })
                .collect();
            (a, logical)
        }
        Kind::Offset if !shape.is_empty() => {
            let mut big = shape.to_vec();
            big[0] += 1;
            let row: usize = shape[1..].iter().product();
            let w = rng.values(n + row, dtype);
            let base = typed(&w, &big, dtype);
            let a = slice(&base, &[SliceArg::new(Some(1), None, 1)]).unwrap();
            (a, w[row..].to_vec())
        }
        _ => {
            let v = rng.values(n, dtype);
            let a = typed(&v, shape, dtype);
            (a, v)
        }
    }
}

/// An array of `values` with `shape`, cast to `dtype`.
fn typed<T: Element>(values: &[T], shape: &[usize], dtype: DType) -> Array {
    Array::from_slice(values, shape)
        .unwrap()
        .astype(dtype)
        .unwrap()
}

fn index_array(values: &[i64], shape: &[usize], dtype: DType) -> Array {
    typed(values, shape, dtype)
}

/// Random index arrays of `dtype` and shapes `ishapes` for `axes` of an input of `shape`
/// (of rank 3), with their values and the shape they broadcast to.
struct Indices {
    arrays: Vec<Array>,
    values: Vec<Vec<f64>>,
    shape: Vec<usize>,
}

impl Indices {
    fn random(rng: &mut Rng, shape: &[usize], case: IndexCase, dtype: DType) -> Indices {
        let (axes, ishapes, _) = case;
        let mut out = Indices {
            arrays: Vec::new(),
            values: Vec::new(),
            shape: Vec::new(),
        };
        for (j, ishape) in ishapes.iter().enumerate() {
            let ax = axes[j].rem_euclid(3) as usize;
            let n: usize = ishape.iter().product();
            let iv = rng.indices(n, shape[ax], dtype);
            out.arrays.push(index_array(&iv, ishape, dtype));
            out.values.push(iv.iter().map(|&v| v as f64).collect());
            while out.shape.len() < ishape.len() {
                out.shape.insert(0, 1);
            }
            let off = out.shape.len() - ishape.len();
            for (d, &s) in ishape.iter().enumerate() {
                if s != 1 {
                    out.shape[off + d] = s;
                }
            }
        }
        out
    }

    /// The index of array `j` (of shape `ishape`) read at position `pi` of the broadcast shape.
    fn at(&self, j: usize, ishape: &[usize], pi: &[usize]) -> i64 {
        at_broadcast(&self.values[j], ishape, pi) as i64
    }
}

/// The array's elements as f64.
fn read(a: &Array) -> Vec<f64> {
    a.astype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

/// A value as the element type holds it (booleans are 0 or 1).
fn held(v: f64, dtype: DType) -> f64 {
    if dtype == DType::Bool {
        f64::from(u8::from(v != 0.0))
    } else {
        v
    }
}

/// Gathers: negative indices count from the end, then the window is clamped inside.
fn clamped(v: i64, dim: usize, window: usize) -> usize {
    let d = dim as i64;
    let v = if v < 0 { v + d } else { v };
    v.clamp(0, (d - window as i64).max(0)) as usize
}

/// Scatters: negative indices count from the end; a window that does not fit is dropped.
fn in_range(v: i64, dim: usize, window: usize) -> Option<usize> {
    let d = dim as i64;
    let v = if v < 0 { v + d } else { v };
    (v >= 0 && v + window as i64 <= d).then_some(v as usize)
}

/// `slot` combined with `new` as the element type holds it.
fn combine_into(slot: &mut f64, mode: ScatterMode, dtype: DType, new: f64) {
    *slot = combine(mode, dtype, *slot, held(new, dtype));
}

fn combine(mode: ScatterMode, dtype: DType, old: f64, new: f64) -> f64 {
    if dtype == DType::Bool {
        let (o, n) = (old != 0.0, new != 0.0);
        let r = match mode {
            ScatterMode::Replace => n,
            ScatterMode::Sum | ScatterMode::Max => o || n,
            ScatterMode::Prod | ScatterMode::Min => o && n,
        };
        return f64::from(u8::from(r));
    }
    match mode {
        ScatterMode::Replace => new,
        ScatterMode::Sum => old + new,
        ScatterMode::Prod => old * new,
        ScatterMode::Max => old.max(new),
        ScatterMode::Min => old.min(new),
    }
}

fn check(got: &Array, shape: &[usize], want: &[f64], what: &str) {
    assert_eq!(got.shape(), shape, "{what}");
    assert_eq!(read(got), want, "{what}");
}
