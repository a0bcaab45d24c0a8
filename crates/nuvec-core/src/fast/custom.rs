//! Custom CUDA kernels, in the spirit of MLX's `mx.fast.cuda_kernel`: the user writes a
//! kernel's body, nuvec writes the rest (see [`CustomKernel`]).
//!
//! A [`CustomKernel`] holds what does not change between calls: its name, the names of its
//! inputs and outputs, its body and an optional header. Each call ([`CustomKernel::call`])
//! names the inputs and a [`KernelConfig`]: the outputs' shapes and types, the grid and the
//! block, the template arguments, an optional initial value of the outputs and the dynamic
//! shared memory. From the kernel and the call nuvec *specialises* the kernel
//! ([`KernelCall`]): it writes one complete CUDA source with the kernel's signature, the
//! template arguments as constants at the top of its body, and the body; that source is
//! compiled with NVRTC once per specialisation and device (kept in memory, its PTX on disk),
//! and the call records one node ([`FastOp::Custom`](super::FastOp::Custom)) on the current
//! stream.
//!
//! The format of the generated source is documented on [`CustomKernel`]; the CUDA side is
//! `backend/cuda/fast/custom.rs`.

use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::sync::{Arc, Mutex, OnceLock};

use super::check::Checker;
use super::{Arg, Fused};
use crate::backend::cuda::fast::CudaKernel;
use crate::backend::cuda::{MAX_PARAMS, fnv1a, type_names};
use crate::error::invalid;
use crate::primitive::{Batched, OutputSpec, Primitive};
use crate::transforms::rules::{JvpArgs, VjpArgs};
use crate::{Array, Category, DType, DeviceKind, Error, Result, default_stream};

/// The operation's name, as errors show it.
const OP: &str = "custom_kernel";

/// The most axes an input whose shape or strides the body reads may have.
pub(crate) const MAX_DIMS: usize = 8;

/// The longest kernel name (the kernel's symbol, `custom_NAME_initK`, must stay short).
const MAX_NAME: usize = 48;

/// The most threads one block may have (CUDA's limit).
const MAX_BLOCK_THREADS: u64 = 1024;

/// `common.cuh`, the types and helpers every nuvec kernel starts from.
const COMMON: &str = include_str!("../backend/cuda/kernels/common.cuh");

/// What the generated kernels add to `common.cuh`.
const PRELUDE: &str = r#"// ---- nuvec custom kernel prelude ----
// The extents (`a_shape`) or steps in elements (`a_strides`) of an input, passed by value.
struct nv_dims {
  i64 v[NV_MAX_DIMS];
  __device__ __forceinline__ i64 operator[](i64 d) const { return v[d]; }
};

// Where element `i` (row-major over `shape`) of a strided input sits, from its pointer.
__device__ __forceinline__ i64 nv_elem_to_loc(i64 i, const nv_dims& shape,
                                              const nv_dims& strides, int ndim) {
  i64 at = 0;
  for (int d = ndim - 1; d >= 0; --d) {
    i64 q = i / shape[d];
    at += (i - q * shape[d]) * strides[d];
    i = q;
  }
  return at;
}

// Every element of an output set to `v` (converted as a cast to the output's type).
template <typename T>
__device__ __forceinline__ void nv_custom_init(T* out, i64 n, double v) {
  const T x = nv_down<T>((typename Acc<T>::type)v);
  NV_FOR_EACH(i, n) out[i] = x;
}
"#;

/// A template argument of a custom kernel: a type, an integer or a boolean, declared at the
/// top of the kernel's body as `using NAME = TYPE;`, `constexpr int NAME = VALUE;` (`long
/// long` for a value past 32 bits) or `constexpr bool NAME = VALUE;`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TemplateArg {
    /// An element type (any but complex).
    DType(DType),
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
}

impl From<DType> for TemplateArg {
    fn from(d: DType) -> TemplateArg {
        TemplateArg::DType(d)
    }
}

impl From<i64> for TemplateArg {
    fn from(v: i64) -> TemplateArg {
        TemplateArg::Int(v)
    }
}

impl From<i32> for TemplateArg {
    fn from(v: i32) -> TemplateArg {
        TemplateArg::Int(i64::from(v))
    }
}

