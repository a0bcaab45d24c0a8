//! Custom CUDA kernels (`fast::CustomKernel`) without a GPU: the source nuvec generates for a
//! call (the signature with the inputs' names, the shapes and strides the body mentions, the
//! template arguments), the launch it derives, and the errors of calls it cannot make. The
//! kernels themselves run in `gpu_custom.rs`.

use std::sync::Arc;

use nuvec_core::fast::{CustomKernel, FastOp, KernelConfig, MetalKernel, TemplateArg};
use nuvec_core::*;

/// The part of a generated source from the kernel's signature on (what precedes it is
/// `common.cuh`, the prelude and the header).
fn kernel_part(source: &str) -> &str {
    let at = source
        .find("// ---- kernel ----\n")
        .expect("a kernel section");
    &source[at + "// ---- kernel ----\n".len()..]
}

fn f32s(shape: &[usize]) -> Array {
    zeros(shape, DType::F32).unwrap()
}

const BODY: &str = "  i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < a_shape[0] * a_strides[0] && b_ndim == 1) out[i] = (T)(a[i] * N);";

#[test]
fn the_signature_names_inputs_their_dimensions_outputs_and_template_arguments() {
    let kernel = CustomKernel::new("scale", &["a", "b"], &["out"], BODY).unwrap();
    let a = zeros(&[2, 3], DType::F16).unwrap();
    let b = zeros(&[5], DType::I32).unwrap();
    let config = KernelConfig::new((6, 1, 1), (32, 1, 1))
        .output(&[2, 3], DType::F16)
        .template("T", DType::F16)
        .template("N", 4)
        .template("FLAG", false);
    let call = kernel.specialise(&[a, b], &config).unwrap();
    let expected = r#"extern "C" __global__ void custom_scale(
    const f16* __restrict__ a,
    const nv_dims a_shape,
    const nv_dims a_strides,
    const i32* __restrict__ b,
    const int b_ndim,
    f16* __restrict__ out) {
  using T = f16;
  constexpr int N = 4;
  constexpr bool FLAG = false;
#line 1 "scale"
  i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < a_shape[0] * a_strides[0] && b_ndim == 1) out[i] = (T)(a[i] * N);
}
"#;
    assert_eq!(kernel_part(call.source()), expected);
    // The source starts with nuvec's types and the prelude, and has no header section.
    let source = call.source();
    assert!(source.starts_with("// nuvec custom kernel `scale`"));
    assert!(source.contains("typedef __half f16;"));
    assert!(source.contains("struct nv_dims"));
    assert!(source.contains("nv_elem_to_loc"));
    assert!(!source.contains("// ---- header ----"));
    assert!(!source.contains("// ---- initial values ----"));
    assert_eq!(call.symbol(), "custom_scale");
    assert_eq!(call.name(), "scale");
    assert_eq!(call.blocks(), (1, 1, 1));
    assert_eq!(call.threads_per_block(), (32, 1, 1));
    assert_eq!(call.output_specs(), &[(vec![2, 3], DType::F16)]);
    assert_eq!(call.init_value(), None);
    assert_eq!(call.builds(), 0, "nothing is compiled without a call");
}

#[test]
fn headers_initial_values_and_wide_integers_are_written_out() {
    let kernel = CustomKernel::new("acc", &["x"], &["total", "count"], "  // nothing\n")
        .unwrap()
        .header(
            "#include <cooperative_groups.h>\n__device__ float twice(float v) { return 2 * v; }",
        );
    let config = KernelConfig::new((100, 1, 1), (64, 1, 1))
        .output(&[1], DType::F32)
        .output(&[1], DType::U32)
        .template("BIG", 1i64 << 40)
        .template("NEG", -3i64)
        .template("ON", TemplateArg::Bool(true))
        .init_value(-1.5);
    let call = kernel.specialise(&[f32s(&[100])], &config).unwrap();
    let source = call.source();
    let header = "// ---- header ----\n#line 1 \"acc_header\"\n#include <cooperative_groups.h>\n\
                  __device__ float twice(float v) { return 2 * v; }\n// ---- kernel ----\n";
    assert!(source.contains(header), "{source}");
    let expected = r#"extern "C" __global__ void custom_acc(
    const float* __restrict__ x,
    float* __restrict__ total,
    u32* __restrict__ count) {
  constexpr long long BIG = 1099511627776LL;
  constexpr int NEG = -3;
  constexpr bool ON = true;
#line 1 "acc"
  // nothing
}
// ---- initial values ----
extern "C" __global__ void custom_acc_init0(float* out, long long n, double v) { nv_custom_init(out, n, v); }
extern "C" __global__ void custom_acc_init1(u32* out, long long n, double v) { nv_custom_init(out, n, v); }
"#;
    assert_eq!(kernel_part(source), expected);
    assert_eq!(call.blocks(), (2, 1, 1), "ceil(100 / 64) blocks");
    assert_eq!(call.init_value(), Some(-1.5));
}

