//! `gather_qmm` ([`GatherQmm`]) on the GPU: one launch for every index position, whichever
//! matrix of `w` each picks.
//!
//! - Few rows a matrix of `w`, `x · wᵀ` (decoding a mixture of experts): the gathered
//!   matrix-vector kernel (`kernels/quantized_gather.cu`, the sums of `quantized.cu`'s product
//!   kernel), each block reading its matrix's index to find the weights. With sorted indices
//!   (`offsets` given) a block takes up to 8 rows of one matrix, so each matrix's weights are
//!   read once for every 8 of its rows; a one-block launch first writes each chunk's matrix
//!   and rows to a table, so a block finds its chunk with one load (each block used to walk
//!   the offsets itself, up to a step a matrix, at 126 registers; not yet timed on the H200).
//!   Unsorted, each index position's rows go alone (its weights are read once for each
//!   position that picks them), unless there are enough of them that grouping pays
//!   ([`kernel_groups`]): a one-block launch then sorts the positions by matrix (the order and
//!   the offsets) and writes the table, and the product runs as sorted, reading each row of
//!   `x` and writing each output through that order (the graph's `argsort` and `take` nodes
//!   took as long as the product at 64 tokens). The tensor-core form needs no such launch for
//!   up to [`SCAN_POSITIONS`] positions: each of its blocks finds its matrix's positions. f32
//!   takes this kernel for any number of rows. With 4 bits, f16 and bf16 take its tensor-core
//!   form instead (`mv_mma.rs`, unless `NUVEC_QMV_MMA=0`: chunks of 8 rows as the products'
//!   columns, blocks of 64 rows of `w` by default).
//! - Many rows a matrix (prefill), and every `x · w`: the tiled tensor-core kernel (`tiled.rs`),
//!   f16 and bf16, over each matrix's run of sorted rows (from the offsets), else over each
//!   index position's rows.
//!
//! What runs the fallback graph inside the node: `x · w` with an inner axis not a multiple of
//! 8, and on devices whose blocks cannot have the tiled kernel's shared memory (`x · w` in f32
//! is not taken: its fallback graph is recorded instead). `gather_mm` (unquantized) runs the
//! tiled kernel with plain weights (`gather_mm.rs`).

use cudarc::driver::{DeviceRepr, LaunchConfig};

use super::super::Place;
use super::super::dtype::type_names;
use super::super::fast::{CudaKernel, nested};
use super::super::launch::symbol;
use super::mv_mma;
use super::tiled::{self, Operands, Rows, TiledArgs};
use super::{
    BITS, COMMON, QUANTIZED, ROWS_AT_ONCE, WARPS, aligned, aligned_operands, group_shift, repeated,
    rows_a_warp,
};
use crate::array::ArrayData;
use crate::fast::Arg;
use crate::fast::gather::{GatherQmm, kernel_groups};
use crate::primitive::OutputSpec;
use crate::{DType, Result};

const GATHER: &str = include_str!("../kernels/quantized_gather.cu");

/// The most matrices of `w` whose offsets the sorted gathered kernel walks
/// (`NVQG_MAX_EXPERTS`, and the tiled kernel's [`tiled::MAX_EXPERTS`]).
const MAX_EXPERTS: usize = 1024;
/// The most index positions the tensor-core product groups by matrix in each of its blocks
/// (`NVQG_SCAN_MAX`), with no launch before it; more are grouped by a launch first.
const SCAN_POSITIONS: usize = 1024;
/// The largest grid dimension z.
const GRID_Z: usize = 65_535;
/// Rows a matrix of `w` (on average) from which sorted rows take the tiled kernel.
const TILED_ROWS: usize = 16;

/// Whether the tensor-core product's blocks group the positions themselves (the default;
/// `NUVEC_GQMV_BY_MATRIX=0` groups them by a launch first, for comparison).
fn groups_by_matrix() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("NUVEC_GQMV_BY_MATRIX").is_none_or(|v| v != "0"))
}

