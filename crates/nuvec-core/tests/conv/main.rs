//! Convolutions against direct f64 loops: every op over several strides, paddings,
//! dilations and groups, depthwise, four float types, input layouts, transposed convolutions
//! against their scatter formula, derivatives, batching and errors.

#[path = "../common/mod.rs"]
mod common;
mod transforms;

use common::Rng;
use common::autodiff::{check, check_vmap, random, values};
use nuvec_core::*;

/// Every parameter of a convolution, per spatial axis.
#[derive(Debug, Clone)]
struct P {
    s: Vec<usize>,
    lo: Vec<isize>,
    hi: Vec<isize>,
    kd: Vec<usize>,
    id: Vec<usize>,
    groups: usize,
    flip: bool,
}

impl P {
    /// A plain convolution: symmetric padding, no input dilation, no flip.
    fn plain(s: &[usize], pad: &[usize], kd: &[usize], groups: usize) -> P {
        let pad: Vec<isize> = pad.iter().map(|&v| v as isize).collect();
        P {
            s: s.to_vec(),
            lo: pad.clone(),
            hi: pad,
            kd: kd.to_vec(),
            id: vec![1; s.len()],
            groups,
            flip: false,
        }
    }

    fn general(&self, x: &Array, w: &Array) -> Result<Array> {
        conv_general(
            x,
            w,
            &self.s,
            &self.lo,
            &self.hi,
            &self.kd,
            &self.id,
            self.groups,
            self.flip,
        )
    }
}

fn dilated(n: usize, d: usize) -> usize {
    if n == 0 { 0 } else { (n - 1) * d + 1 }
}

/// Every multi-index of `shape`, row-major.
fn indices(shape: &[usize]) -> Vec<Vec<usize>> {
    let mut out = vec![vec![]];
    for &n in shape {
        out = out
            .into_iter()
            .flat_map(|prefix| {
                (0..n).map(move |i| {
                    let mut v = prefix.clone();
                    v.push(i);
                    v
                })
            })
            .collect();
    }
    out
}

fn flat(index: &[usize], shape: &[usize]) -> usize {
    index.iter().zip(shape).fold(0, |acc, (&i, &n)| acc * n + i)
}

/// The convolution by its definition: the output, the sum of |terms| of each output (for
/// tolerances) and the output shape.
fn reference(x: &Array, w: &Array, p: &P) -> (Vec<f64>, Vec<f64>, Vec<usize>) {
    let (xv, wv) = (values(x), values(w));
    let (xs, ws) = (x.shape().to_vec(), w.shape().to_vec());
    let d = xs.len() - 2;
    let (n, c_in, c_out) = (xs[0], xs[d + 1], ws[0]);
    let (cg, og) = (c_in / p.groups, c_out / p.groups);
    let out_sp: Vec<usize> = (0..d)
        .map(|i| {
            let span = dilated(xs[i + 1], p.id[i]) as isize + p.lo[i] + p.hi[i];
            (span - dilated(ws[i + 1], p.kd[i]) as isize) as usize / p.s[i] + 1
        })
        .collect();
    let mut shape = vec![n];
    shape.extend(&out_sp);
    shape.push(c_out);
    let size: usize = shape.iter().product();
    let (mut out, mut mag) = (vec![0.0; size], vec![0.0; size]);
    let taps = indices(&ws[1..=d]);
    for oi in indices(&shape) {
        let (b, o, co) = (oi[0], &oi[1..=d], oi[d + 1]);
        let g = co / og;
        let (mut acc, mut abs) = (0.0, 0.0);
        for k in &taps {
            let mut pos = vec![b];
            let mut inside = true;
            for i in 0..d {
                let kk = if p.flip { ws[i + 1] - 1 - k[i] } else { k[i] };
                let q = (o[i] * p.s[i] + kk * p.kd[i]) as isize - p.lo[i];
                let extent = dilated(xs[i + 1], p.id[i]) as isize;
                if q < 0 || q >= extent || !(q as usize).is_multiple_of(p.id[i]) {
                    inside = false;
                    break;
                }
                pos.push(q as usize / p.id[i]);
            }
            if !inside {
                continue;
            }
            for c in 0..cg {
                let mut xi = pos.clone();
                xi.push(g * cg + c);
                let mut wi = vec![co];
                wi.extend(k);
                wi.push(c);
                let t = xv[flat(&xi, &xs)] * wv[flat(&wi, &ws)];
                acc += t;
                abs += t.abs();
            }
        }
        let at = flat(&oi, &shape);
        out[at] = acc;
        mag[at] = abs;
    }
    (out, mag, shape)
}

