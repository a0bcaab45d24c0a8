//! The sort primitives on the CPU.
//!
//! Each lane (the elements along the sorted axis at one position of the other axes) is sorted
//! on its own, lanes in parallel over the pool for large arrays. Elements are compared through
//! an unsigned key ([`SortKey`]) whose order is NumPy's: floats map their bits so that NaN is
//! last and `-0.0` equals `0.0`, signed integers flip their sign bit, complex numbers join the
//! keys of both parts. A lane becomes (key, index) pairs: long lanes are sorted by an LSD radix
//! sort (stable by construction), short ones by comparing pairs, where the index breaks ties,
//! so both are stable and a selection (`partition`) agrees with the stable sort at `kth`.
//!
//! The outputs keep each lane contiguous (the sorted axis has stride 1, the other axes
//! row-major around it), so a sort along a leading axis writes no scattered lanes; for the
//! last axis that is the row-major layout.

use rayon::prelude::*;

use super::elementwise::GRAIN;
use crate::Result;
use crate::array::{ArrayData, Layout, collapse, for_each_strided, row_major_strides};
use crate::dtype::{Complex64, Element, bf16, f16};
use crate::ops::sort::SortOp;
use crate::primitive::OutputSpec;

/// An unsigned integer key, sortable a byte at a time.
pub(crate) trait RadixKey: Ord + Copy + Default + Send + Sync {
    /// The key's width in bytes.
    const BYTES: usize;
    /// Byte `i`, from the least significant.
    fn byte(self, i: usize) -> usize;
}

macro_rules! radix_key {
    ($($t:ty),*) => {$(
        impl RadixKey for $t {
            const BYTES: usize = std::mem::size_of::<$t>();
            #[inline(always)]
            fn byte(self, i: usize) -> usize {
                ((self >> (8 * i)) & 0xff) as usize
            }
        }
    )*};
}
radix_key!(u8, u16, u32, u64);

/// An element type with NumPy's sort order, expressed as an unsigned key of the same order.
pub(crate) trait SortKey: Element {
    /// The key type.
    type Key: RadixKey;
    /// The key of a value.
    fn key(self) -> Self::Key;
}

macro_rules! unsigned_key {
    ($($t:ty),*) => {$(
        impl SortKey for $t {
            type Key = $t;
            #[inline(always)]
            fn key(self) -> $t {
                self
            }
        }
    )*};
}
unsigned_key!(u8, u16, u32, u64);

/// Signed integers: flipping the sign bit maps their order onto the unsigned one.
macro_rules! signed_key {
    ($($t:ty => $u:ty),*) => {$(
        impl SortKey for $t {
            type Key = $u;
            #[inline(always)]
            fn key(self) -> $u {
                (self as $u) ^ (1 << (<$u>::BITS - 1))
            }
        }
    )*};
}
signed_key!(i8 => u8, i16 => u16, i32 => u32, i64 => u64);

impl SortKey for bool {
    type Key = u8;
    #[inline(always)]
    fn key(self) -> u8 {
        u8::from(self)
    }
}

/// The order-preserving integer of a float's bits: negative values have their bits inverted
/// (larger magnitudes first), the rest get the sign bit set (above every negative); NaN (any
/// payload) is the largest and both zeros are the same key.
macro_rules! float_key {
    ($t:ty, $bits:ty, $zero:expr) => {
        impl SortKey for $t {
            type Key = $bits;
            #[inline(always)]
            fn key(self) -> $bits {
                if self.is_nan() {
                    return <$bits>::MAX;
                }
                let bits = if self == $zero { 0 } else { self.to_bits() };
                let sign: $bits = 1 << (<$bits>::BITS - 1);
                if bits & sign != 0 { !bits } else { bits | sign }
            }
        }
    };
}
float_key!(f16, u16, f16::ZERO);
float_key!(bf16, u16, bf16::ZERO);
float_key!(f32, u32, 0.0);
float_key!(f64, u64, 0.0);

impl SortKey for Complex64 {
    /// The real part's key above the imaginary part's: lexicographic order.
    type Key = u64;
    #[inline(always)]
    fn key(self) -> u64 {
        (u64::from(self.re.key()) << 32) | u64::from(self.im.key())
    }
}

