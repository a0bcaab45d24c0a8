//! [`gather_mm`]: matrix products of gathered batches (a mixture of experts' layers).

use super::check::Checker;
use super::{FastOp, Fused, check_inputs, integral};
use crate::backend::cuda::fast::CudaKernel;
use crate::error::invalid;
use crate::primitive::{OutputSpec, Primitive};
use crate::{Array, DType, DeviceKind, Result, default_stream, promote_types};

/// Matrix products of batches picked by index, as MLX's `gather_mm`: with `a` of shape
/// `[..., M, K]` and `b` of shape `[..., K, N]`, output `[i.., :, :]` is
/// `a_flat[lhs[i..]] @ b_flat[rhs[i..]]`, where `a_flat` and `b_flat` are the matrices of
/// `a` and `b` in row-major order of their batch axes. Missing indices default to every
/// batch in order (`arange` over the batch shape); the two index arrays (any integer type)
/// broadcast to one shape, which leads the output's. `sorted_indices` promises that `rhs`
/// is sorted, which lets a kernel group rows by weight; on a GPU stream, unsorted indices of
/// 64 positions or more are sorted on the device first (the results come back in the
/// positions' order). Out-of-range indices are clamped.
///
/// ```
/// use nuvec_core::{Array, gather_mm};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let x = Array::from_slice(&[1.0f32, 2.0], &[1, 1, 2])?; // one row
/// let experts = Array::from_slice(&[1.0f32, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0], &[2, 2, 2])?;
/// let pick = Array::from_slice(&[1u32, 0], &[2])?;
/// let zero = Array::from_slice(&[0u32, 0], &[2])?;
/// let y = gather_mm(&x, &experts, Some(&zero), Some(&pick), false)?;
/// // Expert 1 swaps the features, expert 0 keeps them.
/// assert_eq!(y.to_vec::<f32>()?, [2.0, 1.0, 1.0, 2.0]);
/// # Ok(())
/// # }
/// ```
pub fn gather_mm(
    a: &Array,
    b: &Array,
    lhs_indices: Option<&Array>,
    rhs_indices: Option<&Array>,
    sorted_indices: bool,
) -> Result<Array> {
    const OP: &str = "gather_mm";
    check_inputs(&[a, b])?;
    if a.ndim() < 2 || b.ndim() < 2 {
        return Err(invalid(
            OP,
            format!(
                "a and b must have at least 2 dimensions, got {:?} and {:?}",
                a.shape(),
                b.shape()
            ),
        ));
    }
    let (k, k2) = (a.shape()[a.ndim() - 1], b.shape()[b.ndim() - 2]);
    if k != k2 {
        return Err(invalid(
            OP,
            format!(
                "the inner sizes of {:?} and {:?} differ",
                a.shape(),
                b.shape()
            ),
        ));
    }
    let dtype = promote_types(a.dtype(), b.dtype());
    super::floating(OP, dtype)?;
    let lhs = indices(OP, lhs_indices, a)?;
    let rhs = indices(OP, rhs_indices, b)?;
    let shape = crate::ops::broadcast_shapes(OP, lhs.shape(), rhs.shape())?;
    let lhs = crate::broadcast_to(&lhs, &shape)?;
    let rhs = crate::broadcast_to(&rhs, &shape)?;
    let inputs = vec![a.astype(dtype)?, b.astype(dtype)?, lhs, rhs];
    Ok(record(FastOp::GatherMm, inputs, sorted_indices, b)?.swap_remove(0))
}

/// [`FastOp::GatherMm`]'s fallback, `(a, b, lhs, rhs[, offsets])`: the indexed matrices of
/// both operands taken out, then one batched product.
fn gather_mm_graph(inputs: &[Array]) -> Result<Array> {
    crate::matmul(
        &matrices(&inputs[0], &inputs[2])?,
        &matrices(&inputs[1], &inputs[3])?,
    )
}

