//! Shape operations built from the shape primitives: stacking, flattening, axis moves, flips,
//! rolls, tiling, repeats and diagonal matrices. Views where the primitives allow.

use super::{concatenate, diagonal, pad, reshape, slice, split, split_at, squeeze, transpose};
use crate::error::invalid;
use crate::ops::{broadcast_to, check_errors, expand_dims, normalize_axes, normalize_axis};
use crate::{Array, Error, Result, SliceArg};

/// A shape as the signed entries [`reshape`] takes.
fn signed(shape: &[usize]) -> Vec<isize> {
    shape.iter().map(|&d| d as isize).collect()
}

/// The number of elements of `shape`, or an error naming `op` when it overflows.
fn checked_size(op: &'static str, shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= isize::MAX as usize)
        .ok_or_else(|| invalid(op, format!("shape {shape:?} is too large")))
}

/// The arrays, all of one shape, joined along a new axis `axis` (counted in the result's
/// axes). Their types are promoted as [`concatenate`] does.
///
/// ```
/// use nuvec_core::{Array, stack};
///
/// let a = Array::from_slice(&[1i32, 2], &[2]).unwrap();
/// let b = Array::from_slice(&[3i32, 4], &[2]).unwrap();
/// let s = stack(&[a, b], 1).unwrap();
/// assert_eq!(s.shape(), [2, 2]);
/// assert_eq!(s.to_vec::<i32>().unwrap(), [1, 3, 2, 4]);
/// ```
pub fn stack(arrays: &[Array], axis: isize) -> Result<Array> {
    let op = "stack";
    check_errors(&arrays.iter().collect::<Vec<_>>())?;
    let Some(first) = arrays.first() else {
        return Err(invalid(op, "no arrays to stack"));
    };
    if let Some(other) = arrays.iter().find(|a| a.shape() != first.shape()) {
        return Err(Error::IncompatibleShapes {
            op,
            lhs: first.shape().to_vec(),
            rhs: other.shape().to_vec(),
        });
    }
    let axis = normalize_axis(op, axis, first.ndim() + 1)?;
    let expanded = arrays
        .iter()
        .map(|a| expand_dims(a, axis as isize))
        .collect::<Result<Vec<_>>>()?;
    concatenate(&expanded, axis as isize)
}

/// The slices of `a` along `axis`, that axis removed (views): the inverse of [`stack`].
///
/// ```
/// use nuvec_core::{Array, unstack};
///
/// let a = Array::from_slice(&[1i32, 2, 3, 4], &[2, 2]).unwrap();
/// let cols = unstack(&a, 1).unwrap();
/// assert_eq!(cols[0].to_vec::<i32>().unwrap(), [1, 3]);
/// ```
pub fn unstack(a: &Array, axis: isize) -> Result<Vec<Array>> {
    check_errors(&[a])?;
    let ax = normalize_axis("unstack", axis, a.ndim())?;
    let n = a.shape()[ax];
    if n == 0 {
        return Ok(Vec::new());
    }
    split(a, n, ax as isize)?
        .iter()
        .map(|part| squeeze(part, &[ax as isize]))
        .collect()
}

/// `a` with axes `start_axis..=end_axis` merged into one (MLX's rules: the bounds are
/// clamped to the array's axes; a 0-D array becomes 1-D). A view when the layout allows.
///
/// ```
/// use nuvec_core::{Array, flatten};
///
/// let a = Array::from_slice(&[0i32; 24], &[2, 3, 4]).unwrap();
/// assert_eq!(flatten(&a, 1, -1).unwrap().shape(), [2, 12]);
/// assert_eq!(flatten(&a, 0, -1).unwrap().shape(), [24]);
/// ```
pub fn flatten(a: &Array, start_axis: isize, end_axis: isize) -> Result<Array> {
    let op = "flatten";
    check_errors(&[a])?;
    let n = a.ndim() as isize;
    if n == 0 {
        return reshape(a, &[1]);
    }
    let start = if start_axis < 0 {
        start_axis + n
    } else {
        start_axis
    }
    .max(0);
    let end = if end_axis < 0 { end_axis + n } else { end_axis }.min(n - 1);
    if start >= n {
        return Err(Error::AxisOutOfRange {
            op,
            axis: start_axis,
            ndim: a.ndim(),
        });
    }
    if end < 0 {
        return Err(Error::AxisOutOfRange {
            op,
            axis: end_axis,
            ndim: a.ndim(),
        });
    }
    if end < start {
        return Err(invalid(
            op,
            format!("start_axis {start_axis} comes after end_axis {end_axis}"),
        ));
    }
    let (start, end) = (start as usize, end as usize);
    let mut shape = signed(&a.shape()[..start]);
    shape.push(a.shape()[start..=end].iter().product::<usize>() as isize);
    shape.extend(signed(&a.shape()[end + 1..]));
    reshape(a, &shape)
}

