//! [`FastOp::Softmax`](crate::fast::FastOp::Softmax),
//! [`FastOp::LogSumExp`](crate::fast::FastOp::LogSumExp),
//! [`FastOp::CrossEntropy`](crate::fast::FastOp::CrossEntropy) and
//! [`FastOp::CrossEntropyVjp`](crate::fast::FastOp::CrossEntropyVjp) on the GPU
//! (`kernels/fast/softmax.cu`), accumulated in float32.
//!
//! Softmax and log-sum-exp of float32, float16 and bfloat16 rows the registers hold (up to
//! 512 threads of 8 packs of 16 bytes) read each row once into registers
//! (`{softmax,logsumexp}_{packs,elems}_*`, the norms' layout: `lanes` threads of `P` packs,
//! kept as loaded; log-sum-exp is its own kernel, which keeps no exponentials and so holds
//! more rows in flight). Log-sum-exp over many rows longer than a warp holds streams each row
//! through one warp with an online maximum and sum instead (`logsumexp_warp_*`: no block-wide
//! barrier). Other rows and float64 run the reductions' row kernels (`reduce.rs`).
//!
//! Cross entropy reads each row of logits once with an online maximum and sum,
//! a row split over several blocks when there are too few rows to fill the device, and its
//! gradient writes `g · (softmax − onehot)` in one more pass, the log-sum-exp recovered from
//! the loss.

use cudarc::driver::{DeviceRepr, LaunchConfig};

use super::norms::{block_of, forward_packs, full_mode, pack_mode, resident, rows_view};
use super::{CudaKernel, Place, with_copies};
use crate::array::ArrayData;
use crate::backend::cuda::elementwise::type_names;
use crate::backend::cuda::launch::{Kernel, Symbol, symbol};
use crate::backend::cuda::reduce;
use crate::fast::softmax::{CrossEntropy, CrossEntropyVjp, LogSumExp, Softmax};
use crate::fast::{Arg, kernel_sized};
use crate::ops::reduce::ReduceOp;
use crate::primitive::OutputSpec;
use crate::{DType, Result};

const COMMON: &str = include_str!("../kernels/common.cuh");
const ROWS: &str = include_str!("../kernels/fast/rows.cuh");
const SOFTMAX: &str = include_str!("../kernels/fast/softmax.cu");

/// The element types of these kernels.
const TYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// Blocks launched at most along a grid's first axis (the kernels loop over the rest).
const MAX_BLOCKS: usize = 1 << 20;

/// The module of the softmax kernels of `p` packs a thread over `dtype`, or (`p` 0) of the
/// online kernels (cross entropy's, and log-sum-exp's warp rows).
fn source(dtype: DType, p: usize) -> String {
    let (ct, tn) = type_names(dtype).expect("a float type");
    let kernels = match p {
        0 => format!("NV_CROSS_ENTROPY({ct}, {tn})"),
        p => format!("NV_SOFTMAX_P({ct}, {tn}, {p})"),
    };
    format!("{COMMON}\n{ROWS}\n{SOFTMAX}\n{kernels}\n")
}

/// The module family of `p` packs a thread (0: the online kernels').
fn family(p: usize) -> &'static str {
    if p == 0 {
        "online_rows"
    } else {
        "softmax_rows"
    }
}

/// Kernel `symbol` of this family over `dtype`: softmax's for `p` packs a thread, the online
/// kernels' for `p` 0 (a module each, compiled on first use).
fn kernel(place: &Place, dtype: DType, p: usize, symbol: Symbol) -> Result<Kernel> {
    place
        .gpu
        .kernel_in(family(p), Some(dtype), p as u32, symbol, || {
            source(dtype, p)
        })
}

/// Every module of this family over `dtype` as `(name, source, symbols)` (see
/// `norms::sources`).
#[cfg(test)]
pub(super) fn sources(dtype: DType) -> Vec<(String, String, Vec<String>)> {
    let tn = type_names(dtype).expect("a float type").1;
    [0, 1, 2, 4, 8]
        .into_iter()
        .map(|p| {
            let symbols = match p {
                0 => ["parts", "loss", "grad"]
                    .map(|k| format!("cross_entropy_{k}_{tn}"))
                    .into_iter()
                    .chain(["packs", "elems"].map(|m| format!("logsumexp_warp_{m}_{tn}")))
                    .collect(),
                p => ["softmax", "logsumexp"]
                    .into_iter()
                    .flat_map(|op| ["packs", "elems", "full"].map(|m| format!("{op}_{m}_{tn}_{p}")))
                    .collect(),
            };
            (format!("{}_{tn}_{p}", family(p)), source(dtype, p), symbols)
        })
        .collect()
}