impl From<bool> for TemplateArg {
    fn from(v: bool) -> TemplateArg {
        TemplateArg::Bool(v)
    }
}

/// Which of an input's `_shape`, `_strides` and `_ndim` parameters a body mentions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(crate) struct Uses {
    pub(crate) shape: bool,
    pub(crate) strides: bool,
    pub(crate) ndim: bool,
}

impl Uses {
    /// Whether the kernel reads the input's extents or steps.
    pub(crate) fn dims(self) -> bool {
        self.shape || self.strides
    }
}

/// A user's CUDA kernel, MLX's `mx.fast.cuda_kernel` (and `metal_kernel`): a body and the
/// names of its inputs and outputs, from which nuvec writes a complete kernel for each call
/// (see [the generated source](#the-generated-source)).
///
/// The body indexes its inputs and outputs by name, as pointers to their elements. An input
/// whose `NAME_shape`, `NAME_strides` or `NAME_ndim` the body mentions gets that parameter
/// too (an [`nv_dims`](#the-generated-source) of extents, of steps in elements, and an
/// `int`). By default ([`CustomKernel::ensure_row_contiguous`]) every input is made
/// row-major first, so that element `i` of `a` is `a[i]`; without it an input is passed as
/// it lies in memory (the pointer at its first element) and the body reads it through its
/// strides.
///
/// Each call gives the outputs' shapes and types, the grid and the block
/// ([`KernelConfig`]). As in MLX's CUDA backend, the grid counts **threads**, not blocks:
/// the kernel runs `ceil(grid / threadgroup)` blocks along each axis, so a body must check
/// its index against its data (threads past `grid` run too). Outputs are fresh row-major
/// arrays, uninitialised unless the call sets [`KernelConfig::init_value`]. The body finds
/// its thread with CUDA's own `blockIdx`, `blockDim` and `threadIdx`, and may use any
/// device code: atomics on outputs (`atomicAdd(out, v)`: CUDA's atomics take plain pointers,
/// so there is no `atomic_outputs` option as for Metal), `__syncthreads()`, warp
/// intrinsics, `extern __shared__` memory ([`KernelConfig::shared_memory`]); headers
/// (`#include <cooperative_groups.h>`, helper functions) go in [`CustomKernel::header`].
///
/// A custom node only queues kernels on its stream (row-major copies, the initial fills, the
/// user's kernel), so like the other fused nodes it may be recorded into a CUDA graph with
/// its neighbours (`NUVEC_GRAPH_NODES=0` launches every node directly, which can help to
/// find a faulting kernel).
///
/// A specialisation (the kernel's text, the inputs' and outputs' types and the template
/// arguments) is compiled with NVRTC the first time it is called on a device, then found in
/// memory (and in the PTX cache on disk in later processes); a body that does not compile
/// returns [`Error::Compile`] with NVRTC's log from the call. Custom kernels run on GPU
/// streams only, and have no derivatives and no batching rule (as in MLX).
///
/// The kernel is trusted as MLX trusts it: it must read its inputs and write its outputs
/// only within their elements. One that does not corrupts other arrays on the device or
/// stops the device's work with an illegal-address error.
///
/// # The generated source
///
/// ```text
/// // nuvec custom kernel `NAME`, generated by nuvec_core::fast::CustomKernel.
/// <common.cuh: f16, bf16, i8..u64, nv_up/nv_down, NV_FOR_EACH, ...>
/// <the custom prelude: nv_dims, nv_elem_to_loc, nv_custom_init>
/// // ---- header ----                           (only with a header)
/// #line 1 "NAME_header"
/// HEADER
/// // ---- kernel ----
/// extern "C" __global__ void custom_NAME(
///     const float* __restrict__ a,              one pointer per input, by name,
///     const nv_dims a_shape,                    then those of a_shape, a_strides,
///     const nv_dims a_strides,                  a_ndim that the body mentions
///     const int a_ndim,
///     float* __restrict__ out) {                one pointer per output, by name
///   using T = float;                            a DType template argument
///   constexpr int N = 4;                        an Int one (long long past 32 bits)
///   constexpr bool FLAG = true;                 a Bool one
/// #line 1 "NAME"
/// BODY
/// }
/// // ---- initial values ----                   (only with an initial value)
/// extern "C" __global__ void custom_NAME_init0(float* out, long long n, double v) { ... }
/// ```
///
/// The kernel is `extern "C"` and not a template: the template arguments become
/// declarations at the top of its body, so no name is mangled, and each specialisation is a
/// module of its own, named by a 64-bit hash of its source. The `#line` directives make
/// NVRTC's messages count the body's (and the header's) own lines.
///
/// Element types are `common.cuh`'s names: `bool`, `u8`, `u16`, `u32`, `u64`, `i8`, `i16`,
/// `i32`, `i64`, `f16` (`__half`), `bf16` (`__nv_bfloat16`), `float`, `double`. An
/// `nv_dims` holds up to eight extents or steps (`a_shape[d]`, as `long long`), steps
/// counted in elements. `nv_elem_to_loc(i, a_shape, a_strides, a_ndim)` is where the
/// row-major index `i` of a strided input sits.
///
/// # Example
///
/// ```
/// use nuvec_core::fast::{CustomKernel, KernelConfig};
/// use nuvec_core::{Array, DType, Device, Stream, with_stream};
///
/// # fn main() -> nuvec_core::Result<()> {
/// // out = exp(a) · SCALE, elementwise, one thread per element.
/// let kernel = CustomKernel::new(
///     "exp_scaled",
///     &["a"],
///     &["out"],
///     r#"
///     i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
///     if (i < a_shape[0]) {
///         out[i] = (T)(expf((float)a[i]) * SCALE);
///     }
///     "#,
/// )?;
/// let a = Array::from_slice(&[0.0f32, 1.0, 2.0], &[3])?;
/// let config = KernelConfig::new((3, 1, 1), (256, 1, 1))
///     .output(&[3], DType::F32)
///     .template("T", DType::F32)
///     .template("SCALE", 2);
///
/// // The source nuvec writes for these inputs, with no GPU needed.
/// let call = kernel.specialise(&[a.clone()], &config)?;
/// assert!(call.source().contains("const nv_dims a_shape,"));
/// assert!(call.source().contains("constexpr int SCALE = 2;"));
///
/// // The kernel itself, where a CUDA device answers.
/// if nuvec_core::cuda::device_info(0).is_ok() {
///     let out = with_stream(Stream::default_for(Device::gpu(0)), || {
///         // SAFETY: thread `i` reads `a[i]` and writes `out[i]` only for `i` below their
///         // common size, `a_shape[0]`.
///         unsafe { kernel.call(&[a.clone()], &config) }
///     })?;
///     let v = out[0].to_vec::<f32>()?;
///     assert!((v[2] - 2.0 * 2f32.exp()).abs() < 1e-5);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomKernel {
    name: String,
    input_names: Vec<String>,
    output_names: Vec<String>,
    source: String,
    header: String,
    ensure_row_contiguous: bool,
    uses: Vec<Uses>,
}

