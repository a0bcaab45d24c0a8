//! Reductions, arg-reductions, scans and their composites against float64 references
//! computed here by explicit loops, over contiguous, transposed and broadcast inputs, empty
//! arrays and several element types; plus special values, type rules and bad input.

use nuvec_core::{
    Array, DType, Error, all, any, argmax, argmin, broadcast_to, count_nonzero, cummax, cummin,
    cumprod, cumsum, logcumsumexp, logsumexp, max, mean, min, prod, softmax, std, sum, transpose,
    var,
};
use proptest::prelude::*;

type Res = nuvec_core::Result<Array>;

// ---------------------------------------------------------------------------------------
// Helpers: random values, layouts, indexing, references, comparison.

/// A small deterministic generator (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick(&mut self, set: &[f64]) -> f64 {
        set[self.below(set.len())]
    }
}

/// Which values a test draws (all exactly representable in every type they are used with).
#[derive(Clone, Copy)]
enum Values {
    /// Small integers or eighths, varied.
    General,
    /// Values whose products stay small.
    Products,
    /// Mostly nonzero, some zeros.
    Sparse,
}

fn draw(rng: &mut Rng, dtype: DType, kind: Values) -> f64 {
    let float = dtype.is_float();
    match (kind, dtype) {
        (_, DType::Bool) => f64::from(u8::from(rng.below(10) > 2)),
        (Values::General, DType::U8) => rng.below(10) as f64,
        (Values::General, _) if float => (rng.below(65) as f64 - 32.0) / 8.0,
        (Values::General, _) => rng.below(19) as f64 - 9.0,
        (Values::Products, DType::U8) => rng.pick(&[1.0, 2.0]),
        (Values::Products, _) if float => rng.pick(&[-1.5, -1.0, -0.5, 0.5, 1.0, 1.5]),
        (Values::Products, _) => rng.pick(&[-1.0, 1.0, 2.0]),
        (Values::Sparse, _) if rng.below(10) < 3 => 0.0,
        (Values::Sparse, _) => draw(rng, dtype, Values::General).abs().max(1.0),
    }
}

fn values(rng: &mut Rng, n: usize, dtype: DType, kind: Values) -> Vec<f64> {
    (0..n).map(|_| draw(rng, dtype, kind)).collect()
}

#[derive(Clone, Copy, Debug)]
enum Lay {
    Contiguous,
    Transposed,
    Broadcast,
}

const LAYS: [Lay; 3] = [Lay::Contiguous, Lay::Transposed, Lay::Broadcast];

fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for a in (0..shape.len()).rev() {
        idx[a] = i % shape[a];
        i /= shape[a];
    }
    idx
}

fn ravel(idx: &[usize], shape: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |acc, (&i, &n)| acc * n + i)
}

/// An array of `dtype` with logical shape `shape` laid out as `lay`, and its logical values:
/// `vals` itself, except that a broadcast input repeats the values at index 0 of its
/// broadcast axis.
fn build(vals: &[f64], shape: &[usize], dtype: DType, lay: Lay) -> (Array, Vec<f64>) {
    let n = shape.len();
    let typed = |v: &[f64], s: &[usize]| Array::from_slice(v, s).unwrap().astype(dtype).unwrap();
    match lay {
        Lay::Contiguous => (typed(vals, shape), vals.to_vec()),
        Lay::Transposed => {
            // Store the reversed-axes array, then transpose it back: same values, strided.
            let rev: Vec<usize> = shape.iter().rev().copied().collect();
            let stored: Vec<f64> = (0..vals.len())
                .map(|i| {
                    let idx: Vec<usize> = unravel(i, &rev).into_iter().rev().collect();
                    vals[ravel(&idx, shape)]
                })
                .collect();
            let perm: Vec<usize> = (0..n).rev().collect();
            (
                transpose(&typed(&stored, &rev), &perm).unwrap(),
                vals.to_vec(),
            )
        }
        Lay::Broadcast => {
            if n == 0 {
                return (typed(vals, shape), vals.to_vec());
            }
            let b = n / 2;
            let mut base_shape = shape.to_vec();
            base_shape[b] = 1;
            let base_size: usize = base_shape.iter().product();
            let at_zero = |i: usize, s: &[usize]| {
                let mut idx = unravel(i, s);
                idx[b] = 0;
                vals[ravel(&idx, shape)]
            };
            // An empty result can come from a base with elements (broadcast to size 0).
            let base: Vec<f64> = if vals.is_empty() {
                vec![1.0; base_size]
            } else {
                (0..base_size).map(|i| at_zero(i, &base_shape)).collect()
            };
            let logical: Vec<f64> = (0..vals.len()).map(|i| at_zero(i, shape)).collect();
            let arr = broadcast_to(&typed(&base, &base_shape), shape).unwrap();
            (arr, logical)
        }
    }
}

