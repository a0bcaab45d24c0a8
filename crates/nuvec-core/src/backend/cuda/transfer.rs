//! Copies between host and device memory.
//!
//! A copy from ordinary (pageable) host memory goes through a small driver buffer and runs
//! well below the link's speed, so large buffers go through page-locked staging memory of
//! our own instead: two halves used in turn, so that the host copy into (or out of) one half
//! overlaps the DMA of the other. The staging memory is allocated once per device, on the
//! first large copy, and reused; small copies, and copies made while another thread holds the
//! staging memory, stay direct.

use std::sync::{Arc, TryLockError};

use cudarc::driver::{CudaContext, CudaEvent, CudaStream, result};

use super::{Gpu, driver};
use crate::Result;
use crate::array::HostData;

/// Bytes of one staging half (the whole staging buffer is twice this).
const HALF: usize = 32 << 20;

/// Copies below this many bytes go directly (the driver's own staging is fast enough there).
const DIRECT_BELOW: usize = 1 << 20;

/// Page-locked host memory of one device, in two halves.
pub(crate) struct Staging {
    ptr: *mut u8,
    ctx: Arc<CudaContext>,
    /// Recorded after the last DMA that used each half: the half may be written again once it
    /// has passed.
    done: [CudaEvent; 2],
}

// SAFETY: the pointer is page-locked host memory owned by this value alone; the mutex in
// `Gpu` serialises every use, and the driver calls made with it may come from any thread.
unsafe impl Send for Staging {}

impl Staging {
    fn new(ctx: &Arc<CudaContext>) -> Result<Staging> {
        ctx.bind_to_thread().map_err(driver("bind the context"))?;
        // SAFETY: the context is current; the result is checked before use.
        let ptr = unsafe { result::malloc_host(2 * HALF, 0) }
            .map_err(driver("allocate page-locked host memory"))?
            .cast::<u8>();
        let done = [
            ctx.new_event(None).map_err(driver("create an event"))?,
            ctx.new_event(None).map_err(driver("create an event"))?,
        ];
        Ok(Staging {
            ptr,
            ctx: Arc::clone(ctx),
            done,
        })
    }

    /// Half `h`, once the DMA that used it last has finished.
    fn half(&mut self, h: usize) -> Result<&mut [u8]> {
        self.done[h].synchronize().map_err(driver("synchronize"))?;
        // SAFETY: `ptr` holds `2 · HALF` bytes; half `h` is `HALF` bytes from `h · HALF`; no
        // DMA uses it any more (its event has passed) and `&mut self` excludes other users.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr.add(h * HALF), HALF) })
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        for e in &self.done {
            let _ = e.synchronize();
        }
        // SAFETY: `ptr` came from `malloc_host` in this context and no DMA uses it any more.
        let _ = unsafe { result::free_host(self.ptr.cast()) };
    }
}

/// Runs `f` with the device's staging memory, or returns `None` when it is busy (another
/// thread's copy) or cannot be allocated.
fn with_staging<R>(gpu: &Gpu, f: impl FnOnce(&mut Staging) -> Result<R>) -> Option<Result<R>> {
    let mut guard = match gpu.staging.try_lock() {
        Ok(g) => g,
        Err(TryLockError::Poisoned(p)) => p.into_inner(),
        Err(TryLockError::WouldBlock) => return None,
    };
    if guard.is_none() {
        *guard = Some(Staging::new(&gpu.ctx).ok()?);
    }
    Some(f(guard.as_mut().expect("just made")))
}

/// Copies `src` to the device memory at `dst`, queued on `stream`. `src` may be dropped when
/// this returns.
pub(crate) fn upload(gpu: &Gpu, stream: &CudaStream, dst: u64, src: &[u8]) -> Result<()> {
    if src.len() >= DIRECT_BELOW
        && let Some(r) = with_staging(gpu, |s| upload_staged(s, stream, dst, src))
    {
        return r;
    }
    // SAFETY: the device block at `dst` holds at least `src.len()` bytes; a copy from
    // pageable memory returns once the driver has taken `src`, so it may be dropped after.
    unsafe { result::memcpy_htod_async(dst, src, stream.cu_stream()) }
        .map_err(driver("copy to the device"))
}

