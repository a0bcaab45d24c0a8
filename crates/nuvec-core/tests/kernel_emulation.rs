//! CUDA kernels run on the CPU: their sources, with the inline-PTX helpers swapped for the
//! stand-ins of `tests/emulation/ptx.h` and CUDA's runtime for `tests/emulation/cuda.h`, are
//! compiled by the host's C++ compiler (C++20) with a test program that launches them on small
//! shapes and checks the results against references in double. This checks a kernel's logic
//! (indexing, masks, fragment layouts, edges) on machines without a GPU; the device's timing,
//! its memory model and the cp.async wait counts are not checked (the copies happen at once).
//!
//! Each test skips itself, saying so, where no C++ compiler answers (`CXX`, else `c++`).

use std::path::{Path, PathBuf};
use std::process::Command;

const CUDA_H: &str = include_str!("emulation/cuda.h");
const PTX_H: &str = include_str!("emulation/ptx.h");
const EMPTY_H: &str = include_str!("emulation/cuda_fp16.h");
/// The prefill kernels' shared emulation case (inputs, launch, reference in double).
const FLASH_CASE: &str = include_str!("emulation/flash_case.h");
const COMMON: &str = include_str!("../src/backend/cuda/kernels/common.cuh");
const FLASH: &str = include_str!("../src/backend/cuda/kernels/fast/flash.cu");
const FLASH_F32: &str = include_str!("../src/backend/cuda/kernels/fast/flash_f32.cu");
const GATED_DELTA: &str = include_str!("../src/backend/cuda/kernels/fast/gated_delta.cu");
const GATED_CHUNK: &str = include_str!("../src/backend/cuda/kernels/fast/gated_delta_chunk.cu");
const QUANTIZED: &str = include_str!("../src/backend/cuda/kernels/quantized.cu");
const QUANTIZED_TILED: &str = include_str!("../src/backend/cuda/kernels/quantized_tiled.cu");
const ATTENTION: &str = include_str!("../src/backend/cuda/kernels/fast/attention.cu");
const ATTENTION_MERGE: &str = include_str!("../src/backend/cuda/kernels/fast/attention_merge.cu");
const ATTENTION_WIDE: &str = include_str!("../src/backend/cuda/kernels/fast/attention_wide.cu");
const BULK: &str = include_str!("../src/backend/cuda/kernels/fast/bulk.cuh");
const QUANTIZED_WGMMA: &str = include_str!("../src/backend/cuda/kernels/quantized_wgmma.cu");
const QUANTIZED_GATHER: &str = include_str!("../src/backend/cuda/kernels/quantized_gather.cu");
const QUANTIZED_MV_MMA: &str = include_str!("../src/backend/cuda/kernels/quantized_mv_mma.cu");
const FLASH_SM90: &str = include_str!("../src/backend/cuda/kernels/fast/flash_sm90.cu");
const FLASH_TMA: &str = include_str!("../src/backend/cuda/kernels/fast/flash_tma.cu");
const ROWS: &str = include_str!("../src/backend/cuda/kernels/fast/rows.cuh");
const NORMS: &str = include_str!("../src/backend/cuda/kernels/fast/norms.cu");
const SOFTMAX: &str = include_str!("../src/backend/cuda/kernels/fast/softmax.cu");
const ROPE: &str = include_str!("../src/backend/cuda/kernels/fast/rope.cu");

/// The marks around a kernel file's inline-PTX helpers.
const BEGIN: &str = "// nuvec-emulation: device only";
const END: &str = "// } nuvec-emulation";

/// `source` without its regions marked device-only, its dynamic shared arrays declared as
/// plain `extern` arrays (`cuda.h` defines them; `__shared__` alone means `static` there).
fn host_part(source: &str) -> String {
    let mut out = String::new();
    let mut skipping = false;
    for line in source.lines() {
        if line.starts_with(BEGIN) {
            skipping = true;
        } else if line.starts_with(END) {
            skipping = false;
        } else if !skipping {
            out.push_str(&line.replace("extern __shared__", "extern"));
            out.push('\n');
        }
    }
    assert!(!skipping, "a device-only region is not closed");
    out
}

