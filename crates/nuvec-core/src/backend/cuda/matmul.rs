//! Matrix products on the GPU through cuBLASLt (loaded at run time, like the driver).
//!
//! Types: `f32` computes in full `f32` (`CUBLAS_COMPUTE_32F`: TF32 stays off, so results
//! match the CPU closely), `f16` and `bf16` multiply with `f32` accumulation and `f32`
//! scales, `f64` in `f64`. Complex products return `None` and run on the CPU bridge.
//!
//! Layouts: cuBLAS is column-major, nuvec row-major, so `out = a @ b` is computed as
//! `outᵀ = bᵀ · aᵀ`: a row-major matrix is the transpose of a column-major one with the same
//! leading dimension, so nothing is copied. A transposed view (last two strides swapped) goes
//! to cuBLAS as a transpose flag, a view of some columns as a larger leading dimension. Batch
//! axes become one strided batch where they merge into a single axis (a broadcast batch is a
//! stride of 0); where they do not, the outer axes are looped over with pointer offsets, one
//! strided-batch call each, up to [`MAX_CALLS`] calls; past that, the operands are copied to
//! row-major first and run as one call. A batch whose right operand is shared (broadcast) and
//! whose left operand's rows step uniformly across the batch runs as one tall product.
//! Operands that no flag and leading dimension describe (negative strides, broadcast rows or
//! columns, steps in both axes) are copied to row-major first with the strided copy kernel.
//!
//! `addmm` copies `c` (any layout, broadcast included) into the row-major output and lets
//! cuBLASLt compute `alpha · (a @ b) + beta · out` in place.
//!
//! State: one cuBLASLt handle per device, one 32 MiB workspace per stream (from the caching
//! allocator, kept), and per shape, type, transposes, leading dimensions, batch strides and
//! pointer alignments the descriptors and the algorithm the heuristic chose (asked once).
//!
//! The cases that run on the CPU bridge (`None`): complex types, and `addmm` with an empty
//! inner axis (`k = 0`, where the result is `beta · c`). A plain product with `k = 0` is
//! zero-filled on the device; an empty output returns at once.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::cublaslt::result::{self as lt, CublasError};
use cudarc::cublaslt::sys;
use cudarc::driver::result as driver_result;

use super::elementwise::convert;
use super::{DeviceBuffer, Place};
use crate::array::{ArrayData, Layout, collapse, for_each_strided, row_major_strides};
use crate::ops::linalg::MatmulOp;
use crate::primitive::OutputSpec;
use crate::{DType, Error, Result};

/// Bytes of cuBLASLt workspace per stream (what NVIDIA advises for Hopper).
const WORKSPACE: usize = 32 << 20;
/// The most strided-batch calls one product is split into before its operands are copied to
/// row-major instead.
const MAX_CALLS: usize = 64;
/// Cached plans kept before the cache is emptied (each holds a few small descriptors).
const MAX_PLANS: usize = 4096;

/// cuBLASLt's types for one element type: data, compute and scale.
#[derive(Clone, Copy)]
struct Types {
    data: sys::cudaDataType,
    compute: sys::cublasComputeType_t,
    scale: sys::cudaDataType,
}

fn types(dtype: DType) -> Option<Types> {
    use sys::cublasComputeType_t::{CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_64F};
    use sys::cudaDataType::{CUDA_R_16BF, CUDA_R_16F, CUDA_R_32F, CUDA_R_64F};
    let (data, compute, scale) = match dtype {
        DType::F32 => (CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F),
        DType::F16 => (CUDA_R_16F, CUBLAS_COMPUTE_32F, CUDA_R_32F),
        DType::BF16 => (CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUDA_R_32F),
        DType::F64 => (CUDA_R_64F, CUBLAS_COMPUTE_64F, CUDA_R_64F),
        _ => return None,
    };
    Some(Types {
        data,
        compute,
        scale,
    })
}

/// How cuBLAS reads one operand: stored column-major with leading dimension `ld`, used as
/// it is or transposed, `stride` elements between the matrices of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Side {
    /// Whether cuBLAS transposes the stored matrix.
    pub(crate) trans: bool,
    /// The stored matrix's leading dimension (elements between columns).
    pub(crate) ld: i64,
    /// Elements between consecutive matrices of the batch.
    pub(crate) stride: i64,
}

