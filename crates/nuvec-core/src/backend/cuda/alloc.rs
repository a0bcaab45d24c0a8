//! Device memory: a caching allocator over `cuMemAlloc` (never managed memory).
//!
//! Freed buffers go back to a cache keyed by size class and are handed out again without a
//! driver call. A cached buffer remembers the stream that last used it: the same stream may
//! take it back at once (its later work is ordered after the earlier reads), another stream
//! only once an event recorded at the free has passed. The cache is capped; past the cap, and
//! when an allocation fails, cached buffers are released to the driver first.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaEvent, CudaStream, result};

use crate::{Error, Result};

/// Device memory counters of one GPU, in bytes (see [`crate::memory_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Held by live buffers.
    pub active: usize,
    /// The most `active` has been since the last [`crate::reset_peak_memory`].
    pub peak: usize,
    /// Kept in the cache for reuse.
    pub cached: usize,
}

/// Bytes rounded up to the size class a buffer is cut to: multiples of 512 bytes up to
/// 64 KiB, then four classes per power of two (at most a quarter wasted).
fn size_class(bytes: usize) -> usize {
    let bytes = bytes.max(1);
    if bytes <= 64 << 10 {
        return bytes.div_ceil(512) * 512;
    }
    let top = usize::BITS - 1 - bytes.leading_zeros();
    let quarter = 1usize << (top - 2);
    bytes.div_ceil(quarter) * quarter
}

/// A cached block: its address, the stream that used it last and, for other streams, an
/// event recorded when it was freed.
struct Cached {
    ptr: u64,
    stream: usize,
    freed: Option<CudaEvent>,
}

struct State {
    /// Free blocks by size class.
    free: BTreeMap<usize, Vec<Cached>>,
    stats: MemoryStats,
    limit: usize,
}

/// The caching allocator of one GPU.
pub(crate) struct Allocator {
    ctx: Arc<CudaContext>,
    state: Mutex<State>,
    /// Streams made on the device so far: while there is one, freeing needs no event.
    streams: AtomicUsize,
}

/// Cached bytes kept by default: freed memory beyond this goes back to the driver.
const DEFAULT_CACHE_LIMIT: usize = 64 << 30;

impl Allocator {
    pub(crate) fn new(ctx: Arc<CudaContext>) -> Allocator {
        Allocator {
            ctx,
            state: Mutex::new(State {
                free: BTreeMap::new(),
                stats: MemoryStats::default(),
                limit: DEFAULT_CACHE_LIMIT,
            }),
            streams: AtomicUsize::new(0),
        }
    }

    /// Notes that the device has one more stream.
    pub(crate) fn stream_made(&self) {
        self.streams.fetch_add(1, Ordering::SeqCst);
    }

