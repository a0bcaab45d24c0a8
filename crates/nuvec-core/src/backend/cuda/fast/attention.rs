//! Attention with few query rows (decoding) on the GPU: `FastOp::Attention` over
//! contiguous (or strided) keys and `FastOp::PagedAttention` over vLLM's paged cache share
//! one kernel (`kernels/fast/attention.cu`), so a paged sequence of fewer than [`SINGLE`] keys
//! gets the very bits the same keys give laid out contiguously.
//!
//! The kernel takes f32, f16 and bf16 (f32 accumulation, online softmax), head sizes that
//! are multiples of 32 up to 256, and 512, with equal key and value sizes, 1 to [`MAX_ROWS`]
//! query rows per head, any grouping of query heads over key heads, and no mask or the causal
//! one aligned with the last keys, up to 65,535 sequences and key heads (the grid's limits).
//! Inputs whose features are not contiguous are copied first.
//!
//! `FastOp::Attention` records a fused node for every shape MLX sends to a kernel (the seeds
//! test that). Up to [`MAX_ROWS`] query rows without mask array or sinks run this kernel
//! (so contiguous attention keeps the paged kernel's bits); longer queries, array masks and
//! sinks run the tiled kernels of `flash.rs` (f32 included); what neither takes (layouts
//! aside, which are copied) runs the fallback graph inside the node on this stream.
//!
//! The kernel is memory bound, and built to stream the keys and values at the device's
//! bandwidth: one block per (sequence, key head, chunk of the group's query rows, split of
//! the keys), so a key row is read once for all the query heads that share it; lanes read
//! 16-byte chunks straight into registers; f16 and bf16 multiply on the tensor cores (8 query
//! rows a block; past head size 256 the block's warps split the features), f32 on the FMA
//! units (1, 2 or 4 rows a block). `attention.cu` and `attention_wide.cu` say how.
//!
//! Sequences of at least [`SINGLE`] keys may be split over several blocks (enough to give
//! every multiprocessor several, with whole waves) and merged by a second kernel, a
//! programmatic dependent launch on Hopper so that its launch overlaps the split kernel's
//! last blocks (2-7% at one sequence of 8k keys on an H100; `NUVEC_PDL=0` turns it off); the
//! paged kernel decides per sequence on the device, from its length. Tuning knobs, for the
//! benchmarks: `NUVEC_ATTN_MERGE=block` has the last split block of each row chunk merge the
//! splits (no second kernel; counters kept per stream, set back to zero by the kernel), and
//! `NUVEC_ATTN_SPLITS=n` forces the splits of long sequences. Through
//! `NUVEC_KERNEL_DEFINES`, `NV_ATTN_MMA_BLOCKS=4` has the half types' kernel aim at four
//! blocks a multiprocessor (three by default; the splits follow its occupancy).
//!
//! A warp of the half types' kernel that the splits leave at most [`FEW_STEPS`] steps (keys
//! not paged) asks L1 for its key and value rows [`L1_AHEAD`] steps ahead of its loads, so
//! that they are on their way with no register held for them (`NUVEC_ATTN_L1=d` sets the
//! distance, 0 turns the requests off). On an H100 `decode_b1_8k` (three steps a warp) took
//! 16.4-17.3 µs with them, whatever ran before it; without, it took 15.1-16.5 in most runs as
//! a process's first case but 19.2-19.4 after a copy in the same process (and once as a fresh
//! machine's first process). On the long walks, which stream at the copy's speed and keep no
//! requests, they slowed `decode_b8_8k` by 12-30% (nineteenth session).
//!
//! `NUVEC_ATTN_L2=1` has a warp of the half types' kernel that the splits leave at most
//! [`FEW_STEPS`] steps (keys not paged, 16-byte loads, Hopper on) first ask L2 for all of its
//! later steps' rows (`cp.async.bulk.prefetch`, a request a run of rows), so that each step
//! does not wait a whole memory latency for its loads. It is off by default: `decode_b1_8k`
//! took 17.1-17.5 µs with it on two H100s, against 19.6-20.0 without on the first and
//! 15.4-16.4 on the second (seventeenth session). Asking a few steps ahead of longer walks
//! slowed the cases that already stream at the copy's speed (`decode_b8_8k` by 9-12%,
//! `decode_b1_128k` by 18-28%).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, OnceLock};

use cudarc::driver::{DeviceRepr, LaunchConfig};

use super::{CudaKernel, Place, flash, nested, with_copies};
use crate::array::ArrayData;
use crate::backend::cuda::elementwise::type_names;
use crate::backend::cuda::launch::{Kernel, KernelKey, symbol};
use crate::fast::attention::Attention;
use crate::fast::paged::PagedAttention;
use crate::fast::{Arg, kernel_sized};
use crate::primitive::OutputSpec;
use crate::{DType, Result};

