//! Reductions, arg-reductions, scans, `logsumexp` and softmax on the GPU, with the CPU
//! backend's types and special values (`backend/cpu/reduce*`).
//!
//! A reduction reads its input in one of two shapes. *Rows*: the reduced elements of each
//! output are one contiguous run (the last axes, or any axes that merge into one run of
//! step 1): a warp or a block folds each run with 16-byte loads, and runs too long for the
//! number of outputs are split over blocks, with a second pass over the partial results.
//! *Columns*: the innermost kept axis has step 1 (leading or middle axes reduced): a thread
//! per output folds its elements in order while its neighbours read the neighbouring
//! elements, the reduced extent split over blocks when it is long. Anything else (a
//! transposed middle axis, say) is first copied row-major with the reduced axes last.
//!
//! The NVRTC modules are per element type and family, so that a program compiles only what
//! it uses: `reduce_<type>` (every reduction of elements of that type, with its partial and
//! second passes), `arg_<type>`, `softmax_<type>` (softmax and `logsumexp`) and
//! `scan_<type>`.
//!
//! Cases left to the CPU (`Ok(None)`): complex inputs; views whose kept axes (or, for the
//! copy that the general case makes, kept and reduced axes together) do not merge into at
//! most eight axes.

use cudarc::driver::{DeviceRepr, LaunchConfig};

use super::Place;
use super::dtype::FLOAT_TYPES;
use super::elementwise::{Strided, convert, type_names};
use super::launch::{Kernel, Symbol, symbol};
use crate::array::{ArrayData, Layout};
use crate::backend::common::reduce_plan::ReducePlan;
use crate::ops::reduce::{ArgReduceOp, ReduceOp, ScanOp, accumulation_dtype};
use crate::primitive::OutputSpec;
use crate::{DType, Result};

const COMMON: &str = include_str!("kernels/common.cuh");
const OPS: &str = include_str!("kernels/reduce_ops.cuh");
const REDUCE: &str = include_str!("kernels/reduce.cu");
const SCAN: &str = include_str!("kernels/scan.cu");

/// Threads per block of every kernel here (`NV_THREADS` in `reduce.cu`).
const THREADS: usize = 256;
/// Rows of at most this many elements get a warp each, longer ones a block.
const WARP_ROW: usize = 1024;
/// Blocks launched at most (the kernels loop over the rest).
const MAX_BLOCKS: usize = 1 << 20;
/// Runs (rows or parts of rows) wanted in flight (enough for an H200's 132 multiprocessors).
const ROW_TASKS: usize = 2048;
/// Threads wanted in flight for column reductions, per multiprocessor (its most resident).
const COL_THREADS_PER_SM: usize = 2048;
/// The most parts a column reduction is split in (fewer than a row split needs).
const COL_PARTS: usize = 8192;

/// The CUDA functor of a reduction.
fn functor(op: ReduceOp) -> Option<&'static str> {
    Some(match op {
        ReduceOp::Sum => "NvSum",
        ReduceOp::Prod => "NvProd",
        ReduceOp::Max => "NvMax",
        ReduceOp::Min => "NvMin",
        ReduceOp::All => "NvAll",
        ReduceOp::Any => "NvAny",
        ReduceOp::LogSumExp => return None,
    })
}

/// The accumulator type of `op` over elements of `dtype` (`Of<T>::A` in `reduce_ops.cuh`):
/// the partial results of a split reduction have it.
fn acc_dtype(op: ReduceOp, dtype: DType) -> DType {
    let up = |d: DType| match d {
        DType::F16 | DType::BF16 => DType::F32,
        other => other,
    };
    match op {
        ReduceOp::Sum | ReduceOp::Prod => up(accumulation_dtype(dtype)),
        ReduceOp::All | ReduceOp::Any => DType::Bool,
        _ => up(dtype),
    }
}

const REDUCE_OPS: [ReduceOp; 6] = [
    ReduceOp::Sum,
    ReduceOp::Prod,
    ReduceOp::Max,
    ReduceOp::Min,
    ReduceOp::All,
    ReduceOp::Any,
];

