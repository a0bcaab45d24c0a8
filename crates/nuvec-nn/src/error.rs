//! The crate's error type: nuvec-core's errors, and those of module trees and optimizers.

/// What went wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An error of an array operation.
    #[error(transparent)]
    Core(#[from] nuvec_core::Error),
    /// `load_weights` (strict) found no weight for these parameters.
    #[error("missing parameters: {}", .0.join(", "))]
    MissingParameters(Vec<String>),
    /// `load_weights` (strict) or `update` got weights that name no parameter of the module.
    #[error("parameters not in the module: {}", .0.join(", "))]
    UnexpectedParameters(Vec<String>),
    /// A weight whose shape is not its parameter's.
    #[error("parameter {name}: expected shape {expected:?}, got {got:?}")]
    ShapeMismatch {
        /// The parameter's dotted name.
        name: String,
        /// The parameter's shape.
        expected: Vec<usize>,
        /// The weight's shape.
        got: Vec<usize>,
    },
    /// A name (for `freeze_params`, an optimizer state, ..) that matches no parameter.
    #[error("no parameter named {0}")]
    UnknownParameter(String),
    /// An argument the function cannot take (the message starts with the function's name).
    #[error("{0}")]
    InvalidArgument(String),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<Error> for nuvec_core::Error {
    /// nuvec-core's own errors unchanged; the others as an invalid argument with the message,
    /// so that nuvec-nn's functions can be used inside nuvec-core's transforms.
    fn from(err: Error) -> nuvec_core::Error {
        match err {
            Error::Core(e) => e,
            other => nuvec_core::Error::InvalidArgument(other.to_string()),
        }
    }
}

/// An [`Error::InvalidArgument`] whose message starts with `op`.
pub(crate) fn invalid(op: &str, msg: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{op}: {msg}"))
}