/// How cuBLAS (column-major) reads `xᵀ`, for a row-major-indexed `rows × cols` matrix `x`
/// with row stride `rs` and column stride `cs`: `xᵀ` stored as it is (`cs = 1`, `ld = rs`)
/// or `x` stored column-major and transposed (`rs = 1`, `ld = cs`). Strides of axes of
/// size 1 are free. `None` when neither describes the view (copy it first).
fn side(rows: usize, cols: usize, rs: isize, cs: isize) -> Option<Side> {
    let at_least = |ld: isize, n: usize| ld >= n.max(1) as isize;
    if cs == 1 || cols <= 1 {
        let ld = if rows <= 1 { cols.max(1) as isize } else { rs };
        if at_least(ld, cols) {
            return Some(Side {
                trans: false,
                ld: ld as i64,
                stride: 0,
            });
        }
    }
    if rs == 1 || rows <= 1 {
        let ld = if cols <= 1 { rows.max(1) as isize } else { cs };
        if at_least(ld, rows) {
            return Some(Side {
                trans: true,
                ld: ld as i64,
                stride: 0,
            });
        }
    }
    None
}

/// One cuBLASLt problem in its own (column-major) terms: `D (m × n) = op(A) · op(B)` over
/// `batch` matrices. For `out = a @ b`, `A` is our `b` (giving `bᵀ`), `B` our `a` (giving
/// `aᵀ`) and `D` our output (`outᵀ`, leading dimension `m`). `D` also serves as `C`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Gemm {
    /// Rows of `op(A)` and `D`.
    pub(crate) m: u64,
    /// Columns of `op(B)` and `D`.
    pub(crate) n: u64,
    /// The inner axis.
    pub(crate) k: u64,
    /// How `A` is stored.
    pub(crate) a: Side,
    /// How `B` is stored.
    pub(crate) b: Side,
    /// `D`'s leading dimension (at least `m`).
    pub(crate) d_ld: i64,
    /// Elements between consecutive matrices of `D`.
    pub(crate) d_stride: i64,
    /// Matrices per call (at least 1).
    pub(crate) batch: i32,
}

/// The calls for one product: the problem, and per call the element offsets of the first
/// matrix of `b` (cuBLAS's `A`), of `a` (cuBLAS's `B`) and of the output.
#[derive(Debug, Clone, PartialEq)]
struct Schedule {
    gemm: Gemm,
    starts: Vec<[usize; 3]>,
}

/// A schedule, or which operands must be copied to row-major first.
#[derive(Debug, Clone, PartialEq)]
enum Planned {
    Run(Schedule),
    Copy { a: bool, b: bool },
}

/// Plans `out = a @ b` for `a: [..., m, k]` and `b: [..., k, n]` with equal batch axes and a
/// row-major output (nothing empty).
fn schedule(a: &Layout, b: &Layout) -> Result<Planned> {
    let nd = a.shape.len();
    let (m, k, n) = (a.shape[nd - 2], a.shape[nd - 1], b.shape[nd - 1]);
    let (a_rs, a_cs) = (a.strides[nd - 2], a.strides[nd - 1]);
    let (b_rs, b_cs) = (b.strides[nd - 2], b.strides[nd - 1]);
    let batch = &a.shape[..nd - 2];
    let count: usize = batch.iter().product();
    let negative = |l: &Layout| l.strides[..nd - 2].iter().any(|&s| s < 0);
    let (sa, sb) = (side(m, k, a_rs, a_cs), side(k, n, b_rs, b_cs));
    let copy_a = sa.is_none() || negative(a);
    let copy_b = sb.is_none() || negative(b);
    if copy_a || copy_b {
        return Ok(Planned::Copy {
            a: copy_a,
            b: copy_b,
        });
    }
    let (sa, sb) = (sa.expect("checked"), sb.expect("checked"));
    let gemm = |rows: usize, sa: Side, sb: Side, d_stride: usize, calls: usize| -> Result<Gemm> {
        let batch = i32::try_from(calls).map_err(|_| Error::Unsupported {
            op: "matmul",
            what: format!("a batch of {calls} products on the GPU"),
        })?;
        Ok(Gemm {
            m: n as u64,
            n: rows as u64,
            k: k as u64,
            a: sb,
            b: sa,
            d_ld: n.max(1) as i64,
            d_stride: d_stride as i64,
            batch,
        })
    };
    // A shared `b` and rows of `a` that step uniformly through the batch: one tall product.
    let shared_b = b.strides[..nd - 2]
        .iter()
        .zip(batch)
        .all(|(&s, &d)| s == 0 || d == 1);
    if count > 1 && shared_b {
        let (merged, strides) = collapse(&a.shape[..nd - 1], &[&a.strides[..nd - 1]]);
        if merged.len() == 1
            && let Some(tall) = side(m * count, k, strides[0][0], a_cs)
        {
            return Ok(Planned::Run(Schedule {
                gemm: gemm(m * count, tall, sb, 0, 1)?,
                starts: vec![[b.offset, a.offset, 0]],
            }));
        }
    }
    let out_batch: Vec<isize> = row_major_strides(batch)
        .iter()
        .map(|&s| s * (m * n) as isize)
        .collect();
    let (shape, strides) = collapse(
        batch,
        &[&b.strides[..nd - 2], &a.strides[..nd - 2], &out_batch],
    );
    let Some((&inner, outer)) = shape.split_last() else {
        // One product.
        return Ok(Planned::Run(Schedule {
            gemm: gemm(m, sa, sb, 0, 1)?,
            starts: vec![[b.offset, a.offset, 0]],
        }));
    };
    let calls: usize = outer.iter().product();
    if calls > MAX_CALLS {
        // Row-major operands merge into one batch axis; copy whichever is not.
        let (copy_a, copy_b) = (!a.is_row_contiguous(), !b.is_row_contiguous());
        if copy_a || copy_b {
            return Ok(Planned::Copy {
                a: copy_a,
                b: copy_b,
            });
        }
    }
    let last = shape.len() - 1;
    let (stride_b, stride_a, stride_d) = (strides[0][last], strides[1][last], strides[2][last]);
    let sa = Side {
        stride: stride_a as i64,
        ..sa
    };
    let sb = Side {
        stride: stride_b as i64,
        ..sb
    };
    let mut starts = Vec::with_capacity(calls);
    let outer_strides: Vec<&[isize]> = strides.iter().map(|s| &s[..last]).collect();
    for_each_strided(
        outer,
        [outer_strides[0], outer_strides[1], outer_strides[2]],
        [b.offset, a.offset, 0],
        0,
        calls,
        |p| starts.push(p),
    );
    Ok(Planned::Run(Schedule {
        gemm: gemm(m, sa, sb, stride_d as usize, inner)?,
        starts,
    }))
}