impl CudaKernel for Attention {
    /// The shapes MLX sends to its kernels (its `has_fused_kernel` and `use_fallback` rules,
    /// without the NAX kernels and the blocked head size 512 one).
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        if !kernel_sized(inputs) {
            return false;
        }
        let (q, k, v) = (inputs[0], inputs[1], inputs[2]);
        let (lq, lk) = (q.shape[2], k.shape[2]);
        let (d, dv) = (q.shape[3], v.shape[3]);
        let group = q.shape[1] / k.shape[1].max(1);
        if lq == 0 || lk == 0 {
            return false;
        }
        if lq <= 8 {
            // The vector kernels, one query row per simdgroup.
            let head = (d == dv && matches!(d, 64 | 96 | 128 | 256 | 512))
                || (d, dv) == (192, 128)
                || (d, dv) == (96, 64);
            let wide_head = d != 512 || (lq == 1 && group == 8 && !self.mask && lk >= 1024);
            return head && lq <= lk && lq * group <= 32 && wide_head;
        }
        // The tiled kernel.
        let head =
            (d == dv && matches!(d, 64 | 72 | 80 | 96 | 128 | 192 | 256)) || (d, dv) == (96, 64);
        // MLX finds the composition faster for these head sizes, except long causal
        // self-attention in half precision at 256.
        let composition_wins = match d {
            192 => true,
            256 => !(q.dtype != DType::F32 && self.causal && lq >= 2048 && lq == lk),
            _ => false,
        };
        head && (!self.causal || lq <= lk) && !composition_wins
    }

    fn batchable(&self, _: &[Arg<'_>]) -> bool {
        false
    }

    fn eval(
        &self,
        place: &Place,
        inputs: &mut [ArrayData],
        outputs: &[OutputSpec],
    ) -> Result<Vec<ArrayData>> {
        let shapes: Vec<&[usize]> = inputs.iter().map(|d| d.layout.shape.as_slice()).collect();
        let dtype = inputs[0].dtype();
        let decodes = !self.mask
            && !self.sinks
            && covers(&shapes, dtype, self.causal)
            && built_for(place, dtype, shapes[0][3]);
        let form = flash::Form {
            scale: self.scale,
            causal: self.causal,
            mask: self.mask,
            sinks: self.sinks,
        };
        let mask = self.mask.then(|| inputs[3].dtype());
        const NAME: &str = "scaled_dot_product_attention";
        // Up to 16 query rows the decoding kernel, so that contiguous attention gives the bits
        // of the paged one (the seeds compare them).
        if !decodes && flash::covers(&shapes, dtype, mask, form) {
            return with_copies(place, NAME, inputs, |i| {
                flash::attention(place, form, i, outputs)
            });
        }
        if !decodes {
            // Pending its kernel (see the module's documentation).
            return nested(place, self, inputs, outputs);
        }
        with_copies(place, NAME, inputs, |i| {
            attention(place, self.scale, self.causal, i, outputs)
        })
    }
}

/// Whether the decoding kernel computes contiguous attention over `(q, k, v)` of these
/// shapes.
fn covers(shapes: &[&[usize]], dtype: DType, causal: bool) -> bool {
    let (q, k, v) = (shapes[0], shapes[1], shapes[2]);
    let (batch, hq, lq, d) = (q[0], q[1], q[2], q[3]);
    let (hkv, lk) = (k[1], k[2]);
    takes(dtype, d, v[3], lq)
        && ![batch, hq, lq, lk, hkv].contains(&0)
        && (!causal || lq <= lk)
        && fits_grid(batch, hq, hkv, lq, dtype)
}

/// Whether the grid of `batch` sequences of `hkv` key heads fits the launch limits: row
/// chunks times splits across, key heads and sequences up to 65,535 each.
fn fits_grid(batch: usize, hq: usize, hkv: usize, lq: usize, dtype: DType) -> bool {
    let group = hq / hkv.max(1);
    let rows = group * lq;
    let nchunks = rows.div_ceil(block_rows(dtype, rows));
    nchunks * MAX_SPLITS <= i32::MAX as usize
        && hkv <= 65_535
        && batch <= 65_535
        && group <= i32::MAX as usize
}

impl CudaKernel for PagedAttention {
    /// `(q, k_cache, v_cache, table, lengths)` of one kernel type within the decoding
    /// kernel's head sizes and query rows, int32 tables and lengths.
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        if !kernel_sized(inputs) || inputs.len() != 5 {
            return false;
        }
        let (q, kc, vc, table, lengths) = (inputs[0], inputs[1], inputs[2], inputs[3], inputs[4]);
        let (batch, hq, lq, d) = (q.shape[0], q.shape[1], q.shape[2], q.shape[3]);
        let (blocks, hkv, block_size) = (kc.shape[0], kc.shape[1], kc.shape[2]);
        let capacity = table.shape[1] * block_size;
        takes(q.dtype, d, vc.shape[3], lq)
            && kc.dtype == q.dtype
            && vc.dtype == q.dtype
            && ![batch, hq, lq, hkv, blocks, capacity].contains(&0)
            && block_size <= i32::MAX as usize
            && table.dtype == DType::I32
            && lengths.dtype == DType::I32
            && fits_grid(batch, hq, hkv, lq, q.dtype)
    }

    fn batchable(&self, _: &[Arg<'_>]) -> bool {
        false
    }

    fn eval(
        &self,
        place: &Place,
        inputs: &mut [ArrayData],
        outputs: &[OutputSpec],
    ) -> Result<Vec<ArrayData>> {
        if !built_for(place, inputs[0].dtype(), inputs[0].layout.shape[3]) {
            return nested(place, self, inputs, outputs);
        }
        with_copies(place, "paged_attention", inputs, |i| {
            paged(place, self.scale, i, outputs)
        })
    }
}

