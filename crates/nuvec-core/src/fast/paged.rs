//! vLLM's paged key/value cache: [`paged_attention`] reads it through a block table,
//! [`paged_write`] places new rows in it.
//!
//! A cache is `[blocks, Hkv, block_size, D]`: block `n` holds `block_size` consecutive
//! positions of one sequence for every head. Sequence `s`'s position `p` lives in block
//! `block_table[s, p / block_size]`, row `p % block_size`; a writer addresses it by its
//! *slot*, `block · block_size + row`.

use super::attention::{Attention, attention_graph, check_qkv};
use super::check::{Checker, like};
use super::{FastOp, Fused, check_inputs, floating, integral, one};
use crate::backend::cuda::fast::CudaKernel;
use crate::error::invalid;
use crate::primitive::OutputSpec;
use crate::{Array, DType, Result, promote_types};

/// Attention of `q` (`[B, Hq, Lq, D]`) over keys and values held in paged caches
/// (`[blocks, Hkv, block_size, D]` and `[blocks, Hkv, block_size, Dv]`).
///
/// Sequence `b` has `lengths[b]` positions, found in the blocks `block_table[b, ..]`
/// (int, `[B, max_blocks]`); its queries are its last `Lq` positions, so query `i` sees
/// positions `0..=lengths[b] − Lq + i` (causal among the queries when `Lq > 1`, all
/// positions of the sequence when `Lq = 1`). Scores are scaled by `scale`; `Hq` is a
/// multiple of `Hkv` (grouped-query attention). The result (`[B, Hq, Lq, Dv]`) equals
/// [`super::scaled_dot_product_attention`] over each sequence's keys laid out contiguously.
/// Lengths must lie in `Lq..=max_blocks · block_size`.
///
/// ```
/// use nuvec_core::{Array, DType, fast, ones};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let q = ones(&[1, 1, 1, 2], DType::F32)?;
/// // Two blocks of two positions; the sequence uses block 1, then block 0, 3 positions.
/// let k = ones(&[2, 1, 2, 2], DType::F32)?;
/// let v = Array::from_slice(&[3.0f32, 3.0, 4.0, 4.0, 1.0, 1.0, 2.0, 2.0], &[2, 1, 2, 2])?;
/// let table = Array::from_slice(&[1i32, 0], &[1, 2])?;
/// let lengths = Array::from_slice(&[3i32], &[1])?;
/// let y = fast::paged_attention(&q, &k, &v, &table, &lengths, 1.0)?;
/// // Equal scores over values 1, 2 and 3.
/// assert_eq!(y.to_vec::<f32>()?, [2.0, 2.0]);
/// # Ok(())
/// # }
/// ```
pub fn paged_attention(
    q: &Array,
    k_cache: &Array,
    v_cache: &Array,
    block_table: &Array,
    lengths: &Array,
    scale: f32,
) -> Result<Array> {
    const OP: &str = "paged_attention";
    check_inputs(&[q, k_cache, v_cache, block_table, lengths])?;
    let names = ["q and the caches", "cache's"];
    let [qs, _, _] = check_qkv(OP, [q, k_cache, v_cache], names, |qs, ks, vs| {
        ks[..3] == vs[..3] && ks[3] == qs[3]
    })?;
    if block_table.ndim() != 2 || block_table.shape()[0] != qs[0] {
        return Err(invalid(
            OP,
            format!(
                "the block table must be [{}, max_blocks], got {:?}",
                qs[0],
                block_table.shape()
            ),
        ));
    }
    if lengths.shape() != [qs[0]] {
        return Err(invalid(
            OP,
            format!("lengths must be [{}], got {:?}", qs[0], lengths.shape()),
        ));
    }
    for (what, a) in [("the block table", block_table), ("lengths", lengths)] {
        if !integral(a.dtype()) {
            return Err(invalid(
                OP,
                format!("{what} must hold integers, got {}", a.dtype()),
            ));
        }
    }
    let dtype = promote_types(promote_types(q.dtype(), k_cache.dtype()), v_cache.dtype());
    floating(OP, dtype)?;
    let inputs = vec![
        q.astype(dtype)?,
        k_cache.astype(dtype)?,
        v_cache.astype(dtype)?,
        block_table.astype(DType::I32)?,
        lengths.astype(DType::I32)?,
    ];
    one(
        FastOp::PagedAttention {
            scale: scale.to_bits(),
        },
        inputs,
    )
}

