//! [`FastOp::RmsNorm`](crate::fast::FastOp::RmsNorm),
//! [`FastOp::AddRmsNorm`](crate::fast::FastOp::AddRmsNorm) and
//! [`FastOp::LayerNorm`](crate::fast::FastOp::LayerNorm) on the GPU (`kernels/fast/norms.cu`),
//! with the CPU kernels' formula and roundings (`backend/cpu/fast/norms.rs`): statistics in
//! float32, the normalised value rounded to the element type, then the weight, then the
//! bias. Rows of up to 512 threads of 8 packs of 16 bytes (32,768 bf16 elements) are held in
//! registers as the packs they are loaded in (`lanes` threads of `P` packs each, sized to the
//! row so that many rows stay in flight) and read from memory once; longer rows are read once
//! per pass by the looped kernel.
//! Inputs are read through their strides; leading axes that do not merge into eight are
//! copied first.
//!
//! The kernels take float32, float16 and bfloat16 inputs of one type, parameters 0-D (none)
//! or 1-D of the row's length, and a residual of the input's shape.

use cudarc::driver::{DeviceRepr, LaunchConfig};

use super::{CudaKernel, Place, with_copies};
use crate::array::{ArrayData, Layout};
use crate::backend::cuda::elementwise::{Strided, type_names};
use crate::backend::cuda::launch::{Kernel, Symbol, symbol};
use crate::fast::norms::{AddRmsNorm, LayerNorm, RmsNorm};
use crate::fast::{Arg, kernel_sized};
use crate::primitive::OutputSpec;
use crate::{DType, Result};

/// Whether the kernel takes `(x, residuals.., params..)`: one kernel type, residuals of
/// `x`'s shape, parameters 0-D or 1-D of the row's length.
fn takes_norm(args: &[Arg<'_>], residuals: usize, params: usize) -> bool {
    if !kernel_sized(args) || args.len() != 1 + residuals + params {
        return false;
    }
    let x = args[0];
    let (r, p) = args[1..].split_at(residuals);
    args.iter().all(|a| a.dtype == x.dtype)
        && r.iter().all(|r| r.shape == x.shape)
        && p.iter()
            .all(|p| p.shape.is_empty() || p.shape == [x.last()])
}

impl CudaKernel for RmsNorm {
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        takes_norm(inputs, 0, 1)
    }

    fn eval(
        &self,
        place: &Place,
        inputs: &mut [ArrayData],
        _: &[OutputSpec],
    ) -> Result<Vec<ArrayData>> {
        with_copies(place, "rms_norm", inputs, |i| {
            norm(place, &i[0], None, &i[1], None, self.eps)
        })
    }
}

impl CudaKernel for AddRmsNorm {
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        takes_norm(inputs, 1, 1)
    }

    fn eval(
        &self,
        place: &Place,
        inputs: &mut [ArrayData],
        _: &[OutputSpec],
    ) -> Result<Vec<ArrayData>> {
        with_copies(place, "add_rms_norm", inputs, |i| {
            norm(place, &i[0], Some(&i[1]), &i[2], None, self.eps)
        })
    }
}

impl CudaKernel for LayerNorm {
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        takes_norm(inputs, 0, 2)
    }

    fn eval(
        &self,
        place: &Place,
        inputs: &mut [ArrayData],
        _: &[OutputSpec],
    ) -> Result<Vec<ArrayData>> {
        with_copies(place, "layer_norm", inputs, |i| {
            norm(place, &i[0], None, &i[1], Some(&i[2]), self.eps)
        })
    }
}

const COMMON: &str = include_str!("../kernels/common.cuh");
const ROWS: &str = include_str!("../kernels/fast/rows.cuh");
const NORMS: &str = include_str!("../kernels/fast/norms.cu");

/// Threads per block of the looped kernel and of a warp-per-row launch (`NV_THREADS` in
/// `norms.cu`).
pub(super) const THREADS: usize = 256;
/// Blocks launched at most (the kernel loops over the rest).
const MAX_BLOCKS: usize = 1 << 20;

/// The register layout of a row of `n` elements of `size` bytes: `lanes` threads (a warp,
/// or up to 512 in warps) of `P` packs of 16 bytes each, `P` at most `max_packs`; `None` for
/// rows longer than that (the looped kernels then). Four packs a thread by preference: few
/// threads a row, each with several loads in flight, and a register budget that keeps a
/// dozen rows in flight a multiprocessor, which is what a row kernel's speed depends on (its
/// reductions stall each row between its loads and its stores). Short rows take a warp with
/// fewer packs.
pub(super) fn packs(n: usize, size: usize, max_packs: usize) -> Option<(usize, usize)> {
    let total = n.div_ceil(16 / size).max(1);
    if let Some(p) = [1, 2, 4]
        .into_iter()
        .find(|&p| p <= max_packs && 32 * p >= total)
    {
        return Some((32, p));
    }
    [4, 8]
        .into_iter()
        .filter(|&p| p <= max_packs)
        .map(|p| (total.div_ceil(p).next_multiple_of(32), p))
        .find(|&(lanes, _)| lanes <= 512)
}

