//! Linear algebra: [`matmul`], [`addmm`], [`outer`], [`inner`], [`tensordot`], [`trace`],
//! [`kron`].
//!
//! Matrix products follow NumPy and MLX: a 1-D operand is a row (on the left) or a column (on
//! the right) whose axis is removed from the result, batch axes broadcast, and the operands are
//! promoted to a common floating or complex type (integers are an error, as in MLX).
//!
//! ```
//! use nuvec_core::{Array, matmul};
//!
//! # fn main() -> nuvec_core::Result<()> {
//! let a = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
//! let v = Array::from_slice(&[1.0f32, 1.0], &[2])?;
//! assert_eq!(matmul(&a, &v)?.to_vec::<f32>()?, [3.0, 7.0]);
//! # Ok(())
//! # }
//! ```

use crate::error::invalid;
use crate::ops::{
    broadcast_shapes, broadcast_to, check_errors, check_matrices, expect_inputs, normalize_axis,
};
use crate::primitive::{OutputSpec, Primitive};
use crate::{Array, DType, Error, Result, promote_types};

/// The matrix-product primitives. Inputs have at least two axes and identical batch axes
/// (the op functions broadcast them as views first) and one inexact element type.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum MatmulOp {
    /// `a @ b` for `a: [..., m, k]` and `b: [..., k, n]`, giving `[..., m, n]`.
    Matmul,
    /// `alpha · (a @ b) + beta · c`, with `c` of the output's shape as a third input.
    AddMm {
        /// The factor of the product.
        alpha: f32,
        /// The factor of `c`.
        beta: f32,
    },
}

impl MatmulOp {
    /// The primitive's name.
    pub fn name(&self) -> &'static str {
        match self {
            MatmulOp::Matmul => "matmul",
            MatmulOp::AddMm { .. } => "addmm",
        }
    }

    /// The output's shape and type.
    pub fn output_specs(&self, inputs: &[Array]) -> Result<Vec<OutputSpec>> {
        let op = self.name();
        let count = match self {
            MatmulOp::Matmul => 2,
            MatmulOp::AddMm { .. } => 3,
        };
        expect_inputs(op, inputs, count)?;
        let (a, b) = (&inputs[0], &inputs[1]);
        let nd = a.ndim();
        if nd < 2 || b.ndim() != nd || a.shape()[..nd - 2] != b.shape()[..nd - 2] {
            return Err(invalid(
                op,
                format!(
                    "the primitive needs matrices with equal batch axes, got {:?} and {:?}",
                    a.shape(),
                    b.shape()
                ),
            ));
        }
        if a.shape()[nd - 1] != b.shape()[nd - 2] {
            return Err(Error::IncompatibleShapes {
                op,
                lhs: a.shape().to_vec(),
                rhs: b.shape().to_vec(),
            });
        }
        if a.dtype() != b.dtype() || !a.dtype().is_inexact() {
            return Err(invalid(
                op,
                format!(
                    "the primitive needs two inputs of one float or complex type, got {} and {}",
                    a.dtype(),
                    b.dtype()
                ),
            ));
        }
        let mut shape = a.shape().to_vec();
        shape[nd - 1] = b.shape()[nd - 1];
        if let MatmulOp::AddMm { .. } = self {
            let c = &inputs[2];
            if c.shape() != shape.as_slice() || c.dtype() != a.dtype() {
                return Err(invalid(
                    op,
                    format!(
                        "c must be {} of shape {shape:?}, got {} of shape {:?}",
                        a.dtype(),
                        c.dtype(),
                        c.shape()
                    ),
                ));
            }
        }
        Ok(vec![(shape, a.dtype())])
    }
}

/// The operands of a matrix product with 1-D operands made matrices, checked, promoted and
/// broadcast over their batch axes (or, for a batch times one matrix, with the batch folded
/// into the rows); with the shape of the result once the axes added for 1-D operands are
/// removed again.
struct Prepared {
    a: Array,
    b: Array,
    /// The primitive's output shape (`[..., m, n]`, or `[batch · m, n]` with the batch folded).
    full: Vec<usize>,
    /// The result's shape.
    result: Vec<usize>,
}

