//! Timings of the CUDA elementwise path: bf16 addition and a bf16 -> f32 cast of 2^28
//! elements (bandwidth counted over bytes read and written), the cost per operation of a
//! chain of 1,000 additions of one-element arrays, and host <-> device copies of 1 GiB.
//!
//! Run on a machine with a GPU: `cargo run --release --example cuda_elementwise`.

use std::time::Instant;

use nuvec_core::*;

/// Waits for the work queued on the GPU's default stream (reading one element back comes
/// after everything queued before it).
fn sync(x: &Array) -> Result<()> {
    let one = slice(&x.reshape(&[-1])?, &[SliceArg::new(Some(0), Some(1), 1)])?;
    one.astype(DType::F32)?.to_vec::<f32>()?;
    Ok(())
}

/// The best time of `reps` runs of `f` (each synchronised), in seconds.
fn best(reps: usize, mut f: impl FnMut() -> Result<Array>) -> Result<f64> {
    let mut t = f64::INFINITY;
    for _ in 0..reps {
        let start = Instant::now();
        let y = f()?;
        y.eval()?;
        sync(&y)?;
        t = t.min(start.elapsed().as_secs_f64());
    }
    Ok(t)
}

fn main() -> Result<()> {
    set_default_stream(Stream::default_for(Device::gpu(0)));
    let n: usize = 1 << 28;
    let a = arange(0.0, n as f64, 1.0, DType::F32)?.astype(DType::BF16)?;
    let b = multiply(&a, 0.5)?;
    eval(&[a.clone(), b.clone()])?;
    sync(&b)?;

    let t = best(10, || add(&a, &b))?;
    let bytes = 3.0 * n as f64 * 2.0;
    println!(
        "bf16 add, 2^28 elements: {:.3} ms, {:.0} GB/s",
        t * 1e3,
        bytes / t / 1e9
    );
    let t = best(10, || a.astype(DType::F32))?;
    let bytes = n as f64 * (2.0 + 4.0);
    println!(
        "bf16 -> f32 cast, 2^28 elements: {:.3} ms, {:.0} GB/s",
        t * 1e3,
        bytes / t / 1e9
    );
    let t = best(10, || add(&a, 1.0))?;
    println!(
        "bf16 add of a scalar (_cs), 2^28 elements: {:.3} ms, {:.0} GB/s",
        t * 1e3,
        2.0 * n as f64 * 2.0 / t / 1e9
    );
    let off = slice(&a, &[SliceArg::new(Some(1), None, 1)])?;
    let t = best(5, || add(&off, &off))?;
    println!(
        "bf16 add, misaligned start (scalar path): {:.3} ms, {:.0} GB/s",
        t * 1e3,
        3.0 * (n - 1) as f64 * 2.0 / t / 1e9
    );

    // Per-operation cost: build and evaluate a chain of 1,000 additions of one element.
    let x = Array::from_slice(&[1.0f32], &[1])?;
    x.eval()?;
    let chain = |x: &Array| -> Result<Array> {
        let mut y = x.clone();
        for _ in 0..1000 {
            y = add(&y, x)?;
        }
        Ok(y)
    };
    let t = best(20, || chain(&x))?;
    println!("1,000 chained adds of one f32: {:.2} us per op", t * 1e3);
    let y = chain(&x)?;
    assert_eq!(y.to_vec::<f32>()?, [1001.0]);

    // Transfers of 1 GiB each way.
    let host: Vec<f32> = (0..(1usize << 28)).map(|i| i as f32).collect();
    let mut up = f64::INFINITY;
    let mut down = f64::INFINITY;
    for _ in 0..3 {
        let d = Array::from_slice(&host, &[host.len()])?;
        let start = Instant::now();
        let e = add(&d, 0.0)?;
        e.eval()?;
        sync(&e)?;
        up = up.min(start.elapsed().as_secs_f64());
        let start = Instant::now();
        let back = e.to_vec::<f32>()?;
        down = down.min(start.elapsed().as_secs_f64());
        assert_eq!(back[back.len() - 1], (back.len() - 1) as f32);
    }
    let gib = (host.len() * 4) as f64 / 1e9;
    println!(
        "host -> device 1 GiB (with one add): {:.1} GB/s; device -> host: {:.1} GB/s",
        gib / up,
        gib / down
    );
    Ok(())
}
