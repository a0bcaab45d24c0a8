//! Elementwise kernels on the GPU: unary functions, binary operations, `where_` and casts.
//!
//! Kernel names are derived from the operation and the element type (`unary_exp_f32_c`), and
//! one module per family and input type holds every instantiation, so each module compiles
//! once. Inputs are read contiguously (`_c`) when their layout allows, 16 bytes per thread and
//! step when the pointers are aligned (bandwidth-bound kernels need wide accesses on Hopper),
//! else through a strided view of at most eight merged axes; a binary operation with one
//! input a single broadcast element reads it once (`_cs`/`_sc`). Grids are grid-stride and
//! at most one wave of the device ([`Kernel::config`]). Launches find their kernel in the
//! device's table by an integer key, so the launch path builds no strings.
//!
//! Cases that run on the host instead (`Ok(None)`): complex numbers everywhere, and unary
//! functions other than `logical_not` on non-float types.

use cudarc::driver::{DeviceRepr, LaunchConfig};

use super::Place;
pub(crate) use super::dtype::type_names;
use super::dtype::{FLOAT_TYPES, kernel_types};
use super::launch::{Kernel, symbol};
use crate::array::{ArrayData, Layout, collapse};
use crate::ops::binary::BinaryOp;
use crate::ops::unary::{GpuKernel, UnaryOp};
use crate::primitive::OutputSpec;
use crate::{DType, Error, Result};

const COMMON: &str = include_str!("kernels/common.cuh");
const UNARY: &str = include_str!("kernels/unary.cu");
const BINARY: &str = include_str!("kernels/binary.cu");
const CAST: &str = include_str!("kernels/cast.cu");

/// The most axes a strided view may keep after merging.
const MAX_DIMS: usize = 8;

/// A strided view as the kernels take it (`Strided` in `common.cuh`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Strided {
    shape: [i64; MAX_DIMS],
    strides: [i64; MAX_DIMS],
    offset: i64,
    ndim: i32,
}

// SAFETY: `Strided` is `repr(C)` plain data with the field order, types and alignment of the
// CUDA struct it mirrors, so passing its bytes as a kernel parameter is what the kernel reads.
unsafe impl DeviceRepr for Strided {}

impl Strided {
    /// The view's axes (after merging) as `(extent, step)`, the outermost first.
    pub(crate) fn axes(&self) -> impl DoubleEndedIterator<Item = (i64, i64)> + '_ {
        (0..self.ndim as usize).map(|d| (self.shape[d], self.strides[d]))
    }

    /// The view `layout` with its mergeable axes merged, or an error past eight axes.
    pub(crate) fn of(layout: &Layout) -> Result<Strided> {
        let (shape, strides) = collapse(&layout.shape, &[&layout.strides]);
        if shape.len() > MAX_DIMS {
            return Err(Error::Unsupported {
                op: "cuda",
                what: format!(
                    "a strided view with {} axes that do not merge (at most {MAX_DIMS})",
                    shape.len()
                ),
            });
        }
        let mut s = Strided {
            shape: [1; MAX_DIMS],
            strides: [0; MAX_DIMS],
            offset: layout.offset as i64,
            ndim: shape.len() as i32,
        };
        for (d, (&n, &st)) in shape.iter().zip(&strides[0]).enumerate() {
            s.shape[d] = n as i64;
            s.strides[d] = st as i64;
        }
        Ok(s)
    }

    /// Whether every element the view locates (from a base address aligned to 16 bytes)
    /// starts a 16-byte-aligned address, for elements of `size` bytes.
    pub(crate) fn aligned(&self, size: usize) -> bool {
        let ok = |v: i64| (v * size as i64) % 16 == 0;
        ok(self.offset)
            && (0..self.ndim as usize).all(|d| self.shape[d] <= 1 || ok(self.strides[d]))
    }
}

