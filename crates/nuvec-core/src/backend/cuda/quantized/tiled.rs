//! The quantized product for many rows of `x` on the tensor cores (`kernels/quantized_tiled.cu`),
//! f16 and bf16, `x · wᵀ` and `x · w`, every width and group size.
//!
//! A block of 8 warps computes a `BM × 256` tile of the output (`BM` 128, or 64 for few rows),
//! 64 values of the inner axis at a time: the tile of `x` and the packed words of `w` go into
//! shared memory with `cp.async`, three tiles ahead; the block dequantizes the packed tile
//! (`s · q + b`, one fused multiply-add of the activation type, so each weight is rounded once
//! to that type, where the CPU keeps it in f32) into a second, double-buffered tile, and the
//! warps multiply with `mma.sync` m16n8k16 into f32 accumulators, the fragments read with
//! `ldmatrix`. Tile t + 1 is dequantized while tile t multiplies: one barrier a step.
//!
//! The same kernels take gathered rows for `gather_qmm` (`gather.rs`): rows of `x` picked by
//! `lhs_indices`, and a block's rows multiplied by one matrix of `w`, either the rows of one
//! index position (mode 1) or a run of rows sorted by matrix, from the offsets (mode 2).
//! Operands are row-major from 16-byte-aligned starts (`super::aligned`); the tiles need up to
//! 212 KiB of shared memory, so devices that give a block less keep the other kernels.
//!
//! With [`PLAIN`] in place of the width, the same kernels multiply unquantized weights of the
//! activation type (`gather_mm`, `gather_mm.rs`): their tiles go by `cp.async` straight into
//! three stage buffers of the dequantized tiles' layout.

use cudarc::driver::{DeviceRepr, LaunchConfig};

use super::super::Place;
use super::super::dtype::type_names;
use super::super::launch::symbol;
use super::{BITS, COMMON, QUANTIZED};
use crate::{DType, Result};

const TILED: &str = include_str!("../kernels/quantized_tiled.cu");

/// Outputs a block takes (`NVQT_BN`).
pub(super) const BN: usize = 256;
/// Values of the inner axis a step (`NVQT_BK`).
const BK: usize = 64;
/// Buffered tiles of `x` and packed `w` (`NVQT_STAGES`).
const STAGES: usize = 4;
/// Buffered tiles of `x` and plain `w` (`NVQT_PLAIN_STAGES`).
const PLAIN_STAGES: usize = 3;
/// Threads a block (`NVQT_THREADS`).
const THREADS: u32 = 256;
/// The most matrices of `w` mode 2 walks (`NVQT_MAX_EXPERTS`).
pub(super) const MAX_EXPERTS: usize = 1024;
/// The largest grid dimension y and z.
const GRID_YZ: usize = 65_535;
/// The width that stands for unquantized weights of the activation type (`NVQ_PLAIN`).
pub(super) const PLAIN: u32 = 16;

/// The kernels' arguments (`NvQmm` in `quantized_tiled.cu`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct TiledArgs {
    pub(super) m: i64,
    pub(super) n: i64,
    pub(super) w_batch: i64,
    pub(super) s_batch: i64,
    pub(super) xmats: i64,
    pub(super) experts: i64,
    pub(super) indices: i64,
    pub(super) slots: i64,
    pub(super) k: i32,
    pub(super) wrow: i32,
    pub(super) groups: i32,
    pub(super) gs_shift: i32,
    pub(super) wvec: i32,
    pub(super) mrows: i32,
    pub(super) mode: i32,
    /// Index positions that share one entry of lhs (0 or 1: one each; [`super::repeated`]).
    pub(super) lhs_repeat: i32,
}

// SAFETY: `TiledArgs` is `repr(C)` plain data with the field order, types and alignment of
// `NvQmm`, so its bytes are what the kernel reads as its parameter.
unsafe impl DeviceRepr for TiledArgs {}

/// How a launch's blocks find their rows (the kernel's `mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rows {
    /// One product: tiles of rows along grid y.
    Plain,
    /// The rows of each index position along grid z (tiles of them along y), each with its
    /// own matrix of `w`.
    PerIndex,
    /// Rows sorted by matrix of `w`, each matrix's run from the offsets; `slots` tiles walked
    /// along grid y.
    Sorted,
}