fn blas(what: &'static str) -> impl Fn(CublasError) -> Error {
    move |e| Error::Device(format!("cuda: cuBLASLt: {what}: {e}"))
}

/// Whether cuBLASLt loads, checked once: cudarc panics at the first call into a library it
/// cannot open, so nothing calls it before this says yes.
fn library() -> Result<()> {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: only tries to open the library; nothing is called through it.
    if *PRESENT.get_or_init(|| unsafe { sys::is_culib_present() }) {
        Ok(())
    } else {
        Err(Error::Device(
            "cuda: cuBLASLt (libcublasLt) was not found, so matrix products cannot run on the \
             GPU: put the folder that holds libcublasLt.so.* (CUDA's lib64, or the nvidia-cublas \
             package's lib) on LD_LIBRARY_PATH"
                .into(),
        ))
    }
}

/// A cuBLASLt handle; made once per device and never destroyed.
#[derive(Clone, Copy)]
struct Handle(sys::cublasLtHandle_t);

// SAFETY: a cuBLASLt handle may be used from any thread; nuvec never destroys it, and every
// call passes its own stream and a workspace that only that stream uses.
unsafe impl Send for Handle {}
// SAFETY: as above.
unsafe impl Sync for Handle {}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The handle of the device of `place` (its context is current on this thread).
fn handle(place: &Place) -> Result<Handle> {
    static HANDLES: OnceLock<Mutex<HashMap<usize, Handle>>> = OnceLock::new();
    let mut handles = lock(HANDLES.get_or_init(Default::default));
    if let Some(&h) = handles.get(&place.gpu.ordinal) {
        return Ok(h);
    }
    let h = Handle(lt::create_handle().map_err(blas("creating a handle"))?);
    handles.insert(place.gpu.ordinal, h);
    Ok(h)
}

/// The workspace of the stream of `place`: allocated once and kept, used only by work
/// queued on that stream (so in order).
fn workspace(place: &Place) -> Result<u64> {
    static SPACES: OnceLock<Mutex<HashMap<usize, DeviceBuffer>>> = OnceLock::new();
    let mut spaces = lock(SPACES.get_or_init(Default::default));
    if let Some(buf) = spaces.get(&place.stream_id) {
        return Ok(buf.ptr());
    }
    let buf = place.gpu.alloc.alloc(WORKSPACE, place.stream_id)?;
    let ptr = buf.ptr();
    spaces.insert(place.stream_id, buf);
    Ok(ptr)
}