#[test]
fn only_whole_identifiers_ask_for_dimensions() {
    // `data_shape` and `a_shapes` are not `a_shape`; `a_ndim` is.
    let body = "int data_shape = 0; int a_shapes = a_ndim; out[0] = a[0];";
    let kernel = CustomKernel::new("words", &["a"], &["out"], body).unwrap();
    let config = KernelConfig::new((1, 1, 1), (1, 1, 1)).output(&[1], DType::F32);
    let call = kernel.specialise(&[f32s(&[3])], &config).unwrap();
    let part = kernel_part(call.source());
    assert!(part.starts_with(
        "extern \"C\" __global__ void custom_words(\n    const float* __restrict__ a,\n    \
         const int a_ndim,\n    float* __restrict__ out) {\n"
    ));
}

#[test]
fn every_real_type_has_a_kernel_type_name() {
    let names = [
        (DType::Bool, "bool"),
        (DType::U8, "u8"),
        (DType::U16, "u16"),
        (DType::U32, "u32"),
        (DType::U64, "u64"),
        (DType::I8, "i8"),
        (DType::I16, "i16"),
        (DType::I32, "i32"),
        (DType::I64, "i64"),
        (DType::F16, "f16"),
        (DType::BF16, "bf16"),
        (DType::F32, "float"),
        (DType::F64, "double"),
    ];
    let kernel = CustomKernel::new("types", &["a"], &["out"], "").unwrap();
    for (dtype, name) in names {
        let config = KernelConfig::new((1, 1, 1), (1, 1, 1))
            .output(&[1], dtype)
            .template("T", dtype);
        let call = kernel
            .specialise(&[zeros(&[1], dtype).unwrap()], &config)
            .unwrap();
        let part = kernel_part(call.source());
        assert!(
            part.contains(&format!("const {name}* __restrict__ a,")),
            "{part}"
        );
        assert!(
            part.contains(&format!("{name}* __restrict__ out)")),
            "{part}"
        );
        assert!(part.contains(&format!("using T = {name};")), "{part}");
    }
}

#[test]
fn specialisations_are_named_by_their_source() {
    let kernel = CustomKernel::new("same", &["a"], &["out"], "out[0] = a[0];").unwrap();
    let config = |t: DType| {
        KernelConfig::new((1, 1, 1), (1, 1, 1))
            .output(&[1], DType::F32)
            .template("T", t)
    };
    let a = f32s(&[4]);
    let one = kernel
        .specialise(std::slice::from_ref(&a), &config(DType::F32))
        .unwrap();
    let again = kernel
        .specialise(&[f32s(&[9, 9])], &config(DType::F32))
        .unwrap();
    // Shapes are not part of the source (no `a_shape`): one module for both.
    assert_eq!(one.hash(), again.hash());
    assert_eq!(one, again, "the input shapes are not part of the call");
    let other_type = kernel
        .specialise(std::slice::from_ref(&a), &config(DType::F16))
        .unwrap();
    assert_ne!(one.hash(), other_type.hash());
    let input_type = kernel
        .specialise(&[zeros(&[4], DType::I32).unwrap()], &config(DType::F32))
        .unwrap();
    assert_ne!(one.hash(), input_type.hash());
    // The same kernel built twice specialises to the same module; the alias is the type.
    let twin: MetalKernel = CustomKernel::new("same", &["a"], &["out"], "out[0] = a[0];").unwrap();
    assert_eq!(twin, kernel);
    assert_eq!(
        twin.specialise(&[a], &config(DType::F32)).unwrap().hash(),
        one.hash()
    );
}

/// The message of an error, asserting it is an invalid argument.
fn invalid(r: Result<impl std::fmt::Debug>) -> String {
    match r {
        Err(Error::InvalidArgument(msg)) => msg,
        other => panic!("expected an invalid argument, got {other:?}"),
    }
}