/// The seeds' name of the custom kernel type (MLX's `metal_kernel`); on nuvec its kernels are
/// CUDA kernels. Only an alias of [`CustomKernel`].
pub type MetalKernel = CustomKernel;

impl CustomKernel {
    /// A kernel called `name` whose body `source` reads inputs `input_names` and writes
    /// outputs `output_names`. Names are C identifiers, all distinct; there is at least one
    /// output; `name` has at most 48 characters.
    pub fn new(
        name: &str,
        input_names: &[&str],
        output_names: &[&str],
        source: &str,
    ) -> Result<CustomKernel> {
        identifier("the kernel name", name)?;
        if name.len() > MAX_NAME {
            return Err(invalid(
                OP,
                format!("the kernel name `{name}` is longer than {MAX_NAME} characters"),
            ));
        }
        if output_names.is_empty() {
            return Err(invalid(
                OP,
                format!("`{name}` must have at least one output"),
            ));
        }
        let mut seen = Vec::new();
        for n in input_names.iter().chain(output_names) {
            identifier("an input or output name", n)?;
            distinct(name, &mut seen, n)?;
        }
        let uses = input_names
            .iter()
            .map(|n| Uses {
                shape: mentions(source, &format!("{n}_shape")),
                strides: mentions(source, &format!("{n}_strides")),
                ndim: mentions(source, &format!("{n}_ndim")),
            })
            .collect();
        let kernel = CustomKernel {
            name: name.to_string(),
            input_names: input_names.iter().map(|s| s.to_string()).collect(),
            output_names: output_names.iter().map(|s| s.to_string()).collect(),
            source: source.to_string(),
            header: String::new(),
            ensure_row_contiguous: true,
            uses,
        };
        // An input named like another's shape parameter (`a` and `a_shape`) would clash.
        let mut params = Vec::new();
        for p in kernel.param_names() {
            distinct(name, &mut params, &p)?;
        }
        Ok(kernel)
    }