/// Quantized matrix products of batches picked by index, as MLX's `gather_qmm` (affine
/// mode): [`gather_mm`] with the right operand the matrices that [`crate::quantize`]'s `(w,
/// scales, biases)` stand for, multiplied as [`crate::quantized_matmul`] does (`x · wᵀ` with
/// `transpose`, else `x · w`).
///
/// `x` is `[..., M, K]`; `w`, `scales` and `biases` share their batch axes (`[..., rows,
/// words]` and `[..., rows, groups]`). Output `[i.., :, :]` is the product of `x_flat[lhs[i..]]`
/// and the weight `w_flat[rhs[i..]]`, the batches counted in row-major order; missing
/// indices default to every batch in order, and the two index arrays (any integer type)
/// broadcast to one shape, which leads the output's `[..., M, N]`. The result has the
/// promoted float type of `x`, the scales and the biases. `sorted_indices` promises that
/// `rhs` is sorted, which lets a kernel group rows by weight (mixtures of experts); on a GPU
/// stream, unsorted indices of 64 positions or more are sorted on the device first (the
/// results come back in the positions' order).
///
/// ```
/// use nuvec_core::{Array, gather_qmm, quantize, quantized_matmul, take};
///
/// # fn main() -> nuvec_core::Result<()> {
/// // Two experts of 4 outputs over 32 inputs, quantized to 4 bits.
/// let v: Vec<f32> = (0..2 * 4 * 32).map(|i| (i as f32 * 0.3).sin()).collect();
/// let (wq, scales, biases) = quantize(&Array::from_slice(&v, &[2, 4, 32])?, 32, 4)?;
/// let x = Array::from_slice(&[0.5f32; 32], &[1, 1, 32])?; // one token
/// let pick = Array::from_slice(&[1u32, 0], &[2])?; // through expert 1, then expert 0
/// let zero = Array::from_slice(&[0u32, 0], &[2])?;
/// let y = gather_qmm(&x, &wq, &scales, &biases, Some(&zero), Some(&pick), true, 32, 4, false)?;
/// assert_eq!(y.shape(), [2, 1, 4]);
/// let first = |a: &nuvec_core::Array| take(a, &Array::scalar(1u32), Some(0));
/// let expert1 = quantized_matmul(
///     &x.reshape(&[1, 32])?,
///     &first(&wq)?,
///     &first(&scales)?,
///     &first(&biases)?,
///     true,
///     32,
///     4,
/// )?;
/// assert_eq!(y.to_vec::<f32>()?[..4], expert1.to_vec::<f32>()?[..]);
/// # Ok(())
/// # }
/// ```
#[allow(clippy::too_many_arguments)]
pub fn gather_qmm(
    x: &Array,
    w: &Array,
    scales: &Array,
    biases: &Array,
    lhs_indices: Option<&Array>,
    rhs_indices: Option<&Array>,
    transpose: bool,
    group_size: usize,
    bits: u32,
    sorted_indices: bool,
) -> Result<Array> {
    const OP: &str = "gather_qmm";
    check_inputs(&[x, w, scales, biases])?;
    if !matches!(group_size, 32 | 64 | 128) {
        return Err(invalid(
            OP,
            format!("group_size must be 32, 64 or 128, got {group_size}"),
        ));
    }
    if !matches!(bits, 2 | 3 | 4 | 5 | 6 | 8) {
        return Err(invalid(
            OP,
            format!("{bits} bits are not supported (2, 3, 4, 5, 6 or 8)"),
        ));
    }
    if x.ndim() < 2 || w.ndim() < 2 {
        return Err(invalid(
            OP,
            format!(
                "x and w must have at least 2 dimensions, got {:?} and {:?}",
                x.shape(),
                w.shape()
            ),
        ));
    }
    if w.dtype() != DType::U32 {
        return Err(invalid(
            OP,
            format!("the packed matrix must be uint32, got {}", w.dtype()),
        ));
    }
    let nd = w.ndim();
    if scales.shape() != biases.shape()
        || scales.ndim() != nd
        || scales.shape()[..nd - 1] != w.shape()[..nd - 1]
        || !(w.shape()[nd - 1] * 32).is_multiple_of(bits as usize)
        || w.shape()[nd - 1] * 32 / bits as usize != scales.shape()[nd - 1] * group_size
    {
        return Err(invalid(
            OP,
            format!(
                "scales {:?} and biases {:?} do not fit a packed matrix of shape {:?} with \
                 group_size={group_size} and bits={bits}",
                scales.shape(),
                biases.shape(),
                w.shape()
            ),
        ));
    }
    let unpacked = scales.shape()[nd - 1] * group_size;
    let rows = w.shape()[nd - 2];
    let k = if transpose { unpacked } else { rows };
    if x.shape()[x.ndim() - 1] != k {
        return Err(invalid(
            OP,
            format!(
                "x of shape {:?} does not fit a weight of inner size {k}",
                x.shape()
            ),
        ));
    }
    let dtype = promote_types(promote_types(x.dtype(), scales.dtype()), biases.dtype());
    super::floating(OP, dtype)?;
    let lhs = indices(OP, lhs_indices, x)?;
    let rhs = indices(OP, rhs_indices, w)?;
    let shape = crate::ops::broadcast_shapes(OP, lhs.shape(), rhs.shape())?;
    let lhs = crate::broadcast_to(&lhs, &shape)?;
    let rhs = crate::broadcast_to(&rhs, &shape)?;
    let inputs = vec![
        x.astype(dtype)?,
        w.clone(),
        scales.astype(dtype)?,
        biases.astype(dtype)?,
        lhs,
        rhs,
    ];
    let op = FastOp::GatherQmm {
        group_size,
        bits: bits as u8,
        transpose,
    };
    Ok(record(op, inputs, sorted_indices, w)?.swap_remove(0))
}

