//! Transposed copies of 4-byte elements through AVX-512 registers.
//!
//! A view whose output rows run along the source's contiguous axis (a transpose) is copied in
//! 16 × 16 blocks: sixteen source lines are loaded as vectors, exchanged in registers, and
//! written as sixteen pieces of output rows. A band of output rows is walked sixteen columns
//! at a time, so the sixteen source lines of a strip are read start to end (the prefetcher
//! follows them) and each output line is written whole, with a streaming store when the
//! output is large and its lines line up with cache lines. The elements are moved as bits
//! (no arithmetic), so one build serves `f32`, `i32` and `u32`.

/// Whether the CPU runs the AVX-512 kernel.
pub(crate) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        super::simd::has_avx512()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// A band of output rows of one transposed matrix: output element `(r, c)` is the source
/// element at `src + r + c · step`.
pub(crate) struct Band {
    /// The source element of output `(0, 0)` of the matrix.
    pub(crate) src: *const f32,
    /// Between source elements of neighbouring output columns.
    pub(crate) step: isize,
    /// The band's first output row.
    pub(crate) first: usize,
    /// One past its last output row.
    pub(crate) end: usize,
    /// Elements per output row.
    pub(crate) cols: usize,
    /// Write with streaming stores where output lines are whole.
    pub(crate) stream: bool,
}

/// Writes the rows of `band` to `out`, output row `band.first + i` at `out + i · cols`.
///
/// # Safety
/// [`available`] must be true; every source element of the band (`src + r + c · step` for
/// `first <= r < end`, `c < cols`) must be readable, and `out` writable for
/// `(end - first) · cols` elements that nothing else accesses meanwhile.
pub(crate) unsafe fn copy_band(band: &Band, out: *mut f32) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller guarantees AVX-512 and the memory `x86::band` touches.
    unsafe {
        x86::band(band, out)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (band, out);
        unreachable!("the kernel is only offered on x86_64");
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::Band;

    /// Exchanges rows and columns of the 16 × 16 block `v` (row `i` is `v[i]`).
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn transpose16(v: [__m512; 16]) -> [__m512; 16] {
        // Pairs of rows interleaved: lane L of t[2i] holds (a[4L], b[4L], a[4L+1], b[4L+1]).
        let mut t = [_mm512_setzero_ps(); 16];
        for i in 0..8 {
            t[2 * i] = _mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]);
            t[2 * i + 1] = _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]);
        }
        // Fours: lane L of u[4j + k] is column 4L + k of rows 4j..4j + 4.
        let mut u = [_mm512_setzero_ps(); 16];
        for j in 0..4 {
            let (a, b) = (_mm512_castps_pd(t[4 * j]), _mm512_castps_pd(t[4 * j + 2]));
            let (c, d) = (
                _mm512_castps_pd(t[4 * j + 1]),
                _mm512_castps_pd(t[4 * j + 3]),
            );
            u[4 * j] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
            u[4 * j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
            u[4 * j + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
            u[4 * j + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
        }
        // Output row 4L + k gathers lane L of u[k], u[4 + k], u[8 + k], u[12 + k].
        let mut w = [_mm512_setzero_ps(); 16];
        for k in 0..4 {
            let p = _mm512_shuffle_f32x4::<0x44>(u[k], u[4 + k]);
            let q = _mm512_shuffle_f32x4::<0xEE>(u[k], u[4 + k]);
            let p2 = _mm512_shuffle_f32x4::<0x44>(u[8 + k], u[12 + k]);
            let q2 = _mm512_shuffle_f32x4::<0xEE>(u[8 + k], u[12 + k]);
            w[k] = _mm512_shuffle_f32x4::<0x88>(p, p2);
            w[4 + k] = _mm512_shuffle_f32x4::<0xDD>(p, p2);
            w[8 + k] = _mm512_shuffle_f32x4::<0x88>(q, q2);
            w[12 + k] = _mm512_shuffle_f32x4::<0xDD>(q, q2);
        }
        w
    }

    /// The mask of the first `n` (1 to 16) lanes.
    fn lanes(n: usize) -> __mmask16 {
        (u32::MAX >> (32 - n)) as __mmask16
    }

    /// One block: output rows `r..r + nr`, columns `c..c + nc` (each 1 to 16), written at
    /// `dst` with rows `ld` apart; `stream` when the block is whole and its lines aligned.
    ///
    /// # Safety
    /// As [`band`], for the block's elements.
    #[target_feature(enable = "avx512f")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    unsafe fn block(
        src: *const f32,
        step: isize,
        (r, nr): (usize, usize),
        (c, nc): (usize, usize),
        dst: *mut f32,
        ld: usize,
        stream: bool,
    ) {
        let mut v = [_mm512_setzero_ps(); 16];
        let line = |i: usize| src.wrapping_offset(r as isize + (c + i) as isize * step);
        if nr == 16 && nc == 16 {
            for (i, x) in v.iter_mut().enumerate() {
                // SAFETY: source line c + i, rows r..r + 16, is inside the band.
                *x = unsafe { _mm512_loadu_ps(line(i)) };
            }
            let w = transpose16(v);
            for (j, x) in w.iter().enumerate() {
                let p = dst.wrapping_add(j * ld);
                // SAFETY: output row r + j, columns c..c + 16, is the caller's to write, and
                // `stream` is only set where `p` is 64-byte aligned.
                unsafe {
                    if stream {
                        _mm512_stream_ps(p, *x);
                    } else {
                        _mm512_storeu_ps(p, *x);
                    }
                }
            }
            return;
        }
        let (mr, mc) = (lanes(nr), lanes(nc));
        for (i, x) in v.iter_mut().enumerate().take(nc) {
            // SAFETY: the masked load reads only rows r..r + nr of source line c + i, all
            // inside the band; masked-off lanes are not accessed.
            *x = unsafe { _mm512_maskz_loadu_ps(mr, line(i)) };
        }
        let w = transpose16(v);
        for (j, x) in w.iter().enumerate().take(nr) {
            // SAFETY: only columns c..c + nc of output row r + j are written.
            unsafe { _mm512_mask_storeu_ps(dst.wrapping_add(j * ld), mc, *x) };
        }
    }

    /// See [`super::copy_band`].
    ///
    /// # Safety
    /// As [`super::copy_band`].
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn band(band: &Band, out: *mut f32) {
        let cols = band.cols;
        // Rows start at one phase of the cache line when a row is whole lines; a first strip
        // as wide as that phase then leaves every later strip's stores aligned.
        let stream =
            band.stream && (cols * 4).is_multiple_of(64) && (out as usize).is_multiple_of(4);
        let head = if stream {
            ((out as usize).wrapping_neg() % 64 / 4).min(cols)
        } else {
            0
        };
        let mut c = 0;
        while c < cols {
            let nc = if c == 0 && head > 0 {
                head
            } else {
                (cols - c).min(16)
            };
            let mut r = band.first;
            while r < band.end {
                let nr = (band.end - r).min(16);
                let dst = out.wrapping_add((r - band.first) * cols + c);
                // SAFETY: the block lies inside the band, which the caller vouches for.
                unsafe {
                    block(
                        band.src,
                        band.step,
                        (r, nr),
                        (c, nc),
                        dst,
                        cols,
                        stream && nc == 16,
                    )
                };
                r += nr;
            }
            c += nc;
        }
        if stream {
            // Streaming stores are weakly ordered: finish them before the pool's join
            // publishes the output.
            _mm_sfence();
        }
    }
}