    /// Code placed before the kernel: `#include`s, helper functions, constants.
    pub fn header(mut self, header: &str) -> CustomKernel {
        self.header = header.to_string();
        self
    }

    /// Whether inputs are made row-major before the kernel reads them (the default, as in
    /// MLX). Without it each input is passed as it lies (a transposed or broadcast view,
    /// say), the pointer at its first element, and the body reads it through `NAME_strides`.
    pub fn ensure_row_contiguous(mut self, yes: bool) -> CustomKernel {
        self.ensure_row_contiguous = yes;
        self
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs the kernel over `inputs` (one per input name) as `config` says, on the current
    /// stream (a GPU stream), and returns its outputs (one per output name). The
    /// specialisation is compiled now if this device has not compiled it yet, so a body that
    /// does not compile returns [`Error::Compile`] here; the kernel itself runs when its
    /// outputs are evaluated.
    ///
    /// # Safety
    /// nuvec cannot check what the body does. Over the grid `config` gives, the body must read
    /// only elements of its inputs and write only elements of its outputs (and the shared
    /// memory it asked for), as their shapes, strides and types say; writes that race leave
    /// those elements undefined, not the rest of memory.
    pub unsafe fn call(&self, inputs: &[Array], config: &KernelConfig) -> Result<Vec<Array>> {
        let call = self.specialise(inputs, config)?;
        if config.verbose {
            eprintln!(
                "nuvec: the source of custom kernel `{}` ({:016x}):\n{}",
                call.name, call.hash, call.source
            );
        }
        let stream = default_stream();
        if stream.device.kind != DeviceKind::Gpu {
            return Err(invalid(
                OP,
                format!(
                    "`{}`: custom CUDA kernels run on a GPU stream, and the current stream \
                     is on the CPU",
                    self.name
                ),
            ));
        }
        crate::backend::cuda::fast::custom::prepare(stream.device.index, &call)?;
        Array::from_op(
            Primitive::Fast(super::FastOp::Custom(Arc::new(call))),
            inputs.to_vec(),
        )
    }

    /// The specialisation `call` would run for these inputs and this configuration: the
    /// generated source and the launch, checked, with no device needed (MLX's `verbose`
    /// prints the same source).
    pub fn specialise(&self, inputs: &[Array], config: &KernelConfig) -> Result<KernelCall> {
        super::check_inputs(&inputs.iter().collect::<Vec<_>>())?;
        let args: Vec<(DType, usize)> = inputs.iter().map(|a| (a.dtype(), a.ndim())).collect();
        self.specialise_for(&args, config)
    }

    /// [`CustomKernel::specialise`] for inputs of these types and numbers of axes.
    pub(crate) fn specialise_for(
        &self,
        inputs: &[(DType, usize)],
        config: &KernelConfig,
    ) -> Result<KernelCall> {
        let name = &self.name;
        if inputs.len() != self.input_names.len() {
            return Err(invalid(
                OP,
                format!(
                    "`{name}` takes {} inputs ({}), got {}",
                    self.input_names.len(),
                    self.input_names.join(", "),
                    inputs.len()
                ),
            ));
        }
        let outs = self.output_names.len();
        for (what, n) in [
            ("output shapes", config.output_shapes.len()),
            ("output dtypes", config.output_dtypes.len()),
        ] {
            if n != outs {
                return Err(invalid(
                    OP,
                    format!(
                        "`{name}` has {outs} outputs ({}), but the call gives {n} {what}",
                        self.output_names.join(", ")
                    ),
                ));
            }
        }
        for ((&(dtype, ndim), input), uses) in inputs.iter().zip(&self.input_names).zip(&self.uses)
        {
            kernel_type(&format!("input `{input}`"), dtype)?;
            if uses.dims() && ndim > MAX_DIMS {
                return Err(invalid(
                    OP,
                    format!(
                        "`{name}` reads the shape or strides of input `{input}`, which has \
                         {ndim} axes (at most {MAX_DIMS})"
                    ),
                ));
            }
        }
        for (&dtype, output) in config.output_dtypes.iter().zip(&self.output_names) {
            kernel_type(&format!("output `{output}`"), dtype)?;
        }
        let mut params = self.param_names();
        if params.len() > MAX_PARAMS {
            return Err(invalid(
                OP,
                format!(
                    "`{name}` takes {} kernel parameters (its inputs, their shapes, strides and \
                     axes, its outputs), more than {MAX_PARAMS}",
                    params.len()
                ),
            ));
        }
        for (t, arg) in &config.template {
            identifier("a template argument's name", t)?;
            distinct(name, &mut params, t)?;
            if let TemplateArg::DType(d) = arg {
                kernel_type(&format!("template argument `{t}`"), *d)?;
            }
        }
        let blocks = launch_shape(name, config.grid, config.threadgroup)?;
        let source = self.generate(inputs, config);
        Ok(KernelCall {
            name: self.name.clone(),
            hash: fnv1a(&[&source]),
            source,
            inputs: inputs
                .iter()
                .zip(&self.uses)
                .map(|(&(dtype, _), &uses)| CallInput { dtype, uses })
                .collect(),
            outputs: config
                .output_shapes
                .iter()
                .cloned()
                .zip(config.output_dtypes.iter().copied())
                .collect(),
            blocks,
            block: config.threadgroup,
            shared_memory: config.shared_memory,
            init_value: config.init_value.map(f64::to_bits),
            ensure_row_contiguous: self.ensure_row_contiguous,
        })
    }

    /// The names of the kernel's parameters, in order (and what template arguments may not
    /// be called).
    fn param_names(&self) -> Vec<String> {
        let mut names = Vec::new();
        for (n, uses) in self.input_names.iter().zip(&self.uses) {
            names.push(n.clone());
            for (used, suffix) in [
                (uses.shape, "_shape"),
                (uses.strides, "_strides"),
                (uses.ndim, "_ndim"),
            ] {
                if used {
                    names.push(format!("{n}{suffix}"));
                }
            }
        }
        names.extend(self.output_names.iter().cloned());
        names
    }

    /// The complete source of a specialisation (checked already).
    fn generate(&self, inputs: &[(DType, usize)], config: &KernelConfig) -> String {
        let name = &self.name;
        let mut s = String::with_capacity(
            COMMON.len() + PRELUDE.len() + self.header.len() + self.source.len() + 1024,
        );
        // Writing into a `String` cannot fail.
        let _ = writeln!(
            s,
            "// nuvec custom kernel `{name}`, generated by nuvec_core::fast::CustomKernel."
        );
        s.push_str(COMMON);
        s.push('\n');
        s.push_str(PRELUDE);
        if !self.header.is_empty() {
            let _ = writeln!(s, "// ---- header ----\n#line 1 \"{name}_header\"");
            s.push_str(&self.header);
            s.push('\n');
        }
        s.push_str("// ---- kernel ----\n");
        s.push_str(&self.signature(inputs, &config.output_dtypes));
        for (t, arg) in &config.template {
            let _ = match *arg {
                TemplateArg::DType(d) => writeln!(s, "  using {t} = {};", c_type(d)),
                TemplateArg::Int(v) if i32::try_from(v).is_ok() => {
                    writeln!(s, "  constexpr int {t} = {v};")
                }
                TemplateArg::Int(v) => writeln!(s, "  constexpr long long {t} = {v}LL;"),
                TemplateArg::Bool(v) => writeln!(s, "  constexpr bool {t} = {v};"),
            };
        }
        let _ = writeln!(s, "#line 1 \"{name}\"");
        s.push_str(&self.source);
        if !self.source.ends_with('\n') {
            s.push('\n');
        }
        s.push_str("}\n");
        if config.init_value.is_some() {
            s.push_str("// ---- initial values ----\n");
            for (i, &d) in config.output_dtypes.iter().enumerate() {
                let _ = writeln!(
                    s,
                    "extern \"C\" __global__ void custom_{name}_init{i}({}* out, long long n, \
                     double v) {{ nv_custom_init(out, n, v); }}",
                    c_type(d)
                );
            }
        }
        s
    }

    /// `extern "C" __global__ void custom_NAME(PARAMS) {` and a newline.
    fn signature(&self, inputs: &[(DType, usize)], outputs: &[DType]) -> String {
        let mut params = Vec::new();
        for ((n, uses), &(dtype, _)) in self.input_names.iter().zip(&self.uses).zip(inputs) {
            params.push(format!("const {}* __restrict__ {n}", c_type(dtype)));
            if uses.shape {
                params.push(format!("const nv_dims {n}_shape"));
            }
            if uses.strides {
                params.push(format!("const nv_dims {n}_strides"));
            }
            if uses.ndim {
                params.push(format!("const int {n}_ndim"));
            }
        }
        for (n, &dtype) in self.output_names.iter().zip(outputs) {
            params.push(format!("{}* __restrict__ {n}", c_type(dtype)));
        }
        format!(
            "extern \"C\" __global__ void custom_{}(\n    {}) {{\n",
            self.name,
            params.join(",\n    ")
        )
    }
}

/// How one call runs a [`CustomKernel`]: its outputs, its launch and its template arguments
/// (MLX's call arguments after the inputs).
///
/// ```
/// use nuvec_core::DType;
/// use nuvec_core::fast::KernelConfig;
///
/// // Two outputs of 1,000 elements, one thread each, blocks of 128 threads (8 blocks).
/// let config = KernelConfig::new((1000, 1, 1), (128, 1, 1))
///     .output(&[1000], DType::F32)
///     .output(&[10, 100], DType::I32)
///     .template("T", DType::F16)
///     .template("VEC", 4)
///     .template("CHECKED", true)
///     .init_value(0.0);
/// assert_eq!(config.output_shapes.len(), 2);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct KernelConfig {
    /// The shape of each output.
    pub output_shapes: Vec<Vec<usize>>,
    /// The element type of each output (any but complex).
    pub output_dtypes: Vec<DType>,
    /// The threads along each axis, as MLX counts its grid: the kernel runs
    /// `ceil(grid / threadgroup)` blocks along each axis. An axis of 0 threads launches
    /// nothing (the outputs then only get their initial value).
    pub grid: (u32, u32, u32),
    /// The threads of one block along each axis (each at least 1, at most 1,024 in all).
    pub threadgroup: (u32, u32, u32),
    /// The template arguments, declared in this order at the top of the body.
    pub template: Vec<(String, TemplateArg)>,
    /// The value every element of every output starts from (cast to the output's type);
    /// `None`: outputs start uninitialised.
    pub init_value: Option<f64>,
    /// Dynamic shared memory per block, in bytes (`extern __shared__` arrays); past 48 KiB
    /// the kernel is allowed more, up to the device's limit.
    pub shared_memory: u32,
    /// Whether the call prints the generated source (to standard error).
    pub verbose: bool,
}