/// Index positions from which unsorted indices are grouped by weight batch on a GPU stream
/// (with at least one position a batch on average): MLX's mixture-of-experts layer sorts from
/// this many too.
const GROUP_POSITIONS: usize = 64;

/// The most index positions, and weight batches, the GPU's gathered quantized product groups
/// by batch in its own kernel (`NVQG_GROUP_MAX` and `NVQG_MAX_EXPERTS` in the CUDA backend's
/// `quantized_gather.cu`).
pub(crate) const KERNEL_GROUP_POSITIONS: usize = 4096;
pub(crate) const KERNEL_GROUP_BATCHES: usize = 1024;

/// Whether the GPU's gathered quantized product (`x · wᵀ`) groups its `positions` unsorted
/// index positions by weight batch inside its node rather than through graph nodes (see
/// [`record`]): where grouping pays ([`GROUP_POSITIONS`] positions and at least one a batch)
/// and its matrix-vector kernel runs (at most 8 rows a matrix of `x`, fewer than 16 a weight
/// batch on average), within that kernel's bounds.
pub(crate) fn kernel_groups(positions: usize, mrows: usize, batches: usize) -> bool {
    positions >= GROUP_POSITIONS
        && positions >= batches
        && positions <= KERNEL_GROUP_POSITIONS
        && batches <= KERNEL_GROUP_BATCHES
        && mrows <= 8
        && positions * mrows < 16 * batches
}