/// Computes a sort primitive.
pub(crate) fn eval(
    op: &SortOp,
    inputs: &mut [ArrayData],
    _outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    match *op {
        SortOp::Sort { axis } => lanes(&inputs[0], axis, None),
        SortOp::Partition { kth, axis } => lanes(&inputs[0], axis, Some(kth)),
        SortOp::SearchSorted { right } => {
            let (a, v) = (&inputs[0], &inputs[1]);
            Ok(vec![crate::with_host!(a.buffer.host()?, _s, T => {
                search::<T>(a, v, right)?
            })])
        }
    }
}

/// Sorts (or, with `kth`, partitions) every lane of `x` along `axis`: (values, indices).
fn lanes(x: &ArrayData, axis: usize, kth: Option<usize>) -> Result<Vec<ArrayData>> {
    Ok(crate::with_host!(x.buffer.host()?, src, T => {
        let (values, indices) = sort_lanes::<T>(src, &x.layout, axis, kth);
        let layout = lane_layout(&x.layout.shape, axis);
        vec![
            ArrayData::from_vec(values, &[layout.size()]).view(layout.clone()),
            ArrayData::from_vec(indices, &[layout.size()]).view(layout),
        ]
    }))
}

/// The layout of an output whose lanes along `axis` lie one after another.
pub(crate) fn lane_layout(shape: &[usize], axis: usize) -> Layout {
    let n = shape[axis];
    let mut others: Vec<usize> = shape.to_vec();
    others.remove(axis);
    let mut strides: Vec<isize> = row_major_strides(&others)
        .into_iter()
        .map(|s| s * n.max(1) as isize)
        .collect();
    strides.insert(axis, 1);
    Layout {
        shape: shape.to_vec(),
        strides,
        offset: 0,
    }
}

/// The sorted (or partitioned) values and indices of every lane, lane after lane.
fn sort_lanes<T: SortKey>(
    src: &[T],
    layout: &Layout,
    axis: usize,
    kth: Option<usize>,
) -> (Vec<T>, Vec<u32>) {
    let size = layout.size();
    let mut values = vec![T::default(); size];
    let mut indices = vec![0u32; size];
    if size == 0 {
        return (values, indices);
    }
    let n = layout.shape[axis];
    let step = layout.strides[axis];
    let mut other_shape = layout.shape.clone();
    let mut other_strides = layout.strides.clone();
    other_shape.remove(axis);
    other_strides.remove(axis);
    let (other_shape, other_strides) = collapse(&other_shape, &[&other_strides]);
    let work = |first: usize, values: &mut [T], indices: &mut [u32]| {
        let count = values.len() / n;
        let mut starts = Vec::with_capacity(count);
        for_each_strided(
            &other_shape,
            [other_strides[0].as_slice()],
            [layout.offset],
            first,
            count,
            |[p]| starts.push(p),
        );
        let mut block: Vec<T> = Vec::new();
        let mut pairs: Vec<(T::Key, u32)> = Vec::with_capacity(n);
        let mut spare: Vec<(T::Key, u32)> = Vec::new();
        for (g, group) in starts.chunks(GROUP).enumerate() {
            if step != 1 {
                // Strided lanes are copied out a group at a time, each row of the group read
                // together (neighbouring lanes often share cache lines); the gather below
                // then reads a lane at random from the copy.
                block.clear();
                block.resize(group.len() * n, T::default());
                for j in 0..n {
                    let off = j as isize * step;
                    for (q, &start) in group.iter().enumerate() {
                        block[q * n + j] = src[(start as isize + off) as usize];
                    }
                }
            }
            for (q, &start) in group.iter().enumerate() {
                let lane: &[T] = if step == 1 {
                    &src[start..start + n]
                } else {
                    &block[q * n..(q + 1) * n]
                };
                pairs.clear();
                pairs.extend(lane.iter().enumerate().map(|(j, &v)| (v.key(), j as u32)));
                let sorted: &[(T::Key, u32)] = match kth {
                    None => sort_pairs(&mut pairs, &mut spare),
                    Some(k) => {
                        pairs.select_nth_unstable(k);
                        &pairs
                    }
                };
                let l = g * GROUP + q;
                let out_values = &mut values[l * n..(l + 1) * n];
                let out_indices = &mut indices[l * n..(l + 1) * n];
                for ((v, i), &(_, j)) in out_values
                    .iter_mut()
                    .zip(out_indices.iter_mut())
                    .zip(sorted)
                {
                    *v = lane[j as usize];
                    *i = j;
                }
            }
        }
    };
    for_lane_chunks(&mut values, &mut indices, n, &work);
    (values, indices)
}

