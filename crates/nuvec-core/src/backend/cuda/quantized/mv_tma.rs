//! The quantized decoding product `x · wᵀ` (up to 8 rows of `x`, 4-bit weights, f16 and bf16)
//! fed by Hopper's tensor copies (`kernels/quantized_mv_tma.cu`): a producer warp streams the
//! packed weights, scales and biases into a ring of shared-memory stages, eight warps multiply
//! as the register form (`mv_mma.rs`) does. The kernel's header says why and how.
//!
//! Off unless `NUVEC_QMV_TMA=1`: on an H100 its first form ran `qmv_14336x4096` in 18.0 µs
//! (16.1 at two blocks a multiprocessor) against the register form's 14.0, its consumer warps
//! waiting on their own chains (BENCHMARKS.md, fourteenth session); the kernel's header says
//! what changed since. Where it does not take a product (not Hopper, a scale row TMA cannot
//! address, `x` too large for shared memory) the register form runs.
//! `NUVEC_QMV_TMA_BLOCKS=2` runs two blocks a multiprocessor (the grid's blocks walk the tiles
//! either way); `NUVEC_KERNEL_DEFINES="NVQT_PAIRS=1"` has each consumer warp take two stages
//! at a time (122 registers: one block a multiprocessor).

use std::sync::OnceLock;

use cudarc::driver::{DeviceRepr, LaunchConfig};

use super::super::Place;
use super::super::dtype::type_names;
use super::super::launch::{KernelKey, symbol};
use super::super::tensor_map::{self, Swizzle};
use super::{COMMON, aligned_operands, group_shift, mv_mma};
use crate::array::ArrayData;
use crate::primitive::OutputSpec;
use crate::{DType, Result};

const TMA: &str = include_str!("../kernels/quantized_mv_tma.cu");
const BULK: &str = include_str!("../kernels/fast/bulk.cuh");

/// Values of the inner axis a stage (`NVQT_KS`), rows of `w` a tile, stages in the ring
/// (`NVQT_STAGES`), consumer warps (`NVQT_CONSUMERS`).
const KS: usize = 1024;
const TILE: usize = 16;
const STAGES: usize = 8;
const CONSUMERS: usize = 8;
/// The most rows of `x`: the products' 8 columns.
const MAX_ROWS: usize = 8;

/// The kernel's arguments (`NvQmvTma` in `quantized_mv_tma.cu`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct TmaArgs {
    n: i64,
    m: i64,
    k: i32,
    tiles: i32,
    stages: i32,
    gs_shift: i32,
    sstage: i32,
    xstride: i32,
    nibbles: u32,
    /// Where the shared memory's parts start ([`SharedLayout`]).
    scales_at: i32,
    biases_at: i32,
    x_at: i32,
    sums_at: i32,
    bars_at: i32,
}

// SAFETY: `TmaArgs` is `repr(C)` plain data with the field order, types and alignment of
// `NvQmvTma`, so its bytes are what the kernel reads as its parameter.
unsafe impl DeviceRepr for TmaArgs {}

/// Whether the form is asked for (`NUVEC_QMV_TMA=1`).
fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("NUVEC_QMV_TMA").is_some_and(|v| v == "1"))
}

/// Blocks a multiprocessor (`NUVEC_QMV_TMA_BLOCKS`, 1 or 2; by default 1).
fn blocks_per_sm() -> usize {
    static BLOCKS: OnceLock<usize> = OnceLock::new();
    *BLOCKS.get_or_init(|| {
        std::env::var("NUVEC_QMV_TMA_BLOCKS")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .filter(|b| (1..=2).contains(b))
            .unwrap_or(1)
    })
}

/// The module over `dtype` (f16 or bf16).
fn source(dtype: DType) -> String {
    let (ct, tn) = type_names(dtype).expect("a float type");
    format!(
        "{COMMON}\n{BULK}\n{}\n{TMA}\nNV_QMV_TMA({ct}, {tn})\n",
        mv_mma::SOURCE
    )
}

/// The kernels' sources, for compiling ahead of time (tests).
#[cfg(test)]
pub(super) fn all_sources() -> Vec<(String, String)> {
    [DType::F16, DType::BF16]
        .into_iter()
        .map(|d| {
            let tn = type_names(d).expect("a float type").1;
            (format!("quantized_mv_tma_{tn}"), source(d))
        })
        .collect()
}

/// Where the parts of a launch's dynamic shared memory start, in bytes, and its size: the
/// stages' words (from 0), scales and biases (`sstage` bytes a stage each), `m` rows of `x` of
/// `xstride` values, two tiles' sums of the consumer warps, the barriers. The one place that
/// lays it out: the kernel reads the offsets from its arguments.
struct SharedLayout {
    scales_at: usize,
    biases_at: usize,
    x_at: usize,
    sums_at: usize,
    bars_at: usize,
    bytes: usize,
}

impl SharedLayout {
    fn new(sstage: usize, m: usize, xstride: usize) -> SharedLayout {
        let scales_at = STAGES * TILE * KS / 2;
        let biases_at = scales_at + STAGES * sstage;
        let x_at = biases_at + STAGES * sstage;
        let sums_at = x_at + (m * xstride * 2).next_multiple_of(16);
        let bars_at = sums_at + 2 * CONSUMERS * 4 * 32 * 4;
        SharedLayout {
            scales_at,
            biases_at,
            x_at,
            sums_at,
            bars_at,
            bytes: bars_at + 2 * STAGES * 8,
        }
    }
}

