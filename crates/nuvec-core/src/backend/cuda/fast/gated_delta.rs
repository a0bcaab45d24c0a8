//! The gated delta rule on the GPU (`kernels/fast/gated_delta.cu`):
//! [`FastOp::GatedDelta`](crate::fast::FastOp::GatedDelta) (the final state, or every step's)
//! and [`FastOp::GatedDeltaSlots`](crate::fast::FastOp::GatedDeltaSlots) (states in a pool
//! addressed by slot) share one recurrent kernel.
//!
//! A block takes one sequence, one value head and a run of its state rows; each warp keeps
//! `R` rows in registers for every step (each lane `Dk / 32` elements of each row, moved in
//! accesses of up to 16 bytes), so the state is read once and written once, and a step costs
//! the warp one chain of shuffles (the dot products `S k`, `S q` and `k q` reduced together).
//! The steps' small inputs go through shared memory a chunk of steps at a time. `R` is the
//! most rows (at most 32 state elements a lane) that still leave the device several waves of
//! blocks: decoding a large batch keeps 8 rows a warp, a single sequence one row a warp.
//! Where every step is staged at once (decoding) and the units outnumber four blocks a
//! multiprocessor, the looping form runs (`gated_delta_units_*`: that many blocks walk every
//! unit, loading the next one's rows into a second set of registers during this one's steps;
//! same bits). Tuning knobs:
//! `NUVEC_GD_ROWS` forces `R`; `NUVEC_GD_RESIDENT=k` sets the looping form's blocks a
//! multiprocessor (0: a block a unit).
//!
//! q, k, v, g and β are read through their strides, in any of the kernel types (their type
//! is a kernel argument: their loads are few next to the state's). The state must be
//! row-major from a 16-byte-aligned start, else it is copied first; the pool of the slots'
//! operation is written in place when this evaluation holds it alone, else copied first (the
//! scatters' rule, `index.rs`), so an array that still sees the old pool never sees the
//! write.
//!
//! The recurrence runs in float32 through the fallback's steps (decay, recall, correction,
//! output), except that each dot product over `Dk` is summed as a tree, the state's update is
//! one fused multiply-add an element, and `y = S q` is computed as `(g S) q + δ (k q)` (the
//! same value; one reduction a step instead of two after each other). Every sum and product is
//! rounded explicitly, and a row's arithmetic does not depend on the rows a warp holds, the
//! batch or the number of steps, so every step's state, the slots' kernel and the plain one
//! agree bit for bit.
//!
//! Slots as the fallback takes them: negative ones count from the end, one still outside the
//! pool reads the nearest entry (gathers clamp) and is written nowhere (scatters skip). The
//! slots must be distinct, as [`crate::fast::gated_delta_slots`] asks, and a slot outside the
//! pool must not read an entry another sequence writes: blocks read and write the pool in
//! place, in no set order.
//!
//! Long sequences in half types (the final state only) take the chunked form instead
//! (`gated_delta_chunk.rs`: the WY/UT form of flash-linear-attention on the tensor cores).

use cudarc::driver::{DeviceRepr, LaunchConfig};

use super::{CudaKernel, Place, nested};
use crate::array::ArrayData;
use crate::backend::cuda::elementwise::{convert, type_names};
use crate::backend::cuda::launch::symbol;
use crate::fast::gated_delta::{GatedDelta, GatedDeltaSlots};
use crate::fast::{Arg, kernel_sized};
use crate::primitive::OutputSpec;
use crate::{DType, Error, Result};

#[path = "gated_delta_chunk.rs"]
mod chunk;

const COMMON: &str = include_str!("../kernels/common.cuh");
const GATED_DELTA: &str = include_str!("../kernels/fast/gated_delta.cu");