/// The fused node of `op` where a kernel takes it (with the offsets of the weight batches'
/// rows when the rows are sorted by `weights`' batch index), else its fallback. Unsorted
/// indices of [`GROUP_POSITIONS`] positions and more on a GPU stream are sorted first, so
/// that the kernel reads each weight batch once for a run of rows rather than once a
/// position: by the gathered quantized product's own kernel where it runs
/// ([`kernel_groups`]), else through `argsort` and `take` nodes (the products taken back into
/// the positions' order). Where that kernel groups the positions, sorted ones go to it as
/// unsorted: it finds each weight batch's rows itself, so no offsets are searched for. Every
/// product is the one the position asked for.
fn record(op: FastOp, inputs: Vec<Array>, sorted: bool, weights: &Array) -> Result<Vec<Array>> {
    let device = default_stream().device.kind;
    if !op.takes(device, &inputs) {
        return op.fallback(&inputs);
    }
    let n = inputs.len();
    let positions = inputs[n - 1].size();
    let batches: usize = weights.shape()[..weights.ndim() - 2].iter().product();
    // Rows of each matrix of x (its second-last axis).
    let mrows = inputs[0].shape().iter().rev().nth(1).copied().unwrap_or(1);
    let grouped_by_kernel = device == DeviceKind::Gpu
        && matches!(
            op,
            FastOp::GatherQmm {
                transpose: true,
                ..
            }
        )
        && kernel_groups(positions, mrows, batches);
    if grouped_by_kernel {
        return record_node(op, inputs, false, weights);
    }
    if sorted || device != DeviceKind::Gpu || positions < GROUP_POSITIONS || positions < batches {
        return record_node(op, inputs, sorted, weights);
    }
    Ok(vec![grouped(op, inputs, weights)?])
}

/// The fused node of `op` over `inputs` with the index positions sorted by weight batch, its
/// products taken back into the positions' order (see [`record`]).
fn grouped(op: FastOp, inputs: Vec<Array>, weights: &Array) -> Result<Array> {
    let n = inputs.len();
    let shape = inputs[n - 1].shape().to_vec();
    let flat = |a: &Array| crate::reshape(a, &[-1]);
    let (lhs, rhs) = (flat(&inputs[n - 2])?, flat(&inputs[n - 1])?);
    let order = crate::argsort(&rhs, Some(0))?;
    let mut grouped = inputs;
    grouped[n - 2] = crate::take(&lhs, &order, Some(0))?;
    grouped[n - 1] = crate::take(&rhs, &order, Some(0))?;
    let y = record_node(op, grouped, true, weights)?.swap_remove(0);
    // Position i's product is row `inverse[i]` of the grouped ones.
    let inverse = crate::argsort(&order, Some(0))?;
    let back = crate::take(&y, &inverse, Some(0))?;
    let mut out_shape = super::dims(&shape);
    out_shape.extend(super::dims(&y.shape()[1..]));
    crate::reshape(&back, &out_shape)
}

/// The fused node of `op` over `inputs` (a kernel takes them), with the offsets when sorted.
fn record_node(
    op: FastOp,
    mut inputs: Vec<Array>,
    sorted: bool,
    weights: &Array,
) -> Result<Vec<Array>> {
    if sorted {
        // Where each weight batch's rows start in the sorted rows.
        let rhs = &inputs[inputs.len() - 1];
        let offsets = sorted_offsets(rhs, weights)?;
        inputs.push(offsets);
    }
    Array::from_op(Primitive::Fast(op), inputs)
}

/// The uint32 batch indices of one operand: the given ones (checked to be integers), or
/// every batch of `m` in order, shaped as its batch axes.
fn indices(op: &'static str, given: Option<&Array>, m: &Array) -> Result<Array> {
    match given {
        Some(i) => {
            check_inputs(&[i])?;
            if !integral(i.dtype()) {
                return Err(invalid(
                    op,
                    format!("indices must be integers, got {}", i.dtype()),
                ));
            }
            i.astype(DType::U32)
        }
        None => {
            let batch = &m.shape()[..m.ndim() - 2];
            let n: usize = batch.iter().product();
            let all = crate::arange(0.0, n as f64, 1.0, DType::U32)?;
            crate::reshape(&all, &super::dims(batch))
        }
    }
}

/// Where each batch of `m` starts among the sorted indices `rhs` (int32, one per batch).
fn sorted_offsets(rhs: &Array, m: &Array) -> Result<Array> {
    let batches: usize = m.shape()[..m.ndim() - 2].iter().product();
    let flat = crate::reshape(rhs, &[-1])?;
    let starts = crate::arange(0.0, batches as f64, 1.0, DType::U32)?;
    crate::searchsorted(&flat, &starts, false)?.astype(DType::I32)
}