/// `a` with axis `axis` split into the axes `shape` (one entry may be `-1`, inferred). A
/// view when the layout allows.
///
/// ```
/// use nuvec_core::{Array, unflatten};
///
/// let a = Array::from_slice(&[0i32; 24], &[2, 12]).unwrap();
/// assert_eq!(unflatten(&a, 1, &[3, -1]).unwrap().shape(), [2, 3, 4]);
/// ```
pub fn unflatten(a: &Array, axis: isize, shape: &[isize]) -> Result<Array> {
    let op = "unflatten";
    check_errors(&[a])?;
    let ax = normalize_axis(op, axis, a.ndim())?;
    if shape.is_empty() {
        return Err(invalid(op, "the new shape is empty"));
    }
    let dim = a.shape()[ax];
    let mut infer = None;
    let mut known = 1usize;
    for (i, &d) in shape.iter().enumerate() {
        match d {
            -1 if infer.is_none() => infer = Some(i),
            d if d >= 0 => known = known.saturating_mul(d as usize),
            _ => return Err(invalid(op, format!("invalid shape {shape:?}"))),
        }
    }
    let mut parts = shape.to_vec();
    if let Some(i) = infer {
        parts[i] = dim.checked_div(known).unwrap_or(0) as isize;
        known = known.saturating_mul(parts[i] as usize);
    }
    if known != dim {
        return Err(invalid(
            op,
            format!("axis {axis} of size {dim} does not split into {shape:?}"),
        ));
    }
    let mut out = signed(&a.shape()[..ax]);
    out.extend(parts);
    out.extend(signed(&a.shape()[ax + 1..]));
    reshape(a, &out)
}

/// `a` with two axes exchanged. A view.
///
/// ```
/// use nuvec_core::{Array, swapaxes};
///
/// let a = Array::from_slice(&[0i32; 24], &[2, 3, 4]).unwrap();
/// assert_eq!(swapaxes(&a, 0, -1).unwrap().shape(), [4, 3, 2]);
/// ```
pub fn swapaxes(a: &Array, axis1: isize, axis2: isize) -> Result<Array> {
    check_errors(&[a])?;
    let a1 = normalize_axis("swapaxes", axis1, a.ndim())?;
    let a2 = normalize_axis("swapaxes", axis2, a.ndim())?;
    let mut perm: Vec<usize> = (0..a.ndim()).collect();
    perm.swap(a1, a2);
    transpose(a, &perm)
}

/// `a` with axis `source` moved to position `destination`, the others keeping their order.
/// A view.
///
/// ```
/// use nuvec_core::{Array, moveaxis};
///
/// let a = Array::from_slice(&[0i32; 24], &[2, 3, 4]).unwrap();
/// assert_eq!(moveaxis(&a, 0, -1).unwrap().shape(), [3, 4, 2]);
/// ```
pub fn moveaxis(a: &Array, source: isize, destination: isize) -> Result<Array> {
    check_errors(&[a])?;
    let src = normalize_axis("moveaxis", source, a.ndim())?;
    let dst = normalize_axis("moveaxis", destination, a.ndim())?;
    let mut perm: Vec<usize> = (0..a.ndim()).filter(|&d| d != src).collect();
    perm.insert(dst, src);
    transpose(a, &perm)
}

/// `a` with at least one axis: a 0-D array becomes shape `[1]`. A view.
///
/// ```
/// use nuvec_core::{Array, atleast_1d};
///
/// assert_eq!(atleast_1d(&Array::scalar(1i32)).unwrap().shape(), [1]);
/// ```
pub fn atleast_1d(a: &Array) -> Result<Array> {
    check_errors(&[a])?;
    match a.ndim() {
        0 => reshape(a, &[1]),
        _ => Ok(a.clone()),
    }
}