/// The transposed convolution by its scatter form: input position `i`, tap `k` adds
/// `x[i] · w[k]` to output `i·stride + k·dilation − padding` (channels per group).
fn transpose_reference(
    x: &Array,
    w: &Array,
    (s, pad, dil, out_pad): (&[usize], &[usize], &[usize], &[usize]),
    groups: usize,
) -> (Vec<f64>, Vec<f64>, Vec<usize>) {
    let (xv, wv) = (values(x), values(w));
    let (xs, ws) = (x.shape().to_vec(), w.shape().to_vec());
    let d = xs.len() - 2;
    let (c_in, c_out) = (xs[d + 1], ws[0]);
    let (cg, og) = (c_in / groups, c_out / groups);
    let mut shape = vec![xs[0]];
    for i in 0..d {
        shape.push((xs[i + 1] - 1) * s[i] + dil[i] * (ws[i + 1] - 1) + 1 + out_pad[i] - 2 * pad[i]);
    }
    shape.push(c_out);
    let size: usize = shape.iter().product();
    let (mut out, mut mag) = (vec![0.0; size], vec![0.0; size]);
    for xi in indices(&xs) {
        let ci = xi[d + 1];
        let g = ci / cg;
        for k in indices(&ws[1..=d]) {
            let mut oi = vec![xi[0]];
            let mut inside = true;
            for i in 0..d {
                let q = (xi[i + 1] * s[i] + k[i] * dil[i]) as isize - pad[i] as isize;
                if q < 0 || q as usize >= shape[i + 1] {
                    inside = false;
                }
                oi.push(q.max(0) as usize);
            }
            if !inside {
                continue;
            }
            for j in 0..og {
                let co = g * og + j;
                let mut wi = vec![co];
                wi.extend(&k);
                wi.push(ci - g * cg);
                let mut o = oi.clone();
                o.push(co);
                let t = xv[flat(&xi, &xs)] * wv[flat(&wi, &ws)];
                out[flat(&o, &shape)] += t;
                mag[flat(&o, &shape)] += t.abs();
            }
        }
    }
    (out, mag, shape)
}

/// The relative precision of a float type.
fn eps(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 1e-14,
        DType::F32 => 1e-6,
        DType::F16 => 1e-3,
        _ => 8e-3,
    }
}

/// Checks `got` against a reference with a tolerance scaled by each output's magnitude.
fn assert_matches(name: &str, got: &Array, (want, mag, shape): &(Vec<f64>, Vec<f64>, Vec<usize>)) {
    assert_eq!(got.shape(), shape.as_slice(), "{name}: shape");
    let gv = values(got);
    let e = eps(got.dtype());
    for (i, ((g, w), m)) in gv.iter().zip(want).zip(mag).enumerate() {
        assert!(
            (g - w).abs() <= 4.0 * e * (m + 1e-3),
            "{name}: output {i}: {g} vs {w} (dtype {})",
            got.dtype()
        );
    }
}

fn rand(rng: &mut Rng, shape: &[usize], dtype: DType) -> Array {
    random(rng, shape, -1.0, 1.0).astype(dtype).unwrap()
}

const FLOATS: [DType; 4] = [DType::F32, DType::F64, DType::F16, DType::BF16];