/// A reduction kernel: operation, input and output types, and whether the column form is
/// needed too (the row form always is).
type ReduceKernel = (ReduceOp, DType, DType, bool);

/// The reduction kernels that reducing elements of `dtype` needs (module `reduce_<type>`):
/// to the accumulator type (partial results of a split) and to the output type, in both
/// forms, and the row form from the accumulator to the output (second passes).
fn reduce_kernels(dtype: DType) -> Vec<ReduceKernel> {
    let mut out = Vec::new();
    for op in REDUCE_OPS {
        let Ok(final_dtype) = op.output_dtype(dtype) else {
            continue;
        };
        let acc = acc_dtype(op, dtype);
        out.push((op, dtype, acc, true));
        if final_dtype != acc {
            out.push((op, dtype, final_dtype, true));
        }
        if acc != dtype {
            out.push((op, acc, final_dtype, false));
        }
    }
    out
}

/// The reduction module of elements of `dtype`.
fn reduce_source(dtype: DType) -> String {
    let mut src = format!("{COMMON}\n{OPS}\n{REDUCE}\n");
    for (op, from, to, cols) in reduce_kernels(dtype) {
        let (ct, tn) = type_names(from).expect("real inputs have real accumulators");
        let (co, on) = type_names(to).expect("outputs of real inputs are real");
        let f = functor(op).expect("listed operations have functors");
        let args = format!("({}, {f}, {ct}, {tn}, {co}, {on})\n", op.name());
        src.push_str(&format!("NV_REDUCE_ROWS{args}"));
        if cols {
            src.push_str(&format!("NV_REDUCE_COLS{args}"));
        }
    }
    src
}

/// The arg-reduction module of elements of `dtype`.
fn arg_source(dtype: DType) -> String {
    let (ct, tn) = type_names(dtype).expect("complex has no kernels");
    format!("{COMMON}\n{OPS}\n{REDUCE}\nNV_ARG({ct}, {tn})\n")
}

/// The `logsumexp` and softmax module of a float type.
fn softmax_source(dtype: DType) -> String {
    let (ct, tn) = type_names(dtype).expect("complex has no kernels");
    format!("{COMMON}\n{OPS}\n{REDUCE}\nNV_SOFTMAX({ct}, {tn})\n")
}

/// The CUDA functor of a scan (products keep the type).
fn scan_functor(op: ScanOp) -> &'static str {
    match op {
        ScanOp::Sum => "NvSum",
        ScanOp::Prod => "NvProdKeep",
        ScanOp::Max => "NvMax",
        ScanOp::Min => "NvMin",
        ScanOp::LogAddExp => "NvLogAdd",
    }
}

const SCAN_OPS: [ScanOp; 5] = [
    ScanOp::Sum,
    ScanOp::Prod,
    ScanOp::Max,
    ScanOp::Min,
    ScanOp::LogAddExp,
];

/// The module of every scan of inputs of `dtype`.
fn scan_source(dtype: DType) -> String {
    let (ct, tn) = type_names(dtype).expect("complex has no kernels");
    let mut src = format!("{COMMON}\n{OPS}\n{SCAN}\n");
    for op in SCAN_OPS {
        let Ok(out) = op.output_dtype(dtype) else {
            continue;
        };
        let (co, on) = type_names(out).expect("outputs of real inputs are real");
        src.push_str(&format!(
            "NV_SCAN({}, {}, {ct}, {tn}, {co}, {on})\n",
            op.name(),
            scan_functor(op)
        ));
    }
    src
}

/// Kernel `symbol` of module `<family>_<type of dtype>`, whose source `source(dtype)` gives.
fn kernel(
    place: &Place,
    family: &'static str,
    dtype: DType,
    source: fn(DType) -> String,
    symbol: Symbol,
) -> Result<Kernel> {
    place
        .gpu
        .kernel_of(family, Some(dtype), symbol, || source(dtype))
}

/// The threads given to each row of `n` elements: a warp, or the block for long rows.
fn lanes(n: usize) -> i32 {
    if n > WARP_ROW { THREADS as i32 } else { 32 }
}

