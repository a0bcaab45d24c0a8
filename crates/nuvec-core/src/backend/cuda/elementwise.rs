//! Elementwise kernels on the GPU: unary functions, binary operations, `where_` and casts.
//!
//! Kernel names are derived from the operation and the element type (`unary_exp_f32_c`), and
//! one module per family and input type holds every instantiation, so each module compiles
//! once. Inputs are read contiguously (`_c`) when their layout allows, else through a strided
//! view of at most eight merged axes.

use cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};

use super::Place;
use crate::array::{ArrayData, Layout, collapse};
use crate::ops::binary::BinaryOp;
use crate::ops::unary::UnaryOp;
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
}

/// The CUDA type and the kernel-name suffix of an element type (complex has no kernels).
pub(crate) fn type_names(dtype: DType) -> Option<(&'static str, &'static str)> {
    Some(match dtype {
        DType::Bool => ("bool", "bool"),
        DType::U8 => ("u8", "u8"),
        DType::U16 => ("u16", "u16"),
        DType::U32 => ("u32", "u32"),
        DType::U64 => ("u64", "u64"),
        DType::I8 => ("i8", "i8"),
        DType::I16 => ("i16", "i16"),
        DType::I32 => ("i32", "i32"),
        DType::I64 => ("i64", "i64"),
        DType::F16 => ("f16", "f16"),
        DType::BF16 => ("bf16", "bf16"),
        DType::F32 => ("float", "f32"),
        DType::F64 => ("double", "f64"),
        DType::C64 => return None,
    })
}

/// Threads per block and the grid for `n` elements (grid-stride loops cover the rest).
pub(crate) fn launch_config(n: usize) -> LaunchConfig {
    const THREADS: u32 = 256;
    let blocks = n.div_ceil(THREADS as usize).clamp(1, 1 << 16) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn launch_err(name: &str) -> impl Fn(cudarc::driver::DriverError) -> Error + '_ {
    move |e| Error::Device(format!("cuda: launching {name}: {e}"))
}

/// Launches a one-input kernel `f` (`name`, its `_c` or `_s` form chosen by the caller from
/// `x`'s layout) over `x` into the `n` elements at `out_ptr`.
fn launch_one_input(
    place: &Place,
    f: &cudarc::driver::CudaFunction,
    name: &str,
    x: &ArrayData,
    out_ptr: u64,
    n: usize,
) -> Result<()> {
    let src = place.input(x)?;
    let n64 = n as i64;
    let mut launch = place.stream.launch_builder(f);
    if x.layout.is_row_contiguous() {
        let start = src + (x.layout.offset * x.dtype().size()) as u64;
        launch.arg(&start).arg(&out_ptr).arg(&n64);
        // SAFETY: the kernel reads `n` contiguous elements of `x`'s type from `start` (inside
        // the input's block, which lives until the stream passes this work: blocks are reused
        // only in stream order) and writes `n` elements to `out_ptr`, a fresh block of that
        // size; the argument types match the kernel's signature.
        unsafe { launch.launch(launch_config(n)) }.map_err(launch_err(name))?;
    } else {
        let view = Strided::of(&x.layout)?;
        launch.arg(&src).arg(&out_ptr).arg(&n64).arg(&view);
        // SAFETY: as above, with a view that addresses only elements inside the input block.
        unsafe { launch.launch(launch_config(n)) }.map_err(launch_err(name))?;
    }
    Ok(())
}

