//! The quantized product `x · wᵀ` for up to 8 rows of `x` (decoding) on the tensor cores
//! (`kernels/quantized_mv_mma.cu`, `mma.sync`): f16 and bf16, 4-bit weights, groups of 32, 64
//! or 128, on devices of compute capability 8.0 and later. Everything else keeps the
//! CUDA-core matrix-vector kernels (`qmv_*` in `quantized.cu`).
//!
//! Each lane turns its 16-byte pack of a row of `w` into pairs of weights with a few integer
//! operations and two of the activation type a pair (each weight rounded once to that type,
//! as in the tiled kernels), and the tensor cores take the products, the rows of `x` as their
//! 8 columns; `x`'s fragments take the pairs' order, so no weight moves between lanes. Sums
//! stay in f32, the slices of the inner axis meet in shared memory in a fixed order. The
//! kernel's header says more. (A form that took each group's products over the 4-bit values
//! and applied its scale and bias to the f32 sums, each weight exact in fewer instructions,
//! was slower on an H100: `qmv_14336x4096` at 2,197-2,222 GB/s against 2,343-2,368 here,
//! `moe_qmv_64` at 83.4-83.6 us against 79.1-79.9; a form that kept 16-byte loads and put each
//! group in its own columns of the products, a third fewer instructions, read it at 2,224-2,249
//! against 2,335-2,363: the loads in flight bind, not the instructions. A form fed by Hopper's
//! tensor copies, a producer warp streaming `w`, scales and biases into an 8-stage shared ring
//! for eight multiplying warps, lost too: 17.0-18.5 µs against 13.9-14.0 here, its multiplying
//! warps waiting on their own chains; commit ac672c5 holds it.)
//!
//! `gather_qmm`'s few-row products take the same sums through `gqmv_mma_*`
//! (`kernels/quantized_gather.cu`, launched by `gather.rs`): a block a chunk of up to 8 rows
//! of the product that share one matrix of `w`.
//!
//! Knobs, for tuning and comparison (read once):
//! - `NUVEC_QMV_MMA=0` keeps these products (and the gathered ones) on the CUDA-core kernels,
//!   for comparison: on an H100 this kernel read the weights of `qmv_14336x4096` at 2,324
//!   GB/s, the CUDA-core one at 1,792;
//! - `NUVEC_QMV_MMA_SHAPE=R,S` picks the instantiated tiles of 16 rows a warp (`R`) and slices
//!   of the inner axis a block of 8 warps (`S`) among [`SHAPES`] (by default `2,4`), and
//!   `NUVEC_GQMV_MMA_SHAPE` the gathered form's (by default [`gathered_shape`]'s choice);
//! - `NUVEC_KERNEL_DEFINES` sets the kernel's `NVQM_UNROLL`, `NVQM_MINB` and `NVQM_AHEAD`
//!   (each warp asks L1 for its rows' packs that many chunks ahead of its loads; 0, off, by
//!   default: on an H100 it slowed `qmv_14336x4096` at every distance, 13.9-14.1 µs against
//!   14.4-16.1, nineteenth session; kept for the H200, which the kernel's header says may want
//!   it).

use std::sync::OnceLock;

use cudarc::driver::{DeviceRepr, LaunchConfig};

use super::super::Place;
use super::super::dtype::type_names;
use super::super::launch::symbol;
use super::{COMMON, aligned_operands, group_shift};
use crate::array::ArrayData;
use crate::primitive::OutputSpec;
use crate::{DType, Result};

/// The kernels' source, without the helpers it needs first (`common.cuh`); the gathered
/// module includes it too.
pub(super) const SOURCE: &str = include_str!("../kernels/quantized_mv_mma.cu");

/// Threads a block (`NVQM_WARPS` warps), of both forms.
pub(super) const THREADS: u32 = 256;
/// Rows of `x` a block takes (the products' 8 columns; the gathered form's chunks).
pub(super) const X_ROWS: usize = 8;
/// The most rows of `x` sent here (one block's columns): beyond, the tiled kernels read each
/// weight fewer times.
const MAX_ROWS: usize = X_ROWS;
/// The instantiated (tiles of 16 rows of `w` a warp, slices of the inner axis a block) pairs:
/// the plain form's default first, the gathered form's ([`GATHERED`], [`GATHERED_FEW`]) among
/// them.
const SHAPES: [(usize, usize); 4] = [(2, 4), (2, 2), (1, 4), (2, 8)];
/// The largest grid dimension z.
const GRID_Z: usize = 65_535;

/// The kernel's arguments (`NvQmvMma` in `quantized_mv_mma.cu`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct MmaArgs {
    n: i64,
    m: i64,
    packs: i32,
    groups: i32,
    gs_shift: i32,
    /// 0x000F000F: the kernel's mask, passed so that it stays in a register.
    nibbles: u32,
}