/// [`FastOp::PagedAttention`]'s fallback, `(q, k_cache, v_cache, table, lengths)`: each
/// sequence's blocks gathered into contiguous keys and values, and a mask hiding the
/// positions past each query's.
fn paged_attention_graph(inputs: &[Array], scale: f32) -> Result<Array> {
    let (q, table, lengths) = (&inputs[0], &inputs[3], &inputs[4]);
    let (b, hq, lq) = (q.shape()[0], q.shape()[1], q.shape()[2]);
    let (blocks, hkv, size) = {
        let s = inputs[1].shape();
        (s[0], s[1], s[2])
    };
    let positions = table.shape()[1] * size;
    if blocks == 0 || positions == 0 {
        return crate::zeros(&[b, hq, lq, inputs[2].shape()[3]], q.dtype());
    }
    // [blocks, Hkv, bs, D] -> [B, max_blocks, Hkv, bs, D] -> [B, Hkv, max_blocks · bs, D].
    let contiguous = |cache: &Array| -> Result<Array> {
        let rows = crate::take(cache, table, Some(0))?;
        let rows = crate::transpose(&rows, &[0, 2, 1, 3, 4])?;
        let d = cache.shape()[3];
        reshape_to(&rows, &[b, hkv, positions, d])
    };
    let (keys, values) = (contiguous(&inputs[1])?, contiguous(&inputs[2])?);
    // Query `i` of sequence `s` sees positions up to `lengths[s] − Lq + i`.
    let position = reshape_to(
        &crate::arange(0.0, positions as f64, 1.0, DType::I32)?,
        &[1, 1, 1, positions],
    )?;
    let query = reshape_to(
        &crate::arange(0.0, lq as f64, 1.0, DType::I32)?,
        &[1, 1, lq, 1],
    )?;
    let last = crate::add(
        crate::subtract(&reshape_to(lengths, &[b, 1, 1, 1])?, lq)?,
        &query,
    )?;
    let visible = crate::less_equal(&position, &last)?;
    let mask = crate::broadcast_to(&visible, &[b, hq, lq, positions])?;
    let form = Attention {
        scale,
        causal: false,
        mask: true,
        sinks: false,
    };
    attention_graph(&[q.clone(), keys, values, mask], form)
}

fn reshape_to(a: &Array, shape: &[usize]) -> Result<Array> {
    crate::reshape(a, &super::dims(shape))
}

/// `cache` (`[blocks, Hkv, block_size, D]`) with the rows of `new` (`[N, Hkv, D]`)
/// written at `slots` (int, `[N]`): row `n` goes to block `slots[n] / block_size`, position
/// `slots[n] % block_size`, for every head. Negative slots (padding) and slots past the
/// cache are skipped; for repeated slots the last row wins. `new` is converted to the
/// cache's type. When evaluation owns the cache alone it is written in place; a cache
/// another array still holds is copied first and never changes.
///
/// ```
/// use nuvec_core::{Array, DType, fast, zeros};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let cache = zeros(&[2, 1, 2, 1], DType::F32)?; // 2 blocks of 2 positions
/// let new = Array::from_slice(&[7.0f32, 8.0], &[2, 1, 1])?;
/// let slots = Array::from_slice(&[3i32, -1], &[2])?; // block 1 row 1; padding
/// let out = fast::paged_write(&cache, &new, &slots)?;
/// assert_eq!(out.to_vec::<f32>()?, [0.0, 0.0, 0.0, 7.0]);
/// # Ok(())
/// # }
/// ```
pub fn paged_write(cache: &Array, new: &Array, slots: &Array) -> Result<Array> {
    const OP: &str = "paged_write";
    check_inputs(&[cache, new, slots])?;
    if cache.ndim() != 4 {
        return Err(invalid(
            OP,
            format!(
                "the cache must be [blocks, heads, block_size, D], got {:?}",
                cache.shape()
            ),
        ));
    }
    floating(OP, cache.dtype())?;
    let cs = cache.shape();
    if new.ndim() != 3 || new.shape()[1] != cs[1] || new.shape()[2] != cs[3] {
        return Err(invalid(
            OP,
            format!(
                "new rows must be [N, {}, {}], got {:?}",
                cs[1],
                cs[3],
                new.shape()
            ),
        ));
    }
    if slots.shape() != [new.shape()[0]] || !integral(slots.dtype()) {
        return Err(invalid(
            OP,
            format!(
                "slots must be [{}] integers, got {:?} of {}",
                new.shape()[0],
                slots.shape(),
                slots.dtype()
            ),
        ));
    }
    let inputs = vec![
        cache.clone(),
        new.astype(cache.dtype())?,
        slots.astype(DType::I32)?,
    ];
    one(FastOp::PagedWrite, inputs)
}