const COMMON: &str = include_str!("../kernels/common.cuh");
const ATTENTION: &str = include_str!("../kernels/fast/attention.cu");
const ATTENTION_MERGE: &str = include_str!("../kernels/fast/attention_merge.cu");
const ATTENTION_WIDE: &str = include_str!("../kernels/fast/attention_wide.cu");

/// Sequences with fewer keys run in one pass (`NV_ATTN_SINGLE` in the kernel).
const SINGLE: usize = 1024;
/// The most query rows per head the kernel takes.
const MAX_ROWS: usize = 16;
/// Threads per block (`NV_ATTN_THREADS`).
const THREADS: u32 = 128;
/// Threads the merge of the splits spreads a row over (`NV_ATTN_COMBINE_THREADS`).
const COMBINE_THREADS: usize = 256;
/// The fewest keys a split of a long sequence gets.
const MIN_SPLIT_KEYS: usize = 128;
/// The most splits of one sequence.
const MAX_SPLITS: usize = 256;
/// The most steps a warp of the half types' kernel may have for its rows to be asked of L1
/// ahead of its loads, or (when asked) of L2 at its start (see the module's documentation).
const FEW_STEPS: usize = 4;
/// How many steps ahead of its loads such a warp asks, unless `NUVEC_ATTN_L1` says.
const L1_AHEAD: usize = 4;
/// Warps a block (`NV_ATTN_WARPS`).
const WARPS: usize = THREADS as usize / 32;
/// The types with a kernel.
const TYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];
/// The head sizes with a kernel (key and value rows alike).
const HEADS: [usize; 9] = [32, 64, 96, 128, 160, 192, 224, 256, 512];

/// The kernel's arguments (`NvAttn` in `attention.cu`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct AttnArgs {
    q_strides: [i64; 3],
    q_offset: i64,
    k_strides: [i64; 3],
    k_offset: i64,
    v_strides: [i64; 3],
    v_offset: i64,
    t_strides: [i64; 2],
    t_offset: i64,
    len_stride: i64,
    len_offset: i64,
    keys: i64,
    blocks: i64,
    hkv: i32,
    group: i32,
    lq: i32,
    block_size: i32,
    bs_magic: u32,
    bs_shift: i32,
    causal: i32,
    nsplit: i32,
    nchunks: i32,
    merge: i32,
    scale: f32,
    l2_steps: i32,
    l1_ahead: i32,
}

// SAFETY: `AttnArgs` is `repr(C)` plain data with the field order, types and alignment of
// `NvAttn`, so its bytes are what the kernel reads as its parameter.
unsafe impl DeviceRepr for AttnArgs {}

/// Query rows a block takes out of the `rows` of a key head: the tensor-core kernels (f16,
/// bf16) always 8 (`NV_ATTN_MMA_ROWS`: padding rows cost them nothing), the f32 kernels 1, 2
/// or 4 (the rows' state lives in every lane's registers).
fn block_rows(dtype: DType, rows: usize) -> usize {
    if dtype == DType::F32 {
        rows.next_power_of_two().min(4)
    } else {
        8
    }
}

/// The keys one warp takes a step (`KS` of `nv_attention_mma`, `KP · U` of
/// `NvAttnLanes`): the unit the splits of a sequence are made of.
fn warp_keys(dtype: DType, d: usize) -> usize {
    if dtype != DType::F32 {
        // Past head size 256 the step is the block's (`nv_attention_mma_wide`).
        return if d <= 128 || d > 256 { 16 } else { 8 };
    }
    let chunks = d / 4;
    let lanes = chunks.next_power_of_two().clamp(4, 32);
    let per_lane = chunks.div_ceil(lanes);
    (32 / lanes) * if per_lane == 1 { 4 } else { 2 }
}

/// `(magic, shift)` with `j / d == (j · magic) >> (31 + shift)` for every `j < 2^31`:
/// `shift = ⌈log2 d⌉`, `magic = ⌈2^(31 + shift) / d⌉`, which fits 32 bits. The error of the
/// product stays below `j / 2^(31 + shift) < 2^-shift <= 1/d`, too little to cross an integer.
fn magic_division(d: u32) -> (u32, i32) {
    let d = d.max(1);
    let shift = 32 - (d - 1).leading_zeros();
    let magic = (1u64 << (31 + shift)).div_ceil(u64::from(d));
    (magic as u32, shift as i32)
}