/// Threads per block and the grid for `n` elements, one per thread (grid-stride loops cover
/// any rest past 2^16 blocks). The elementwise kernels size their grids with
/// [`Kernel::config`] instead; this stays for kernels that take one element per thread.
#[allow(dead_code)] // for other families' kernels
pub(crate) fn launch_config(n: usize) -> LaunchConfig {
    const THREADS: u32 = 256;
    let blocks = n.div_ceil(THREADS as usize).clamp(1, 1 << 16) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Elements per thread and step of a contiguous kernel between element sizes `a` and `b`
/// bytes (`NvWidth` in `common.cuh`): 16 bytes of the narrower type, at most 64 of the wider.
fn pack_width(a: usize, b: usize) -> usize {
    let (lo, hi) = (a.min(b), a.max(b));
    (16 / lo).min(64 / hi)
}

/// Units of work of a contiguous kernel over `n` elements (one pack per thread and step).
fn packs(n: usize, a: DType, b: DType) -> usize {
    n.div_ceil(pack_width(a.size(), b.size()))
}

/// Launches a one-input kernel (`_c`: `x` contiguous, 16-byte packs when aligned; `_s`:
/// strided) over `x` into the `n` elements at `out_ptr` of type `out`.
fn launch_one_input(
    place: &Place,
    k: &Kernel,
    x: &ArrayData,
    out: DType,
    out_ptr: u64,
    n: usize,
) -> Result<()> {
    let src = place.input(x)?;
    let n64 = n as i64;
    if x.layout.is_row_contiguous() {
        let start = src + (x.layout.offset * x.dtype().size()) as u64;
        let cfg = k.config(packs(n, x.dtype(), out));
        // SAFETY: the kernel reads `n` contiguous elements of `x`'s type from `start` (inside
        // the input's block, which lives until the stream passes this work: blocks are reused
        // only in stream order) and writes `n` elements to `out_ptr`, a fresh block of that
        // size; it checks both pointers' alignment before taking 16-byte packs; the argument
        // types match the kernel's signature.
        unsafe { k.launch(&place.stream, cfg, &[&start, &out_ptr, &n64]) }?;
    } else {
        let view = Strided::of(&x.layout)?;
        // SAFETY: as above, with a view that addresses only elements inside the input block.
        unsafe { k.launch(&place.stream, k.config(n), &[&src, &out_ptr, &n64, &view]) }?;
    }
    Ok(())
}

fn is_float(dtype: DType) -> bool {
    FLOAT_TYPES.contains(&dtype)
}

/// Whether `op` has a kernel for `dtype` (floats: every function the op declares a GPU
/// kernel for; other types: the logical not).
fn has_unary(dtype: DType, op: UnaryOp) -> bool {
    match op.gpu_kernel() {
        GpuKernel::Float | GpuKernel::Predicate if is_float(dtype) => true,
        _ => dtype != DType::C64 && op == UnaryOp::LogicalNot,
    }
}

/// The unary functions with a kernel for `dtype`, and whether each is a predicate.
fn unary_ops(dtype: DType) -> impl Iterator<Item = (UnaryOp, bool)> {
    UnaryOp::ALL
        .iter()
        .filter(move |&&op| has_unary(dtype, op))
        .map(|&op| (op, op.gpu_kernel() == GpuKernel::Predicate))
}

/// The module of every unary kernel of one element type.
fn unary_source(dtype: DType) -> String {
    let (ct, tn) = type_names(dtype).expect("complex has no kernels");
    let mut src = format!("{COMMON}\n{UNARY}\n");
    for (op, predicate) in unary_ops(dtype) {
        let mac = if predicate {
            "NV_UNARY_PRED"
        } else {
            "NV_UNARY"
        };
        src.push_str(&format!("{mac}({}, {ct}, {tn})\n", op.name()));
    }
    src
}

/// The suffix of a one-input kernel over a contiguous or a strided input.
fn one_form(contiguous: bool) -> &'static str {
    if contiguous { "c" } else { "s" }
}

