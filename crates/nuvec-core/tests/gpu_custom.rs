//! Users' CUDA kernels (`fast::CustomKernel`, `backend/cuda/fast/custom.rs`) on the GPU,
//! against the same computations on the CPU: an elementwise kernel over every float type and
//! input layout, template arguments of each kind (types, integers including one past 32
//! bits, booleans), strided inputs read through `NAME_strides` without row-major copies, a
//! 2-D grid with two outputs, initial values (sums by `atomicAdd` from them, outputs only
//! filled, a large fill), dynamic shared memory past 48 KiB, a body that does not compile
//! (NVRTC's log in the error), the module cache (a second call does not build again), long
//! chains of custom nodes in one evaluation (CUDA graph batching), and the transforms they
//! refuse. Each test skips itself, saying so, where no CUDA device answers. The CPU-side
//! checks (generated source, bad calls) are in `custom_kernel.rs`.

mod common;

use common::Rng;
use common::gpu::{close, gpu_available, on, random, values};
use nuvec_core::fast::{CustomKernel, KernelConfig};
use nuvec_core::*;

/// `kernel.call(inputs, config)`. Every kernel of this file reads and writes its arrays only
/// below their sizes (each body checks its index against the extents it is given, and the
/// atomic sums add into their own outputs), which is what `call` asks of its caller.
fn run(kernel: &CustomKernel, inputs: &[Array], config: &KernelConfig) -> Result<Vec<Array>> {
    // SAFETY: as said above, the bodies of this file stay inside their arrays.
    unsafe { kernel.call(inputs, config) }
}

/// `f` on GPU 0's default stream.
fn gpu<R>(f: impl FnOnce() -> R) -> R {
    on(Device::gpu(0), f)
}

/// `f` on the CPU's default stream.
fn cpu<R>(f: impl FnOnce() -> R) -> R {
    on(Device::cpu(), f)
}

/// The relative tolerance of one rounding to `dtype`, a little more.
fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 1e-12,
        DType::F32 => 4e-6,
        DType::F16 => 4e-3,
        _ => 2e-2,
    }
}

/// Asserts that `got` (GPU values) equals `want` elementwise within `tol`.
fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(close(*g, *w, tol), "{what}[{i}]: gpu {g} vs expected {w}");
    }
}

/// `[rows, n]` values of `dtype` in several layouts: contiguous, transposed (its last axis
/// not of step 1), every other row backwards (negative steps), one row broadcast (step 0),
/// starting one element into its buffer (an offset), and no rows.
fn layouts(rng: &mut Rng, rows: usize, n: usize, dtype: DType) -> Vec<(&'static str, Array)> {
    let x = random(rng, &[rows, n], -2.0, 2.0, dtype);
    let t = transpose(&random(rng, &[n, rows], -2.0, 2.0, dtype), &[1, 0]).unwrap();
    let rev = slice(
        &random(rng, &[2 * rows, n], -2.0, 2.0, dtype),
        &[SliceArg::new(None, None, -2), SliceArg::new(None, None, -1)],
    )
    .unwrap();
    let wide = broadcast_to(&random(rng, &[1, n], -2.0, 2.0, dtype), &[rows, n]).unwrap();
    let shifted = slice(
        &random(rng, &[rows, n + 1], -2.0, 2.0, dtype),
        &[SliceArg::full(), SliceArg::new(Some(1), None, 1)],
    )
    .unwrap();
    let empty = slice(&x, &[SliceArg::new(Some(0), Some(0), 1)]).unwrap();
    vec![
        ("contiguous", x),
        ("transposed", t),
        ("reversed", rev),
        ("broadcast", wide),
        ("shifted", shifted),
        ("empty", empty),
    ]
}

/// `out = exp(a) · b` elementwise, in `T`'s computing type, for inputs of any number of
/// axes (the body counts the elements from `a_shape`), `b` a 0-D array.
const EXP_TIMES: &str = r#"
    using A = typename Acc<T>::type;
    i64 n = 1;
    for (int d = 0; d < a_ndim; ++d) n *= a_shape[d];
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = nv_down<T>((A)(exp((double)nv_up(a[i])) * (double)nv_up(b[0])));
    }