#[test]
fn conv1d_matches_the_definition() {
    let mut rng = Rng::new(1);
    // (n, length, c_in, c_out, kernel, stride, padding, dilation, groups)
    let cases = [
        (2, 9, 3, 4, 3, 1, 0, 1, 1),
        (1, 10, 4, 6, 3, 2, 1, 1, 2),
        (3, 12, 6, 3, 2, 1, 2, 3, 3),
        (1, 7, 5, 5, 4, 1, 3, 1, 5),
        (2, 17, 8, 8, 3, 3, 1, 2, 8),
        (1, 5, 2, 3, 5, 1, 0, 1, 1),
        (1, 6, 4, 8, 1, 1, 0, 1, 2),
        (2, 8, 3, 2, 1, 2, 1, 1, 1),
    ];
    for (n, l, ci, co, k, s, pad, dil, g) in cases {
        for dtype in FLOATS {
            let x = rand(&mut rng, &[n, l, ci], dtype);
            let w = rand(&mut rng, &[co, k, ci / g], dtype);
            let got = conv1d(&x, &w, s, pad, dil, g).unwrap();
            assert_eq!(got.dtype(), dtype);
            let p = P::plain(&[s], &[pad], &[dil], g);
            let name = format!("conv1d {:?} {dtype}", (n, l, ci, co, k, s, pad, dil, g));
            assert_matches(&name, &got, &reference(&x, &w, &p));
        }
    }
}

#[test]
fn depthwise_conv1d_large_and_half() {
    let mut rng = Rng::new(2);
    // Long enough to be split over threads; the short causal convolution of language models.
    for (n, l, c, k, pad, s, dil) in [
        (2, 300, 96, 4, 3, 1, 1),
        (1, 129, 33, 3, 1, 2, 2),
        (3, 9, 1, 9, 4, 1, 1),
        // The first and last outputs see only padding.
        (2, 5, 3, 2, 4, 1, 1),
    ] {
        for dtype in FLOATS {
            let x = rand(&mut rng, &[n, l, c], dtype);
            let w = rand(&mut rng, &[c, k, 1], dtype);
            let got = conv1d(&x, &w, s, pad, dil, c).unwrap();
            let p = P::plain(&[s], &[pad], &[dil], c);
            let name = format!("depthwise {:?} {dtype}", (n, l, c, k));
            assert_matches(&name, &got, &reference(&x, &w, &p));
        }
    }
}

#[test]
fn depthwise_with_few_outputs_and_many_taps() {
    // Fewer output rows than threads want: the kernel splits the channels instead.
    let mut rng = Rng::new(13);
    for dtype in FLOATS {
        let x = rand(&mut rng, &[1, 700, 40], dtype);
        let w = rand(&mut rng, &[40, 698, 1], dtype);
        let got = conv1d(&x, &w, 1, 1, 1, 40).unwrap();
        let name = format!("depthwise long kernel {dtype}");
        assert_matches(
            &name,
            &got,
            &reference(&x, &w, &P::plain(&[1], &[1], &[1], 40)),
        );
    }
    // The weight's cotangent of a long depthwise convolution is one: ⟨vjp(g), t⟩ = ⟨g, J t⟩.
    let x = random(&mut rng, &[2, 1000, 40], -1.0, 1.0);
    let w = random(&mut rng, &[40, 4, 1], -1.0, 1.0);
    let g = random(&mut rng, &[2, 501, 40], -1.0, 1.0);
    let (tx, tw) = (
        random(&mut rng, &[2, 1000, 40], -1.0, 1.0),
        random(&mut rng, &[40, 4, 1], -1.0, 1.0),
    );
    let f = |v: &[Array]| Ok(vec![conv1d(&v[0], &v[1], 2, 2, 1, 40)?]);
    let (_, grads) = vjp(f, &[x.clone(), w.clone()], std::slice::from_ref(&g)).unwrap();
    let dot =
        |a: &Array, b: &Array| -> f64 { values(a).iter().zip(values(b)).map(|(p, q)| p * q).sum() };
    let jx = conv1d(&tx, &w, 2, 2, 1, 40).unwrap();
    let jw = conv1d(&x, &tw, 2, 2, 1, 40).unwrap();
    let (lhs, rhs) = (dot(&grads[0], &tx), dot(&g, &jx));
    assert!(
        (lhs - rhs).abs() < 1e-9 * rhs.abs().max(1.0),
        "x: {lhs} vs {rhs}"
    );
    let (lhs, rhs) = (dot(&grads[1], &tw), dot(&g, &jw));
    assert!(
        (lhs - rhs).abs() < 1e-9 * rhs.abs().max(1.0),
        "w: {lhs} vs {rhs}"
    );
}