/// [`packs`] for the forward row kernels (norms, softmax, log-sum-exp), whose every count of
/// [`FORWARD_PACKS`] is instantiated: `NUVEC_ROWS_PACKS`, where it names one of them, is the
/// packs a thread takes in rows longer than a warp holds (a tuning knob: fewer packs, more
/// threads a row, fewer registers a thread), as long as the row fits 512 threads.
pub(super) fn forward_packs(n: usize, size: usize) -> Option<(usize, usize)> {
    static ASKED: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    let asked = *ASKED.get_or_init(|| {
        std::env::var("NUVEC_ROWS_PACKS")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .filter(|p| FORWARD_PACKS.contains(p))
    });
    let chosen = packs(n, size, 8)?;
    let total = n.div_ceil(16 / size).max(1);
    match asked {
        Some(p) if chosen.0 > 32 => {
            let lanes = total.div_ceil(p).next_multiple_of(32);
            Some(if lanes <= 512 { (lanes, p) } else { chosen })
        }
        _ => Some(chosen),
    }
}

/// `blocks`, or at most `NUVEC_ROWS_RESIDENT` blocks a multiprocessor where that is set: a
/// tuning knob for the forward row kernels (norms, softmax, log-sum-exp), whose rows then loop
/// in each block (with `NUVEC_KERNEL_DEFINES="NV_NORM_PREFETCH=1 NV_SOFTMAX_PREFETCH=1"`,
/// loading the next row during this one's exchanges).
pub(super) fn resident(place: &Place, blocks: usize) -> usize {
    static PER_SM: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    let per_sm = *PER_SM.get_or_init(|| {
        std::env::var("NUVEC_ROWS_RESIDENT")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&k: &usize| k > 0)
    });
    match per_sm {
        Some(k) => blocks.min(k * place.gpu.props.sms as usize),
        None => blocks,
    }
}

/// The block of a launch with `lanes` threads a row: eight rows of a warp, or one row.
pub(super) fn block_of(lanes: usize) -> usize {
    if lanes == 32 { THREADS } else { lanes }
}

/// Whether a row kernel may move rows of `n` elements in 16-byte packs: every row of every
/// view `(base address, rows, step)` starts aligned, steps by one, and `n` is a whole
/// number of packs.
fn packable(n: usize, dtype: DType, views: &[(u64, &Strided, i64)]) -> bool {
    let size = dtype.size();
    n.is_multiple_of(16 / size)
        && views
            .iter()
            .all(|&(base, rows, step)| base % 16 == 0 && step == 1 && rows.aligned(size))
}

/// `"packs"` where [`packable`] holds, else `"elems"`: the kernels' names for the two ways a
/// row moves.
pub(super) fn pack_mode(n: usize, dtype: DType, views: &[(u64, &Strided, i64)]) -> &'static str {
    if packable(n, dtype, views) {
        "packs"
    } else {
        "elems"
    }
}

/// [`pack_mode`], or `"full"` where packed rows also fill all `p` packs of each of their
/// `lanes` threads: the form without per-element masks (`full` in `nv_pack_valid`,
/// `rows.cuh`) of the kernels that have one (layer norm, its gradient, softmax and
/// log-sum-exp).
/// `NUVEC_ROWS_FULL=0` keeps the masked form (a knob for comparing the two).
pub(super) fn full_mode(
    n: usize,
    dtype: DType,
    views: &[(u64, &Strided, i64)],
    (lanes, p): (usize, usize),
) -> &'static str {
    static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let off = *OFF.get_or_init(|| std::env::var("NUVEC_ROWS_FULL").is_ok_and(|v| v.trim() == "0"));
    match pack_mode(n, dtype, views) {
        "packs" if !off && n == lanes * p * (16 / dtype.size()) => "full",
        mode => mode,
    }
}

/// The pack counts the forward kernels are instantiated for ([`packs`]' choices).
pub(super) const FORWARD_PACKS: [usize; 4] = [1, 2, 4, 8];