/// `op` of `x` on the GPU, or `None` where it has no kernel for this type (the caller then
/// runs it on the host).
pub(crate) fn unary(
    place: &Place,
    op: UnaryOp,
    x: &ArrayData,
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    let dtype = x.dtype();
    let Some((_, tn)) = type_names(dtype) else {
        return Ok(None);
    };
    if !has_unary(dtype, op) {
        return Ok(None);
    }
    let (shape, out_dtype) = (&outputs[0].0, outputs[0].1);
    let (out, out_ptr) = place.output(out_dtype, shape)?;
    let n = x.layout.size();
    if n == 0 {
        return Ok(Some(vec![out]));
    }
    let contiguous = x.layout.is_row_contiguous();
    let name = symbol!("unary_{}_{tn}_{}", op.name(), one_form(contiguous))?;
    let k = place
        .gpu
        .kernel_of("unary", Some(dtype), name, || unary_source(dtype))?;
    launch_one_input(place, &k, x, out_dtype, out_ptr, n)?;
    Ok(Some(vec![out]))
}

/// Comparisons and logical operations (boolean results), every type: `(op, functor)`.
const COMPARE: &[(BinaryOp, &str)] = &[
    (BinaryOp::Equal, "equal"),
    (BinaryOp::NotEqual, "not_equal"),
    (BinaryOp::Less, "less"),
    (BinaryOp::LessEqual, "less_equal"),
    (BinaryOp::Greater, "greater"),
    (BinaryOp::GreaterEqual, "greater_equal"),
    (BinaryOp::LogicalAnd, "logical_and"),
    (BinaryOp::LogicalOr, "logical_or"),
];

/// Operations with results of the inputs' type: `(op, functor)` for one element type.
fn same_type_ops(dtype: DType) -> &'static [(BinaryOp, &'static str)] {
    use BinaryOp::*;
    match dtype {
        DType::F16 | DType::BF16 | DType::F32 | DType::F64 => &[
            (Add, "add"),
            (Subtract, "subtract"),
            (Multiply, "multiply"),
            (Divide, "divide"),
            (FloorDivide, "floor_divide"),
            (Remainder, "remainder"),
            (Power, "power"),
            (Maximum, "maximum"),
            (Minimum, "minimum"),
            (ArcTan2, "arctan2"),
            (LogAddExp, "logaddexp"),
        ],
        DType::Bool => &[
            (Add, "bitwise_or"),
            (Maximum, "bitwise_or"),
            (BitwiseOr, "bitwise_or"),
            (Multiply, "bitwise_and"),
            (Minimum, "bitwise_and"),
            (BitwiseAnd, "bitwise_and"),
            (BitwiseXor, "bitwise_xor"),
        ],
        DType::C64 => &[],
        _ => &[
            (Add, "wrap_add"),
            (Subtract, "wrap_subtract"),
            (Multiply, "wrap_multiply"),
            (Maximum, "int_maximum"),
            (Minimum, "int_minimum"),
            (BitwiseAnd, "bitwise_and"),
            (BitwiseOr, "bitwise_or"),
            (BitwiseXor, "bitwise_xor"),
        ],
    }
}

/// The functor of `op` over `dtype`, if it has a kernel.
fn binary_functor(dtype: DType, op: BinaryOp) -> Option<&'static str> {
    COMPARE
        .iter()
        .chain(same_type_ops(dtype))
        .find(|(o, _)| *o == op)
        .map(|&(_, f)| f)
}

/// The module of every binary kernel (and `where_`) of one element type.
fn binary_source(dtype: DType) -> String {
    let (ct, tn) = type_names(dtype).expect("complex has no kernels");
    let mut src = format!("{COMMON}\n{BINARY}\n");
    for (_, functor) in COMPARE {
        src.push_str(&format!("NV_CMP({functor}, {ct}, {tn})\n"));
    }
    let mut seen = std::collections::HashSet::new();
    for (_, functor) in same_type_ops(dtype) {
        if seen.insert(functor) {
            src.push_str(&format!("NV_BINARY({functor}, {ct}, {tn})\n"));
        }
    }
    src.push_str(&format!("NV_SELECT({ct}, {tn})\n"));
    src
}