/// Rows of at most this many bytes get a warp each when there are enough of them to fill
/// the device that way: a block per row would spend more on its synchronisation and
/// start-up than on the few loads each of its threads makes.
const WARP_ROW_BYTES: usize = 16 * 1024;
/// Warps resident per multiprocessor: runs that fill the device with a warp each are this
/// many per multiprocessor.
const WARPS_PER_SM: usize = 64;

/// The threads given to each of `tasks` contiguous runs of `n` elements of `bytes` bytes
/// on a device of `sms` multiprocessors: a warp for short runs, and for runs up to
/// [`WARP_ROW_BYTES`] when there are enough to fill the device with a warp each.
fn run_lanes(n: usize, bytes: usize, tasks: usize, sms: usize) -> i32 {
    if n <= WARP_ROW || (n * bytes <= WARP_ROW_BYTES && tasks >= sms * WARPS_PER_SM) {
        32
    } else {
        THREADS as i32
    }
}

/// The rows each block takes at once with `lanes` threads per row.
fn groups(lanes: i32) -> usize {
    THREADS / lanes as usize
}

/// `blocks` blocks (at least 1, at most [`MAX_BLOCKS`]) by `y`, of [`THREADS`] threads.
fn config(blocks: usize, y: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks.clamp(1, MAX_BLOCKS) as u32, y as u32, 1),
        block_dim: (THREADS as u32, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A strided view of `shape`/`strides` from `offset`, merged; `None` past eight axes.
fn view(shape: &[usize], strides: &[isize], offset: usize) -> Option<Strided> {
    Strided::of(&Layout {
        shape: shape.to_vec(),
        strides: strides.to_vec(),
        offset,
    })
    .ok()
}

/// `layout` without `axis`: the view that locates each position along it.
fn without_axis(layout: &Layout, axis: usize) -> Option<Strided> {
    let mut shape = layout.shape.clone();
    let mut strides = layout.strides.clone();
    shape.remove(axis);
    strides.remove(axis);
    view(&shape, &strides, layout.offset)
}

/// A row-kernel launch: `tasks = rows · parts` runs of at most `chunk` of each row's `n`
/// elements (row `r` where `rows` locates it), from `src` (of `dtype`) into `out` (of
/// `out_dtype`: one result per run, in order).
struct RowLaunch<'a> {
    op: ReduceOp,
    /// The type reduced (whose module holds the kernel).
    module: DType,
    dtype: DType,
    out_dtype: DType,
    src: u64,
    out: u64,
    rows: &'a Strided,
    nrows: usize,
    parts: usize,
    chunk: usize,
    n: usize,
}

fn launch_rows(place: &Place, l: &RowLaunch<'_>) -> Result<()> {
    let (tn, on) = (
        type_names(l.dtype).expect("real").1,
        type_names(l.out_dtype).expect("real").1,
    );
    let tasks = l.nrows * l.parts;
    let sms = place.gpu.props.sms as usize;
    let lanes = run_lanes(l.chunk.min(l.n), l.dtype.size(), tasks, sms);
    // A warp per run and a block per run are two kernels (see `nv_reduce_rows`).
    let form = if lanes == 32 { "warp_rows" } else { "rows" };
    let name = symbol!("reduce_{form}_{}_{tn}_{on}", l.op.name())?;
    let f = kernel(place, "reduce", l.module, reduce_source, name)?;
    let (t, p, c, n) = (tasks as i64, l.parts as i64, l.chunk as i64, l.n as i64);
    let params: [&dyn DeviceRepr; 7] = [&l.src, &l.out, &t, &p, &c, &n, l.rows];
    // SAFETY: `rows` locates, inside the source block, rows of `n` elements of the source
    // type with step 1 (the caller built it from the input's layout or a row-major block of
    // `nrows · n`); each run reads within its row; `out` holds `tasks` elements of the
    // output type; the arguments match `reduce_rows_*` and `reduce_warp_rows_*` in
    // `reduce.cu`.
    unsafe {
        f.launch(
            &place.stream,
            config(tasks.div_ceil(groups(lanes)), 1),
            &params,
        )
    }?;
    Ok(())
}