/// The state types with kernels.
#[cfg(test)]
const TYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];
/// The largest `Dk / 32` a kernel holds (`Dk` up to 512).
const MAX_E: usize = 16;
/// State elements a lane holds at most (`R · E`).
const MAX_HELD: usize = 32;
/// Rows a warp holds, most first.
const ROWS: [usize; 4] = [8, 4, 2, 1];
/// Warps a block at most.
const WARPS: usize = 4;
/// Blocks a multiprocessor the grid should have: a few waves of the 5 to 10 blocks of 128
/// threads a multiprocessor holds (the kernels use 40 to 96 registers a thread).
const BLOCKS_PER_SM: usize = 16;
/// Steps staged in shared memory at once, at most.
const MAX_CHUNK: usize = 16;
/// Shared memory of one block's staged steps, at most (under the 48 KiB a block gets unasked).
const SHARED_BYTES: usize = 32 << 10;

/// The kernel's arguments (`NvGd` in `gated_delta.cu`); strides in elements.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct GdArgs {
    q: [i64; 4],
    k: [i64; 4],
    v: [i64; 4],
    g: [i64; 3],
    beta: [i64; 3],
    slot_stride: i64,
    steps: i64,
    hv: i64,
    dv: i64,
    group: i64,
    entries: i64,
    units: i64,
    types: i32,
    every: i32,
    chunk: i32,
    pad: i32,
}

// SAFETY: `GdArgs` is `repr(C)` plain data with the field order, types and alignment of
// `NvGd`, so its bytes are what the kernel reads as its parameter.
unsafe impl DeviceRepr for GdArgs {}

/// The module of the kernels over states of `state` with `Dk = 32 e`: one kernel for each
/// rows-a-warp count that fits the registers.
fn source(state: DType, e: usize) -> String {
    let (ct, tn) = type_names(state).expect("a float type");
    let mut s = format!("{COMMON}\n{GATED_DELTA}\n");
    for r in ROWS.into_iter().filter(|r| r * e <= MAX_HELD) {
        s.push_str(&format!("NV_GATED_DELTA({ct}, {tn}, {e}, {r})\n"));
    }
    s
}

/// The name of the module of `state` and `e` (`module_key.name()` of the launches).
#[cfg(test)]
fn module_name(state: DType, e: usize) -> String {
    let tn = type_names(state).expect("a float type").1;
    format!("gated_delta_{tn}_d{e}")
}

/// Every module of this family, for compiling ahead of time.
#[cfg(test)]
pub(super) fn all_sources() -> Vec<(String, String)> {
    TYPES
        .into_iter()
        .flat_map(|d| (1..=MAX_E).map(move |e| (module_name(d, e), source(d, e))))
        .chain(chunk::all_sources())
        .collect()
}

/// Some modules of this family with the symbols the launches ask them for: `Dk` 32, 96 and
/// 128 (every rows-a-warp count) and 512 (one or two rows).
#[cfg(test)]
pub(super) fn sources(state: DType) -> Vec<(String, String, Vec<String>)> {
    let tn = type_names(state).expect("a float type").1;
    [1, 3, 4, MAX_E]
        .into_iter()
        .map(|e| {
            let symbols = ROWS
                .into_iter()
                .filter(|r| r * e <= MAX_HELD)
                .flat_map(|r| {
                    [
                        format!("gated_delta_{tn}_e{e}_r{r}"),
                        format!("gated_delta_units_{tn}_e{e}_r{r}"),
                    ]
                })
                .collect();
            (module_name(state, e), source(state, e), symbols)
        })
        .collect()
}