/// One input of a kernel type with at least one axis.
fn takes_rows(inputs: &[Arg<'_>]) -> bool {
    inputs.len() == 1 && kernel_sized(inputs) && !inputs[0].shape.is_empty()
}

impl CudaKernel for Softmax {
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        takes_rows(inputs)
    }

    fn eval(
        &self,
        place: &Place,
        inputs: &mut [ArrayData],
        _: &[OutputSpec],
    ) -> Result<Vec<ArrayData>> {
        with_copies(place, "softmax", inputs, |i| {
            let shape = i[0].layout.shape.clone();
            match packed_rows(place, &i[0], false, &shape)? {
                Some(out) => Ok(Some(out)),
                None => reduce::softmax(place, &i[0]),
            }
        })
    }
}

impl CudaKernel for LogSumExp {
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        takes_rows(inputs)
    }

    fn eval(
        &self,
        place: &Place,
        inputs: &mut [ArrayData],
        outputs: &[OutputSpec],
    ) -> Result<Vec<ArrayData>> {
        let last = inputs[0].layout.shape.len() - 1;
        with_copies(place, "logsumexp", inputs, |i| {
            match packed_rows(place, &i[0], true, &outputs[0].0)? {
                Some(out) => Ok(Some(out)),
                None => reduce::reduce(place, ReduceOp::LogSumExp, &[last], &i[0], outputs),
            }
        })
    }
}

/// The threads of a block of log-sum-exp's warp rows (a row a warp).
const LSE_WARP_BLOCK: usize = 256;

/// Rows a multiprocessor from which log-sum-exp streams each row through one warp rather than
/// holding it in a block: with fewer, the warps' batches of loads (32 values a lane) keep too
/// few bytes in flight to cover the memory's latency.
const LSE_WARP_ROWS_PER_SM: usize = 16;

/// Whether log-sum-exp over `nrows` rows too long for a warp to hold takes the warp-row kernel
/// (`kernels/fast/softmax.cu`, `nv_lse_warp_rows`); `NUVEC_LSE_WARP=0` keeps the rows in
/// blocks, for comparison.
fn lse_warp_rows(place: &Place, nrows: usize) -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("NUVEC_LSE_WARP").is_none_or(|v| v != "0"))
        && nrows >= LSE_WARP_ROWS_PER_SM * place.gpu.props.sms as usize
}