/// The gathered matrix-vector kernel's arguments (`NvGqmv` in `quantized_gather.cu`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct GatherArgs {
    n: i64,
    w_batch: i64,
    s_batch: i64,
    xmats: i64,
    experts: i64,
    indices: i64,
    chunks: i64,
    packs: i32,
    groups: i32,
    gs_shift: i32,
    mrows: i32,
    sorted: i32,
    /// 0x000F000F, the tensor-core form's mask (`mv_mma.rs`).
    nibbles: u32,
    /// Index positions that share one entry of lhs (1: one each; [`super::repeated`]).
    lhs_repeat: i32,
    /// Blocks a matrix of `w` where the product finds each matrix's positions itself (0:
    /// chunks through the table or by position).
    per_matrix: i32,
}

// SAFETY: `GatherArgs` is `repr(C)` plain data with the field order, types and alignment of
// `NvGqmv`, so its bytes are what the kernel reads as its parameter.
unsafe impl DeviceRepr for GatherArgs {}

/// The module of the gathered matrix-vector kernels over `dtype` packed with `bits` bits
/// (with the tensor-core form's for 4 bits in f16 and bf16).
fn source(dtype: DType, bits: u32) -> String {
    let (ct, tn) = type_names(dtype).expect("a float type");
    let mma = bits == 4 && matches!(dtype, DType::F16 | DType::BF16);
    let mut s = format!("{COMMON}\n{QUANTIZED}\n");
    if mma {
        s.push_str(mv_mma::SOURCE);
        s.push('\n');
    }
    s.push_str(GATHER);
    s.push('\n');
    for m in 1..=ROWS_AT_ONCE {
        s.push_str(&format!("NV_GQMV({ct}, {tn}, {bits}, {m})\n"));
    }
    if mma {
        s.push_str(&mv_mma::gathered_instances(dtype));
    }
    s
}

/// Every module of this family, for compiling ahead of time.
#[cfg(test)]
pub(super) fn all_sources() -> Vec<(String, String)> {
    [DType::F16, DType::BF16, DType::F32]
        .into_iter()
        .flat_map(|d| {
            let tn = type_names(d).expect("a float type").1;
            BITS.into_iter()
                .map(move |b| (format!("quantized_gather_{tn}_d{b}"), source(d, b)))
        })
        .collect()
}

/// Threads a block of the gathered matrix-vector kernels: the tensor-core form's 8 warps
/// (`NVQM_WARPS`, which `mv_mma::block_rows` counts on), the other's and the sorted chunks'
/// table's 4 (`NVQ_WARPS`).
fn block_threads(mma: bool) -> u32 {
    if mma {
        mv_mma::THREADS
    } else {
        (WARPS * 32) as u32
    }
}

/// The sizes of one gathered product.
#[derive(Debug, Clone, Copy)]
pub(super) struct Dims {
    /// Rows of each matrix of `x`, and its inner axis.
    pub(super) mrows: usize,
    pub(super) k: usize,
    /// Matrices of `x` and of `w`.
    pub(super) xmats: usize,
    pub(super) experts: usize,
    /// Rows and words of each matrix of `w`, and its groups a row.
    pub(super) wrows: usize,
    pub(super) wrow: usize,
    pub(super) groups: usize,
    /// Outputs a row, and index positions.
    pub(super) n: usize,
    pub(super) indices: usize,
}

impl GatherQmm {
    /// The sizes of inputs of these shapes, or `None` where no kernel takes them.
    fn dims(&self, shapes: &[&[usize]]) -> Option<Dims> {
        let indices = shapes[4].iter().product();
        self.dims_of(shapes[0], shapes[1], shapes[2], indices)
    }

    /// The sizes of a product of `x`, `w` and scales of these shapes over `indices` index
    /// positions, or `None` where no kernel takes them.
    pub(super) fn dims_of(
        &self,
        x: &[usize],
        w: &[usize],
        s: &[usize],
        indices: usize,
    ) -> Option<Dims> {
        let (xn, wn) = (x.len(), w.len());
        if xn < 2 || wn < 2 || s.len() != wn || !BITS.contains(&self.bits) {
            return None;
        }
        let (mrows, k) = (x[xn - 2], x[xn - 1]);
        let (wrows, wrow) = (w[wn - 2], w[wn - 1]);
        let groups = s[wn - 1];
        let unpacked = groups * self.group_size;
        let n = if self.transpose { wrows } else { unpacked };
        let xmats: usize = x[..xn - 2].iter().product();
        let experts: usize = w[..wn - 2].iter().product();
        let big = |v: usize| v > i32::MAX as usize;
        if [mrows, k, n, xmats, experts, indices, groups].contains(&0)
            || big(k)
            || big(wrow)
            || big(mrows)
            || big(n)
        {
            return None;
        }
        Some(Dims {
            mrows,
            k,
            xmats,
            experts,
            wrows,
            wrow,
            groups,
            n,
            indices,
        })
    }
}

