//! The quantized product `x · wᵀ` for many rows of `x` on Hopper's warpgroup tensor cores
//! (`kernels/quantized_wgmma.cu`, compiled for `sm_90a`): f16 and bf16, 4-bit weights, groups
//! of 32, 64 or 128, more than [`MIN_ROWS`] rows of `x`, on devices of compute capability 9.x.
//! Everything else keeps the tiled `mma.sync` kernel (`tiled.rs`) and the row kernels.
//!
//! The kernel computes `yᵀ = w · xᵀ` so that the dequantized weights are `wgmma`'s A operand,
//! taken from registers: a block of two warpgroups takes 128 rows of `w` by 128 or 256 rows of
//! `x`, 64 values of the inner axis a step; the packed words and the rows of `x` go into
//! shared memory with `cp.async` (x in the 128-byte swizzled layout `wgmma` reads through a
//! descriptor), each thread turns its bytes of the packed words into its A fragments with a
//! few integer operations and one fused multiply-add of the activation type a pair (each
//! weight rounded once to that type, as in the tiled kernel), and the accumulators stay in
//! f32. The kernel's header says more.
//!
//! The warp-specialised form (`kernels/quantized_wgmma_ws.cu`, the default) takes the same
//! tiles with a third warpgroup that loads both operands with TMA (two tensor maps a launch)
//! into a ring of stages on shared-memory barriers, so that the two multiplying warpgroups
//! wait only on the stages they read: on an H100, `qmm_512x14336x4096` at 590-600 TFLOP/s
//! against the first form's 440 in the same run (cuBLAS's bf16 product: 664).
//!
//! Knobs, for tuning and comparison (read once):
//! - `NUVEC_QMM_WGMMA=0` keeps these products on the tiled kernel, for comparison (on the
//!   H200, `qmm_512x14336x4096` ran at 422 TFLOP/s here and 349 through the dequantized
//!   weights and cuBLAS, which takes the products past `max_rows`; on an H100, 428 here
//!   and 209 on the tiled kernel);
//! - `NUVEC_QMM_WGMMA_BX` (128 or 256) sets the rows of `x` a block takes (by default 128 for
//!   up to 128 rows, else 256);
//! - `NUVEC_QMM_WGMMA_STAGES` sets the stages where that pair is instantiated ([`SHAPES`], or
//!   [`WS_SHAPES`] for the warp-specialised form) and fits the device's shared memory (by
//!   default the first listed that fits);
//! - `NUVEC_QMM_WGMMA_WS=0` takes the first form (every thread loads and multiplies, a
//!   barrier a step), for comparison;
//! - `NUVEC_QMM_WGMMA_MAX_ROWS` sets the most rows kept from the dequantized route.

use std::sync::OnceLock;

use cudarc::driver::{DeviceRepr, LaunchConfig};

use super::super::Place;
use super::super::dtype::type_names;
use super::super::launch::{KernelKey, symbol};
use super::super::tensor_map::{self, Swizzle, TensorMap};
use super::{COMMON, aligned_operands, group_shift};
use crate::array::ArrayData;
use crate::primitive::OutputSpec;
use crate::{DType, Result};

const WGMMA: &str = include_str!("../kernels/quantized_wgmma.cu");
const WGMMA_WS: &str = include_str!("../kernels/quantized_wgmma_ws.cu");
const BULK: &str = include_str!("../kernels/fast/bulk.cuh");