const FLOAT_UNARY: &[UnaryOp] = &[
    UnaryOp::Abs,
    UnaryOp::Negative,
    UnaryOp::Sign,
    UnaryOp::Square,
    UnaryOp::Sqrt,
    UnaryOp::Rsqrt,
    UnaryOp::Reciprocal,
    UnaryOp::Exp,
    UnaryOp::Expm1,
    UnaryOp::Log,
    UnaryOp::Log1p,
    UnaryOp::Log2,
    UnaryOp::Log10,
    UnaryOp::Sin,
    UnaryOp::Cos,
    UnaryOp::Tan,
    UnaryOp::ArcSin,
    UnaryOp::ArcCos,
    UnaryOp::ArcTan,
    UnaryOp::Sinh,
    UnaryOp::Cosh,
    UnaryOp::Tanh,
    UnaryOp::ArcSinh,
    UnaryOp::ArcCosh,
    UnaryOp::ArcTanh,
    UnaryOp::Sigmoid,
    UnaryOp::Erf,
    UnaryOp::ErfInv,
    UnaryOp::Floor,
    UnaryOp::Ceil,
    UnaryOp::Round,
    UnaryOp::Trunc,
];

const PREDICATES: &[UnaryOp] = &[
    UnaryOp::IsNan,
    UnaryOp::IsInf,
    UnaryOp::IsPosInf,
    UnaryOp::IsNegInf,
    UnaryOp::IsFinite,
    UnaryOp::LogicalNot,
];

fn is_float(dtype: DType) -> bool {
    matches!(dtype, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
}

/// The unary functions with a kernel for `dtype` (floats: all real ones; others: the
/// logical not).
fn unary_ops(dtype: DType) -> Vec<(UnaryOp, bool)> {
    let mut ops: Vec<(UnaryOp, bool)> = Vec::new();
    if is_float(dtype) {
        ops.extend(FLOAT_UNARY.iter().map(|&o| (o, false)));
        ops.extend(PREDICATES.iter().map(|&o| (o, true)));
    } else if dtype != DType::C64 {
        ops.push((UnaryOp::LogicalNot, true));
    }
    ops
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
    if !unary_ops(dtype).iter().any(|(o, _)| *o == op) {
        return Ok(None);
    }
    let (shape, out_dtype) = (&outputs[0].0, outputs[0].1);
    let (out, out_ptr) = place.output(out_dtype, shape)?;
    let n = x.layout.size();
    if n == 0 {
        return Ok(Some(vec![out]));
    }
    let contiguous = x.layout.is_row_contiguous();
    let name = format!(
        "unary_{}_{tn}_{}",
        op.name(),
        if contiguous { "c" } else { "s" }
    );
    let f = place
        .gpu
        .jit
        .function(&format!("unary_{tn}"), &name, || unary_source(dtype))?;
    launch_one_input(place, &f, &name, x, out_ptr, n)?;
    Ok(Some(vec![out]))
}

/// The binary kernels of one element type: `(functor, kernel suffix, macro)` per operation.
fn binary_kernels(dtype: DType) -> Vec<(BinaryOp, &'static str, &'static str)> {
    use BinaryOp::*;
    let compare = [
        (Equal, "equal"),
        (NotEqual, "not_equal"),
        (Less, "less"),
        (LessEqual, "less_equal"),
        (Greater, "greater"),
        (GreaterEqual, "greater_equal"),
        (LogicalAnd, "logical_and"),
        (LogicalOr, "logical_or"),
    ];
    let mut ops: Vec<(BinaryOp, &'static str, &'static str)> =
        compare.iter().map(|&(o, f)| (o, f, "NV_CMP")).collect();
    let same: &[(BinaryOp, &str)] = match dtype {
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
    };
    ops.extend(same.iter().map(|&(o, f)| (o, f, "NV_BINARY")));
    ops
}

/// The module of every binary kernel (and `where_`) of one element type.
fn binary_source(dtype: DType) -> String {
    let (ct, tn) = type_names(dtype).expect("complex has no kernels");
    let mut src = format!("{COMMON}\n{BINARY}\n");
    let mut seen = std::collections::HashSet::new();
    for (_, functor, mac) in binary_kernels(dtype) {
        if seen.insert(functor) {
            src.push_str(&format!("{mac}({functor}, {ct}, {tn})\n"));
        }
    }
    src.push_str(&format!("NV_SELECT({ct}, {tn})\n"));
    src
}

/// `op` of two inputs of one type and shape on the GPU, or `None` without a kernel.
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
    let Some((_, functor, _)) = binary_kernels(dtype).into_iter().find(|k| k.0 == op) else {
        return Ok(None);
    };
    let (shape, out_dtype) = (&outputs[0].0, outputs[0].1);
    let (out, out_ptr) = place.output(out_dtype, shape)?;
    let n = out.layout.size();
    if n == 0 {
        return Ok(Some(vec![out]));
    }
    let (pa, pb) = (place.input(a)?, place.input(b)?);
    let contiguous = a.layout.is_row_contiguous() && b.layout.is_row_contiguous();
    let name = format!(
        "binary_{functor}_{tn}_{}",
        if contiguous { "cc" } else { "ss" }
    );
    let f = place
        .gpu
        .jit
        .function(&format!("binary_{tn}"), &name, || binary_source(dtype))?;
    let n64 = n as i64;
    let mut launch = place.stream.launch_builder(&f);
    if contiguous {
        let size = dtype.size() as u64;
        let (sa, sb) = (
            pa + a.layout.offset as u64 * size,
            pb + b.layout.offset as u64 * size,
        );
        launch.arg(&sa).arg(&sb).arg(&out_ptr).arg(&n64);
        // SAFETY: both inputs hold `n` contiguous elements from their starts, inside their
        // blocks; the output block holds `n` elements of the output type; the arguments
        // match the kernel's signature.
        unsafe { launch.launch(launch_config(n)) }.map_err(launch_err(&name))?;
    } else {
        let (va, vb) = (Strided::of(&a.layout)?, Strided::of(&b.layout)?);
        launch
            .arg(&pa)
            .arg(&pb)
            .arg(&out_ptr)
            .arg(&n64)
            .arg(&va)
            .arg(&vb);
        // SAFETY: as above, with views that address elements inside the input blocks.
        unsafe { launch.launch(launch_config(n)) }.map_err(launch_err(&name))?;
    }
    Ok(Some(vec![out]))
}

