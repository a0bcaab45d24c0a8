//! Shape and layout operations against references computed here with explicit index math on
//! `Vec<f64>`, over contiguous, transposed, broadcast, sliced (negative steps) and empty
//! inputs of several element types.

use nuvec_core::{Array, DType, Error, SliceArg, broadcast_to, slice, transpose};

// ---------------------------------------------------------------------------------------------
// A reference n-d array: row-major f64 values and the index math on them.

#[derive(Clone, Debug, PartialEq)]
struct Nd {
    shape: Vec<usize>,
    data: Vec<f64>,
}

/// Every multi-index of `shape`, in row-major order.
fn indices(shape: &[usize]) -> Vec<Vec<usize>> {
    let n: usize = shape.iter().product();
    let mut out = Vec::with_capacity(n);
    for mut k in 0..n {
        let mut idx = vec![0; shape.len()];
        for d in (0..shape.len()).rev() {
            idx[d] = k % shape[d];
            k /= shape[d];
        }
        out.push(idx);
    }
    out
}

impl Nd {
    fn from_fn(shape: &[usize], mut f: impl FnMut(&[usize]) -> f64) -> Nd {
        let data = indices(shape).iter().map(|i| f(i)).collect();
        Nd {
            shape: shape.to_vec(),
            data,
        }
    }

    fn at(&self, idx: &[usize]) -> f64 {
        assert_eq!(idx.len(), self.shape.len());
        let mut k = 0;
        for (&i, &n) in idx.iter().zip(&self.shape) {
            assert!(i < n, "index {idx:?} outside {:?}", self.shape);
            k = k * n + i;
        }
        self.data[k]
    }
}

/// The value stored at position `k` of a test input: small integers, exact in every type used.
fn value(k: usize) -> f64 {
    ((k * 7 + 3) % 23) as f64 - 11.0
}

/// `v` as an element of `dtype` reads back (as f64).
fn cast(v: f64, dtype: DType) -> f64 {
    if dtype == DType::Bool {
        f64::from(u8::from(v != 0.0))
    } else {
        v
    }
}

const DTYPES: [DType; 4] = [DType::F32, DType::I32, DType::Bool, DType::F16];

/// An array of `dtype` holding `nd`'s values, and the reference of what it holds.
fn make(nd: &Nd, dtype: DType) -> (Array, Nd) {
    let a = Array::from_slice(&nd.data, &nd.shape)
        .unwrap()
        .astype(dtype)
        .unwrap();
    let r = Nd {
        shape: nd.shape.clone(),
        data: nd.data.iter().map(|&v| cast(v, dtype)).collect(),
    };
    (a, r)
}