/// The values of any array as f64.
fn f64s(a: &Array) -> Vec<f64> {
    a.astype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

/// Axes as a reduction takes them: sorted, non-negative, every axis for an empty list.
fn norm_axes(axes: &[isize], ndim: usize) -> Vec<usize> {
    if axes.is_empty() {
        return (0..ndim).collect();
    }
    let mut out: Vec<usize> = axes
        .iter()
        .map(|&a| if a < 0 { a + ndim as isize } else { a } as usize)
        .collect();
    out.sort_unstable();
    out
}

/// The axis lists to try for `ndim` axes: all (empty), each axis positive and negative,
/// pairs (one of them negative), and every axis listed out of order.
fn axes_cases(ndim: usize) -> Vec<Vec<isize>> {
    let n = ndim as isize;
    let mut out = vec![vec![]];
    for a in 0..n {
        out.push(vec![a]);
        out.push(vec![a - n]);
    }
    for a in 0..n {
        for b in a + 1..n {
            out.push(vec![b - n, a]);
        }
    }
    if ndim > 1 {
        out.push((0..n).rev().collect());
    }
    out
}

/// `shape` with `axes` as size 1 (kept) or removed.
fn out_shape(shape: &[usize], axes: &[usize], keepdims: bool) -> Vec<usize> {
    (0..shape.len())
        .filter_map(|i| match (axes.contains(&i), keepdims) {
            (true, true) => Some(1),
            (true, false) => None,
            (false, _) => Some(shape[i]),
        })
        .collect()
}

/// The reduction of `vals` over `axes` by explicit loops: `init` folded with `f`, in the
/// output's row-major order.
fn ref_reduce(
    vals: &[f64],
    shape: &[usize],
    axes: &[usize],
    init: f64,
    f: &dyn Fn(f64, f64) -> f64,
) -> Vec<f64> {
    let kept = out_shape(shape, axes, true);
    let mut out = vec![init; kept.iter().product()];
    for (i, &v) in vals.iter().enumerate() {
        let mut idx = unravel(i, shape);
        for &a in axes {
            idx[a] = 0;
        }
        let o = ravel(&idx, &kept);
        out[o] = f(out[o], v);
    }
    out
}

/// Every element of `vals` along `axes`, grouped by output position.
fn groups(vals: &[f64], shape: &[usize], axes: &[usize]) -> Vec<Vec<f64>> {
    let kept = out_shape(shape, axes, true);
    let mut out = vec![Vec::new(); kept.iter().product()];
    for (i, &v) in vals.iter().enumerate() {
        let mut idx = unravel(i, shape);
        for &a in axes {
            idx[a] = 0;
        }
        out[ravel(&idx, &kept)].push(v);
    }
    out
}

/// The relative tolerance of results of type `dtype`.
fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 1e-12,
        DType::F32 => 2e-6,
        DType::F16 => 2e-3,
        DType::BF16 => 1e-2,
        _ => 0.0,
    }
}

/// Whether `got` matches `want`: NaN with NaN, infinities exactly, else within `tol`
/// relative to `max(1, |want|)`.
fn close(got: f64, want: f64, tol: f64) -> bool {
    if want.is_nan() || got.is_nan() {
        return want.is_nan() && got.is_nan();
    }
    if want.is_infinite() || got.is_infinite() {
        return got == want;
    }
    (got - want).abs() <= tol * want.abs().max(1.0)
}

fn check(got: &[f64], want: &[f64], tol: f64, what: &dyn std::fmt::Display) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(close(g, w, tol), "{what}: element {i}: got {g}, want {w}");
    }
}

const SHAPES: &[&[usize]] = &[&[7], &[3, 5], &[2, 3, 4], &[4, 1, 6], &[2, 1, 3, 2]];
const EMPTY_SHAPES: &[&[usize]] = &[&[0], &[3, 0], &[0, 4], &[2, 0, 3]];
const DTYPES: [DType; 7] = [
    DType::F32,
    DType::F64,
    DType::F16,
    DType::BF16,
    DType::I32,
    DType::U8,
    DType::Bool,
];

type ReduceFn = dyn Fn(&Array, &[isize], bool) -> Res;
type RefFn = dyn Fn(&[f64], &[usize], &[usize]) -> Vec<f64>;

/// One reduction against its reference over shapes, layouts, axes, keepdims and types.
struct Sweep<'a> {
    name: &'a str,
    dtypes: &'a [DType],
    kind: Values,
    op: &'a ReduceFn,
    out_dtype: &'a dyn Fn(DType) -> DType,
    reference: &'a RefFn,
    shapes: &'a [&'a [usize]],
}

impl Sweep<'_> {
    fn run(&self) {
        let mut rng = Rng(7);
        for &dtype in self.dtypes {
            for &shape in self.shapes {
                let size = shape.iter().product();
                let vals = values(&mut rng, size, dtype, self.kind);
                for lay in LAYS {
                    let (x, logical) = build(&vals, shape, dtype, lay);
                    for axes in axes_cases(shape.len()) {
                        let ax = norm_axes(&axes, shape.len());
                        let want = (self.reference)(&logical, shape, &ax);
                        for keepdims in [false, true] {
                            let what = format!(
                                "{} {dtype} {shape:?} {lay:?} axes {axes:?} keepdims {keepdims}",
                                self.name
                            );
                            let y = (self.op)(&x, &axes, keepdims).unwrap();
                            let want_dtype = (self.out_dtype)(dtype);
                            assert_eq!(y.dtype(), want_dtype, "{what}");
                            assert_eq!(y.shape(), out_shape(shape, &ax, keepdims), "{what}");
                            check(&f64s(&y), &want, tol(want_dtype), &what);
                        }
                    }
                }
            }
        }
    }
}

fn widened(dtype: DType) -> DType {
    match dtype {
        DType::Bool | DType::I8 | DType::I16 => DType::I32,
        DType::U8 | DType::U16 => DType::U32,
        d => d,
    }
}

fn floated(dtype: DType) -> DType {
    if dtype.is_float() { dtype } else { DType::F32 }
}

// ---------------------------------------------------------------------------------------
// The plain reductions.

#[test]
fn sum_matches_reference() {
    for shapes in [SHAPES, EMPTY_SHAPES] {
        Sweep {
            name: "sum",
            dtypes: &DTYPES,
            kind: Values::General,
            op: &|x, a, k| sum(x, a, k),
            out_dtype: &widened,
            reference: &|v, s, a| ref_reduce(v, s, a, 0.0, &|x, y| x + y),
            shapes,
        }
        .run();
    }
}

#[test]
fn prod_matches_reference() {
    for shapes in [SHAPES, EMPTY_SHAPES] {
        Sweep {
            name: "prod",
            dtypes: &DTYPES,
            kind: Values::Products,
            op: &|x, a, k| prod(x, a, k),
            out_dtype: &widened,
            reference: &|v, s, a| ref_reduce(v, s, a, 1.0, &|x, y| x * y),
            shapes,
        }
        .run();
    }
}

