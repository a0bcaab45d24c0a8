//! Rough timings of the indexing kernels (run with `cargo run --release --example
//! index_timing`). Prints the median of several runs and the bytes moved per second.

use std::time::Instant;

use nuvec_core::{Array, Result, SliceArg, scatter_add, slice_update, take, take_along_axis};

/// The median time in seconds of `f`, after one warm-up run.
fn median(mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    f()?;
    let mut times = Vec::new();
    for _ in 0..7 {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn report(name: &str, bytes: usize, secs: f64) {
    println!(
        "{name:<44} {:>9.3} ms {:>8.2} GB/s",
        secs * 1e3,
        bytes as f64 / secs / 1e9
    );
}

fn main() -> Result<()> {
    // Embedding lookup: 32k x 1024 f32 table, 8192 rows taken.
    let (vocab, dim, n) = (32_768usize, 1024usize, 8192usize);
    let table = Array::from_vec(vec![1.0f32; vocab * dim], &[vocab, dim])?;
    let ids: Vec<i32> = (0..n as i32).map(|k| (k * 7919) % vocab as i32).collect();
    let ids = Array::from_vec(ids, &[n])?;
    // For scale on this machine: an elementwise pass over the whole table.
    let secs = median(|| (&table + 0.0).eval())?;
    report(
        "reference: table + 0 (elementwise)",
        2 * vocab * dim * 4,
        secs,
    );
    let secs = median(|| take(&table, &ids, Some(0))?.eval())?;
    report("take rows [32768,1024] f32 x 8192", 2 * n * dim * 4, secs);

    // Take along the last axis (columns of a row-major matrix).
    let m = Array::from_vec(vec![1.0f32; 4096 * 4096], &[4096, 4096])?;
    let cols: Vec<u32> = (0..2048u32).map(|k| (k * 13) % 4096).collect();
    let cols = Array::from_vec(cols, &[2048])?;
    let secs = median(|| take(&m, &cols, Some(1))?.eval())?;
    report(
        "take cols [4096,4096] f32 x 2048",
        2 * 4096 * 2048 * 4,
        secs,
    );

    // take_along_axis: one index per output element.
    let idx: Vec<i64> = (0..4096 * 512).map(|k| (k * 31) % 4096).collect();
    let idx = Array::from_vec(idx, &[4096, 512])?;
    let secs = median(|| take_along_axis(&m, &idx, Some(1))?.eval())?;
    report(
        "take_along_axis [4096,4096] -> [4096,512]",
        4096 * 512 * 16,
        secs,
    );

    // scatter_add of rows into a copy of the table (the target is held: copied first).
    let upd = Array::from_vec(vec![0.5f32; n * dim], &[n, 1, dim])?;
    let secs = median(|| scatter_add(&table, std::slice::from_ref(&ids), &upd, &[0])?.eval())?;
    report(
        "scatter_add rows (copy + 8192 rows)",
        (2 * vocab + 2 * n) * dim * 4,
        secs,
    );

    // slice_update of one step of a cache [1, 32, 4096, 128] f32: in place vs copied.
    let shape = [1usize, 32, 4096, 128];
    let size: usize = shape.iter().product();
    let step = Array::from_vec(vec![2.0f32; 32 * 128], &[1, 32, 1, 128])?;
    let region = |t: isize| {
        [
            SliceArg::full(),
            SliceArg::full(),
            SliceArg::new(Some(t), Some(t + 1), 1),
        ]
    };
    let mut cache = Array::from_vec(vec![0.0f32; size], &shape)?;
    cache.eval()?;
    let mut t = 0isize;
    let secs = median(|| {
        cache = slice_update(&cache, &step, &region(t))?;
        t += 1;
        cache.eval()
    })?;
    report("slice_update cache step, donated", 32 * 128 * 8, secs);
    let held = cache.clone();
    let secs = median(|| slice_update(&held, &step, &region(5))?.eval())?;
    report("slice_update cache step, held (copy)", size * 8, secs);
    Ok(())
}