/// Whether the kernel takes `(q, k, v, g, beta, state[, slots])`: q, k and v 4-D of kernel
/// types (q and v of one), gates and state of kernel types, `Dk` a multiple of 32 up to 512,
/// and `B · Hv · Dv` within 31 bits (the grid's blocks).
fn takes(inputs: &[Arg<'_>], count: usize) -> bool {
    if !kernel_sized(inputs) || inputs.len() != count {
        return false;
    }
    let (q, v) = (inputs[0], inputs[2]);
    if q.shape.len() != 4 || v.shape.len() != 4 {
        return false;
    }
    let dk = q.last();
    let rows = v.shape[0]
        .checked_mul(v.shape[2])
        .and_then(|n| n.checked_mul(v.shape[3]));
    v.dtype == q.dtype
        && dk.is_multiple_of(32)
        && dk <= 32 * MAX_E
        && inputs[1..6].iter().all(Arg::kernel_float)
        && rows.is_some_and(|n| n <= i32::MAX as usize)
}

impl CudaKernel for GatedDelta {
    /// `q` and `v` of one kernel type, `k`, gates and state of kernel types, `Dk` a
    /// multiple of 32 up to 512.
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        takes(inputs, 6)
    }

    fn eval(
        &self,
        place: &Place,
        inputs: &mut [ArrayData],
        outputs: &[OutputSpec],
    ) -> Result<Vec<ArrayData>> {
        let (state, from) = aligned_state(place, &inputs[5])?;
        let (y, yp) = place.output(outputs[0].1, &outputs[0].0)?;
        let (out, to) = place.output(outputs[1].1, &outputs[1].0)?;
        if !self.steps && chunk::takes(&inputs[..5]) {
            chunk::launch(place, &inputs[..5], state.dtype(), from, to, yp)?;
            return Ok(vec![y, out]);
        }
        let job = Job {
            inputs: &inputs[..5],
            state: state.dtype(),
            from,
            to,
            y: yp,
            slots: None,
            every: self.steps,
        };
        launch(place, &job)?;
        Ok(vec![y, out])
    }
}

impl CudaKernel for GatedDeltaSlots {
    /// [`GatedDelta`]'s inputs with a non-empty pool for the state, and int32 slots.
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        takes(inputs, 7)
            && inputs[5].shape.len() == 4
            && inputs[5].shape[0] > 0
            && inputs[6].dtype == DType::I32
            && inputs[6].shape.len() == 1
    }

    fn eval(
        &self,
        place: &Place,
        inputs: &mut [ArrayData],
        outputs: &[OutputSpec],
    ) -> Result<Vec<ArrayData>> {
        let (sequences, rest) = inputs.split_at_mut(5);
        let (pool, slots) = rest.split_at_mut(1);
        let (pool, slots) = (&mut pool[0], &slots[0]);
        let entries = pool.layout.shape[0];
        // The new pool: the old one's block when this evaluation holds it alone, else a copy.
        let Some((new_pool, at)) = super::super::index::target(place, pool)? else {
            // No strided view of the pool (it always has one: four axes).
            return nested(place, self, inputs, outputs);
        };
        let (y, yp) = place.output(outputs[0].1, &outputs[0].0)?;
        let slot_at = place.input(slots)? + (slots.layout.offset * 4) as u64;
        let job = Job {
            inputs: sequences,
            state: new_pool.dtype(),
            from: at,
            to: at,
            y: yp,
            slots: Some(Slots {
                at: slot_at,
                stride: slots.layout.strides[0] as i64,
                entries,
            }),
            every: false,
        };
        launch(place, &job)?;
        Ok(vec![y, new_pool])
    }
}

/// The slots of the pool's operation.
struct Slots {
    /// The address of the first (int32).
    at: u64,
    /// Elements between consecutive slots.
    stride: i64,
    /// The pool's entries.
    entries: usize,
}

/// One launch: the sequences' inputs and where the states are read and written.
struct Job<'a> {
    /// q, k, v, g and beta.
    inputs: &'a [ArrayData],
    /// The state's type.
    state: DType,
    /// The first state (or pool entry) read, row-major from a 16-byte-aligned address.
    from: u64,
    /// Where the states go: `[B, Hv, Dv, Dk]`, `[B, T, Hv, Dv, Dk]` (`every`) or the pool.
    to: u64,
    /// `y`, `[B, T, Hv, Dv]` row-major in q's type.
    y: u64,
    slots: Option<Slots>,
    every: bool,
}

/// `state` as the kernel reads it (row-major from a 16-byte-aligned address: itself, or a
/// copy made on the device), with the address of its first element.
fn aligned_state(place: &Place, state: &ArrayData) -> Result<(ArrayData, u64)> {
    if state.layout.is_row_contiguous() {
        let at = place.input(state)? + (state.layout.offset * state.dtype().size()) as u64;
        if at.is_multiple_of(16) {
            return Ok((state.clone(), at));
        }
    }
    let copy = convert(place, state, state.dtype())?.ok_or_else(|| {
        Error::Device("cuda: gated_delta: the state could not be copied row-major".into())
    })?;
    let at = place.input(&copy)?;
    Ok((copy, at))
}

