//! Dropping arrays returns their memory (to the host buffer cache, which `clear_cache`
//! empties). A test binary of its own: the cache is process-wide.

use std::sync::Mutex;

use nuvec_core::array::pool;
use nuvec_core::*;

/// The tests read the process-wide cache: one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn dropped_arrays_return_their_buffers_and_later_outputs_reuse_them() {
    let _guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    pool::clear_cache();
    let n = 1 << 16;
    let a = Array::from_vec(vec![1.0f32; n], &[n]).unwrap();
    let b = exp(&a).unwrap();
    b.eval().unwrap();
    assert_eq!(pool::cache_bytes(), 0);
    drop(b);
    assert_eq!(pool::cache_bytes(), 4 * n, "the result's buffer is cached");
    // The next result of that size takes it back.
    let c = exp(&a).unwrap();
    c.eval().unwrap();
    assert_eq!(pool::cache_bytes(), 0);
    assert_eq!(c.to_vec::<f32>().unwrap()[n - 1], std::f32::consts::E);
    // A long loop of create, evaluate, drop holds no more than one buffer in the cache.
    for i in 0..200 {
        let d = add(&a, i as f32).unwrap();
        assert_eq!(d.to_vec::<f32>().unwrap()[0], 1.0 + i as f32);
    }
    assert!(pool::cache_bytes() <= 8 * n);
    drop((a, c));
    pool::clear_cache();
    assert_eq!(pool::cache_bytes(), 0);
    // Intermediates of a graph are freed as soon as their consumers ran.
    let x = Array::from_vec(vec![2.0f32; n], &[n]).unwrap();
    let y = sqrt(&exp(&log(&x).unwrap()).unwrap()).unwrap();
    y.eval().unwrap();
    assert!(y.inputs().is_empty());
    assert!(pool::cache_bytes() <= 4 * n);
}

/// Attention's CPU kernel takes its output from the cache too: a loop of attentions (a
/// training loop's) holds a bounded number of buffers, not one more per call.
#[test]
fn repeated_attention_reuses_its_buffers() {
    let _guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    random::seed(1);
    let q = random::normal(&[32, 4, 11, 32], DType::F32, 0.0, 1.0, None).unwrap();
    let k = random::normal(&[32, 2, 11, 32], DType::F32, 0.0, 1.0, None).unwrap();
    eval(&[q.clone(), k.clone()]).unwrap();
    let out_bytes = q.nbytes();
    pool::clear_cache();
    for mask in [fast::AttentionMask::Causal, fast::AttentionMask::None] {
        for _ in 0..50 {
            let o = fast::scaled_dot_product_attention(&q, &k, &k, 0.2, mask, None).unwrap();
            o.eval().unwrap();
            assert!(o.to_vec::<f32>().unwrap().iter().all(|x| x.is_finite()));
        }
    }
    assert!(
        pool::cache_bytes() <= 4 * out_bytes,
        "{} bytes cached after 100 attentions of {out_bytes} bytes",
        pool::cache_bytes()
    );
}

/// The CPU kernels of `arange`, log-sum-exp and the convolution take their outputs from the
/// cache as well: a loop of them holds a bounded number of buffers.
#[test]
fn repeated_arange_logsumexp_and_conv_reuse_their_buffers() {
    let _guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    random::seed(2);
    let x = random::normal(&[64, 512], DType::F32, 0.0, 1.0, None).unwrap();
    let signal = random::normal(&[2, 256, 8], DType::F32, 0.0, 1.0, None).unwrap();
    let w = random::normal(&[8, 3, 8], DType::F32, 0.0, 1.0, None).unwrap();
    eval(&[x.clone(), signal.clone(), w.clone()]).unwrap();
    pool::clear_cache();
    let mut largest = 0;
    for _ in 0..100 {
        let r = arange(0.0, 50_000.0, 1.0, DType::F32).unwrap();
        let l = logsumexp(&x, &[-1], false).unwrap();
        let c = conv1d(&signal, &w, 1, 1, 1, 1).unwrap();
        eval(&[r.clone(), l.clone(), c.clone()]).unwrap();
        largest = largest.max(r.nbytes()).max(c.nbytes());
        // The values are right, so the reused buffers were overwritten.
        assert_eq!(r.to_vec::<f32>().unwrap()[49_999], 49_999.0);
    }
    assert!(
        pool::cache_bytes() <= 8 * largest,
        "{} bytes cached after 100 loops whose largest output is {largest} bytes",
        pool::cache_bytes()
    );
}
