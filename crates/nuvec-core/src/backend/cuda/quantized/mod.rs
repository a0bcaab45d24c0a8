//! Affine quantization on the GPU (`kernels/quantized.cu`): [`QuantizedOp::Dequantize`] and
//! [`QuantizedOp::Quantize`] (f16, bf16, f32 and f64), and [`QuantizedOp::Matmul`] (f16, bf16
//! and f32), in MLX's layout (2, 3, 4, 5, 6 or 8 bits, groups of 32, 64 or 128).
//! `gather_qmm`'s fused node has its kernels in `gather.rs`, `gather_mm`'s (plain weights
//! through the same tiles) in `gather_mm.rs`.
//!
//! Every kernel works a pack of 32 values (`bits` words) at a time. Dequantization and
//! quantization give the CPU's results bit for bit: the same operations in the same compute
//! type, each rounded once (never fused), and a group's extremes combined so that ties and NaN
//! go as in the CPU's pass in order.
//!
//! The product, by rows of `x`:
//! - up to [`ROWS_AT_ONCE`] rows (decoding: one), and in f32 up to [`F32_GEMM_ROWS`], `x · wᵀ`
//!   (`transpose`): each warp reads a few rows of `w` once, with 16-byte loads where the width
//!   allows (8-byte ones for 2 and 6 bits, 4-byte ones for 3 and 5), dequantizes in registers
//!   and sums in f32, [`ROWS_AT_ONCE`] rows of `x` at a time; when `w` has too few rows to fill
//!   the device, the inner axis is split and the pieces' f32 sums are added in a second kernel,
//!   in a fixed order. The f16 and bf16 ones with 4 bits go to the tensor-core kernel instead
//!   (`mv_mma.rs`: about half the instructions a weight, 1.25 times the speed on the H200;
//!   `NUVEC_QMV_MMA=0` keeps the CUDA-core kernel). `x · w` runs a plain kernel (a thread a
//!   pack of 32 outputs, a row of `x` a block), split the same way, for f32 and for few rows;
//! - more rows in f32 (past [`F32_GEMM_ROWS`]), and in f16 and bf16 from [`HALF_GEMM_ROWS`]
//!   (a prefill's; `NUVEC_QMM_DEQUANT=0` keeps these on the kernels below): `w` dequantized
//!   into a temporary matrix of the activations' type (the CPU's weights bit for bit; at most
//!   [`HALF_GEMM_BYTES`] for the half types), then one cuBLASLt product. Where the warpgroup
//!   kernel takes the product, it keeps it up to some rows (`wgmma.rs`): below, the
//!   dequantization's fixed cost outweighs cuBLAS's faster product;
//! - between, in f16 and bf16, both orientations: the tiled tensor-core kernel
//!   (`tiled.rs`), which dequantizes tiles of `w` into shared memory (each weight rounded once
//!   to the activation type, where the CPU keeps it in f32: results agree within the type's
//!   rounding, not bit for bit) and multiplies with `mma.sync`; `x · w` there needs an inner
//!   axis that is a multiple of 8 (the plain kernel takes the others). On Hopper (compute
//!   capability 9.x), `x · wᵀ` with 4 bits and more than [`wgmma::MIN_ROWS`] rows goes to the
//!   warpgroup kernel instead (`wgmma.rs`: the dequantized weights go straight from registers
//!   into `wgmma`, twice the tiled kernel's speed on an H100; `NUVEC_QMM_WGMMA=0` keeps the
//!   tiled kernel).
//!
//! Operands are read row-major from 16-byte-aligned starts (copied on the device where they
//! are not). A batched `w` runs these kernels through `gather_qmm`'s (`batched_matmul`). What
//! stays on the host bridge: other types, a `w` broadcast over part of the output's batch,
//! empty products, and grids past the device's limits.

pub(crate) mod gather;
mod gather_mm;
mod mv_mma;
mod tiled;
mod wgmma;

use cudarc::driver::{DeviceRepr, LaunchConfig};

use super::Place;
use super::dtype::type_names;
use super::elementwise::convert;
use super::fast;
use super::launch::{Kernel, symbol};
use crate::array::{ArrayData, Layout};
use crate::fast::gather::GatherQmm;
use crate::ops::linalg::MatmulOp;
use crate::ops::quantized::QuantizedOp;
use crate::primitive::OutputSpec;
use crate::{DType, Error, Result};

const COMMON: &str = include_str!("../kernels/common.cuh");
const QUANTIZED: &str = include_str!("../kernels/quantized.cu");

