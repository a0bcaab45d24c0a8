//! Sorting along an axis: `sort`, `argsort`, `partition`, `argpartition`, `topk` and
//! `searchsorted`.
//!
//! The order is NumPy's: ascending, stable (equal elements keep their order), NaN after
//! everything else, `-0.0` equal to `0.0`, `false` before `true`, and complex numbers
//! lexicographic (real part, then imaginary part, each with NaN last). Every element type can
//! be sorted. Indices are `u32`, as MLX's.
//!
//! ```
//! use nuvec_core::{Array, argsort, sort};
//!
//! let a = Array::from_slice(&[3.0f32, f32::NAN, 1.0, 2.0], &[4]).unwrap();
//! let s = sort(&a, Some(-1)).unwrap().to_vec::<f32>().unwrap();
//! assert_eq!(s[..3], [1.0, 2.0, 3.0]);
//! assert!(s[3].is_nan());
//! assert_eq!(argsort(&a, None).unwrap().to_vec::<u32>().unwrap(), [2, 3, 0, 1]);
//! ```

use crate::error::invalid;
use crate::ops::SliceArg;
use crate::ops::{check_errors, expect_inputs, normalize_axis};
use crate::primitive::{OutputSpec, Primitive};
use crate::{Array, DType, Result};

/// The sorting primitives. `Sort` and `Partition` have two outputs: the values and their
/// `u32` indices along the axis.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SortOp {
    /// Each lane along `axis` sorted (stable, NaN last).
    Sort {
        /// The axis (non-negative).
        axis: usize,
    },
    /// Each lane along `axis` rearranged so that position `kth` holds the element a sort
    /// would put there, smaller (or equal, earlier) elements before it and the rest after.
    Partition {
        /// The position (non-negative, below the axis' size).
        kth: usize,
        /// The axis (non-negative).
        axis: usize,
    },
    /// For each element of the second input, where it would be inserted in the first (1-D,
    /// sorted) to keep it sorted: before equal elements, or after them when `right`. One `u32`
    /// output shaped as the second input.
    SearchSorted {
        /// Insert after equal elements.
        right: bool,
    },
}

impl SortOp {
    /// The primitive's name.
    pub fn name(&self) -> &'static str {
        match self {
            SortOp::Sort { .. } => "sort",
            SortOp::Partition { .. } => "partition",
            SortOp::SearchSorted { .. } => "searchsorted",
        }
    }

    /// The outputs' shapes and types.
    pub fn output_specs(&self, inputs: &[Array]) -> Result<Vec<OutputSpec>> {
        let op = self.name();
        match *self {
            SortOp::Sort { axis } | SortOp::Partition { axis, .. } => {
                expect_inputs(op, inputs, 1)?;
                let x = &inputs[0];
                check_lane(op, x, axis)?;
                if let SortOp::Partition { kth, .. } = *self
                    && kth >= x.shape()[axis]
                {
                    return Err(invalid(
                        op,
                        format!(
                            "kth {kth} is out of range for axis {axis} of {:?}",
                            x.shape()
                        ),
                    ));
                }
                let shape = x.shape().to_vec();
                Ok(vec![(shape.clone(), x.dtype()), (shape, DType::U32)])
            }
            SortOp::SearchSorted { .. } => {
                expect_inputs(op, inputs, 2)?;
                let (a, v) = (&inputs[0], &inputs[1]);
                check_sorted_input(op, a)?;
                if a.dtype() != v.dtype() {
                    return Err(invalid(
                        op,
                        format!("the inputs differ in type: {} and {}", a.dtype(), v.dtype()),
                    ));
                }
                Ok(vec![(v.shape().to_vec(), DType::U32)])
            }
        }
    }
}

/// Checks that `axis` exists and that indices along it fit in `u32`.
fn check_lane(op: &'static str, x: &Array, axis: usize) -> Result<()> {
    if axis >= x.ndim() {
        return Err(crate::Error::AxisOutOfRange {
            op,
            axis: axis as isize,
            ndim: x.ndim(),
        });
    }
    if x.shape()[axis] > u32::MAX as usize {
        return Err(invalid(
            op,
            format!(
                "axis {axis} has {} elements; u32 indices reach {}",
                x.shape()[axis],
                u32::MAX
            ),
        ));
    }
    Ok(())
}

/// Checks the sorted array of `searchsorted`: 1-D, with indices that fit in `u32`.
fn check_sorted_input(op: &'static str, a: &Array) -> Result<()> {
    if a.ndim() != 1 {
        return Err(invalid(
            op,
            format!("the sorted array must be 1-D, got shape {:?}", a.shape()),
        ));
    }
    if a.size() > u32::MAX as usize {
        return Err(invalid(
            op,
            format!("{} elements do not fit u32 indices", a.size()),
        ));
    }
    Ok(())
}