/// Reduces `nrows` rows of `n` contiguous elements (located by `rows`) of `src` into `out`,
/// splitting long rows over blocks when there are few of them.
#[allow(clippy::too_many_arguments)]
fn run_rows(
    place: &Place,
    (op, module): (ReduceOp, DType),
    dtype: DType,
    out_dtype: DType,
    src: u64,
    out: u64,
    rows: &Strided,
    nrows: usize,
    n: usize,
) -> Result<()> {
    let parts = if nrows < ROW_TASKS && n >= 16 * 1024 {
        ROW_TASKS.div_ceil(nrows).min(n.div_ceil(4096))
    } else {
        1
    };
    let mut l = RowLaunch {
        op,
        module,
        dtype,
        out_dtype,
        src,
        out,
        rows,
        nrows,
        parts: 1,
        chunk: n,
        n,
    };
    if parts <= 1 {
        return launch_rows(place, &l);
    }
    // Runs of a multiple of 64 elements keep every run's start 16-byte aligned when the
    // row's is.
    let chunk = n.div_ceil(parts).next_multiple_of(64);
    let parts = n.div_ceil(chunk);
    let acc = acc_dtype(op, dtype);
    let tmp = place
        .gpu
        .alloc
        .alloc(nrows * parts * acc.size(), place.stream_id)?;
    (l.out_dtype, l.out, l.parts, l.chunk) = (acc, tmp.ptr(), parts, chunk);
    launch_rows(place, &l)?;
    // The partial results: rows of `parts`, row-major. The block goes back to the cache
    // when `tmp` drops, for later work of this stream only, which runs after this pass.
    let prow = view(&[nrows], &[parts as isize], 0).expect("one axis");
    launch_rows(
        place,
        &RowLaunch {
            op,
            module,
            dtype: acc,
            out_dtype,
            src: tmp.ptr(),
            out,
            rows: &prow,
            nrows,
            parts: 1,
            chunk: parts,
            n: parts,
        },
    )
}

/// Reduces, for each of `nout` outputs (located by `cols`), the `nred` elements listed by
/// `red`, a thread per output, splitting the reduced extent over blocks when the outputs
/// are too few to fill the device; partial results then go through [`run_rows`].
#[allow(clippy::too_many_arguments)]
fn run_cols(
    place: &Place,
    op: ReduceOp,
    dtype: DType,
    out_dtype: DType,
    src: u64,
    out: u64,
    cols: &Strided,
    red: &Strided,
    nout: usize,
    nred: usize,
) -> Result<()> {
    // At most COL_PARTS parts: their second pass then never splits again.
    let threads = place.gpu.props.sms as usize * COL_THREADS_PER_SM;
    let parts = if nout < threads && nred >= 64 {
        threads.div_ceil(nout).min(nred / 32).clamp(1, COL_PARTS)
    } else {
        1
    };
    let chunk = nred.div_ceil(parts);
    let parts = nred.div_ceil(chunk);
    let acc = acc_dtype(op, dtype);
    let tmp = if parts > 1 {
        Some(
            place
                .gpu
                .alloc
                .alloc(nout * parts * acc.size(), place.stream_id)?,
        )
    } else {
        None
    };
    let (dst, dst_dtype) = match &tmp {
        Some(t) => (t.ptr(), acc),
        None => (out, out_dtype),
    };
    let (tn, on) = (
        type_names(dtype).expect("real").1,
        type_names(dst_dtype).expect("real").1,
    );
    let name = symbol!("reduce_cols_{}_{tn}_{on}", op.name())?;
    let f = kernel(place, "reduce", dtype, reduce_source, name)?;
    let (no, p, c, nr) = (nout as i64, parts as i64, chunk as i64, nred as i64);
    let params: [&dyn DeviceRepr; 8] = [&src, &dst, &no, &p, &c, &nr, cols, red];
    // SAFETY: `cols` locates each output's first element and `red` (offset 0) the `nred`
    // reduced positions from it, all inside the source block (both come from the input's
    // layout); `dst` holds `nout · parts` elements of its type; the arguments match
    // `reduce_cols_*`.
    unsafe {
        f.launch(
            &place.stream,
            config(nout.div_ceil(THREADS), parts),
            &params,
        )
    }?;
    if let Some(t) = &tmp {
        // Partial results as rows of `parts` (`out[o * parts + part]`).
        let prow = view(&[nout], &[parts as isize], 0).expect("one axis");
        run_rows(
            place,
            (op, dtype),
            acc,
            out_dtype,
            t.ptr(),
            out,
            &prow,
            nout,
            parts,
        )?;
    }
    Ok(())
}

