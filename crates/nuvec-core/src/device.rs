//! Devices and streams: where an array is computed.
//!
//! Every array records the [`Stream`] it is computed on, taken from the thread's default stream
//! ([`default_stream`]) when the operation is built. Inputs may live anywhere: evaluation brings
//! their data to the stream's device.
//!
//! ```
//! use nuvec_core::{Device, Stream, default_stream, set_default_stream};
//!
//! let previous = default_stream();
//! set_default_stream(Stream::default_for(Device::cpu()));
//! assert_eq!(default_stream().device, Device::cpu());
//! set_default_stream(previous);
//! ```

use std::cell::Cell;
use std::fmt;

/// The kind of a [`Device`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// The host's processors.
    Cpu,
    /// A CUDA GPU.
    Gpu,
}

/// A device: the CPU, or a CUDA GPU by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Device {
    /// CPU or GPU.
    pub kind: DeviceKind,
    /// The device's index among those of its kind.
    pub index: usize,
}

impl Device {
    /// The CPU.
    pub const fn cpu() -> Device {
        Device {
            kind: DeviceKind::Cpu,
            index: 0,
        }
    }

    /// CUDA device `index`.
    pub const fn gpu(index: usize) -> Device {
        Device {
            kind: DeviceKind::Gpu,
            index,
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            DeviceKind::Cpu => write!(f, "cpu"),
            DeviceKind::Gpu => write!(f, "gpu({})", self.index),
        }
    }
}

/// A queue of work on a device; operations on one stream run in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stream {
    /// The device the stream's work runs on.
    pub device: Device,
    /// The stream's index on its device (0 is the device's default stream).
    pub index: usize,
}

impl Stream {
    /// The default stream of `device`.
    pub const fn default_for(device: Device) -> Stream {
        Stream { device, index: 0 }
    }

    /// A stream on `device` with its own index; streams with different indices may run
    /// concurrently on a GPU.
    pub const fn new(device: Device, index: usize) -> Stream {
        Stream { device, index }
    }
}

thread_local! {
    static DEFAULT_STREAM: Cell<Stream> = const { Cell::new(Stream::default_for(Device::cpu())) };
}

/// The stream new operations on this thread are recorded on (the CPU's at first).
pub fn default_stream() -> Stream {
    DEFAULT_STREAM.with(Cell::get)
}

/// Sets the stream new operations on this thread are recorded on.
pub fn set_default_stream(stream: Stream) {
    DEFAULT_STREAM.with(|s| s.set(stream));
}

/// Runs `f` with `stream` as the thread's default stream, restoring the previous one after.
pub fn with_stream<R>(stream: Stream, f: impl FnOnce() -> R) -> R {
    struct Restore(Stream);
    impl Drop for Restore {
        fn drop(&mut self) {
            set_default_stream(self.0);
        }
    }
    let _restore = Restore(default_stream());
    set_default_stream(stream);
    f()
}