/// The module of one type and head size: its attention kernels (four forms of each row
/// count) and the merges.
fn source(dtype: DType, d: usize) -> String {
    let (ct, tn) = type_names(dtype).expect("float types have kernels");
    let kernels = if dtype == DType::F32 {
        [1, 2, 4]
            .map(|r| format!("NV_ATTENTION_LANES({ct}, {tn}, {d}, {r})\n"))
            .concat()
    } else if d <= 256 {
        format!("NV_ATTENTION_MMA({ct}, {tn}, {d})\n")
    } else {
        format!("{ATTENTION_WIDE}\nNV_ATTENTION_MMA_WIDE({ct}, {tn}, {d})\n")
    };
    format!(
        "{COMMON}\n{ATTENTION}\n{ATTENTION_MERGE}\n{kernels}NV_ATTENTION_COMBINE({ct}, {tn}, {d})\n"
    )
}

/// Whether 16-byte loads of rows of `data` (features contiguous) are aligned: the first
/// element and every step (the tiled kernel's test too, `flash.rs`).
pub(super) fn aligned(ptr: u64, data: &ArrayData, size: usize) -> bool {
    let l = &data.layout;
    (ptr + (l.offset * size) as u64).is_multiple_of(16)
        && l.strides[..3]
            .iter()
            .all(|&s| (s * size as isize).rem_euclid(16) == 0)
}

/// Strides of the three leading axes, and the offset, as the kernels read them.
pub(super) fn leading(data: &ArrayData) -> ([i64; 3], i64) {
    let s = &data.layout.strides;
    (
        [s[0] as i64, s[1] as i64, s[2] as i64],
        data.layout.offset as i64,
    )
}

/// Whether the features (last axis) of `data` are contiguous.
pub(super) fn rows_contiguous(data: &ArrayData) -> bool {
    let l = &data.layout;
    l.shape[3] <= 1 || l.strides[3] == 1
}

/// Splits per sequence of `keys` keys when `units` blocks (sequences × key heads × row
/// chunks) share a device that holds `wave` blocks at once: one below [`SINGLE`] keys; else
/// the fewest that fill their last wave to 95% (so that every multiprocessor streams from
/// several blocks until the end), or failing that the fullest, each split keeping at least
/// [`MIN_SPLIT_KEYS`] keys. The kernel cuts a sequence into splits of whole warp steps
/// (`step` keys), `⌈steps / n⌉` each: counts that would leave a split empty are trimmed.
fn splits(keys: usize, units: usize, wave: usize, step: usize) -> usize {
    if keys < SINGLE {
        return 1;
    }
    let (units, wave) = (units.max(1), wave.max(1));
    let steps = keys.div_ceil(step.max(1));
    let most = keys
        .div_ceil(MIN_SPLIT_KEYS)
        .clamp(1, MAX_SPLITS)
        .min(steps);
    // Per mille of the waves' blocks that n splits fill.
    let fill = |n: usize| {
        let blocks = units * n;
        blocks * 1000 / (blocks.div_ceil(wave) * wave)
    };
    let mut best = 1;
    for n in (1..=most).map(|n| steps.div_ceil(steps.div_ceil(n))) {
        if fill(n) >= 950 {
            return n;
        }
        if fill(n) > fill(best) {
            best = n;
        }
    }
    best
}

/// The most warp steps (of `step` keys) a warp of a block takes when a sequence of `keys` keys
/// is cut into `nsplit` splits: a split's share of the steps (`nv_attn_bounds`), which the
/// block's [`WARPS`] warps take in turn.
fn warp_steps(keys: usize, step: usize, nsplit: usize) -> usize {
    keys.div_ceil(step.max(1))
        .div_ceil(nsplit.max(1))
        .div_ceil(WARPS)
}

/// Blocks of `f` (of [`THREADS`] threads) one multiprocessor holds at once, asked of the
/// driver once per kernel.
fn resident(key: &KernelKey, f: &Kernel) -> Result<usize> {
    static RESIDENT: LazyLock<Mutex<HashMap<KernelKey, usize>>> =
        LazyLock::new(|| Mutex::new(HashMap::new()));
    let known = RESIDENT.lock().map_or(None, |m| m.get(key).copied());
    if let Some(n) = known {
        return Ok(n);
    }
    let n = f.resident(THREADS as usize, 0)?;
    if let Ok(mut m) = RESIDENT.lock() {
        m.insert(*key, n);
    }
    Ok(n)
}

/// Whether the last split block of each row chunk merges the splits (`NUVEC_ATTN_MERGE=block`),
/// instead of a second kernel.
fn merge_in_block() -> bool {
    static MERGE: OnceLock<bool> = OnceLock::new();
    *MERGE.get_or_init(|| std::env::var("NUVEC_ATTN_MERGE").is_ok_and(|v| v == "block"))
}