"#;

#[test]
fn an_elementwise_kernel_matches_the_cpu_on_every_float_type_and_layout() {
    if !gpu_available() {
        return;
    }
    let kernel = CustomKernel::new("exp_times", &["a", "b"], &["out"], EXP_TIMES).unwrap();
    let mut rng = Rng::new(7);
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        for (layout, a) in layouts(&mut rng, 37, 129, dtype) {
            let b = Array::scalar(0.75f32).astype(dtype).unwrap();
            let n = a.size();
            let config = KernelConfig::new((n as u32, 1, 1), (128, 1, 1))
                .output(a.shape(), dtype)
                .template("T", dtype);
            let out = gpu(|| run(&kernel, &[a.clone(), b.clone()], &config))
                .unwrap_or_else(|e| panic!("{dtype} {layout}: {e}"))
                .remove(0);
            assert_eq!(out.shape(), a.shape(), "{dtype} {layout}");
            assert_eq!(out.dtype(), dtype, "{dtype} {layout}");
            let want = cpu(|| multiply(&exp(&a)?, &b)).unwrap();
            let what = format!("exp_times {dtype} {layout}");
            assert_close(&what, &values(&out), &values(&want), 2.0 * tol(dtype));
        }
    }
}

/// `out = ±a · N` in `T`, `−` when `FLIP`.
const SCALED: &str = r#"
    using A = typename Acc<T>::type;
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < a_shape[0]) {
        const A v = (A)((long long)a[i] * (long long)N);
        out[i] = nv_down<T>(FLIP ? -v : v);
    }
"#;

#[test]
fn template_arguments_of_each_kind_specialise_the_kernel() {
    if !gpu_available() {
        return;
    }
    let kernel = CustomKernel::new("scaled", &["a"], &["out"], SCALED).unwrap();
    let a_values: Vec<i32> = (0..1000).map(|i| (i % 101) - 50).collect();
    let a = Array::from_slice(&a_values, &[1000]).unwrap();
    let mut hashes = Vec::new();
    for dtype in [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::I32,
        DType::I64,
    ] {
        let wide = matches!(dtype, DType::F64 | DType::I64);
        let ns: &[i64] = if wide { &[3, -2, 1 << 33] } else { &[3, -2] };
        for &n in ns {
            for flip in [false, true] {
                let config = KernelConfig::new((1000, 1, 1), (256, 1, 1))
                    .output(&[1000], dtype)
                    .template("T", dtype)
                    .template("N", n)
                    .template("FLIP", flip);
                let what = format!("scaled T={dtype} N={n} FLIP={flip}");
                let call = kernel
                    .specialise(std::slice::from_ref(&a), &config)
                    .unwrap();
                let out = gpu(|| run(&kernel, std::slice::from_ref(&a), &config))
                    .unwrap_or_else(|e| panic!("{what}: {e}"))
                    .remove(0);
                assert_eq!(out.dtype(), dtype, "{what}");
                let sign = if flip { -1.0 } else { 1.0 };
                let want: Vec<f64> = a_values
                    .iter()
                    .map(|&v| sign * f64::from(v) * n as f64)
                    .collect();
                assert_close(&what, &values(&out), &want, tol(dtype));
                assert_eq!(call.builds(), 1, "{what}: one module per specialisation");
                hashes.push(call.hash());
            }
        }
    }
    let count = hashes.len();
    hashes.sort_unstable();
    hashes.dedup();
    assert_eq!(
        hashes.len(),
        count,
        "every specialisation has its own module"
    );
}

/// `out` = the elements of `a` in row-major order, read where they lie through its steps.
const GATHER: &str = r#"
    i64 n = 1;
    for (int d = 0; d < a_ndim; ++d) n *= a_shape[d];
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[nv_elem_to_loc(i, a_shape, a_strides, a_ndim)];
"#;