// SAFETY: `MmaArgs` is `repr(C)` plain data with the field order, types and alignment of
// `NvQmvMma`, so its bytes are what the kernel reads as its parameter.
unsafe impl DeviceRepr for MmaArgs {}

/// Whether the kernels are on (the default; `NUVEC_QMV_MMA=0` turns them off).
pub(super) fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("NUVEC_QMV_MMA").is_none_or(|v| v != "0"))
}

/// The (tiles a warp, slices a block) pair named by the variable `var`, where it is one of
/// [`SHAPES`].
fn shape_from(var: &str) -> Option<(usize, usize)> {
    let asked = std::env::var(var).ok().and_then(|v| {
        let (r, s) = v.trim().split_once(',')?;
        Some((r.trim().parse().ok()?, s.trim().parse().ok()?))
    });
    asked.filter(|a| SHAPES.contains(a))
}

/// The plain product's (tiles a warp, slices a block): `NUVEC_QMV_MMA_SHAPE`, else the first
/// of [`SHAPES`].
pub(super) fn shape() -> (usize, usize) {
    static SHAPE: OnceLock<(usize, usize)> = OnceLock::new();
    *SHAPE.get_or_init(|| shape_from("NUVEC_QMV_MMA_SHAPE").unwrap_or(SHAPES[0]))
}

/// The gathered form's tiles where its blocks fill the device, and where they would not.
const GATHERED: (usize, usize) = (2, 2);
const GATHERED_FEW: (usize, usize) = (2, 8);

/// The gathered product's (tiles a warp, slices a block) on a device of `sms`
/// multiprocessors, where `blocks(shape)` counts the launch's blocks at a shape:
/// `NUVEC_GQMV_MMA_SHAPE` where it names one of [`SHAPES`]; else [`GATHERED`], unless its
/// blocks would not give every multiprocessor two (the registers' bound), then
/// [`GATHERED_FEW`] (four times the blocks, each warp a quarter of the inner axis).
///
/// On an H100: `moe_qmv_64` (about 1,150 blocks at (2, 2)) took 69.7-71.1 us at (2, 2), 78.0-78.5
/// at (2, 4), 83.5-84.5 at (2, 1), where `qmv_14336x4096` (the plain form) takes 13.8-13.9 at
/// (2, 4) and 15.1-15.3 at (2, 2): the experts' inner axis is half as long, and shorter slices
/// left each warp too few chunks to keep its loads in flight. `moe_qmv_1` (one token, 8
/// experts: 48 blocks at (2, 2)) spent 15.0 us in its product under ncu at (2, 2), 11.2 at (2,
/// 4), 11.0 at (1, 4) and 10.5 at (2, 8).
pub(super) fn gathered_shape(
    sms: usize,
    blocks: impl Fn((usize, usize)) -> usize,
) -> (usize, usize) {
    static ASKED: OnceLock<Option<(usize, usize)>> = OnceLock::new();
    let asked = *ASKED.get_or_init(|| shape_from("NUVEC_GQMV_MMA_SHAPE"));
    asked.unwrap_or(if blocks(GATHERED) < 2 * sms {
        GATHERED_FEW
    } else {
        GATHERED
    })
}

/// The module of the kernels over `dtype` (f16 or bf16): every instantiated shape.
fn source(dtype: DType) -> String {
    let (ct, tn) = type_names(dtype).expect("a float type");
    let mut s = format!("{COMMON}\n{SOURCE}\n");
    for (r, sl) in SHAPES {
        s.push_str(&format!("NV_QMV_MMA({ct}, {tn}, {r}, {sl})\n"));
    }
    s
}

/// Rows of `w` a block of `shape`'s takes.
pub(super) fn block_rows((tiles, slices): (usize, usize)) -> usize {
    16 * tiles * (THREADS as usize / 32 / slices)
}

/// Whether the tensor-core kernels take products over `dtype` packed with `bits` bits in
/// groups of `group_size`, on this device.
pub(super) fn takes(place: &Place, dtype: DType, bits: u32, group_size: usize) -> bool {
    enabled()
        && place.gpu.props.arch.major >= 8
        && matches!(dtype, DType::F16 | DType::BF16)
        && bits == 4
        && matches!(group_size, 32 | 64 | 128)
}

/// The gathered form's kernels (`gqmv_mma_*` in `quantized_gather.cu`) for the gathered
/// module over `dtype`: the macro lines, every instantiated shape.
pub(super) fn gathered_instances(dtype: DType) -> String {
    let (ct, tn) = type_names(dtype).expect("a float type");
    SHAPES
        .iter()
        .map(|(r, sl)| format!("NV_GQMV_MMA({ct}, {tn}, {r}, {sl})\n"))
        .collect()
}

/// The kernels' sources, for compiling ahead of time (tests).
#[cfg(test)]
pub(super) fn all_sources() -> Vec<(String, String)> {
    [DType::F16, DType::BF16]
        .into_iter()
        .map(|d| {
            let tn = type_names(d).expect("a float type").1;
            (format!("quantized_mv_mma_{tn}"), source(d))
        })
        .collect()
}