/// The splits of long sequences when forced (`NUVEC_ATTN_SPLITS`).
fn forced_splits() -> Option<usize> {
    static SPLITS: OnceLock<Option<usize>> = OnceLock::new();
    *SPLITS.get_or_init(|| {
        std::env::var("NUVEC_ATTN_SPLITS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map(|n: usize| n.clamp(1, MAX_SPLITS))
    })
}

/// Whether a warp with few steps asks L2 for its later ones (`NUVEC_ATTN_L2=1`; see the
/// module's documentation).
fn l2_requests() -> bool {
    static L2: OnceLock<bool> = OnceLock::new();
    *L2.get_or_init(|| std::env::var("NUVEC_ATTN_L2").is_ok_and(|v| v == "1"))
}

/// Steps ahead of its loads a warp with few steps asks L1 for its rows (`NUVEC_ATTN_L1`, else
/// [`L1_AHEAD`]; 0: none).
fn l1_ahead() -> usize {
    static AHEAD: OnceLock<usize> = OnceLock::new();
    *AHEAD.get_or_init(|| {
        std::env::var("NUVEC_ATTN_L1")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .map_or(L1_AHEAD, |d: usize| d.min(64))
    })
}

/// Whether a warp of `warp_steps` steps is one the L1 and L2 requests are for: the half types'
/// kernel (head sizes up to 256) over contiguous keys, at most [`FEW_STEPS`] steps.
fn few_steps(dtype: DType, d: usize, paged: bool, warp_steps: usize) -> bool {
    dtype != DType::F32 && d <= 256 && !paged && warp_steps <= FEW_STEPS
}

/// The steps ahead of its loads a warp of `warp_steps` steps asks L1 for its rows: `ahead`
/// where [`few_steps`] holds, else none.
fn l1_distance(dtype: DType, d: usize, paged: bool, warp_steps: usize, ahead: usize) -> usize {
    if few_steps(dtype, d, paged, warp_steps) {
        ahead
    } else {
        0
    }
}

/// What both entry points hand to [`launch`].
struct Job {
    dtype: DType,
    d: usize,
    batch: usize,
    hq: usize,
    paged: bool,
    /// q, k, v, table, lengths (0 where absent).
    ptrs: [u64; 5],
    vec: bool,
    args: AttnArgs,
}

/// The head size and dtype checks both entry points share.
fn takes(dtype: DType, d: usize, dv: usize, lq: usize) -> bool {
    TYPES.contains(&dtype) && d == dv && HEADS.contains(&d) && lq <= MAX_ROWS
}

/// Whether the device has this head size's kernel: the half types past head size 256 need the
/// tensor cores' bf16 and f16 products (Ampere on).
fn built_for(place: &Place, dtype: DType, d: usize) -> bool {
    dtype == DType::F32 || d <= 256 || place.gpu.props.arch.major >= 8
}

/// `FastOp::Attention` without mask array or sinks: `(q, k, v)`, `[B, H, L, D]` each.
fn attention(
    place: &Place,
    scale: f32,
    causal: bool,
    inputs: &[ArrayData],
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    let (q, k, v) = (&inputs[0], &inputs[1], &inputs[2]);
    let dtype = outputs[0].1;
    let (qs, ks, vs) = (&q.layout.shape, &k.layout.shape, &v.layout.shape);
    let (batch, hq, lq, d) = (qs[0], qs[1], qs[2], qs[3]);
    let (hkv, lk) = (ks[1], ks[2]);
    if inputs.len() != 3
        || !takes(dtype, d, vs[3], lq)
        || [batch, hq, lq, lk, hkv].contains(&0)
        || (causal && lq > lk)
        || ![q, k, v]
            .iter()
            .all(|a| a.dtype() == dtype && rows_contiguous(a))
    {
        return Ok(None);
    }
    let size = dtype.size();
    let ptrs = [place.input(q)?, place.input(k)?, place.input(v)?, 0, 0];
    let vec = aligned(ptrs[1], k, size) && aligned(ptrs[2], v, size);
    let (q_strides, q_offset) = leading(q);
    let (k_strides, k_offset) = leading(k);
    let (v_strides, v_offset) = leading(v);
    let args = AttnArgs {
        q_strides,
        q_offset,
        k_strides,
        k_offset,
        v_strides,
        v_offset,
        keys: lk as i64,
        causal: i32::from(causal),
        scale: scale * std::f32::consts::LOG2_E,
        ..AttnArgs::default()
    };
    let job = Job {
        dtype,
        d,
        batch,
        hq,
        paged: false,
        ptrs,
        vec,
        args,
    };
    launch(place, job, hkv, lq, lk, outputs)
}

/// `FastOp::PagedAttention`: `(q, k_cache, v_cache, table, lengths)`, the caches
/// `[blocks, Hkv, block_size, D]`, the table `[B, max_blocks]` and lengths `[B]` int32.
fn paged(
    place: &Place,
    scale: f32,
    inputs: &[ArrayData],
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    let (q, kc, vc, table, lengths) = (&inputs[0], &inputs[1], &inputs[2], &inputs[3], &inputs[4]);
    let dtype = outputs[0].1;
    let (qs, cs) = (&q.layout.shape, &kc.layout.shape);
    let (batch, hq, lq, d) = (qs[0], qs[1], qs[2], qs[3]);
    let (blocks, hkv, block_size) = (cs[0], cs[1], cs[2]);
    let capacity = table.layout.shape[1] * block_size;
    if !takes(dtype, d, vc.layout.shape[3], lq)
        || [batch, hq, lq, hkv, blocks, capacity].contains(&0)
        || block_size > i32::MAX as usize
        || ![q, kc, vc]
            .iter()
            .all(|a| a.dtype() == dtype && rows_contiguous(a))
        || table.dtype() != DType::I32
        || lengths.dtype() != DType::I32
    {
        return Ok(None);
    }
    let size = dtype.size();
    let ptrs = [
        place.input(q)?,
        place.input(kc)?,
        place.input(vc)?,
        place.input(table)?,
        place.input(lengths)?,
    ];
    let vec = aligned(ptrs[1], kc, size) && aligned(ptrs[2], vc, size);
    let (q_strides, q_offset) = leading(q);
    let (k_strides, k_offset) = leading(kc);
    let (v_strides, v_offset) = leading(vc);
    let ts = &table.layout.strides;
    let (bs_magic, bs_shift) = magic_division(block_size as u32);
    let args = AttnArgs {
        q_strides,
        q_offset,
        k_strides,
        k_offset,
        v_strides,
        v_offset,
        t_strides: [ts[0] as i64, ts[1] as i64],
        t_offset: table.layout.offset as i64,
        len_stride: lengths.layout.strides[0] as i64,
        len_offset: lengths.layout.offset as i64,
        keys: capacity as i64,
        blocks: blocks as i64,
        block_size: block_size as i32,
        bs_magic,
        bs_shift,
        // Query i of a sequence of n positions sees positions 0..=n − Lq + i.
        causal: 1,
        scale: scale * std::f32::consts::LOG2_E,
        ..AttnArgs::default()
    };
    let job = Job {
        dtype,
        d,
        batch,
        hq,
        paged: true,
        ptrs,
        vec,
        args,
    };
    launch(place, job, hkv, lq, capacity, outputs)
}

/// Runs the attention kernel (and the merge of the splits when there are several) into a
/// new `[B, Hq, Lq, D]` output; `keys` is the most keys a sequence may have.
fn launch(
    place: &Place,
    mut job: Job,
    hkv: usize,
    lq: usize,
    keys: usize,
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    let (dtype, d) = (job.dtype, job.d);
    let group = job.hq / hkv;
    if !fits_grid(job.batch, job.hq, hkv, lq, dtype) {
        return Ok(None);
    }
    let rows = group * lq;
    let r = block_rows(dtype, rows);
    let nchunks = rows.div_ceil(r);
    let module = place.gpu.module("attention", Some(dtype), d as u32);
    let tn = type_names(dtype).expect("float types have kernels").1;
    let form = match (job.paged, job.vec) {
        (false, true) => "cv",
        (false, false) => "cs",
        (true, true) => "pv",
        (true, false) => "ps",
    };
    let key = KernelKey {
        module,
        symbol: symbol!("attention_{tn}_d{d}_r{r}_{form}")?,
    };
    let f = place.gpu.kernel(&key, || source(dtype, d))?;
    // The splits follow the occupancy of one form (contiguous, 16-byte loads) for all four,
    // so that how the keys are laid out never changes how a long sequence is cut, nor its
    // bits.
    let sized = KernelKey {
        module,
        symbol: symbol!("attention_{tn}_d{d}_r{r}_cv")?,
    };
    let sizing = place.gpu.kernel(&sized, || source(dtype, d))?;
    let wave = resident(&sized, &sizing)? * place.gpu.props.sms as usize;
    let units = job.batch * hkv * nchunks;
    let nsplit = match forced_splits() {
        Some(n) if keys >= SINGLE => {
            // Whole warp steps in every split (as `splits` keeps them).
            let steps = keys.div_ceil(warp_keys(dtype, d));
            steps.div_ceil(steps.div_ceil(n.min(steps)))
        }
        _ => splits(keys, units, wave, warp_keys(dtype, d)),
    };
    let merge = nsplit > 1 && merge_in_block();
    job.args.hkv = hkv as i32;
    job.args.group = group as i32;
    job.args.lq = lq as i32;
    job.args.nsplit = nsplit as i32;
    job.args.nchunks = nchunks as i32;
    job.args.merge = i32::from(merge);
    let warp_steps = warp_steps(keys, warp_keys(dtype, d), nsplit);
    let l2 = few_steps(dtype, d, job.paged, warp_steps)
        && job.vec
        && place.gpu.props.arch.major >= 9
        && l2_requests();
    job.args.l2_steps = if l2 { warp_steps as i32 } else { 0 };
    job.args.l1_ahead = l1_distance(dtype, d, job.paged, warp_steps, l1_ahead()) as i32;
    let (out, out_ptr) = place.output(dtype, &outputs[0].0)?;
    let out_rows = job.batch * job.hq * lq;
    // Per row and split: the accumulator, then (max, sum).
    let parts = if nsplit > 1 {
        let alloc = |bytes: usize| place.gpu.alloc.alloc(bytes, place.stream_id);
        Some((
            alloc(out_rows * nsplit * d * 4)?,
            alloc(out_rows * nsplit * 8)?,
        ))
    } else {
        None
    };
    let (po, pml) = parts.as_ref().map_or((0, 0), |(o, m)| (o.ptr(), m.ptr()));
    let counts = if merge {
        place.zeroed_counters(units)?
    } else {
        0
    };
    let [q, k, v, table, lengths] = job.ptrs;
    let config = LaunchConfig {
        // Row chunks fastest: the chunks of one head and split run side by side and share
        // their keys in L2.
        grid_dim: ((nsplit * nchunks) as u32, hkv as u32, job.batch as u32),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let params: [&dyn DeviceRepr; 10] = [
        &q, &k, &v, &table, &lengths, &out_ptr, &po, &pml, &counts, &job.args,
    ];
    // SAFETY: q, k and v are read at offsets their layouts give for indices inside their
    // shapes (keys below the sequence's length, which is clamped to the table's capacity;
    // paged rows through table entries clamped to the cache's blocks; query rows of the
    // chunk's padding are not read); the table and lengths are read inside their shapes; the
    // output holds B·Hq·Lq·D elements, the parts B·Hq·Lq·nsplit rows when there are several
    // splits (and are not touched otherwise); with the in-block merge, `counts` holds a zeroed
    // counter for each of the `units` row chunks (left at zero again by the kernel); the grid
    // fits (`fits_grid`) and the arguments match the kernel's signature.
    unsafe { f.launch(&place.stream, config, &params) }?;
    if nsplit > 1 && !merge {
        let side = if job.paged { "p" } else { "c" };
        let key = KernelKey {
            module,
            symbol: symbol!("attention_combine_{tn}_d{d}_{side}")?,
        };
        let f = place.gpu.kernel(&key, || source(dtype, d))?;
        // `NvAttnCombine<D>::THREADS`: whole parts of D / 4 threads.
        let per_part = d / 4;
        let threads = COMBINE_THREADS / per_part * per_part;
        let config = LaunchConfig {
            grid_dim: (out_rows as u32, 1, 1),
            block_dim: (threads as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let params: [&dyn DeviceRepr; 5] = [&out_ptr, &po, &pml, &lengths, &job.args];
        // SAFETY: one block per output row (B·Hq·Lq < 2^32, checked when the node was
        // recorded); each waits for the launch before on this stream (griddepcontrol.wait
        // first), then reads its row's nsplit parts, which that launch wrote, and writes its D
        // outputs; lengths as above.
        unsafe { f.launch_dependent(&place.stream, config, &params, place.gpu.props.arch) }?;
    }
    // The parts go back to the cache; only this stream may take them before the queued
    // kernels that use them have run, which stream order makes safe.
    drop(parts);
    Ok(Some(vec![out]))
}

/// Every kernel source of this family, complete, for compiling ahead of time (CI).
#[cfg(test)]
pub(super) fn all_sources() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for dtype in TYPES {
        for d in HEADS {
            out.push((
                format!("attention_{}_d{d}", type_names(dtype).expect("float").1),
                source(dtype, d),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_division_is_exact_below_2_to_the_31() {
        let ends = [0u32, 1, 2, 3, 15, 16, 17, 1000, 65_535, (1 << 31) - 1];
        for d in (1..=300u32).chain([511, 512, 513, 4096, 65_537, 1 << 20, (1 << 31) - 1]) {
            let (magic, shift) = magic_division(d);
            let div = |j: u32| ((u64::from(j) * u64::from(magic)) >> (31 + shift)) as u32;
            let near = (1..4u32).flat_map(|k| {
                let m = k.saturating_mul(d);
                [m.saturating_sub(1), m, m.saturating_add(1)]
            });
            for j in ends.into_iter().chain(near).filter(|&j| j < 1 << 31) {
                assert_eq!(div(j), j / d, "{j} / {d}");
            }
            let top = (1u32 << 31) - 1;
            for j in (top - 3 * d.min(1000)..=top).step_by(7) {
                assert_eq!(div(j), j / d, "{j} / {d}");
            }
        }
    }

    #[test]
    fn splits_fill_whole_waves_and_leave_none_empty() {
        // Short sequences: one pass.
        assert_eq!(splits(1023, 1, 396, 16), 1);
        // One sequence of 8 key heads on 132 multiprocessors of 3 blocks: about a wave.
        let n = splits(8192, 8, 396, 16);
        assert!(8 * n <= 396 && 8 * n * 100 >= 396 * 90, "{n}");
        // Many sequences: whole waves.
        let n = splits(4096, 512, 396, 16);
        let blocks = 512 * n;
        assert!(blocks * 100 >= blocks.div_ceil(396) * 396 * 95, "{n}");
        for (keys, units, wave, step) in [
            (1024, 1, 396, 16),
            (1500, 3, 400, 8),
            (9000, 2, 528, 4),
            (131_072, 8, 396, 16),
            (5000, 100_000, 396, 16),
        ] {
            let n = splits(keys, units, wave, step);
            assert!((1..=MAX_SPLITS).contains(&n));
            // The kernel's cut: every split gets keys.
            let steps = keys.div_ceil(step);
            let per = steps.div_ceil(n);
            assert!((n - 1) * per < steps, "{keys} keys: split {n} empty");
            assert!(n == 1 || keys / n >= MIN_SPLIT_KEYS / 2);
        }
    }

    #[test]
    fn warp_steps_count_the_kernels_walk() {
        // The kernel's walk, step by step: split s takes keys [s·per·step, ...) up to the
        // sequence's end, and warp w its steps w, w + WARPS, ...
        let walked = |keys: usize, step: usize, nsplit: usize| {
            let per = keys.div_ceil(step).div_ceil(nsplit) * step;
            let mut most = 0;
            for s in 0..nsplit {
                let (start, end) = ((s * per).min(keys), ((s + 1) * per).min(keys));
                for w in 0..WARPS {
                    let n = (start + w * step..end).step_by(WARPS * step).count();
                    most = most.max(n);
                }
            }
            most
        };
        for (keys, step, nsplit) in [
            (8192, 16, 48),
            (8192, 16, 6),
            (1000, 16, 1),
            (131_072, 8, 77),
        ] {
            assert_eq!(warp_steps(keys, step, nsplit), walked(keys, step, nsplit));
        }
        // One sequence of 8k keys over 48 splits: three steps a warp.
        assert_eq!(warp_steps(8192, 16, 48), 3);
    }

    #[test]
    fn l1_requests_go_to_warps_of_few_steps_over_contiguous_half_keys() {
        // One sequence of 8k keys over 48 splits: three steps a warp.
        let b1 = warp_steps(8192, 16, 48);
        assert_eq!(l1_distance(DType::BF16, 128, false, b1, L1_AHEAD), L1_AHEAD);
        assert_eq!(l1_distance(DType::F16, 64, false, b1, 2), 2);
        assert_eq!(l1_distance(DType::BF16, 128, false, b1, 0), 0);
        // Long walks, paged keys, f32 and the wide heads keep none.
        assert_eq!(
            l1_distance(DType::BF16, 128, false, warp_steps(8192, 16, 6), 4),
            0
        );
        assert_eq!(l1_distance(DType::BF16, 128, true, b1, 4), 0);
        assert_eq!(l1_distance(DType::F32, 128, false, b1, 4), 0);
        assert_eq!(l1_distance(DType::BF16, 512, false, b1, 4), 0);
    }

    #[test]
    fn row_chunks_and_warp_steps() {
        assert_eq!(block_rows(DType::BF16, 1), 8);
        assert_eq!(block_rows(DType::F32, 1), 1);
        assert_eq!(block_rows(DType::F32, 3), 4);
        assert_eq!(block_rows(DType::F32, 64), 4);
        // A warp's keys per step (`NvAttnLanes::KP · U`, `KS`).
        assert_eq!(warp_keys(DType::F32, 32), 16);
        assert_eq!(warp_keys(DType::F32, 64), 8);
        assert_eq!(warp_keys(DType::F32, 128), 4);
        assert_eq!(warp_keys(DType::F32, 256), 2);
        assert_eq!(warp_keys(DType::F16, 128), 16);
        assert_eq!(warp_keys(DType::BF16, 256), 8);
        assert_eq!(warp_keys(DType::BF16, 512), 16);
        assert_eq!(warp_keys(DType::F32, 512), 2);
    }

    /// Every symbol a launch may name is in its module.
    #[test]
    fn modules_hold_the_kernels_launches_name() {
        // SAFETY: only tries to open the library.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            eprintln!("skipped: NVRTC (libnvrtc) was not found");
            return;
        }
        for (dtype, d) in [
            (DType::F32, 96),
            (DType::BF16, 128),
            (DType::F16, 256),
            (DType::F32, 512),
            (DType::BF16, 512),
        ] {
            let tn = type_names(dtype).expect("float").1;
            let ptx = crate::backend::cuda::jit::compile("attention", &source(dtype, d), "sm_90")
                .expect("compiles");
            for rows in 1..=4 * MAX_ROWS {
                let r = block_rows(dtype, rows);
                for form in ["cv", "cs", "pv", "ps"] {
                    let s = format!(".entry attention_{tn}_d{d}_r{r}_{form}(");
                    assert!(ptx.contains(&s), "{s}");
                }
            }
            for side in ["c", "p"] {
                let s = format!(".entry attention_combine_{tn}_d{d}_{side}(");
                assert!(ptx.contains(&s), "{s}");
            }
        }
    }
}