impl KernelConfig {
    /// A call of `grid` threads in blocks of `threadgroup` threads, with no outputs yet (add
    /// them with [`KernelConfig::output`]), no template arguments, no initial value and no
    /// dynamic shared memory.
    pub fn new(grid: (u32, u32, u32), threadgroup: (u32, u32, u32)) -> KernelConfig {
        KernelConfig {
            output_shapes: Vec::new(),
            output_dtypes: Vec::new(),
            grid,
            threadgroup,
            template: Vec::new(),
            init_value: None,
            shared_memory: 0,
            verbose: false,
        }
    }

    /// The next output, of `shape` and `dtype`.
    pub fn output(mut self, shape: &[usize], dtype: DType) -> KernelConfig {
        self.output_shapes.push(shape.to_vec());
        self.output_dtypes.push(dtype);
        self
    }

    /// The next template argument.
    pub fn template(mut self, name: &str, arg: impl Into<TemplateArg>) -> KernelConfig {
        self.template.push((name.to_string(), arg.into()));
        self
    }

    /// The value outputs start from.
    pub fn init_value(mut self, value: f64) -> KernelConfig {
        self.init_value = Some(value);
        self
    }

    /// Dynamic shared memory per block, in bytes.
    pub fn shared_memory(mut self, bytes: u32) -> KernelConfig {
        self.shared_memory = bytes;
        self
    }