/// `where_(c, x, y)` on the GPU (inputs already broadcast to one shape).
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
    let views = [
        Strided::of(&c.layout)?,
        Strided::of(&x.layout)?,
        Strided::of(&y.layout)?,
    ];
    let name = format!("select_{tn}_sss");
    let f = place
        .gpu
        .jit
        .function(&format!("binary_{tn}"), &name, || binary_source(dtype))?;
    let n64 = n as i64;
    let mut launch = place.stream.launch_builder(&f);
    launch
        .arg(&pc)
        .arg(&px)
        .arg(&py)
        .arg(&out_ptr)
        .arg(&n64)
        .arg(&views[0])
        .arg(&views[1])
        .arg(&views[2]);
    // SAFETY: the views address elements inside the three input blocks; the output block
    // holds `n` elements; the arguments match `select_<type>_sss`.
    unsafe { launch.launch(launch_config(n)) }.map_err(launch_err(&name))?;
    Ok(Some(vec![out]))
}

const CASTABLE: &[DType] = &[
    DType::Bool,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::F16,
    DType::BF16,
    DType::F32,
    DType::F64,
];

/// The module of every conversion from one element type.
fn cast_source(from: DType) -> String {
    let (cs, sn) = type_names(from).expect("complex has no kernels");
    let mut src = format!("{COMMON}\n{CAST}\n");
    for &to in CASTABLE {
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
    let name = format!("cast_{sn}_{dn}_{}", if contiguous { "c" } else { "s" });
    let from = x.dtype();
    let f = place
        .gpu
        .jit
        .function(&format!("cast_{sn}"), &name, || cast_source(from))?;
    launch_one_input(place, &f, &name, x, out_ptr, n)?;
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
    for &d in CASTABLE {
        let tn = type_names(d).expect("listed types have kernels").1;
        out.push((format!("unary_{tn}"), unary_source(d)));
        out.push((format!("binary_{tn}"), binary_source(d)));
        out.push((format!("cast_{tn}"), cast_source(d)));
    }
    out
}