impl CudaKernel for GatherQmm {
    /// `x`, scales and biases of one kernel type (f32 only with `transpose`), packed `w`,
    /// uint32 indices and int32 offsets, nothing empty.
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        if !(6..=7).contains(&inputs.len()) {
            return false;
        }
        let dtype = inputs[0].dtype;
        let types = inputs[0].kernel_float()
            && (self.transpose || dtype != DType::F32)
            && inputs[2].dtype == dtype
            && inputs[3].dtype == dtype
            && inputs[1].dtype == DType::U32
            && inputs[4].dtype == DType::U32
            && inputs[5].dtype == DType::U32
            && inputs
                .get(6)
                .is_none_or(|o| o.dtype == DType::I32 && o.shape.len() == 1);
        let shapes: Vec<&[usize]> = inputs.iter().map(|a| a.shape).collect();
        types && matches!(self.group_size, 32 | 64 | 128) && self.dims(&shapes).is_some()
    }

    /// Only kernels, but for `x · w` where the device's blocks cannot have the tiled kernel's
    /// shared memory, which runs the fallback graph.
    fn batchable(&self, _inputs: &[Arg<'_>]) -> bool {
        self.transpose
    }

    fn eval(
        &self,
        place: &Place,
        inputs: &mut [ArrayData],
        outputs: &[OutputSpec],
    ) -> Result<Vec<ArrayData>> {
        let shapes: Vec<&[usize]> = inputs.iter().map(|d| d.layout.shape.as_slice()).collect();
        let Some(d) = self.dims(&shapes) else {
            return nested(place, self, inputs, outputs);
        };
        let indices = Some((&inputs[4], &inputs[5]));
        let offsets = inputs.get(6);
        match product(place, self, &d, &inputs[..4], indices, offsets, outputs)? {
            Some(out) => Ok(vec![out]),
            None => nested(place, self, inputs, outputs),
        }
    }
}