#[test]
fn conv2d_matches_the_definition() {
    let mut rng = Rng::new(3);
    type Case = (
        [usize; 4],
        usize,
        [usize; 2],
        [usize; 2],
        [usize; 2],
        [usize; 2],
        usize,
    );
    // (x shape, c_out, kernel, stride, padding, dilation, groups)
    let cases: [Case; 6] = [
        ([2, 6, 5, 3], 4, [3, 3], [1, 1], [0, 0], [1, 1], 1),
        ([1, 7, 8, 4], 6, [3, 2], [2, 1], [1, 0], [1, 2], 2),
        ([1, 5, 5, 6], 6, [3, 3], [1, 1], [1, 1], [1, 1], 6),
        ([2, 9, 7, 4], 8, [2, 3], [3, 2], [2, 1], [2, 1], 4),
        ([1, 4, 4, 8], 16, [1, 1], [1, 1], [0, 0], [1, 1], 1),
        ([1, 20, 20, 16], 32, [3, 3], [1, 1], [1, 1], [1, 1], 1),
    ];
    for (xs, co, k, s, pad, dil, g) in cases {
        for dtype in FLOATS {
            let x = rand(&mut rng, &xs, dtype);
            let w = rand(&mut rng, &[co, k[0], k[1], xs[3] / g], dtype);
            let got = conv2d(&x, &w, (s[0], s[1]), (pad[0], pad[1]), dil, g).unwrap();
            let p = P::plain(&s, &pad, &dil, g);
            let name = format!("conv2d {:?} {dtype}", (xs, co, k, s, pad, dil, g));
            assert_matches(&name, &got, &reference(&x, &w, &p));
        }
    }
    // One value for both axes.
    let x = rand(&mut rng, &[1, 6, 6, 2], DType::F32);
    let w = rand(&mut rng, &[3, 3, 3, 2], DType::F32);
    let p = P::plain(&[2, 2], &[1, 1], &[1, 1], 1);
    assert_matches(
        "conv2d scalar args",
        &conv2d(&x, &w, 2, 1, 1, 1).unwrap(),
        &reference(&x, &w, &p),
    );
}

#[test]
fn conv3d_matches_the_definition() {
    let mut rng = Rng::new(4);
    for (xs, co, k, s, pad, dil, g) in [
        (
            [1, 4, 5, 3, 2],
            3,
            [2, 3, 2],
            [1, 1, 1],
            [0, 1, 0],
            [1, 1, 1],
            1,
        ),
        (
            [2, 5, 4, 6, 4],
            4,
            [3, 2, 2],
            [2, 1, 2],
            [1, 0, 1],
            [1, 2, 1],
            2,
        ),
        (
            [1, 3, 3, 3, 3],
            3,
            [3, 3, 3],
            [1, 1, 1],
            [1, 1, 1],
            [1, 1, 1],
            3,
        ),
    ] {
        for dtype in FLOATS {
            let x = rand(&mut rng, &xs, dtype);
            let w = rand(&mut rng, &[co, k[0], k[1], k[2], xs[4] / g], dtype);
            let got = conv3d(&x, &w, s, (pad[0], pad[1], pad[2]), dil, g).unwrap();
            let p = P::plain(&s, &pad, &dil, g);
            let name = format!("conv3d {:?} {dtype}", (xs, co, k, s, pad, dil, g));
            assert_matches(&name, &got, &reference(&x, &w, &p));
        }
    }
}