#[test]
fn kernels_with_bad_names_are_refused() {
    // (name, inputs, outputs, body, what the error says)
    type Case<'a> = (&'a str, &'a [&'a str], &'a [&'a str], &'a str, &'a str);
    let cases: [Case<'_>; 7] = [
        ("k", &["a"], &[], "", "at least one output"),
        ("k", &["a", "a"], &["out"], "", "`a` twice"),
        ("k", &["a"], &["a"], "", "`a` twice"),
        (
            "k",
            &["a", "a_shape"],
            &["out"],
            "a_shape[0];",
            "`a_shape` twice",
        ),
        ("k", &["1a"], &["out"], "", "not a C identifier"),
        ("my-kernel", &["a"], &["out"], "", "not a C identifier"),
        ("k", &["a b"], &["out"], "", "not a C identifier"),
    ];
    for (name, inputs, outputs, body, says) in cases {
        let msg = invalid(CustomKernel::new(name, inputs, outputs, body));
        assert!(msg.contains(says), "{name} {inputs:?} {outputs:?}: {msg}");
        assert!(msg.starts_with("custom_kernel"), "{msg}");
    }
    let long = "k".repeat(49);
    assert!(invalid(CustomKernel::new(&long, &[], &["o"], "")).contains("longer than 48"));
    assert!(CustomKernel::new(&"k".repeat(48), &[], &["o"], "").is_ok());
}

#[test]
fn calls_that_do_not_fit_the_kernel_are_refused() {
    let kernel = CustomKernel::new("k", &["a", "b"], &["out"], "a_shape;").unwrap();
    let two = [f32s(&[2]), f32s(&[2])];
    let ok = KernelConfig::new((2, 1, 1), (2, 1, 1)).output(&[2], DType::F32);
    assert!(kernel.specialise(&two, &ok).is_ok());
    let cases: Vec<(&[Array], KernelConfig, &str)> = vec![
        (&two[..1], ok.clone(), "takes 2 inputs (a, b), got 1"),
        (
            &two,
            KernelConfig::new((2, 1, 1), (2, 1, 1)),
            "gives 0 output shapes",
        ),
        (
            &two,
            ok.clone().output(&[1], DType::F32),
            "has 1 outputs (out), but the call gives 2 output shapes",
        ),
        (&two, ok.clone().template("a", DType::F32), "`a` twice"),
        (&two, ok.clone().template("a_shape", 1), "`a_shape` twice"),
        (&two, ok.clone().template("out", true), "`out` twice"),
        (
            &two,
            ok.clone().template("N", 1).template("N", 2),
            "`N` twice",
        ),
        (&two, ok.clone().template("N-1", 1), "not a C identifier"),
        (
            &two,
            ok.clone().template("T", DType::C64),
            "template argument `T` is complex64",
        ),
    ];
    for (inputs, config, says) in cases {
        let msg = invalid(kernel.specialise(inputs, &config));
        assert!(msg.contains(says), "{config:?}: {msg}");
    }
    let mut dtypes = ok.clone();
    dtypes.output_dtypes.push(DType::F32);
    assert!(invalid(kernel.specialise(&two, &dtypes)).contains("gives 2 output dtypes"));
    // Complex numbers have no kernel type, in or out.
    let complex = zeros(&[2], DType::C64).unwrap();
    let msg = invalid(kernel.specialise(&[complex, f32s(&[2])], &ok));
    assert!(msg.contains("input `a` is complex64"), "{msg}");
    let c_out = KernelConfig::new((2, 1, 1), (2, 1, 1)).output(&[2], DType::C64);
    assert!(invalid(kernel.specialise(&two, &c_out)).contains("output `out` is complex64"));
    // The shape of an input of more than eight axes does not fit an `nv_dims`.
    let nine = f32s(&[1; 9]);
    let msg = invalid(kernel.specialise(&[nine, f32s(&[2])], &ok));
    assert!(
        msg.contains("input `a`, which has 9 axes (at most 8)"),
        "{msg}"
    );
    // `b`'s shape is not read: nine axes are fine there.
    assert!(kernel.specialise(&[f32s(&[2]), f32s(&[1; 9])], &ok).is_ok());
}