/// The gathered product of `op` over `(x, w, scales, biases)` of sizes `d`: index position
/// i multiplies matrix `lhs[i]` of `x` by matrix `rhs[i]` of `w` (matrix i of each when
/// `indices` is `None`), rows sorted by matrix when `offsets` are given. `Ok(None)` where no
/// kernel takes it (`x · w` beyond the tiled kernel's reach).
pub(super) fn product(
    place: &Place,
    op: &GatherQmm,
    d: &Dims,
    operands: &[ArrayData],
    indices: Option<(&ArrayData, &ArrayData)>,
    offsets: Option<&ArrayData>,
    outputs: &[OutputSpec],
) -> Result<Option<ArrayData>> {
    let dtype = operands[0].dtype();
    let bits = op.bits;
    let sorted = offsets.is_some() && d.experts <= MAX_EXPERTS;
    let rows = d.indices * d.mrows;
    // Rows a matrix of `w` on average, over the matrices the indices can pick.
    let per_matrix = rows.div_ceil(d.experts.min(d.indices));
    let tiled_ok = matches!(dtype, DType::F16 | DType::BF16) && tiled::inner_fits(d.k);
    let mt = tiled::warp_tiles(if sorted { per_matrix } else { d.mrows });
    let mt = [mt, 2]
        .into_iter()
        .find(|&mt| tiled::fits(place, dtype, bits, op.transpose, mt));
    let tiles = match (tiled_ok, mt) {
        (true, Some(mt)) => {
            let many = if sorted {
                per_matrix >= TILED_ROWS
            } else {
                d.mrows > ROWS_AT_ONCE
            };
            (many || !op.transpose).then_some(mt)
        }
        _ => None,
    };
    if tiles.is_none() && !op.transpose {
        return Ok(None);
    }
    let (_held, [x, w, scales, biases]) = aligned_operands(place, operands)?;
    let (lhs, rhs, lhs_repeat) = match indices {
        Some((l, r)) => {
            let (l, at, repeat) = repeated(place, l)?;
            (Some((l, at)), Some(aligned(place, r)?), repeat)
        }
        None => (None, None, 1),
    };
    let offsets = match (sorted, offsets) {
        (true, Some(o)) => Some(aligned(place, o)?),
        _ => None,
    };
    let at = |a: &Option<(ArrayData, u64)>| a.as_ref().map_or(0, |a| a.1);
    let (out, y) = place.output(dtype, &outputs[0].0)?;
    let ops = Operands {
        x,
        w,
        scales,
        biases,
        y,
        lhs: at(&lhs),
        rhs: at(&rhs),
        offs: at(&offsets),
    };
    match tiles {
        Some(mt) => {
            let args = TiledArgs {
                m: rows as i64,
                n: d.n as i64,
                w_batch: (d.wrows * d.wrow) as i64,
                s_batch: (d.wrows * d.groups) as i64,
                xmats: d.xmats as i64,
                experts: d.experts as i64,
                indices: d.indices as i64,
                k: d.k as i32,
                wrow: d.wrow as i32,
                groups: d.groups as i32,
                gs_shift: group_shift(op.group_size),
                mrows: d.mrows as i32,
                lhs_repeat,
                ..Default::default()
            };
            let how = if sorted { Rows::Sorted } else { Rows::PerIndex };
            // SAFETY: `x` holds `xmats · mrows` rows of `k` values, `w` `experts` matrices of
            // `wrows` rows of `wrow` words, the scales and biases `experts` matrices of
            // `wrows · groups` values, the indices (when given) `indices` uint32 (lhs
            // `indices / lhs_repeat`, the kernel reading entry `i / lhs_repeat` for position
            // i: `repeated`) and the offsets `experts` int32 (when sorted), all row-major from
            // 16-byte-aligned starts (`aligned`; the node's specs checked the shapes); `y` is a
            // fresh block of `indices · mrows · n` values.
            unsafe { tiled::launch(place, dtype, bits, op.transpose, how, mt, &ops, args)? };
        }
        None => {
            // Unsorted positions the graph left for this kernel to group (`kernel_groups`).
            let group = !sorted
                && indices.is_some()
                && op.transpose
                && kernel_groups(d.indices, d.mrows, d.experts);
            gathered_rows(
                place,
                op,
                d,
                Order { sorted, group },
                &ops,
                lhs_repeat,
                dtype,
            )?
        }
    }
    Ok(Some(out))
}

/// How the gathered kernel finds its rows: `sorted`, by the offsets given; `group`, unsorted
/// positions sorted by matrix first on the device.
#[derive(Debug, Clone, Copy)]
struct Order {
    sorted: bool,
    group: bool,
}