/// A reduction (`Primitive::Reduce`) on the GPU, or `None` where it stays on the CPU (see
/// the module's documentation).
pub(crate) fn reduce(
    place: &Place,
    op: ReduceOp,
    axes: &[usize],
    x: &ArrayData,
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    let dtype = x.dtype();
    if type_names(dtype).is_none() {
        return Ok(None);
    }
    if op == ReduceOp::LogSumExp {
        return fused_rows(place, "logsumexp", x, &outputs[0].0);
    }
    let (shape, out_dtype) = (&outputs[0].0, outputs[0].1);
    let nout: usize = shape.iter().product();
    // Reductions do not depend on the order in which they see their elements, so reversed
    // axes are read forwards, and idempotent ones (max, min, all, any) skip broadcast axes.
    let idempotent = !matches!(op, ReduceOp::Sum | ReduceOp::Prod);
    let mut s = ReducePlan::new(&x.layout, axes, idempotent);
    s.read_forwards();
    let (kshape, kstrides): (Vec<usize>, Vec<isize>) = s.kept.iter().copied().unzip();
    let Some(rows) = view(&kshape, &kstrides, s.offset) else {
        return Ok(None);
    };
    let (out, out_ptr) = place.output(out_dtype, shape)?;
    if nout == 0 {
        return Ok(Some(vec![out]));
    }
    let src = place.input(x)?;
    let nred: usize = s.red.iter().map(|r| r.0).product();
    // Runs of step 1 (of no element, or of one, when nothing is left to reduce).
    let unit_runs = s.empty || s.red.is_empty() || (s.red.len() == 1 && s.red[0].1 == 1);
    let (rn, rs): (Vec<usize>, Vec<isize>) = s.red.iter().copied().unzip();
    if !unit_runs
        && s.unit_inner()
        && let Some(red) = view(&rn, &rs, 0)
    {
        run_cols(
            place, op, dtype, out_dtype, src, out_ptr, &rows, &red, nout, nred,
        )?;
        return Ok(Some(vec![out]));
    }
    // Rows: the input's runs, or for any other layout those of a row-major copy with the
    // reduced axes last (kept until the rows are queued).
    let copy;
    let (src, rows, n) = if unit_runs {
        (src, rows, if s.empty { 0 } else { nred })
    } else {
        let shape_all = [kshape, rn].concat();
        let strides_all = [kstrides, rs].concat();
        if view(&shape_all, &strides_all, s.offset).is_none() {
            return Ok(None);
        }
        let moved = x.view(Layout {
            shape: shape_all,
            strides: strides_all,
            offset: s.offset,
        });
        let Some(c) = convert(place, &moved, dtype)? else {
            return Ok(None);
        };
        copy = c;
        let rows = view(&[nout], &[nred as isize], 0).expect("one axis");
        (place.input(&copy)?, rows, nred)
    };
    run_rows(
        place,
        (op, dtype),
        dtype,
        out_dtype,
        src,
        out_ptr,
        &rows,
        nout,
        n,
    )?;
    Ok(Some(vec![out]))
}