#[test]
fn conv_general_dilates_pads_and_flips() {
    let mut rng = Rng::new(5);
    let cases = [
        // Input dilation, asymmetric padding, flipped kernel.
        (
            vec![2, 5, 3],
            vec![4, 3, 3],
            P {
                s: vec![1],
                lo: vec![2],
                hi: vec![1],
                kd: vec![1],
                id: vec![2],
                groups: 1,
                flip: true,
            },
        ),
        // Negative padding crops; strides and both dilations together.
        (
            vec![1, 11, 4],
            vec![2, 2, 2],
            P {
                s: vec![2],
                lo: vec![-2],
                hi: vec![-1],
                kd: vec![2],
                id: vec![3],
                groups: 2,
                flip: false,
            },
        ),
        (
            vec![1, 5, 4, 2],
            vec![3, 2, 3, 2],
            P {
                s: vec![1, 2],
                lo: vec![0, 3],
                hi: vec![2, -1],
                kd: vec![2, 1],
                id: vec![2, 3],
                groups: 1,
                flip: true,
            },
        ),
        (
            vec![2, 3, 3, 2, 2],
            vec![2, 2, 2, 1, 1],
            P {
                s: vec![1, 1, 2],
                lo: vec![1, 0, 1],
                hi: vec![0, 1, 1],
                kd: vec![1, 2, 1],
                id: vec![2, 1, 1],
                groups: 2,
                flip: true,
            },
        ),
    ];
    for (xs, ws, p) in cases {
        for dtype in FLOATS {
            let x = rand(&mut rng, &xs, dtype);
            let w = rand(&mut rng, &ws, dtype);
            let got = p.general(&x, &w).unwrap();
            let name = format!("conv_general {p:?} {dtype}");
            assert_matches(&name, &got, &reference(&x, &w, &p));
        }
    }
    // One value stands for every axis; nothing for the default.
    let x = rand(&mut rng, &[1, 5, 6, 2], DType::F64);
    let w = rand(&mut rng, &[2, 2, 2, 2], DType::F64);
    let got = conv_general(&x, &w, &[2], &[1], &[0], &[], &[2], 1, false).unwrap();
    let p = P {
        s: vec![2, 2],
        lo: vec![1, 1],
        hi: vec![0, 0],
        kd: vec![1, 1],
        id: vec![2, 2],
        groups: 1,
        flip: false,
    };
    assert_matches(
        "conv_general broadcast params",
        &got,
        &reference(&x, &w, &p),
    );
}

#[test]
fn inputs_in_any_layout() {
    let mut rng = Rng::new(6);
    for dtype in [DType::F32, DType::BF16] {
        let p1 = P::plain(&[1], &[1], &[1], 1);
        let w = rand(&mut rng, &[4, 3, 6], dtype);
        // Transposed: channels are not adjacent.
        let x = transpose(&rand(&mut rng, &[2, 6, 7], dtype), &[0, 2, 1]).unwrap();
        let got = conv1d(&x, &w, 1, 1, 1, 1).unwrap();
        assert_matches("transposed input", &got, &reference(&x, &w, &p1));
        // Reversed along the sequence and sliced along the channels.
        let base = rand(&mut rng, &[2, 9, 8], dtype);
        let x = slice(
            &flip(&base, &[1]).unwrap(),
            &[
                SliceArg::full(),
                SliceArg::new(Some(1), Some(8), 1),
                SliceArg::new(Some(2), Some(8), 1),
            ],
        )
        .unwrap();
        let got = conv1d(&x, &w, 1, 1, 1, 1).unwrap();
        assert_matches("reversed and sliced input", &got, &reference(&x, &w, &p1));
        // Broadcast over the batch, and a transposed (non-contiguous) weight.
        let x = broadcast_to(&rand(&mut rng, &[1, 5, 6], dtype), &[3, 5, 6]).unwrap();
        let wt = transpose(&rand(&mut rng, &[6, 3, 4], dtype), &[2, 1, 0]).unwrap();
        let got = conv1d(&x, &wt, 2, 0, 1, 1).unwrap();
        let p = P::plain(&[2], &[0], &[1], 1);
        assert_matches("broadcast input", &got, &reference(&x, &wt, &p));
        // Depthwise over a transposed input and a strided 1x1 input.
        let x = transpose(&rand(&mut rng, &[1, 6, 10], dtype), &[0, 2, 1]).unwrap();
        let w = rand(&mut rng, &[6, 3, 1], dtype);
        let got = conv1d(&x, &w, 1, 1, 1, 6).unwrap();
        assert_matches(
            "depthwise transposed",
            &got,
            &reference(&x, &w, &P::plain(&[1], &[1], &[1], 6)),
        );
        let x = slice(
            &rand(&mut rng, &[2, 8, 4], dtype),
            &[SliceArg::full(), SliceArg::new(None, None, 2)],
        )
        .unwrap();
        let w = rand(&mut rng, &[5, 1, 4], dtype);
        let got = conv1d(&x, &w, 1, 0, 1, 1).unwrap();
        assert_matches(
            "1x1 strided input",
            &got,
            &reference(&x, &w, &P::plain(&[1], &[0], &[1], 1)),
        );
    }
}