/// The values of `a` as f64, checking its type.
fn values(a: &Array, dtype: DType) -> Vec<f64> {
    assert_eq!(a.dtype(), dtype);
    a.astype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

/// Checks `a` against the reference.
#[track_caller]
fn check(a: &Array, want: &Nd, dtype: DType, what: &str) {
    assert_eq!(a.shape(), want.shape, "{what}: shape");
    assert_eq!(values(a, dtype), want.data, "{what}: values");
}

/// Python's `range(dim)[start:stop:step]`, by brute force.
fn py_range(dim: usize, s: SliceArg) -> Vec<usize> {
    let n = dim as isize;
    let norm = |v: isize| if v < 0 { v + n } else { v };
    let mut out = Vec::new();
    if s.step > 0 {
        let start = s.start.map_or(0, |v| norm(v).clamp(0, n));
        let stop = s.stop.map_or(n, |v| norm(v).clamp(0, n));
        let mut i = start;
        while i < stop {
            out.push(i as usize);
            i += s.step;
        }
    } else {
        let start = s.start.map_or(n - 1, |v| norm(v).clamp(-1, n - 1));
        let stop = s.stop.map_or(-1, |v| norm(v).clamp(-1, n - 1));
        let mut i = start;
        while i > stop {
            out.push(i as usize);
            i += s.step;
        }
    }
    out
}

/// Reference slicing: the selected positions per axis, by brute force.
fn ref_slice(x: &Nd, args: &[SliceArg]) -> Nd {
    let picks: Vec<Vec<usize>> = x
        .shape
        .iter()
        .enumerate()
        .map(|(d, &n)| py_range(n, args.get(d).copied().unwrap_or(SliceArg::full())))
        .collect();
    let shape: Vec<usize> = picks.iter().map(Vec::len).collect();
    Nd::from_fn(&shape, |i| {
        let src: Vec<usize> = i.iter().enumerate().map(|(d, &k)| picks[d][k]).collect();
        x.at(&src)
    })
}

/// Reference transpose: output axis `d` is input axis `perm[d]`.
fn ref_transpose(x: &Nd, perm: &[usize]) -> Nd {
    let shape: Vec<usize> = perm.iter().map(|&p| x.shape[p]).collect();
    Nd::from_fn(&shape, |i| {
        let mut src = vec![0; perm.len()];
        for (d, &p) in perm.iter().enumerate() {
            src[p] = i[d];
        }
        x.at(&src)
    })
}

/// Test inputs of `dtype` whose logical shape is `shape` (3-D, the middle axis at least 2),
/// in every layout: contiguous, transposed, broadcast, sliced with negative steps.
fn layouts(shape: &[usize], dtype: DType) -> Vec<(&'static str, Array, Nd)> {
    assert_eq!(shape.len(), 3);
    let [a, b, c] = [shape[0], shape[1], shape[2]];
    let mut out = Vec::new();
    let base = Nd::from_fn(shape, |i| value(i[0] * b * c + i[1] * c + i[2]));
    let (x, r) = make(&base, dtype);
    out.push(("contiguous", x, r));
    // A [c, b, a] array transposed.
    let t = Nd::from_fn(&[c, b, a], |i| value(i[0] * 31 + i[1] * 5 + i[2]));
    let (x, r) = make(&t, dtype);
    out.push((
        "transposed",
        transpose(&x, &[2, 1, 0]).unwrap(),
        ref_transpose(&r, &[2, 1, 0]),
    ));
    // A [1, b, 1] array broadcast.
    let small = Nd::from_fn(&[1, b, 1], |i| value(i[1] + 4));
    let (x, r) = make(&small, dtype);
    out.push((
        "broadcast",
        broadcast_to(&x, shape).unwrap(),
        Nd::from_fn(shape, |i| r.at(&[0, i[1], 0])),
    ));
    // Every other element of a larger array, backwards on two axes.
    let big = Nd::from_fn(&[2 * a, b + 3, 2 * c], |i| {
        value(i[0] * 100 + i[1] * 10 + i[2])
    });
    let (x, r) = make(&big, dtype);
    let args = [
        SliceArg::new(None, None, -2),
        SliceArg::new(Some(1), Some(1 + b as isize), 1),
        SliceArg::new(Some(-1), None, -2),
    ];
    let sliced = ref_slice(&r, &args);
    assert_eq!(sliced.shape, shape);
    out.push(("sliced", slice(&x, &args).unwrap(), sliced));
    out
}

/// Every layout of `shape`, plus an empty input of shape `empty`, for every dtype.
fn cases(shape: &[usize], empty: &[usize]) -> Vec<(String, DType, Array, Nd)> {
    let mut out = Vec::new();
    for dtype in DTYPES {
        for (name, x, r) in layouts(shape, dtype) {
            out.push((format!("{name} {dtype}"), dtype, x, r));
        }
        let (x, r) = make(&Nd::from_fn(empty, |_| 0.0), dtype);
        out.push((format!("empty {dtype}"), dtype, x, r));
    }
    out
}

fn is_invalid<T: std::fmt::Debug>(r: nuvec_core::Result<T>, op: &str) {
    match r {
        Err(Error::InvalidArgument(msg)) => assert!(msg.starts_with(op), "{msg}"),
        Err(Error::AxisOutOfRange { op: o, .. }) | Err(Error::IncompatibleShapes { op: o, .. }) => {
            assert_eq!(o, op)
        }
        other => panic!("{op}: expected an error, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// slice

#[test]
fn slice_matches_index_formula() {
    let argsets: Vec<Vec<SliceArg>> = vec![
        vec![],
        vec![SliceArg::new(Some(1), None, 1)],
        vec![SliceArg::full(), SliceArg::new(None, None, -1)],
        vec![
            SliceArg::new(Some(-1), None, -1),
            SliceArg::new(Some(0), Some(3), 2),
            SliceArg::new(Some(3), Some(0), -2),
        ],
        vec![SliceArg::index(-1), SliceArg::index(1), SliceArg::full()],
        vec![
            SliceArg::new(Some(5), Some(100), 1),
            SliceArg::new(Some(-100), Some(2), 3),
        ],
        vec![SliceArg::full(), SliceArg::new(Some(2), Some(2), 1)],
        vec![SliceArg::new(Some(2), Some(0), 1)],
    ];
    for (name, dtype, x, r) in cases(&[3, 4, 5], &[3, 0, 5]) {
        for args in &argsets {
            let got = slice(&x, args).unwrap();
            check(
                &got,
                &ref_slice(&r, args),
                dtype,
                &format!("{name} {args:?}"),
            );
        }
    }
}

#[test]
fn slice_of_slice_composes() {
    let base = Nd::from_fn(&[9, 8], |i| value(i[0] * 8 + i[1]));
    let (x, r) = make(&base, DType::I32);
    let a1 = [
        SliceArg::new(Some(-2), None, -3),
        SliceArg::new(Some(1), None, 2),
    ];
    let a2 = [
        SliceArg::new(None, None, -1),
        SliceArg::new(Some(-1), Some(0), -2),
    ];
    let got = slice(&slice(&x, &a1).unwrap(), &a2).unwrap();
    check(
        &got,
        &ref_slice(&ref_slice(&r, &a1), &a2),
        DType::I32,
        "twice",
    );
    // 0-D: no arguments is the array itself.
    let s = Array::scalar(7i32);
    assert_eq!(slice(&s, &[]).unwrap().to_vec::<i32>().unwrap(), [7]);
}

#[test]
fn slice_rejects_bad_input() {
    let x = Array::from_slice(&[1.0f32; 6], &[2, 3]).unwrap();
    // More arguments than axes.
    is_invalid(slice(&x, &[SliceArg::full(); 3]), "slice");
    // A zero step.
    is_invalid(slice(&x, &[SliceArg::new(None, None, 0)]), "slice");
}