struct Desc(sys::cublasLtMatmulDesc_t);
struct MatLayout(sys::cublasLtMatrixLayout_t);
struct Pref(sys::cublasLtMatmulPreference_t);

impl Drop for Desc {
    fn drop(&mut self) {
        // SAFETY: made by `create_matmul_desc`, destroyed once, here.
        let _ = unsafe { lt::destroy_matmul_desc(self.0) };
    }
}

impl Drop for MatLayout {
    fn drop(&mut self) {
        // SAFETY: made by `create_matrix_layout`, destroyed once, here.
        let _ = unsafe { lt::destroy_matrix_layout(self.0) };
    }
}

impl Drop for Pref {
    fn drop(&mut self) {
        // SAFETY: made by `create_matmul_pref`, destroyed once, here.
        let _ = unsafe { lt::destroy_matmul_pref(self.0) };
    }
}

/// The descriptors of one problem and the algorithm the heuristic chose for it.
struct Plan {
    desc: Desc,
    a: MatLayout,
    b: MatLayout,
    d: MatLayout,
    algo: sys::cublasLtMatmulAlgo_t,
    workspace: usize,
}

// SAFETY: after creation the descriptors are only read (by `cublasLtMatmul`), which cuBLASLt
// allows from several threads at once; they are destroyed only when the last user drops the
// plan.
unsafe impl Send for Plan {}
// SAFETY: as above.
unsafe impl Sync for Plan {}

/// What a plan depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    ordinal: usize,
    dtype: DType,
    gemm: Gemm,
    /// The alignments in bytes (at most 256) of every `A`, `B` and `D` pointer used.
    align: [u32; 3],
}

fn set_attr<T>(
    what: &'static str,
    set: impl FnOnce(*const c_void, usize) -> std::result::Result<(), CublasError>,
    value: &T,
) -> Result<()> {
    set((value as *const T).cast(), std::mem::size_of::<T>()).map_err(blas(what))
}

/// A column-major `rows × cols` matrix layout with a batch.
fn matrix(
    t: Types,
    (rows, cols, ld): (u64, u64, i64),
    batch: i32,
    stride: i64,
) -> Result<MatLayout> {
    let layout = MatLayout(
        lt::create_matrix_layout(t.data, rows, cols, ld).map_err(blas("a matrix layout"))?,
    );
    if batch > 1 {
        use sys::cublasLtMatrixLayoutAttribute_t::*;
        // SAFETY (both): the layout is live; the values have the attribute's type (int32
        // batch count, int64 stride) and size.
        set_attr(
            "the batch count",
            |p, n| unsafe {
                lt::set_matrix_layout_attribute(layout.0, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, p, n)
            },
            &batch,
        )?;
        set_attr(
            "the batch stride",
            |p, n| unsafe {
                lt::set_matrix_layout_attribute(
                    layout.0,
                    CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                    p,
                    n,
                )
            },
            &stride,
        )?;
    }
    Ok(layout)
}

/// The descriptors and the heuristic's choice for `key`.
fn make_plan(handle: Handle, key: &Key, t: Types) -> Result<Plan> {
    use sys::cublasLtMatmulDescAttributes_t::{
        CUBLASLT_MATMUL_DESC_TRANSA, CUBLASLT_MATMUL_DESC_TRANSB,
    };
    use sys::cublasLtMatmulPreferenceAttributes_t::*;
    let g = key.gemm;
    let desc =
        Desc(lt::create_matmul_desc(t.compute, t.scale).map_err(blas("a matmul descriptor"))?);
    for (attr, trans) in [
        (CUBLASLT_MATMUL_DESC_TRANSA, g.a.trans),
        (CUBLASLT_MATMUL_DESC_TRANSB, g.b.trans),
    ] {
        // cublasOperation_t: 0 is N, 1 is T.
        let op = i32::from(trans);
        // SAFETY: the descriptor is live; the value is an int32 cublasOperation_t.
        set_attr(
            "a transpose flag",
            |p, n| unsafe { lt::set_matmul_desc_attribute(desc.0, attr, p, n) },
            &op,
        )?;
    }
    // Stored shapes: an operand used transposed is stored the other way round.
    let stored = |rows: u64, cols: u64, s: Side| {
        if s.trans {
            (cols, rows, s.ld)
        } else {
            (rows, cols, s.ld)
        }
    };
    let a = matrix(t, stored(g.m, g.k, g.a), g.batch, g.a.stride)?;
    let b = matrix(t, stored(g.k, g.n, g.b), g.batch, g.b.stride)?;
    let d = matrix(t, (g.m, g.n, g.d_ld), g.batch, g.d_stride)?;
    let pref = Pref(lt::create_matmul_pref().map_err(blas("a preference"))?);
    let bytes = WORKSPACE as u64;
    // SAFETY: the preference is live; the value is the uint64 the attribute takes.
    set_attr(
        "the workspace size",
        |p, n| unsafe {
            lt::set_matmul_pref_attribute(pref.0, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, p, n)
        },
        &bytes,
    )?;
    // Without these the heuristic assumes 256-byte aligned pointers, which views at an
    // offset need not be.
    for (attr, align) in [
        (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align[0]),
        (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align[1]),
        (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align[2]),
        (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align[2]),
    ] {
        // SAFETY: the preference is live; the value is the uint32 the attribute takes.
        set_attr(
            "an alignment",
            |p, n| unsafe { lt::set_matmul_pref_attribute(pref.0, attr, p, n) },
            &align,
        )?;
    }
    // SAFETY: every descriptor is live and describes the problem; C and D share a layout.
    let found =
        unsafe { lt::get_matmul_algo_heuristic(handle.0, desc.0, a.0, b.0, d.0, d.0, pref.0) }
            .map_err(|e| {
                Error::Device(format!(
                    "cuda: cuBLASLt found no algorithm for {} {:?} (alignments {:?}): {e}",
                    key.dtype, key.gemm, key.align
                ))
            })?;
    Ok(Plan {
        desc,
        a,
        b,
        d,
        algo: found.algo,
        workspace: found.workspaceSize.min(WORKSPACE),
    })
}