/// The widths with kernels.
const BITS: [u32; 6] = [2, 3, 4, 5, 6, 8];
/// Rows of `x` one product kernel takes at most (its instantiations: 1 to 8).
const ROWS_AT_ONCE: usize = 8;
/// Rows of `x` in f32 past which `w` is dequantized for one f32 product: the matrix-vector
/// kernel reads the packed weights (about an eighth of f32 ones at 4 bits) once for every
/// [`ROWS_AT_ONCE`] rows, the dequantized matrix is written and read once.
const F32_GEMM_ROWS: usize = 128;
/// Rows of `x` in f16 or bf16 from which `w` is dequantized into a temporary matrix of the
/// activations' type for one cuBLASLt product, rather than multiplied by the tiled kernel: the
/// dequantization reads the packed weights and writes the matrix once (about 43 us for
/// [14336, 4096] at 4 bits), which cuBLAS's product, at 2.5 to 3 times the tiled kernel's
/// rate, earns back from about 128 rows; 256 leaves a margin (vLLM's AWQ takes the same
/// turn there).
const HALF_GEMM_ROWS: usize = 256;
/// The largest temporary dequantized matrix, in bytes: past it the tiled kernel runs, which
/// needs no more memory than its output.
const HALF_GEMM_BYTES: usize = 1 << 30;
/// Warps a block of the product kernel (`NVQ_WARPS`).
const WARPS: usize = 4;
/// Threads a block of the other kernels.
const THREADS: usize = 256;
/// Threads a block of the `x · w` kernel.
const QVM_THREADS: usize = 64;
/// Blocks a multiprocessor the product's grid should give the device at least before the
/// inner axis is split (a few of the resident blocks, so that the loads in flight cover the
/// memory's latency).
const BLOCKS_PER_SM: usize = 4;
/// The largest grid dimension y and z.
const GRID_YZ: usize = 65_535;

/// The product's arguments (`NvQmv` in `quantized.cu`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct QmvArgs {
    n: i64,
    m: i64,
    packs: i32,
    groups: i32,
    gs_shift: i32,
    per: i32,
}

// SAFETY: `QmvArgs` is `repr(C)` plain data with the field order, types and alignment of
// `NvQmv`, so its bytes are what the kernel reads as its parameter.
unsafe impl DeviceRepr for QmvArgs {}

/// The `x · w` kernel's arguments (`NvQvm` in `quantized.cu`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct QvmArgs {
    k: i64,
    m: i64,
    packs: i32,
    groups: i32,
    gs_shift: i32,
    per: i32,
}

// SAFETY: as for `QmvArgs`, with `NvQvm`.
unsafe impl DeviceRepr for QvmArgs {}

/// Rows of `w` a warp of the product kernel takes for `m` rows of `x` (`NvqRows`).
fn rows_a_warp(m: usize) -> usize {
    match m {
        1 => 4,
        2..=4 => 2,
        _ => 1,
    }
}

/// The module of the kernels over values of `dtype` packed with `bits` bits.
fn source(dtype: DType, bits: u32) -> String {
    let (ct, tn) = type_names(dtype).expect("a float type");
    let mut s = format!("{COMMON}\n{QUANTIZED}\n");
    s.push_str(&format!("NV_QUANTIZE({ct}, {tn}, {bits})\n"));
    if dtype != DType::F64 {
        s.push_str(&format!("NV_QVM({ct}, {tn}, {bits})\n"));
        for m in 1..=ROWS_AT_ONCE {
            s.push_str(&format!("NV_QMV({ct}, {tn}, {bits}, {m})\n"));
        }
    }
    s
}

/// Every module of this family (with the tiled and gathered products'), for compiling ahead
/// of time.
#[cfg(test)]
pub(super) fn all_sources() -> Vec<(String, String)> {
    let mut sources: Vec<(String, String)> = [DType::F16, DType::BF16, DType::F32, DType::F64]
        .into_iter()
        .flat_map(|d| {
            let tn = type_names(d).expect("a float type").1;
            BITS.into_iter()
                .map(move |b| (format!("quantized_{tn}_d{b}"), source(d, b)))
        })
        .collect();
    sources.extend(tiled::all_sources());
    sources.extend(mv_mma::all_sources());
    sources.extend(gather::all_sources());
    sources
}

/// The modules compiled for `sm_90a` (the warpgroup kernel's), for compiling ahead of time.
#[cfg(test)]
pub(super) fn sm90_sources() -> Vec<(String, String)> {
    wgmma::sm90_sources()
}

