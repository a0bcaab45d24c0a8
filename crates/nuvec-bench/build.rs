//! Tells the benchmark which nuvec-core operations exist yet.
//!
//! nuvec-core's op families are written in parallel; a case whose operation has not landed
//! reports "unavailable" instead of breaking the build. This script looks for the public
//! function in nuvec-core's sources and sets `cfg(nuvec_has = "NAME")` for each one found
//! (`fast::NAME` for the fused operations). Once every family has landed, the cfgs can go.

use std::fs;
use std::path::{Path, PathBuf};

/// Functions at the crate root (from `src/ops/` and friends).
const OPS: &[&str] = &["matmul", "sum", "softmax", "logsumexp"];
/// Functions of the `fast` module (`src/fast.rs` or `src/fast/`).
const FAST: &[&str] = &[
    "rms_norm",
    "layer_norm",
    "rope",
    "scaled_dot_product_attention",
];

fn main() {
    // Read when the script runs (cargo sets it), not when it was compiled: a target directory
    // copied from another checkout must look at this one's sources.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let src = Path::new(&manifest).join("../nuvec-core/src");
    // A directory here makes cargo rerun the script when any file below it changes.
    println!("cargo::rerun-if-changed={}", src.display());
    let all: Vec<String> = OPS
        .iter()
        .map(|n| format!("\"{n}\""))
        .chain(FAST.iter().map(|n| format!("\"fast::{n}\"")))
        .collect();
    println!(
        "cargo::rustc-check-cfg=cfg(nuvec_has, values({}))",
        all.join(", ")
    );

    let mut files = Vec::new();
    collect(&src, &mut files);
    let mut root = String::new();
    let mut fast = String::new();
    for file in &files {
        let Ok(text) = fs::read_to_string(file) else {
            continue;
        };
        let rel = file.strip_prefix(&src).unwrap_or(file);
        if rel.starts_with("fast") || rel == Path::new("fast.rs") {
            fast.push_str(&text);
        } else {
            root.push_str(&text);
        }
    }
    let lib = fs::read_to_string(src.join("lib.rs")).unwrap_or_default();
    let defines = |text: &str, name: &str| {
        text.contains(&format!("pub fn {name}(")) || text.contains(&format!("pub fn {name}<"))
    };
    for name in OPS {
        if defines(&root, name) {
            println!("cargo::rustc-cfg=nuvec_has=\"{name}\"");
        }
    }
    if lib.contains("pub mod fast") {
        for name in FAST {
            if defines(&fast, name) {
                println!("cargo::rustc-cfg=nuvec_has=\"fast::{name}\"");
            }
        }
    }
}

/// Every `.rs` file below `dir`.
fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}