/// The same over a 2-D grid (x: columns, y: rows), the steps applied by hand.
const GATHER_2D: &str = r#"
    const i64 c = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 r = (i64)blockIdx.y * blockDim.y + threadIdx.y;
    if (r < a_shape[0] && c < a_shape[1]) {
        out[r * a_shape[1] + c] = a[r * a_strides[0] + c * a_strides[1]];
    }
"#;

#[test]
fn strided_inputs_are_read_through_their_strides_without_copies() {
    if !gpu_available() {
        return;
    }
    let flat = CustomKernel::new("gather", &["a"], &["out"], GATHER)
        .unwrap()
        .ensure_row_contiguous(false);
    let grid = CustomKernel::new("gather_2d", &["a"], &["out"], GATHER_2D)
        .unwrap()
        .ensure_row_contiguous(false);
    let mut rng = Rng::new(11);
    for dtype in [DType::F32, DType::F16, DType::I64, DType::U8] {
        for (layout, a) in layouts(&mut rng, 19, 70, dtype) {
            let (rows, cols) = (a.shape()[0], a.shape()[1]);
            let want = values(&a);
            let what = format!("gather {dtype} {layout}");
            let config =
                KernelConfig::new((a.size() as u32, 1, 1), (64, 1, 1)).output(a.shape(), dtype);
            let out = gpu(|| run(&flat, std::slice::from_ref(&a), &config))
                .unwrap_or_else(|e| panic!("{what}: {e}"))
                .remove(0);
            assert_close(&what, &values(&out), &want, 0.0);
            let what = format!("gather_2d {dtype} {layout}");
            let config = KernelConfig::new((cols as u32, rows as u32, 1), (32, 8, 1))
                .output(a.shape(), dtype);
            let out = gpu(|| run(&grid, std::slice::from_ref(&a), &config))
                .unwrap_or_else(|e| panic!("{what}: {e}"))
                .remove(0);
            assert_close(&what, &values(&out), &want, 0.0);
        }
    }
}

#[test]
fn row_major_inputs_get_row_major_shapes_and_strides() {
    if !gpu_available() {
        return;
    }
    // Writes ndim, then the extents, then the steps.
    let body = r#"
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        dims[0] = a_ndim;
        for (int d = 0; d < a_ndim; ++d) { dims[1 + d] = a_shape[d]; dims[1 + a_ndim + d] = a_strides[d]; }
    }
    "#;
    let kernel = CustomKernel::new("dims", &["a"], &["dims"], body).unwrap();
    let mut rng = Rng::new(3);
    // A transposed view, a broadcast one and a view with an axis of one element.
    let t = transpose(&random(&mut rng, &[5, 7], -1.0, 1.0, DType::F32), &[1, 0]).unwrap();
    let b = broadcast_to(&random(&mut rng, &[1, 5], -1.0, 1.0, DType::F32), &[7, 5]).unwrap();
    let one = slice(
        &random(&mut rng, &[3, 7, 5], -1.0, 1.0, DType::F32),
        &[SliceArg::new(Some(1), Some(2), 1)],
    )
    .unwrap();
    for (name, a, want) in [
        ("transposed", t, vec![2.0, 7.0, 5.0, 5.0, 1.0]),
        ("broadcast", b, vec![2.0, 7.0, 5.0, 5.0, 1.0]),
        ("one row", one, vec![3.0, 1.0, 7.0, 5.0, 35.0, 5.0, 1.0]),
    ] {
        let config = KernelConfig::new((1, 1, 1), (32, 1, 1)).output(&[want.len()], DType::I64);
        let out = gpu(|| run(&kernel, std::slice::from_ref(&a), &config))
            .unwrap()
            .remove(0);
        assert_eq!(values(&out), want, "{name}");
    }
}