/// The device addresses of one launch (0 for an absent index array).
#[derive(Debug, Clone, Copy)]
pub(super) struct Operands {
    pub(super) x: u64,
    pub(super) w: u64,
    pub(super) scales: u64,
    pub(super) biases: u64,
    pub(super) y: u64,
    pub(super) lhs: u64,
    pub(super) rhs: u64,
    pub(super) offs: u64,
}

/// The module of the tiled kernels over values of `dtype` packed with `bits` bits.
fn source(dtype: DType, bits: u32) -> String {
    let (ct, tn) = type_names(dtype).expect("a float type");
    let mut s = format!("{COMMON}\n{QUANTIZED}\n{TILED}\n");
    // Plain weights are copied 16 bytes at a time.
    let widths: &[usize] = if bits == PLAIN { &[16] } else { &[4, 16] };
    for t in [0, 1] {
        for mt in [2, 4] {
            for &v in widths {
                s.push_str(&format!("NV_QMM({ct}, {tn}, {bits}, {t}, {mt}, {v})\n"));
            }
        }
    }
    s
}

/// Every module of this family, for compiling ahead of time.
#[cfg(test)]
pub(super) fn all_sources() -> Vec<(String, String)> {
    [DType::F16, DType::BF16]
        .into_iter()
        .flat_map(|d| {
            let tn = type_names(d).expect("a float type").1;
            BITS.into_iter()
                .chain([PLAIN])
                .map(move |b| (format!("quantized_tiled_{tn}_d{b}"), source(d, b)))
        })
        .collect()
}

/// Rows of the output a block takes with `mt` tiles of 16 rows a warp.
fn block_rows(mt: usize) -> usize {
    32 * mt
}

/// The shared memory of one block, in bytes (`NvqTile::SHARED`, and the offsets for
/// [`Rows::Sorted`]).
fn shared_bytes(bits: u32, transpose: bool, mt: usize, sorted_experts: usize) -> usize {
    let b = bits as usize;
    let x_stage = block_rows(mt) * (BK + 8) * 2;
    let (wq_rows, wq_stride, dq_stride) = if transpose {
        (BN, 2 * b, BK + 8)
    } else {
        (BK, 8 * b + 4, BN + 8)
    };
    let dq = wq_rows * dq_stride * 2;
    let tiles = if bits == PLAIN {
        PLAIN_STAGES * (x_stage + dq)
    } else {
        STAGES * (x_stage + wq_rows * wq_stride * 4) + 2 * dq
    };
    tiles + 4 * sorted_experts
}

/// Whether the tiled kernels take `dtype` on this device with `bits`, `transpose` and `mt`
/// tiles of 16 rows a warp: a block's shared memory (with room for the most offsets) fits.
pub(super) fn fits(place: &Place, dtype: DType, bits: u32, transpose: bool, mt: usize) -> bool {
    matches!(dtype, DType::F16 | DType::BF16)
        && (BITS.contains(&bits) || bits == PLAIN)
        && shared_bytes(bits, transpose, mt, MAX_EXPERTS)
            <= place.gpu.props.shared_per_block as usize
}

/// Whether rows of `x` with an inner axis of `k` suit the tiles: 16-byte rows, copied 8 values
/// at a time (always with `x · wᵀ`, whose `k` is a multiple of 32).
pub(super) fn inner_fits(k: usize) -> bool {
    k.is_multiple_of(8)
}

/// Row tiles of 16 a warp for products of about `rows` rows a matrix of `w`.
pub(super) fn warp_tiles(rows: usize) -> usize {
    if rows <= 64 { 2 } else { 4 }
}

/// The bytes each copy of packed words moves: 16 where every copy starts on 16 bytes (rows of
/// `w` and the tiles' pieces of them), else 4.
fn copy_width(bits: u32, transpose: bool, wrow: usize) -> usize {
    if bits == PLAIN {
        return 16;
    }
    let tile_row = if transpose { 8 } else { 32 } * bits as usize;
    if (wrow * 4).is_multiple_of(16) && tile_row.is_multiple_of(16) {
        16
    } else {
        4
    }
}