#[test]
fn max_and_min_match_reference() {
    Sweep {
        name: "max",
        dtypes: &DTYPES,
        kind: Values::General,
        op: &|x, a, k| max(x, a, k),
        out_dtype: &|d| d,
        reference: &|v, s, a| ref_reduce(v, s, a, f64::NEG_INFINITY, &f64::max),
        shapes: SHAPES,
    }
    .run();
    Sweep {
        name: "min",
        dtypes: &DTYPES,
        kind: Values::General,
        op: &|x, a, k| min(x, a, k),
        out_dtype: &|d| d,
        reference: &|v, s, a| ref_reduce(v, s, a, f64::INFINITY, &f64::min),
        shapes: SHAPES,
    }
    .run();
}

#[test]
fn all_and_any_match_reference() {
    for shapes in [SHAPES, EMPTY_SHAPES] {
        Sweep {
            name: "all",
            dtypes: &DTYPES,
            kind: Values::Sparse,
            op: &|x, a, k| all(x, a, k),
            out_dtype: &|_| DType::Bool,
            reference: &|v, s, a| {
                ref_reduce(v, s, a, 1.0, &|x, y| {
                    f64::from(u8::from(x != 0.0 && y != 0.0))
                })
            },
            shapes,
        }
        .run();
        Sweep {
            name: "any",
            dtypes: &DTYPES,
            kind: Values::Sparse,
            op: &|x, a, k| any(x, a, k),
            out_dtype: &|_| DType::Bool,
            reference: &|v, s, a| {
                ref_reduce(v, s, a, 0.0, &|x, y| {
                    f64::from(u8::from(x != 0.0 || y != 0.0))
                })
            },
            shapes,
        }
        .run();
    }
}

#[test]
fn count_nonzero_matches_reference() {
    Sweep {
        name: "count_nonzero",
        dtypes: &DTYPES,
        kind: Values::Sparse,
        op: &|x, a, k| count_nonzero(x, a, k),
        out_dtype: &|_| DType::I32,
        reference: &|v, s, a| ref_reduce(v, s, a, 0.0, &|x, y| x + f64::from(u8::from(y != 0.0))),
        shapes: SHAPES,
    }
    .run();
}

// ---------------------------------------------------------------------------------------
// Composites.

fn ref_mean(v: &[f64], s: &[usize], a: &[usize]) -> Vec<f64> {
    groups(v, s, a)
        .iter()
        .map(|g| g.iter().sum::<f64>() / g.len() as f64)
        .collect()
}

fn ref_var(v: &[f64], s: &[usize], a: &[usize], ddof: usize) -> Vec<f64> {
    groups(v, s, a)
        .iter()
        .map(|g| {
            let m = g.iter().sum::<f64>() / g.len() as f64;
            let ss: f64 = g.iter().map(|x| (x - m) * (x - m)).sum();
            ss / (g.len() as f64 - ddof as f64).max(0.0)
        })
        .collect()
}

fn ref_lse(v: &[f64], s: &[usize], a: &[usize]) -> Vec<f64> {
    groups(v, s, a)
        .iter()
        .map(|g| {
            let m = g.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if m.is_infinite() {
                return m;
            }
            m + g.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
        })
        .collect()
}

const FLOATISH: [DType; 6] = [
    DType::F32,
    DType::F64,
    DType::F16,
    DType::BF16,
    DType::I32,
    DType::U8,
];

#[test]
fn mean_var_std_match_reference() {
    Sweep {
        name: "mean",
        dtypes: &FLOATISH,
        kind: Values::General,
        op: &|x, a, k| mean(x, a, k),
        out_dtype: &floated,
        reference: &ref_mean,
        shapes: SHAPES,
    }
    .run();
    for ddof in [0, 1] {
        Sweep {
            name: "var",
            dtypes: &FLOATISH,
            kind: Values::General,
            op: &move |x, a, k| var(x, a, k, ddof),
            out_dtype: &floated,
            reference: &move |v, s, a| ref_var(v, s, a, ddof),
            shapes: SHAPES,
        }
        .run();
        Sweep {
            name: "std",
            dtypes: &FLOATISH,
            kind: Values::General,
            op: &move |x, a, k| std(x, a, k, ddof),
            out_dtype: &floated,
            reference: &move |v, s, a| ref_var(v, s, a, ddof).iter().map(|x| x.sqrt()).collect(),
            shapes: SHAPES,
        }
        .run();
    }
}

#[test]
fn mean_of_nothing_is_nan_and_var_with_large_ddof_is_infinite() {
    let x = Array::from_slice::<f32>(&[], &[0, 3]).unwrap();
    assert!(
        f64s(&mean(&x, &[0], false).unwrap())
            .iter()
            .all(|v| v.is_nan())
    );
    let y = Array::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    assert_eq!(f64s(&var(&y, &[], false, 2).unwrap()), [f64::INFINITY]);
    let y = Array::from_slice(&[1.0f32, 1.0], &[2]).unwrap();
    assert!(f64s(&var(&y, &[], false, 2).unwrap())[0].is_nan());
}

#[test]
fn logsumexp_matches_reference() {
    Sweep {
        name: "logsumexp",
        dtypes: &FLOATISH,
        kind: Values::General,
        op: &|x, a, k| logsumexp(x, a, k),
        out_dtype: &floated,
        reference: &ref_lse,
        shapes: SHAPES,
    }
    .run();
}

/// The softmax of `vals` over `axes` by explicit loops.
fn ref_softmax(vals: &[f64], shape: &[usize], axes: &[usize]) -> Vec<f64> {
    let kept = out_shape(shape, axes, true);
    let key = |i: usize| {
        let mut idx = unravel(i, shape);
        for &a in axes {
            idx[a] = 0;
        }
        ravel(&idx, &kept)
    };
    let mut m = vec![f64::NEG_INFINITY; kept.iter().product()];
    for (i, &v) in vals.iter().enumerate() {
        m[key(i)] = m[key(i)].max(v);
    }
    let mut s = vec![0.0; m.len()];
    for (i, &v) in vals.iter().enumerate() {
        s[key(i)] += (v - m[key(i)]).exp();
    }
    (0..vals.len())
        .map(|i| (vals[i] - m[key(i)]).exp() / s[key(i)])
        .collect()
}