#[test]
fn a_two_dimensional_grid_writes_two_outputs() {
    if !gpu_available() {
        return;
    }
    // `t` = aᵀ and `s` = a + 1 (as float32) of a `[rows, cols]` input.
    let body = r#"
    const i64 c = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 r = (i64)blockIdx.y * blockDim.y + threadIdx.y;
    const i64 rows = a_shape[0], cols = a_shape[1];
    if (r < rows && c < cols) {
        t[c * rows + r] = a[r * cols + c];
        s[r * cols + c] = (float)a[r * cols + c] + 1.0f;
    }
    "#;
    let kernel = CustomKernel::new("two_outputs", &["a"], &["t", "s"], body).unwrap();
    let mut rng = Rng::new(5);
    for (rows, cols) in [(1, 1), (17, 33), (300, 70)] {
        let a = random(&mut rng, &[rows, cols], -4.0, 4.0, DType::F64);
        let config = KernelConfig::new((cols as u32, rows as u32, 1), (16, 16, 1))
            .output(&[cols, rows], DType::F64)
            .output(&[rows, cols], DType::F32);
        let outs = gpu(|| run(&kernel, std::slice::from_ref(&a), &config)).unwrap();
        let want_t = cpu(|| transpose(&a, &[1, 0])).unwrap();
        let want_s = cpu(|| add(&a.astype(DType::F32)?, Array::scalar(1.0f32))).unwrap();
        assert_eq!(outs[0].shape(), &[cols, rows]);
        assert_eq!(outs[1].dtype(), DType::F32);
        let what = format!("[{rows}, {cols}]");
        assert_close(
            &format!("t {what}"),
            &values(&outs[0]),
            &values(&want_t),
            0.0,
        );
        assert_close(
            &format!("s {what}"),
            &values(&outs[1]),
            &values(&want_s),
            1e-6,
        );
    }
}

#[test]
fn outputs_start_from_the_initial_value() {
    if !gpu_available() {
        return;
    }
    // Sums by atomics, from the initial value: total = init + Σ a, count = init + len(a).
    let body = r#"
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < a_shape[0]) {
        atomicAdd(total, a[i]);
        atomicAdd(count, 1u);
    }
    "#;
    let kernel = CustomKernel::new("atomic_sum", &["a"], &["total", "count"], body).unwrap();
    for n in [1usize, 1000, 1 << 20] {
        let v: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
        let a = Array::from_slice(&v, &[n]).unwrap();
        for init in [0.0, 100.0] {
            let config = KernelConfig::new((n as u32, 1, 1), (256, 1, 1))
                .output(&[1], DType::F32)
                .output(&[1], DType::U32)
                .init_value(init);
            let outs = gpu(|| run(&kernel, std::slice::from_ref(&a), &config)).unwrap();
            let sum: f64 = v.iter().map(|&x| f64::from(x)).sum();
            // Small integers: every partial sum is exact in float32.
            assert_eq!(
                values(&outs[0]),
                [init + sum],
                "total, n = {n}, init {init}"
            );
            assert_eq!(
                values(&outs[1]),
                [init + n as f64],
                "count, n = {n}, init {init}"
            );
        }
    }
    // With nothing launched (an empty grid) the outputs hold the initial value, cast to each
    // output's type, over every element (a fill of 2²² elements too).
    let idle = CustomKernel::new("idle", &[], &["f", "h", "i", "b", "big"], "").unwrap();
    let config = KernelConfig::new((0, 1, 1), (32, 1, 1))
        .output(&[3], DType::F32)
        .output(&[2, 2], DType::F16)
        .output(&[5], DType::I32)
        .output(&[2], DType::Bool)
        .output(&[1 << 22], DType::BF16)
        .init_value(-2.5);
    let outs = gpu(|| run(&idle, &[], &config)).unwrap();
    assert_eq!(values(&outs[0]), [-2.5; 3]);
    assert_eq!(values(&outs[1]), [-2.5; 4]);
    assert_eq!(values(&outs[2]), [-2.0; 5], "a cast to int32 truncates");
    assert_eq!(values(&outs[3]), [1.0; 2], "non-zero is true");
    assert!(
        values(&outs[4]).iter().all(|&x| x == -2.5),
        "the large fill"
    );
    // Infinity (the start of a maximum, say) is a value like any other.
    let floats = CustomKernel::new("idle_floats", &[], &["f", "h", "b", "d"], "").unwrap();
    let config = KernelConfig::new((0, 1, 1), (32, 1, 1))
        .output(&[1], DType::F32)
        .output(&[1], DType::F16)
        .output(&[1], DType::BF16)
        .output(&[1], DType::F64)
        .init_value(f64::NEG_INFINITY);
    let outs = gpu(|| run(&floats, &[], &config)).unwrap();
    for (i, out) in outs.iter().enumerate() {
        assert_eq!(
            values(out),
            [f64::NEG_INFINITY],
            "output {i} ({})",
            out.dtype()
        );
    }
}