/// The cached plan for `key`, made on first use.
fn plan(handle: Handle, key: Key, t: Types) -> Result<Arc<Plan>> {
    static PLANS: OnceLock<Mutex<HashMap<Key, Arc<Plan>>>> = OnceLock::new();
    let plans = PLANS.get_or_init(Default::default);
    if let Some(p) = lock(plans).get(&key) {
        return Ok(Arc::clone(p));
    }
    let p = Arc::new(make_plan(handle, &key, t)?);
    let mut plans = lock(plans);
    if plans.len() >= MAX_PLANS {
        plans.clear();
    }
    plans.insert(key, Arc::clone(&p));
    Ok(p)
}

/// The largest power of two, at most 256, that divides every address (zero steps ignored).
fn alignment(addresses: impl Iterator<Item = u64>) -> u32 {
    let bits = addresses.fold(256u64, |acc, x| acc | x);
    1 << bits.trailing_zeros().min(8)
}

/// `alpha` and `beta` in the scale type.
enum Scalars {
    F32(f32, f32),
    F64(f64, f64),
}

impl Scalars {
    fn pointers(&self) -> (*const c_void, *const c_void) {
        match self {
            Scalars::F32(a, b) => ((a as *const f32).cast(), (b as *const f32).cast()),
            Scalars::F64(a, b) => ((a as *const f64).cast(), (b as *const f64).cast()),
        }
    }
}

/// A matrix-product primitive on the GPU, or `None` for the cases listed in the module's
/// documentation.
pub(crate) fn eval(
    place: &Place,
    op: &MatmulOp,
    inputs: &mut [ArrayData],
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    let (shape, dtype) = (&outputs[0].0, outputs[0].1);
    if types(dtype).is_none() {
        return Ok(None);
    }
    let nd = shape.len();
    let k = inputs[0].layout.shape[nd - 1];
    let (alpha, beta) = match op {
        MatmulOp::Matmul => (1.0, 0.0),
        MatmulOp::AddMm { alpha, beta } => (*alpha, *beta),
    };
    let with_c = matches!(op, MatmulOp::AddMm { .. });
    if with_c && k == 0 {
        return Ok(None);
    }
    // The output: `c` copied to row-major (scaled by cuBLASLt's beta), or a fresh block.
    let (out, out_ptr) = if with_c {
        let copy = convert(place, &inputs[2], dtype)?
            .ok_or_else(|| Error::Device(format!("cuda: addmm: no copy kernel for {dtype}")))?;
        let ptr = place.input(&copy)?;
        (copy, ptr)
    } else {
        place.output(dtype, shape)?
    };
    if out.layout.size() == 0 {
        return Ok(Some(vec![out]));
    }
    if k == 0 {
        let bytes = out.layout.size() * dtype.size();
        // SAFETY: the output block was just allocated with `bytes` bytes on this stream.
        unsafe { driver_result::memset_d8_async(out_ptr, 0, bytes, place.stream.cu_stream()) }
            .map_err(|e| Error::Device(format!("cuda: matmul: zero-filling: {e}")))?;
        return Ok(Some(vec![out]));
    }
    let (mut a, mut b) = (inputs[0].clone(), inputs[1].clone());
    let mut copied = false;
    let sched = loop {
        match schedule(&a.layout, &b.layout)? {
            Planned::Run(s) => break s,
            Planned::Copy { a: ca, b: cb } if !copied => {
                let copy = |x: &ArrayData| -> Result<ArrayData> {
                    convert(place, x, dtype)?.ok_or_else(|| {
                        Error::Device(format!("cuda: matmul: no copy kernel for {dtype}"))
                    })
                };
                if ca {
                    a = copy(&a)?;
                }
                if cb {
                    b = copy(&b)?;
                }
                copied = true;
            }
            Planned::Copy { .. } => {
                return Err(Error::Device(format!(
                    "cuda: matmul: no cuBLASLt layout for row-major operands {:?} and {:?}",
                    a.layout, b.layout
                )));
            }
        }
    };
    let size = dtype.size() as u64;
    // cuBLAS's A is our `b`, its B our `a`.
    let (base_a, base_b) = (place.input(&b)?, place.input(&a)?);
    let calls: Vec<[u64; 3]> = sched
        .starts
        .iter()
        .map(|&[pb, pa, po]| {
            [
                base_a + pb as u64 * size,
                base_b + pa as u64 * size,
                out_ptr + po as u64 * size,
            ]
        })
        .collect();
    run_gemm(place, dtype, sched.gemm, &calls, alpha, beta)?;
    Ok(Some(vec![out]))
}