/// `a` and the axis to work along: the flattened array and axis 0 when `axis` is `None`.
fn lane_input(op: &'static str, a: &Array, axis: Option<isize>) -> Result<(Array, usize)> {
    check_errors(&[a])?;
    match axis {
        None => Ok((crate::ops::reshape(a, &[-1])?, 0)),
        Some(axis) => {
            let axis = normalize_axis(op, axis, a.ndim())?;
            check_lane(op, a, axis)?;
            Ok((a.clone(), axis))
        }
    }
}

/// Records a two-output sorting node and returns (values, indices).
fn two_outputs(op: SortOp, a: Array) -> Result<(Array, Array)> {
    let mut out = Array::from_op(Primitive::Sort(op), vec![a])?;
    let indices = out.pop().expect("sorting nodes have two outputs");
    let values = out.pop().expect("sorting nodes have two outputs");
    Ok((values, indices))
}

/// The elements of `a` sorted along `axis` and, for each, its index along that axis in `a`
/// (`u32`). `None` sorts the flattened array. Stable; NaN sorts last.
///
/// ```
/// use nuvec_core::{Array, sort_with_indices};
///
/// let a = Array::from_slice(&[2i32, 1, 2, 0], &[2, 2]).unwrap();
/// let (values, indices) = sort_with_indices(&a, Some(0)).unwrap();
/// assert_eq!(values.to_vec::<i32>().unwrap(), [2, 0, 2, 1]);
/// assert_eq!(indices.to_vec::<u32>().unwrap(), [0, 1, 1, 0]);
/// ```
pub fn sort_with_indices(a: &Array, axis: Option<isize>) -> Result<(Array, Array)> {
    let (x, axis) = lane_input("sort", a, axis)?;
    two_outputs(SortOp::Sort { axis }, x)
}

/// The elements of `a` sorted along `axis` (`None`: the flattened array), ascending, NaN last.
///
/// ```
/// use nuvec_core::{Array, sort};
///
/// let a = Array::from_slice(&[3u8, 1, 2, 9, 8, 7], &[2, 3]).unwrap();
/// assert_eq!(sort(&a, Some(-1)).unwrap().to_vec::<u8>().unwrap(), [1, 2, 3, 7, 8, 9]);
/// ```
pub fn sort(a: &Array, axis: Option<isize>) -> Result<Array> {
    let (x, axis) = lane_input("sort", a, axis)?;
    Ok(two_outputs(SortOp::Sort { axis }, x)?.0)
}

/// The indices (`u32`) that sort `a` along `axis` (`None`: indices into the flattened array).
/// Stable: equal elements keep their order.
///
/// ```
/// use nuvec_core::{Array, argsort};
///
/// let a = Array::from_slice(&[1.0f32, 0.5, 1.0, -2.0], &[4]).unwrap();
/// assert_eq!(argsort(&a, Some(0)).unwrap().to_vec::<u32>().unwrap(), [3, 1, 0, 2]);
/// ```
pub fn argsort(a: &Array, axis: Option<isize>) -> Result<Array> {
    let (x, axis) = lane_input("argsort", a, axis)?;
    Ok(two_outputs(SortOp::Sort { axis }, x)?.1)
}

/// `kth` normalised against the size of the lane (negative counts from the end).
fn resolve_kth(op: &'static str, x: &Array, axis: usize, kth: isize) -> Result<usize> {
    let n = x.shape()[axis] as isize;
    let k = if kth < 0 { kth + n } else { kth };
    if k < 0 || k >= n {
        return Err(invalid(
            op,
            format!(
                "kth {kth} is out of range for axis {axis} of size {n} (shape {:?})",
                x.shape()
            ),
        ));
    }
    Ok(k as usize)
}

/// [`partition`] and [`argpartition`] together: (values, `u32` indices along the axis).
///
/// ```
/// use nuvec_core::{Array, partition_with_indices};
///
/// let a = Array::from_slice(&[5i64, 1, 4, 2, 3], &[5]).unwrap();
/// let (values, indices) = partition_with_indices(&a, 2, None).unwrap();
/// assert_eq!(values.to_vec::<i64>().unwrap()[2], 3);
/// assert_eq!(indices.to_vec::<u32>().unwrap()[2], 4);
/// ```
pub fn partition_with_indices(
    a: &Array,
    kth: isize,
    axis: Option<isize>,
) -> Result<(Array, Array)> {
    let (x, axis) = lane_input("partition", a, axis)?;
    let kth = resolve_kth("partition", &x, axis, kth)?;
    two_outputs(SortOp::Partition { kth, axis }, x)
}