/// Softmax (`lse` false, output of `x`'s shape) or log-sum-exp (`shape` holds one value a
/// row) over the last axis of `x` with each row in registers; `None` where the reductions'
/// kernels run instead (float64, rows too long, views of more than eight leading axes).
fn packed_rows(
    place: &Place,
    x: &ArrayData,
    lse: bool,
    shape: &[usize],
) -> Result<Option<Vec<ArrayData>>> {
    let dtype = x.dtype();
    let Some(&n) = x.layout.shape.last() else {
        return Ok(None);
    };
    let (true, Some((lanes, p)), Some((rows, st))) = (
        TYPES.contains(&dtype),
        forward_packs(n, dtype.size()),
        rows_view(&x.layout),
    ) else {
        return Ok(None);
    };
    if n == 0 {
        return Ok(None);
    }
    let nrows = x.layout.size() / n;
    let (out, outp) = place.output(dtype, shape)?;
    if nrows == 0 {
        return Ok(Some(vec![out]));
    }
    let tn = type_names(dtype).expect("a float type").1;
    let xp = place.input(x)?;
    // The output is fresh and row-major: aligned rows whenever the input's are (and whole
    // packs); log-sum-exp writes one value a row.
    let mode = pack_mode(n, dtype, &[(xp, &rows, st)]);
    let (nr, n64, lanes32) = (nrows as i64, n as i64, lanes as i32);
    if lse && lanes > 32 && lse_warp_rows(place, nrows) {
        let f = kernel(place, dtype, 0, symbol!("logsumexp_warp_{mode}_{tn}")?)?;
        let params: [&dyn DeviceRepr; 6] = [&xp, &rows, &st, &outp, &nr, &n64];
        let cfg = LaunchConfig {
            grid_dim: (
                nrows.div_ceil(LSE_WARP_BLOCK / 32).min(MAX_BLOCKS) as u32,
                1,
                1,
            ),
            block_dim: (LSE_WARP_BLOCK as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: as for the launch below, with one warp a row: `rows` locates each of the
        // `nrows` rows of `n` elements `st` apart inside x's block, the output is a fresh
        // row-major block of `nrows` elements of x's type, the packed kernel gets only aligned
        // rows of whole packs, and the arguments match `logsumexp_warp_{packs,elems}_*`.
        unsafe { f.launch(&place.stream, cfg, &params) }?;
        return Ok(Some(vec![out]));
    }
    let op = if lse { "logsumexp" } else { "softmax" };
    let mode = full_mode(n, dtype, &[(xp, &rows, st)], (lanes, p));
    let f = kernel(place, dtype, p, symbol!("{op}_{mode}_{tn}_{p}")?)?;
    let block = block_of(lanes);
    let groups = block / lanes;
    let params: [&dyn DeviceRepr; 7] = [&xp, &rows, &st, &outp, &nr, &n64, &lanes32];
    let blocks = nrows.div_ceil(groups).clamp(1, MAX_BLOCKS);
    let cfg = LaunchConfig {
        grid_dim: (resident(place, blocks) as u32, 1, 1),
        block_dim: (block as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: `rows` (x's layout without its last axis) locates each of the `nrows` rows
    // inside x's block, their `n` elements `st` apart; the output is a fresh row-major block
    // of `nrows · n` elements (softmax) or `nrows` (log-sum-exp) of x's type; the packed
    // kernels get only rows that start aligned (`packable`), the `full` ones only rows of
    // `lanes · p` packs; the arguments match `{softmax,logsumexp}_{packs,elems,full}_*`.
    unsafe { f.launch(&place.stream, cfg, &params) }?;
    Ok(Some(vec![out]))
}

/// The chunks a row of `n` logits is split into over `nrows` rows so that the device has
/// about two blocks a multiprocessor, at least 8,192 logits each; and the chunk's length, a
/// multiple of `pack` elements.
fn chunks(place: &Place, nrows: usize, n: usize, pack: usize) -> (usize, usize) {
    let want = (2 * place.gpu.props.sms as usize).div_ceil(nrows.max(1));
    let splits = want.min(n.div_ceil(8192)).clamp(1, 65_535);
    let per = n.div_ceil(splits).next_multiple_of(pack);
    (n.div_ceil(per), per)
}

/// Threads of a cross-entropy block over chunks of `per` elements: a quarter pack a thread
/// at least, 32 to 512.
fn ce_threads(per: usize, pack: usize) -> usize {
    (per / pack / 4).next_power_of_two().clamp(32, 512)
}

/// Whether `(logits, targets, tail..)` are what the cross-entropy kernels take: logits of a
/// kernel type with a last axis of at least one class, int32 targets, float32 `tail`.
fn takes_ce(args: &[Arg<'_>], tail: usize) -> bool {
    let [x, t, rest @ ..] = args else {
        return false;
    };
    kernel_sized(args)
        && rest.len() == tail
        && TYPES.contains(&x.dtype)
        && x.shape.last().is_some_and(|&n| n > 0)
        // One block a row along the grid's first axis.
        && x.shape[..x.shape.len() - 1].iter().product::<usize>() <= i32::MAX as usize
        && t.dtype == DType::I32
        && rest.iter().all(|a| a.dtype == DType::F32)
}

impl CudaKernel for CrossEntropy {
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        takes_ce(inputs, 0)
    }

    fn eval(
        &self,
        place: &Place,
        inputs: &mut [ArrayData],
        _: &[OutputSpec],
    ) -> Result<Vec<ArrayData>> {
        with_copies(place, "cross_entropy", inputs, |i| {
            cross_entropy(place, &i[0], &i[1])
        })
    }
}

impl CudaKernel for CrossEntropyVjp {
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        takes_ce(inputs, 2)
    }

    fn eval(
        &self,
        place: &Place,
        inputs: &mut [ArrayData],
        _: &[OutputSpec],
    ) -> Result<Vec<ArrayData>> {
        with_copies(place, "cross_entropy_vjp", inputs, |i| {
            cross_entropy_vjp(place, i)
        })
    }
}

/// The address of a row-major input's first element, or `None` for another layout.
fn row_major_at(place: &Place, d: &ArrayData) -> Result<Option<u64>> {
    if !d.layout.is_row_contiguous() {
        return Ok(None);
    }
    Ok(Some(
        place.input(d)? + (d.layout.offset * d.dtype().size()) as u64,
    ))
}

/// The loss per row of `logits` against `targets` (float32, the rows' shape).
fn cross_entropy(place: &Place, x: &ArrayData, t: &ArrayData) -> Result<Option<Vec<ArrayData>>> {
    let dtype = x.dtype();
    let shape = &x.layout.shape;
    let n = shape[shape.len() - 1];
    let nrows = x.layout.size() / n;
    let (loss, lp) = place.output(DType::F32, &shape[..shape.len() - 1])?;
    if nrows == 0 {
        return Ok(Some(vec![loss]));
    }
    let (Some(xp), Some(tp)) = (row_major_at(place, x)?, row_major_at(place, t)?) else {
        return Ok(None);
    };
    let pack = 16 / dtype.size();
    let (splits, per) = chunks(place, nrows, n, pack);
    let parts = place.gpu.alloc.alloc(nrows * splits * 8, place.stream_id)?;
    let pp = parts.ptr();
    let tn = type_names(dtype).expect("a float type").1;
    let f = kernel(place, dtype, 0, symbol!("cross_entropy_parts_{tn}")?)?;
    let (n64, per64) = (n as i64, per as i64);
    let params: [&dyn DeviceRepr; 4] = [&xp, &pp, &n64, &per64];
    let cfg = LaunchConfig {
        grid_dim: (nrows as u32, splits as u32, 1),
        block_dim: (ce_threads(per, pack) as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: x is a row-major block of `nrows · n` logits; block (row, chunk) reads the
    // chunk's elements of its row and writes its pair of `parts`, which holds `nrows ·
    // splits` pairs of floats; the arguments match `cross_entropy_parts_*`.
    unsafe { f.launch(&place.stream, cfg, &params) }?;
    let f = kernel(place, dtype, 0, symbol!("cross_entropy_loss_{tn}")?)?;
    let (nr, sp) = (nrows as i64, splits as i64);
    let params: [&dyn DeviceRepr; 7] = [&xp, &tp, &pp, &lp, &nr, &n64, &sp];
    // SAFETY: one thread a row reads its `splits` pairs (written by the launch before on
    // this stream), its target (int32, `nrows` of them) and that logit when inside the row,
    // and writes its loss (`nrows` floats); the arguments match `cross_entropy_loss_*`.
    unsafe { f.launch(&place.stream, f.config(nrows), &params) }?;
    // The pairs go back to the cache, for later work of this stream only.
    drop(parts);
    Ok(Some(vec![loss]))
}

/// `g · (softmax(logits) − onehot(targets))` from `(logits, targets, loss, g)`.
fn cross_entropy_vjp(place: &Place, i: &[ArrayData]) -> Result<Option<Vec<ArrayData>>> {
    let x = &i[0];
    let dtype = x.dtype();
    let n = x.layout.shape[x.layout.shape.len() - 1];
    let nrows = x.layout.size() / n;
    let (dx, dxp) = place.output(dtype, &x.layout.shape)?;
    if nrows == 0 {
        return Ok(Some(vec![dx]));
    }
    let mut at = [0u64; 4];
    for (a, d) in at.iter_mut().zip(i) {
        match row_major_at(place, d)? {
            Some(p) => *a = p,
            None => return Ok(None),
        }
    }
    let [xp, tp, lp, gp] = at;
    let pack = 16 / dtype.size();
    let (splits, per) = chunks(place, nrows, n, pack);
    let tn = type_names(dtype).expect("a float type").1;
    let f = kernel(place, dtype, 0, symbol!("cross_entropy_grad_{tn}")?)?;
    let (n64, per64) = (n as i64, per as i64);
    let params: [&dyn DeviceRepr; 7] = [&xp, &tp, &lp, &gp, &dxp, &n64, &per64];
    let cfg = LaunchConfig {
        grid_dim: (nrows as u32, splits as u32, 1),
        block_dim: (ce_threads(per, pack) as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: x and dx are row-major blocks of `nrows · n` elements, targets, losses and
    // cotangents row-major blocks of `nrows`; block (row, chunk) reads and writes only its
    // chunk of its row, and its row's target logit inside the row; the arguments match
    // `cross_entropy_grad_*`.
    unsafe { f.launch(&place.stream, cfg, &params) }?;
    Ok(Some(vec![dx]))
}
