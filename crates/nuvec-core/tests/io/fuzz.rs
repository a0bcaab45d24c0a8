//! Property tests: valid files of each format, truncated and with bytes overwritten, load
//! as `Ok` or `Err`, never a panic (nor a read out of bounds, nor a huge allocation).

use proptest::prelude::*;

use nuvec_core::io::{load_gguf, load_npy, load_npz, load_safetensors};

use crate::{fixture, put, tempdir};

/// The valid files mutated: (name, bytes, loader).
type Loader = fn(&std::path::Path) -> bool;

fn formats() -> [(&'static str, &'static [u8], Loader); 6] {
    [
        ("a.safetensors", fixture!("python.safetensors"), |p| {
            load_safetensors(p).is_ok()
        }),
        ("a.npy", fixture!("fortran_f64.npy"), |p| {
            load_npy(p).is_ok()
        }),
        ("b.npy", fixture!("big_c64_fortran.npy"), |p| {
            load_npy(p).is_ok()
        }),
        ("a.npz", fixture!("stored.npz"), |p| load_npz(p).is_ok()),
        ("b.npz", fixture!("deflated.npz"), |p| load_npz(p).is_ok()),
        ("a.gguf", fixture!("model.gguf"), |p| load_gguf(p).is_ok()),
    ]
}

/// Which file, the fraction of it kept, single bytes written, and one `u64` written.
type Damage = (usize, f64, Vec<(usize, u8)>, Option<(usize, u64)>);

/// A file to damage: which format, where to cut it, and bytes to overwrite (positions are
/// taken modulo the length). Some overwrites write a whole little-endian `u64`, the width of
/// GGUF's counts and safetensors' header size, with values near the extremes.
fn damage() -> impl Strategy<Value = Damage> {
    (
        0..6usize,
        prop_oneof![Just(1.0), 0.0..1.0f64],
        prop::collection::vec((any::<usize>(), any::<u8>()), 0..6),
        prop::option::of((
            prop_oneof![0..48usize, any::<usize>()],
            prop_oneof![
                Just(u64::MAX),
                Just(1u64 << 40),
                Just(0),
                any::<u64>(),
                0..4096u64
            ],
        )),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    #[test]
    fn damaged_files_load_or_fail_cleanly((which, keep, writes, wide) in damage()) {
        let (name, bytes, load) = formats()[which];
        let mut b = bytes.to_vec();
        for (at, v) in writes {
            let i = at % b.len();
            b[i] = v;
        }
        if let Some((at, v)) = wide {
            let i = at % (b.len() - 8);
            b[i..i + 8].copy_from_slice(&v.to_le_bytes());
        }
        let len = ((b.len() as f64) * keep) as usize;
        b.truncate(len);
        let dir = tempdir();
        let path = put(dir.path(), name, &b);
        // Either outcome is fine; a panic fails the test.
        let _ = load(&path);
    }
}

#[test]
fn the_undamaged_files_load() {
    let dir = tempdir();
    for (name, bytes, load) in formats() {
        assert!(load(&put(dir.path(), name, bytes)), "{name}");
    }
}