/// [`FastOp::PagedWrite`]'s fallback, `(cache, new, slots)`: one scatter of `[1, Hkv, 1,
/// D]` windows at `(block, row)`, which writes in place when it owns the cache.
fn paged_write_graph(inputs: &[Array]) -> Result<Array> {
    let (cache, new, slots) = (&inputs[0], &inputs[1], &inputs[2]);
    let (blocks, heads, size, d) = {
        let s = cache.shape();
        (s[0], s[1], s[2], s[3])
    };
    let n = new.shape()[0];
    if n == 0 || cache.size() == 0 {
        return Ok(cache.clone());
    }
    // Padding slots go to a block past the end, where the scatter drops its window.
    let past = (blocks * size) as i64;
    let slots = crate::where_(crate::less(slots, 0)?, past, slots)?;
    let block = crate::floor_divide(&slots, size)?;
    let row = crate::remainder(&slots, size)?;
    let windows = reshape_to(new, &[n, 1, heads, 1, d])?;
    crate::scatter(cache, &[block, row], &windows, &[0, 2])
}

/// [`FastOp::PagedAttention`]: `(q, k_cache, v_cache, block_table, lengths)`.
pub(crate) struct PagedAttention {
    /// The score scale.
    pub(crate) scale: f32,
}

impl Fused for PagedAttention {
    fn name(&self) -> &'static str {
        "paged_attention"
    }

    fn specs(&self, c: &Checker<'_>) -> Result<Vec<OutputSpec>> {
        c.count(5, 5)?;
        let [qs, _, vs] = c.attention(|qs, ks, vs| ks[..3] == vs[..3] && ks[3] == qs[3])?;
        let table = c.rank(3, Some(2))?;
        c.integer(3)?;
        c.integer(4)?;
        c.holds(table.shape()[0] == qs[0], || {
            format!("a block table of shape {:?}", table.shape())
        })?;
        c.shape(4, &[qs[0]])?;
        Ok(vec![(
            vec![qs[0], qs[1], qs[2], vs[3]],
            c.inputs[0].dtype(),
        )])
    }

    fn fallback(&self, inputs: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![paged_attention_graph(inputs, self.scale)?])
    }

    fn cuda(&self) -> Option<&dyn CudaKernel> {
        Some(self)
    }
}

/// [`FastOp::PagedWrite`]: `(cache, new, slots)`.
pub(crate) struct PagedWrite;

impl Fused for PagedWrite {
    fn name(&self) -> &'static str {
        "paged_write"
    }

    fn specs(&self, c: &Checker<'_>) -> Result<Vec<OutputSpec>> {
        c.count(3, 3)?;
        let cache = c.rank(0, Some(4))?;
        c.float(0)?;
        let new = c.rank(1, Some(3))?;
        c.same_dtype(0, 1)?;
        let cs = cache.shape();
        c.shape(1, &[new.shape()[0], cs[1], cs[3]])?;
        c.integer(2)?;
        c.shape(2, &[new.shape()[0]])?;
        Ok(vec![like(cache)])
    }

    fn fallback(&self, inputs: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![paged_write_graph(inputs)?])
    }
}