fn upload_staged(s: &mut Staging, stream: &CudaStream, dst: u64, src: &[u8]) -> Result<()> {
    for (k, chunk) in src.chunks(HALF).enumerate() {
        let h = k % 2;
        let half = &mut s.half(h)?[..chunk.len()];
        copy_bytes(half, chunk);
        // SAFETY: `half` is page-locked and stays untouched until `done[h]` (recorded right
        // after on the same stream) passes; the device block holds `src.len()` bytes from
        // `dst`, of which this chunk covers `k · HALF .. k · HALF + chunk.len()`.
        unsafe { result::memcpy_htod_async(dst + (k * HALF) as u64, &*half, stream.cu_stream()) }
            .map_err(driver("copy to the device"))?;
        s.done[h]
            .record(stream)
            .map_err(driver("record an event"))?;
    }
    Ok(())
}

/// Copies the device memory at `src` into `dst` after the work queued so far on `stream`,
/// and waits for the copy.
pub(crate) fn download(gpu: &Gpu, stream: &CudaStream, dst: &mut [u8], src: u64) -> Result<()> {
    if dst.len() >= DIRECT_BELOW
        && let Some(r) = with_staging(gpu, |s| download_staged(s, stream, dst, src))
    {
        return r;
    }
    if !dst.is_empty() {
        // SAFETY: the device block at `src` holds at least `dst.len()` bytes written by work
        // on `stream`; the copy is queued there and the stream is synchronised below, before
        // `dst` is used or dropped.
        unsafe { result::memcpy_dtoh_async(dst, src, stream.cu_stream()) }
            .map_err(driver("copy to the host"))?;
    }
    stream.synchronize().map_err(driver("synchronize"))
}

fn download_staged(s: &mut Staging, stream: &CudaStream, dst: &mut [u8], src: u64) -> Result<()> {
    let total = dst.len();
    let chunks = total.div_ceil(HALF);
    let len_of = |k: usize| HALF.min(total - k * HALF);
    let queue = |s: &mut Staging, k: usize| -> Result<()> {
        let h = k % 2;
        let half = &mut s.half(h)?[..len_of(k)];
        // SAFETY: `half` is page-locked and nothing reads it until `done[h]`, recorded right
        // after on the same stream, has passed; the device block holds `total` bytes from
        // `src`, of which this chunk is `k · HALF .. k · HALF + half.len()`.
        unsafe { result::memcpy_dtoh_async(half, src + (k * HALF) as u64, stream.cu_stream()) }
            .map_err(driver("copy to the host"))?;
        s.done[h].record(stream).map_err(driver("record an event"))
    };
    for k in 0..chunks.min(2) {
        queue(s, k)?;
    }
    for k in 0..chunks {
        let h = k % 2;
        let n = len_of(k);
        let half = s.half(h)?;
        copy_bytes(&mut dst[k * HALF..k * HALF + n], &half[..n]);
        if k + 2 < chunks {
            queue(s, k + 2)?;
        }
    }
    Ok(())
}

/// `dst.copy_from_slice(src)`, over several threads for large copies (one thread copies
/// well below the memory's and the link's speed).
fn copy_bytes(dst: &mut [u8], src: &[u8]) {
    const PIECE: usize = 2 << 20;
    if src.len() <= PIECE {
        dst.copy_from_slice(src);
        return;
    }
    use rayon::prelude::*;
    dst.par_chunks_mut(PIECE)
        .zip(src.par_chunks(PIECE))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

/// The bytes of host elements.
pub(crate) fn host_bytes(host: &HostData) -> &[u8] {
    crate::with_host!(host, v, _T => {
        // SAFETY: every element type is plain data without padding, so its elements' memory
        // is `size_of_val(v)` initialised bytes, borrowed as long as `host`.
        unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(&v[..])) }
    })
}

/// The bytes of a vector of elements, to be overwritten with elements of the same type.
pub(crate) fn bytes_mut<T: crate::dtype::Element>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: `T` is plain data without padding, so `v` is `size_of_val(v)` bytes, borrowed
    // mutably as long as `v`. Callers write only bytes of valid `T` values into it (copies of
    // elements of the same type; bool elements on the device are 0 or 1).
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}