/// The shared front of [`matmul`] and [`addmm`]: NumPy's rules for 1-D operands and batch
/// broadcasting, in `dtype`.
fn prepare(op: &'static str, a: &Array, b: &Array, dtype: DType) -> Result<Prepared> {
    if a.ndim() == 0 || b.ndim() == 0 {
        return Err(invalid(
            op,
            format!(
                "inputs need at least one dimension, got shapes {:?} and {:?}",
                a.shape(),
                b.shape()
            ),
        ));
    }
    let a_shape: Vec<usize> = match a.ndim() {
        1 => vec![1, a.shape()[0]],
        _ => a.shape().to_vec(),
    };
    let b_shape: Vec<usize> = match b.ndim() {
        1 => vec![b.shape()[0], 1],
        _ => b.shape().to_vec(),
    };
    let (na, nb) = (a_shape.len(), b_shape.len());
    let (m, k, kb, n) = (
        a_shape[na - 2],
        a_shape[na - 1],
        b_shape[nb - 2],
        b_shape[nb - 1],
    );
    if k != kb {
        return Err(invalid(
            op,
            format!(
                "the last axis of {:?} must match the second to last of {:?}",
                a.shape(),
                b.shape()
            ),
        ));
    }
    let batch = broadcast_shapes(op, &a_shape[..na - 2], &b_shape[..nb - 2])?;
    if nb == 2 && na > 2 {
        // A batch of `a` times one shared matrix (a linear layer's `x Wᵀ`): the batch folds
        // into `a`'s rows, one tall product. Then the gradient with respect to `b` is one
        // product over every row too, rather than a product per batch entry summed afterwards
        // (the vjp of the broadcast), which for short rows costs several times the forward.
        let rows = batch.iter().product::<usize>() * m;
        let mut result = batch;
        result.push(m);
        if b.ndim() > 1 {
            result.push(n);
        }
        return Ok(Prepared {
            a: reshaped(a.astype(dtype)?, &[rows, k])?,
            b: reshaped(b.astype(dtype)?, &b_shape)?,
            full: vec![rows, n],
            result,
        });
    }
    let with = |x: &Array, shape: &[usize], rows: usize, cols: usize| -> Result<Array> {
        let mut full = batch.clone();
        full.extend([rows, cols]);
        broadcast_to(&reshaped(x.astype(dtype)?, shape)?, &full)
    };
    let a2 = with(a, &a_shape, m, k)?;
    let b2 = with(b, &b_shape, k, n)?;
    let mut full = batch.clone();
    full.extend([m, n]);
    let mut result = batch;
    if a.ndim() > 1 {
        result.push(m);
    }
    if b.ndim() > 1 {
        result.push(n);
    }
    Ok(Prepared {
        a: a2,
        b: b2,
        full,
        result,
    })
}

/// The promoted type of a matrix product's operands, or the error for types that are not
/// floating or complex.
fn product_dtype(op: &'static str, dtypes: &[DType]) -> Result<DType> {
    let dtype = dtypes[1..]
        .iter()
        .fold(dtypes[0], |acc, &d| promote_types(acc, d));
    if !dtype.is_inexact() {
        let names: Vec<&str> = dtypes.iter().map(|d| d.name()).collect();
        return Err(invalid(
            op,
            format!(
                "only floating and complex types are supported, got {} (promoted to {dtype})",
                names.join(", ")
            ),
        ));
    }
    Ok(dtype)
}

/// `x` reshaped to `shape` unless it has it already.
fn reshaped(x: Array, shape: &[usize]) -> Result<Array> {
    if x.shape() == shape {
        return Ok(x);
    }
    let shape: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
    x.reshape(&shape)
}

/// The matrix product of `a` and `b`, with NumPy's rules: a 1-D `a` is a row and a 1-D `b` a
/// column (their axis is removed from the result), batch axes broadcast, and the inputs are
/// promoted to a common type, which must be floating or complex.
///
/// ```
/// use nuvec_core::{Array, DType, matmul, ones};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let a = ones(&[4, 2, 3], DType::F32)?;
/// let b = ones(&[3, 5], DType::F32)?;
/// let c = matmul(&a, &b)?;
/// assert_eq!(c.shape(), [4, 2, 5]);
/// assert!(c.to_vec::<f32>()?.iter().all(|&v| v == 3.0));
/// # Ok(())
/// # }
/// ```
pub fn matmul(a: &Array, b: &Array) -> Result<Array> {
    check_errors(&[a, b])?;
    let dtype = product_dtype("matmul", &[a.dtype(), b.dtype()])?;
    let p = prepare("matmul", a, b, dtype)?;
    let out = Array::op1(Primitive::Matmul(MatmulOp::Matmul), vec![p.a, p.b])?;
    reshaped(out, &p.result)
}

