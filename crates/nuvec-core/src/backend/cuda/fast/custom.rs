//! Users' kernels ([`FastOp::Custom`](crate::fast::FastOp::Custom), built by
//! [`crate::fast::CustomKernel`]) on the GPU.
//!
//! Each specialisation is one module of family `custom`, told apart from the others by the
//! hash of its source ([`ModuleKey::spec`]): compiled by NVRTC the first time a device sees
//! it (or its PTX read from the disk cache), kept in the device's table after. The call
//! compiles it ([`prepare`]), so a body that does not compile fails the call rather than a
//! later evaluation; the node finds it in the table.
//!
//! A node copies the inputs that are not row-major when the kernel asked for row-major
//! inputs (on the device, as the fused kernels' [`row_major`] does), allocates its outputs,
//! fills them with the initial value where the call gave one (a grid-stride kernel of the
//! same module per output) and launches the user's kernel over `ceil(grid / threadgroup)`
//! blocks. It only queues kernels on its stream, so it may be recorded into a CUDA graph like
//! the other fused nodes (the first compile happens at the call, outside any capture).

use cudarc::driver::DeviceRepr;
use cudarc::driver::LaunchConfig;

use super::{CudaKernel, Place, row_major};
use crate::array::{ArrayData, row_major_strides};
use crate::backend::cuda::Gpu;
use crate::backend::cuda::launch::{Kernel, KernelKey, ModuleKey, symbol};
use crate::fast::Arg;
use crate::fast::custom::{Custom, KernelCall, MAX_DIMS, count_build};
use crate::primitive::OutputSpec;
use crate::{Error, Result};

/// Dynamic shared memory a kernel may take without opting in.
const DEFAULT_SHARED: u32 = 48 * 1024;

/// An input's extents or steps as the kernel takes them (`nv_dims`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct Dims([i64; MAX_DIMS]);

// SAFETY: `Dims` is `repr(C)` plain data, eight `i64`, the layout of the `nv_dims` struct the
// generated kernels declare, so its bytes are what the kernel reads as that parameter.
unsafe impl DeviceRepr for Dims {}

impl Dims {
    /// The first `values` (at most [`MAX_DIMS`], which the call checked), zeros after.
    fn of(values: impl IntoIterator<Item = i64>) -> Dims {
        let mut d = [0i64; MAX_DIMS];
        for (slot, v) in d.iter_mut().zip(values) {
            *slot = v;
        }
        Dims(d)
    }
}

/// One kernel parameter.
enum Param {
    Ptr(u64),
    Dims(Dims),
    Int(i32),
}

impl Param {
    fn repr(&self) -> &dyn DeviceRepr {
        match self {
            Param::Ptr(p) => p,
            Param::Dims(d) => d,
            Param::Int(i) => i,
        }
    }
}

/// The key of kernel `symbol` of `call`'s module on `gpu`.
fn key(gpu: &Gpu, call: &KernelCall, symbol: crate::backend::cuda::launch::Symbol) -> KernelKey {
    KernelKey {
        module: ModuleKey {
            family: "custom",
            dtype: None,
            arg: 0,
            spec: call.hash(),
            arch: gpu.props.arch,
        },
        symbol,
    }
}

/// Kernel `symbol` of `call`'s module on `gpu`, its module built the first time.
fn kernel(
    gpu: &Gpu,
    call: &KernelCall,
    symbol: crate::backend::cuda::launch::Symbol,
) -> Result<Kernel> {
    gpu.kernel(&key(gpu, call, symbol), || {
        count_build(call.hash());
        call.source().to_string()
    })
}

/// The user's kernel of `call` on `gpu`, allowed the call's dynamic shared memory.
fn main_kernel(gpu: &Gpu, call: &KernelCall) -> Result<Kernel> {
    let k = kernel(gpu, call, symbol!("custom_{}", call.name())?)?;
    if call.shared_memory > DEFAULT_SHARED {
        // Asked of the driver on the kernel's first call only.
        let fixed = k.static_shared()?;
        let most = gpu.props.shared_per_block.saturating_sub(fixed);
        if call.shared_memory > most {
            return Err(Error::InvalidArgument(format!(
                "custom_kernel: `{}` asks for {} bytes of dynamic shared memory; this device \
                 gives a block at most {} ({} less the kernel's {fixed} static bytes)",
                call.name(),
                call.shared_memory,
                most,
                gpu.props.shared_per_block
            )));
        }
        k.allow_shared(gpu.props.shared_per_block)?;
    }
    Ok(k)
}

/// Compiles (or finds) `call`'s module on GPU `ordinal`: what a call does before recording
/// its node, so that a body that does not compile fails the call.
pub(crate) fn prepare(ordinal: usize, call: &KernelCall) -> Result<()> {
    let gpu = crate::backend::cuda::context::gpu(ordinal)?;
    gpu.ctx
        .bind_to_thread()
        .map_err(|e| Error::Device(format!("cuda: bind the context: {e}")))?;
    main_kernel(&gpu, call).map(|_| ())
}

