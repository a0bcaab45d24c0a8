//! Helpers of the GPU tests: running a closure on a device, skipping where no CUDA device
//! answers, inputs in several layouts, and comparing the GPU's results with the CPU's.

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

/// Whether `gpu` equals `cpu` (NaN where NaN) within `tol` relative (absolute below 1).
pub fn close(gpu: f64, cpu: f64, tol: f64) -> bool {
    gpu == cpu || (gpu.is_nan() && cpu.is_nan()) || (gpu - cpu).abs() <= tol * cpu.abs().max(1.0)
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
        assert_eq!(cv.len(), gv.len(), "{name} #{i}: length");
        for (k, (a, b)) in gv.iter().zip(&cv).enumerate() {
            assert!(close(*a, *b, tol), "{name} #{i}[{k}]: gpu {a} vs cpu {b}");
        }
    }
}

/// `f`'s array evaluated on GPU 0. With `kernels`, also checks that meanwhile no node ran on
/// the host bridge and no fused node ran its fallback graph inside itself (so the device's
/// own kernels computed it).
pub fn on_gpu_kernels(name: &str, kernels: bool, f: impl FnOnce() -> Array) -> Array {
    let (bridge, nested) = (cuda::host_bridge_runs(), fast::nested_fallbacks());
    let y = on(Device::gpu(0), || {
        let y = f();
        y.eval()
            .unwrap_or_else(|e| panic!("{name} on the GPU: {e}"));
        y
    });
    if kernels {
        assert_eq!(
            cuda::host_bridge_runs(),
            bridge,
            "{name}: a node ran on the host bridge"
        );
        assert_eq!(
            fast::nested_fallbacks(),
            nested,
            "{name}: a fused node fell back"
        );
    }
    y
}

/// `got` and `want` of one shape, every element within `tol` times the largest magnitude of
/// `want` (at least 1): the measure of a product or sum whose terms cancel.
pub fn assert_scaled_close(name: &str, got: &Array, want: &Array, tol: f64) {
    assert_eq!(got.shape(), want.shape(), "{name}: shape");
    let (g, w) = (values(got), values(want));
    let scale = w.iter().fold(1.0f64, |a, v| a.max(v.abs()));
    for (i, (a, e)) in g.iter().zip(&w).enumerate() {
        assert!(
            (a - e).abs() <= tol * scale,
            "{name}[{i}]: gpu {a} vs cpu {e}"
        );
    }
}

/// The relative tolerance of an elementwise result of `dtype`: a rounding or so of its
/// precision; 1e-2 for bfloat16 and for every type that is not a float.
pub fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 1e-12,
        DType::F32 => 2e-6,
        DType::F16 => 2e-3,
        _ => 1e-2,
    }
}

/// An array of `shape` uniform in `[lo, hi)`, made in f64 and cast to `dtype`.
pub fn random(rng: &mut Rng, shape: &[usize], lo: f64, hi: f64, dtype: DType) -> Array {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|_| rng.range(lo, hi)).collect();
    Array::from_slice(&v, shape).unwrap().astype(dtype).unwrap()
}

/// An array of `shape` uniform in `[-1, 1)`, as [`random`] makes it.
pub fn uniform(rng: &mut Rng, shape: &[usize], dtype: DType) -> Array {
    random(rng, shape, -1.0, 1.0, dtype)
}

/// The values of `x` (two axes or more) as inputs of other layouts, each named:
/// - "contiguous": `x` itself;
/// - "transposed": stored with its axes rotated (the last first) and viewed back in order,
///   so that its last axis is not the one of step 1;
/// - "reversed": axis `i` walked with the negative step `steps[i]`, the first over
///   `-steps[0]` copies of `x` stacked along it so that the view keeps `x`'s shape (the
///   other steps are -1 for the same reason; axes past `steps` are kept whole);
/// - "broadcast": the first row of `x` repeated;
/// - "empty": none of its rows.
pub fn layouts(x: &Array, steps: &[isize]) -> Vec<(&'static str, Array)> {
    let nd = x.ndim();
    let rotated: Vec<usize> = std::iter::once(nd - 1).chain(0..nd - 1).collect();
    let back: Vec<usize> = (1..nd).chain(std::iter::once(0)).collect();
    let t = transpose(
        &contiguous(&transpose(x, &rotated).unwrap()).unwrap(),
        &back,
    )
    .unwrap();
    let copies = vec![x.clone(); steps[0].unsigned_abs()];
    // One copy needs no join: the view is then of `x`'s own buffer.
    let stacked = if copies.len() == 1 {
        x.clone()
    } else {
        concatenate(&copies, 0).unwrap()
    };
    let walk: Vec<SliceArg> = steps
        .iter()
        .map(|&s| SliceArg::new(None, None, s))
        .collect();
    let rev = slice(&stacked, &walk).unwrap();
    let row = slice(x, &[SliceArg::new(Some(0), Some(1), 1)]).unwrap();
    let wide = broadcast_to(&row, x.shape()).unwrap();
    let empty = slice(x, &[SliceArg::new(Some(0), Some(0), 1)]).unwrap();
    vec![
        ("contiguous", x.clone()),
        ("transposed", t),
        ("reversed", rev),
        ("broadcast", wide),
        ("empty", empty),
    ]
}
