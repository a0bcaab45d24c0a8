//! The crate's error type.
//!
//! Every fallible operation returns [`Result`]. Errors name the operation that raised them, so a
//! message read far from its cause still says where it came from.

use crate::DType;

/// What went wrong, and in which operation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An argument the operation cannot take (its message starts with the operation's name).
    #[error("{0}")]
    InvalidArgument(String),
    /// The operation does not support this element type.
    #[error("{op}: unsupported dtype {dtype}")]
    UnsupportedDType {
        /// The operation.
        op: &'static str,
        /// The rejected element type.
        dtype: DType,
    },
    /// Shapes that do not broadcast or otherwise fit together.
    #[error("{op}: incompatible shapes {lhs:?} and {rhs:?}")]
    IncompatibleShapes {
        /// The operation.
        op: &'static str,
        /// The first shape.
        lhs: Vec<usize>,
        /// The second shape.
        rhs: Vec<usize>,
    },
    /// An axis outside `-ndim..ndim`.
    #[error("{op}: axis {axis} is out of range for an array of {ndim} dimensions")]
    AxisOutOfRange {
        /// The operation.
        op: &'static str,
        /// The axis as given.
        axis: isize,
        /// The number of dimensions of the array.
        ndim: usize,
    },
    /// Reading values as a Rust type other than the array's element type.
    #[error("{op}: the array holds {dtype}, not {requested}")]
    DTypeMismatch {
        /// The operation.
        op: &'static str,
        /// The array's element type.
        dtype: DType,
        /// The type asked for.
        requested: DType,
    },
    /// A device that cannot run the work (no CUDA driver, no such GPU, a failed launch).
    #[error("device error: {0}")]
    Device(String),
    /// A transformation that a primitive does not support.
    #[error("{op}: {what} is not supported")]
    Unsupported {
        /// The primitive or operation.
        op: &'static str,
        /// What is missing (for example "vjp").
        what: String,
    },
    /// Kernel source that NVRTC, the GPU's run-time compiler, rejected: a user's kernel
    /// ([`crate::fast::CustomKernel`]) that does not compile, with NVRTC's log.
    #[error("{kernel}: NVRTC could not compile the kernel:\n{log}")]
    Compile {
        /// The module (and the architecture it was compiled for).
        kernel: String,
        /// NVRTC's log: its errors and warnings, with their lines.
        log: String,
    },
    /// Reading or writing files.
    #[error("io: {0}")]
    Io(String),
    /// A file that is not valid in its format (corrupt, truncated or inconsistent), or that
    /// holds what nuvec cannot represent (an element type it lacks, say).
    #[error("{op}: {path}: {what}")]
    Format {
        /// The function reading the file (`load_npy`, ...).
        op: &'static str,
        /// The file, as given.
        path: String,
        /// What is wrong, naming the part of the file (header, a tensor, a metadata key).
        what: String,
    },
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Builds an [`Error::InvalidArgument`] whose message starts with the operation's name.
pub(crate) fn invalid(op: &str, msg: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{op}: {msg}"))
}