/// `alpha · (a @ b) + beta · c`, where `a @ b` is [`matmul`]'s product and `c` broadcasts to
/// its shape. The inputs are promoted to a common floating or complex type.
///
/// ```
/// use nuvec_core::{Array, addmm};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let a = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
/// let b = Array::from_slice(&[1.0f32, 0.0, 0.0, 1.0], &[2, 2])?;
/// let bias = Array::from_slice(&[10.0f32, 20.0], &[2])?;
/// let y = addmm(&bias, &a, &b, 2.0, 1.0)?;
/// assert_eq!(y.to_vec::<f32>()?, [12.0, 24.0, 16.0, 28.0]);
/// # Ok(())
/// # }
/// ```
pub fn addmm(c: &Array, a: &Array, b: &Array, alpha: f32, beta: f32) -> Result<Array> {
    check_errors(&[c, a, b])?;
    let dtype = product_dtype("addmm", &[c.dtype(), a.dtype(), b.dtype()])?;
    if dtype == DType::C64 {
        // No fused complex kernel: the same result from its parts.
        let product = crate::multiply(matmul(a, b)?, alpha)?;
        return crate::add(product, crate::multiply(c, beta)?);
    }
    let p = prepare("addmm", a, b, dtype)?;
    let fits = broadcast_shapes("addmm", c.shape(), &p.result).is_ok_and(|shape| shape == p.result);
    if !fits {
        return Err(invalid(
            "addmm",
            format!(
                "c of shape {:?} does not broadcast to the product's shape {:?}",
                c.shape(),
                p.result
            ),
        ));
    }
    let c = if c.dtype() == dtype {
        c.clone()
    } else {
        c.astype(dtype)?
    };
    let c = reshaped(broadcast_to(&c, &p.result)?, &p.full)?;
    let op = MatmulOp::AddMm { alpha, beta };
    let out = Array::op1(Primitive::Matmul(op), vec![p.a, p.b, c])?;
    reshaped(out, &p.result)
}

/// The outer product: `out[i, j] = a[i] · b[j]` over the flattened inputs (any numeric type,
/// promoted as in `multiply`).
///
/// ```
/// use nuvec_core::{Array, outer};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let a = Array::from_slice(&[1i32, 2], &[2])?;
/// let b = Array::from_slice(&[1i32, 10, 100], &[3])?;
/// assert_eq!(outer(&a, &b)?.to_vec::<i32>()?, [1, 10, 100, 2, 20, 200]);
/// # Ok(())
/// # }
/// ```
pub fn outer(a: &Array, b: &Array) -> Result<Array> {
    check_errors(&[a, b])?;
    let column = a.reshape(&[a.size() as isize, 1])?;
    let row = b.reshape(&[-1])?;
    crate::multiply(&column, &row)
}

/// The inner product: for 1-D inputs their dot product, in general a sum of products over the
/// last axes of both (`out[i.., j..] = Σₖ a[i.., k] · b[j.., k]`); a 0-D input multiplies.
///
/// ```
/// use nuvec_core::{Array, inner};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let a = Array::from_slice(&[1.0f32, 2.0, 3.0], &[3])?;
/// let b = Array::from_slice(&[4.0f32, 5.0, 6.0], &[3])?;
/// assert_eq!(inner(&a, &b)?.item::<f32>()?, 32.0);
/// # Ok(())
/// # }
/// ```
pub fn inner(a: &Array, b: &Array) -> Result<Array> {
    check_errors(&[a, b])?;
    if a.ndim() == 0 || b.ndim() == 0 {
        return crate::multiply(a, b);
    }
    if a.shape()[a.ndim() - 1] != b.shape()[b.ndim() - 1] {
        return Err(invalid(
            "inner",
            format!(
                "the last axes of {:?} and {:?} differ",
                a.shape(),
                b.shape()
            ),
        ));
    }
    tensordot(a, b, TensorAxes::Pairs(vec![-1], vec![-1]))
}

