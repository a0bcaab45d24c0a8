//! The quantized product `x · wᵀ` for many rows of `x` on Hopper's warpgroup tensor cores
//! (`kernels/quantized_wgmma.cu`, compiled for `sm_90a`): f16 and bf16, 4-bit weights, groups
//! of 32, 64 or 128, more than [`MIN_ROWS`] rows of `x`, on devices of compute capability 9.x.
//! Everything else keeps the tiled `mma.sync` kernel (`tiled.rs`) and the row kernels.
//!
//! The kernel computes `yᵀ = w · xᵀ` so that the dequantized weights are `wgmma`'s A operand,
//! taken from registers: a tile is 128 rows of `w` by 128 or 256 rows of `x`, 64 values of
//! the inner axis a step. In a block of three warpgroups, one loads both operands with TMA
//! (two tensor maps a launch: `x` in the 128-byte swizzle `wgmma` reads through a
//! descriptor) into a ring of stages on shared-memory barriers, and two multiply, each
//! thread turning its bytes of the packed words into its A fragments with a few integer
//! operations and one fused multiply-add of the activation type a pair (each weight rounded
//! once to that type, as in the tiled kernel); the accumulators stay in f32. A grid of about
//! one block a multiprocessor walks the tiles' steps in equal shares (stream-K), the blocks
//! that share a tile adding their sums in a fixed order. The kernel's header says more.
//!
//! On an H100, `qmm_512x14336x4096` ran at 563-600 TFLOP/s (cuBLAS's bf16 product: 637-664 in
//! the same calls), `qmm_1024x14336x4096` at 617 (cuBLAS 686).
//!
//! Knobs, for tuning and comparison (read once):
//! - `NUVEC_QMM_WGMMA=0` keeps these products on the tiled kernel;
//! - `NUVEC_QMM_WGMMA_BX` (128 or 256) sets the rows of `x` a tile takes (by default 128 for
//!   up to 128 rows, else 256);
//! - `NUVEC_QMM_WGMMA_STAGES` sets the stages where that pair is instantiated ([`SHAPES`]) and
//!   fits the device's shared memory (by default the first listed that fits);
//! - `NUVEC_QMM_WGMMA_STREAMK=0` gives a block a tile instead of the stream-K walk;
//! - `NUVEC_QMM_WGMMA_MAX_ROWS` sets the most rows kept from the dequantized route.

use std::sync::OnceLock;

use cudarc::driver::{DeviceRepr, LaunchConfig};

use super::super::Place;
use super::super::dtype::type_names;
use super::super::launch::{Kernel, KernelKey, symbol};
use super::super::tensor_map::{self, Swizzle, TensorMap};
use super::{COMMON, aligned_operands, group_shift};
use crate::array::ArrayData;
use crate::primitive::OutputSpec;
use crate::{DType, Result};

const WGMMA: &str = include_str!("../kernels/quantized_wgmma.cu");
const BULK: &str = include_str!("../kernels/fast/bulk.cuh");

/// Rows of `w` a tile takes (`NVQW_BN`).
const BN: usize = 128;
/// Threads a block (`NVQW_THREADS`).
const THREADS: u32 = 384;
/// The products with more rows of `x` than this come here; fewer would leave most of a
/// block's columns empty.
pub(super) const MIN_ROWS: usize = 64;
/// The largest grid dimension y.
const GRID_Y: usize = 65_535;
/// The instantiated (rows of `x` a tile, stages) pairs, the default first for each tile. On an
/// H100, a block a tile at 512 rows: 4 stages of 256 rows ran at 600 TFLOP/s, 6 at 584; with
/// the stream-K walk (whose staging leaves room for 4 stages of 256 rows), tiles of 128 rows
/// ran at 473 (6 stages) and 451 (8) against 575-584 for 256.
const SHAPES: [(usize, usize); 4] = [(128, 6), (128, 8), (256, 4), (256, 6)];

/// The most rows of `x` this kernel keeps where the dequantized route can take the product
/// (`NUVEC_QMM_WGMMA_MAX_ROWS` sets another): past them, dequantizing `w` once costs less
/// than what cuBLAS's faster product saves. On an H100, [14336, 4096] at 4 bits: 1,024 rows
/// in 195 us here against 247 through the dequantized weights, 4,096 in 750 against 700.
fn max_rows() -> usize {
    static ROWS: OnceLock<Option<usize>> = OnceLock::new();
    knob(&ROWS, "NUVEC_QMM_WGMMA_MAX_ROWS").unwrap_or(2048)
}

/// Whether the dequantized weights and cuBLAS should take a product of `m` rows that this
/// kernel could take.
pub(super) fn leaves(m: usize) -> bool {
    m > max_rows()
}

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
    /// Tiles along n; the stream-K walk's units (pairs of steps) in all, its partial sums'
    /// slots and flags (0 without the walk).
    tiles_n: i32,
    units: i64,
    part: u64,
    flags: u64,
}