/// `a` with at least two axes: `[]` becomes `[1, 1]` and `[n]` becomes `[1, n]`. A view.
///
/// ```
/// use nuvec_core::{Array, atleast_2d};
///
/// let a = Array::from_slice(&[1i32, 2], &[2]).unwrap();
/// assert_eq!(atleast_2d(&a).unwrap().shape(), [1, 2]);
/// ```
pub fn atleast_2d(a: &Array) -> Result<Array> {
    check_errors(&[a])?;
    match a.ndim() {
        0 => reshape(a, &[1, 1]),
        1 => reshape(a, &[1, a.shape()[0] as isize]),
        _ => Ok(a.clone()),
    }
}

/// `a` with at least three axes: `[]` becomes `[1, 1, 1]`, `[n]` becomes `[1, n, 1]` and
/// `[m, n]` becomes `[m, n, 1]`. A view.
///
/// ```
/// use nuvec_core::{Array, atleast_3d};
///
/// let a = Array::from_slice(&[1i32, 2], &[2]).unwrap();
/// assert_eq!(atleast_3d(&a).unwrap().shape(), [1, 2, 1]);
/// ```
pub fn atleast_3d(a: &Array) -> Result<Array> {
    check_errors(&[a])?;
    let s = signed(a.shape());
    match a.ndim() {
        0 => reshape(a, &[1, 1, 1]),
        1 => reshape(a, &[1, s[0], 1]),
        2 => reshape(a, &[s[0], s[1], 1]),
        _ => Ok(a.clone()),
    }
}

/// `a` reversed along `axes` (every axis when `axes` is empty). A view with negative
/// strides.
///
/// ```
/// use nuvec_core::{Array, flip};
///
/// let a = Array::from_slice(&[0i32, 1, 2, 3, 4, 5], &[2, 3]).unwrap();
/// assert_eq!(flip(&a, &[1]).unwrap().to_vec::<i32>().unwrap(), [2, 1, 0, 5, 4, 3]);
/// assert_eq!(flip(&a, &[]).unwrap().to_vec::<i32>().unwrap(), [5, 4, 3, 2, 1, 0]);
/// ```
pub fn flip(a: &Array, axes: &[isize]) -> Result<Array> {
    check_errors(&[a])?;
    let axes = if axes.is_empty() {
        (0..a.ndim()).collect()
    } else {
        normalize_axes("flip", axes, a.ndim())?
    };
    let args: Vec<SliceArg> = (0..a.ndim())
        .map(|d| {
            if axes.contains(&d) {
                SliceArg::new(None, None, -1)
            } else {
                SliceArg::full()
            }
        })
        .collect();
    slice(a, &args)
}

/// `a` with its elements shifted `shift` places along `axis` (forward when positive),
/// those that fall off one end coming back at the other; with no axis, along the flattened
/// array (the shape is kept). A copy.
///
/// ```
/// use nuvec_core::{Array, roll};
///
/// let a = Array::from_slice(&[0i32, 1, 2, 3, 4, 5], &[2, 3]).unwrap();
/// assert_eq!(roll(&a, 1, Some(1)).unwrap().to_vec::<i32>().unwrap(), [2, 0, 1, 5, 3, 4]);
/// assert_eq!(roll(&a, -1, None).unwrap().to_vec::<i32>().unwrap(), [1, 2, 3, 4, 5, 0]);
/// ```
pub fn roll(a: &Array, shift: isize, axis: Option<isize>) -> Result<Array> {
    check_errors(&[a])?;
    let Some(axis) = axis else {
        let flat = flatten(a, 0, -1)?;
        return reshape(&roll(&flat, shift, Some(0))?, &signed(a.shape()));
    };
    let ax = normalize_axis("roll", axis, a.ndim())?;
    let n = a.shape()[ax] as i128;
    if n == 0 {
        return Ok(a.clone());
    }
    // The old position of the new first element.
    let cut = (-(shift as i128)).rem_euclid(n) as usize;
    if cut == 0 {
        return Ok(a.clone());
    }
    let parts = split_at(a, &[cut], ax as isize)?;
    concatenate(&[parts[1].clone(), parts[0].clone()], ax as isize)
}