#[test]
fn dynamic_shared_memory_past_48_kib_is_allowed() {
    if !gpu_available() {
        return;
    }
    // Each block of 256 threads reverses its elements through 64 KiB of shared memory (each
    // thread's value 64 floats from the next, so the whole allocation is touched).
    let body = r#"
    extern __shared__ float buf[];
    const int t = threadIdx.x;
    const i64 i = (i64)blockIdx.x * blockDim.x + t;
    buf[t * STRIDE] = i < a_shape[0] ? a[i] : 0.0f;
    __syncthreads();
    if (i < a_shape[0]) out[i] = buf[(blockDim.x - 1 - t) * STRIDE];
    "#;
    let kernel = CustomKernel::new("reverse_blocks", &["a"], &["out"], body).unwrap();
    let n = 1000usize;
    let v: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let a = Array::from_slice(&v, &[n]).unwrap();
    let config = KernelConfig::new((n as u32, 1, 1), (256, 1, 1))
        .output(&[n], DType::F32)
        .template("STRIDE", 64)
        .shared_memory(256 * 64 * 4);
    let out = gpu(|| run(&kernel, std::slice::from_ref(&a), &config))
        .unwrap()
        .remove(0);
    let want: Vec<f64> = (0..n)
        .map(|i| {
            let j = i / 256 * 256 + (255 - i % 256);
            if j < n { j as f64 } else { 0.0 }
        })
        .collect();
    assert_close("reverse_blocks", &values(&out), &want, 0.0);
    // More than any block may have is refused by the call.
    let config = config.shared_memory(16 << 20);
    let err = gpu(|| run(&kernel, std::slice::from_ref(&a), &config)).unwrap_err();
    assert!(err.to_string().contains("dynamic shared memory"), "{err}");
}

#[test]
fn a_body_that_does_not_compile_returns_nvrtc_s_log() {
    if !gpu_available() {
        return;
    }
    let body = "\n    out[0] = a[0] + undefined_thing;\n";
    let kernel = CustomKernel::new("broken", &["a"], &["out"], body).unwrap();
    let a = Array::from_slice(&[1.0f32], &[1]).unwrap();
    let config = KernelConfig::new((1, 1, 1), (1, 1, 1)).output(&[1], DType::F32);
    for attempt in 0..2 {
        // The call itself fails (the module is compiled there), every time it is made.
        match gpu(|| run(&kernel, std::slice::from_ref(&a), &config)) {
            Err(Error::Compile { kernel, log }) => {
                assert!(kernel.starts_with("custom_"), "{kernel}");
                assert!(log.contains("undefined_thing"), "{log}");
                assert!(log.contains("is undefined"), "NVRTC's diagnostic: {log}");
                // `#line` makes NVRTC count the body's own lines: the error is on line 2.
                assert!(log.contains("broken(2)"), "the body's line: {log}");
                let msg = Error::Compile { kernel, log }.to_string();
                assert!(msg.contains("NVRTC could not compile"), "{msg}");
            }
            other => panic!("attempt {attempt}: expected a compile error, got {other:?}"),
        }
    }
    // A header's errors count the header's lines.
    let kernel = CustomKernel::new("broken_header", &["a"], &["out"], "out[0] = a[0];")
        .unwrap()
        .header("// one\n__device__ int f() { return nothing_here; }");
    match gpu(|| run(&kernel, std::slice::from_ref(&a), &config)) {
        Err(Error::Compile { log, .. }) => {
            assert!(log.contains("broken_header_header(2)"), "{log}")
        }
        other => panic!("expected a compile error, got {other:?}"),
    }
}