/// How a binary kernel reads its two inputs (the kernel-name suffixes).
const BINARY_FORMS: [&str; 4] = ["cc", "cs", "sc", "ss"];

/// `op` of two inputs of one type and shape on the GPU, or `None` without a kernel.
///
/// Both contiguous: `_cc`; one contiguous and the other one element broadcast (`full`, a
/// scalar operand): `_cs`/`_sc`, which read that element once; anything else: `_ss`.
pub(crate) fn binary(
    place: &Place,
    op: BinaryOp,
    inputs: &[ArrayData],
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    let (a, b) = (&inputs[0], &inputs[1]);
    let dtype = a.dtype();
    let Some((_, tn)) = type_names(dtype) else {
        return Ok(None);
    };
    let Some(functor) = binary_functor(dtype, op) else {
        return Ok(None);
    };
    let (shape, out_dtype) = (&outputs[0].0, outputs[0].1);
    let (out, out_ptr) = place.output(out_dtype, shape)?;
    let n = out.layout.size();
    if n == 0 {
        return Ok(Some(vec![out]));
    }
    let (pa, pb) = (place.input(a)?, place.input(b)?);
    let (ca, cb) = (a.layout.is_row_contiguous(), b.layout.is_row_contiguous());
    let form = if ca && cb {
        0
    } else if ca && b.layout.is_scalar_broadcast() {
        1
    } else if cb && a.layout.is_scalar_broadcast() {
        2
    } else {
        3
    };
    let name = symbol!("binary_{functor}_{tn}_{}", BINARY_FORMS[form])?;
    let k = place
        .gpu
        .kernel_of("binary", Some(dtype), name, || binary_source(dtype))?;
    let n64 = n as i64;
    if form < 3 {
        let size = dtype.size() as u64;
        let (sa, sb) = (
            pa + a.layout.offset as u64 * size,
            pb + b.layout.offset as u64 * size,
        );
        let cfg = k.config(packs(n, dtype, out_dtype));
        // SAFETY: a contiguous input holds `n` elements from its start, a broadcast one its
        // single element at its start (its layout's offset), inside their blocks; the
        // output block holds `n` elements of the output type; the kernel checks alignment
        // before taking 16-byte packs; the arguments match the kernel's signature.
        unsafe { k.launch(&place.stream, cfg, &[&sa, &sb, &out_ptr, &n64]) }?;
    } else {
        let (va, vb) = (Strided::of(&a.layout)?, Strided::of(&b.layout)?);
        let params: [&dyn DeviceRepr; 6] = [&pa, &pb, &out_ptr, &n64, &va, &vb];
        // SAFETY: as above, with views that address elements inside the input blocks.
        unsafe { k.launch(&place.stream, k.config(n), &params) }?;
    }
    Ok(Some(vec![out]))
}