/// The module family of norm kernels of kind `kind` (`NV_NORMS_<kind>` in `norms.cu`): `rms`,
/// `add_rms`, `layer`, `rms_vjp`, `layer_vjp`, or `rows` (the looped kernel and the
/// gradients' partial sums).
fn family(kind: &str) -> &'static str {
    match kind {
        "rms" => "norms_rms",
        "add_rms" => "norms_add_rms",
        "layer" => "norms_layer",
        "rms_vjp" => "norms_rms_vjp",
        "layer_vjp" => "norms_layer_vjp",
        _ => "norms_rows",
    }
}

/// The module of the norm kernels of kind `kind` over `dtype` for `p` packs a thread (0 for
/// `rows`).
fn source(dtype: DType, kind: &str, p: usize) -> String {
    let (ct, tn) = type_names(dtype).expect("a float type");
    let args = match p {
        0 => format!("{ct}, {tn}"),
        p => format!("{ct}, {tn}, {p}"),
    };
    format!("{COMMON}\n{ROWS}\n{NORMS}\nNV_NORMS_{kind}({args})\n")
}

/// Kernel `symbol` of the norm module of kind `kind` over `dtype` for `p` packs a thread: one
/// module a kind and pack count, so a first launch compiles only what it needs.
pub(super) fn kernel(
    place: &Place,
    dtype: DType,
    kind: &str,
    p: usize,
    symbol: Symbol,
) -> Result<Kernel> {
    place
        .gpu
        .kernel_in(family(kind), Some(dtype), p as u32, symbol, || {
            source(dtype, kind, p)
        })
}

/// Every module of this family over `dtype` as `(name, source, symbols)`: what a launch
/// asks each module for (the symbols `norm` and `norm_vjp` format), for compiling ahead of
/// time and checking that each symbol is where the launch looks.
#[cfg(test)]
pub(super) fn sources(dtype: DType) -> Vec<(String, String, Vec<String>)> {
    let tn = type_names(dtype).expect("a float type").1;
    let rows = vec![format!("norm_rows_{tn}"), format!("norm_parts_{tn}")];
    let mut out = vec![(format!("norms_rows_{tn}"), source(dtype, "rows", 0), rows)];
    for kind in ["rms", "add_rms", "layer", "rms_vjp", "layer_vjp"] {
        for p in FORWARD_PACKS {
            if !kind.ends_with("vjp") || p <= super::norm_grads::VJP_PACKS {
                let modes: &[&str] = if kind.starts_with("layer") {
                    &["packs", "elems", "full"]
                } else {
                    &["packs", "elems"]
                };
                let symbols = modes
                    .iter()
                    .map(|mode| match kind.strip_suffix("_vjp") {
                        Some(k) => format!("{k}_vjp_{mode}_{tn}_{p}"),
                        None => format!("{kind}_{mode}_{tn}_{p}"),
                    })
                    .collect();
                let name = format!("{}_{tn}_{p}", family(kind));
                out.push((name, source(dtype, kind, p), symbols));
            }
        }
    }
    out
}

/// The rows (all axes but the last) of `layout` as a view, and the step along the last
/// axis; `None` past eight unmergeable axes.
pub(crate) fn rows_view(layout: &Layout) -> Option<(Strided, i64)> {
    let nd = layout.shape.len();
    if nd == 0 {
        return None;
    }
    let rows = Layout {
        shape: layout.shape[..nd - 1].to_vec(),
        strides: layout.strides[..nd - 1].to_vec(),
        offset: layout.offset,
    };
    Some((Strided::of(&rows).ok()?, layout.strides[nd - 1] as i64))
}

/// A parameter: its first element's address and step, or `(0, 0)` for a 0-D one (absent);
/// `None` unless 0-D or 1-D of `n` elements.
fn param(place: &Place, p: &ArrayData, n: usize) -> Result<Option<(u64, i64)>> {
    match p.layout.shape.as_slice() {
        [] => Ok(Some((0, 0))),
        [len] if *len == n => {
            let base = place.input(p)?;
            let at = base + (p.layout.offset * p.dtype().size()) as u64;
            Ok(Some((at, p.layout.strides[0] as i64)))
        }
        _ => Ok(None),
    }
}