    /// Whether the call prints the generated source.
    pub fn verbose(mut self, yes: bool) -> KernelConfig {
        self.verbose = yes;
        self
    }
}

/// One input of a specialisation: its type and which of its dimensions the kernel reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct CallInput {
    pub(crate) dtype: DType,
    pub(crate) uses: Uses,
}

/// A specialised [`CustomKernel`]: the complete source of one call and its launch, the
/// payload of the node [`FastOp::Custom`](super::FastOp::Custom) records. Two calls with
/// the same source share one compiled module.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct KernelCall {
    name: String,
    source: String,
    hash: u64,
    pub(crate) inputs: Vec<CallInput>,
    pub(crate) outputs: Vec<OutputSpec>,
    pub(crate) blocks: (u32, u32, u32),
    pub(crate) block: (u32, u32, u32),
    pub(crate) shared_memory: u32,
    init_value: Option<u64>,
    pub(crate) ensure_row_contiguous: bool,
}

impl KernelCall {
    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The complete CUDA source compiled for this call.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The kernel's symbol in its module: `custom_NAME`.
    pub fn symbol(&self) -> String {
        format!("custom_{}", self.name)
    }

    /// The 64-bit hash of the source that names the specialisation's module (and its PTX
    /// file in the disk cache).
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// The blocks along each axis: `ceil(grid / threadgroup)`.
    pub fn blocks(&self) -> (u32, u32, u32) {
        self.blocks
    }