/// Queues `D = alpha · op(A) · op(B) + beta · D` on the stream of `place`, once per
/// `[A, B, D]` device address triple of `calls` (element 0 of each operand's first matrix),
/// with cuBLASLt (`dtype` one of the four float types; `k >= 1`).
///
/// The caller vouches that `g` describes only elements inside live device blocks at those
/// addresses, ordered on this stream, and that no two calls write the same elements.
pub(crate) fn run_gemm(
    place: &Place,
    dtype: DType,
    g: Gemm,
    calls: &[[u64; 3]],
    alpha: f32,
    beta: f32,
) -> Result<()> {
    let t = types(dtype)
        .ok_or_else(|| Error::Device(format!("cuda: cuBLASLt: no matrix product for {dtype}")))?;
    library()?;
    let size = dtype.size() as u64;
    let step = |s: i64| s.unsigned_abs() * size;
    let align = [
        alignment(calls.iter().map(|c| c[0]).chain([step(g.a.stride)])),
        alignment(calls.iter().map(|c| c[1]).chain([step(g.b.stride)])),
        alignment(calls.iter().map(|c| c[2]).chain([step(g.d_stride)])),
    ];
    let h = handle(place)?;
    let key = Key {
        ordinal: place.gpu.ordinal,
        dtype,
        gemm: g,
        align,
    };
    let p = plan(h, key, t)?;
    let ws = workspace(place)?;
    let scalars = if dtype == DType::F64 {
        Scalars::F64(f64::from(alpha), f64::from(beta))
    } else {
        Scalars::F32(alpha, beta)
    };
    let (pa, pb) = scalars.pointers();
    let stream = place.stream.cu_stream() as sys::cudaStream_t;
    for &[ptr_a, ptr_b, ptr_d] in calls {
        // SAFETY: the plan's layouts describe exactly the elements read from `ptr_a` and
        // `ptr_b` and written at `ptr_d` (which also serves as C), all inside live device
        // blocks (the caller's promise: `schedule` checks it for products); alpha and beta
        // are host values of the scale type that live across the call (cuBLASLt reads them
        // before returning); the workspace holds `WORKSPACE >= p.workspace` bytes used only
        // on this stream.
        unsafe {
            lt::matmul(
                h.0,
                p.desc.0,
                pa,
                pb,
                ptr_a as *const c_void,
                p.a.0,
                ptr_b as *const c_void,
                p.b.0,
                ptr_d as *const c_void,
                p.d.0,
                ptr_d as *mut c_void,
                p.d.0,
                &p.algo,
                ws as *mut c_void,
                p.workspace,
                stream,
            )
        }
        .map_err(blas("matmul"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The plans against a host emulation of cuBLAS's column-major strided-batch product.

    use super::*;

    /// A strided view.
    fn view(shape: &[usize], strides: &[isize], offset: usize) -> Layout {
        Layout {
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            offset,
        }
    }

    fn value(buf: usize, i: usize) -> f64 {
        ((i * 7 + buf * 3) % 11) as f64 - 5.0
    }

    /// The product `a @ b` straight from the layouts.
    fn reference(a: &Layout, b: &Layout) -> Vec<f64> {
        let nd = a.shape.len();
        let (m, k, n) = (a.shape[nd - 2], a.shape[nd - 1], b.shape[nd - 1]);
        let count: usize = a.shape[..nd - 2].iter().product();
        let mut out = Vec::new();
        for bi in 0..count {
            let mut idx = vec![0; nd - 2];
            let mut r = bi;
            for ax in (0..nd - 2).rev() {
                idx[ax] = r % a.shape[ax];
                r /= a.shape[ax];
            }
            for i in 0..m {
                for j in 0..n {
                    let mut acc = 0.0;
                    for l in 0..k {
                        let mut ia = idx.clone();
                        ia.extend([i, l]);
                        let mut ib = idx.clone();
                        ib.extend([l, j]);
                        acc += value(0, a.element(&ia)) * value(1, b.element(&ib));
                    }
                    out.push(acc);
                }
            }
        }
        out
    }

    /// Plans, copies to row-major where asked (as the GPU path does), emulates and compares.
    fn check(name: &str, a: Layout, b: Layout, expect_copy: bool) {
        let want = reference(&a, &b);
        let mut copied = false;
        let (mut ra, mut rb) = (a.clone(), b.clone());
        // A copy keeps the values, so the emulated buffers must be remapped: gather them.
        let (mut map_a, mut map_b): (Option<Vec<usize>>, Option<Vec<usize>>) = (None, None);
        let s = loop {
            match schedule(&ra, &rb).unwrap() {
                Planned::Run(s) => break s,
                Planned::Copy { a: ca, b: cb } => {
                    assert!(!copied, "{name}: asked to copy twice");
                    copied = true;
                    let gather = |l: &Layout| -> Vec<usize> {
                        let mut v = Vec::new();
                        let n = l.size();
                        let st = l.strides.clone();
                        for_each_strided(&l.shape, [&st], [l.offset], 0, n, |[p]| v.push(p));
                        v
                    };
                    if ca {
                        map_a = Some(gather(&ra));
                        ra = Layout::contiguous(&ra.shape);
                    }
                    if cb {
                        map_b = Some(gather(&rb));
                        rb = Layout::contiguous(&rb.shape);
                    }
                }
            }
        };
        assert_eq!(copied, expect_copy, "{name}: copy");
        // Emulate over value tables rewritten through the gathers.
        let nd = ra.shape.len();
        let out_len = ra.shape[..nd - 1].iter().product::<usize>() * rb.shape[nd - 1];
        let got = emulate(&s, out_len, map_a.as_deref(), map_b.as_deref());
        assert_eq!(got.len(), want.len(), "{name}");
        let g = s.gemm;
        // Row-major `[.., m, n]` is `outᵀ` column-major: the same buffer order.
        for (i, (x, y)) in got.iter().zip(&want).enumerate() {
            assert_eq!(x, y, "{name}: element {i} ({g:?}, {:?})", s.starts);
        }
    }

    /// Emulates cuBLAS running a schedule: `a` and `b` hold `value(0, ·)` and `value(1, ·)`
    /// at their original positions; `ma`/`mb` map a row-major copy's elements back to them.
    fn emulate(
        s: &Schedule,
        out_len: usize,
        ma: Option<&[usize]>,
        mb: Option<&[usize]>,
    ) -> Vec<f64> {
        let g = s.gemm;
        let get_a = |e: usize| value(0, ma.map_or(e, |m| m[e]));
        let get_b = |e: usize| value(1, mb.map_or(e, |m| m[e]));
        let at = |side: Side, i: usize, j: usize| -> i64 {
            if side.trans {
                j as i64 + i as i64 * side.ld
            } else {
                i as i64 + j as i64 * side.ld
            }
        };
        let mut d = vec![f64::NAN; out_len];
        for &[pb, pa, po] in &s.starts {
            for batch in 0..g.batch as i64 {
                for i in 0..g.m as usize {
                    for j in 0..g.n as usize {
                        let mut acc = 0.0;
                        for l in 0..g.k as usize {
                            let ea = pb as i64 + batch * g.a.stride + at(g.a, i, l);
                            let eb = pa as i64 + batch * g.b.stride + at(g.b, l, j);
                            acc += get_b(ea as usize) * get_a(eb as usize);
                        }
                        let ed = po as i64 + batch * g.d_stride + i as i64 + j as i64 * g.d_ld;
                        d[ed as usize] = acc;
                    }
                }
            }
        }
        d
    }

    fn row_major(shape: &[usize]) -> Layout {
        Layout::contiguous(shape)
    }

    /// The last two axes swapped of a row-major array of the swapped shape.
    fn transposed(shape: &[usize]) -> Layout {
        let nd = shape.len();
        let mut s = shape.to_vec();
        s.swap(nd - 1, nd - 2);
        let mut l = Layout::contiguous(&s);
        l.shape.swap(nd - 1, nd - 2);
        l.strides.swap(nd - 1, nd - 2);
        l
    }

    #[test]
    fn plans_compute_the_product_for_every_layout() {
        let cases: Vec<(&str, Layout, Layout, bool)> = vec![
            ("square", row_major(&[4, 4]), row_major(&[4, 4]), false),
            ("rectangular", row_major(&[3, 5]), row_major(&[5, 2]), false),
            ("row vector", row_major(&[1, 5]), row_major(&[5, 3]), false),
            (
                "column vector",
                row_major(&[3, 5]),
                row_major(&[5, 1]),
                false,
            ),
            ("k = 1", row_major(&[3, 1]), row_major(&[1, 4]), false),
            (
                "a transposed",
                transposed(&[3, 5]),
                row_major(&[5, 2]),
                false,
            ),
            (
                "b transposed",
                row_major(&[3, 5]),
                transposed(&[5, 2]),
                false,
            ),
            (
                "both transposed",
                transposed(&[3, 5]),
                transposed(&[5, 2]),
                false,
            ),
            // Columns 1..4 of a 3 × 6 array: a larger leading dimension, at an offset.
            (
                "column slice",
                view(&[3, 3], &[6, 1], 1),
                row_major(&[3, 2]),
                false,
            ),
            (
                "row slice step 2",
                view(&[2, 3], &[6, 1], 0),
                row_major(&[3, 2]),
                false,
            ),
            (
                "batched",
                row_major(&[3, 2, 4]),
                row_major(&[3, 4, 5]),
                false,
            ),
            (
                "batched transposed",
                transposed(&[3, 2, 4]),
                transposed(&[3, 4, 5]),
                false,
            ),
            // `b` shared by the batch: one tall product.
            (
                "shared b",
                row_major(&[3, 2, 4]),
                view(&[3, 4, 5], &[0, 5, 1], 0),
                false,
            ),
            // `a` shared by the batch: a strided batch with stride 0.
            (
                "shared a",
                view(&[3, 2, 4], &[0, 4, 1], 0),
                row_major(&[3, 4, 5]),
                false,
            ),
            // Two batch axes, `b` broadcast over the second only: a loop over the first.
            (
                "broadcast inner batch",
                row_major(&[2, 3, 2, 4]),
                view(&[2, 3, 4, 5], &[20, 0, 5, 1], 0),
                false,
            ),
            (
                "broadcast outer batch",
                row_major(&[2, 3, 2, 4]),
                view(&[2, 3, 4, 5], &[0, 20, 5, 1], 0),
                false,
            ),
            // Too many outer calls: copied to row-major.
            (
                "many outer calls",
                row_major(&[70, 2, 2, 3]),
                view(&[70, 2, 3, 2], &[6, 0, 2, 1], 0),
                true,
            ),
            // Negative strides and broadcast rows need a copy.
            (
                "reversed rows",
                view(&[3, 4], &[-4, 1], 8),
                row_major(&[4, 2]),
                true,
            ),
            (
                "broadcast rows",
                view(&[3, 4], &[0, 1], 0),
                row_major(&[4, 2]),
                true,
            ),
            (
                "both steps",
                view(&[3, 2], &[8, 2], 0),
                row_major(&[2, 2]),
                true,
            ),
            (
                "reversed batch",
                row_major(&[2, 2, 2]),
                view(&[2, 2, 2], &[-4, 2, 1], 4),
                true,
            ),
        ];
        for (name, a, b, copy) in cases {
            check(name, a, b, copy);
        }
    }

    #[test]
    fn sides_reject_overlapping_leading_dimensions() {
        assert_eq!(side(3, 4, 2, 1), None);
        assert_eq!(
            side(1, 4, 0, 1),
            Some(Side {
                trans: false,
                ld: 4,
                stride: 0
            })
        );
        assert_eq!(
            side(4, 1, 1, 0),
            Some(Side {
                trans: false,
                ld: 1,
                stride: 0
            })
        );
        assert_eq!(alignment([0x1000u64, 0x1002].into_iter()), 2);
        assert_eq!(alignment([0x1000u64, 0].into_iter()), 256);
    }
}
