//! `paged_attention` against attention over contiguous keys, and `paged_write` against a
//! direct placement.

use super::*;

/// Paged caches (`[blocks, Hkv, bs, D]`) holding `keys` and `vals` (`[B, Hkv, N, D]` and
/// `[.., Dv]`) in blocks of `bs` positions placed in a shuffled order, with spare blocks;
/// every position no sequence owns holds a large value, so that reading it shows. Returns
/// the caches and the block table.
fn paged(
    rng: &mut Rng,
    keys: &Array,
    vals: &Array,
    bs: usize,
    dtype: DType,
) -> (Array, Array, Array) {
    let (b, hkv, n, d) = {
        let s = keys.shape();
        (s[0], s[1], s[2], s[3])
    };
    let dv = vals.shape()[3];
    let per = n.div_ceil(bs);
    let blocks = b * per + 2;
    let mut order: Vec<usize> = (0..blocks).collect();
    for i in (1..blocks).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let fill = |src: &Array, width: usize| -> Array {
        let sv = values(src);
        let mut cache = vec![40.0; blocks * hkv * bs * width];
        for s in 0..b {
            for j in 0..per {
                for h in 0..hkv {
                    for r in 0..bs.min(n - j * bs) {
                        let from = flat(&[b, hkv, n, width], &[s, h, j * bs + r, 0]);
                        let to = flat(&[blocks, hkv, bs, width], &[order[s * per + j], h, r, 0]);
                        cache[to..to + width].copy_from_slice(&sv[from..from + width]);
                    }
                }
            }
        }
        Array::from_slice(&cache, &[blocks, hkv, bs, width])
            .unwrap()
            .astype(dtype)
            .unwrap()
    };
    let table: Vec<i32> = order[..b * per].iter().map(|&x| x as i32).collect();
    (
        fill(keys, d),
        fill(vals, dv),
        Array::from_slice(&table, &[b, per]).unwrap(),
    )
}

#[test]
fn paged_attention_equals_contiguous_attention() {
    // (B, Hq, Hkv, Lq, D, Dv, block size, lengths)
    type Case = (
        usize,
        usize,
        usize,
        usize,
        usize,
        usize,
        usize,
        &'static [usize],
    );
    let cases: &[Case] = &[
        (1, 4, 4, 1, 8, 8, 4, &[7]),
        (3, 4, 2, 1, 8, 8, 4, &[1, 5, 12]),
        (2, 4, 1, 3, 8, 4, 2, &[3, 9]),
        (2, 2, 2, 4, 16, 16, 8, &[4, 17]),
    ];
    let mut rng = Rng::new(31);
    for &(b, hq, hkv, lq, d, dv, bs, lengths) in cases {
        for dtype in FLOATS {
            let n = *lengths.iter().max().unwrap();
            let keys = rand(&mut rng, &[b, hkv, n, d], dtype);
            let vals = rand(&mut rng, &[b, hkv, n, dv], dtype);
            let q = rand(&mut rng, &[b, hq, lq, d], dtype);
            let (kc, vc, table) = paged(&mut rng, &keys, &vals, bs, dtype);
            let lens: Vec<i32> = lengths.iter().map(|&l| l as i32).collect();
            let lens = Array::from_slice(&lens, &[b]).unwrap();
            let name = format!("paged {:?} {dtype}", (b, hq, hkv, lq, d, dv, bs, lengths));
            let got = fast::paged_attention(&q, &kc, &vc, &table, &lens, 0.4).unwrap();
            assert_eq!(got.shape(), [b, hq, lq, dv], "{name}");
            assert_eq!(got.dtype(), dtype, "{name}");
            for (s, &len) in lengths.iter().enumerate() {
                let pick = |a: &Array, end: usize| part(&part(a, 0, s, s + 1), 2, 0, end);
                let mask = if lq > 1 {
                    fast::AttentionMask::Causal
                } else {
                    fast::AttentionMask::None
                };
                let want = fast::scaled_dot_product_attention(
                    &pick(&q, lq),
                    &pick(&keys, len),
                    &pick(&vals, len),
                    0.4,
                    mask,
                    None,
                )
                .unwrap();
                check_same(
                    &format!("{name} seq {s}"),
                    &part(&got, 0, s, s + 1),
                    &want,
                    tol(dtype),
                );
            }
        }
    }
    // Tables and lengths of other integer types.
    let q = rand(&mut rng, &[1, 2, 1, 4], DType::F32);
    let keys = rand(&mut rng, &[1, 2, 6, 4], DType::F32);
    let (kc, vc, table) = paged(&mut rng, &keys, &keys, 4, DType::F32);
    let a = fast::paged_attention(
        &q,
        &kc,
        &vc,
        &table,
        &Array::from_slice(&[6i32], &[1]).unwrap(),
        1.0,
    )
    .unwrap();
    let b = fast::paged_attention(
        &q,
        &kc,
        &vc,
        &table.astype(DType::U16).unwrap(),
        &Array::from_slice(&[6i64], &[1]).unwrap(),
        1.0,
    )
    .unwrap();
    check_same("index types", &b, &a, 0.0);
}