    /// The number of streams made on the device so far.
    pub(crate) fn streams(&self) -> usize {
        self.streams.load(Ordering::SeqCst)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A block of at least `bytes` for work on `stream` (`stream_id` names it in the cache).
    pub(crate) fn alloc(self: &Arc<Self>, bytes: usize, stream_id: usize) -> Result<DeviceBuffer> {
        let class = size_class(bytes);
        // One lock on the common path, where the cache has a block of this class.
        let reused = {
            let mut state = self.lock();
            let found = state.free.get_mut(&class).and_then(|list| {
                let at = list.iter().position(|c| {
                    c.stream == stream_id || c.freed.as_ref().is_none_or(CudaEvent::is_complete)
                })?;
                Some(list.swap_remove(at))
            });
            if found.is_some() {
                state.stats.cached -= class;
                state.stats.active += class;
                state.stats.peak = state.stats.peak.max(state.stats.active);
            }
            found
        };
        let ptr = match reused {
            Some(c) => c.ptr,
            None => {
                let ptr = self.fresh(class)?;
                let mut state = self.lock();
                state.stats.active += class;
                state.stats.peak = state.stats.peak.max(state.stats.active);
                ptr
            }
        };
        Ok(DeviceBuffer {
            ptr,
            bytes: class,
            stream: stream_id,
            owner: Arc::clone(self),
        })
    }

    /// A new block from the driver; when that fails, the cache is emptied and it is tried once
    /// more.
    fn fresh(&self, class: usize) -> Result<u64> {
        self.ctx
            .bind_to_thread()
            .map_err(driver("bind the context"))?;
        // SAFETY: the context is current on this thread; the result is checked.
        match unsafe { result::malloc_sync(class) } {
            Ok(ptr) => Ok(ptr),
            Err(_) => {
                self.release_cached(0)?;
                // SAFETY: as above.
                unsafe { result::malloc_sync(class) }.map_err(|e| {
                    Error::Device(format!(
                        "cuda: out of device memory allocating {class} bytes ({e})"
                    ))
                })
            }
        }
    }

    /// Gives cached blocks back to the driver until at most `keep` bytes stay cached.
    pub(crate) fn release_cached(&self, keep: usize) -> Result<()> {
        // Recorded kernels may use cached blocks: launch them before waiting for the device,
        // and keep the wait out of any capture.
        let gpu = super::context::gpu(self.ctx.ordinal())?;
        super::graph::exclusively(&gpu, || {
            let victims = self.take_beyond(keep);
            if victims.is_empty() {
                return Ok(());
            }
            self.ctx
                .bind_to_thread()
                .map_err(driver("bind the context"))?;
            // Queued work may still read these blocks: wait for the device before freeing.
            self.ctx.synchronize().map_err(driver("synchronize"))?;
            for block in victims {
                // SAFETY: the block came from `malloc_sync` in this context, nothing holds it (it
                // was in the free list) and the device has finished all work that used it.
                unsafe { result::free_sync(block.ptr) }.map_err(driver("free"))?;
            }
            Ok(())
        })
    }

    /// Takes cached blocks out of the cache, largest first, until at most `keep` bytes stay.
    fn take_beyond(&self, keep: usize) -> Vec<Cached> {
        let mut state = self.lock();
        let mut out = Vec::new();
        while state.stats.cached > keep {
            let Some((&class, _)) = state.free.iter().next_back() else {
                break;
            };
            let list = state.free.get_mut(&class).expect("listed class");
            let block = list.pop().expect("non-empty lists only");
            if list.is_empty() {
                state.free.remove(&class);
            }
            state.stats.cached -= class;
            out.push(block);
        }
        out
    }

    /// Takes back a block that `stream` (last) used.
    fn free(&self, ptr: u64, class: usize, stream: usize, freed: Option<CudaEvent>) {
        let over = {
            let mut state = self.lock();
            state.stats.active -= class;
            state.stats.cached += class;
            state
                .free
                .entry(class)
                .or_default()
                .push(Cached { ptr, stream, freed });
            state.stats.cached > state.limit
        };
        if over {
            let limit = self.lock().limit;
            // Dropping cannot report errors; a failed release leaves the blocks cached.
            let _ = self.release_cached(limit);
        }
    }

    pub(crate) fn stats(&self) -> MemoryStats {
        self.lock().stats
    }

    pub(crate) fn reset_peak(&self) {
        let mut state = self.lock();
        state.stats.peak = state.stats.active;
    }

    pub(crate) fn set_cache_limit(&self, bytes: usize) -> Result<()> {
        self.lock().limit = bytes;
        self.release_cached(bytes)
    }
}

fn driver(what: &'static str) -> impl Fn(result::DriverError) -> Error {
    move |e| Error::Device(format!("cuda: {what}: {e}"))
}

/// Device memory of one buffer; returned to its allocator's cache when dropped.
pub(crate) struct DeviceBuffer {
    ptr: u64,
    bytes: usize,
    /// The stream id that last used the block.
    stream: usize,
    owner: Arc<Allocator>,
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuffer({:#x}, {} bytes)", self.ptr, self.bytes)
    }
}

impl DeviceBuffer {
    /// The device address.
    pub(crate) fn ptr(&self) -> u64 {
        self.ptr
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // Another stream may take the block only after the work queued so far on the last
        // user's stream, which the event marks; with one stream in use, stream order alone
        // keeps reuse safe.
        let event = (self.owner.streams.load(Ordering::SeqCst) > 1)
            .then(|| super::context::stream_by_id(self.stream))
            .flatten()
            .and_then(|s: Arc<CudaStream>| s.record_event(None).ok());
        self.owner.free(self.ptr, self.bytes, self.stream, event);
    }
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn size_classes_round_up_with_bounded_waste() {
        assert_eq!(size_class(0), 512);
        assert_eq!(size_class(1), 512);
        assert_eq!(size_class(513), 1024);
        assert_eq!(size_class(64 << 10), 64 << 10);
        for bytes in [(64 << 10) + 1, 100_000, 3 << 20, (1 << 30) + 7] {
            let c = size_class(bytes);
            assert!(c >= bytes && c - bytes <= bytes / 4, "{bytes} -> {c}");
        }
    }
}
