//! Reductions, arg-reductions, scans and their composites against float64 references
//! computed here by explicit loops, over contiguous, transposed, broadcast and
//! negative-step sliced inputs, empty arrays and several element types; plus special
//! values, type rules and bad input. This file holds the helpers; the tests are in its
//! modules.

mod arg_scan;
mod composite;
mod errors;
mod plain;
mod special;

use nuvec_core::{Array, DType, SliceArg, broadcast_to, slice, transpose};

type Res = nuvec_core::Result<Array>;

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
    /// Negative steps: every other element of axis 0 backwards, the last axis backwards
    /// from an offset.
    Sliced,
}

const LAYS: [Lay; 4] = [
    Lay::Contiguous,
    Lay::Transposed,
    Lay::Broadcast,
    Lay::Sliced,
];

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
        Lay::Sliced => {
            if n == 0 {
                return (typed(vals, shape), vals.to_vec());
            }
            // Stored: axis 0 twice as long (read backwards, every other element), the last
            // axis one longer (read backwards from its end down to index 1). The elements
            // skipped hold 7, which would show in any result that read them.
            let mut stored_shape = shape.to_vec();
            stored_shape[0] = 2 * shape[0];
            if n > 1 {
                stored_shape[n - 1] += 1;
            }
            let mut stored = vec![7.0; stored_shape.iter().product()];
            for (i, &v) in vals.iter().enumerate() {
                let mut idx = unravel(i, shape);
                idx[0] = 2 * shape[0] - 1 - 2 * idx[0];
                if n > 1 {
                    idx[n - 1] = shape[n - 1] - idx[n - 1];
                }
                stored[ravel(&idx, &stored_shape)] = v;
            }
            let mut args = vec![SliceArg::full(); n];
            args[0] = SliceArg::new(None, None, -2);
            if n > 1 {
                let last = shape[n - 1] as isize;
                args[n - 1] = SliceArg::new(Some(last), Some(0), -1);
            }
            let arr = slice(&typed(&stored, &stored_shape), &args).unwrap();
            assert_eq!(arr.shape(), shape);
            (arr, vals.to_vec())
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
        let o = out_index(i, shape, axes, &kept);
        out[o] = f(out[o], v);
    }
    out
}

/// The output position (in `kept`, the shape with `axes` kept as size 1) that element `i` of
/// `shape` is reduced into.
fn out_index(i: usize, shape: &[usize], axes: &[usize], kept: &[usize]) -> usize {
    let mut idx = unravel(i, shape);
    for &a in axes {
        idx[a] = 0;
    }
    ravel(&idx, kept)
}

/// Every element of `vals` along `axes`, grouped by output position.
fn groups(vals: &[f64], shape: &[usize], axes: &[usize]) -> Vec<Vec<f64>> {
    let kept = out_shape(shape, axes, true);
    let mut out = vec![Vec::new(); kept.iter().product()];
    for (i, &v) in vals.iter().enumerate() {
        out[out_index(i, shape, axes, &kept)].push(v);
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
type RefFn<'a> = dyn Fn(&[f64], &[usize], &[usize]) -> Vec<f64> + 'a;

/// One reduction against its reference over shapes, layouts, axes, keepdims and types.
struct Sweep<'a> {
    name: &'a str,
    dtypes: &'a [DType],
    kind: Values,
    op: &'a ReduceFn,
    out_dtype: &'a dyn Fn(DType) -> DType,
    reference: &'a RefFn<'a>,
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

/// Runs a reduction over every type of [`DTYPES`] against [`ref_reduce`] with `init` and `f`.
fn sweep_fold(
    name: &str,
    kind: Values,
    op: &ReduceFn,
    out_dtype: &dyn Fn(DType) -> DType,
    init: f64,
    f: &dyn Fn(f64, f64) -> f64,
    shapes: &[&[usize]],
) {
    Sweep {
        name,
        dtypes: &DTYPES,
        kind,
        op,
        out_dtype,
        reference: &|v, s, a| ref_reduce(v, s, a, init, f),
        shapes,
    }
    .run();
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

/// [`DTYPES`] but bool.
const FLOATISH: [DType; 6] = {
    let [a, b, c, d, e, f, DType::Bool] = DTYPES else {
        panic!("DTYPES ends with bool")
    };
    [a, b, c, d, e, f]
};

/// Runs a float reduction (`floated` output) over [`FLOATISH`], general values and the
/// non-empty shapes, against `reference`.
fn sweep_floats(name: &str, op: &ReduceFn, reference: &RefFn<'_>) {
    Sweep {
        name,
        dtypes: &FLOATISH,
        kind: Values::General,
        op,
        out_dtype: &floated,
        reference,
        shapes: SHAPES,
    }
    .run();
}

/// The softmax of `vals` over `axes` by explicit loops.
fn ref_softmax(vals: &[f64], shape: &[usize], axes: &[usize]) -> Vec<f64> {
    let kept = out_shape(shape, axes, true);
    let key = |i: usize| out_index(i, shape, axes, &kept);
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
