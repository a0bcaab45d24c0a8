//! `gated_delta`, `gated_delta_steps` and `gated_delta_slots`.

use super::*;

/// The inputs of one recurrence.
struct Inputs {
    q: Array,
    k: Array,
    v: Array,
    g: Array,
    beta: Array,
    state: Array,
}

/// Random inputs for `(B, T, Hk, Hv, Dk, Dv)`: keys of unit length (the recurrence is
/// stable for β‖k‖² ≤ 2), decays in (0.5, 1), β in (0.2, 1).
fn inputs(rng: &mut Rng, dims: (usize, usize, usize, usize, usize, usize), dt: DType) -> Inputs {
    let (b, t, hk, hv, dk, dv) = dims;
    let k = rand(rng, &[b, t, hk, dk], DType::F64);
    let norm = sqrt(&sum(&multiply(&k, &k).unwrap(), &[-1], true).unwrap()).unwrap();
    Inputs {
        q: rand(rng, &[b, t, hk, dk], dt),
        k: divide(&k, &norm).unwrap().astype(dt).unwrap(),
        v: rand(rng, &[b, t, hv, dv], dt),
        g: uniform(rng, &[b, t, hv], 0.5, 1.0, dt),
        beta: uniform(rng, &[b, t, hv], 0.2, 1.0, dt),
        state: rand(rng, &[b, hv, dv, dk], dt),
    }
}

/// The recurrence in float64 from the inputs' values: `y` and every step's state (the
/// last entry the final state; the first the initial one).
fn reference(x: &Inputs) -> (Vec<f64>, Vec<Vec<f64>>) {
    let (b, t, hk, dk) = {
        let s = x.q.shape();
        (s[0], s[1], s[2], s[3])
    };
    let (hv, dv) = (x.v.shape()[2], x.v.shape()[3]);
    let [q, k, v, g, beta, state] = [&x.q, &x.k, &x.v, &x.g, &x.beta, &x.state].map(values);
    let mut s = state.clone();
    let mut states = vec![s.clone()];
    let mut y = vec![0.0; b * t * hv * dv];
    for ti in 0..t {
        for bi in 0..b {
            for h in 0..hv {
                let kh = h / (hv / hk);
                let key = &k[flat(&[b, t, hk, dk], &[bi, ti, kh, 0])..][..dk];
                let query = &q[flat(&[b, t, hk, dk], &[bi, ti, kh, 0])..][..dk];
                let gate = flat(&[b, t, hv], &[bi, ti, h]);
                for r in 0..dv {
                    let row = &mut s[flat(&[b, hv, dv, dk], &[bi, h, r, 0])..][..dk];
                    row.iter_mut().for_each(|e| *e *= g[gate]);
                    let recalled: f64 = row.iter().zip(key).map(|(a, c)| a * c).sum();
                    let value = v[flat(&[b, t, hv, dv], &[bi, ti, h, r])];
                    let delta = (value - recalled) * beta[gate];
                    row.iter_mut().zip(key).for_each(|(e, c)| *e += c * delta);
                    y[flat(&[b, t, hv, dv], &[bi, ti, h, r])] =
                        row.iter().zip(query).map(|(a, c)| a * c).sum();
                }
            }
        }
        states.push(s.clone());
    }
    (y, states)
}

const DIMS: &[(usize, usize, usize, usize, usize, usize)] = &[
    (2, 4, 1, 2, 3, 2),
    (1, 3, 2, 2, 8, 4),
    (2, 1, 2, 4, 4, 3),
    (1, 0, 1, 1, 2, 2),
];