/// Strided lanes copied out together.
const GROUP: usize = 16;

/// Lanes from this length on are sorted by radix.
const RADIX_FROM: usize = 256;

/// Sorts (key, index) pairs whose indices ascend, stably by key: the sorted pairs, in `pairs`
/// or in `spare`. Long runs take an LSD radix sort, a byte per pass, skipping bytes that all
/// keys share; short ones a comparison sort of the pairs (the index breaking ties).
fn sort_pairs<'a, K: RadixKey>(
    pairs: &'a mut [(K, u32)],
    spare: &'a mut Vec<(K, u32)>,
) -> &'a [(K, u32)] {
    let n = pairs.len();
    if n < RADIX_FROM {
        pairs.sort_unstable();
        return pairs;
    }
    let mut counts = [[0u32; 256]; 8];
    for &(k, _) in pairs.iter() {
        for (b, c) in counts[..K::BYTES].iter_mut().enumerate() {
            c[k.byte(b)] += 1;
        }
    }
    spare.clear();
    spare.resize(n, (K::default(), 0));
    let mut from: &mut [(K, u32)] = pairs;
    let mut to: &mut [(K, u32)] = spare;
    for (b, c) in counts[..K::BYTES].iter().enumerate() {
        if c[from[0].0.byte(b)] as usize == n {
            continue;
        }
        let mut offsets = [0u32; 256];
        let mut acc = 0;
        for (o, &k) in offsets.iter_mut().zip(c) {
            *o = acc;
            acc += k;
        }
        for &p in from.iter() {
            let d = p.0.byte(b);
            to[offsets[d] as usize] = p;
            offsets[d] += 1;
        }
        std::mem::swap(&mut from, &mut to);
    }
    from
}

/// The work on a group of whole lanes: `(first lane, values, indices)`.
type LaneWork<'a, T> = dyn Fn(usize, &mut [T], &mut [u32]) + Sync + 'a;

/// Runs `f(first lane, values, indices)` over groups of whole lanes of `n` elements, over the
/// pool when there is enough work.
fn for_lane_chunks<T: Send>(values: &mut [T], indices: &mut [u32], n: usize, f: &LaneWork<'_, T>) {
    let size = values.len();
    let lane_count = size / n;
    // Sorting costs more per element than elementwise work: smaller tasks pay off.
    let grain = GRAIN / 4;
    if size <= grain || lane_count == 1 {
        f(0, values, indices);
        return;
    }
    let per_task = grain
        .div_ceil(n)
        .max(lane_count.div_ceil(rayon::current_num_threads() * 8));
    values
        .par_chunks_mut(per_task * n)
        .zip(indices.par_chunks_mut(per_task * n))
        .enumerate()
        .for_each(|(t, (v, i))| f(t * per_task, v, i));
}

/// `searchsorted` of `v` in the sorted 1-D `a`, both of type `T`.
fn search<T: SortKey>(a: &ArrayData, v: &ArrayData, right: bool) -> Result<ArrayData> {
    let keys: Vec<T::Key> = a
        .to_vec::<T>("searchsorted")?
        .into_iter()
        .map(T::key)
        .collect();
    let find = |x: T| {
        let k = x.key();
        let at = if right {
            keys.partition_point(|&e| e <= k)
        } else {
            keys.partition_point(|&e| e < k)
        };
        at as u32
    };
    super::elementwise::map::<T, u32>(v, "searchsorted", find)
}
