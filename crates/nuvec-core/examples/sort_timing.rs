//! Times `sort`/`argsort`/`partition` on the CPU: `cargo run --release --example sort_timing`.

use std::time::Instant;

use nuvec_core::{Array, Result, argsort, partition, sort};

/// The median wall time of `runs` evaluations of `f`, in seconds.
fn time(runs: usize, f: impl Fn() -> Result<Array>) -> Result<f64> {
    let mut times = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        f()?.eval()?;
        times.push(start.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Ok(times[runs / 2])
}

fn main() -> Result<()> {
    // A fixed pseudo-random fill (xorshift), no dependencies.
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 24) as f32
    };
    let n = 1 << 22;
    let data: Vec<f32> = (0..n).map(|_| next()).collect();
    let flat = Array::from_slice(&data, &[n])?;
    let rows = flat.reshape(&[4096, 1024])?;
    let narrow = flat.reshape(&[65536, 64])?;
    let medium = flat.reshape(&[16384, 256])?;
    let cases: [(&str, &Array, Option<isize>); 6] = [
        ("flat 4M", &flat, None),
        ("65536x64 axis -1", &narrow, Some(-1)),
        ("16384x256 axis -1", &medium, Some(-1)),
        ("4096x1024 axis -1", &rows, Some(-1)),
        ("4096x1024 axis 0", &rows, Some(0)),
        ("1024x4096 (transposed) axis -1", &rows.t()?, Some(-1)),
    ];
    for (name, x, axis) in cases {
        let t = time(5, || sort(x, axis))?;
        let ta = time(5, || argsort(x, axis))?;
        let tp = time(5, || partition(x, 10, axis))?;
        println!(
            "{name:32} sort {:7.1} ms ({:6.1} M elem/s)  argsort {:7.1} ms  partition {:7.1} ms",
            t * 1e3,
            n as f64 / t / 1e6,
            ta * 1e3,
            tp * 1e3
        );
    }
    Ok(())
}
