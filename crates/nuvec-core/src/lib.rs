//! nuvec-core: lazy n-dimensional arrays for machine learning, with MLX's semantics.
//!
//! Operations record a graph of [`Primitive`]s; [`eval`] computes it on the CPU (and, with the
//! CUDA backend, on NVIDIA GPUs). Functions are at the crate root, named as in MLX.
//!
//! ```
//! use nuvec_core::{Array, Result};
//!
//! # fn main() -> Result<()> {
//! let x = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
//! let y = (&x * 2.0 + 1.0).reshape(&[3, 2])?;
//! assert_eq!(y.shape(), [3, 2]);
//! assert_eq!(y.to_vec::<f32>()?, [3.0, 5.0, 7.0, 9.0, 11.0, 13.0]);
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

pub mod array;
mod backend;
pub mod device;
pub mod dtype;
pub mod error;
pub mod fast;
pub mod io;
pub mod ops;
pub mod primitive;
pub mod random;
mod scheduler;
pub mod transforms;

/// CUDA-specific tools: timing a GPU stream's work with events (see also [`synchronize`]), what
/// a device is ([`cuda::device_info`]), and how many nodes of GPU streams ran on the host
/// ([`cuda::host_bridge_runs`]).
pub mod cuda {
    pub use crate::backend::cuda::timing::EventTimer;
    pub use crate::backend::cuda::{DeviceInfo, device_info, host_bridge_runs};
}

pub use array::{Array, Operand, Scalar};
pub use backend::cuda::timing::synchronize;
pub use backend::cuda::{
    MemoryStats, clear_device_cache, memory_stats, reset_peak_memory, set_device_cache_limit,
};
pub use device::{Device, DeviceKind, Stream, default_stream, set_default_stream, with_stream};
pub use dtype::{Category, Complex64, DType, Element, HostData, bf16, f16, promote_types};
pub use error::{Error, Result};
pub use fast::{gather_mm, gather_qmm};
pub use ops::*;
pub use primitive::Primitive;
pub use scheduler::{async_eval, eval};
pub use transforms::{
    CustomFunction, custom_function, custom_vjp, grad, jvp, value_and_grad, vjp, vmap,
};
