//! Transforms through the random family: vmap over batches of keys (against MLX's own vmap
//! values and against loops), nested batching, and derivatives of functions that draw
//! random values (the bits are constants to them).

mod common;

use common::Rng;
use common::autodiff::{check, check_vmap, values};
use nuvec_core::random;
use nuvec_core::*;

/// `n` keys split from `seed`, shape `[n, 2]`.
fn keys(seed: u64, n: usize) -> Array {
    random::split(&random::key(seed), n).unwrap()
}

fn f32_bits(a: &Array) -> Vec<u32> {
    a.to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

#[test]
fn vmap_over_keys_matches_mlx() {
    // `mx.vmap(lambda k: mx.random.uniform(shape=(3,), key=k))(mx.random.split(key(42), 3))`
    // in MLX 0.32.4; the same with the keys transposed and `in_axes=1`.
    let want = [
        1056385891, 1056978827, 1051689627, 1042335100, 1044580946, 1048808858, 1047889432,
        1063694230, 1050805816,
    ];
    let f = |k: &[Array]| {
        Ok(vec![random::uniform(
            0.0,
            1.0,
            &[3],
            DType::F32,
            Some(&k[0]),
        )?])
    };
    let ks = keys(42, 3);
    let out = vmap(f, &[Some(0)], &[0])(std::slice::from_ref(&ks)).unwrap();
    assert_eq!(out[0].shape(), [3, 3]);
    assert_eq!(f32_bits(&out[0]), want);
    let out = vmap(f, &[Some(1)], &[0])(&[ks.t().unwrap()]).unwrap();
    assert_eq!(f32_bits(&out[0]), want);
    // MLX's C++ `vmap` of `bits({5}, 1, k)` over the same keys.
    let g = |k: &[Array]| Ok(vec![random::bits(&[5], 1, Some(&k[0]))?]);
    let out = vmap(g, &[Some(0)], &[0])(&[ks]).unwrap();
    assert_eq!(
        out[0].to_vec::<u8>().unwrap(),
        [
            0, 56, 255, 30, 121, 23, 206, 246, 105, 154, 2, 4, 25, 146, 196
        ]
    );
}

#[test]
fn vmap_over_keys_matches_a_loop() {
    let ks = keys(1, 4);
    for width in [1usize, 2, 4] {
        let f = move |k: &[Array]| Ok(vec![random::bits(&[2, 3], width, Some(&k[0]))?]);
        check_vmap(
            &format!("bits width {width}"),
            f,
            std::slice::from_ref(&ks),
            &[true],
        );
    }
    let f = |k: &[Array]| Ok(vec![random::split(&k[0], 3)?]);
    check_vmap("split", f, std::slice::from_ref(&ks), &[true]);
    let f = |k: &[Array]| {
        Ok(vec![
            random::uniform(-1.0, 2.0, &[3, 2], DType::F32, Some(&k[0]))?,
            random::normal(&[5], DType::F64, 1.0, 0.5, Some(&k[0]))?,
            random::gumbel(&[2], DType::F32, Some(&k[0]))?,
        ])
    };
    check_vmap(
        "uniform, normal, gumbel",
        f,
        std::slice::from_ref(&ks),
        &[true],
    );
    let f = |k: &[Array]| {
        Ok(vec![
            random::randint(-3, 9, &[4], DType::I32, Some(&k[0]))?,
            random::bernoulli(0.3, Some(&[6]), Some(&k[0]))?,
        ])
    };
    check_vmap("randint, bernoulli", f, std::slice::from_ref(&ks), &[true]);
    // Data batched with the keys, and data batched under one shared key.
    let x = Array::from_slice(&[1.0f64, -2.0, 3.0, 0.5, 4.0, -1.0, 2.0, 7.0], &[4, 2]).unwrap();
    let f = |v: &[Array]| {
        let noise = random::normal(&[2], DType::F64, 0.0, 1.0, Some(&v[1]))?;
        Ok(vec![add(&v[0], &noise)?])
    };
    check_vmap("data and keys", f, &[x.clone(), ks.clone()], &[true, true]);
    let one = random::key(3);
    check_vmap("data, one key", f, &[x, one], &[true, false]);
}

#[test]
fn vmap_over_key_grids_and_nested() {
    // A grid of keys [batch, 3, 2]: the function picks its second key by slicing, so the
    // batch axis sits before, between or at the key pairs (check_vmap tries first, middle,
    // last).
    let grid = keys(9, 12).reshape(&[4, 3, 2]).unwrap();
    let f = |k: &[Array]| {
        let second = slice(&k[0], &[SliceArg::new(Some(1), Some(2), 1)])?.reshape(&[2])?;
        Ok(vec![random::uniform(
            0.0,
            1.0,
            &[2, 2],
            DType::F32,
            Some(&second),
        )?])
    };
    check_vmap("grid of keys", f, std::slice::from_ref(&grid), &[true]);
    // vmap of vmap against a double loop.
    let inner = |k: &[Array]| Ok(vec![random::bits(&[3], 2, Some(&k[0]))?]);
    let outer = move |k: &[Array]| vmap(inner, &[Some(0)], &[0])(k);
    let got = vmap(outer, &[Some(0)], &[0])(std::slice::from_ref(&grid)).unwrap();
    assert_eq!(got[0].shape(), [4, 3, 3]);
    let words = values(&grid);
    let mut want = Vec::new();
    for pair in words.chunks(2) {
        let k = Array::from_slice(&[pair[0] as u32, pair[1] as u32], &[2]).unwrap();
        want.extend(values(&random::bits(&[3], 2, Some(&k)).unwrap()));
    }
    assert_eq!(values(&got[0]), want);
    // The outer batch on the last key axis: moved before the pairs by the rule.
    let moved = moveaxis(&grid, 0, 2).unwrap();
    let got = vmap(outer, &[Some(2)], &[0])(&[moved]).unwrap();
    assert_eq!(values(&got[0]), want);
}

#[test]
fn derivatives_treat_random_values_as_constants() {
    let mut rng = Rng::new(4);
    let x = Array::from_slice(&[0.3f64, -1.2, 2.0, 0.7], &[2, 2]).unwrap();
    let k = random::key(17);
    let f = |v: &[Array]| {
        let noise = random::normal(&[2, 2], DType::F64, 0.0, 1.0, Some(&v[1]))?;
        let scale = random::uniform(1.0, 2.0, &[2], DType::F64, Some(&v[1]))?;
        Ok(vec![multiply(&multiply(&v[0], &noise)?, &scale)?])
    };
    check("x · normal · uniform", f, &[x.clone(), k.clone()], &mut rng);
    // The cotangent of x · u under ones is u itself; the key's is zero.
    let f = |v: &[Array]| {
        let u = random::uniform(0.0, 1.0, &[2, 2], DType::F64, Some(&v[1]))?;
        Ok(vec![multiply(&v[0], &u)?])
    };
    let ones = ones(&[2, 2], DType::F64).unwrap();
    let (_, g) = vjp(f, &[x, k.clone()], &[ones]).unwrap();
    let u = random::uniform(0.0, 1.0, &[2, 2], DType::F64, Some(&k)).unwrap();
    assert_eq!(values(&g[0]), values(&u));
    assert_eq!(values(&g[1]), [0.0, 0.0]);
}

#[test]
fn large_batches_split_work_inside_keys() {
    // Enough blocks to run over the pool, with odd word counts per key, so that chunks start
    // and end inside keys' blocks.
    let ks = keys(77, 5);
    for (width, n) in [(4usize, 70_001usize), (2, 90_003), (1, 300_001)] {
        let f = move |k: &[Array]| Ok(vec![random::bits(&[n], width, Some(&k[0]))?]);
        let got = vmap(f, &[Some(0)], &[0])(std::slice::from_ref(&ks)).unwrap();
        assert_eq!(got[0].shape(), [5, n]);
        let got = values(&got[0]);
        for b in 0..5 {
            let k = take(&ks, &Array::scalar(b as u32), Some(0)).unwrap();
            let want = values(&random::bits(&[n], width, Some(&k)).unwrap());
            assert!(
                got[b * n..(b + 1) * n] == want[..],
                "width {width}, key {b}"
            );
        }
    }
}