/// Grid blocks along y (and z) for `rows` rows a matrix with `mt`, for the launch `args`
/// describes: `None` when the grid would pass the device's limits.
pub(super) fn grid(rows: Rows, args: &TiledArgs, mt: usize) -> Option<(u32, u32, u32)> {
    let bx = (args.n as usize).div_ceil(BN);
    let bm = block_rows(mt);
    let (by, bz) = match rows {
        Rows::Plain => ((args.m as usize).div_ceil(bm), 1),
        Rows::PerIndex => (
            (args.mrows as usize).div_ceil(bm),
            (args.indices as usize).min(GRID_YZ),
        ),
        Rows::Sorted => ((args.slots as usize).min(GRID_YZ), 1),
    };
    (bx <= u32::MAX as usize && by <= GRID_YZ && by > 0 && bz > 0)
        .then_some((bx as u32, by as u32, bz as u32))
}

/// Queues one tiled product. `args` holds the shapes (its `mode`, `wvec` and, for
/// [`Rows::Sorted`], `slots` are filled here).
///
/// # Safety
/// `ops` are device addresses of row-major operands from 16-byte-aligned starts: `x` with
/// `xmats · mrows` (plain: `m`) rows of `k` values of `dtype`, `w` with `experts` matrices of
/// `w_batch` words (rows of `wrow` words), the scales and biases `experts` matrices of
/// `s_batch` values (rows of `groups`), `y` `m · n` values; with [`PLAIN`] weights, rows of
/// `wrow` values of `dtype` (a multiple of 8, as is the row length: `k` with `transpose`, else
/// `n`), matrices `w_batch` words apart, and no scales or biases; `lhs`/`rhs` (when not 0)
/// `indices` uint32 and `offs` (with [`Rows::Sorted`]) `experts` int32; all of them stay
/// allocated until the stream passes this work.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn launch(
    place: &Place,
    dtype: DType,
    bits: u32,
    transpose: bool,
    rows: Rows,
    mt: usize,
    ops: &Operands,
    mut args: TiledArgs,
) -> Result<()> {
    let v = copy_width(bits, transpose, args.wrow as usize);
    args.wvec = v as i32;
    args.mode = match rows {
        Rows::Plain => 0,
        Rows::PerIndex => 1,
        Rows::Sorted => 2,
    };
    if rows == Rows::Sorted {
        let bm = block_rows(mt) as i64;
        args.slots = (args.m + bm - 1) / bm + args.experts;
    }
    let Some(grid) = grid(rows, &args, mt) else {
        return Err(crate::Error::Device(
            "cuda: quantized tiles: the grid passes the device's limits".into(),
        ));
    };
    let sorted = if rows == Rows::Sorted {
        args.experts as usize
    } else {
        0
    };
    let shared = shared_bytes(bits, transpose, mt, sorted);
    let tn = type_names(dtype).expect("a float type").1;
    let t = u32::from(transpose);
    let f = place.gpu.kernel_in(
        "quantized_tiled",
        Some(dtype),
        bits,
        symbol!("qmm_{tn}_b{bits}_t{t}_m{mt}_v{v}")?,
        || source(dtype, bits),
    )?;
    f.allow_shared(place.gpu.props.shared_per_block)?;
    let cfg = LaunchConfig {
        grid_dim: grid,
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: shared as u32,
    };
    let params: [&dyn DeviceRepr; 9] = [
        &ops.x,
        &ops.w,
        &ops.scales,
        &ops.biases,
        &ops.y,
        &ops.lhs,
        &ops.rhs,
        &ops.offs,
        &args,
    ];
    // SAFETY: the caller's promises on `ops` and `args`; the kernel copies only rows below
    // `m` (gathered: through indices clamped below `xmats`) and columns of `x` below `k`, words
    // inside each row of `w` (the copy width divides the rows' and tiles' bytes) of a matrix
    // below `experts`, scales of packs inside the matrix, writes outputs below `m` and `n`, and
    // its shared memory is `shared` bytes, allowed above; the arguments match `qmm_*`.
    unsafe { f.launch(&place.stream, cfg, &params) }
}
