//! Shared test helpers: a small deterministic random source, the lanes of a shape, automatic
//! differentiation checks (autodiff.rs) and the GPU tests' helpers (gpu.rs).

#![allow(dead_code)]

/// A deterministic pseudo-random source (SplitMix64), so failures reproduce.
pub struct Rng(u64);

impl Rng {
    /// A source seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }

    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (self.f64() + 1.0) / 2.0 * (hi - lo)
    }

    /// Uniform integer in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// The row-major positions of each lane along `axis` of `shape`.
pub fn lanes(shape: &[usize], axis: usize) -> Vec<Vec<usize>> {
    let n = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let outer: usize = shape[..axis].iter().product();
    let mut out = Vec::new();
    for o in 0..outer {
        for i in 0..inner {
            out.push((0..n).map(|j| (o * n + j) * inner + i).collect());
        }
    }
    out
}

pub mod autodiff;
pub mod gpu;