/// The kernel `name` of the module over `dtype` and `bits`.
fn kernel(place: &Place, dtype: DType, bits: u32, name: super::launch::Symbol) -> Result<Kernel> {
    place
        .gpu
        .kernel_in("quantized", Some(dtype), bits, name, || source(dtype, bits))
}

/// `log2(group_size / 32)`: the shift from a pack to its group.
fn group_shift(group_size: usize) -> i32 {
    (group_size / 32).trailing_zeros() as i32
}

/// Computes a quantization primitive, or `None` where no kernel takes it.
pub(crate) fn eval(
    place: &Place,
    op: &QuantizedOp,
    inputs: &[ArrayData],
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    match *op {
        QuantizedOp::Dequantize { group_size, bits } => {
            dequantize(place, inputs, group_size, bits, outputs)
        }
        QuantizedOp::Quantize { group_size, bits } => {
            quantize(place, &inputs[0], group_size, bits, outputs)
        }
        QuantizedOp::Matmul {
            group_size,
            bits,
            transpose,
        } => matmul(place, inputs, (group_size, bits, transpose), outputs),
    }
}

/// Whether kernels exist for values of `dtype` with `bits` and `group_size` (`matmul`: the
/// product's types, which leave out f64).
fn supported(dtype: DType, bits: u32, group_size: usize, matmul: bool) -> bool {
    let types: &[DType] = if matmul {
        &[DType::F16, DType::BF16, DType::F32]
    } else {
        &[DType::F16, DType::BF16, DType::F32, DType::F64]
    };
    types.contains(&dtype) && BITS.contains(&bits) && [32, 64, 128].contains(&group_size)
}

/// `data` row-major from a 16-byte-aligned address on this device (itself, or a copy made
/// there), with that address.
fn aligned(place: &Place, data: &ArrayData) -> Result<(ArrayData, u64)> {
    let data = super::fast::row_major(place, data)?;
    let at = place.input(&data)? + (data.layout.offset * data.dtype().size()) as u64;
    if at.is_multiple_of(16) {
        return Ok((data, at));
    }
    let copy = convert(place, &data, data.dtype())?.ok_or_else(|| {
        Error::Device("cuda: quantized: an operand could not be copied row-major".into())
    })?;
    let at = place.input(&copy)?;
    Ok((copy, at))
}

/// An index array as the gathered kernels read it: the array holding it, its address, and how
/// many consecutive index positions share each of its entries. An array broadcast over its
/// last axes (`gather_qmm`'s and `gather_mm`'s `lhs` without indices: each matrix of `x` for
/// all the indices of `w` beside it) is read in place, once per entry, its repeat the size of
/// those axes, where a copy would take a launch; any other layout is made row-major
/// ([`aligned`]), each entry its own position.
fn repeated(place: &Place, data: &ArrayData) -> Result<(ArrayData, u64, i32)> {
    let l = &data.layout;
    let lead = l
        .strides
        .iter()
        .zip(&l.shape)
        .rposition(|(&s, &n)| s != 0 && n != 1)
        .map_or(0, |i| i + 1);
    let repeat: usize = l.shape[lead..].iter().product();
    if repeat > 1 && repeat <= i32::MAX as usize {
        let base = data.view(Layout {
            shape: l.shape[..lead].to_vec(),
            strides: l.strides[..lead].to_vec(),
            offset: l.offset,
        });
        let (held, at) = aligned(place, &base)?;
        return Ok((held, at, repeat as i32));
    }
    let (held, at) = aligned(place, data)?;
    Ok((held, at, 1))
}

/// The operands `(x, w, scales, biases)` as the product kernels read them ([`aligned`] each):
/// the arrays holding them (to keep until the launch is queued) and their addresses.
fn aligned_operands(place: &Place, operands: &[ArrayData]) -> Result<(Vec<ArrayData>, [u64; 4])> {
    let mut held = Vec::with_capacity(4);
    let mut at = [0u64; 4];
    for (slot, data) in at.iter_mut().zip(&operands[..4]) {
        let (h, a) = aligned(place, data)?;
        held.push(h);
        *slot = a;
    }
    Ok((held, at))
}