#[test]
fn softmax_matches_reference() {
    let mut rng = Rng(11);
    for dtype in FLOATISH {
        for &shape in SHAPES.iter().chain(EMPTY_SHAPES) {
            let vals = values(&mut rng, shape.iter().product(), dtype, Values::General);
            for lay in LAYS {
                let (x, logical) = build(&vals, shape, dtype, lay);
                for axes in axes_cases(shape.len()) {
                    let what = format!("softmax {dtype} {shape:?} {lay:?} {axes:?}");
                    let y = softmax(&x, &axes).unwrap();
                    assert_eq!(y.dtype(), floated(dtype), "{what}");
                    assert_eq!(y.shape(), shape, "{what}");
                    let want = ref_softmax(&logical, shape, &norm_axes(&axes, shape.len()));
                    check(&f64s(&y), &want, tol(floated(dtype)).max(1e-6), &what);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Arg-reductions.

/// The index of the first extreme element along `axis` (NaN the most extreme, the first one
/// winning), by explicit loops, in the output's order.
fn ref_arg(vals: &[f64], shape: &[usize], axis: usize, largest: bool) -> Vec<f64> {
    let kept = out_shape(shape, &[axis], true);
    (0..kept.iter().product())
        .map(|o| {
            let mut idx = unravel(o, &kept);
            let mut best = (f64::NAN, 0usize);
            for i in 0..shape[axis] {
                idx[axis] = i;
                let v = vals[ravel(&idx, shape)];
                let better = if i == 0 || best.0.is_nan() {
                    i == 0
                } else if v.is_nan() {
                    true
                } else if largest {
                    v > best.0
                } else {
                    v < best.0
                };
                if better {
                    best = (v, i);
                }
            }
            best.1 as f64
        })
        .collect()
}

#[test]
fn argmax_and_argmin_match_reference() {
    let mut rng = Rng(3);
    let shapes: &[&[usize]] = &[&[7], &[3, 5], &[2, 3, 4], &[4, 1, 6], &[0, 3]];
    for dtype in DTYPES {
        for &shape in shapes {
            // Few distinct values, so ties (first occurrence) are common.
            let vals: Vec<f64> = (0..shape.iter().product())
                .map(|_| {
                    let v = draw(&mut rng, dtype, Values::General);
                    if dtype == DType::Bool {
                        v
                    } else {
                        (v / 3.0).round()
                    }
                })
                .collect();
            for lay in LAYS {
                let (x, logical) = build(&vals, shape, dtype, lay);
                for axis in 0..shape.len() {
                    if shape[axis] == 0 {
                        continue;
                    }
                    for (name, largest) in [("argmax", true), ("argmin", false)] {
                        let want = ref_arg(&logical, shape, axis, largest);
                        for keepdims in [false, true] {
                            let ax = if keepdims {
                                axis as isize
                            } else {
                                axis as isize - shape.len() as isize
                            };
                            let y = if largest {
                                argmax(&x, ax, keepdims)
                            } else {
                                argmin(&x, ax, keepdims)
                            }
                            .unwrap();
                            let what = format!("{name} {dtype} {shape:?} {lay:?} axis {ax}");
                            assert_eq!(y.dtype(), DType::U32, "{what}");
                            assert_eq!(y.shape(), out_shape(shape, &[axis], keepdims), "{what}");
                            check(&f64s(&y), &want, 0.0, &what);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn argmax_counts_nan_as_the_extreme() {
    let nan = f32::NAN;
    let x = Array::from_slice(&[1.0, nan, 5.0, nan, 2.0, 9.0, -1.0, 3.0], &[2, 4]).unwrap();
    assert_eq!(
        argmax(&x, 1, false).unwrap().to_vec::<u32>().unwrap(),
        [1, 1]
    );
    assert_eq!(
        argmin(&x, 1, false).unwrap().to_vec::<u32>().unwrap(),
        [1, 2]
    );
    assert_eq!(
        argmax(&x, 0, false).unwrap().to_vec::<u32>().unwrap(),
        [1, 0, 0, 0]
    );
    let t = transpose(&x, &[1, 0]).unwrap();
    assert_eq!(
        argmax(&t, 0, false).unwrap().to_vec::<u32>().unwrap(),
        [1, 1]
    );
}

// ---------------------------------------------------------------------------------------
// Scans.

/// A scan of `vals` along `axis` by explicit loops.
fn ref_scan(
    vals: &[f64],
    shape: &[usize],
    axis: usize,
    reverse: bool,
    inclusive: bool,
    init: f64,
    f: &dyn Fn(f64, f64) -> f64,
) -> Vec<f64> {
    let mut out = vec![0.0; vals.len()];
    let kept = out_shape(shape, &[axis], true);
    for o in 0..kept.iter().product() {
        let mut idx = unravel(o, &kept);
        let mut acc = init;
        for k in 0..shape[axis] {
            idx[axis] = if reverse { shape[axis] - 1 - k } else { k };
            let at = ravel(&idx, shape);
            if inclusive {
                acc = f(acc, vals[at]);
                out[at] = acc;
            } else {
                out[at] = acc;
                acc = f(acc, vals[at]);
            }
        }
    }
    out
}

type ScanFn = dyn Fn(&Array, isize, bool, bool) -> Res;

fn scan_sweep(
    name: &str,
    dtypes: &[DType],
    kind: Values,
    op: &ScanFn,
    out_dtype: &dyn Fn(DType) -> DType,
    init: f64,
    f: &dyn Fn(f64, f64) -> f64,
) {
    let mut rng = Rng(5);
    for &dtype in dtypes {
        for &shape in SHAPES.iter().chain(EMPTY_SHAPES) {
            let vals = values(&mut rng, shape.iter().product(), dtype, kind);
            for lay in LAYS {
                let (x, logical) = build(&vals, shape, dtype, lay);
                for axis in 0..shape.len() {
                    for (reverse, inclusive) in
                        [(false, true), (true, true), (false, false), (true, false)]
                    {
                        let ax = if reverse {
                            axis as isize - shape.len() as isize
                        } else {
                            axis as isize
                        };
                        let what = format!(
                            "{name} {dtype} {shape:?} {lay:?} axis {ax} rev {reverse} incl {inclusive}"
                        );
                        let y = op(&x, ax, reverse, inclusive).unwrap();
                        assert_eq!(y.dtype(), out_dtype(dtype), "{what}");
                        assert_eq!(y.shape(), shape, "{what}");
                        let want = ref_scan(&logical, shape, axis, reverse, inclusive, init, f);
                        check(&f64s(&y), &want, tol(out_dtype(dtype)).max(1e-6), &what);
                    }
                }
            }
        }
    }
}

#[test]
fn cumsum_and_cumprod_match_reference() {
    scan_sweep(
        "cumsum",
        &DTYPES,
        Values::General,
        &|x, a, r, i| cumsum(x, a, r, i),
        &widened,
        0.0,
        &|a, b| a + b,
    );
    // cumprod keeps the type (as MLX); booleans multiply as logical and.
    scan_sweep(
        "cumprod",
        &DTYPES,
        Values::Products,
        &|x, a, r, i| cumprod(x, a, r, i),
        &|d| d,
        1.0,
        &|a, b| a * b,
    );
}

#[test]
fn cummax_and_cummin_match_reference() {
    // The exclusive scans start from the type's lowest or highest value; check the
    // inclusive ones against the reference and the exclusive ones' first element below.
    let lowest = |d: DType| match d {
        DType::U8 | DType::Bool => 0.0,
        DType::I32 => f64::from(i32::MIN),
        _ => f64::NEG_INFINITY,
    };
    let highest = |d: DType| match d {
        DType::U8 => 255.0,
        DType::Bool => 1.0,
        DType::I32 => f64::from(i32::MAX),
        _ => f64::INFINITY,
    };
    for dtype in DTYPES {
        scan_sweep(
            "cummax",
            &[dtype],
            Values::General,
            &|x, a, r, i| cummax(x, a, r, i),
            &|d| d,
            lowest(dtype),
            &f64::max,
        );
        scan_sweep(
            "cummin",
            &[dtype],
            Values::General,
            &|x, a, r, i| cummin(x, a, r, i),
            &|d| d,
            highest(dtype),
            &f64::min,
        );
    }
}

#[test]
fn logcumsumexp_matches_reference() {
    let log_add = |a: f64, b: f64| {
        let m = a.max(b);
        if m == f64::NEG_INFINITY {
            m
        } else {
            m + ((a - m).exp() + (b - m).exp()).ln()
        }
    };
    scan_sweep(
        "logcumsumexp",
        &FLOATISH,
        Values::General,
        &|x, a, r, i| logcumsumexp(x, a, r, i),
        &floated,
        f64::NEG_INFINITY,
        &log_add,
    );
}

// ---------------------------------------------------------------------------------------
// Special values.

#[test]
fn nan_propagates_through_max_and_min_and_infinities_are_ordered() {
    let (nan, inf) = (f32::NAN, f32::INFINITY);
    let x = Array::from_slice(&[1.0, nan, 3.0, -inf, 2.0, inf, 0.0, 5.0], &[2, 4]).unwrap();
    let mx = f64s(&max(&x, &[1], false).unwrap());
    assert!(mx[0].is_nan());
    assert_eq!(mx[1], f64::INFINITY);
    let mn = f64s(&min(&x, &[1], false).unwrap());
    assert!(mn[0].is_nan());
    assert_eq!(mn[1], 0.0);
    // Along the other axis, and with NaN last in its run.
    let mx0 = f64s(&max(&x, &[0], false).unwrap());
    assert!(mx0[1].is_nan());
    assert_eq!(mx0[3], 5.0);
    let long: Vec<f32> = (0..1000)
        .map(|i| if i == 999 { nan } else { i as f32 })
        .collect();
    let long = Array::from_slice(&long, &[1000]).unwrap();
    assert!(f64s(&max(&long, &[], false).unwrap())[0].is_nan());
    assert!(f64s(&min(&long, &[], false).unwrap())[0].is_nan());
    // Sums see infinities and NaN as IEEE arithmetic does.
    let s = f64s(&sum(&x, &[1], false).unwrap());
    assert!(s[0].is_nan());
    assert!(s[1].is_infinite() && s[1] > 0.0);
}

#[test]
fn logsumexp_handles_infinities_and_large_values() {
    let (nan, inf) = (f32::NAN, f32::INFINITY);
    let rows: [[f32; 3]; 6] = [
        [-inf, -inf, -inf],
        [1.0, inf, 2.0],
        [-inf, 0.0, -inf],
        [1.0, nan, 2.0],
        [1000.0, 1000.0, 1000.0],
        [-1000.0, -1000.0, -1001.0],
    ];
    let flat: Vec<f32> = rows.iter().flatten().copied().collect();
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        // f16 cannot hold ±1000 precisely enough for a tight check; its rows stay small.
        let x = Array::from_slice(&flat, &[6, 3])
            .unwrap()
            .astype(dtype)
            .unwrap();
        let y = f64s(&logsumexp(&x, &[1], false).unwrap());
        assert_eq!(y[0], f64::NEG_INFINITY, "{dtype}");
        assert_eq!(y[1], f64::INFINITY, "{dtype}");
        assert_eq!(y[2], 0.0, "{dtype}");
        assert!(y[3].is_nan(), "{dtype}");
        if dtype != DType::F16 {
            // Absolute error: the output's rounding at 1000.
            let eps = match dtype {
                DType::F64 => 1e-9,
                DType::F32 => 2e-4,
                _ => 8.0,
            };
            let want = 1000.0 + 3f64.ln();
            assert!((y[4] - want).abs() < eps, "{dtype} {}", y[4]);
            let want = -1000.0 + (2.0 + (-1f64).exp()).ln();
            assert!((y[5] - want).abs() < eps, "{dtype} {}", y[5]);
        }
        // The same rows through the general path (axis 0 of the transpose).
        let t = transpose(&x, &[1, 0]).unwrap();
        let z = f64s(&logsumexp(&t, &[0], true).unwrap());
        assert_eq!(z[..3], y[..3], "{dtype}");
    }
}

#[test]
fn softmax_is_stable_and_handles_infinities() {
    let (nan, inf) = (f32::NAN, f32::INFINITY);
    let x = Array::from_slice(
        &[
            1000.0, 1001.0, -inf, 999.0, -inf, -inf, -inf, -inf, 0.0, nan, 1.0, 2.0,
        ],
        &[3, 4],
    )
    .unwrap();
    let y = f64s(&softmax(&x, &[-1]).unwrap());
    let e = [(-1f64).exp(), 1.0, 0.0, (-2f64).exp()];
    let s: f64 = e.iter().sum();
    for j in 0..4 {
        assert!((y[j] - e[j] / s).abs() < 1e-6, "{j} {}", y[j]);
    }
    // A row of -∞ and a row holding NaN give NaN (as exp(x - max(x)) does).
    assert!(y[4..].iter().all(|v| v.is_nan()));
    let x = Array::from_slice(&[inf, 1.0], &[2]).unwrap();
    assert!(f64s(&softmax(&x, &[0]).unwrap()).iter().all(|v| v.is_nan()));
}

#[test]
fn half_sums_accumulate_in_float32() {
    // 5000 ones: a float16 running total would stop at 2048.
    let ones = Array::from_slice(&vec![1.0f32; 5000], &[5000]).unwrap();
    for dtype in [DType::F16, DType::BF16] {
        let x = ones.astype(dtype).unwrap();
        let want = if dtype == DType::F16 { 5000.0 } else { 4992.0 }; // bf16 rounds 5000
        assert_eq!(f64s(&sum(&x, &[], false).unwrap()), [want], "{dtype}");
        assert_eq!(
            f64s(&cumsum(&x, 0, false, true).unwrap())[4999],
            want,
            "{dtype}"
        );
        assert_eq!(f64s(&mean(&x, &[], false).unwrap()), [1.0], "{dtype}");
        let big = x.reshape(&[50, 100]).unwrap();
        let s = f64s(&sum(&big, &[0], false).unwrap());
        assert!(s.iter().all(|&v| v == 50.0), "{dtype}");
    }
    // A float16 mean whose sum would overflow float16 (65504).
    let x = Array::from_slice(&vec![1000.0f32; 100], &[100])
        .unwrap()
        .astype(DType::F16)
        .unwrap();
    assert_eq!(f64s(&mean(&x, &[], false).unwrap()), [1000.0]);
    assert_eq!(f64s(&var(&x, &[], false, 0).unwrap()), [0.0]);
}

#[test]
fn float32_sums_are_accurate() {
    // 2^20 copies of 0.1: a single running float32 total is off by about 1e-4 relative.
    let n = 1 << 20;
    let x = Array::from_slice(&vec![0.1f32; n], &[n]).unwrap();
    let want = f64::from(0.1f32) * n as f64;
    let got = f64s(&sum(&x, &[], false).unwrap())[0];
    assert!(((got - want) / want).abs() < 1e-6, "{got} vs {want}");
    let rows = x.reshape(&[4, n as isize / 4]).unwrap();
    for got in f64s(&sum(&rows, &[1], false).unwrap()) {
        assert!(((got - want / 4.0) / want).abs() < 1e-6, "{got}");
    }
}

// ---------------------------------------------------------------------------------------
// Large inputs: the parallel and blocked paths.

#[test]
fn large_reductions_match_reference() {
    let mut rng = Rng(17);
    // Rows split over the pool, one long row split in pieces, columns in tiles, a middle
    // axis, and several reduced axes at once (tested in release builds too: the vector
    // code differs from the debug build's).
    let cases: &[(&[usize], &[isize])] = &[
        (&[40, 3000], &[-1]),
        (&[200_000], &[]),
        (&[3, 70_000], &[]),
        (&[3000, 40], &[0]),
        (&[4, 5000, 3], &[1]),
        (&[7, 3000, 5], &[0, 2]),
        (&[70_000, 3], &[0]),
    ];
    for &(shape, axes) in cases {
        let n: usize = shape.iter().product();
        let vals = values(&mut rng, n, DType::F32, Values::General);
        for lay in LAYS {
            let (x, logical) = build(&vals, shape, DType::F32, lay);
            let ax = norm_axes(axes, shape.len());
            let what = format!("{shape:?} {axes:?} {lay:?}");
            let s = f64s(&sum(&x, axes, false).unwrap());
            check(
                &s,
                &ref_reduce(&logical, shape, &ax, 0.0, &|a, b| a + b),
                1e-6,
                &what,
            );
            let m = f64s(&max(&x, axes, false).unwrap());
            check(
                &m,
                &ref_reduce(&logical, shape, &ax, f64::NEG_INFINITY, &f64::max),
                0.0,
                &what,
            );
            let l = f64s(&logsumexp(&x, axes, false).unwrap());
            check(&l, &ref_lse(&logical, shape, &ax), 1e-6, &what);
            let y = f64s(&softmax(&x, axes).unwrap());
            check(&y, &ref_softmax(&logical, shape, &ax), 1e-6, &what);
            let last = shape.len() - 1;
            let a = f64s(&argmax(&x, last as isize, false).unwrap());
            check(&a, &ref_arg(&logical, shape, last, true), 0.0, &what);
            let c = f64s(&cumsum(&x, 0, false, true).unwrap());
            let want = ref_scan(&logical, shape, 0, false, true, 0.0, &|a, b| a + b);
            // Running sums of thousands of values: float32 rounding grows with the count.
            check(&c, &want, 1e-4, &what);
        }
    }
}

#[test]
fn softmax_writes_over_its_input_only_when_nobody_else_holds_it() {
    let vals: Vec<f32> = (0..4096).map(|i| (i % 7) as f32).collect();
    let want = ref_softmax(
        &vals.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(),
        &[64, 64],
        &[1],
    );
    for dtype in [DType::F32, DType::F64, DType::F16] {
        let x = Array::from_slice(&vals, &[64, 64])
            .unwrap()
            .astype(dtype)
            .unwrap();
        x.eval().unwrap();
        let before = f64s(&x);
        // `x` is still held here, so the kernel must not write over it.
        let y = softmax(&(&x * 1.0), &[1]).unwrap();
        check(&f64s(&y), &want, tol(dtype).max(1e-6), &dtype);
        assert_eq!(f64s(&x), before);
        let z = softmax(&x, &[1]).unwrap();
        check(&f64s(&z), &want, tol(dtype).max(1e-6), &dtype);
        assert_eq!(f64s(&x), before);
    }
}

// ---------------------------------------------------------------------------------------
// Types.

#[test]
fn output_types_follow_mlx() {
    use DType::*;
    let all_types = [
        Bool, U8, U16, U32, U64, I8, I16, I32, I64, F16, BF16, F32, F64,
    ];
    let x = Array::from_slice(&[1.0f64, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    for d in all_types {
        let a = x.astype(d).unwrap();
        let wide = match d {
            Bool | I8 | I16 => I32,
            U8 | U16 => U32,
            other => other,
        };
        let float = if d.is_float() { d } else { F32 };
        assert_eq!(sum(&a, &[0], false).unwrap().dtype(), wide, "sum {d}");
        assert_eq!(prod(&a, &[0], false).unwrap().dtype(), wide, "prod {d}");
        assert_eq!(
            cumsum(&a, 0, false, true).unwrap().dtype(),
            wide,
            "cumsum {d}"
        );
        assert_eq!(
            cumprod(&a, 0, false, true).unwrap().dtype(),
            d,
            "cumprod {d}"
        );
        assert_eq!(max(&a, &[0], false).unwrap().dtype(), d, "max {d}");
        assert_eq!(min(&a, &[], false).unwrap().dtype(), d, "min {d}");
        assert_eq!(cummax(&a, 1, false, true).unwrap().dtype(), d, "cummax {d}");
        assert_eq!(all(&a, &[0], false).unwrap().dtype(), Bool, "all {d}");
        assert_eq!(any(&a, &[0], false).unwrap().dtype(), Bool, "any {d}");
        assert_eq!(
            count_nonzero(&a, &[], false).unwrap().dtype(),
            I32,
            "count {d}"
        );
        assert_eq!(argmax(&a, 0, false).unwrap().dtype(), U32, "argmax {d}");
        assert_eq!(argmin(&a, 1, true).unwrap().dtype(), U32, "argmin {d}");
        assert_eq!(mean(&a, &[0], false).unwrap().dtype(), float, "mean {d}");
        assert_eq!(var(&a, &[0], false, 0).unwrap().dtype(), float, "var {d}");
        assert_eq!(std(&a, &[0], false, 1).unwrap().dtype(), float, "std {d}");
        assert_eq!(
            logsumexp(&a, &[0], false).unwrap().dtype(),
            float,
            "logsumexp {d}"
        );
        assert_eq!(softmax(&a, &[0]).unwrap().dtype(), float, "softmax {d}");
        assert_eq!(
            logcumsumexp(&a, 0, false, true).unwrap().dtype(),
            float,
            "lcse {d}"
        );
        // The values are right in every type too (1..4 fit everywhere).
        let want_sum = if d == Bool {
            vec![2.0, 2.0]
        } else {
            vec![4.0, 6.0]
        };
        assert_eq!(f64s(&sum(&a, &[0], false).unwrap()), want_sum, "sum {d}");
    }
    // Widened sums do not wrap where the input type would.
    let bytes = Array::from_slice(&[200u8, 100, 250], &[3]).unwrap();
    assert_eq!(sum(&bytes, &[], false).unwrap().item::<u32>().unwrap(), 550);
    let small = Array::from_slice(&[-100i8, -100, -100], &[3]).unwrap();
    assert_eq!(
        sum(&small, &[], false).unwrap().item::<i32>().unwrap(),
        -300
    );
    // Complex numbers sum, multiply and compare with zero.
    let c = Array::from_slice(&[1.0f32, 0.0, 2.0], &[3])
        .unwrap()
        .astype(C64)
        .unwrap();
    assert_eq!(sum(&c, &[], false).unwrap().dtype(), C64);
    assert!(!all(&c, &[], false).unwrap().item::<bool>().unwrap());
    assert!(any(&c, &[], false).unwrap().item::<bool>().unwrap());
}

#[test]
fn reductions_over_size_one_axes_and_scalars() {
    let s = Array::scalar(3.5f32);
    assert_eq!(sum(&s, &[], false).unwrap().item::<f32>().unwrap(), 3.5);
    assert_eq!(max(&s, &[], true).unwrap().shape(), [] as [usize; 0]);
    assert_eq!(f64s(&logsumexp(&s, &[], false).unwrap()), [3.5]);
    assert_eq!(f64s(&softmax(&s, &[]).unwrap()), [1.0]);
    let x = Array::from_slice(&[1i8, -2, 3], &[3, 1]).unwrap();
    let y = sum(&x, &[1], false).unwrap();
    assert_eq!((y.shape(), y.dtype()), (&[3usize][..], DType::I32));
    assert_eq!(y.to_vec::<i32>().unwrap(), [1, -2, 3]);
    assert_eq!(f64s(&logsumexp(&x, &[1], true).unwrap()), [1.0, -2.0, 3.0]);
    assert_eq!(f64s(&softmax(&x, &[1]).unwrap()), [1.0; 3]);
}

// ---------------------------------------------------------------------------------------
// Bad input: one test per kind.

fn is_invalid(r: Res, op: &str) {
    match r {
        Err(Error::InvalidArgument(msg)) => assert!(msg.starts_with(op), "{msg}"),
        Err(Error::AxisOutOfRange { op: o, .. }) => assert_eq!(o, op),
        Err(other) => panic!("{op}: unexpected error {other}"),
        Ok(_) => panic!("{op}: expected an error"),
    }
}

#[test]
fn axis_out_of_range_is_an_error() {
    let x = Array::from_slice(&[1.0f32; 6], &[2, 3]).unwrap();
    is_invalid(sum(&x, &[2], false), "sum");
    is_invalid(max(&x, &[-3], false), "max");
    is_invalid(mean(&x, &[5], false), "mean");
    is_invalid(var(&x, &[2], false, 0), "var");
    is_invalid(logsumexp(&x, &[-3], false), "logsumexp");
    is_invalid(softmax(&x, &[2]), "softmax");
    is_invalid(argmax(&x, 2, false), "argmax");
    is_invalid(argmin(&x, -3, false), "argmin");
    is_invalid(cumsum(&x, 2, false, true), "cumsum");
    is_invalid(logcumsumexp(&x, -3, false, true), "logcumsumexp");
    // A 0-D array has no axis to scan or arg-reduce.
    let s = Array::scalar(1.0f32);
    is_invalid(cumprod(&s, 0, false, true), "cumprod");
    is_invalid(argmax(&s, 0, false), "argmax");
}

#[test]
fn repeated_axes_are_an_error() {
    let x = Array::from_slice(&[1.0f32; 6], &[2, 3]).unwrap();
    is_invalid(sum(&x, &[1, 1], false), "sum");
    is_invalid(prod(&x, &[0, -2], false), "prod");
    is_invalid(all(&x, &[1, -1], false), "all");
    is_invalid(softmax(&x, &[0, -2]), "softmax");
    is_invalid(logsumexp(&x, &[1, -1], true), "logsumexp");
}

#[test]
fn reducing_nothing_without_an_identity_is_an_error() {
    let x = Array::from_slice::<f32>(&[], &[3, 0]).unwrap();
    is_invalid(max(&x, &[1], false), "max");
    is_invalid(min(&x, &[], false), "min");
    is_invalid(argmax(&x, 1, false), "argmax");
    is_invalid(argmin(&x, -1, true), "argmin");
    is_invalid(logsumexp(&x, &[1], false), "logsumexp");
    // Along the non-empty axis there is nothing to reduce per output, and no error.
    assert_eq!(max(&x, &[0], false).unwrap().shape(), [0]);
    assert_eq!(argmax(&x, 0, false).unwrap().shape(), [0]);
    // Sums, products, all and any have identities.
    assert_eq!(f64s(&sum(&x, &[1], false).unwrap()), [0.0; 3]);
    assert_eq!(f64s(&prod(&x, &[1], false).unwrap()), [1.0; 3]);
    assert_eq!(f64s(&all(&x, &[1], false).unwrap()), [1.0; 3]);
    assert_eq!(f64s(&any(&x, &[1], false).unwrap()), [0.0; 3]);
}

#[test]
fn unsupported_types_are_an_error() {
    let c = Array::from_slice(&[1.0f32, 2.0], &[2])
        .unwrap()
        .astype(DType::C64)
        .unwrap();
    for (name, r) in [
        ("max", max(&c, &[], false)),
        ("min", min(&c, &[], false)),
        ("argmax", argmax(&c, 0, false)),
        ("logsumexp", logsumexp(&c, &[], false)),
        ("softmax", softmax(&c, &[])),
        ("cummin", cummin(&c, 0, false, true)),
        ("logcumsumexp", logcumsumexp(&c, 0, false, true)),
    ] {
        match r {
            Err(Error::UnsupportedDType { op, dtype }) => {
                assert_eq!((op, dtype), (name, DType::C64));
            }
            other => panic!(
                "{name}: expected UnsupportedDType, got {:?}",
                other.map(|a| a.dtype())
            ),
        }
    }
}

#[test]
fn arrays_in_an_error_state_report_their_error() {
    let x = Array::from_slice(&[1.0f32; 4], &[4]).unwrap();
    let bad = &x + &Array::from_slice(&[1.0f32; 3], &[3]).unwrap();
    let want = bad.error().expect("the shapes do not broadcast");
    assert_eq!(sum(&bad, &[], false).err(), Some(want.clone()));
    assert_eq!(softmax(&bad, &[]).err(), Some(want.clone()));
    assert_eq!(argmax(&bad, 0, false).err(), Some(want.clone()));
    assert_eq!(cumsum(&bad, 0, false, true).err(), Some(want.clone()));
    assert_eq!(var(&bad, &[], false, 0).err(), Some(want));
}

#[test]
fn primitives_check_their_axes_when_recorded_directly() {
    use nuvec_core::Primitive;
    use nuvec_core::ops::ReduceOp;
    let x = Array::from_slice(&[1.0f32; 6], &[2, 3]).unwrap();
    let rec =
        |op, axes: Vec<usize>| Array::from_op(Primitive::Reduce { op, axes }, vec![x.clone()]);
    assert!(rec(ReduceOp::Sum, vec![1, 0]).is_err());
    assert!(rec(ReduceOp::Sum, vec![2]).is_err());
    assert!(rec(ReduceOp::LogSumExp, vec![0]).is_err());
    assert!(rec(ReduceOp::All, vec![0]).is_err()); // the primitive takes booleans
    assert!(rec(ReduceOp::Sum, vec![0, 1]).is_ok());
}

// ---------------------------------------------------------------------------------------
// Random shapes and axes.

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn sum_over_random_axes_matches_reference(
        shape in prop::collection::vec(0usize..5, 0..5),
        pick in prop::collection::vec(prop::bool::ANY, 5),
        keepdims in prop::bool::ANY,
        seed in prop::num::u64::ANY,
        layout in 0usize..3,
    ) {
        let n: usize = shape.iter().product();
        let mut rng = Rng(seed);
        // Integers: exact in every type tried, and their sums too.
        let vals = values(&mut rng, n, DType::I32, Values::General);
        let axes: Vec<isize> = (0..shape.len())
            .filter(|&i| pick[i])
            .map(|i| if seed % 2 == 0 { i as isize } else { i as isize - shape.len() as isize })
            .collect();
        let ax = norm_axes(&axes, shape.len());
        for dtype in [DType::F64, DType::F32, DType::I32] {
            let (x, logical) = build(&vals, &shape, dtype, LAYS[layout]);
            let y = sum(&x, &axes, keepdims).unwrap();
            prop_assert_eq!(y.shape(), &out_shape(&shape, &ax, keepdims)[..]);
            let want = ref_reduce(&logical, &shape, &ax, 0.0, &|a, b| a + b);
            prop_assert_eq!(f64s(&y), want);
        }
    }
}
