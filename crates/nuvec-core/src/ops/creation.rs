//! Creating arrays: `zeros`, `ones`, `full`, `arange`, `linspace`, `eye`, `tri`, ...
//!
//! Beyond the [`CreationOp::Arange`] primitive, these are built from ordinary operations
//! (aranges compared with broadcasting, `where_`), so that every backend runs them.
//!
//! ```
//! use nuvec_core::{DType, arange, eye};
//!
//! # fn main() -> nuvec_core::Result<()> {
//! assert_eq!(arange(0.0, 1.0, 0.25, DType::F32)?.to_vec::<f32>()?, [0.0, 0.25, 0.5, 0.75]);
//! assert_eq!(eye(2, None, 0, DType::I32)?.to_vec::<i32>()?, [1, 0, 0, 1]);
//! # Ok(())
//! # }
//! ```

use crate::ops::{check_errors, check_matrices};
use crate::primitive::{OutputSpec, Primitive};
use crate::{Array, DType, Result, error::invalid};

/// The primitives that compute arrays from nothing.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CreationOp {
    /// `start + i · step` for `i` in `0..n`, in `dtype`.
    Arange {
        /// The first value.
        start: f64,
        /// The difference between neighbours.
        step: f64,
        /// How many values.
        n: usize,
        /// The element type.
        dtype: DType,
    },
}

impl CreationOp {
    /// The primitive's name.
    pub fn name(&self) -> &'static str {
        match self {
            CreationOp::Arange { .. } => "arange",
        }
    }

    /// The output's shape and type.
    pub fn output_specs(&self, inputs: &[Array]) -> Result<Vec<OutputSpec>> {
        if !inputs.is_empty() {
            return Err(invalid(self.name(), "takes no inputs"));
        }
        match self {
            CreationOp::Arange { n, dtype, .. } => Ok(vec![(vec![*n], *dtype)]),
        }
    }
}

/// An array of `shape` filled with `value` converted to `dtype` (a view of one element until
/// something writes it).
pub fn full(shape: &[usize], value: impl Into<crate::Operand>, dtype: DType) -> Result<Array> {
    let value = value.into().to_array(dtype)?;
    crate::broadcast_to(&value, shape)
}

/// Zeros of `shape` and `dtype`.
pub fn zeros(shape: &[usize], dtype: DType) -> Result<Array> {
    full(shape, 0, dtype)
}

/// Ones of `shape` and `dtype`.
pub fn ones(shape: &[usize], dtype: DType) -> Result<Array> {
    full(shape, 1, dtype)
}

/// Zeros of `a`'s shape and type.
pub fn zeros_like(a: &Array) -> Result<Array> {
    crate::ops::check_errors(&[a])?;
    zeros(a.shape(), a.dtype())
}

/// Ones of `a`'s shape and type.
pub fn ones_like(a: &Array) -> Result<Array> {
    crate::ops::check_errors(&[a])?;
    ones(a.shape(), a.dtype())
}

/// `value` in `a`'s shape and type.
pub fn full_like(a: &Array, value: impl Into<crate::Operand>) -> Result<Array> {
    crate::ops::check_errors(&[a])?;
    full(a.shape(), value, a.dtype())
}

/// `start, start + step, ...` up to `stop` (excluded), in `dtype`: `⌈(stop − start) / step⌉`
/// values (none when that is negative). Integer types take MLX's rule: the first value is
/// `start` truncated, the step is `start + step` truncated minus that. An error for a zero
/// or NaN step, infinite or NaN bounds, and `bool`.
///
/// ```
/// use nuvec_core::{DType, arange};
///
/// # fn main() -> nuvec_core::Result<()> {
/// assert_eq!(arange(0.0, 5.0, 2.0, DType::I32)?.to_vec::<i32>()?, [0, 2, 4]);
/// assert_eq!(arange(1.0, -1.0, -0.5, DType::F64)?.to_vec::<f64>()?, [1.0, 0.5, 0.0, -0.5]);
/// # Ok(())
/// # }
/// ```
pub fn arange(start: f64, stop: f64, step: f64, dtype: DType) -> Result<Array> {
    const OP: &str = "arange";
    if dtype == DType::Bool {
        return Err(invalid(OP, "bool is not supported"));
    }
    if start.is_nan() || stop.is_nan() || step.is_nan() {
        return Err(invalid(OP, "cannot compute the length of a range with NaN"));
    }
    if start.is_infinite() || stop.is_infinite() {
        return Err(invalid(
            OP,
            "cannot compute the length of an infinite range",
        ));
    }
    if step == 0.0 {
        return Err(invalid(OP, "step must be nonzero"));
    }
    let real = if step.is_infinite() {
        // One value when the range is not empty.
        if (step > 0.0) == (start < stop) {
            1.0
        } else {
            0.0
        }
    } else {
        ((stop - start) / step).ceil()
    };
    if real > i32::MAX as f64 {
        return Err(invalid(
            OP,
            format!("{real} values exceed the maximum size"),
        ));
    }
    let n = real.max(0.0) as usize;
    // An infinite step leaves at most `start` (and `0 · ∞` is NaN).
    let step = if step.is_infinite() { 0.0 } else { step };
    let op = CreationOp::Arange {
        start,
        step,
        n,
        dtype,
    };
    Array::op1(Primitive::Creation(op), Vec::new())
}