/// The C++ compiler, if one answers.
fn compiler() -> Option<String> {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let ok = Command::new(&cxx)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(cxx)
}

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "nuvec-kernel-emulation-{}-{name}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// Writes the emulation headers, the kernel files (host parts) and `main` into `dir`, builds
/// them into one program (with `defines`, `NAME=VALUE` each) and runs it; panics with the
/// compiler's or the program's output on failure.
fn build_and_run(cxx: &str, dir: &Path, kernels: &[(&str, &str)], main: &str, defines: &[&str]) {
    let write = |name: &str, text: &str| {
        std::fs::write(dir.join(name), text).expect("a scratch file");
    };
    write("cuda.h", CUDA_H);
    write("ptx.h", PTX_H);
    write("cuda_fp16.h", EMPTY_H);
    write("cuda_bf16.h", EMPTY_H);
    write("common.cuh", COMMON);
    let mut top =
        String::from("#include \"cuda.h\"\n#include \"common.cuh\"\n#include \"ptx.h\"\n");
    for (name, text) in kernels {
        write(name, &host_part(text));
        top.push_str(&format!("#include \"{name}\"\n"));
    }
    write("main.cpp", main);
    top.push_str("#include \"main.cpp\"\n");
    write("top.cpp", &top);
    let exe = dir.join("test");
    let built = Command::new(cxx)
        .args(["-std=c++20", "-O1", "-w"])
        .args(defines.iter().map(|d| format!("-D{d}")))
        .arg("-I")
        .arg(dir)
        .arg(dir.join("top.cpp"))
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("the compiler runs");
    assert!(
        built.status.success(),
        "the emulation does not build:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let ran = Command::new(&exe).output().expect("the program runs");
    let said = String::from_utf8_lossy(&ran.stdout);
    println!("{said}");
    assert!(
        ran.status.success(),
        "the emulated kernels disagree ({}):\n{said}{}",
        ran.status,
        String::from_utf8_lossy(&ran.stderr)
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Runs one emulation test (once for each set of defines), or says why it is skipped.
fn emulate(name: &str, kernels: &[(&str, &str)], main: &str, variants: &[&[&str]]) {
    let Some(cxx) = compiler() else {
        eprintln!("kernel emulation skipped: no C++ compiler answers (set CXX)");
        return;
    };
    for (i, defines) in variants.iter().enumerate() {
        build_and_run(
            &cxx,
            &scratch(&format!("{name}-{i}")),
            kernels,
            main,
            defines,
        );
    }
}

#[test]
fn host_part_drops_the_marked_regions_only() {
    let text = format!("a\n{BEGIN} {{\nasm\n{END}\nb\n");
    assert_eq!(host_part(&text), "a\nb\n");
    for source in [
        FLASH,
        FLASH_SM90,
        FLASH_TMA,
        BULK,
        SOFTMAX,
        ATTENTION,
        QUANTIZED_TILED,
        QUANTIZED_WGMMA,
        QUANTIZED_MV_MMA,
    ] {
        let kept = host_part(source);
        assert!(!kept.contains("asm"), "inline PTX left outside the marks");
        assert!(kept.len() < source.len());
    }
}

#[test]
fn flash_f32_kernel_matches_attention_in_double() {
    emulate(
        "flash_f32",
        &[
            ("flash.cu", FLASH),
            ("flash_f32.cu", FLASH_F32),
            ("flash_case.h", FLASH_CASE),
        ],
        include_str!("emulation/flash_f32.cpp"),
        &[&[]],
    );
}

#[test]
fn gated_delta_recurrent_kernel_matches_the_recurrence() {
    emulate(
        "gated_delta",
        &[("gated_delta.cu", GATED_DELTA)],
        include_str!("emulation/gated_delta.cpp"),
        &[&[]],
    );
}

#[test]
fn gated_delta_chunk_kernels_match_the_recurrence() {
    emulate(
        "gated_delta_chunk",
        &[
            ("gated_delta.cu", GATED_DELTA),
            ("flash.cu", FLASH),
            ("gated_delta_chunk.cu", GATED_CHUNK),
        ],
        include_str!("emulation/gated_delta_chunk.cpp"),
        &[&[]],
    );
}

#[test]
fn quantized_tiled_kernel_matches_the_product_in_double() {
    emulate(
        "quantized_tiled",
        &[
            ("quantized.cu", QUANTIZED),
            ("quantized_tiled.cu", QUANTIZED_TILED),
        ],
        include_str!("emulation/quantized_tiled.cpp"),
        &[&[]],
    );
}

#[test]
fn gather_mm_tiles_match_the_gathered_products_in_double() {
    emulate(
        "gather_mm",
        &[
            ("quantized.cu", QUANTIZED),
            ("quantized_tiled.cu", QUANTIZED_TILED),
        ],
        include_str!("emulation/gather_mm.cpp"),
        &[&[]],
    );
}

#[test]
fn rope_kernels_agree_and_match_the_rotation_in_double() {
    emulate(
        "rope",
        &[("rows.cuh", ROWS), ("rope.cu", ROPE)],
        include_str!("emulation/rope.cpp"),
        &[&[]],
    );
}

#[test]
fn row_kernels_match_their_references() {
    emulate(
        "rows",
        &[
            ("rows.cuh", ROWS),
            ("norms.cu", NORMS),
            ("softmax.cu", SOFTMAX),
        ],
        include_str!("emulation/rows.cpp"),
        &[
            &[],
            &[
                "NV_NORM_PREFETCH=1",
                "NV_SOFTMAX_PREFETCH=1",
                "NV_VJP_PREFETCH=1",
            ],
            &["NV_SOFTMAX_ONE_EXCHANGE=1"],
            &["NV_SOFTMAX_ONE_EXCHANGE=1", "NV_SOFTMAX_KEEP=0"],
            // Threads held back after barriers: the exchanges' alternating buffers.
            &["NV_EMU_JITTER"],
            &["NV_EMU_JITTER", "NV_SOFTMAX_ONE_EXCHANGE=1"],
        ],
    );
}

#[test]
fn decoding_kernel_matches_attention_and_reads_paged_caches_alike() {
    emulate(
        "attention",
        &[
            ("attention.cu", ATTENTION),
            ("attention_merge.cu", ATTENTION_MERGE),
            ("attention_wide.cu", ATTENTION_WIDE),
        ],
        include_str!("emulation/attention.cpp"),
        &[&[], &["NV_ATTN_PREFETCH=0"], &["NV_EMU_L1_AHEAD=2"]],
    );
}

#[test]
fn quantized_wgmma_kernel_matches_the_product_in_double() {
    emulate(
        "quantized_wgmma",
        &[("bulk.cuh", BULK), ("quantized_wgmma.cu", QUANTIZED_WGMMA)],
        include_str!("emulation/quantized_wgmma.cpp"),
        &[&[], &["NVQW_INTERLEAVE=0"]],
    );
}

#[test]
fn quantized_mv_mma_kernel_matches_the_product_in_double() {
    emulate(
        "quantized_mv_mma",
        &[("quantized_mv_mma.cu", QUANTIZED_MV_MMA)],
        include_str!("emulation/quantized_mv_mma.cpp"),
        &[&[], &["NVQM_UNROLL=1"], &["NVQM_AHEAD=2"]],
    );
}

#[test]
fn gathered_quantized_kernels_match_gather_qmm_in_double() {
    emulate(
        "quantized_gather",
        &[
            ("quantized.cu", QUANTIZED),
            ("quantized_mv_mma.cu", QUANTIZED_MV_MMA),
            ("quantized_gather.cu", QUANTIZED_GATHER),
            ("quantized_tiled.cu", QUANTIZED_TILED),
        ],
        include_str!("emulation/quantized_gather.cpp"),
        &[&[], &["NVQM_AHEAD=3"]],
    );
}

#[test]
fn portable_flash_kernel_matches_attention_in_double() {
    emulate(
        "flash",
        &[("flash.cu", FLASH), ("flash_case.h", FLASH_CASE)],
        include_str!("emulation/flash.cpp"),
        &[
            &[],
            &["NV_CASE_NEGATIVE_SCALE=1"],
            &["NV_FLASH_FOLD=1"],
            &["NV_FLASH_FOLD=1", "NV_FLASH_POLY=4"],
            &["NV_FLASH_POLY=1"],
        ],
    );
}

#[test]
fn hopper_tma_prefill_matches_attention_in_double() {
    emulate(
        "flash_tma",
        &[
            ("flash.cu", FLASH),
            ("flash_sm90.cu", FLASH_SM90),
            ("bulk.cuh", BULK),
            ("flash_tma.cu", FLASH_TMA),
            ("flash_case.h", FLASH_CASE),
        ],
        include_str!("emulation/flash_tma.cpp"),
        &[
            &[],
            &["NV_T_PINGPONG=1"],
            &["NV_H_ORDER=1", "NV_H_L2_BYTES=100000"],
            &["NV_T_PINGPONG=1", "NV_T_STAGES=3", "NV_H_ORDER=1"],
            &["NV_T_PINGPONG=1", "NV_H_ORDER=1", "NV_FLASH_FOLD=1"],
            &["NV_T_PINGPONG=1", "NV_FLASH_FOLD=1", "NV_FLASH_POLY=4"],
            &["NV_CASE_NEGATIVE_SCALE=1"],
            &["NV_T_PINGPONG=1", "NV_T_PERSISTENT=1", "NV_FLASH_FOLD=1"],
            &["NV_T_PINGPONG=1", "NV_T_PERSISTENT=2", "NV_H_ORDER=1"],
            &["NV_T_PERSISTENT=2", "NV_T_STAGES=3", "NV_FLASH_FOLD=1"],
            &["NV_T_PINGPONG=1", "NV_H_BN=176", "NV_FLASH_FOLD=1"],
            &["NV_H_BN=176", "NV_H_ORDER=1", "NV_H_L2_BYTES=100000"],
            &[
                "NV_T_PERSISTENT=1",
                "NV_T_STAGES=3",
                "NV_H_ORDER=1",
                "NV_H_L2_BYTES=100000",
            ],
        ],
    );
}