/// Which axes [`tensordot`] contracts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TensorAxes {
    /// The last `n` axes of `a` against the first `n` of `b`, in order (`n >= 0`).
    Count(isize),
    /// Axis `a_axes[i]` of `a` against axis `b_axes[i]` of `b` (negative axes count from the
    /// end).
    Pairs(Vec<isize>, Vec<isize>),
}

macro_rules! count_axes {
    ($($t:ty),*) => {$(
        impl From<$t> for TensorAxes {
            fn from(n: $t) -> TensorAxes {
                TensorAxes::Count(isize::try_from(n).unwrap_or(isize::MAX))
            }
        }
    )*};
}
count_axes!(i32, i64, isize, u32, usize);

impl<const N: usize> From<([isize; N], [isize; N])> for TensorAxes {
    fn from((a, b): ([isize; N], [isize; N])) -> TensorAxes {
        TensorAxes::Pairs(a.to_vec(), b.to_vec())
    }
}

impl From<(Vec<isize>, Vec<isize>)> for TensorAxes {
    fn from((a, b): (Vec<isize>, Vec<isize>)) -> TensorAxes {
        TensorAxes::Pairs(a, b)
    }
}

impl From<(&[isize], &[isize])> for TensorAxes {
    fn from((a, b): (&[isize], &[isize])) -> TensorAxes {
        TensorAxes::Pairs(a.to_vec(), b.to_vec())
    }
}

/// The sum of products of `a` and `b` over pairs of axes (see [`TensorAxes`]): the result's
/// axes are `a`'s remaining axes followed by `b`'s. The inputs are promoted to a common
/// floating or complex type.
///
/// ```
/// use nuvec_core::{DType, ones, tensordot};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let a = ones(&[2, 3, 4], DType::F32)?;
/// let b = ones(&[3, 4, 5], DType::F32)?;
/// // The last two axes of `a` against the first two of `b`.
/// let c = tensordot(&a, &b, 2)?;
/// assert_eq!(c.shape(), [2, 5]);
/// // Axis 1 of `a` against axis 0 of `b`.
/// let d = tensordot(&a, &b, ([1], [0]))?;
/// assert_eq!(d.shape(), [2, 4, 4, 5]);
/// assert!(d.to_vec::<f32>()?.iter().all(|&v| v == 3.0));
/// # Ok(())
/// # }
/// ```
pub fn tensordot(a: &Array, b: &Array, axes: impl Into<TensorAxes>) -> Result<Array> {
    const OP: &str = "tensordot";
    check_errors(&[a, b])?;
    let (a_axes, b_axes): (Vec<usize>, Vec<usize>) = match axes.into() {
        TensorAxes::Count(n) => {
            let most = a.ndim().min(b.ndim());
            if n < 0 || n as usize > most {
                return Err(invalid(
                    OP,
                    format!(
                        "cannot contract {n} axes of arrays of {} and {} dimensions",
                        a.ndim(),
                        b.ndim()
                    ),
                ));
            }
            let n = n as usize;
            ((a.ndim() - n..a.ndim()).collect(), (0..n).collect())
        }
        TensorAxes::Pairs(x, y) => {
            if x.len() != y.len() {
                return Err(invalid(
                    OP,
                    format!("axis lists of different lengths, {x:?} and {y:?}"),
                ));
            }
            let norm = |axes: &[isize], ndim: usize| -> Result<Vec<usize>> {
                let out = axes
                    .iter()
                    .map(|&ax| normalize_axis(OP, ax, ndim))
                    .collect::<Result<Vec<_>>>()?;
                let mut sorted = out.clone();
                sorted.sort_unstable();
                if sorted.windows(2).any(|w| w[0] == w[1]) {
                    return Err(invalid(OP, format!("repeated axis in {axes:?}")));
                }
                Ok(out)
            };
            (norm(&x, a.ndim())?, norm(&y, b.ndim())?)
        }
    };
    for (&i, &j) in a_axes.iter().zip(&b_axes) {
        if a.shape()[i] != b.shape()[j] {
            return Err(invalid(
                OP,
                format!(
                    "axis {i} of {:?} and axis {j} of {:?} differ in size",
                    a.shape(),
                    b.shape()
                ),
            ));
        }
    }
    product_dtype(OP, &[a.dtype(), b.dtype()])?;
    let contracted: usize = a_axes.iter().map(|&i| a.shape()[i]).product();
    let a_free: Vec<usize> = (0..a.ndim()).filter(|i| !a_axes.contains(i)).collect();
    let b_free: Vec<usize> = (0..b.ndim()).filter(|i| !b_axes.contains(i)).collect();
    let mut result: Vec<usize> = a_free.iter().map(|&i| a.shape()[i]).collect();
    result.extend(b_free.iter().map(|&i| b.shape()[i]));
    let rows: usize = a_free.iter().map(|&i| a.shape()[i]).product();
    let cols: usize = b_free.iter().map(|&i| b.shape()[i]).product();
    let a_perm: Vec<usize> = a_free.iter().chain(&a_axes).copied().collect();
    let b_perm: Vec<usize> = b_axes.iter().chain(&b_free).copied().collect();
    let x = reshaped(crate::transpose(a, &a_perm)?, &[rows, contracted])?;
    let y = reshaped(crate::transpose(b, &b_perm)?, &[contracted, cols])?;
    reshaped(matmul(&x, &y)?, &result)
}