/// `quantized_matmul` of `m` rows on the tensor cores, or `None` where the kernel does not
/// take it (the caller runs the others): f16 or bf16, `x · wᵀ` with 4 bits and groups of 32,
/// 64 or 128, at most [`MAX_ROWS`] rows, compute capability 8.0 or later.
pub(super) fn matmul(
    place: &Place,
    inputs: &[ArrayData],
    (group_size, bits, transpose): (usize, u32, bool),
    (m, n, k): (usize, usize, usize),
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    let (shape_out, dtype) = (&outputs[0].0, outputs[0].1);
    let covered = takes(place, dtype, bits, group_size) && transpose && (1..=MAX_ROWS).contains(&m);
    let w = &inputs[1];
    // k is 8 words a row of w (a multiple of 32: rows of w and x start on 16 bytes).
    if !covered
        || k > i32::MAX as usize
        || w.layout.shape[1] * 8 != k
        || !k.is_multiple_of(group_size)
    {
        return Ok(None);
    }
    let (tiles, slices) = shape();
    let (gx, gz) = (n.div_ceil(block_rows((tiles, slices))), m.div_ceil(X_ROWS));
    if gx > u32::MAX as usize || gz > GRID_Z {
        return Ok(None);
    }
    let (_held, [x, w_at, scales, biases]) = aligned_operands(place, inputs)?;
    let (out, y) = place.output(dtype, shape_out)?;
    let args = MmaArgs {
        n: n as i64,
        m: m as i64,
        packs: (k / 32) as i32,
        groups: (k / group_size) as i32,
        gs_shift: group_shift(group_size),
        nibbles: 0x000F_000F,
    };
    let tn = type_names(dtype).expect("a float type").1;
    let f = place.gpu.kernel_in(
        "quantized_mv_mma",
        Some(dtype),
        0,
        symbol!("qmv_mma_{tn}_r{tiles}_s{slices}")?,
        || source(dtype),
    )?;
    let cfg = LaunchConfig {
        grid_dim: (gx as u32, 1, gz as u32),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let params: [&dyn DeviceRepr; 6] = [&x, &w_at, &scales, &biases, &y, &args];
    // SAFETY: `x` holds `m · k` values of `dtype`, `w_at` `n` rows of `k / 8` words, the
    // scales and biases `n` rows of `k / group_size` values, all row-major from 16-byte-aligned
    // starts (`aligned`; the primitive checked the shapes); `y` is a fresh block of `m · n`
    // values. The kernel reads rows of w clamped below `n`, packs clamped below `k / 32`, rows
    // of x below `m`, and writes outputs below `m` and `n` only; its shared memory is static;
    // the arguments match `qmv_mma_*`. The arrays are held until the work is queued and the
    // allocator keeps their blocks for this stream.
    unsafe { f.launch(&place.stream, cfg, &params)? };
    Ok(Some(vec![out]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The gathered form's shapes are instantiated, and the one that gives more blocks is
    /// taken where the other's would not fill the device twice over (unless the environment
    /// names a shape).
    #[test]
    fn gathered_shape_fills_the_device() {
        assert!(SHAPES.contains(&GATHERED) && SHAPES.contains(&GATHERED_FEW));
        assert!(block_rows(GATHERED_FEW) < block_rows(GATHERED));
        if std::env::var_os("NUVEC_GQMV_MMA_SHAPE").is_some() {
            return;
        }
        // One token through 8 experts of 768 rows: 8 chunks.
        let blocks = |shape| 8 * 768usize.div_ceil(block_rows(shape));
        assert_eq!(gathered_shape(132, blocks), GATHERED_FEW);
        // 64 tokens: about 190 chunks.
        let blocks = |shape| 190 * 768usize.div_ceil(block_rows(shape));
        assert_eq!(gathered_shape(132, blocks), GATHERED);
    }

    /// Every module instantiates, at every shape, the kernels the launches name:
    /// `qmv_mma_<type>_r<R>_s<S>` here, `gqmv_mma_*` in the gathered module.
    #[test]
    fn sources_instantiate_the_launched_kernels() {
        assert!(SOURCE.contains("qmv_mma_##TN##_r##R##_s##S("));
        for dtype in [DType::F16, DType::BF16] {
            let (ct, tn) = type_names(dtype).expect("a float type");
            let (plain, gathered) = (source(dtype), gathered_instances(dtype));
            for (r, s) in SHAPES {
                let line = format!("NV_QMV_MMA({ct}, {tn}, {r}, {s})\n");
                assert!(plain.contains(&line), "{line}");
                let line = format!("NV_GQMV_MMA({ct}, {tn}, {r}, {s})\n");
                assert!(gathered.contains(&line), "{line}");
            }
        }
    }
}