/// `num` evenly spaced values from `start` to `stop` (both included), in `dtype`; computed in
/// `float32` (`float64` for `float64`) and converted, as MLX does.
///
/// ```
/// use nuvec_core::{DType, linspace};
///
/// # fn main() -> nuvec_core::Result<()> {
/// assert_eq!(linspace(0.0, 1.0, 5, DType::F32)?.to_vec::<f32>()?, [0.0, 0.25, 0.5, 0.75, 1.0]);
/// # Ok(())
/// # }
/// ```
pub fn linspace(start: f64, stop: f64, num: usize, dtype: DType) -> Result<Array> {
    if num == 1 {
        return Array::from_slice(&[start], &[1])?.astype(dtype);
    }
    let work = if dtype == DType::F64 {
        DType::F64
    } else {
        DType::F32
    };
    let t = crate::divide(arange(0.0, num as f64, 1.0, work)?, num as f64 - 1.0)?;
    let t_bar = crate::subtract(1.0, &t)?;
    let start = Array::from_slice(&[start], &[])?.astype(work)?;
    let stop = Array::from_slice(&[stop], &[])?.astype(work)?;
    let out = crate::add(
        crate::multiply(&t_bar, &start)?,
        crate::multiply(&t, &stop)?,
    )?;
    out.astype(dtype)
}

/// The indices `from, from + 1, ...` (`count` of them) as a column or row for comparisons:
/// `int32` when they fit, else `int64`.
fn index_range(from: isize, count: usize) -> Result<Array> {
    let last = from as i128 + count as i128;
    let fits = |v: i128| (i32::MIN as i128..=i32::MAX as i128).contains(&v);
    let dtype = if fits(from as i128) && fits(last) {
        DType::I32
    } else {
        DType::I64
    };
    arange(from as f64, last as f64, 1.0, dtype)
}

/// The `n × m` boolean comparison of row indices `i` (shifted by `k`) with column indices
/// `j`: `rel(i + k, j)`.
fn index_grid(
    n: usize,
    m: usize,
    k: isize,
    rel: fn(&Array, &Array) -> Result<Array>,
) -> Result<Array> {
    let rows = index_range(k, n)?.reshape(&[n as isize, 1])?;
    let cols = index_range(0, m)?.reshape(&[1, m as isize])?;
    let (rows, cols) = if rows.dtype() == cols.dtype() {
        (rows, cols)
    } else {
        (rows.astype(DType::I64)?, cols.astype(DType::I64)?)
    };
    rel(&rows, &cols)
}

/// An `n × m` matrix (`m` defaults to `n`) with ones on diagonal `k` (`0` the main one,
/// positive above it, negative below) and zeros elsewhere.
///
/// ```
/// use nuvec_core::{DType, eye};
///
/// # fn main() -> nuvec_core::Result<()> {
/// assert_eq!(eye(2, Some(3), 1, DType::F32)?.to_vec::<f32>()?, [0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
/// # Ok(())
/// # }
/// ```
pub fn eye(n: usize, m: Option<usize>, k: isize, dtype: DType) -> Result<Array> {
    let grid = index_grid(n, m.unwrap_or(n), k, |r, c| crate::equal(r, c))?;
    grid.astype(dtype)
}

/// The `n × n` identity matrix.
///
/// ```
/// use nuvec_core::{DType, identity};
///
/// # fn main() -> nuvec_core::Result<()> {
/// assert_eq!(identity(2, DType::F32)?.to_vec::<f32>()?, [1.0, 0.0, 0.0, 1.0]);
/// # Ok(())
/// # }
/// ```
pub fn identity(n: usize, dtype: DType) -> Result<Array> {
    eye(n, None, 0, dtype)
}

