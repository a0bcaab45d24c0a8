//! Two streams of one GPU: work on the second reads what the first computes (and the
//! reverse), with the events between them, on arrays large enough that a missing wait would
//! read unfinished values. Skips itself, saying so, where no CUDA device answers. (A file
//! of its own: a device with two streams records no graphs, which `gpu_graph.rs` tests.)

mod common;

use common::gpu::{gpu_available, values};
use nuvec_core::*;

#[test]
fn streams_wait_for_each_other() {
    if !gpu_available() {
        return;
    }
    let gpu = Device::gpu(0);
    let (s0, s1) = (Stream::default_for(gpu), Stream::new(gpu, 1));
    let n = 1usize << 22;
    let x = arange(0.0, n as f64, 1.0, DType::F32).unwrap();
    let a = with_stream(s0, || {
        let mut y = x.clone();
        for _ in 0..20 {
            y = add(&y, 1.0f32)?;
        }
        Ok::<_, Error>(y)
    })
    .unwrap();
    let b = with_stream(s1, || multiply(&a, 2.0f32)).unwrap();
    let c = with_stream(s0, || subtract(&b, &a)).unwrap();
    let total = with_stream(s1, || sum(&c, &[], false)).unwrap();
    // c = 2(x + 20) - (x + 20) = x + 20, summed exactly in f64 below.
    let got = values(&total)[0];
    let want: f64 = (0..n).map(|i| i as f64 + 20.0).sum();
    assert!((got - want).abs() <= 1e-6 * want, "{got} vs {want}");
    let c = values(&c);
    assert!(c.iter().enumerate().all(|(i, &v)| v == i as f64 + 20.0));
}
