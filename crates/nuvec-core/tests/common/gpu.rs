//! Helpers of the GPU tests: running a closure on a device, skipping where no CUDA device
//! answers, and comparing the GPU's results with the CPU's.

use nuvec_core::*;

use super::Rng;

/// `f` with the default stream of `device`, the previous default restored after.
pub fn on<R>(device: Device, f: impl FnOnce() -> R) -> R {
    let previous = default_stream();
    set_default_stream(Stream::default_for(device));
    let r = f();
    set_default_stream(previous);
    r
}

/// Whether GPU 0 runs work; prints why a test skips itself where it does not.
pub fn gpu_available() -> bool {
    let a = Array::scalar(1.0f32);
    match on(Device::gpu(0), || (&a + &a).eval()) {
        Ok(()) => true,
        Err(e) => {
            eprintln!("skipped: no CUDA device ({e})");
            false
        }
    }
}

/// The elements of `a` as `f64`.
pub fn values(a: &Array) -> Vec<f64> {
    a.astype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

/// `f` on both devices: same shapes, dtypes and values (NaN where NaN), within `tol`
/// relative (absolute below 1).
pub fn both(name: &str, tol: f64, f: impl Fn() -> Result<Vec<Array>>) {
    let cpu = on(Device::cpu(), &f).unwrap_or_else(|e| panic!("{name} on the CPU: {e}"));
    let gpu = on(Device::gpu(0), &f).unwrap_or_else(|e| panic!("{name} on the GPU: {e}"));
    assert_eq!(cpu.len(), gpu.len(), "{name}: outputs");
    for (i, (c, g)) in cpu.iter().zip(&gpu).enumerate() {
        assert_eq!(c.shape(), g.shape(), "{name} #{i}: shape");
        assert_eq!(c.dtype(), g.dtype(), "{name} #{i}: dtype");
        let (cv, gv) = (values(c), values(g));
        for (k, (a, b)) in gv.iter().zip(&cv).enumerate() {
            let ok =
                a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= tol * b.abs().max(1.0);
            assert!(ok, "{name} #{i}[{k}]: gpu {a} vs cpu {b}");
        }
    }
}

/// An array of `shape` uniform in `[lo, hi)`, made in f64 and cast to `dtype`.
pub fn random(rng: &mut Rng, shape: &[usize], lo: f64, hi: f64, dtype: DType) -> Array {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|_| rng.range(lo, hi)).collect();
    Array::from_slice(&v, shape).unwrap().astype(dtype).unwrap()
}