/// The Kronecker product: the blocks `a[i..] · b`, laid out in `a`'s shape (both inputs
/// padded with leading axes of size 1 to the same number of dimensions; any numeric type).
/// Empty inputs are an error, as in MLX.
///
/// ```
/// use nuvec_core::{Array, kron};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let a = Array::from_slice(&[1i32, 2], &[2])?;
/// let b = Array::from_slice(&[1i32, 10], &[2])?;
/// assert_eq!(kron(&a, &b)?.to_vec::<i32>()?, [1, 10, 2, 20]);
/// # Ok(())
/// # }
/// ```
pub fn kron(a: &Array, b: &Array) -> Result<Array> {
    check_errors(&[a, b])?;
    if a.size() == 0 || b.size() == 0 {
        return Err(invalid(
            "kron",
            format!(
                "inputs cannot be empty, got shapes {:?} and {:?}",
                a.shape(),
                b.shape()
            ),
        ));
    }
    let nd = a.ndim().max(b.ndim());
    // `a`'s axes at even positions and `b`'s at odd ones, so the product's axes interleave
    // and merge pairwise into the result.
    let mut a_shape = vec![1isize; 2 * nd];
    let mut b_shape = vec![1isize; 2 * nd];
    let mut out = vec![1isize; nd];
    for (j, &d) in a.shape().iter().rev().enumerate() {
        a_shape[2 * (nd - 1 - j)] = d as isize;
        out[nd - 1 - j] *= d as isize;
    }
    for (j, &d) in b.shape().iter().rev().enumerate() {
        b_shape[2 * (nd - 1 - j) + 1] = d as isize;
        out[nd - 1 - j] *= d as isize;
    }
    let product = crate::multiply(a.reshape(&a_shape)?, b.reshape(&b_shape)?)?;
    product.reshape(&out)
}

/// The sum of diagonal `offset` (above the main one when positive) of the matrices that axes
/// `axis1` (rows) and `axis2` (columns) of `a` hold; the other axes remain. Typed as
/// [`sum`](crate::sum); an empty diagonal sums to zero.
///
/// ```
/// use nuvec_core::{Array, trace};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let a = Array::from_slice(&[1i32, 2, 3, 4, 5, 6], &[2, 3])?;
/// assert_eq!(trace(&a, 0, 0, 1)?.item::<i32>()?, 6);
/// assert_eq!(trace(&a, 1, 0, 1)?.item::<i32>()?, 8);
/// # Ok(())
/// # }
/// ```
pub fn trace(a: &Array, offset: isize, axis1: isize, axis2: isize) -> Result<Array> {
    const OP: &str = "trace";
    check_errors(&[a])?;
    check_matrices(OP, "", a)?;
    let first = normalize_axis(OP, axis1, a.ndim())?;
    let second = normalize_axis(OP, axis2, a.ndim())?;
    if first == second {
        return Err(invalid(
            OP,
            format!("axis1 and axis2 are both axis {first}"),
        ));
    }
    crate::sum(&crate::diagonal(a, offset, axis1, axis2)?, &[-1], false)
}