/// [`FastOp::GatherQmm`]'s fallback, `(x, w, scales, biases, lhs, rhs[, offsets])`: the
/// indexed matrices of `x` and of the packed weights with their scales and biases taken
/// out, then one batched quantized product.
fn gather_qmm_graph(
    inputs: &[Array],
    group_size: usize,
    bits: u32,
    transpose: bool,
) -> Result<Array> {
    let (lhs, rhs) = (&inputs[4], &inputs[5]);
    crate::quantized_matmul(
        &matrices(&inputs[0], lhs)?,
        &matrices(&inputs[1], rhs)?,
        &matrices(&inputs[2], rhs)?,
        &matrices(&inputs[3], rhs)?,
        transpose,
        group_size,
        bits,
    )
}

/// The matrices of `m` (its batch axes flattened) at the batch indices `at`.
fn matrices(m: &Array, at: &Array) -> Result<Array> {
    let nd = m.ndim();
    let flat = crate::reshape(
        m,
        &[-1, m.shape()[nd - 2] as isize, m.shape()[nd - 1] as isize],
    )?;
    crate::take(&flat, at, Some(0))
}

/// [`FastOp::GatherMm`]: `(a, b, lhs_indices, rhs_indices[, offsets])`.
pub(crate) struct GatherMm;

/// [`FastOp::GatherQmm`]: `(x, w, scales, biases, lhs_indices, rhs_indices[, offsets])`.
pub(crate) struct GatherQmm {
    /// Values per scale and bias.
    pub(crate) group_size: usize,
    /// Bits per value.
    pub(crate) bits: u32,
    /// `x · wᵀ` (else `x · w`).
    pub(crate) transpose: bool,
}

/// The checks both gathered products make of their indices, inputs `at` and `at + 1` (integers
/// of one shape) and the optional offsets after them (1-D integers); the output is one
/// `[m, n]` product per index, in `dtype`.
fn indexed_specs(
    c: &Checker<'_>,
    at: usize,
    [m, n]: [usize; 2],
    dtype: DType,
) -> Result<Vec<OutputSpec>> {
    c.integer(at)?;
    c.integer(at + 1)?;
    let indices = c.inputs[at].shape();
    c.shape(at + 1, indices)?;
    if c.inputs.len() == at + 3 {
        c.rank(at + 2, Some(1))?;
        c.integer(at + 2)?;
    }
    let mut shape = indices.to_vec();
    shape.extend([m, n]);
    Ok(vec![(shape, dtype)])
}

impl Fused for GatherMm {
    fn name(&self) -> &'static str {
        "gather_mm"
    }

    fn specs(&self, c: &Checker<'_>) -> Result<Vec<OutputSpec>> {
        let inputs = c.inputs;
        c.count(4, 5)?;
        let (a, b) = (&inputs[0], &inputs[1]);
        c.holds(a.ndim() >= 2 && b.ndim() >= 2, || {
            format!("matrices expected, got {:?} and {:?}", a.shape(), b.shape())
        })?;
        c.float(0)?;
        c.same_dtype(0, 1)?;
        let (m, k) = (a.shape()[a.ndim() - 2], a.shape()[a.ndim() - 1]);
        let (k2, n) = (b.shape()[b.ndim() - 2], b.shape()[b.ndim() - 1]);
        c.holds(k == k2, || format!("inner sizes {k} and {k2} differ"))?;
        indexed_specs(c, 2, [m, n], a.dtype())
    }

    fn fallback(&self, inputs: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![gather_mm_graph(inputs)?])
    }

    fn cuda(&self) -> Option<&dyn CudaKernel> {
        Some(self)
    }
}