/// The kernel's code for a type of the small inputs (`NV_GD_*` in `gated_delta.cu`).
fn type_code(dtype: DType) -> i32 {
    match dtype {
        DType::F16 => 1,
        DType::BF16 => 2,
        _ => 0,
    }
}

/// Rows a warp, warps a block and blocks for `B · Hv` heads of `dv` rows with `Dk = 32 e`:
/// the most rows a warp (at most 32 state elements a lane) that still give the device
/// [`BLOCKS_PER_SM`] blocks a multiprocessor, else one row a warp.
/// `NUVEC_GD_ROWS` (1, 2, 4 or 8, within the register budget) forces the rows a warp, for
/// tuning (see the module's documentation).
fn grid(e: usize, heads: usize, dv: usize, sms: usize) -> (usize, usize, usize) {
    let shape = |r: usize| {
        let warps = WARPS.min(dv.div_ceil(r));
        (r, warps, heads * dv.div_ceil(warps * r))
    };
    static FORCED: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    let forced = *FORCED.get_or_init(|| {
        std::env::var("NUVEC_GD_ROWS")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|r| ROWS.contains(r))
    });
    if let Some(r) = forced.filter(|r| r * e <= MAX_HELD) {
        return shape(r);
    }
    ROWS.into_iter()
        .filter(|r| r * e <= MAX_HELD)
        .map(shape)
        .find(|&(_, _, blocks)| blocks >= sms * BLOCKS_PER_SM)
        .unwrap_or_else(|| shape(1))
}

/// Blocks a multiprocessor for the looping form: a grid of `k` blocks a multiprocessor takes
/// every unit, each block loading its next unit's state rows while it computes this one's;
/// used when every step is staged at once (decoding). 4 by default (10% more bandwidth than a
/// block a unit on the H200, ahead of 3, 6 and 8); `NUVEC_GD_RESIDENT=k` sets it, 0 turns the
/// looping form off.
fn resident_blocks() -> Option<usize> {
    static RESIDENT: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *RESIDENT.get_or_init(|| {
        let asked = std::env::var("NUVEC_GD_RESIDENT").ok();
        asked
            .map_or(Some(4), |v| v.parse().ok())
            .filter(|&k: &usize| k > 0)
    })
}

