//! What a benchmark case is: its name and figure, and how to prepare and run it.

use nuvec_core::Array;

/// Where a case runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Target {
    /// The host, through nuvec's CPU backend.
    Cpu,
    /// An NVIDIA GPU, through nuvec's CUDA backend.
    Gpu,
}

impl Target {
    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Target::Cpu => "cpu",
            Target::Gpu => "gpu",
        }
    }
}

/// What a case's figure measures, and how it follows from the work and the time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Bytes that must move (each input read once, each output written once) per second.
    GBps,
    /// Useful floating-point operations per second, 1e9.
    GFlops,
    /// Useful floating-point operations per second, 1e12.
    TFlops,
    /// Microseconds per operation of a chain (the work is the number of operations).
    UsPerOp,
    /// Microseconds per call (the work is 1).
    Us,
    /// Tokens processed per second.
    TokensPerS,
    /// A ratio of two timings (the work is the reference time in seconds).
    Ratio,
}

impl Unit {
    /// The label written in tables and JSON (the peers' scripts write the same).
    pub fn label(self) -> &'static str {
        match self {
            Unit::GBps => "GB/s",
            Unit::GFlops => "GFLOP/s",
            Unit::TFlops => "TFLOP/s",
            Unit::UsPerOp => "us/op",
            Unit::Us => "us",
            Unit::TokensPerS => "tokens/s",
            Unit::Ratio => "ratio",
        }
    }

    /// The figure for `work` done in `seconds`.
    pub fn figure(self, work: f64, seconds: f64) -> f64 {
        match self {
            Unit::GBps | Unit::GFlops => work / seconds / 1e9,
            Unit::TFlops => work / seconds / 1e12,
            Unit::UsPerOp | Unit::Us => seconds / work * 1e6,
            Unit::TokensPerS => work / seconds,
            Unit::Ratio => seconds / work,
        }
    }
}

/// Why a case produced no figure.
#[derive(Debug, Clone)]
pub enum Skip {
    /// Something the case needs does not exist yet; the text says what ("needs ...").
    Unavailable(String),
    /// The case ran and failed (an error from nuvec, or a wrong result).
    Failed(String),
}

impl From<nuvec_core::Error> for Skip {
    fn from(err: nuvec_core::Error) -> Skip {
        Skip::Failed(err.to_string())
    }
}

/// The graph builder of a case, run once per timed run.
pub type Build = Box<dyn FnMut() -> nuvec_core::Result<Vec<Array>>>;
/// Checks the outputs of one run against a reference computed apart from nuvec.
pub type Check = Box<dyn Fn(&[Array]) -> Result<(), String>>;

/// A case made ready to time: its inputs exist and are evaluated.
pub struct Prepared {
    /// The work of one run, in the unit's terms: bytes, FLOPs, or operations.
    pub work: f64,
    /// Builds the graph from the evaluated inputs and returns the arrays to evaluate.
    pub build: Build,
    /// Checks one run's evaluated outputs (called once, after the warm-up).
    pub check: Check,
}

/// One named benchmark case.
pub struct Case {
    /// The name shared with the peers' scripts (see BENCH-CASES.md).
    pub name: &'static str,
    /// Where it runs.
    pub target: Target,
    /// The shapes, as written in tables.
    pub shape: &'static str,
    /// The element type.
    pub dtype: &'static str,
    /// What the figure measures.
    pub unit: Unit,
    /// Timed runs when `--repeat` is not given.
    pub runs: usize,
    /// Untimed runs first.
    pub warmup: usize,
    /// Makes the inputs and the builder, or says why the case cannot run.
    pub prepare: fn() -> Result<Prepared, Skip>,
}

impl Case {
    /// A case with the usual warm-up (2 runs) and `runs` timed runs.
    pub const fn new(
        name: &'static str,
        target: Target,
        shape: &'static str,
        dtype: &'static str,
        unit: Unit,
        runs: usize,
        prepare: fn() -> Result<Prepared, Skip>,
    ) -> Case {
        Case {
            name,
            target,
            shape,
            dtype,
            unit,
            runs,
            warmup: 2,
            prepare,
        }
    }
}

/// A preparer for cases that wait on later work; `what` completes "needs ...".
pub fn unavailable(what: &str) -> Result<Prepared, Skip> {
    Err(Skip::Unavailable(format!("needs {what}")))
}