/// `argmax`/`argmin` along `axis` on the GPU (`u32` positions), or `None` where it stays on
/// the CPU.
pub(crate) fn arg_reduce(
    place: &Place,
    op: ArgReduceOp,
    axis: usize,
    x: &ArrayData,
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    let dtype = x.dtype();
    let Some((_, tn)) = type_names(dtype) else {
        return Ok(None);
    };
    let shape = &outputs[0].0;
    let nout: usize = shape.iter().product();
    let (n, s) = (x.layout.shape[axis], x.layout.strides[axis]);
    let Some(rows) = without_axis(&x.layout, axis) else {
        return Ok(None);
    };
    let (out, out_ptr) = place.output(DType::U32, shape)?;
    if nout == 0 || n == 0 {
        // An empty axis is refused when the node is recorded; without outputs there is
        // nothing to do.
        return Ok(Some(vec![out]));
    }
    let src = place.input(x)?;
    let cols = s.unsigned_abs() != 1
        && nout >= 1024
        && ReducePlan::new(&x.layout, &[axis], true).unit_inner();
    let lanes = lanes(n);
    let (kind, blocks) = if cols {
        ("cols", nout.div_ceil(THREADS))
    } else {
        ("rows", nout.div_ceil(groups(lanes)))
    };
    let name = symbol!("{}_{kind}_{tn}", op.name())?;
    let f = kernel(place, "arg", dtype, arg_source, name)?;
    let (no, n64, s64) = (nout as i64, n as i64, s as i64);
    let mut params: Vec<&dyn DeviceRepr> = vec![&src, &out_ptr, &no, &n64, &s64, &rows];
    if !cols {
        params.push(&lanes);
    }
    // SAFETY: `rows` (the input's layout without `axis`) locates each output's first
    // element and the `n` elements `s` apart from it are the axis, inside the input block;
    // `out_ptr` holds `nout` `u32`; the arguments match `arg{max,min}_{rows,cols}_*` in
    // `reduce.cu` (`lanes` for rows only).
    unsafe { f.launch(&place.stream, config(blocks, 1), &params) }?;
    Ok(Some(vec![out]))
}

/// `logsumexp` (a reduction over the last axis, shaped `shape`) or `softmax` (`shape` is
/// the input's) of rows along the last axis of `x`, computed in `float32` for the half
/// types; `None` for types without these kernels.
fn fused_rows(
    place: &Place,
    which: &str,
    x: &ArrayData,
    shape: &[usize],
) -> Result<Option<Vec<ArrayData>>> {
    let dtype = x.dtype();
    if !FLOAT_TYPES.contains(&dtype) {
        return Ok(None);
    }
    let tn = type_names(dtype).expect("a float type").1;
    let Some(axis) = x.layout.shape.len().checked_sub(1) else {
        return Ok(None);
    };
    let (n, s) = (x.layout.shape[axis], x.layout.strides[axis]);
    let Some(rows) = without_axis(&x.layout, axis) else {
        return Ok(None);
    };
    let (out, out_ptr) = place.output(dtype, shape)?;
    let nrows: usize = x.layout.shape[..axis].iter().product();
    if nrows == 0 || n == 0 {
        // No elements (logsumexp refuses an empty axis when the node is recorded).
        return Ok(Some(vec![out]));
    }
    let src = place.input(x)?;
    let lanes = lanes(n);
    let name = symbol!("{which}_rows_{tn}")?;
    let f = kernel(place, "softmax", dtype, softmax_source, name)?;
    let (nr, n64, s64) = (nrows as i64, n as i64, s as i64);
    let params: [&dyn DeviceRepr; 7] = [&src, &out_ptr, &nr, &n64, &s64, &rows, &lanes];
    // SAFETY: `rows` locates each row's first element and its `n` elements lie `s` apart,
    // inside the input block; `out_ptr` holds `nrows` results (logsumexp) or `nrows · n`
    // elements (softmax, row-major) of the input's type; the arguments match
    // `{logsumexp,softmax}_rows_*` in `reduce.cu`.
    unsafe {
        f.launch(
            &place.stream,
            config(nrows.div_ceil(groups(lanes)), 1),
            &params,
        )
    }?;
    Ok(Some(vec![out]))
}