#[test]
fn launches_cuda_cannot_make_are_refused() {
    let kernel = CustomKernel::new("k", &[], &["out"], "").unwrap();
    let at = |grid, block| {
        kernel.specialise(
            &[],
            &KernelConfig::new(grid, block).output(&[1], DType::F32),
        )
    };
    for block in [
        (0, 1, 1),
        (1, 0, 1),
        (1, 1, 0),
        (1025, 1, 1),
        (32, 32, 2),
        (1, 1, 65),
    ] {
        assert!(
            invalid(at((1, 1, 1), block)).contains("a block of"),
            "{block:?}"
        );
    }
    assert!(invalid(at((1, 65_536 * 2, 1), (1, 1, 1))).contains("blocks"));
    assert!(invalid(at((u32::MAX, 1, 1), (1, 1, 1))).contains("blocks"));
    // Threads, not blocks: ceil(grid / threadgroup) along each axis.
    let call = at((1000, 20, 3), (64, 4, 2)).unwrap();
    assert_eq!(call.blocks(), (16, 5, 2));
    assert_eq!(call.threads_per_block(), (64, 4, 2));
    // Limits that fit.
    assert!(at((1, 1, 1), (1024, 1, 1)).is_ok());
    assert!(at((1, 1, 1), (1, 1, 64)).is_ok());
    assert_eq!(at((u32::MAX, 1, 1), (4, 1, 1)).unwrap().blocks().0, 1 << 30);
    assert!(at((u32::MAX, 1, 1), (2, 1, 1)).is_err(), "2³¹ blocks");
    // An empty grid launches nothing (the outputs only get their initial value).
    assert_eq!(at((0, 1, 1), (32, 1, 1)).unwrap().blocks(), (0, 1, 1));
}

#[test]
fn too_many_parameters_are_refused() {
    let names: Vec<String> = (0..12).map(|i| format!("x{i}")).collect();
    let inputs: Vec<&str> = names.iter().map(String::as_str).collect();
    let body: String = names.iter().map(|n| format!("{n}_shape; ")).collect();
    let kernel = CustomKernel::new("many", &inputs, &["out"], &body).unwrap();
    let arrays: Vec<Array> = (0..12).map(|_| f32s(&[1])).collect();
    let config = KernelConfig::new((1, 1, 1), (1, 1, 1)).output(&[1], DType::F32);
    let msg = invalid(kernel.specialise(&arrays, &config));
    assert!(msg.contains("takes 25 kernel parameters"), "{msg}");
}

#[test]
fn a_cpu_stream_is_refused_when_called() {
    let kernel = CustomKernel::new("cpu", &["a"], &["out"], "out[0] = a[0];").unwrap();
    let config = KernelConfig::new((1, 1, 1), (1, 1, 1)).output(&[1], DType::F32);
    let msg = with_stream(Stream::default_for(Device::cpu()), || {
        // SAFETY: a CPU stream refuses the call before any kernel is built or run.
        invalid(unsafe { kernel.call(&[f32s(&[1])], &config) })
    });
    assert!(
        msg.contains("custom CUDA kernels run on a GPU stream"),
        "{msg}"
    );
    // A bad call says what is wrong with it first.
    let bad = KernelConfig::new((1, 1, 1), (0, 1, 1)).output(&[1], DType::F32);
    let msg = with_stream(Stream::default_for(Device::cpu()), || {
        // SAFETY: the bad block is refused before any kernel is built or run.
        invalid(unsafe { kernel.call(&[f32s(&[1])], &bad) })
    });
    assert!(msg.contains("a block of"), "{msg}");
}

#[test]
fn a_node_built_by_hand_on_the_cpu_has_no_fallback() {
    let kernel = CustomKernel::new("by_hand", &["a"], &["out"], "out[0] = a[0];").unwrap();
    let config = KernelConfig::new((1, 1, 1), (1, 1, 1)).output(&[2], DType::I32);
    let a = f32s(&[1]);
    let call = kernel
        .specialise(std::slice::from_ref(&a), &config)
        .unwrap();
    let op = FastOp::Custom(Arc::new(call));
    assert_eq!(op.name(), "custom_kernel");
    assert_eq!(
        op.output_specs(std::slice::from_ref(&a)).unwrap(),
        [(vec![2], DType::I32)]
    );
    // Inputs of other types are not the ones it was specialised for.
    assert!(
        op.output_specs(&[zeros(&[1], DType::I32).unwrap()])
            .is_err()
    );
    assert!(op.output_specs(&[]).is_err());
    let out = with_stream(Stream::default_for(Device::cpu()), || {
        Array::from_op(Primitive::Fast(op), vec![a])
    })
    .unwrap();
    assert_eq!(out[0].shape(), &[2]);
    let err = out[0].eval().unwrap_err();
    assert!(err.to_string().contains("run on a GPU stream"), "{err}");
}

#[test]
fn compile_errors_carry_the_log() {
    let e = Error::Compile {
        kernel: "custom_0123 for sm_90".into(),
        log: "broken(2): error: identifier \"x\" is undefined".into(),
    };
    let msg = e.to_string();
    assert!(msg.starts_with("custom_0123 for sm_90: NVRTC could not compile"));
    assert!(msg.ends_with("broken(2): error: identifier \"x\" is undefined"));
}