    /// The threads of one block along each axis.
    pub fn threads_per_block(&self) -> (u32, u32, u32) {
        self.block
    }

    /// The shape and type of each output.
    pub fn output_specs(&self) -> &[OutputSpec] {
        &self.outputs
    }

    /// The value outputs start from, if any.
    pub fn init_value(&self) -> Option<f64> {
        self.init_value.map(f64::from_bits)
    }

    /// How many times this process has built the module of this specialisation (its source
    /// handed to the compiler, or its PTX read from the disk cache, and loaded), over all
    /// devices: 1 after any number of calls on one device.
    pub fn builds(&self) -> usize {
        lock(builds()).get(&self.hash).copied().unwrap_or(0)
    }
}

impl fmt::Debug for KernelCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KernelCall")
            .field("name", &self.name)
            .field("hash", &format_args!("{:016x}", self.hash))
            .field("outputs", &self.outputs)
            .field("blocks", &self.blocks)
            .field("block", &self.block)
            .finish_non_exhaustive()
    }
}

/// The modules built per specialisation hash (one entry per specialisation this process
/// compiled: bounded by the program's distinct calls).
fn builds() -> &'static Mutex<HashMap<u64, usize>> {
    static BUILDS: OnceLock<Mutex<HashMap<u64, usize>>> = OnceLock::new();
    BUILDS.get_or_init(Default::default)
}

/// Counts one build of the module of specialisation `hash` (see [`KernelCall::builds`]).
pub(crate) fn count_build(hash: u64) {
    *lock(builds()).entry(hash).or_insert(0) += 1;
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The kernel type name of `dtype` (checked by [`kernel_type`] first).
fn c_type(dtype: DType) -> &'static str {
    type_names(dtype).map_or("void", |(c, _)| c)
}

/// An error unless `dtype` has a kernel type.
fn kernel_type(what: &str, dtype: DType) -> Result<()> {
    if dtype.category() == Category::Complex || type_names(dtype).is_none() {
        return Err(invalid(
            OP,
            format!("{what} is {dtype}, which custom kernels do not take"),
        ));
    }
    Ok(())
}

/// An error unless `s` is a C identifier.
fn identifier(what: &str, s: &str) -> Result<()> {
    let mut chars = s.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(invalid(
            OP,
            format!("{what} `{s}` is not a C identifier (letters, digits, `_`)"),
        ))
    }
}