/// `where_(c, x, y)` on the GPU (inputs already broadcast to one shape): `_ccc` when all
/// three are contiguous, else `_sss`.
pub(crate) fn select(
    place: &Place,
    inputs: &[ArrayData],
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    let (c, x, y) = (&inputs[0], &inputs[1], &inputs[2]);
    let dtype = x.dtype();
    let Some((_, tn)) = type_names(dtype) else {
        return Ok(None);
    };
    let (out, out_ptr) = place.output(dtype, &outputs[0].0)?;
    let n = out.layout.size();
    if n == 0 {
        return Ok(Some(vec![out]));
    }
    let (pc, px, py) = (place.input(c)?, place.input(x)?, place.input(y)?);
    let contiguous = [c, x, y].iter().all(|d| d.layout.is_row_contiguous());
    let form = if contiguous { "ccc" } else { "sss" };
    let name = symbol!("select_{tn}_{form}")?;
    let k = place
        .gpu
        .kernel_of("binary", Some(dtype), name, || binary_source(dtype))?;
    let n64 = n as i64;
    if contiguous {
        let size = dtype.size() as u64;
        let sc = pc + c.layout.offset as u64;
        let (sx, sy) = (
            px + x.layout.offset as u64 * size,
            py + y.layout.offset as u64 * size,
        );
        let cfg = k.config(packs(n, DType::Bool, dtype));
        // SAFETY: the three inputs hold `n` contiguous elements from their starts, inside
        // their blocks (bool conditions are one byte each); the output block holds `n`
        // elements; the kernel checks alignment before taking 16-byte packs; the arguments
        // match `select_<type>_ccc`.
        unsafe { k.launch(&place.stream, cfg, &[&sc, &sx, &sy, &out_ptr, &n64]) }?;
    } else {
        let views = [
            Strided::of(&c.layout)?,
            Strided::of(&x.layout)?,
            Strided::of(&y.layout)?,
        ];
        let params: [&dyn DeviceRepr; 8] = [
            &pc, &px, &py, &out_ptr, &n64, &views[0], &views[1], &views[2],
        ];
        // SAFETY: the views address elements inside the three input blocks; the output block
        // holds `n` elements; the arguments match `select_<type>_sss`.
        unsafe { k.launch(&place.stream, k.config(n), &params) }?;
    }
    Ok(Some(vec![out]))
}

/// The module of every conversion from one element type.
fn cast_source(from: DType) -> String {
    let (cs, sn) = type_names(from).expect("complex has no kernels");
    let mut src = format!("{COMMON}\n{CAST}\n");
    for to in kernel_types() {
        let (cd, dn) = type_names(to).expect("listed types have kernels");
        src.push_str(&format!("NV_CAST({cs}, {sn}, {cd}, {dn})\n"));
    }
    src
}

/// `x` converted to `dtype` (from a type to itself: a row-major copy) on the GPU, or `None`
/// for complex numbers.
pub(crate) fn convert(place: &Place, x: &ArrayData, dtype: DType) -> Result<Option<ArrayData>> {
    let (Some((_, sn)), Some((_, dn))) = (type_names(x.dtype()), type_names(dtype)) else {
        return Ok(None);
    };
    let (out, out_ptr) = place.output(dtype, &x.layout.shape)?;
    let n = x.layout.size();
    if n == 0 {
        return Ok(Some(out));
    }
    let contiguous = x.layout.is_row_contiguous();
    let name = symbol!("cast_{sn}_{dn}_{}", one_form(contiguous))?;
    let from = x.dtype();
    let k = place
        .gpu
        .kernel_of("cast", Some(from), name, || cast_source(from))?;
    launch_one_input(place, &k, x, dtype, out_ptr, n)?;
    Ok(Some(out))
}

/// `astype` on the GPU.
pub(crate) fn astype(place: &Place, x: &ArrayData, dtype: DType) -> Result<Option<Vec<ArrayData>>> {
    if x.dtype() == dtype {
        return Ok(Some(vec![x.clone()]));
    }
    Ok(convert(place, x, dtype)?.map(|d| vec![d]))
}