#[test]
fn gated_delta_matches_the_formula() {
    let mut rng = Rng::new(41);
    for &dims in DIMS {
        for dtype in FLOATS {
            let x = inputs(&mut rng, dims, dtype);
            let (wy, states) = reference(&x);
            let (y, s) = fast::gated_delta(&x.q, &x.k, &x.v, &x.g, &x.beta, &x.state).unwrap();
            let name = format!("gated_delta {dims:?} {dtype}");
            let t = 4.0 * tol(dtype);
            check(&format!("{name} y"), &y, x.v.shape(), dtype, &wy, t);
            let last = states.last().unwrap();
            check(
                &format!("{name} state"),
                &s,
                x.state.shape(),
                dtype,
                last,
                t,
            );
            // Every step's state: y unchanged, step i the state after i + 1 steps.
            let (sy, ss) =
                fast::gated_delta_steps(&x.q, &x.k, &x.v, &x.g, &x.beta, &x.state).unwrap();
            check_same(&format!("{name} steps y"), &sy, &y, 0.0);
            let (b, steps) = (dims.0, dims.1);
            let mut shape = x.state.shape().to_vec();
            shape.insert(1, steps);
            let per = x.state.size() / b;
            let mut want = Vec::new();
            for bi in 0..b {
                for st in &states[1..] {
                    want.extend_from_slice(&st[bi * per..(bi + 1) * per]);
                }
            }
            check(&format!("{name} steps"), &ss, &shape, dtype, &want, t);
        }
    }
    // Mixed types: bfloat16 activations with a float32 state; y follows q, the state its own.
    let x = inputs(&mut rng, (1, 3, 1, 2, 4, 2), DType::BF16);
    let state = rand(&mut rng, &[1, 2, 2, 4], DType::F32);
    let (y, s) = fast::gated_delta(&x.q, &x.k, &x.v, &x.g, &x.beta, &state).unwrap();
    assert_eq!((y.dtype(), s.dtype()), (DType::BF16, DType::F32));
    let mixed = Inputs { state, ..x };
    let (wy, states) = reference(&mixed);
    check(
        "mixed y",
        &y,
        &[1, 3, 2, 2],
        DType::BF16,
        &wy,
        tol(DType::BF16),
    );
    check(
        "mixed state",
        &s,
        &[1, 2, 2, 4],
        DType::F32,
        states.last().unwrap(),
        1e-5,
    );
}

#[test]
fn gated_delta_slots_equals_gated_delta_per_sequence() {
    let mut rng = Rng::new(42);
    for &(t, hk, hv, dk, dv) in &[(1, 1, 2, 4, 3), (3, 2, 4, 8, 4)] {
        for dtype in [DType::F32, DType::BF16, DType::F64] {
            let b = 3;
            let x = inputs(&mut rng, (b, t, hk, hv, dk, dv), dtype);
            let pool = rand(&mut rng, &[5, hv, dv, dk], DType::F32);
            pool.eval().unwrap();
            let slot_ids = [3usize, 0, 4];
            let slots = Array::from_slice(&[3i64, 0, 4], &[3]).unwrap();
            let before = values(&pool);
            let (y, new_pool) =
                fast::gated_delta_slots(&x.q, &x.k, &x.v, &x.g, &x.beta, &pool, &slots).unwrap();
            eval(&[y.clone(), new_pool.clone()]).unwrap();
            assert_eq!(values(&pool), before, "a held pool changed");
            let name = format!("slots {:?} {dtype}", (t, hk, hv, dk, dv));
            assert_eq!(new_pool.dtype(), DType::F32, "{name}");
            for (i, &slot) in slot_ids.iter().enumerate() {
                let row = |a: &Array| part(a, 0, i, i + 1);
                let (yi, si) = fast::gated_delta(
                    &row(&x.q),
                    &row(&x.k),
                    &row(&x.v),
                    &row(&x.g),
                    &row(&x.beta),
                    &part(&pool, 0, slot, slot + 1),
                )
                .unwrap();
                check_same(&format!("{name} y {i}"), &row(&y), &yi, 0.0);
                check_same(
                    &format!("{name} state {i}"),
                    &part(&new_pool, 0, slot, slot + 1),
                    &si,
                    0.0,
                );
            }
            for untouched in [1, 2] {
                check_same(
                    &format!("{name} slot {untouched}"),
                    &part(&new_pool, 0, untouched, untouched + 1),
                    &part(&pool, 0, untouched, untouched + 1),
                    0.0,
                );
            }
        }
    }
}