#[test]
fn empty_inputs() {
    let x = zeros(&[0, 5, 4], DType::F32).unwrap();
    let w = ones(&[3, 2, 4], DType::F32).unwrap();
    let y = conv1d(&x, &w, 1, 0, 1, 1).unwrap();
    assert_eq!(y.shape(), [0, 4, 3]);
    assert!(y.to_vec::<f32>().unwrap().is_empty());
    // No output channels.
    let x = ones(&[2, 5, 4], DType::F32).unwrap();
    let w = ones(&[0, 2, 4], DType::F32).unwrap();
    assert_eq!(conv1d(&x, &w, 1, 0, 1, 1).unwrap().shape(), [2, 4, 0]);
    // No input channels: empty sums.
    let x = ones(&[2, 5, 0], DType::F32).unwrap();
    let w = ones(&[3, 2, 0], DType::F32).unwrap();
    let y = conv1d(&x, &w, 1, 0, 1, 1).unwrap();
    assert_eq!(y.shape(), [2, 4, 3]);
    assert!(y.to_vec::<f32>().unwrap().iter().all(|&v| v == 0.0));
    // An empty sequence padded to a non-empty one.
    let x = ones(&[1, 0, 2], DType::F32).unwrap();
    let w = ones(&[1, 1, 2], DType::F32).unwrap();
    let y = conv1d(&x, &w, 1, 1, 1, 1).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [0.0, 0.0]);
}

#[test]
fn mixed_types_promote() {
    let mut rng = Rng::new(7);
    for (a, b, want) in [
        (DType::BF16, DType::F32, DType::F32),
        (DType::F16, DType::BF16, DType::F32),
        (DType::F32, DType::F64, DType::F64),
        (DType::F16, DType::F16, DType::F16),
    ] {
        let x = rand(&mut rng, &[1, 6, 3], a);
        let w = rand(&mut rng, &[2, 2, 3], b);
        let got = conv1d(&x, &w, 1, 0, 1, 1).unwrap();
        assert_eq!(got.dtype(), want, "{a} with {b}");
        assert_matches(
            "mixed",
            &got,
            &reference(&x, &w, &P::plain(&[1], &[0], &[1], 1)),
        );
        let t = conv_transpose1d(&x, &w, 1, 0, 1, 0, 1).unwrap();
        assert_eq!(t.dtype(), want);
    }
}

/// (x shape, c_out, kernel, stride, padding, dilation, output padding, groups)
type TransposeCase = (
    Vec<usize>,
    usize,
    Vec<usize>,
    Vec<usize>,
    Vec<usize>,
    Vec<usize>,
    Vec<usize>,
    usize,
);