/// Queues the recurrence of `job` on this stream.
fn launch(place: &Place, job: &Job<'_>) -> Result<()> {
    let [q, _, v, ..] = job.inputs else {
        unreachable!("the gated delta kernels take five sequence inputs")
    };
    let (qs, vs) = (&q.layout.shape, &v.layout.shape);
    let (b, t, dk) = (qs[0], qs[1], qs[3]);
    let (hv, dv) = (vs[2], vs[3]);
    if hv == 0 || dv == 0 {
        return Ok(());
    }
    let e = dk / 32;
    let (r, warps, blocks) = grid(e, b * hv, dv, place.gpu.props.sms as usize);
    let rows = warps * r;
    // q and k as floats, the block's rows of v, g and beta: a step's staging.
    let step_bytes = 4 * (2 * dk + rows + 2);
    let chunk = t.min(MAX_CHUNK).min(SHARED_BYTES / step_bytes).max(1);
    let (slots, slot_stride, entries) = match &job.slots {
        Some(s) => (s.at, s.stride, s.entries as i64),
        None => (0u64, 0i64, 0i64),
    };
    let mut args = sequence_args(job.inputs)?;
    args.slot_stride = slot_stride;
    args.entries = entries;
    args.every = i32::from(job.every);
    args.chunk = chunk as i32;
    args.units = blocks as i64;
    let ptrs = starts(place, job.inputs)?;
    let tn = type_names(job.state).expect("a float type").1;
    let sms = place.gpu.props.sms as usize;
    let looping = resident_blocks()
        .map(|k| k * sms)
        .filter(|&grid| grid < blocks && chunk >= t);
    let f = place.gpu.kernel_in(
        "gated_delta",
        Some(job.state),
        e as u32,
        match looping {
            Some(_) => symbol!("gated_delta_units_{tn}_e{e}_r{r}")?,
            None => symbol!("gated_delta_{tn}_e{e}_r{r}")?,
        },
        || source(job.state, e),
    )?;
    let params: [&dyn DeviceRepr; 10] = [
        &ptrs[0], &ptrs[1], &ptrs[2], &ptrs[3], &ptrs[4], &job.from, &job.to, &job.y, &slots, &args,
    ];
    let cfg = LaunchConfig {
        grid_dim: (looping.unwrap_or(blocks) as u32, 1, 1),
        block_dim: ((warps * 32) as u32, 1, 1),
        shared_mem_bytes: (chunk * step_bytes) as u32,
    };
    // SAFETY: q, k, v, g and beta are read at their first elements plus their strides over
    // their shapes ([B, T, Hk, Dk], [B, T, Hv, Dv], [B, T, Hv]; the unit's checks), in the
    // types `types` names; `from` starts B (or, with slots, `entries`) row-major states of
    // `Hv · Dv · Dk` elements of the state's type, 16-byte aligned, read at sequence b or at
    // slot b clamped into the pool; `to` is a block of this evaluation's own (fresh, or the
    // pool taken over or copied) holding B states, B · T states (`every`) or the pool, written
    // only at rows below Dv and at slots inside the pool; `y` is a fresh block of
    // `B · T · Hv · Dv` elements of q's type; `slots` is null or B int32 `slot_stride` apart;
    // `blocks` (`units`) covers B · Hv heads of `ceil(Dv / rows)` runs (within 31 bits:
    // `takes`; the looping form's smaller grid walks them all), and
    // the shared memory holds `chunk` staged steps of `rows` rows; the arguments match
    // `gated_delta_*`.
    unsafe { f.launch(&place.stream, cfg, &params) }
}

/// The first-element addresses of q, k, v, g and beta.
fn starts(place: &Place, inputs: &[ArrayData]) -> Result<[u64; 5]> {
    let mut at = [0u64; 5];
    for (p, a) in at.iter_mut().zip(inputs) {
        *p = place.input(a)? + (a.layout.offset * a.dtype().size()) as u64;
    }
    Ok(at)
}

/// The kernel arguments every launch over the sequences `[q, k, v, g, beta]` shares (their
/// strides, shapes and types); the slots' fields, `every` and `chunk` left at zero.
fn sequence_args(inputs: &[ArrayData]) -> Result<GdArgs> {
    let [q, k, v, g, beta] = inputs else {
        return Err(Error::Device(
            "cuda: gated_delta: five sequence inputs expected".into(),
        ));
    };
    let strides =
        |a: &ArrayData| -> Vec<i64> { a.layout.strides.iter().map(|&s| s as i64).collect() };
    let four = |a: &ArrayData| -> [i64; 4] {
        let s = strides(a);
        [s[0], s[1], s[2], s[3]]
    };
    let three = |a: &ArrayData| -> [i64; 3] {
        let s = strides(a);
        [s[0], s[1], s[2]]
    };
    let types = [q, k, v, g, beta, q]
        .iter()
        .enumerate()
        .fold(0, |acc, (i, a)| acc | (type_code(a.dtype()) << (2 * i)));
    let (qs, vs) = (&q.layout.shape, &v.layout.shape);
    let (t, hk) = (qs[1], qs[2]);
    let (hv, dv) = (vs[2], vs[3]);
    Ok(GdArgs {
        q: four(q),
        k: four(k),
        v: four(v),
        g: three(g),
        beta: three(beta),
        steps: t as i64,
        hv: hv as i64,
        dv: dv as i64,
        group: (hv / hk.max(1)) as i64,
        types,
        ..GdArgs::default()
    })
}
