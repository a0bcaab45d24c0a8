//! Which vector instructions the CPU has. The standard library checks once and caches the
//! answer, so asking per block of work costs a couple of loads.

/// Whether the CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn has_avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

/// Whether the CPU has AVX-512 (foundation and vector-length extensions) besides AVX2.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn has_avx512() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && has_avx2()
}