/// An error if `n` is among `seen`; else `n` joins them.
fn distinct(kernel: &str, seen: &mut Vec<String>, n: &str) -> Result<()> {
    if seen.iter().any(|s| s == n) {
        return Err(invalid(
            OP,
            format!(
                "`{kernel}` names `{n}` twice (names of inputs, outputs, their shapes, strides and axes, and template arguments are distinct)"
            ),
        ));
    }
    seen.push(n.to_string());
    Ok(())
}

/// Whether `source` holds `word` as a whole identifier.
fn mentions(source: &str, word: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    source.match_indices(word).any(|(at, _)| {
        let before = source[..at].chars().next_back();
        let after = source[at + word.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

/// The blocks of a launch of `grid` threads in blocks of `threadgroup`, or the error of a
/// shape CUDA cannot launch.
fn launch_shape(
    name: &str,
    grid: (u32, u32, u32),
    threadgroup: (u32, u32, u32),
) -> Result<(u32, u32, u32)> {
    let (tx, ty, tz) = threadgroup;
    let threads = u64::from(tx) * u64::from(ty) * u64::from(tz);
    if threads == 0 || threads > MAX_BLOCK_THREADS || tz > 64 {
        return Err(invalid(
            OP,
            format!(
                "`{name}`: a block of {threadgroup:?} threads: each axis needs at least one, \
                 the third at most 64, and {MAX_BLOCK_THREADS} in all at most"
            ),
        ));
    }
    let blocks = (
        grid.0.div_ceil(tx),
        grid.1.div_ceil(ty),
        grid.2.div_ceil(tz),
    );
    if blocks.0 > i32::MAX as u32 || blocks.1 > 65_535 || blocks.2 > 65_535 {
        return Err(invalid(
            OP,
            format!(
                "`{name}`: a grid of {grid:?} threads makes {blocks:?} blocks; CUDA launches at \
                 most 2³¹ − 1 along x and 65,535 along y and z"
            ),
        ));
    }
    Ok(blocks)
}

/// [`FastOp::Custom`](super::FastOp::Custom): a user's kernel, `(inputs...)` to its outputs.
pub(crate) struct Custom(pub(crate) Arc<KernelCall>);

impl Custom {
    /// Whether inputs of these types and shapes are the ones the kernel was specialised for.
    pub(crate) fn matches(&self, inputs: &[Arg<'_>]) -> bool {
        inputs.len() == self.0.inputs.len()
            && inputs
                .iter()
                .zip(&self.0.inputs)
                .all(|(a, c)| a.dtype == c.dtype && (!c.uses.dims() || a.shape.len() <= MAX_DIMS))
    }

    /// The error of everything a custom kernel does not do.
    fn unsupported(&self, what: &str) -> Error {
        Error::Unsupported {
            op: OP,
            what: format!("{what} of custom kernel `{}`", self.0.name),
        }
    }
}

impl Fused for Custom {
    fn name(&self) -> &'static str {
        OP
    }

    fn specs(&self, c: &Checker<'_>) -> Result<Vec<OutputSpec>> {
        if !self.matches(&super::args_of(c.inputs)) {
            return Err(invalid(
                OP,
                format!(
                    "`{}` was specialised for other inputs (their number or types)",
                    self.0.name
                ),
            ));
        }
        Ok(self.0.outputs.clone())
    }

    /// None: custom kernels run only on a GPU stream.
    fn fallback(&self, _inputs: &[Array]) -> Result<Vec<Array>> {
        Err(invalid(
            OP,
            format!(
                "`{}`: custom CUDA kernels run on a GPU stream (they have no CPU fallback)",
                self.0.name
            ),
        ))
    }

    fn output_count(&self) -> usize {
        self.0.outputs.len()
    }

    fn vjp(&self, _call: VjpArgs<'_>) -> Result<Vec<Array>> {
        Err(self.unsupported("reverse-mode differentiation (vjp)"))
    }

    fn jvp(&self, _call: JvpArgs<'_>) -> Result<Vec<Array>> {
        Err(self.unsupported("forward-mode differentiation (jvp)"))
    }

    fn vmap(&self, _inputs: &[Array], _axes: &[Option<usize>]) -> Result<Batched> {
        Err(self.unsupported("batching (vmap)"))
    }

    fn cuda(&self) -> Option<&dyn CudaKernel> {
        Some(self)
    }
}