/// Every kernel source of this family, complete, for compiling ahead of time (CI).
#[cfg(test)]
pub(crate) fn all_sources() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for d in kernel_types() {
        let tn = type_names(d).expect("listed types have kernels").1;
        out.push((format!("unary_{tn}"), unary_source(d)));
        out.push((format!("binary_{tn}"), binary_source(d)));
        out.push((format!("cast_{tn}"), cast_source(d)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{UNARY, pack_width, unary_source};
    use crate::DType;
    use crate::ops::unary::{GpuKernel, UnaryOp};

    /// Every unary function that declares a GPU kernel has its functor in `unary.cu` (of the
    /// right kind) and is instantiated for every float type; `logical_not` for every type.
    #[test]
    fn every_gpu_unary_function_has_a_functor_and_kernels() {
        for &op in UnaryOp::ALL {
            let name = op.name();
            let def = match op.gpu_kernel() {
                GpuKernel::Float => format!("NV_DEF_UNARY({name},"),
                GpuKernel::Predicate => format!("NV_DEF_PRED({name},"),
                GpuKernel::Host => continue,
            };
            assert!(UNARY.contains(&def), "kernels/unary.cu has no `{def} ...)`");
            for dtype in [DType::F16, DType::BF16, DType::F32, DType::F64] {
                let (ct, tn) = super::type_names(dtype).unwrap();
                let src = unary_source(dtype);
                assert!(
                    src.contains(&format!("({name}, {ct}, {tn})")),
                    "{name} over {tn}"
                );
            }
        }
        let ints = unary_source(DType::I32);
        assert!(
            ints.contains("NV_UNARY_PRED(logical_not, i32, i32)"),
            "{ints}"
        );
        assert!(!ints.contains("NV_UNARY(exp, "));
    }

    /// The host's pack width agrees with `NvWidth` in `common.cuh` on the cases that matter:
    /// 16 bytes of the narrower type, the wider side within 64 bytes.
    #[test]
    fn pack_widths_fill_sixteen_bytes() {
        assert_eq!(pack_width(2, 2), 8); // bf16 add
        assert_eq!(pack_width(2, 4), 8); // bf16 -> f32
        assert_eq!(pack_width(4, 4), 4);
        assert_eq!(pack_width(1, 1), 16);
        assert_eq!(pack_width(1, 8), 8); // u8 -> f64: 8 bytes in, 64 out
        assert_eq!(pack_width(8, 1), 8);
        assert_eq!(pack_width(8, 8), 2);
    }
}

#[cfg(test)]
mod ptx_tests {
    use crate::DType;

    /// The PTX of kernel `name` (from `.entry name(` to the next entry) in `ptx`.
    fn kernel_ptx<'a>(ptx: &'a str, name: &str) -> &'a str {
        let start = ptx
            .find(&format!(".entry {name}("))
            .unwrap_or_else(|| panic!("{name} is in the module"));
        let rest = &ptx[start + 1..];
        &ptx[start..start + 1 + rest.find(".entry ").unwrap_or(rest.len())]
    }

    /// The contiguous kernels that carry the bandwidth targets load and store 16 bytes at a
    /// time (`v4.u32` accesses in the PTX); their strided forms do not.
    #[test]
    fn contiguous_kernels_move_sixteen_bytes_per_access() {
        // SAFETY: only tries to open the library.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            eprintln!("skipped: NVRTC (libnvrtc) was not found");
            return;
        }
        let compile = |key: &str, src: String| {
            crate::backend::cuda::jit::compile(key, &src, "sm_90").expect("compiles")
        };
        let binary = compile("binary_bf16", super::binary_source(DType::BF16));
        let add = kernel_ptx(&binary, "binary_add_bf16_cc");
        assert!(
            add.contains("ld.global.nc.v4.u32") || add.contains("ld.global.v4.u32"),
            "{add}"
        );
        assert!(add.contains("st.global.v4.u32"), "{add}");
        let scalar = kernel_ptx(&binary, "binary_add_bf16_cs");
        assert!(scalar.contains("st.global.v4.u32"), "{scalar}");
        let cast = compile("cast_bf16", super::cast_source(DType::BF16));
        let to_f32 = kernel_ptx(&cast, "cast_bf16_f32_c");
        assert!(
            to_f32.contains("st.global.v4.u32") || to_f32.contains("st.global.v4.f32"),
            "{to_f32}"
        );
    }
}
