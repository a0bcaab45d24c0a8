//! Shared by the shape tests: a reference n-d array (row-major `Vec<f64>`) with the index
//! math of each view, and test inputs in every layout.

#![allow(dead_code)]

use nuvec_core::{Array, DType, Error, SliceArg, broadcast_to, slice, squeeze, transpose};

// ---------------------------------------------------------------------------------------------
// A reference n-d array: row-major f64 values and the index math on them.

#[derive(Clone, Debug, PartialEq)]
pub struct Nd {
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}

/// Every multi-index of `shape`, in row-major order.
pub fn indices(shape: &[usize]) -> Vec<Vec<usize>> {
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
    pub fn from_fn(shape: &[usize], mut f: impl FnMut(&[usize]) -> f64) -> Nd {
        let data = indices(shape).iter().map(|i| f(i)).collect();
        Nd {
            shape: shape.to_vec(),
            data,
        }
    }

    pub fn at(&self, idx: &[usize]) -> f64 {
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
pub fn value(k: usize) -> f64 {
    ((k * 7 + 3) % 23) as f64 - 11.0
}

/// `v` as an element of `dtype` reads back (as f64).
pub fn cast(v: f64, dtype: DType) -> f64 {
    if dtype == DType::Bool {
        f64::from(u8::from(v != 0.0))
    } else {
        v
    }
}

pub const DTYPES: [DType; 4] = [DType::F32, DType::I32, DType::Bool, DType::F16];

/// An array of `dtype` holding `nd`'s values, and the reference of what it holds.
pub fn make(nd: &Nd, dtype: DType) -> (Array, Nd) {
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
pub fn values(a: &Array, dtype: DType) -> Vec<f64> {
    assert_eq!(a.dtype(), dtype);
    a.astype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

/// Checks `a` against the reference.
#[track_caller]
pub fn check(a: &Array, want: &Nd, dtype: DType, what: &str) {
    assert_eq!(a.shape(), want.shape, "{what}: shape");
    assert_eq!(values(a, dtype), want.data, "{what}: values");
}

/// Python's `range(dim)[start:stop:step]`, by brute force.
pub fn py_range(dim: usize, s: SliceArg) -> Vec<usize> {
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
pub fn ref_slice(x: &Nd, args: &[SliceArg]) -> Nd {
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
pub fn ref_transpose(x: &Nd, perm: &[usize]) -> Nd {
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
pub fn layouts(shape: &[usize], dtype: DType) -> Vec<(&'static str, Array, Nd)> {
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
pub fn cases(shape: &[usize], empty: &[usize]) -> Vec<(String, DType, Array, Nd)> {
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

pub fn is_invalid<T: std::fmt::Debug>(r: nuvec_core::Result<T>, op: &str) {
    match r {
        Err(Error::InvalidArgument(msg)) => assert!(msg.starts_with(op), "{msg}"),
        Err(Error::AxisOutOfRange { op: o, .. }) | Err(Error::IncompatibleShapes { op: o, .. }) => {
            assert_eq!(o, op)
        }
        other => panic!("{op}: expected an error, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// More references.

/// `x` with `f(output index)` giving the input index to read.
pub fn remap(x: &Nd, shape: &[usize], f: impl Fn(&[usize]) -> Vec<usize>) -> Nd {
    Nd::from_fn(shape, |i| x.at(&f(i)))
}

/// The same values with another shape (row-major order kept).
pub fn with_shape(x: &Nd, shape: &[usize]) -> Nd {
    assert_eq!(shape.iter().product::<usize>(), x.data.len());
    Nd {
        shape: shape.to_vec(),
        data: x.data.clone(),
    }
}

pub fn ref_concat(parts: &[Nd], axis: usize) -> Nd {
    let mut shape = parts[0].shape.clone();
    shape[axis] = parts.iter().map(|p| p.shape[axis]).sum();
    Nd::from_fn(&shape, |i| {
        let mut k = i[axis];
        for p in parts {
            if k < p.shape[axis] {
                let mut j = i.to_vec();
                j[axis] = k;
                return p.at(&j);
            }
            k -= p.shape[axis];
        }
        unreachable!()
    })
}

/// Input 3-D cases reduced to 2-D (`[:, :, 1]`) and 1-D (`[1, :, 1]`) views.
pub fn lower(x: &Array, r: &Nd, dims: usize) -> (Array, Nd) {
    let mut args = vec![SliceArg::full(); 3];
    args[2] = SliceArg::index(1);
    if dims == 1 {
        args[0] = SliceArg::index(1);
    }
    let axes: Vec<isize> = if dims == 1 { vec![0, 2] } else { vec![2] };
    let y = squeeze(&slice(x, &args).unwrap(), &axes).unwrap();
    let s = ref_slice(r, &args);
    let shape: Vec<usize> = s
        .shape
        .iter()
        .enumerate()
        .filter(|(d, _)| !axes.contains(&(*d as isize)))
        .map(|(_, &n)| n)
        .collect();
    (y, with_shape(&s, &shape))
}