#[test]
fn transposed_convolutions_match_the_scatter_form() {
    let mut rng = Rng::new(8);
    let cases: Vec<TransposeCase> = vec![
        (
            vec![2, 5, 3],
            4,
            vec![3],
            vec![1],
            vec![0],
            vec![1],
            vec![0],
            1,
        ),
        (
            vec![1, 4, 4],
            6,
            vec![3],
            vec![2],
            vec![1],
            vec![1],
            vec![1],
            2,
        ),
        (
            vec![1, 6, 2],
            2,
            vec![2],
            vec![3],
            vec![0],
            vec![2],
            vec![2],
            1,
        ),
        (
            vec![2, 4, 6],
            6,
            vec![4],
            vec![3],
            vec![4],
            vec![1],
            vec![0],
            6,
        ),
        (
            vec![1, 3, 4, 2],
            3,
            vec![3, 2],
            vec![2, 1],
            vec![1, 0],
            vec![1, 2],
            vec![1, 0],
            1,
        ),
        (
            vec![2, 3, 3, 4],
            4,
            vec![2, 2],
            vec![2, 2],
            vec![0, 1],
            vec![1, 1],
            vec![0, 1],
            2,
        ),
        (
            vec![1, 2, 3, 2, 2],
            3,
            vec![2, 2, 3],
            vec![2, 1, 2],
            vec![0, 1, 1],
            vec![1, 1, 1],
            vec![1, 0, 0],
            1,
        ),
    ];
    for (xs, co, k, s, pad, dil, op, g) in cases {
        let d = k.len();
        for dtype in FLOATS {
            let x = rand(&mut rng, &xs, dtype);
            let mut ws = vec![co];
            ws.extend(&k);
            ws.push(xs[d + 1] / g);
            let w = rand(&mut rng, &ws, dtype);
            let got = match d {
                1 => conv_transpose1d(&x, &w, s[0], pad[0], dil[0], op[0], g),
                2 => conv_transpose2d(
                    &x,
                    &w,
                    (s[0], s[1]),
                    (pad[0], pad[1]),
                    (dil[0], dil[1]),
                    (op[0], op[1]),
                    g,
                ),
                _ => conv_transpose3d(
                    &x,
                    &w,
                    [s[0], s[1], s[2]],
                    (pad[0], pad[1], pad[2]),
                    [dil[0], dil[1], dil[2]],
                    [op[0], op[1], op[2]],
                    g,
                ),
            }
            .unwrap();
            let name = format!(
                "conv_transpose{d}d {:?} {dtype}",
                (&xs, co, &k, &s, &pad, &dil, &op, g)
            );
            let want = transpose_reference(&x, &w, (&s, &pad, &dil, &op), g);
            assert_matches(&name, &got, &want);
        }
    }
}

#[test]
fn transpose_is_the_adjoint() {
    // ⟨conv(x, w), y⟩ = ⟨x, conv_transpose(y, w')⟩ with w' the kernel's channel axes swapped:
    // conv_transpose flips the kernel, so the adjoint of conv1d(·, w) is conv_transpose1d with
    // w'[ci, k, co] = w[co, k, ci].
    let mut rng = Rng::new(9);
    for (l, ci, co, k, s, pad, dil) in [
        (9, 3, 2, 3, 2, 1, 1),
        (12, 2, 4, 2, 3, 2, 2),
        (7, 1, 1, 4, 1, 3, 1),
    ] {
        let x = rand(&mut rng, &[2, l, ci], DType::F64);
        let w = rand(&mut rng, &[co, k, ci], DType::F64);
        let y0 = conv1d(&x, &w, s, pad, dil, 1).unwrap();
        let y = rand(&mut rng, y0.shape(), DType::F64);
        // The output padding that gives back the input's length.
        let full = (y0.shape()[1] - 1) * s + dil * (k - 1) + 1 - 2 * pad;
        let wt = swapaxes(&w, 0, -1).unwrap();
        let back = conv_transpose1d(&y, &wt, s, pad, dil, l - full, 1).unwrap();
        assert_eq!(back.shape(), x.shape());
        let lhs: f64 = values(&y0).iter().zip(values(&y)).map(|(a, b)| a * b).sum();
        let rhs: f64 = values(&x)
            .iter()
            .zip(values(&back))
            .map(|(a, b)| a * b)
            .sum();
        assert!(
            (lhs - rhs).abs() < 1e-10 * lhs.abs().max(1.0),
            "{lhs} vs {rhs}"
        );
    }
}