impl CudaKernel for Custom {
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        self.matches(inputs)
    }

    /// A custom node queues only kernels on its stream (copies, fills, the user's kernel);
    /// its module was compiled when it was called.
    fn batchable(&self, _inputs: &[Arg<'_>]) -> bool {
        true
    }

    fn eval(
        &self,
        place: &Place,
        inputs: &mut [ArrayData],
        _outputs: &[OutputSpec],
    ) -> Result<Vec<ArrayData>> {
        run(place, &self.0, inputs)
    }
}

/// Queues the kernels of one node of `call`.
fn run(place: &Place, call: &KernelCall, inputs: &[ArrayData]) -> Result<Vec<ArrayData>> {
    let main = main_kernel(&place.gpu, call)?;
    let data = inputs
        .iter()
        .map(|d| {
            if call.ensure_row_contiguous {
                row_major(place, d)
            } else {
                Ok(d.clone())
            }
        })
        .collect::<Result<Vec<_>>>()?;
    let mut params = Vec::new();
    for (d, input) in data.iter().zip(&call.inputs) {
        let base = place.input(d)?;
        params.push(Param::Ptr(
            base + (d.layout.offset * d.dtype().size()) as u64,
        ));
        let shape = &d.layout.shape;
        if input.uses.shape {
            params.push(Param::Dims(Dims::of(shape.iter().map(|&n| n as i64))));
        }
        if input.uses.strides {
            // Row-major inputs get row-major steps (a row-major layout may step any way along
            // an axis of one element).
            let strides = if call.ensure_row_contiguous {
                row_major_strides(shape)
            } else {
                d.layout.strides.clone()
            };
            params.push(Param::Dims(Dims::of(strides.iter().map(|&s| s as i64))));
        }
        if input.uses.ndim {
            params.push(Param::Int(shape.len() as i32));
        }
    }
    let mut outs = Vec::with_capacity(call.outputs.len());
    for (i, (shape, dtype)) in call.outputs.iter().enumerate() {
        let (out, ptr) = place.output(*dtype, shape)?;
        let n = out.layout.size();
        if let (Some(v), true) = (call.init_value(), n > 0) {
            let init = kernel(&place.gpu, call, symbol!("custom_{}_init{i}", call.name())?)?;
            let n64 = n as i64;
            let fill: [&dyn DeviceRepr; 3] = [&ptr, &n64, &v];
            // SAFETY: the output block was just allocated with `n` elements of `dtype`, the
            // type the generated `custom_NAME_init{i}(T* out, long long n, double v)` writes,
            // over a grid-stride loop below `n`.
            unsafe { init.launch(&place.stream, init.config(n), &fill) }?;
        }
        params.push(Param::Ptr(ptr));
        outs.push(out);
    }
    let (bx, by, bz) = call.blocks;
    if bx > 0 && by > 0 && bz > 0 {
        let cfg = LaunchConfig {
            grid_dim: call.blocks,
            block_dim: call.block,
            shared_mem_bytes: call.shared_memory,
        };
        let refs: Vec<&dyn DeviceRepr> = params.iter().map(Param::repr).collect();
        // SAFETY: the parameters are those of the generated signature, in its order and of
        // its types: for each input a pointer to its first element (of the type the
        // signature names, which `takes` checked), then the `nv_dims` and `int` parameters
        // the body mentions; then each output's fresh block of its shape and type. The
        // inputs' buffers (and the copies in `data`) stay allocated until the stream has
        // passed this work (the allocator reuses a block only after its stream's queued
        // work). That the body reads and writes only within those elements is the user's
        // contract, as documented on `CustomKernel`.
        unsafe { main.launch(&place.stream, cfg, &refs) }?;
    }
    Ok(outs)
}

/// Sources of generated kernels over every element type, complete, for compiling ahead of
/// time (CI): the prelude and the initial-value kernels must compile for each type.
#[cfg(test)]
pub(super) fn all_sources() -> Vec<(String, String)> {
    use crate::backend::cuda::dtype::kernel_types;
    use crate::fast::{CustomKernel, KernelConfig};
    let body = r#"
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < a_shape[0]) {
        out[nv_elem_to_loc(i, a_shape, a_strides, a_ndim)] = a[i];
        (void)N; (void)FLAG; (void)twice(1);
    }"#;
    let kernel = CustomKernel::new("every_type", &["a"], &["out", "other"], body)
        .expect("a valid kernel")
        .header("__device__ __forceinline__ int twice(int v) { return 2 * v; }");
    kernel_types()
        .map(|d| {
            let config = KernelConfig::new((4, 1, 1), (4, 1, 1))
                .output(&[4], d)
                .output(&[1], crate::DType::F32)
                .template("T", d)
                .template("N", 1i64 << 40)
                .template("FLAG", true)
                .init_value(0.5);
            let call = kernel.specialise_for(&[(d, 1)], &config).expect("a call");
            (format!("custom_{}", call.hash()), call.source().to_string())
        })
        .collect()
}
