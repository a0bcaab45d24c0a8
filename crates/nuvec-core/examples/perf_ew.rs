use nuvec_core::*;
use std::time::Instant;
fn time(name: &str, bytes: f64, f: impl Fn() -> Array) {
    for _ in 0..3 {
        f().eval().unwrap();
    }
    let mut ts = vec![];
    for _ in 0..15 {
        let t = Instant::now();
        let r = f();
        r.eval().unwrap();
        ts.push(t.elapsed().as_secs_f64());
        drop(r);
    }
    ts.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let m = ts[ts.len() / 2];
    println!("{name}: {:.3} ms, {:.2} GB/s", m * 1e3, bytes / m / 1e9);
}
fn main() {
    let n = 1024 * 4096;
    let v: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.001).collect();
    let a = Array::from_slice(&v, &[1024, 4096]).unwrap();
    let b = Array::from_slice(&v, &[1024, 4096]).unwrap();
    let c = greater(&a, 0.5).unwrap();
    c.eval().unwrap();
    let nb = (n * 4) as f64;
    time("add", 3.0 * nb, || add(&a, &b).unwrap());
    time("exp", 2.0 * nb, || exp(&a).unwrap());
    time("where", 3.0 * nb + n as f64, || where_(&c, &a, &b).unwrap());
    time("astype_bf16", nb + nb / 2.0, || {
        a.astype(DType::BF16).unwrap()
    });
    // tiny op chain
    let one = Array::scalar(1.0f32);
    for _ in 0..3 {
        let mut x = one.clone();
        for _ in 0..1000 {
            x = &x + &one;
        }
        x.eval().unwrap();
    }
    let t = Instant::now();
    for _ in 0..20 {
        let mut x = one.clone();
        for _ in 0..1000 {
            x = &x + &one;
        }
        x.eval().unwrap();
    }
    println!(
        "tiny_op_chain: {:.3} us/op",
        t.elapsed().as_secs_f64() / 20.0 / 1000.0 * 1e6
    );
}