#[test]
fn a_second_call_of_a_specialisation_does_not_build_it_again() {
    if !gpu_available() {
        return;
    }
    // A body no earlier run has compiled, so that even the disk cache is cold.
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let body = format!(
        "// run {nonce} of process {}\n\
         const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;\n\
         if (i < a_shape[0]) out[i] = a[i] * (T)2;\n",
        std::process::id()
    );
    let make = || CustomKernel::new("cached", &["a"], &["out"], &body).unwrap();
    let a = Array::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
    let config = KernelConfig::new((3, 1, 1), (32, 1, 1))
        .output(&[3], DType::F32)
        .template("T", DType::F32);
    let call = make()
        .specialise(std::slice::from_ref(&a), &config)
        .unwrap();
    assert_eq!(call.builds(), 0, "not compiled before the first call");
    let first = gpu(|| run(&make(), std::slice::from_ref(&a), &config))
        .unwrap()
        .remove(0);
    assert_eq!(call.builds(), 1, "the first call builds the module");
    // Another kernel of the same text, called again: the device's table has it.
    for _ in 0..3 {
        let again = gpu(|| run(&make(), std::slice::from_ref(&a), &config))
            .unwrap()
            .remove(0);
        assert_eq!(again.to_vec::<f32>().unwrap(), [2.0, 4.0, 6.0]);
    }
    assert_eq!(first.to_vec::<f32>().unwrap(), [2.0, 4.0, 6.0]);
    assert_eq!(call.builds(), 1, "later calls find the compiled module");
    // Another template argument is another module, built once in turn.
    let f64_config = KernelConfig::new((3, 1, 1), (32, 1, 1))
        .output(&[3], DType::F32)
        .template("T", DType::F64);
    let other = make()
        .specialise(std::slice::from_ref(&a), &f64_config)
        .unwrap();
    assert_ne!(other.hash(), call.hash());
    gpu(|| run(&make(), std::slice::from_ref(&a), &f64_config)).unwrap()[0]
        .eval()
        .unwrap();
    assert_eq!(other.builds(), 1);
    assert_eq!(call.builds(), 1);
    // The PTX went to the disk cache, where one can be written (`jit.rs`'s directory).
    let dir = std::env::var("NUVEC_KERNEL_CACHE")
        .map(std::path::PathBuf::from)
        .or_else(|_| {
            std::env::var("XDG_CACHE_HOME")
                .map(|d| std::path::PathBuf::from(d).join("nuvec/kernels"))
        })
        .or_else(|_| {
            std::env::var("HOME").map(|h| std::path::PathBuf::from(h).join(".cache/nuvec/kernels"))
        });
    if let Some(Ok(entries)) = dir.as_ref().ok().map(std::fs::read_dir) {
        let prefix = format!("custom_{:016x}-", call.hash());
        let found = entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(&prefix));
        assert!(found, "no {prefix}*.ptx in {dir:?}");
    } else {
        eprintln!("no disk cache to check ({dir:?})");
    }
}

