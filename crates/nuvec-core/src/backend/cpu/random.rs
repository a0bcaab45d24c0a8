//! The random-bits primitive on the CPU, with MLX's layout.
//!
//! Each key owns a block of `W` 32-bit words (its elements' bytes, rounded up to whole
//! words). With `h = ⌈W/2⌉`, the threefry block of counter `(j, j + h)` gives words `j` and
//! `j + h`; when `W` is odd the middle word `h − 1` comes from counter `(h − 1, 0)` instead.
//! Elements narrower than a word take its bytes in little-endian order. Blocks are computed
//! first (one pass over the pool), then spread into the elements (a second pass): each block
//! feeds two distant words, so computing elements directly would hash everything twice.

use super::elementwise::fill;
use crate::Result;
use crate::array::ArrayData;
use crate::dtype::Element;
use crate::ops::random::RandomOp;
use crate::primitive::OutputSpec;
use crate::random::threefry2x32;

/// The unsigned output types: the low bits of a word.
trait Word: Element {
    fn from_word(w: u32) -> Self;
}

impl Word for u8 {
    fn from_word(w: u32) -> u8 {
        w as u8
    }
}

impl Word for u16 {
    fn from_word(w: u32) -> u16 {
        w as u16
    }
}

impl Word for u32 {
    fn from_word(w: u32) -> u32 {
        w
    }
}

/// Computes a random primitive.
pub(crate) fn eval(
    op: &RandomOp,
    inputs: &[ArrayData],
    outputs: &[OutputSpec],
) -> Result<Vec<ArrayData>> {
    match op {
        RandomOp::Bits { width, .. } => {
            let shape = &outputs[0].0;
            let keys = super::copy::to_contiguous_shared(&inputs[0]);
            let all = keys.buffer.host()?.typed::<u32>("random_bits")?;
            let start = keys.layout.offset;
            let keys = &all[start..start + keys.layout.size()];
            let data = match width {
                1 => bits::<u8>(keys, shape),
                2 => bits::<u16>(keys, shape),
                _ => bits::<u32>(keys, shape),
            };
            Ok(vec![data])
        }
    }
}

/// The bits of `shape` from row-major keys (two words each), each key filling an equal
/// contiguous block of the output.
fn bits<T: Word>(keys: &[u32], shape: &[usize]) -> ArrayData {
    let n: usize = shape.iter().product();
    let num_keys = keys.len() / 2;
    if n == 0 || num_keys == 0 {
        return ArrayData::from_vec(Vec::<T>::new(), shape);
    }
    let width = std::mem::size_of::<T>();
    let per_key = n / num_keys;
    let words = (per_key * width).div_ceil(4);
    let half = words.div_ceil(2);
    let odd = words % 2 == 1;
    // Counters are 32-bit: MLX truncates them the same way for blocks past 2³² words.
    let mut blocks = vec![[0u32; 2]; num_keys * half];
    fill(&mut blocks, &|start, chunk| {
        let (mut k, mut j) = (start / half, start % half);
        let mut rest = chunk;
        // One key's run of blocks at a time: the inner loop has no branches, so it
        // vectorises.
        while !rest.is_empty() {
            let key = [keys[2 * k], keys[2 * k + 1]];
            let run = (half - j).min(rest.len());
            let (now, later) = rest.split_at_mut(run);
            for (t, b) in now.iter_mut().enumerate() {
                let c = (j + t) as u32;
                *b = threefry2x32(key, [c, c.wrapping_add(half as u32)]);
            }
            if odd && j + run == half {
                now[run - 1] = threefry2x32(key, [(half - 1) as u32, 0]);
            }
            rest = later;
            j = 0;
            k += 1;
        }
    });
    let mut out = crate::array::pool::alloc::<T>(n);
    let blocks = &blocks;
    fill(&mut out, &|start, chunk| {
        let (mut k, mut i) = (start / per_key, start % per_key);
        for o in chunk.iter_mut() {
            let byte = i * width;
            let word = byte / 4;
            let w = if word < half {
                blocks[k * half + word][0]
            } else {
                blocks[k * half + word - half][1]
            };
            *o = T::from_word(w >> (8 * (byte % 4)));
            i += 1;
            if i == per_key {
                i = 0;
                k += 1;
            }
        }
    });
    ArrayData::from_vec(out, shape)
}