/// Rows of `w` a block takes (`NVQW_BN`).
const BN: usize = 128;
/// Words a packed row of `w` takes in a stage (`NVQW_WQS`).
const WQS: usize = 12;
/// Threads a block (`NVQW_THREADS`; `NVQW_WS_THREADS` in the warp-specialised form).
const THREADS: u32 = 256;
const WS_THREADS: u32 = 384;
/// The products with more rows of `x` than this come here; fewer would leave most of a
/// block's columns empty.
pub(super) const MIN_ROWS: usize = 64;
/// The most rows of `x` this kernel keeps where the dequantized route can take the product
/// (`NUVEC_QMM_WGMMA_MAX_ROWS` sets another): past them, dequantizing `w` once costs less
/// than what cuBLAS's product saves. On the H200, [14336, 4096] at 4 bits took 0.28 us a row
/// on the first form and 110 us plus 0.12 a row through the dequantized weights (422 against
/// 349 TFLOP/s at 512 rows, 423 against 513 at 1,024).
fn max_rows() -> usize {
    static ROWS: OnceLock<Option<usize>> = OnceLock::new();
    knob(&ROWS, "NUVEC_QMM_WGMMA_MAX_ROWS").unwrap_or(640)
}

/// Whether the dequantized weights and cuBLAS should take a product of `m` rows that this
/// kernel could take.
pub(super) fn leaves(m: usize) -> bool {
    m > max_rows()
}

/// The largest grid dimension y.
const GRID_Y: usize = 65_535;
/// The instantiated (rows of `x` a block, stages) pairs, the default first for each block.
const SHAPES: [(usize, usize); 4] = [(128, 6), (128, 4), (256, 5), (256, 4)];
/// The warp-specialised form's pairs (on an H100 at 512 rows, 4 stages of 256 rows ran at
/// 600 TFLOP/s, 6 at 584).
const WS_SHAPES: [(usize, usize); 4] = [(128, 8), (128, 6), (256, 4), (256, 6)];

/// The kernel's arguments (`NvQw` in `quantized_wgmma.cu`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct WgArgs {
    m: i64,
    n: i64,
    k: i32,
    wrow: i32,
    groups: i32,
    gs_shift: i32,
    /// 0x000F000F (`nibbles` in `NvQw`).
    nibbles: u32,
}

// SAFETY: `WgArgs` is `repr(C)` plain data with the field order, types and alignment of
// `NvQw`, so its bytes are what the kernel reads as its parameter.
unsafe impl DeviceRepr for WgArgs {}

/// Whether the kernel is on (the default; `NUVEC_QMM_WGMMA=0` turns it off).
fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("NUVEC_QMM_WGMMA").is_none_or(|v| v != "0"))
}

/// Whether the warp-specialised form is on (the default; `NUVEC_QMM_WGMMA_WS=0` turns it off).
fn specialised() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("NUVEC_QMM_WGMMA_WS").is_none_or(|v| v != "0"))
}

/// A numeric environment knob, read once into `cell`.
fn knob(cell: &'static OnceLock<Option<usize>>, name: &str) -> Option<usize> {
    *cell.get_or_init(|| std::env::var(name).ok().and_then(|v| v.trim().parse().ok()))
}

/// The (rows of `x` a block, stages) for `m` rows on this device among `shapes` (whose shared
/// memory `bytes` gives), or `None` where none fits its shared memory.
fn shape(
    place: &Place,
    m: usize,
    shapes: &[(usize, usize)],
    bytes: fn(usize, usize) -> usize,
) -> Option<(usize, usize)> {
    static BX: OnceLock<Option<usize>> = OnceLock::new();
    static STAGES: OnceLock<Option<usize>> = OnceLock::new();
    let bx = match knob(&BX, "NUVEC_QMM_WGMMA_BX") {
        Some(b @ (128 | 256)) => b,
        _ if m <= 128 => 128,
        _ => 256,
    };
    let most = place.gpu.props.shared_per_block as usize;
    let fitting = || {
        shapes
            .iter()
            .copied()
            .filter(move |&(b, s)| b == bx && bytes(b, s) <= most)
    };
    let asked = knob(&STAGES, "NUVEC_QMM_WGMMA_STAGES");
    fitting()
        .find(|&(_, s)| Some(s) == asked)
        .or_else(|| fitting().next())
}

/// A block's dynamic shared memory in bytes (`NvqwShape::SHARED`, and 1,024 for aligning the
/// swizzled stages).
fn shared_bytes(bx: usize, stages: usize) -> usize {
    1024 + stages * (bx * 128 + BN * WQS * 4)
}