// SAFETY: `WgArgs` is `repr(C)` plain data with the field order, types and alignment of
// `NvQw`, so its bytes are what the kernel reads as its parameter.
unsafe impl DeviceRepr for WgArgs {}

/// Whether the kernel is on (the default; `NUVEC_QMM_WGMMA=0` turns it off).
fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("NUVEC_QMM_WGMMA").is_none_or(|v| v != "0"))
}

/// Whether a grid of about one block a multiprocessor walks the tiles' units in equal shares
/// (the default; `NUVEC_QMM_WGMMA_STREAMK=0` gives a block a tile).
fn stream_k() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("NUVEC_QMM_WGMMA_STREAMK").is_none_or(|v| v != "0"))
}

/// A numeric environment knob, read once into `cell`.
fn knob(cell: &'static OnceLock<Option<usize>>, name: &str) -> Option<usize> {
    *cell.get_or_init(|| std::env::var(name).ok().and_then(|v| v.trim().parse().ok()))
}

/// The (rows of `x` a tile, stages) for `m` rows on this device, or `None` where no
/// instantiated pair fits its shared memory.
fn shape(place: &Place, m: usize, walk: bool) -> Option<(usize, usize)> {
    static BX: OnceLock<Option<usize>> = OnceLock::new();
    static STAGES: OnceLock<Option<usize>> = OnceLock::new();
    let bx = match knob(&BX, "NUVEC_QMM_WGMMA_BX") {
        Some(b @ (128 | 256)) => b,
        _ if m <= 128 => 128,
        _ => 256,
    };
    let most = place.gpu.props.shared_per_block as usize;
    let fitting = || {
        SHAPES
            .into_iter()
            .filter(move |&(b, s)| b == bx && shared_bytes(b, s, walk) <= most)
    };
    let asked = knob(&STAGES, "NUVEC_QMM_WGMMA_STAGES");
    fitting()
        .find(|&(_, s)| Some(s) == asked)
        .or_else(|| fitting().next())
}

/// A block's dynamic shared memory in bytes (`NvqwShape::SHARED`, or `SHARED_SK` for the
/// stream-K walk, whose stores have a staging of their own; and 1,024 for aligning the
/// swizzled stages).
fn shared_bytes(bx: usize, stages: usize, walk: bool) -> usize {
    let ring = stages * (bx * 128 + BN * 32 + 16);
    let staging = if walk { bx * (BN + 8) * 2 } else { 0 };
    1024 + ring.next_multiple_of(16) + staging
}

/// The module of the kernels over `dtype` (f16 or bf16): every instantiated shape.
fn source(dtype: DType) -> String {
    let (ct, tn) = type_names(dtype).expect("a float type");
    let mut s = format!("{COMMON}\n{BULK}\n{WGMMA}\n");
    for (bx, st) in SHAPES {
        s.push_str(&format!("NV_QMM_WG({ct}, {tn}, {bx}, {st})\n"));
    }
    s
}

