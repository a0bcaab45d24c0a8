//! `gather_mm` ([`GatherMm`]) on the GPU, f16 and bf16: one launch of the tiled tensor-core
//! kernel (`tiled.rs`) with plain weights, for every index position whichever matrix of `b`
//! it picks, so no matrix is copied out per index (the fallback's `take` copies one per index
//! position). With sorted indices (`offsets` given) a block multiplies a run of rows of one
//! matrix, which is read once for every tile of its rows; unsorted, each index position's rows
//! go alone.
//!
//! `b` is read in place when row-major (`[..., K, N]`) or when its matrices are the transposes
//! of row-major `[..., N, K]` ones (`swapaxes(-1, -2)` of a linear layer's weights), from a
//! 16-byte-aligned start; any other layout is copied row-major first. Inner and output sizes
//! must be multiples of 8 (16-byte rows). f32, other sizes, and devices whose blocks cannot
//! have the tiles' shared memory run the fallback graph.

use super::super::Place;
use super::super::fast::{CudaKernel, nested, row_major};
use super::tiled::{self, Operands, PLAIN, Rows, TiledArgs};
use super::{aligned, repeated};
use crate::array::{ArrayData, Layout};
use crate::fast::Arg;
use crate::fast::gather::GatherMm;
use crate::primitive::OutputSpec;
use crate::{DType, Result};

/// The sizes of one gathered product.
#[derive(Debug, Clone, Copy)]
struct Dims {
    /// Rows of each matrix of `a`, its inner axis and the outputs a row.
    mrows: usize,
    k: usize,
    n: usize,
    /// Matrices of `a` and of `b`, and index positions.
    xmats: usize,
    experts: usize,
    indices: usize,
}

/// The sizes of `(a, b, lhs, ...)` of these shapes, or `None` where the kernel does not take
/// them.
fn dims(shapes: &[&[usize]]) -> Option<Dims> {
    let (a, b) = (shapes[0], shapes[1]);
    let (an, bn) = (a.len(), b.len());
    if an < 2 || bn < 2 {
        return None;
    }
    let d = Dims {
        mrows: a[an - 2],
        k: a[an - 1],
        n: b[bn - 1],
        xmats: a[..an - 2].iter().product(),
        experts: b[..bn - 2].iter().product(),
        indices: shapes[2].iter().product(),
    };
    let big = |v: usize| v > i32::MAX as usize;
    let sizes = [d.mrows, d.k, d.n, d.xmats, d.experts, d.indices];
    (!sizes.contains(&0)
        && b[bn - 2] == d.k
        && d.k.is_multiple_of(8)
        && d.n.is_multiple_of(8)
        && !big(d.k)
        && !big(d.n)
        && !big(d.mrows)
        && d.indices
            .checked_mul(d.mrows)
            .is_some_and(|m| m < i64::MAX as usize))
    .then_some(d)
}

/// Whether the matrices of `b` (`[..., K, N]`) are the transposes of row-major `[..., N, K]`
/// ones: the K axis of step 1, the N axis of step K, the batch axes row-major over them (axes
/// of one element may have any step).
fn transposed_matrices(l: &Layout) -> bool {
    let nd = l.shape.len();
    let (k, n) = (l.shape[nd - 2], l.shape[nd - 1]);
    let mut want = (k * n) as isize;
    let batch_ok = (0..nd - 2).rev().all(|i| {
        let ok = l.shape[i] == 1 || l.strides[i] == want;
        want *= l.shape[i] as isize;
        ok
    });
    batch_ok && (k == 1 || l.strides[nd - 2] == 1) && (n == 1 || l.strides[nd - 1] == k as isize)
}