/// Softmax over the last axis (`Primitive::Softmax`) on the GPU.
pub(crate) fn softmax(place: &Place, x: &ArrayData) -> Result<Option<Vec<ArrayData>>> {
    fused_rows(place, "softmax", x, &x.layout.shape.clone())
}

/// A scan (`Primitive::Scan`) on the GPU, or `None` where it stays on the CPU.
pub(crate) fn scan(
    place: &Place,
    op: ScanOp,
    (axis, reverse, inclusive): (usize, bool, bool),
    x: &ArrayData,
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    let dtype = x.dtype();
    let Some((_, tn)) = type_names(dtype) else {
        return Ok(None);
    };
    let (shape, out_dtype) = (&outputs[0].0, outputs[0].1);
    let Some(on) = type_names(out_dtype).map(|t| t.1) else {
        return Ok(None);
    };
    let Some(cols) = without_axis(&x.layout, axis) else {
        return Ok(None);
    };
    let (out, out_ptr) = place.output(out_dtype, shape)?;
    let size: usize = shape.iter().product();
    if size == 0 {
        return Ok(Some(vec![out]));
    }
    let src = place.input(x)?;
    let (len, s) = (shape[axis], x.layout.strides[axis]);
    let inner: usize = shape[axis + 1..].iter().product();
    let lines = size / len;
    let (l64, s64, i64_, lines64) = (len as i64, s as i64, inner as i64, lines as i64);
    let (rev, inc) = (i32::from(reverse), i32::from(inclusive));
    let rows = inner == 1;
    let form = if rows { "rows" } else { "cols" };
    let name = symbol!("scan_{form}_{}_{tn}_{on}", op.name())?;
    let f = kernel(place, "scan", dtype, scan_source, name)?;
    let mut params: Vec<&dyn DeviceRepr> = vec![&src, &out_ptr, &lines64, &l64];
    if !rows {
        params.push(&i64_);
    }
    params.extend([&s64 as &dyn DeviceRepr, &cols, &rev, &inc]);
    let blocks = if rows { lines } else { lines.div_ceil(THREADS) };
    // SAFETY: `cols` (the input's layout without `axis`) locates each line's first element
    // and its `len` elements lie `s` apart, inside the input block; `out_ptr` holds `size`
    // elements of the output type, written row-major; the arguments match `scan_rows_*`
    // (without `inner`) or `scan_cols_*` in `scan.cu`.
    unsafe { f.launch(&place.stream, config(blocks, 1), &params) }?;
    Ok(Some(vec![out]))
}

/// Every kernel source of this family, complete, for compiling ahead of time (CI).
#[cfg(test)]
pub(crate) fn all_sources() -> Vec<(String, String)> {
    let mut out = Vec::new();
    // Every element type with kernels (all but complex).
    for d in DType::ALL {
        let Some((_, tn)) = type_names(d) else {
            continue;
        };
        out.push((format!("reduce_{tn}"), reduce_source(d)));
        out.push((format!("arg_{tn}"), arg_source(d)));
        out.push((format!("scan_{tn}"), scan_source(d)));
        if d.is_float() {
            out.push((format!("softmax_{tn}"), softmax_source(d)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_lists_cover_second_passes() {
        // Every split reduction's second pass (accumulator to output) has a kernel, and the
        // accumulator of an accumulator is itself.
        for d in [
            DType::Bool,
            DType::I8,
            DType::U16,
            DType::I32,
            DType::F16,
            DType::BF16,
        ] {
            for op in REDUCE_OPS {
                let Ok(final_dtype) = op.output_dtype(d) else {
                    continue;
                };
                let acc = acc_dtype(op, d);
                assert_eq!(acc_dtype(op, acc), acc, "{op:?} {d}");
                let ks = reduce_kernels(d);
                assert!(ks.contains(&(op, d, acc, true)), "{op:?} of {d}");
                assert!(
                    ks.iter().any(|k| (k.0, k.1, k.2) == (op, acc, final_dtype)),
                    "{op:?} of {d}: {acc} to {final_dtype}"
                );
            }
        }
    }
}