/// `quantized_matmul` of `m` rows through the tensor copies, or `None` where the form does
/// not take it.
pub(super) fn matmul(
    place: &Place,
    inputs: &[ArrayData],
    (group_size, bits, transpose): (usize, u32, bool),
    (m, n, k): (usize, usize, usize),
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    let (shape_out, dtype) = (&outputs[0].0, outputs[0].1);
    let covered = enabled()
        && mv_mma::takes(place, dtype, bits, group_size)
        && place.gpu.props.arch.major == 9
        && transpose
        && (1..=MAX_ROWS).contains(&m);
    let w = &inputs[1];
    if !covered
        || k > i32::MAX as usize / 2
        || w.layout.shape[1] * 8 != k
        || !k.is_multiple_of(group_size)
        // TMA steps between rows of scales in multiples of 16 bytes (8 values): checked here,
        // before the operands are aligned, so that `encode_rows` refuses none for it.
        || !(k / group_size).is_multiple_of(8)
        || n.div_ceil(TILE) > i32::MAX as usize
    {
        return Ok(None);
    }
    let stages = k.div_ceil(KS);
    let sstage = TILE * (KS / group_size) * 2;
    let xstride = stages * KS + 8;
    let layout = SharedLayout::new(sstage, m, xstride);
    if layout.bytes > place.gpu.props.shared_per_block as usize {
        return Ok(None);
    }
    let (_held, [x, w_at, scales, biases]) = aligned_operands(place, inputs)?;
    let groups = k / group_size;
    let w_map = tensor_map::encode_rows(
        w_at,
        DType::U32,
        [n, k / 8],
        k / 2,
        [TILE, KS / 8],
        Swizzle::None,
    )?;
    let s_box = [TILE, KS / group_size];
    let s_map =
        tensor_map::encode_rows(scales, dtype, [n, groups], groups * 2, s_box, Swizzle::None)?;
    let b_map =
        tensor_map::encode_rows(biases, dtype, [n, groups], groups * 2, s_box, Swizzle::None)?;
    let (Some(w_map), Some(s_map), Some(b_map)) = (w_map, s_map, b_map) else {
        return Ok(None);
    };
    let tiles = n.div_ceil(TILE);
    let (out, y) = place.output(dtype, shape_out)?;
    let args = TmaArgs {
        n: n as i64,
        m: m as i64,
        k: k as i32,
        tiles: tiles as i32,
        stages: stages as i32,
        gs_shift: group_shift(group_size),
        sstage: sstage as i32,
        xstride: xstride as i32,
        nibbles: 0x000F_000F,
        scales_at: layout.scales_at as i32,
        biases_at: layout.biases_at as i32,
        x_at: layout.x_at as i32,
        sums_at: layout.sums_at as i32,
        bars_at: layout.bars_at as i32,
    };
    let mut module = place.gpu.module("quantized_mv_tma", Some(dtype), 0);
    module.arch = module.arch.specific()?;
    let tn = type_names(dtype).expect("a float type").1;
    let key = KernelKey {
        module,
        symbol: symbol!("qmv_tma_{tn}")?,
    };
    let f = place.gpu.kernel(&key, || source(dtype))?;
    f.allow_shared(place.gpu.props.shared_per_block)?;
    let cfg = LaunchConfig {
        grid_dim: (
            tiles.min(blocks_per_sm() * place.gpu.props.sms as usize) as u32,
            1,
            1,
        ),
        block_dim: (((CONSUMERS + 1) * 32) as u32, 1, 1),
        shared_mem_bytes: layout.bytes as u32,
    };
    let params: [&dyn DeviceRepr; 6] = [&w_map, &s_map, &b_map, &x, &y, &args];
    // SAFETY: the maps describe w (`n` rows of `k / 8` words) and the scales and biases (`n`
    // rows of `k / group_size` values) row-major at the addresses held here (`aligned`), within
    // which the copy engine reads, filling what lies outside with zeros; `x` holds `m · k`
    // values and `y` is a fresh block of `m · n`; the kernel reads x below `m · k`, writes
    // outputs below `m` and `n`, and takes the shared memory `layout` sizes at the offsets it
    // gives (allowed above); the arguments match `qmv_tma_*`. The arrays are
    // held until the work is queued and the allocator keeps their blocks for this stream.
    unsafe { f.launch(&place.stream, cfg, &params)? };
    Ok(Some(vec![out]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host's sizes are the kernel's, and the layout keeps what TMA writes on 128 bytes, x's
    /// rows (copied 16 bytes at a time) on 16 and the barriers on 8, at every group size.
    #[test]
    fn sizes_and_layout_match_the_kernel() {
        for line in [
            format!("#define NVQT_STAGES {STAGES}\n"),
            format!("#define NVQT_KS {KS}\n"),
            format!("#define NVQT_CONSUMERS {CONSUMERS}\n"),
            format!("#define NVQT_WSTAGE ({TILE} * NVQT_KS / 2)\n"),
        ] {
            assert!(TMA.contains(&line), "{line}");
        }
        assert!(TMA.contains("qmv_tma_##TN("));
        for group_size in [32, 64, 128] {
            let sstage = TILE * (KS / group_size) * 2;
            for m in 1..=MAX_ROWS {
                let l = SharedLayout::new(sstage, m, 4 * KS + 8);
                assert_eq!(l.scales_at % 128, 0);
                assert_eq!(l.biases_at % 128, 0);
                assert_eq!(l.x_at % 16, 0);
                assert_eq!(l.bars_at % 8, 0);
                assert!(l.bytes > l.bars_at);
            }
        }
    }
}