/// A normalisation over the last axis of `x`: RMS (`bias` `None`) or layer (`bias` given,
/// possibly 0-D), with the residual `r` added first (add_rms_norm: the outputs are then
/// `[h, y]`). `None` where the fallback graph runs instead (see the module's
/// documentation).
fn norm(
    place: &Place,
    x: &ArrayData,
    r: Option<&ArrayData>,
    w: &ArrayData,
    bias: Option<&ArrayData>,
    eps: f32,
) -> Result<Option<Vec<ArrayData>>> {
    let dtype = x.dtype();
    let same = |d: Option<&ArrayData>| d.is_none_or(|d| d.dtype() == dtype);
    if !same(r) || !same(Some(w)) || !same(bias) {
        return Ok(None);
    }
    let shape = x.layout.shape.clone();
    let Some(&n) = shape.last() else {
        return Ok(None);
    };
    if r.is_some_and(|r| r.layout.shape != shape) {
        return Ok(None);
    }
    let Some((xrows, xs)) = rows_view(&x.layout) else {
        return Ok(None);
    };
    let (rrows, rs) = match r {
        Some(r) => match rows_view(&r.layout) {
            Some(v) => v,
            None => return Ok(None),
        },
        None => (xrows, 0),
    };
    let (Some((wp, ws)), Some((bp, bs))) = (
        param(place, w, n)?,
        match bias {
            Some(b) => param(place, b, n)?,
            None => Some((0, 0)),
        },
    ) else {
        return Ok(None);
    };
    let (y, yp) = place.output(dtype, &shape)?;
    let h = match r {
        Some(_) => Some(place.output(dtype, &shape)?),
        None => None,
    };
    let nrows: usize = shape[..shape.len() - 1].iter().product();
    let outputs = |y: ArrayData, h: Option<(ArrayData, u64)>| match h {
        Some((h, _)) => vec![h, y],
        None => vec![y],
    };
    if nrows == 0 || n == 0 {
        return Ok(Some(outputs(y, h)));
    }
    let xp = place.input(x)?;
    let rp: u64 = match r {
        Some(r) => place.input(r)?,
        None => 0,
    };
    let hp = h.as_ref().map_or(0, |h| h.1);
    let tn = type_names(dtype).expect("a float type").1;
    // Rows the registers hold: `lanes` threads of `p` packs (one read of each input). Longer
    // rows: the looped kernel, a warp or a block of 256 per row.
    let kind = match (r.is_some(), bias.is_some()) {
        (true, _) => "add_rms",
        (false, true) => "layer",
        (false, false) => "rms",
    };
    let one = Strided::of(&Layout::contiguous(&[1]))?;
    let mut views = vec![(xp, &xrows, xs)];
    if r.is_some() {
        views.push((rp, &rrows, rs));
    }
    for (ptr, step) in [(wp, ws), (bp, bs)] {
        if ptr != 0 {
            views.push((ptr, &one, step));
        }
    }
    let (f, lanes, block) = match forward_packs(n, dtype.size()) {
        Some((lanes, p)) => {
            let mode = if kind == "layer" {
                full_mode(n, dtype, &views, (lanes, p))
            } else {
                pack_mode(n, dtype, &views)
            };
            let name = symbol!("{kind}_{mode}_{tn}_{p}")?;
            (kernel(place, dtype, kind, p, name)?, lanes, block_of(lanes))
        }
        None => {
            let name = symbol!("norm_rows_{tn}")?;
            (kernel(place, dtype, "rows", 0, name)?, THREADS, THREADS)
        }
    };
    let groups = block / lanes;
    let lanes = lanes as i32;
    let (nr, n64) = (nrows as i64, n as i64);
    let centre = i32::from(bias.is_some());
    let looped = f.symbol.as_str().starts_with("norm_rows");
    let mut params: Vec<&dyn DeviceRepr> = vec![
        &xp, &xrows, &xs, &rp, &rrows, &rs, &wp, &ws, &bp, &bs, &yp, &hp, &nr, &n64, &eps,
    ];
    if looped {
        params.push(&centre);
    }
    params.push(&lanes);
    let blocks = nrows.div_ceil(groups).clamp(1, MAX_BLOCKS);
    let cfg = LaunchConfig {
        grid_dim: (resident(place, blocks) as u32, 1, 1),
        block_dim: (block as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: `xrows` (x's layout without its last axis) locates each of the `nrows` rows
    // inside x's block, whose `n` elements lie `xs` apart; likewise `rrows`/`rs` for the
    // residual (of x's shape) when `rp` is not null; `wp`/`bp` are null or point at the
    // first of `n` elements `ws`/`bs` apart inside their blocks; `yp` (and `hp` with a
    // residual) are fresh row-major blocks of `nrows · n` elements of x's type; all of one
    // type; the packed kernels get only views whose rows start aligned (`packable`), the
    // `full` ones only rows of `lanes · p` packs; and the arguments match `norm_rows_*` and
    // `{rms,add_rms,layer}_{packs,elems}_*`, `layer_full_*` in `norms.cu`.
    unsafe { f.launch(&place.stream, cfg, &params) }?;
    Ok(Some(outputs(y, h)))
}