#[test]
fn paged_write_places_rows_at_their_slots() {
    let mut rng = Rng::new(32);
    let (blocks, heads, bs, d) = (6, 2, 4, 8);
    for dtype in FLOATS {
        let cache = rand(&mut rng, &[blocks, heads, bs, d], dtype);
        cache.eval().unwrap();
        let new = rand(&mut rng, &[6, heads, d], DType::F32);
        // Slot 5 is block 1, row 1; -1 is padding and 24 lies past the cache: both skipped.
        let slots = [23i32, 0, 5, -1, 17, 24];
        let before = values(&cache);
        let got =
            fast::paged_write(&cache, &new, &Array::from_slice(&slots, &[6]).unwrap()).unwrap();
        let mut want = before.clone();
        let nv = values(&new.astype(dtype).unwrap());
        for (n, &slot) in slots.iter().enumerate() {
            if slot < 0 || slot as usize >= blocks * bs {
                continue;
            }
            let (block, row) = (slot as usize / bs, slot as usize % bs);
            for h in 0..heads {
                let to = flat(&[blocks, heads, bs, d], &[block, h, row, 0]);
                let from = flat(&[6, heads, d], &[n, h, 0]);
                want[to..to + d].copy_from_slice(&nv[from..from + d]);
            }
        }
        check(
            &format!("paged_write {dtype}"),
            &got,
            &[blocks, heads, bs, d],
            dtype,
            &want,
            0.0,
        );
        assert_eq!(values(&cache), before, "{dtype}: a held cache changed");
    }
    // Decoding: each step's cache the only handle to the previous one, written in place.
    let mut cache = zeros(&[2, 1, 2, 3], DType::F32).unwrap();
    for step in 0..4 {
        let row = full(&[1, 1, 3], step as f32 + 1.0, DType::F32).unwrap();
        let slot = Array::from_slice(&[step as i64], &[1]).unwrap();
        cache = fast::paged_write(&cache, &row, &slot).unwrap();
        cache.eval().unwrap();
    }
    let want: Vec<f64> = (0..12).map(|i| (i / 3 + 1) as f64).collect();
    check("decode", &cache, &[2, 1, 2, 3], DType::F32, &want, 0.0);
    // A strided row source.
    let new = strided(&rand(&mut rng, &[2, 1, 3], DType::F32));
    let got =
        fast::paged_write(&cache, &new, &Array::from_slice(&[1u32, 2], &[2]).unwrap()).unwrap();
    let nv = values(&new);
    let mut want2 = want.clone();
    want2[3..9].copy_from_slice(&nv);
    check("strided rows", &got, &[2, 1, 2, 3], DType::F32, &want2, 0.0);
}