/// `a` rearranged along `axis` (`None`: flattened) so that position `kth` (negative: from the
/// end) holds the element a sort would put there, with no larger element before it and no
/// smaller one after it (NumPy's `partition`). The order on either side is unspecified.
///
/// ```
/// use nuvec_core::{Array, partition};
///
/// let a = Array::from_slice(&[5.0f32, 1.0, 4.0, 2.0, 3.0], &[5]).unwrap();
/// let p = partition(&a, -1, Some(0)).unwrap().to_vec::<f32>().unwrap();
/// assert_eq!(p[4], 5.0);
/// ```
pub fn partition(a: &Array, kth: isize, axis: Option<isize>) -> Result<Array> {
    let (x, axis) = lane_input("partition", a, axis)?;
    let kth = resolve_kth("partition", &x, axis, kth)?;
    Ok(two_outputs(SortOp::Partition { kth, axis }, x)?.0)
}

/// The indices (`u32`) that partition `a` along `axis` around position `kth` (see
/// [`partition`]).
///
/// ```
/// use nuvec_core::{Array, argpartition};
///
/// let a = Array::from_slice(&[5u16, 1, 4, 2, 3], &[5]).unwrap();
/// assert_eq!(argpartition(&a, 0, None).unwrap().to_vec::<u32>().unwrap()[0], 1);
/// ```
pub fn argpartition(a: &Array, kth: isize, axis: Option<isize>) -> Result<Array> {
    let (x, axis) = lane_input("argpartition", a, axis)?;
    let kth = resolve_kth("argpartition", &x, axis, kth)?;
    Ok(two_outputs(SortOp::Partition { kth, axis }, x)?.1)
}

/// The `k` largest elements of `a` along `axis` (`None`: of the flattened array), as MLX's
/// `topk`: a [`partition`] around position `n - k` and a view of its last `k` elements. Their
/// order: the smallest of them (the `k`-th largest) first, the others after it in no
/// particular order. NaN counts as the largest value. An error when `k` exceeds the axis.
///
/// ```
/// use nuvec_core::{Array, topk};
///
/// let a = Array::from_slice(&[3i32, 9, 1, 7, 5, 8], &[2, 3]).unwrap();
/// let mut top = topk(&a, 2, Some(1)).unwrap().to_vec::<i32>().unwrap();
/// assert_eq!(top[0], 3); // the 2nd largest of [3, 9, 1] comes first
/// top[..2].sort();
/// top[2..].sort();
/// assert_eq!(top, [3, 9, 7, 8]);
/// ```
pub fn topk(a: &Array, k: usize, axis: Option<isize>) -> Result<Array> {
    let (x, axis) = lane_input("topk", a, axis)?;
    let n = x.shape()[axis];
    if k > n {
        return Err(invalid(
            "topk",
            format!("k = {k} exceeds the {n} elements along axis {axis}"),
        ));
    }
    let partitioned = if k == 0 {
        x
    } else {
        two_outputs(SortOp::Partition { kth: n - k, axis }, x)?.0
    };
    let mut args = vec![SliceArg::full(); axis + 1];
    args[axis] = SliceArg::new(Some((n - k) as isize), None, 1);
    crate::ops::slice(&partitioned, &args)
}

/// For each element of `v`, the index (`u32`) at which inserting it into the sorted 1-D
/// array `a` keeps `a` sorted: before any equal elements, or after them when `right` (NumPy's
/// `side='left'` and `side='right'`). The inputs are promoted to a common type; the order is
/// the sorts' (NaN last). The result has `v`'s shape. `a` is assumed sorted.
///
/// ```
/// use nuvec_core::{Array, searchsorted};
///
/// let a = Array::from_slice(&[1.0f32, 2.0, 2.0, 5.0], &[4]).unwrap();
/// let v = Array::from_slice(&[2.0f32, 0.0, 9.0], &[3]).unwrap();
/// assert_eq!(searchsorted(&a, &v, false).unwrap().to_vec::<u32>().unwrap(), [1, 0, 4]);
/// assert_eq!(searchsorted(&a, &v, true).unwrap().to_vec::<u32>().unwrap(), [3, 0, 4]);
/// ```
pub fn searchsorted(a: &Array, v: &Array, right: bool) -> Result<Array> {
    check_errors(&[a, v])?;
    check_sorted_input("searchsorted", a)?;
    let dtype = crate::promote_types(a.dtype(), v.dtype());
    let cast = |x: &Array| {
        if x.dtype() == dtype {
            Ok(x.clone())
        } else {
            x.astype(dtype)
        }
    };
    Array::op1(
        Primitive::Sort(SortOp::SearchSorted { right }),
        vec![cast(a)?, cast(v)?],
    )
}