impl CudaKernel for GatherMm {
    /// `(a, b, lhs, rhs[, offsets])`: `a` and `b` f16 or bf16 of one type, uint32 indices,
    /// int32 offsets; sizes as [`dims`] says.
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        if !(4..=5).contains(&inputs.len()) {
            return false;
        }
        let dtype = inputs[0].dtype;
        let types = matches!(dtype, DType::F16 | DType::BF16)
            && inputs[1].dtype == dtype
            && inputs[2].dtype == DType::U32
            && inputs[3].dtype == DType::U32
            && inputs
                .get(4)
                .is_none_or(|o| o.dtype == DType::I32 && o.shape.len() == 1);
        let shapes: Vec<&[usize]> = inputs.iter().map(|a| a.shape).collect();
        types && dims(&shapes).is_some()
    }

    /// Not recorded into CUDA graphs: on devices whose blocks lack the tiles' shared memory the
    /// node runs its fallback graph.
    fn batchable(&self, _inputs: &[Arg<'_>]) -> bool {
        false
    }

    fn eval(
        &self,
        place: &Place,
        inputs: &mut [ArrayData],
        outputs: &[OutputSpec],
    ) -> Result<Vec<ArrayData>> {
        let shapes: Vec<&[usize]> = inputs.iter().map(|d| d.layout.shape.as_slice()).collect();
        let Some(d) = dims(&shapes) else {
            return nested(place, self, inputs, outputs);
        };
        let dtype = inputs[0].dtype();
        let sorted = inputs.len() == 5 && d.experts <= tiled::MAX_EXPERTS;
        let rows = d.indices * d.mrows;
        // Rows a matrix of `b` on average (sorted), else an index position's.
        let per_matrix = if sorted {
            rows.div_ceil(d.experts.min(d.indices))
        } else {
            d.mrows
        };
        // `b` in place where its matrices are row-major or transposed ones, from 16 bytes.
        let size = dtype.size();
        let b_start = |b: &ArrayData| -> Result<u64> {
            Ok(place.input(b)? + (b.layout.offset * size) as u64)
        };
        let (b, transpose) = if transposed_matrices(&inputs[1].layout) {
            (inputs[1].clone(), true)
        } else {
            (row_major(place, &inputs[1])?, false)
        };
        let (b, transpose) = if b_start(&b)?.is_multiple_of(16) {
            (b, transpose)
        } else {
            (aligned(place, &b)?.0, false)
        };
        let fitting = [tiled::warp_tiles(per_matrix), 2]
            .into_iter()
            .find(|&mt| tiled::fits(place, dtype, PLAIN, transpose, mt));
        let Some(mt) = fitting else {
            return nested(place, self, inputs, outputs);
        };
        let mut args = TiledArgs {
            m: rows as i64,
            n: d.n as i64,
            // Words between matrices: K · N values of two bytes.
            w_batch: (d.k * d.n / 2) as i64,
            xmats: d.xmats as i64,
            experts: d.experts as i64,
            indices: d.indices as i64,
            k: d.k as i32,
            wrow: if transpose { d.k } else { d.n } as i32,
            mrows: d.mrows as i32,
            ..Default::default()
        };
        let how = if sorted { Rows::Sorted } else { Rows::PerIndex };
        // Sorted rows walk their tiles (any count fits); an index position's tiles along y
        // must fit the grid.
        if how == Rows::PerIndex && tiled::grid(how, &args, mt).is_none() {
            return nested(place, self, inputs, outputs);
        }
        let w = b_start(&b)?;
        let (_a, x) = aligned(place, &inputs[0])?;
        let (_l, lhs, lhs_repeat) = repeated(place, &inputs[2])?;
        args.lhs_repeat = lhs_repeat;
        let (_r, rhs) = aligned(place, &inputs[3])?;
        let offsets = match sorted {
            true => Some(aligned(place, &inputs[4])?),
            false => None,
        };
        let offs = offsets.as_ref().map_or(0, |o| o.1);
        let (out, y) = place.output(dtype, &outputs[0].0)?;
        let ops = Operands {
            x,
            w,
            scales: 0,
            biases: 0,
            y,
            lhs,
            rhs,
            offs,
        };
        // SAFETY: `x` holds `xmats · mrows` rows of `k` values, `w` `experts` matrices of
        // `k · n` values of `dtype` (rows of `k` values with `transpose`, else of `n`; `k` and
        // `n` multiples of 8) from a 16-byte-aligned start, the indices `indices` uint32 (lhs
        // `indices / lhs_repeat`, `repeated`) and the offsets `experts` int32 (when sorted),
        // row-major from 16-byte-aligned starts (`aligned`; the node's specs checked the
        // shapes); `y` is a fresh block of `indices · mrows · n` values; `b` and the copies are
        // held until the work is queued.
        unsafe { tiled::launch(place, dtype, PLAIN, transpose, how, mt, &ops, args)? };
        Ok(vec![out])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_the_kernel_takes() {
        let d = dims(&[&[2, 5, 64], &[4, 64, 96], &[3, 2]]).expect("taken");
        assert_eq!((d.mrows, d.k, d.n), (5, 64, 96));
        assert_eq!((d.xmats, d.experts, d.indices), (2, 4, 6));
        // Inner or output sizes not multiples of 8, mismatched inner sizes, empty operands.
        assert!(dims(&[&[5, 60], &[60, 96], &[1]]).is_none());
        assert!(dims(&[&[5, 64], &[64, 90], &[1]]).is_none());
        assert!(dims(&[&[5, 64], &[32, 96], &[1]]).is_none());
        assert!(dims(&[&[0, 64], &[64, 96], &[1]]).is_none());
        assert!(dims(&[&[5, 64], &[64, 96], &[0]]).is_none());
    }

    #[test]
    fn transposed_matrices_are_found_in_their_layouts() {
        let with = |shape: &[usize], strides: &[isize]| Layout {
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            offset: 0,
        };
        // [E, N, K] row-major, swapped: [E, K, N] with strides [N·K, 1, K].
        assert!(transposed_matrices(&with(&[3, 16, 8], &[128, 1, 16])));
        assert!(transposed_matrices(&with(&[16, 8], &[1, 16])));
        // One batch axis of one element may have any step.
        assert!(transposed_matrices(&with(&[1, 16, 8], &[7, 1, 16])));
        // Row-major, and a transposed batch, are not.
        assert!(!transposed_matrices(&with(&[3, 16, 8], &[128, 8, 1])));
        assert!(!transposed_matrices(&with(&[3, 16, 8], &[1, 3, 48])));
        assert!(!transposed_matrices(&with(
            &[2, 3, 16, 8],
            &[128, 256, 1, 16]
        )));
    }
}