/// An `n × m` matrix (`m` defaults to `n`) with ones on and below diagonal `k` (element
/// `(i, j)` is one where `j <= i + k`) and zeros above.
///
/// ```
/// use nuvec_core::{DType, tri};
///
/// # fn main() -> nuvec_core::Result<()> {
/// assert_eq!(tri(2, None, 0, DType::I32)?.to_vec::<i32>()?, [1, 0, 1, 1]);
/// # Ok(())
/// # }
/// ```
pub fn tri(n: usize, m: Option<usize>, k: isize, dtype: DType) -> Result<Array> {
    let grid = index_grid(n, m.unwrap_or(n), k, |r, c| crate::greater_equal(r, c))?;
    grid.astype(dtype)
}

/// The mask of [`tril`] (`below` true) or [`triu`] over the last two axes of `a`.
fn triangle(op: &'static str, a: &Array, k: isize, below: bool) -> Result<Array> {
    check_errors(&[a])?;
    check_matrices(op, "", a)?;
    let nd = a.ndim();
    let (n, m) = (a.shape()[nd - 2], a.shape()[nd - 1]);
    let zero = zeros(&[], a.dtype())?;
    if below {
        let mask = tri(n, Some(m), k, DType::Bool)?;
        crate::where_(&mask, a, &zero)
    } else {
        let mask = tri(n, Some(m), k.saturating_sub(1), DType::Bool)?;
        crate::where_(&mask, &zero, a)
    }
}

/// `a` with the elements above diagonal `k` of its last two axes set to zero.
///
/// ```
/// use nuvec_core::{Array, tril};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let a = Array::from_slice(&[1i32, 2, 3, 4], &[2, 2])?;
/// assert_eq!(tril(&a, 0)?.to_vec::<i32>()?, [1, 0, 3, 4]);
/// # Ok(())
/// # }
/// ```
pub fn tril(a: &Array, k: isize) -> Result<Array> {
    triangle("tril", a, k, true)
}

/// `a` with the elements below diagonal `k` of its last two axes set to zero.
///
/// ```
/// use nuvec_core::{Array, triu};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let a = Array::from_slice(&[1i32, 2, 3, 4], &[2, 2])?;
/// assert_eq!(triu(&a, 0)?.to_vec::<i32>()?, [1, 2, 0, 4]);
/// # Ok(())
/// # }
/// ```
pub fn triu(a: &Array, k: isize) -> Result<Array> {
    triangle("triu", a, k, false)
}

/// Coordinate grids from 1-D coordinate arrays (others are flattened): output `i` holds
/// `arrays[i]` along its own axis, broadcast over the others. With `indexing_xy` (NumPy's
/// default, `"xy"`) the first two axes are swapped, as for image coordinates; otherwise the
/// indexing is `"ij"` (matrix). The outputs are broadcast views.
///
/// ```
/// use nuvec_core::{Array, meshgrid};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let x = Array::from_slice(&[1i32, 2, 3], &[3])?;
/// let y = Array::from_slice(&[10i32, 20], &[2])?;
/// let g = meshgrid(&[x, y], true)?;
/// assert_eq!(g[0].shape(), [2, 3]);
/// assert_eq!(g[0].to_vec::<i32>()?, [1, 2, 3, 1, 2, 3]);
/// assert_eq!(g[1].to_vec::<i32>()?, [10, 10, 10, 20, 20, 20]);
/// # Ok(())
/// # }
/// ```
pub fn meshgrid(arrays: &[Array], indexing_xy: bool) -> Result<Vec<Array>> {
    let refs: Vec<&Array> = arrays.iter().collect();
    check_errors(&refs)?;
    let nd = arrays.len();
    let mut outputs = Vec::with_capacity(nd);
    for (i, a) in arrays.iter().enumerate() {
        // Output axis of input `i`: its own, or the other of the first two for "xy".
        let axis = match i {
            0 if indexing_xy && nd > 1 => 1,
            1 if indexing_xy => 0,
            _ => i,
        };
        let mut shape = vec![1isize; nd];
        shape[axis] = a.size() as isize;
        outputs.push(a.reshape(&shape)?);
    }
    crate::broadcast_arrays(&outputs)
}