/// The gathered matrix-vector kernel over every index position (`x · wᵀ`).
fn gathered_rows(
    place: &Place,
    op: &GatherQmm,
    d: &Dims,
    order: Order,
    ops: &Operands,
    lhs_repeat: i32,
    dtype: DType,
) -> Result<()> {
    let rows = d.indices * d.mrows;
    // The tensor-core form takes chunks of 8 rows (its products' columns) and blocks of
    // `block_rows` rows of w; the other a warp's few rows of w for chunks of up to 8.
    let takes_mma = mv_mma::takes(place, dtype, op.bits, op.group_size);
    // Grouped positions, few enough, are found by each block of the tensor-core form for its
    // matrix (blocks enough a matrix for its average rows, in chunks of 8); the others run as
    // sorted ones, through the order a grouping launch writes first.
    let by_matrix = takes_mma && order.group && d.indices <= SCAN_POSITIONS && groups_by_matrix();
    let per_matrix = if by_matrix {
        rows.div_ceil(mv_mma::X_ROWS * d.experts).max(1)
    } else {
        0
    };
    let grouping = order.group && !by_matrix;
    let sorted = order.sorted || grouping;
    // Rows of the product a block takes: an index position's (up to 8), or about a matrix's
    // share of the sorted rows.
    let at_once = if takes_mma {
        mv_mma::X_ROWS
    } else if sorted {
        rows.div_ceil(d.experts.min(d.indices))
    } else {
        d.mrows
    }
    .clamp(1, ROWS_AT_ONCE);
    let chunks = if by_matrix {
        d.experts * per_matrix
    } else if sorted {
        rows.div_ceil(at_once) + d.experts
    } else {
        d.indices * d.mrows.div_ceil(at_once)
    };
    let mma = takes_mma.then(|| {
        mv_mma::gathered_shape(place.gpu.props.sms as usize, |shape| {
            chunks * d.n.div_ceil(mv_mma::block_rows(shape))
        })
    });
    let bx = match mma {
        Some(shape) => d.n.div_ceil(mv_mma::block_rows(shape)),
        None => d.n.div_ceil(WARPS * rows_a_warp(at_once)),
    };
    let args = GatherArgs {
        n: d.n as i64,
        w_batch: (d.wrows * d.wrow) as i64,
        s_batch: (d.wrows * d.groups) as i64,
        xmats: d.xmats as i64,
        experts: d.experts as i64,
        indices: d.indices as i64,
        chunks: chunks as i64,
        packs: (d.k / 32) as i32,
        groups: d.groups as i32,
        gs_shift: group_shift(op.group_size),
        mrows: d.mrows as i32,
        sorted: i32::from(sorted),
        nibbles: 0x000F_000F,
        lhs_repeat,
        per_matrix: per_matrix as i32,
    };
    let bits = op.bits;
    let tn = type_names(dtype).expect("a float type").1;
    let kernel = |name| {
        place
            .gpu
            .kernel_in("quantized_gather", Some(dtype), bits, name, || {
                source(dtype, bits)
            })
    };
    let table_block = (block_threads(false), 1, 1);
    let block = (block_threads(mma.is_some()), 1, 1);
    // Grouped: the positions' order (uint32 each) and the matrices' offsets (int32 each),
    // written by the grouping launch with the table.
    let grouping = if grouping {
        let order = place.gpu.alloc.alloc(d.indices * 4, place.stream_id)?;
        let offs = place.gpu.alloc.alloc(d.experts * 4, place.stream_id)?;
        Some((order, offs))
    } else {
        None
    };
    // Sorted: every chunk's matrix and rows, for the product's blocks to read (three int64 a
    // chunk), back to the stream's pool after the launches queued on it.
    let table = if let Some((order, offs)) = &grouping {
        let table = place.gpu.alloc.alloc(chunks * 3 * 8, place.stream_id)?;
        let (rhs, offs, order, ptr) = (ops.rhs, offs.ptr(), order.ptr(), table.ptr());
        let f = kernel(symbol!("gqmv_group_m{at_once}")?)?;
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: table_block,
            shared_mem_bytes: 0,
        };
        let params: [&dyn DeviceRepr; 5] = [&rhs, &offs, &order, &ptr, &args];
        // SAFETY: `rhs` holds `indices` uint32 (at most the kernel's NVQG_GROUP_MAX, as
        // `kernel_groups` checked; `experts` at most MAX_EXPERTS, its shared arrays), `offs`
        // and `order` fresh blocks of `experts` int32 and `indices` uint32, `ptr` of `chunks`
        // entries of three int64; the arguments match `gqmv_group_*`.
        unsafe { f.launch(&place.stream, cfg, &params) }?;
        Some(table)
    } else if sorted {
        let table = place.gpu.alloc.alloc(chunks * 3 * 8, place.stream_id)?;
        let (offs, ptr) = (ops.offs, table.ptr());
        let f = kernel(symbol!("gqmv_table_m{at_once}")?)?;
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: table_block,
            shared_mem_bytes: 0,
        };
        let params: [&dyn DeviceRepr; 3] = [&offs, &ptr, &args];
        // SAFETY: `offs` holds `experts` int32 (at most `MAX_EXPERTS`, the kernel's shared
        // arrays) from a 16-byte-aligned start, and `ptr` a fresh block of `chunks` entries
        // of three int64, each written by one thread; the arguments match `gqmv_table_*`.
        unsafe { f.launch(&place.stream, cfg, &params) }?;
        Some(table)
    } else {
        None
    };
    let table_ptr = table.as_ref().map_or(0, |t| t.ptr());
    let order_ptr = grouping.as_ref().map_or(0, |(o, _)| o.ptr());
    let f = match mma {
        Some((r, sl)) if by_matrix => kernel(symbol!("gqmv_mmam_{tn}_r{r}_s{sl}")?)?,
        Some((r, sl)) => kernel(symbol!("gqmv_mma_{tn}_r{r}_s{sl}")?)?,
        None => kernel(symbol!("gqmv_{tn}_b{bits}_m{at_once}")?)?,
    };
    let cfg = LaunchConfig {
        grid_dim: (bx as u32, 1, chunks.min(GRID_Z) as u32),
        block_dim: block,
        shared_mem_bytes: 0,
    };
    let operands: [&dyn DeviceRepr; 7] = [
        &ops.x,
        &ops.w,
        &ops.scales,
        &ops.biases,
        &ops.y,
        &ops.lhs,
        &ops.rhs,
    ];
    let mut params = operands.to_vec();
    if !by_matrix {
        params.extend([&table_ptr as &dyn DeviceRepr, &order_ptr]);
    }
    params.push(&args);
    // SAFETY: as for the tiled launch in `eval` (the same operands, `k` a multiple of 32 so
    // rows of `x` start on 16 bytes); rows of `w` are clamped below `n`, rows of `x` found
    // through indices clamped below `xmats`, matrices of `w` below `experts`, and outputs are
    // written below `indices · mrows` rows and `n` columns, the sorted chunks' from the table
    // written just before on this stream (matrices below `experts`, rows within
    // `indices · mrows`), grouped rows through the order written with it (a permutation of
    // the positions), by matrix through the positions each block finds (below `indices`, at
    // most `SCAN_POSITIONS`, its shared list; matrices `z / per_matrix` below `experts` for
    // `z` below `chunks`); `n` fits the grid's x (`i32::MAX` at most, checked by `dims`); the
    // arguments match `gqmv_*` (`gqmv_mmam_*` takes neither table nor order).
    let launched = unsafe { f.launch(&place.stream, cfg, &params) };
    drop(table);
    drop(grouping);
    launched
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fast::gather::{KERNEL_GROUP_BATCHES, KERNEL_GROUP_POSITIONS};

    /// The number `#define NAME n` gives in `source`.
    fn defined(source: &str, name: &str) -> u32 {
        let line = source
            .lines()
            .find(|l| l.starts_with(&format!("#define {name} ")))
            .unwrap_or_else(|| panic!("no #define {name}"));
        line.split_whitespace().nth(2).unwrap().parse().unwrap()
    }

    #[test]
    fn grouping_bounds_are_the_kernels() {
        // The graph leaves the grouping to the kernel only within its shared arrays.
        assert_eq!(
            KERNEL_GROUP_POSITIONS as u32,
            defined(GATHER, "NVQG_GROUP_MAX")
        );
        assert_eq!(
            KERNEL_GROUP_BATCHES as u32,
            defined(GATHER, "NVQG_MAX_EXPERTS")
        );
        assert_eq!(MAX_EXPERTS, KERNEL_GROUP_BATCHES);
        // Each block of the tensor-core form finds its matrix's positions only within its
        // list, a whole number of positions a thread.
        let scan = defined(GATHER, "NVQG_SCAN_MAX");
        assert_eq!(SCAN_POSITIONS as u32, scan);
        assert_eq!(scan % block_threads(true), 0);
    }

    #[test]
    fn blocks_have_the_kernels_warps() {
        // A block short of the kernel's warps leaves rows of the output unwritten.
        assert_eq!(
            block_threads(true),
            32 * defined(mv_mma::SOURCE, "NVQM_WARPS")
        );
        assert_eq!(block_threads(false), 32 * defined(QUANTIZED, "NVQ_WARPS"));
    }
}
