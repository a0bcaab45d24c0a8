//! Kernel launches recorded into CUDA graphs: chains of small nodes longer than one graph,
//! chains that mix recorded nodes with cuBLAS products, sorts and values read in between,
//! and GPU results read by a CPU node while a graph is still being recorded. Every result
//! equals the CPU's. Each test skips itself, saying so, where no CUDA device answers.

mod common;

use common::Rng;
use common::gpu::{both, gpu_available, on, random, values};
use nuvec_core::*;

#[test]
fn chains_longer_than_a_graph_match_the_cpu() {
    if !gpu_available() {
        return;
    }
    // A thousand nodes: many full graphs (the same shape again, then another) and a
    // partial one at the end, with reductions kept along the way.
    both("chain", 1e-5, || {
        let b = Array::from_slice(&[0.5f32, -0.25, 2.0], &[3])?;
        let mut y = Array::from_slice(&[1.0f32, 2.0, 3.0], &[3])?;
        let mut kept = Vec::new();
        for i in 0..1000 {
            y = match i % 4 {
                0 => add(&y, &b)?,
                1 => multiply(&y, 0.999f32)?,
                2 => maximum(&y, -5.0f32)?,
                _ => subtract(&y, &b)?,
            };
            if i % 97 == 0 {
                kept.push(sum(&y, &[], false)?);
            }
        }
        kept.push(y);
        Ok(kept)
    });
}

#[test]
fn chains_mixing_products_sorts_and_reads_match_the_cpu() {
    if !gpu_available() {
        return;
    }
    let mut rng = Rng::new(31);
    let x = random(&mut rng, &[8, 16], -1.0, 1.0, DType::F32);
    let w = random(&mut rng, &[16, 16], -0.3, 0.3, DType::F32);
    both("mixed", 1e-4, || {
        let mut y = x.clone();
        let mut kept = Vec::new();
        for i in 0..120 {
            y = tanh(&add(&y, 0.01f32)?)?;
            if i % 10 == 0 {
                // A cuBLAS product: the recorded nodes before it launch first.
                y = matmul(&y, &w)?;
            }
            if i % 33 == 0 {
                y = sort(&y, Some(-1))?;
            }
            if i % 25 == 0 {
                // Values read in the middle: the nodes recorded so far must have run.
                let direct = y.to_vec::<f32>()?;
                kept.push(Array::from_slice(&direct, y.shape())?);
            }
        }
        kept.push(y);
        Ok(kept)
    });
}

#[test]
fn a_cpu_node_reads_what_a_recorded_graph_computes() {
    if !gpu_available() {
        return;
    }
    let x = Array::from_slice(&[1.0f32, -2.0, 3.5, 0.25], &[4]).unwrap();
    // Fewer nodes than one graph holds: when the CPU node runs, in the same evaluation,
    // they are still being recorded.
    let g = on(Device::gpu(0), || {
        let mut y = x.clone();
        for _ in 0..5 {
            y = add(&multiply(&y, 2.0f32)?, 1.0f32)?;
        }
        Ok::<_, Error>(y)
    })
    .unwrap();
    let c = on(Device::cpu(), || subtract(&g, 3.0f32)).unwrap();
    eval(std::slice::from_ref(&c)).unwrap();
    let want: Vec<f64> = [1.0f64, -2.0, 3.5, 0.25]
        .iter()
        .map(|&v| (0..5).fold(v, |y, _| 2.0 * y + 1.0) - 3.0)
        .collect();
    assert_eq!(values(&c), want);
}

/// Threads sharing the GPU's default stream: each evaluates chains longer than a graph,
/// uploads new inputs and reads values back in between, so that one thread's copies, waits
/// and direct launches meet another's open capture. Every value read equals the direct
/// formula computed on the host.
#[test]
fn threads_sharing_a_stream_with_graphs_read_right_values() {
    if !gpu_available() {
        return;
    }
    let workers: Vec<_> = (0..6)
        .map(|t| {
            std::thread::spawn(move || {
                on(Device::gpu(0), || {
                    for round in 0..40 {
                        let start = (t * 100 + round) as f32;
                        // A fresh host input each round: an upload on the shared stream.
                        let x = Array::from_vec(vec![start; 257], &[257]).unwrap();
                        let mut y = x.clone();
                        for _ in 0..70 {
                            y = add(&y, 1.0f32).unwrap();
                        }
                        let total = sum(&y, &[], false).unwrap();
                        // Reading waits for this thread's work while others record theirs.
                        let got = y.to_vec::<f32>().unwrap();
                        assert!(
                            got.iter().all(|&v| v == start + 70.0),
                            "thread {t}: {got:?}"
                        );
                        let want = 257.0 * f64::from(start + 70.0);
                        let s = f64::from(total.item::<f32>().unwrap());
                        assert!((s - want).abs() <= 1e-6 * want, "thread {t}: {s} vs {want}");
                    }
                })
            })
        })
        .collect();
    for w in workers {
        w.join().expect("a worker thread panicked");
    }
}