/// The kernels' sources, for compiling ahead of time for `sm_90a` (tests).
#[cfg(test)]
pub(crate) fn sm90_sources() -> Vec<(String, String)> {
    [DType::F16, DType::BF16]
        .into_iter()
        .map(|d| {
            let tn = type_names(d).expect("a float type").1;
            (format!("quantized_wgmma_{tn}"), source(d))
        })
        .collect()
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
    // locates scales by 32-bit offsets, and TMA's coordinates are 32-bit.
    if k > i32::MAX as usize
        || wrow * 8 != k
        || !k.is_multiple_of(group_size)
        || n.saturating_mul(k / group_size) > i32::MAX as usize
        || m.max(n) > i32::MAX as usize
    {
        return Ok(None);
    }
    let walk = stream_k();
    let Some((bx, stages)) = shape(place, m, walk) else {
        return Ok(None);
    };
    let (gx, gy) = (n.div_ceil(BN), m.div_ceil(bx));
    if gx > u32::MAX as usize || gy > GRID_Y {
        return Ok(None);
    }
    let (_held, [x, w_at, scales, biases]) = aligned_operands(place, inputs)?;
    // The tensor maps: x in boxes of 64 values × `bx` rows in the 128-byte swizzle, w in
    // boxes of 8 words × 128 rows; the other kernels read what TMA cannot.
    let x_map = tensor_map::encode_rows(x, dtype, [m, k], k * 2, [bx, 64], Swizzle::Bytes128)?;
    let w_map = tensor_map::encode_rows(
        w_at,
        DType::U32,
        [n, wrow],
        wrow * 4,
        [BN, 8],
        Swizzle::None,
    )?;
    let (Some(x_map), Some(w_map)) = (x_map, w_map) else {
        return Ok(None);
    };
    let (out, y) = place.output(dtype, shape_out)?;
    let mut args = WgArgs {
        m: m as i64,
        n: n as i64,
        k: k as i32,
        wrow: wrow as i32,
        groups: (k / group_size) as i32,
        gs_shift: group_shift(group_size),
        nibbles: 0x000F_000F,
        tiles_n: i32::try_from(gx).unwrap_or(i32::MAX),
        units: 0,
        part: 0,
        flags: 0,
    };
    let mut grid = (gx as u32, gy as u32);
    // The walk's slots, held until the launch is queued.
    let mut _scratch = None;
    if walk {
        let (blocks, scratch) = stream_k_scratch(place, &mut args, gx * gy, k, bx)?;
        grid = (blocks, 1);
        _scratch = Some(scratch);
    }
    let mut module = place.gpu.module("quantized_wgmma", Some(dtype), 0);
    module.arch = module.arch.specific()?;
    let tn = type_names(dtype).expect("a float type").1;
    let suffix = if walk { "_sk" } else { "" };
    let key = KernelKey {
        module,
        symbol: symbol!("qmmwg_{tn}_x{bx}_s{stages}_g{}{suffix}", group_size.min(64))?,
    };
    let f = place.gpu.kernel(&key, || source(dtype))?;
    f.allow_shared(place.gpu.props.shared_per_block)?;
    let cfg = LaunchConfig {
        grid_dim: (grid.0, grid.1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: shared_bytes(bx, stages, walk) as u32,
    };
    launch(place, &f, cfg, [x_map, w_map], [scales, biases, y], args)?;
    Ok(Some(vec![out]))
}

/// The stream-K walk's blocks (one a multiprocessor, or one a unit where there are fewer
/// units: pairs of steps of 64 values, `tiles` times) and scratch: a slot of `bx / 2` f32
/// sums a consumer thread, and a flag a block from the stream's zeroed counters (the owner of
/// each cut tile sets the flags it waited on back to zero). Fills in `args`.
fn stream_k_scratch(
    place: &Place,
    args: &mut WgArgs,
    tiles: usize,
    k: usize,
    bx: usize,
) -> Result<(u32, ArrayData)> {
    let units = tiles * k.div_ceil(64).div_ceil(2);
    let blocks = units.min(place.gpu.props.sms as usize).max(1);
    let (part, part_at) = place.output(DType::F32, &[blocks * bx / 2 * 256])?;
    args.units = units as i64;
    args.part = part_at;
    args.flags = place.zeroed_counters(blocks)?;
    Ok((blocks as u32, part))
}

/// The launch: the tensor maps of x and w, the addresses of the scales, the biases and y.
fn launch(
    place: &Place,
    f: &Kernel,
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
    // `n`, and takes the shared memory `matmul` sized for its shape and walk, allowed by the
    // caller. With the stream-K walk, block c of the grid writes only slot c of `args.part`
    // (`bx / 2` sums of 256 threads) and raises only flag c of `args.flags` (the stream's
    // counters, zero at the launch), and waits only on earlier blocks' flags, each of which
    // it sets back to zero once read. The arguments match `qmmwg_*`. The caller holds the
    // arrays until the work is queued and the allocator keeps their blocks for this stream.
    unsafe { f.launch(&place.stream, cfg, &params) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `shared_bytes` computes what `NvqwShape` lays out in the kernel (the host cannot read the
    /// kernel's constants, so the two formulas are written twice): the lines it mirrors are
    /// still the kernel's, and each tile height has a listed shape that fits Hopper's 227 KB a
    /// block with either walk.
    #[test]
    fn shared_bytes_mirror_the_kernel_layout() {
        for line in [
            format!("#define NVQW_BN {BN}\n"),
            "static constexpr int XSTAGE = BX * 128;".to_string(),
            "static constexpr int WSTAGE = NVQW_BN * 32;".to_string(),
            "static constexpr int BARS = S * (XSTAGE + WSTAGE);".to_string(),
            "static constexpr int SHARED = BARS + 16 * S;".to_string(),
            "static constexpr int SHARED_SK_STAGING = (SHARED + 15) & ~15;".to_string(),
            "static constexpr int STAGING = BX * (NVQW_BN + 8) * 2;".to_string(),
            "static constexpr int SHARED_SK = SHARED_SK_STAGING + STAGING;".to_string(),
        ] {
            assert!(WGMMA.contains(&line), "the kernel no longer has: {line}");
        }
        for (bx, stages) in SHAPES {
            let bars = stages * (bx * 128 + BN * 32);
            let shared = bars + 16 * stages;
            let with_walk = shared.next_multiple_of(16) + bx * (BN + 8) * 2;
            assert_eq!(shared_bytes(bx, stages, false), 1024 + shared);
            assert_eq!(shared_bytes(bx, stages, true), 1024 + with_walk);
        }
        for bx in [128, 256] {
            for walk in [false, true] {
                assert!(
                    SHAPES
                        .iter()
                        .any(|&(b, s)| b == bx && shared_bytes(b, s, walk) <= 227 * 1024),
                    "no shape of {bx} rows fits (walk {walk})"
                );
            }
        }
    }
}