/// The warp-specialised form's (`NvqwWsShape::SHARED`: packed rows of w unpadded, two
/// barriers a stage; and the alignment).
fn ws_shared_bytes(bx: usize, stages: usize) -> usize {
    1024 + stages * (bx * 128 + BN * 32 + 16)
}

/// The module of the kernels over `dtype` (f16 or bf16): every instantiated shape of one form.
fn source(dtype: DType, ws: bool) -> String {
    let (ct, tn) = type_names(dtype).expect("a float type");
    if ws {
        let mut s = format!("{COMMON}\n{BULK}\n{WGMMA}\n{WGMMA_WS}\n");
        for (bx, st) in WS_SHAPES {
            s.push_str(&format!("NV_QMM_WS({ct}, {tn}, {bx}, {st})\n"));
        }
        return s;
    }
    let mut s = format!("{COMMON}\n{WGMMA}\n");
    for (bx, st) in SHAPES {
        s.push_str(&format!("NV_QMM_WG({ct}, {tn}, {bx}, {st})\n"));
    }
    s
}

/// The kernels' sources, for compiling ahead of time for `sm_90a` (tests).
#[cfg(test)]
pub(crate) fn sm90_sources() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for d in [DType::F16, DType::BF16] {
        let tn = type_names(d).expect("a float type").1;
        out.push((format!("quantized_wgmma_{tn}"), source(d, false)));
        out.push((format!("quantized_wgmma_ws_{tn}"), source(d, true)));
    }
    out
}

/// Whether the kernel takes this product: Hopper, f16 or bf16, `x · wᵀ` with 4 bits and groups
/// of 32, 64 or 128, more than [`MIN_ROWS`] rows, and a grid within the device's limits.
fn covers(place: &Place, dtype: DType, (group_size, bits, transpose): (usize, u32, bool)) -> bool {
    enabled()
        && place.gpu.props.arch.major == 9
        && matches!(dtype, DType::F16 | DType::BF16)
        && transpose
        && bits == 4
        && matches!(group_size, 32 | 64 | 128)
}