/// The launch of a grid-stride kernel over `items` threads' work.
fn flat(items: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (items.div_ceil(THREADS).clamp(1, 1 << 20) as u32, 1, 1),
        block_dim: (THREADS as u32, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// `dequantize` on the device.
fn dequantize(
    place: &Place,
    inputs: &[ArrayData],
    group_size: usize,
    bits: u32,
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    let (shape, dtype) = (&outputs[0].0, outputs[0].1);
    if !supported(dtype, bits, group_size, false) {
        return Ok(None);
    }
    let (out, to) = place.output(dtype, shape)?;
    let packs = shape.iter().product::<usize>() / 32;
    if packs == 0 {
        return Ok(Some(vec![out]));
    }
    let (_w, wq) = aligned(place, &inputs[0])?;
    let (_s, scales) = aligned(place, &inputs[1])?;
    let (_b, biases) = aligned(place, &inputs[2])?;
    let tn = type_names(dtype).expect("a float type").1;
    let f = kernel(place, dtype, bits, symbol!("dequantize_{tn}_b{bits}")?)?;
    // A thread a 16-byte piece of a pack's values.
    let pieces = packs * 32 * dtype.size() / 16;
    let (packs, shift) = (packs as i64, group_shift(group_size));
    let params: [&dyn DeviceRepr; 6] = [&wq, &scales, &biases, &to, &packs, &shift];
    // SAFETY: `wq` holds `packs · bits` words and the scales and biases `packs >> shift`
    // elements of `dtype`, row-major from 16-byte-aligned starts (`aligned`; the primitive
    // checked the shapes); `to` is a fresh block of `packs · 32` elements of `dtype`; the
    // grid-stride loop stays below the pieces of `packs` packs; the arguments match
    // `dequantize_*`.
    unsafe { f.launch(&place.stream, flat(pieces), &params)? };
    Ok(Some(vec![out]))
}

/// `quantize` on the device.
fn quantize(
    place: &Place,
    w: &ArrayData,
    group_size: usize,
    bits: u32,
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    let dtype = w.dtype();
    let packs = w.layout.size() / 32;
    if !supported(dtype, bits, group_size, false) || packs.div_ceil(THREADS) > u32::MAX as usize {
        return Ok(None);
    }
    let (wq, wq_at) = place.output(outputs[0].1, &outputs[0].0)?;
    let (scales, s_at) = place.output(outputs[1].1, &outputs[1].0)?;
    let (biases, b_at) = place.output(outputs[2].1, &outputs[2].0)?;
    if packs == 0 {
        return Ok(Some(vec![wq, scales, biases]));
    }
    let (_w, from) = aligned(place, w)?;
    let tn = type_names(dtype).expect("a float type").1;
    let f = kernel(place, dtype, bits, symbol!("quantize_{tn}_b{bits}")?)?;
    let (count, shift) = (packs as i64, group_shift(group_size));
    let params: [&dyn DeviceRepr; 6] = [&from, &wq_at, &s_at, &b_at, &count, &shift];
    // One thread a pack and no grid-stride loop: a group's threads meet in shuffles, so each
    // must be on the grid.
    let cfg = LaunchConfig {
        grid_dim: (packs.div_ceil(THREADS) as u32, 1, 1),
        block_dim: (THREADS as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: `from` holds `packs · 32` elements of `dtype`, row-major from a 16-byte-aligned
    // start (`aligned`); `wq_at`, `s_at` and `b_at` are fresh blocks of `packs · bits` words
    // and `packs >> shift` elements of `dtype` (the primitive's output shapes); threads past
    // `packs` read the last pack and write nothing; the arguments match `quantize_*`.
    unsafe { f.launch(&place.stream, cfg, &params)? };
    Ok(Some(vec![wq, scales, biases]))
}

/// The splits of an inner axis of `depth` units (packs, or rows of `w`) that give `blocks`
/// blocks at least `want` in all, each split at least `least` units (one at least).
fn splits(blocks: usize, want: usize, depth: usize, least: usize) -> usize {
    if blocks >= want {
        return 1;
    }
    want.div_ceil(blocks.max(1))
        .min(depth / least.max(1))
        .clamp(1, GRID_YZ)
}

/// `data` (`[..., r, c]`) as `[batch..., r, c]`: its batch axes broadcast to `batch` (which
/// they broadcast to), a view with steps of 0 along the axes it repeats.
fn broadcast_batch(data: &ArrayData, batch: &[usize]) -> ArrayData {
    let l = &data.layout;
    let nd = l.shape.len();
    let own = nd - 2;
    let mut shape = batch.to_vec();
    let mut strides: Vec<isize> = batch
        .iter()
        .enumerate()
        .map(|(i, &size)| {
            // Axis i of the batch is axis i + own − batch.len() of `data`, where it has one.
            let j = (i + own).checked_sub(batch.len());
            match j {
                Some(j) if l.shape[j] == size => l.strides[j],
                _ => 0,
            }
        })
        .collect();
    shape.extend_from_slice(&l.shape[own..]);
    strides.extend_from_slice(&l.strides[own..]);
    data.view(Layout {
        shape,
        strides,
        offset: l.offset,
    })
}

/// Whether `data` (`[..., r, c]`) holds one matrix: every batch axis of one element or a
/// broadcast (a step of 0), as `quantized_matmul` makes a `w` of one matrix against a batched
/// `x`.
fn one_matrix(data: &ArrayData) -> bool {
    let l = &data.layout;
    let own = l.shape.len().saturating_sub(2);
    l.shape[..own]
        .iter()
        .zip(&l.strides[..own])
        .all(|(&size, &step)| size == 1 || step == 0)
}

/// `quantized_matmul` with a batched `w` (its scales and biases batched alike), the batch
/// axes broadcast as the output's: one matrix of `w` ([`one_matrix`], the scales and biases
/// too) is the 2-D product over every row of `x`; a `w` batched as the output is a gathered
/// product with matrix i of `x` (broadcast to the output's batch, copied on the device where
/// it repeats) and of `w` at index position i. `w` broadcast over part of the output's batch
/// stays on the host bridge.
fn batched_matmul(
    place: &Place,
    inputs: &[ArrayData],
    (group_size, bits, transpose): (usize, u32, bool),
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    let shape = &outputs[0].0;
    let (x, w) = (&inputs[0], &inputs[1]);
    let nd = w.layout.shape.len();
    if x.layout.shape.len() < 2 || shape.len() < nd {
        return Ok(None);
    }
    let batch = &shape[..shape.len() - 2];
    let wbatch: usize = w.layout.shape[..nd - 2].iter().product();
    if inputs[1..4].iter().all(one_matrix) {
        // The last two axes of w, the scales and the biases as matrices.
        let matrix = |d: &ArrayData| {
            let l = &d.layout;
            d.view(Layout {
                shape: l.shape[nd - 2..].to_vec(),
                strides: l.strides[nd - 2..].to_vec(),
                offset: l.offset,
            })
        };
        let xbatch: usize = x.layout.shape[..x.layout.shape.len() - 2].iter().product();
        let xs = if xbatch == batch.iter().product::<usize>() {
            x.clone()
        } else {
            fast::row_major(place, &broadcast_batch(x, batch))?
        };
        let flat = [xs, matrix(w), matrix(&inputs[2]), matrix(&inputs[3])];
        return matmul(place, &flat, (group_size, bits, transpose), outputs);
    }
    // w's batch axes must be the output's (those of one element aside).
    let padded = batch.len() - (nd - 2).min(batch.len());
    let w_full = nd - 2 <= batch.len()
        && w.layout.shape[..nd - 2]
            .iter()
            .zip(&batch[padded..])
            .all(|(a, b)| a == b)
        && wbatch == batch.iter().product::<usize>();
    if !w_full {
        return Ok(None);
    }
    let xs = fast::row_major(place, &broadcast_batch(x, batch))?;
    let op = GatherQmm {
        group_size,
        bits,
        transpose,
    };
    let (ws, ss) = (&w.layout.shape, &inputs[2].layout.shape);
    let Some(d) = op.dims_of(&xs.layout.shape, ws, ss, wbatch) else {
        return Ok(None);
    };
    let operands = [xs, w.clone(), inputs[2].clone(), inputs[3].clone()];
    Ok(gather::product(place, &op, &d, &operands, None, None, outputs)?.map(|y| vec![y]))
}

/// A product route of [`matmul`]: `(place, inputs, (group_size, bits, transpose), (m, n, k),
/// outputs)` to the output, or `None` where it does not take the product.
type Route = fn(
    &Place,
    &[ArrayData],
    (usize, u32, bool),
    (usize, usize, usize),
    &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>>;

/// `quantized_matmul` on the device (a batched `w` through [`batched_matmul`]).
fn matmul(
    place: &Place,
    inputs: &[ArrayData],
    (group_size, bits, transpose): (usize, u32, bool),
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    let (shape, dtype) = (&outputs[0].0, outputs[0].1);
    let w = &inputs[1];
    let wshape = &w.layout.shape;
    if !supported(dtype, bits, group_size, true) || wshape.len() < 2 {
        return Ok(None);
    }
    if wshape.len() > 2 {
        return batched_matmul(place, inputs, (group_size, bits, transpose), outputs);
    }
    let unpacked = wshape[1] * 32 / bits as usize;
    let (k, n) = if transpose {
        (unpacked, wshape[0])
    } else {
        (wshape[0], unpacked)
    };
    let size: usize = shape.iter().product();
    if size == 0 || k == 0 {
        return Ok(None);
    }
    let m = size / n;
    let packs = unpacked / 32;
    let groups = unpacked / group_size;
    if packs > i32::MAX as usize || groups > i32::MAX as usize {
        return Ok(None);
    }
    // The routes that take only some products, in order, each where its condition holds; the
    // first to give a result wins. Past the warpgroup kernel's rows the dequantized weights
    // and cuBLAS are faster (where the temporary fits); below, the tensor-core kernels (many
    // rows on Hopper, few rows) come first.
    let dequantizes = half_gemm() && dequantizes_halves(dtype, m, n, k);
    let routes: [(bool, Route); 5] = [
        (dequantizes && wgmma::leaves(m), dequantized_matmul),
        (true, wgmma::matmul),
        (true, mv_mma::matmul),
        (dequantizes, dequantized_matmul),
        (m > ROWS_AT_ONCE, tiled_matmul),
    ];
    for (_, route) in routes.into_iter().filter(|&(taken, _)| taken) {
        if let Some(out) = route(
            place,
            inputs,
            (group_size, bits, transpose),
            (m, n, k),
            outputs,
        )? {
            return Ok(Some(out));
        }
    }
    if dtype == DType::F32 && m > F32_GEMM_ROWS {
        return dequantized_matmul(
            place,
            inputs,
            (group_size, bits, transpose),
            (m, n, k),
            outputs,
        );
    }
    let sms = place.gpu.props.sms as usize;
    let want = sms * BLOCKS_PER_SM;
    // The grid: blocks along the outputs, splits of the inner axis, blocks of rows of x.
    let (grid, split_units) = if transpose {
        let at_once = m.min(ROWS_AT_ONCE);
        let rows = WARPS * rows_a_warp(at_once);
        let (bx, bz) = (n.div_ceil(rows), m.div_ceil(at_once));
        // Each split gives every lane a pack at least.
        let s = splits(bx * bz, want, packs, 32);
        ((bx, s, bz), packs.div_ceil(s))
    } else {
        let (bx, bz) = (packs.div_ceil(QVM_THREADS), m);
        let s = splits(bx * bz, want, k, 8);
        ((bx, s, bz), k.div_ceil(s))
    };
    if grid.0 > u32::MAX as usize || grid.1 > GRID_YZ || grid.2 > GRID_YZ {
        return Ok(None);
    }
    let (_held, [x_at, w_at, s_at, b_at]) = aligned_operands(place, inputs)?;
    let (out, y_at) = place.output(dtype, shape)?;
    // The splits' f32 sums, [splits, m, n]; unused (and not allocated) with one split.
    let partial = match grid.1 {
        1 => None,
        s => Some(place.output(DType::F32, &[s, m, n])?),
    };
    let part_at = partial.as_ref().map_or(0u64, |p| p.1);
    let tn = type_names(dtype).expect("a float type").1;
    let shift = group_shift(group_size);
    let cfg = |threads: usize| LaunchConfig {
        grid_dim: (grid.0 as u32, grid.1 as u32, grid.2 as u32),
        block_dim: (threads as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    if transpose {
        let at_once = m.min(ROWS_AT_ONCE);
        let f = kernel(place, dtype, bits, symbol!("qmv_{tn}_b{bits}_m{at_once}")?)?;
        let args = QmvArgs {
            n: n as i64,
            m: m as i64,
            packs: packs as i32,
            groups: groups as i32,
            gs_shift: shift,
            per: split_units as i32,
        };
        let params: [&dyn DeviceRepr; 7] = [&x_at, &w_at, &s_at, &b_at, &y_at, &part_at, &args];
        // SAFETY: `x_at` holds `m · k` elements of `dtype`, `w_at` `n · packs · bits` words,
        // the scales and biases `n · groups` elements, all row-major from 16-byte-aligned
        // starts (`aligned`; the primitive checked the shapes); `y_at` is a fresh block of
        // `m · n` elements and `part_at` (when there are splits) one of `splits · m · n`
        // floats; blocks read rows of `w` and `x` clamped below `n` and `m` and write only
        // inside; the arguments match `qmv_*`.
        unsafe { f.launch(&place.stream, cfg(WARPS * 32), &params)? };
    } else {
        let f = kernel(place, dtype, bits, symbol!("qvm_{tn}_b{bits}")?)?;
        let args = QvmArgs {
            k: k as i64,
            m: m as i64,
            packs: packs as i32,
            groups: groups as i32,
            gs_shift: shift,
            per: split_units as i32,
        };
        let params: [&dyn DeviceRepr; 7] = [&x_at, &w_at, &s_at, &b_at, &y_at, &part_at, &args];
        // SAFETY: `x_at` holds `m · k` elements of `dtype`, `w_at` `k · packs · bits` words,
        // the scales and biases `k · groups` elements, row-major from 16-byte-aligned starts;
        // `y_at` is a fresh block of `m · n` elements and `part_at` (with splits) one of
        // `splits · m · n` floats; threads past `packs` return at once and the rows of `w`
        // stop at `k`; the arguments match `qvm_*`.
        unsafe { f.launch(&place.stream, cfg(QVM_THREADS), &params)? };
    }
    if let Some((_, part)) = &partial {
        let f = kernel(place, dtype, bits, symbol!("qsum_{tn}_b{bits}")?)?;
        let (count, s) = ((m * n) as i64, grid.1 as i32);
        let params: [&dyn DeviceRepr; 4] = [part, &y_at, &count, &s];
        // SAFETY: `part` holds `s · m · n` floats written by the launch above (queued before
        // on this stream), `y_at` `m · n` elements of `dtype`; the grid-stride loop stays
        // below `m · n`; the arguments match `qsum_*`.
        unsafe { f.launch(&place.stream, flat(m * n), &params)? };
    }
    Ok(Some(vec![out]))
}

/// Whether an f16 or bf16 product of `m` rows by an `[n, k]` (or `[k, n]`) `w` goes through
/// the dequantized matrix: [`HALF_GEMM_ROWS`] rows at least, a matrix of at most
/// [`HALF_GEMM_BYTES`].
fn dequantizes_halves(dtype: DType, m: usize, n: usize, k: usize) -> bool {
    matches!(dtype, DType::F16 | DType::BF16)
        && m >= HALF_GEMM_ROWS
        && n.saturating_mul(k).saturating_mul(dtype.size()) <= HALF_GEMM_BYTES
}

/// Whether f16 and bf16 products of many rows dequantize `w` for cuBLASLt (the default;
/// `NUVEC_QMM_DEQUANT=0` keeps them on the tiled kernel, for comparison).
fn half_gemm() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("NUVEC_QMM_DEQUANT").is_none_or(|v| v != "0"))
}

/// `quantized_matmul` through a dequantized `w`: in f32 of more than [`F32_GEMM_ROWS`] rows,
/// and in f16 and bf16 of at least [`HALF_GEMM_ROWS`]. `w` is dequantized into a temporary
/// matrix of the output's type (bit for bit the CPU's weights), then multiplied by one
/// cuBLASLt product with f32 accumulation (the matrix-vector kernel would read the packed
/// weights once for every 8 rows, and the tiled kernel runs at a third of cuBLAS's rate).
fn dequantized_matmul(
    place: &Place,
    inputs: &[ArrayData],
    (group_size, bits, transpose): (usize, u32, bool),
    (m, n, k): (usize, usize, usize),
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    let (shape, dtype) = (&outputs[0].0, outputs[0].1);
    let rows = inputs[1].layout.shape[0];
    let unpacked = if transpose { k } else { n };
    let spec = (vec![rows, unpacked], dtype);
    let Some(mut dq) = dequantize(place, &inputs[1..4], group_size, bits, &[spec])? else {
        return Ok(None);
    };
    let w = dq.remove(0);
    // `w` as the `[k, n]` right operand: itself, or the transpose of its `[n, k]`.
    let rhs = if transpose {
        w.view(Layout {
            shape: vec![k, n],
            strides: vec![1, k as isize],
            offset: 0,
        })
    } else {
        w
    };
    let x = fast::row_major(place, &inputs[0])?;
    let lhs = x.view(Layout {
        shape: vec![m, k],
        strides: vec![k as isize, 1],
        offset: x.layout.offset,
    });
    let mut operands = [lhs, rhs];
    let product = super::matmul::eval(
        place,
        &MatmulOp::Matmul,
        &mut operands,
        &[(vec![m, n], dtype)],
    )?;
    Ok(product.map(|mut y| {
        let y = y.remove(0);
        vec![y.view(Layout::contiguous(shape))]
    }))
}

/// `quantized_matmul` of more than [`ROWS_AT_ONCE`] rows in f16 or bf16 on the tensor cores
/// (`tiled.rs`), or `None` where the grid would pass the device's limits.
fn tiled_matmul(
    place: &Place,
    inputs: &[ArrayData],
    (group_size, bits, transpose): (usize, u32, bool),
    (m, n, k): (usize, usize, usize),
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    let (shape, dtype) = (&outputs[0].0, outputs[0].1);
    let w = &inputs[1];
    let wrow = w.layout.shape[1];
    let unpacked = if transpose { k } else { n };
    if k > i32::MAX as usize || wrow > i32::MAX as usize || !tiled::inner_fits(k) {
        return Ok(None);
    }
    let args = tiled::TiledArgs {
        m: m as i64,
        n: n as i64,
        xmats: 1,
        experts: 1,
        indices: 1,
        k: k as i32,
        wrow: wrow as i32,
        groups: (unpacked / group_size) as i32,
        gs_shift: group_shift(group_size),
        mrows: 1,
        ..Default::default()
    };
    // The larger tiles where they fit the device (and the rows fill them), else the smaller.
    let fitting = [tiled::warp_tiles(m), 2]
        .into_iter()
        .find(|&mt| tiled::fits(place, dtype, bits, transpose, mt));
    let Some(mt) = fitting else {
        return Ok(None);
    };
    if tiled::grid(tiled::Rows::Plain, &args, mt).is_none() {
        return Ok(None);
    }
    let (_held, [x, w_at, scales, biases]) = aligned_operands(place, inputs)?;
    let (out, y) = place.output(dtype, shape)?;
    let ops = tiled::Operands {
        x,
        w: w_at,
        scales,
        biases,
        y,
        lhs: 0,
        rhs: 0,
        offs: 0,
    };
    // SAFETY: `x` holds `m · k` values of `dtype`, `w` `wrow` words a row (`n` rows with
    // `transpose`, else `k`), the scales and biases `groups` values a row, all row-major from
    // 16-byte-aligned starts (`aligned`; the primitive checked the shapes); `y` is a fresh
    // block of `m · n` values; the arrays are held until the work is queued and the allocator
    // keeps their blocks for this stream.
    unsafe {
        tiled::launch(
            place,
            dtype,
            bits,
            transpose,
            tiled::Rows::Plain,
            mt,
            &ops,
            args,
        )?
    };
    Ok(Some(vec![out]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broadcast_w_is_one_matrix() {
        let w = ArrayData::from_vec(vec![0.0f32; 6], &[1, 2, 3]);
        assert!(one_matrix(&w));
        // As `quantized_matmul` widens it against an `x` of batch 4: steps of 0.
        let wide = w.view(Layout {
            shape: vec![4, 2, 3],
            strides: vec![0, 3, 1],
            offset: 0,
        });
        assert!(one_matrix(&wide));
        let two = ArrayData::from_vec(vec![0.0f32; 12], &[2, 1, 2, 3]);
        assert!(!one_matrix(&two));
        assert!(one_matrix(&ArrayData::from_vec(vec![0.0f32; 6], &[2, 3])));
    }

    #[test]
    fn only_half_type_prefills_of_modest_weights_dequantize() {
        // An 8B model's MLP weight, at a prefill's rows and below them.
        assert!(dequantizes_halves(DType::BF16, 512, 14336, 4096));
        assert!(dequantizes_halves(DType::F16, 256, 14336, 4096));
        assert!(!dequantizes_halves(DType::BF16, 255, 14336, 4096));
        // f32 takes its own turn (past F32_GEMM_ROWS), f64 has no product kernels.
        assert!(!dequantizes_halves(DType::F32, 4096, 14336, 4096));
        assert!(!dequantizes_halves(DType::F64, 4096, 14336, 4096));
        // A vocabulary's projection past the temporary's cap stays on the tiled kernel.
        assert!(!dequantizes_halves(DType::BF16, 4096, 151_936, 4096));
        assert!(dequantizes_halves(DType::BF16, 4096, 1 << 16, 1 << 13));
        assert!(!dequantizes_halves(
            DType::BF16,
            4096,
            1 << 16,
            (1 << 13) + 8
        ));
        assert!(!dequantizes_halves(DType::BF16, 4096, usize::MAX, 2));
    }
}