impl Fused for GatherQmm {
    fn name(&self) -> &'static str {
        "gather_qmm"
    }

    fn specs(&self, c: &Checker<'_>) -> Result<Vec<OutputSpec>> {
        let inputs = c.inputs;
        c.count(6, 7)?;
        let (x, w, scales) = (&inputs[0], &inputs[1], &inputs[2]);
        c.holds(x.ndim() >= 2 && w.ndim() >= 2, || {
            format!("matrices expected, got {:?} and {:?}", x.shape(), w.shape())
        })?;
        c.float(0)?;
        c.same_dtype(0, 2)?;
        c.same_dtype(0, 3)?;
        c.holds(w.dtype() == DType::U32, || {
            format!("the packed matrix must be uint32, got {}", w.dtype())
        })?;
        let nd = w.ndim();
        let (g, b) = (self.group_size, self.bits as usize);
        let words = w.shape()[nd - 1];
        c.holds(
            matches!(g, 32 | 64 | 128)
                && matches!(b, 2 | 3 | 4 | 5 | 6 | 8)
                && scales.shape() == inputs[3].shape()
                && scales.ndim() == nd
                && scales.shape()[..nd - 1] == w.shape()[..nd - 1]
                && (words * 32).is_multiple_of(b)
                && words * 32 / b == scales.shape()[nd - 1] * g,
            || {
                format!(
                    "scales of shape {:?} do not fit a packed matrix of shape {:?} \
                     with group_size={g} and bits={b}",
                    scales.shape(),
                    w.shape()
                )
            },
        )?;
        let unpacked = scales.shape()[nd - 1] * g;
        let rows = w.shape()[nd - 2];
        let (k, n) = if self.transpose {
            (unpacked, rows)
        } else {
            (rows, unpacked)
        };
        let kx = x.shape()[x.ndim() - 1];
        c.holds(kx == k, || format!("inner sizes {kx} and {k} differ"))?;
        indexed_specs(c, 4, [x.shape()[x.ndim() - 2], n], x.dtype())
    }

    fn fallback(&self, inputs: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![gather_qmm_graph(
            inputs,
            self.group_size,
            self.bits,
            self.transpose,
        )?])
    }

    fn cuda(&self) -> Option<&dyn CudaKernel> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quantize;

    /// Grouping the positions by weight batch gives every position its own product, in place.
    #[test]
    fn grouped_positions_give_the_products_of_the_unsorted_ones() {
        let v: Vec<f32> = (0..5 * 8 * 32).map(|i| (i as f32 * 0.37).sin()).collect();
        let w = Array::from_slice(&v, &[5, 8, 32]).unwrap();
        let (q, s, b) = quantize(&w, 32, 4).unwrap();
        let xv: Vec<f32> = (0..3 * 2 * 32).map(|i| (i as f32 * 0.11).cos()).collect();
        let x = Array::from_slice(&xv, &[3, 2, 32]).unwrap();
        let lhs = Array::from_slice(&[2u32, 0, 1, 1, 0, 2], &[2, 3]).unwrap();
        let rhs = Array::from_slice(&[4u32, 0, 3, 0, 9, 1], &[2, 3]).unwrap();
        let plain = gather_qmm(&x, &q, &s, &b, Some(&lhs), Some(&rhs), true, 32, 4, false).unwrap();
        let op = FastOp::GatherQmm {
            group_size: 32,
            bits: 4,
            transpose: true,
        };
        let y = grouped(op, vec![x, q.clone(), s, b, lhs, rhs], &q).unwrap();
        assert_eq!(y.shape(), plain.shape());
        assert_eq!(y.to_vec::<f32>().unwrap(), plain.to_vec::<f32>().unwrap());
        // Plain weights alike.
        let a = Array::from_slice(&xv, &[3, 2, 32]).unwrap();
        let lhs = Array::from_slice(&[1u32, 2, 0, 0], &[4]).unwrap();
        let rhs = Array::from_slice(&[3u32, 1, 3, 0], &[4]).unwrap();
        let bt = crate::swapaxes(&w, -1, -2).unwrap();
        let plain = gather_mm(&a, &bt, Some(&lhs), Some(&rhs), false).unwrap();
        let y = grouped(FastOp::GatherMm, vec![a, bt.clone(), lhs, rhs], &bt).unwrap();
        assert_eq!(y.shape(), plain.shape());
        assert_eq!(y.to_vec::<f32>().unwrap(), plain.to_vec::<f32>().unwrap());
    }
}