#[test]
fn bad_arguments_are_errors() {
    let f32s = |shape: &[usize]| ones(shape, DType::F32).unwrap();
    let x = f32s(&[1, 8, 4]);
    let w = f32s(&[2, 3, 4]);
    // Integer inputs.
    let xi = ones(&[1, 8, 4], DType::I32).unwrap();
    let wi = ones(&[2, 3, 4], DType::I32).unwrap();
    assert!(conv1d(&xi, &w, 1, 0, 1, 1).is_err());
    assert!(conv1d(&x, &wi, 1, 0, 1, 1).is_err());
    assert!(conv_transpose1d(&xi, &w, 1, 0, 1, 0, 1).is_err());
    let xb = ones(&[1, 8, 4], DType::Bool).unwrap();
    assert!(conv1d(&xb, &w, 1, 0, 1, 1).is_err());
    let xc = ones(&[1, 8, 4], DType::C64).unwrap();
    assert!(conv1d(&xc, &w, 1, 0, 1, 1).is_err());
    // Channels that do not match.
    assert!(conv1d(&x, &f32s(&[2, 3, 3]), 1, 0, 1, 1).is_err());
    assert!(conv1d(&x, &f32s(&[2, 3, 4]), 1, 0, 1, 2).is_err());
    // Groups that do not divide the channels.
    assert!(conv1d(&x, &f32s(&[2, 3, 4]), 1, 0, 1, 3).is_err());
    assert!(conv1d(&x, &f32s(&[3, 3, 2]), 1, 0, 1, 2).is_err());
    assert!(conv1d(&x, &w, 1, 0, 1, 0).is_err());
    // Outputs that would be empty or negative.
    assert!(conv1d(&x, &f32s(&[2, 9, 4]), 1, 0, 1, 1).is_err());
    assert!(conv1d(&x, &f32s(&[2, 3, 4]), 1, 0, 4, 1).is_err());
    assert!(conv_general(&x, &w, &[], &[-4], &[-3], &[], &[], 1, false).is_err());
    assert!(conv_transpose1d(&f32s(&[1, 1, 4]), &w, 1, 2, 1, 0, 1).is_err());
    // Wrong ranks.
    assert!(conv1d(&f32s(&[8, 4]), &w, 1, 0, 1, 1).is_err());
    assert!(conv1d(&x, &f32s(&[2, 4]), 1, 0, 1, 1).is_err());
    assert!(conv2d(&x, &w, 1, 0, 1, 1).is_err());
    assert!(conv2d(&f32s(&[1, 4, 4, 4]), &w, 1, 0, 1, 1).is_err());
    assert!(conv3d(&f32s(&[1, 4, 4, 4]), &f32s(&[2, 1, 1, 4]), 1, 0, 1, 1).is_err());
    assert!(
        conv_general(
            &f32s(&[1, 2, 2, 2, 2, 2]),
            &f32s(&[1, 1, 1, 1, 1, 2]),
            &[],
            &[],
            &[],
            &[],
            &[],
            1,
            false
        )
        .is_err()
    );
    assert!(conv_transpose2d(&x, &w, 1, 0, 1, 0, 1).is_err());
    assert!(conv_transpose1d(&x, &f32s(&[2, 2, 3, 4]), 1, 0, 1, 0, 1).is_err());
    // Zero strides or dilations, a kernel of size 0, parameter lists of the wrong length.
    assert!(conv1d(&x, &w, 0, 0, 1, 1).is_err());
    assert!(conv1d(&x, &w, 1, 0, 0, 1).is_err());
    assert!(conv_general(&x, &w, &[], &[], &[], &[], &[0], 1, false).is_err());
    assert!(conv1d(&x, &f32s(&[2, 0, 4]), 1, 0, 1, 1).is_err());
    assert!(conv_transpose1d(&x, &w, 0, 0, 1, 0, 1).is_err());
    let x2 = f32s(&[1, 5, 5, 4]);
    let w2 = f32s(&[2, 3, 3, 4]);
    assert!(conv_general(&x2, &w2, &[1, 1, 1], &[], &[], &[], &[], 1, false).is_err());
    assert!(conv_general(&x2, &w2, &[], &[0, 0, 0], &[], &[], &[], 1, false).is_err());
    // Errors name the function called.
    let err = conv2d(&x2, &f32s(&[2, 3, 3, 3]), 1, 0, 1, 1).unwrap_err();
    assert!(err.to_string().starts_with("conv2d:"), "{err}");
}