#[test]
fn many_custom_nodes_run_in_one_evaluation() {
    if !gpu_available() {
        return;
    }
    // 100 nodes in a row: long enough to be recorded into CUDA graphs (`graph.rs`).
    let body = r#"
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < a_shape[0]) out[i] = a[i] + (float)(i % 3);
    "#;
    let kernel = CustomKernel::new("add_index", &["a"], &["out"], body).unwrap();
    let n = 4099usize;
    let config = KernelConfig::new((n as u32, 1, 1), (128, 1, 1)).output(&[n], DType::F32);
    let x = gpu(|| {
        let mut x = zeros(&[n], DType::F32)?;
        for _ in 0..100 {
            x = run(&kernel, std::slice::from_ref(&x), &config)?.remove(0);
        }
        x.eval()?;
        Ok::<_, Error>(x)
    })
    .unwrap();
    let want: Vec<f64> = (0..n).map(|i| 100.0 * (i % 3) as f64).collect();
    assert_close("add_index ×100", &values(&x), &want, 0.0);
    // Mixed with ordinary operations.
    let y = gpu(|| {
        let mut y = Array::from_slice(&vec![1.0f32; n], &[n])?;
        for _ in 0..20 {
            y = run(&kernel, std::slice::from_ref(&y), &config)?.remove(0);
            y = multiply(&y, Array::scalar(0.5f32))?;
        }
        Ok::<_, Error>(y)
    })
    .unwrap();
    let want: Vec<f64> = (0..n)
        .map(|i| (0..20).fold(1.0, |y, _| (y + (i % 3) as f64) * 0.5))
        .collect();
    assert_close("add_index and multiply ×20", &values(&y), &want, 1e-6);
}

#[test]
fn kernels_read_inputs_of_several_types_and_write_booleans() {
    if !gpu_available() {
        return;
    }
    let body = r#"
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < a_shape[0]) {
        above[i] = a[i] > (float)b[i];
        wide[i] = (i64)b[i] * (i64)b[i] * 100000;
    }
    "#;
    let kernel = CustomKernel::new("compare", &["a", "b"], &["above", "wide"], body).unwrap();
    let mut rng = Rng::new(9);
    let n = 777usize;
    let a = random(&mut rng, &[n], -100.0, 100.0, DType::F32);
    let b = random(&mut rng, &[n], -100.0, 100.0, DType::F32)
        .astype(DType::I32)
        .unwrap();
    let config = KernelConfig::new((n as u32, 1, 1), (64, 1, 1))
        .output(&[n], DType::Bool)
        .output(&[n], DType::I64);
    let outs = gpu(|| run(&kernel, &[a.clone(), b.clone()], &config)).unwrap();
    let want = cpu(|| greater(&a, &b.astype(DType::F32)?)).unwrap();
    assert_eq!(outs[0].dtype(), DType::Bool);
    assert_eq!(values(&outs[0]), values(&want));
    let bs = values(&b);
    let wide: Vec<f64> = bs.iter().map(|&v| v * v * 100000.0).collect();
    assert_eq!(values(&outs[1]), wide);
}

#[test]
fn transforms_are_refused() {
    if !gpu_available() {
        return;
    }
    let body = "const i64 i = threadIdx.x; if (i < a_shape[0]) out[i] = a[i];";
    let kernel = CustomKernel::new("copy", &["a"], &["out"], body).unwrap();
    let a = Array::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    let config = KernelConfig::new((2, 1, 1), (32, 1, 1)).output(&[2], DType::F32);
    let f = |xs: &[Array]| run(&kernel, xs, &config);
    let unsupported = |r: Result<(Vec<Array>, Vec<Array>)>, what: &str| match r {
        Err(Error::Unsupported { op, what: w }) => {
            assert_eq!(op, "custom_kernel");
            assert!(w.contains(what) && w.contains("`copy`"), "{w}");
        }
        other => panic!("{what}: expected unsupported, got {other:?}"),
    };
    gpu(|| {
        unsupported(
            vjp(f, std::slice::from_ref(&a), std::slice::from_ref(&a)),
            "vjp",
        );
        unsupported(
            jvp(f, std::slice::from_ref(&a), std::slice::from_ref(&a)),
            "jvp",
        );
        let batched = zeros(&[3, 2], DType::F32).unwrap();
        match vmap(f, &[Some(0)], &[0])(&[batched]) {
            Err(Error::Unsupported { what, .. }) => assert!(what.contains("vmap"), "{what}"),
            other => panic!("vmap: expected unsupported, got {other:?}"),
        }
    });
}