/// `a` repeated `reps[i]` times along each axis (NumPy's `tile`: `reps` and the shape are
/// padded with leading ones to the same length).
///
/// ```
/// use nuvec_core::{Array, tile};
///
/// let a = Array::from_slice(&[1i32, 2], &[2]).unwrap();
/// let t = tile(&a, &[2, 2]).unwrap();
/// assert_eq!(t.shape(), [2, 4]);
/// assert_eq!(t.to_vec::<i32>().unwrap(), [1, 2, 1, 2, 1, 2, 1, 2]);
/// ```
pub fn tile(a: &Array, reps: &[usize]) -> Result<Array> {
    check_errors(&[a])?;
    let nd = a.ndim().max(reps.len());
    let mut shape = vec![1usize; nd - a.ndim()];
    shape.extend_from_slice(a.shape());
    let mut all_reps = vec![1usize; nd - reps.len()];
    all_reps.extend_from_slice(reps);
    let (mut expand, mut broad, mut fin) = (Vec::new(), Vec::new(), Vec::new());
    for (&n, &r) in shape.iter().zip(&all_reps) {
        if r != 1 {
            expand.push(1);
            broad.push(r);
        }
        expand.push(n);
        broad.push(n);
        fin.push(
            n.checked_mul(r)
                .ok_or_else(|| invalid("tile", "the result is too large"))?,
        );
    }
    checked_size("tile", &fin)?;
    let x = reshape(a, &signed(&expand))?;
    let x = broadcast_to(&x, &broad)?;
    reshape(&x, &signed(&fin))
}

/// Each element of `a` repeated `repeats` times in a row along `axis`; with no axis, along
/// the flattened array.
///
/// ```
/// use nuvec_core::{Array, repeat};
///
/// let a = Array::from_slice(&[1i32, 2, 3, 4], &[2, 2]).unwrap();
/// assert_eq!(repeat(&a, 2, Some(1)).unwrap().to_vec::<i32>().unwrap(), [1, 1, 2, 2, 3, 3, 4, 4]);
/// assert_eq!(repeat(&a, 2, None).unwrap().shape(), [8]);
/// ```
pub fn repeat(a: &Array, repeats: usize, axis: Option<isize>) -> Result<Array> {
    check_errors(&[a])?;
    let Some(axis) = axis else {
        return repeat(&flatten(a, 0, -1)?, repeats, Some(0));
    };
    let ax = normalize_axis("repeat", axis, a.ndim())?;
    let mut shape = a.shape().to_vec();
    shape.insert(ax + 1, repeats);
    checked_size("repeat", &shape)?;
    let x = broadcast_to(&expand_dims(a, ax as isize + 1)?, &shape)?;
    shape.remove(ax + 1);
    shape[ax] *= repeats;
    reshape(&x, &signed(&shape))
}

/// For a 1-D `a`: the square matrix with `a` on diagonal `k` (above the main one when
/// positive) and zeros elsewhere. For a 2-D `a`: its diagonal `k` (see [`diagonal`]).
///
/// ```
/// use nuvec_core::{Array, diag};
///
/// let v = Array::from_slice(&[1i32, 2], &[2]).unwrap();
/// assert_eq!(diag(&v, 1).unwrap().to_vec::<i32>().unwrap(), [0, 1, 0, 0, 0, 2, 0, 0, 0]);
/// ```
pub fn diag(a: &Array, k: isize) -> Result<Array> {
    check_errors(&[a])?;
    match a.ndim() {
        1 => {
            let n = a.shape()[0];
            let m = n
                .checked_add(k.unsigned_abs())
                .ok_or_else(|| invalid("diag", "the result is too large"))?;
            checked_size("diag", &[m, m])?;
            // Row i of [n, n + 1] is a[i] then zeros: read as n × n, a is on the diagonal.
            let rows = pad(&reshape(a, &[n as isize, 1])?, &[(0, 0), (0, n)], 0)?;
            let flat = reshape(&rows, &[-1])?;
            let square = slice(&flat, &[SliceArg::new(Some(0), Some((n * n) as isize), 1)])?;
            let square = reshape(&square, &[n as isize, n as isize])?;
            let shift = k.unsigned_abs();
            match k {
                0 => Ok(square),
                k if k > 0 => pad(&square, &[(0, shift), (shift, 0)], 0),
                _ => pad(&square, &[(shift, 0), (0, shift)], 0),
            }
        }
        2 => diagonal(a, k, 0, 1),
        n => Err(invalid(
            "diag",
            format!("needs a 1-D or 2-D array, not {n} dimensions"),
        )),
    }
}
