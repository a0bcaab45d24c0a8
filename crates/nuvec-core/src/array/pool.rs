//! A cache of freed host buffers, reused by later outputs of the same type and length.
//!
//! Fresh large allocations come from the operating system as untouched pages, and the first
//! write to each page faults: for a 16 MiB result that costs more than the arithmetic. Kernels
//! therefore take their outputs from [`alloc`], and dropped buffers return here (up to a
//! limit), as MLX's CPU allocator does.

use std::collections::HashMap;
use std::sync::Mutex;

use super::HostData;
use crate::DType;
use crate::dtype::Element;

/// Buffers below this many bytes are not worth caching.
const MIN_BYTES: usize = 1 << 16;

struct Pool {
    free: HashMap<(DType, usize), Vec<HostData>>,
    bytes: usize,
    limit: usize,
}

static POOL: Mutex<Option<Pool>> = Mutex::new(None);

fn with_pool<R>(f: impl FnOnce(&mut Pool) -> R) -> R {
    let mut guard = POOL.lock().unwrap_or_else(|e| e.into_inner());
    let pool = guard.get_or_insert_with(|| Pool {
        free: HashMap::new(),
        bytes: 0,
        limit: 1 << 30,
    });
    f(pool)
}

/// A vector of `n` elements whose values are unspecified (a cached buffer's old contents, or
/// zeros): for outputs that a kernel overwrites entirely.
pub fn alloc<T: Element>(n: usize) -> Vec<T> {
    let bytes = n * T::DTYPE.size();
    if bytes >= MIN_BYTES {
        let cached = with_pool(|pool| {
            let data = pool.free.get_mut(&(T::DTYPE, n))?.pop()?;
            pool.bytes -= bytes;
            Some(data)
        });
        if let Some(data) = cached
            && let Ok(v) = T::from_host(data)
        {
            return v;
        }
    }
    vec![T::default(); n]
}

/// Takes a buffer that is no longer used, keeping it for reuse if it is large and the cache
/// has room.
pub(crate) fn release(data: HostData) {
    let dtype = data.dtype();
    let n = data.len();
    let bytes = n * dtype.size();
    if bytes < MIN_BYTES {
        return;
    }
    with_pool(|pool| {
        if pool.bytes + bytes <= pool.limit {
            pool.bytes += bytes;
            pool.free.entry((dtype, n)).or_default().push(data);
        }
    });
}

/// Frees every cached host buffer.
pub fn clear_cache() {
    with_pool(|pool| {
        pool.free.clear();
        pool.bytes = 0;
    });
}

/// The bytes held by cached host buffers.
pub fn cache_bytes() -> usize {
    with_pool(|pool| pool.bytes)
}

/// Sets the most bytes the cache keeps (default 1 GiB); 0 turns caching off.
pub fn set_cache_limit(bytes: usize) {
    with_pool(|pool| {
        pool.limit = bytes;
        if pool.bytes > bytes {
            pool.free.clear();
            pool.bytes = 0;
        }
    });
}