/// `quantized_matmul` of `m` rows on the warpgroup tensor cores, or `None` where the kernel
/// does not take it (the caller runs the others).
pub(super) fn matmul(
    place: &Place,
    inputs: &[ArrayData],
    spec: (usize, u32, bool),
    (m, n, k): (usize, usize, usize),
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    let (shape_out, dtype) = (&outputs[0].0, outputs[0].1);
    let group_size = spec.0;
    if m <= MIN_ROWS || !covers(place, dtype, spec) {
        return Ok(None);
    }
    let w = &inputs[1];
    let wrow = w.layout.shape[1];
    // k is wrow · 8 (a multiple of 32, so rows of w and x start on 16 bytes); the kernel
    // locates scales by 32-bit offsets.
    if k > i32::MAX as usize
        || wrow * 8 != k
        || !k.is_multiple_of(group_size)
        || n.saturating_mul(k / group_size) > i32::MAX as usize
    {
        return Ok(None);
    }
    let ws = specialised();
    let found = if ws {
        shape(place, m, &WS_SHAPES, ws_shared_bytes)
    } else {
        shape(place, m, &SHAPES, shared_bytes)
    };
    let Some((bx, stages)) = found else {
        return Ok(None);
    };
    let (gx, gy) = (n.div_ceil(BN), m.div_ceil(bx));
    // (TMA's coordinates are 32-bit.)
    if gx > u32::MAX as usize || gy > GRID_Y || (ws && m.max(n) > i32::MAX as usize) {
        return Ok(None);
    }
    let (_held, [x, w_at, scales, biases]) = aligned_operands(place, inputs)?;
    // The form's tensor maps: x in boxes of 64 values × `bx` rows in the 128-byte swizzle,
    // w in boxes of 8 words × 128 rows.
    let maps = if ws {
        let x_map = tensor_map::encode_rows(x, dtype, [m, k], k * 2, [bx, 64], Swizzle::Bytes128)?;
        let w_map = tensor_map::encode_rows(
            w_at,
            DType::U32,
            [n, wrow],
            wrow * 4,
            [BN, 8],
            Swizzle::None,
        )?;
        match (x_map, w_map) {
            (Some(xm), Some(wm)) => Some((xm, wm)),
            // The other form reads what TMA cannot.
            _ => return Ok(None),
        }
    } else {
        None
    };
    let (out, y) = place.output(dtype, shape_out)?;
    let args = WgArgs {
        m: m as i64,
        n: n as i64,
        k: k as i32,
        wrow: wrow as i32,
        groups: (k / group_size) as i32,
        gs_shift: group_shift(group_size),
        nibbles: 0x000F_000F,
    };
    let family = if ws {
        "quantized_wgmma_ws"
    } else {
        "quantized_wgmma"
    };
    let mut module = place.gpu.module(family, Some(dtype), 0);
    module.arch = module.arch.specific()?;
    let tn = type_names(dtype).expect("a float type").1;
    let prefix = if ws { "qmmws" } else { "qmmwg" };
    let key = KernelKey {
        module,
        symbol: symbol!("{prefix}_{tn}_x{bx}_s{stages}_g{}", group_size.min(64))?,
    };
    let f = place.gpu.kernel(&key, || source(dtype, ws))?;
    f.allow_shared(place.gpu.props.shared_per_block)?;
    let (threads, shared) = if ws {
        (WS_THREADS, ws_shared_bytes(bx, stages))
    } else {
        (THREADS, shared_bytes(bx, stages))
    };
    let cfg = LaunchConfig {
        grid_dim: (gx as u32, gy as u32, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: shared as u32,
    };
    if let Some((x_map, w_map)) = maps {
        launch_specialised(place, &f, cfg, [x_map, w_map], [scales, biases, y], args)?;
        return Ok(Some(vec![out]));
    }
    let params: [&dyn DeviceRepr; 6] = [&x, &w_at, &scales, &biases, &y, &args];
    // SAFETY: `x` holds `m · k` values of `dtype`, `w_at` `n` rows of `wrow` words, the scales
    // and biases `n` rows of `k / group_size` values, all row-major from 16-byte-aligned starts
    // (`aligned`; the primitive checked the shapes); `y` is a fresh block of `m · n` values.
    // The kernel copies rows of x below `m` and columns below `k`, words of rows below `n`
    // and inside them, scales of those rows and packs below `k`, writes outputs below `m` and
    // `n`, and takes `shared_bytes` of shared memory, allowed above; the arguments match
    // `qmmwg_*`. The arrays are held until the work is queued and the allocator keeps their
    // blocks for this stream.
    unsafe { f.launch(&place.stream, cfg, &params)? };
    Ok(Some(vec![out]))
}

/// The warp-specialised form's launch: the tensor maps of x and w, the addresses of the scales,
/// the biases and y.
fn launch_specialised(
    place: &Place,
    f: &super::super::launch::Kernel,
    cfg: LaunchConfig,
    [x_map, w_map]: [TensorMap; 2],
    [scales, biases, y]: [u64; 3],
    args: WgArgs,
) -> Result<()> {
    let params: [&dyn DeviceRepr; 6] = [&x_map, &w_map, &scales, &biases, &y, &args];
    // SAFETY: the maps describe x (`m` rows of `k` values of the output's type) and w (`n`
    // rows of `wrow` words) row-major at the addresses the caller holds (`aligned`), within
    // which the copy engine reads, filling what lies outside with zeros; the scales and biases
    // hold `n` rows of `k / group_size` values and `y` is a fresh block of `m · n` values; the
    // kernel reads scales of rows below `n` and packs below `k`, writes outputs below `m` and
    // `n`, and takes `ws_shared_bytes` of shared memory, allowed by the caller; the arguments
    // match `qmmws_*`. The caller holds the arrays until the work is queued and the allocator
    // keeps their blocks for this stream.
    unsafe { f.launch(&place.stream, cfg, &params) }
}
