//! Dropping arrays returns their memory (to the host buffer cache, which `clear_cache`
//! empties). A test binary of its own: the cache is process-wide.

use nuvec_core::array::pool;
use nuvec_core::*;

#[test]
fn dropped_arrays_return_their_buffers_and_later_outputs_reuse_them() {
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
