//! [`FastOp::Rope`](crate::fast::FastOp::Rope) on the GPU (`kernels/fast/rope.cu`), as the CPU
//! kernel computes it (`backend/cpu/fast/rope.rs`): angles, sines and cosines in float32,
//! each rotated value rounded once. The input is read through its strides (a transposed
//! `[B, H, L, D]` view of `[B, L, H, D]` needs no copy), the output is row-major. Rows of step
//! 1 rotated whole and 16-byte aligned run `rope_heads_*`: the heads of one position share
//! their sines and cosines (computed once a block, into shared memory) and move in 16-byte
//! packs, two a thread in flight (copying a position's rows into shared memory with
//! `cp.async` while the angles are computed was 7% slower on the H200), their rows found by
//! steps proved from the view (`addressing`) rather than located one by one; other rows run
//! `rope_rows_*`, a warp per row.
//!
//! The kernel takes what the CPU's does ([`Rope::kernel_takes`]); leading axes that do not
//! merge into eight are copied first.

use std::sync::OnceLock;

use cudarc::driver::{DeviceRepr, LaunchConfig};

use super::norms::rows_view;
use super::{CudaKernel, Place, with_copies};
use crate::array::ArrayData;
use crate::backend::cuda::elementwise::{Strided, type_names};
use crate::backend::cuda::launch::symbol;
use crate::fast::Arg;
use crate::fast::rope::Rope;
use crate::primitive::OutputSpec;
use crate::{DType, Result};

impl CudaKernel for Rope {
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        self.kernel_takes(inputs)
    }

    fn eval(
        &self,
        place: &Place,
        inputs: &mut [ArrayData],
        _: &[OutputSpec],
    ) -> Result<Vec<ArrayData>> {
        with_copies(place, "rope", inputs, |i| rope(place, i, self))
    }
}

const COMMON: &str = include_str!("../kernels/common.cuh");
const ROWS: &str = include_str!("../kernels/fast/rows.cuh");
const ROPE: &str = include_str!("../kernels/fast/rope.cu");

/// Threads per block (`NV_THREADS` in `rope.cu`), a warp per row.
const THREADS: usize = 256;
/// Items a thread of `rope_heads_*` takes at once (`NV_ROPE_ITEMS` in `rope.cu`).
const ITEMS: usize = 2;
/// Blocks launched at most (the kernel loops over the rest).
const MAX_BLOCKS: usize = 1 << 20;
/// The module of the rotation kernel of elements of `dtype`.
pub(super) fn source(dtype: DType) -> String {
    let (ct, tn) = type_names(dtype).expect("a float type");
    format!("{COMMON}\n{ROWS}\n{ROPE}\nNV_ROPE({ct}, {tn})\n")
}

/// Whether `rope_heads_*` takes `x` (its buffer at device address `xp`, elements `s` apart
/// along a row; see `nv_rope_heads`): rows of step 1 rotated whole, every row 16 bytes
/// aligned, a row's chunks within one block, and a batch entry's rows a whole number of
/// `positions` each. Returns the chunks of a row and the rows that share a position.
fn heads_layout(
    x: &ArrayData,
    xp: u64,
    p: &Rope,
    s: i64,
    positions: usize,
    per_batch: usize,
) -> Option<(usize, usize)> {
    let size = x.dtype().size();
    let pack = 16 / size;
    let d = *x.layout.shape.last()?;
    let half = p.angles.dims / 2;
    let nd = x.layout.shape.len();
    let aligned = |bytes: usize| bytes.is_multiple_of(16);
    let rows_aligned = x.layout.strides[..nd - 1]
        .iter()
        .zip(&x.layout.shape)
        .all(|(&st, &n)| n == 1 || aligned(st.unsigned_abs() * size));
    let chunks = if p.angles.traditional {
        d / pack
    } else {
        half / pack
    };
    let fits = s == 1
        && p.angles.dims == d
        && aligned(xp as usize + x.layout.offset * size)
        && rows_aligned
        && if p.angles.traditional {
            d.is_multiple_of(pack)
        } else {
            half.is_multiple_of(pack)
        }
        && (1..=THREADS).contains(&chunks)
        && positions > 0
        && per_batch.is_multiple_of(positions);
    fits.then_some((chunks, per_batch / positions))
}

/// The step in elements between the rows of consecutive heads of one task of
/// `rope_heads_*` (rows `t` and `t + positions`, `t` in a batch entry of `heads · positions`
/// rows), where the `rows` view makes it one step for all of them: `positions` must end
/// within an axis (counted from the innermost) at a whole number `q` of its indices, and
/// that axis hold a whole number of `q · heads`; the heads then move that axis's index by
/// `q` each, never carrying into the next axis. `None` otherwise (the kernel locates every
/// row).
fn head_step(rows: &Strided, positions: usize, heads: usize) -> Option<i64> {
    if heads <= 1 {
        return Some(0);
    }
    let (positions, heads) = (positions as i64, heads as i64);
    let mut inner = 1i64;
    for (extent, stride) in rows.axes().rev() {
        if inner * extent > positions {
            let q = positions / inner;
            return (positions % inner == 0 && extent % (q * heads) == 0).then_some(q * stride);
        }
        inner *= extent;
    }
    None
}

/// How `rope_heads_*` finds a task's rows (see `nv_rope_heads`): `(hstep, addressing, estep,
/// lstep)`, with `addressing` 2 where row `e · per_batch + l + h · positions` of the `rows`
/// view sits at `offset + e · estep + l · lstep + h · hstep`, 1 where only the heads' step
/// holds, 0 where every row is located; at most `NUVEC_ROPE_ADDRESSING` where that is set (a
/// knob for comparing the three).
fn addressing(
    rows: &Strided,
    heads: Option<(usize, usize)>,
    entries: usize,
    positions: usize,
    per_batch: usize,
) -> (i64, i32, i64, i64) {
    let Some(hstep) = heads.and_then(|(_, h)| head_step(rows, positions, h)) else {
        return (0, 0, 0, 0);
    };
    // The entries' step (rows `t` and `t + e · per_batch`, `t` in the first entry) and the
    // positions' (rows `l` and `0`, `l` in the first entry's first head): the heads' proof
    // with one entry, or one position, in place of the task's rows.
    let found = match (
        head_step(rows, per_batch, entries),
        head_step(rows, 1, positions),
    ) {
        (Some(estep), Some(lstep)) => (hstep, 2, estep, lstep),
        _ => (hstep, 1, 0, 0),
    };
    static MOST: OnceLock<Option<i32>> = OnceLock::new();
    let most = *MOST.get_or_init(|| {
        std::env::var("NUVEC_ROPE_ADDRESSING")
            .ok()
            .and_then(|v| v.trim().parse().ok())
    });
    match most {
        Some(0) => (0, 0, 0, 0),
        Some(1) => (found.0, 1, 0, 0),
        _ => found,
    }
}

/// `(x, offset[, freqs])` rotated, or `None` where the fallback graph runs instead (see
/// the module's documentation).
fn rope(place: &Place, inputs: &[ArrayData], p: &Rope) -> Result<Option<Vec<ArrayData>>> {
    let x = &inputs[0];
    let dtype = x.dtype();
    let shape = x.layout.shape.clone();
    let nd = shape.len();
    if nd < 3 || !(2..=3).contains(&inputs.len()) {
        return Ok(None);
    }
    let (b, t, d) = (shape[0], shape[nd - 2], shape[nd - 1]);
    let half = p.angles.dims / 2;
    if p.angles.dims == 0 || !p.angles.dims.is_multiple_of(2) || p.angles.dims > d {
        return Ok(None);
    }
    let off = &inputs[1];
    let unsigned = match off.dtype() {
        DType::I32 => 0i32,
        DType::U32 => 1,
        _ => return Ok(None),
    };
    let count = off.layout.size();
    if off.layout.shape.len() > 1 || (count != 1 && count != b) {
        return Ok(None);
    }
    let freqs = inputs.get(2);
    if freqs.is_some_and(|f| f.dtype() != DType::F32 || f.layout.shape != [half]) {
        return Ok(None);
    }
    let Some((rows, s)) = rows_view(&x.layout) else {
        return Ok(None);
    };
    let (y, yp) = place.output(dtype, &shape)?;
    let size = x.layout.size();
    if size == 0 {
        return Ok(Some(vec![y]));
    }
    let nrows = size / d;
    let xp = place.input(x)?;
    // The offsets: element 0 and the step between batch entries (0: one for all).
    let op = place.input(off)? + (off.layout.offset * 4) as u64;
    let ostride: i64 = if count == 1 {
        0
    } else {
        off.layout.strides[0] as i64
    };
    let (fp, fstride) = match freqs {
        Some(f) => (
            place.input(f)? + (f.layout.offset * 4) as u64,
            f.layout.strides[0] as i64,
        ),
        None => (0u64, 0i64),
    };
    // As the CPU kernel: inv_freq[i] = exp(i · step) in float32, step = −ln(base) / half.
    let step = (-f64::from(p.angles.base).ln() / half as f64) as f32;
    let tn = type_names(dtype).expect("a float type").1;
    let per_batch = nrows / b;
    let heads = heads_layout(x, xp, p, s, t, per_batch);
    let (hstep, addressing, estep, lstep) = addressing(&rows, heads, b, t, per_batch);
    let (name, cfg) = match heads {
        Some((chunks, heads)) => {
            // Every head of a position in one block, ITEMS (head, chunk) items a thread; the
            // pairs' cosines and sines in shared memory.
            let threads = (chunks * heads)
                .div_ceil(ITEMS)
                .next_multiple_of(32)
                .clamp(32, THREADS);
            let cfg = LaunchConfig {
                grid_dim: ((nrows / heads).clamp(1, MAX_BLOCKS) as u32, 1, 1),
                block_dim: (threads as u32, 1, 1),
                shared_mem_bytes: (2 * half * 4) as u32,
            };
            let name = symbol!("rope_heads_{tn}")?;
            (name, cfg)
        }
        None => {
            let cfg = LaunchConfig {
                grid_dim: (
                    nrows.div_ceil(THREADS / 32).clamp(1, MAX_BLOCKS) as u32,
                    1,
                    1,
                ),
                block_dim: (THREADS as u32, 1, 1),
                shared_mem_bytes: 0,
            };
            (symbol!("rope_rows_{tn}")?, cfg)
        }
    };
    let f = place
        .gpu
        .kernel_of("rope", Some(dtype), name, || source(dtype))?;
    let (nr, d64, t64) = (nrows as i64, d as i64, t as i64);
    let per_batch = per_batch as i64;
    let half64 = half as i64;
    let (trad, fwd) = (i32::from(p.angles.traditional), i32::from(p.forward));
    let params: [&dyn DeviceRepr; 22] = [
        &xp,
        &rows,
        &s,
        &yp,
        &nr,
        &d64,
        &t64,
        &per_batch,
        &op,
        &ostride,
        &unsigned,
        &fp,
        &fstride,
        &step,
        &p.angles.scale,
        &half64,
        &trad,
        &fwd,
        &hstep,
        &addressing,
        &estep,
        &lstep,
    ];
    // SAFETY: `rows` (x's layout without its last axis) locates each of the `nrows` rows
    // inside x's block, their `d` elements `s` apart; `op` points at the first of 1 or `b`
    // 32-bit offsets `ostride` apart (batch entries `0..b`, as `t / per_batch < b`); `fp`
    // is null or points at the first of `half` floats `fstride` apart; `yp` is a fresh
    // row-major block of `nrows · d` elements of x's type; `addressing` 1 or 2: row `t + h ·
    // positions` of a task lies `h · hstep` elements after row `t`, and 2: row `e · per_batch
    // + l` at `e · estep + l · lstep` from the view's offset (`addressing`); the
    // arguments match `rope_rows_*` and `rope_heads_*` in `rope.cu`.
    unsafe { f.launch(&place.stream, cfg, &params) }?;
    Ok(Some(vec![y]))
}

#[cfg(test)]
mod tests {
    use super::{addressing, head_step};
    use crate::array::Layout;
    use crate::backend::cuda::elementwise::Strided;

    fn view(shape: &[usize], strides: &[isize]) -> Strided {
        let layout = Layout {
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            offset: 0,
        };
        Strided::of(&layout).expect("a view of few axes")
    }

    /// The rows of a `[B, L, H, D]` input read as `[B, H, L, D]` (the benchmark's layout).
    fn transposed_rows(b: usize, l: usize, h: usize, d: usize) -> Strided {
        view(
            &[b, h, l],
            &[(l * h * d) as isize, d as isize, (h * d) as isize],
        )
    }

    /// The offset of row `i` of `rows` from the view's own, located directly.
    fn at(rows: &Strided, mut i: i64) -> i64 {
        let mut off = 0;
        for (extent, stride) in rows.axes().rev() {
            off += (i % extent) * stride;
            i /= extent;
        }
        off
    }

    /// Whether `step` separates the heads' rows of every task of `nrows` rows, each row
    /// located directly.
    fn holds(rows: &Strided, nrows: usize, positions: usize, heads: usize, step: i64) -> bool {
        let at = |i| at(rows, i);
        let per_batch = positions * heads;
        (0..nrows / per_batch).all(|e| {
            (0..positions).all(|l| {
                let first = (e * per_batch + l) as i64;
                (0..heads as i64).all(|h| at(first + h * positions as i64) == at(first) + h * step)
            })
        })
    }

    #[test]
    fn head_steps_follow_the_rows_view() {
        // [B, L, H, D] read as [B, H, L] rows: the head axis's stride.
        let (b, l, h, d) = (2, 5, 3, 8);
        let t = transposed_rows(b, l, h, d);
        assert_eq!(head_step(&t, l, h), Some(d as i64));
        assert!(holds(&t, b * h * l, l, h, d as i64));
        // Row-major rows (one merged axis): a position block's rows apart.
        let c = view(
            &[b, h, l],
            &[(h * l * d) as isize, (l * d) as isize, d as isize],
        );
        assert_eq!(head_step(&c, l, h), Some((l * d) as i64));
        assert!(holds(&c, b * h * l, l, h, (l * d) as i64));
        // Positions ending inside an axis that wraps between a task's heads: none.
        let w = view(&[3, 4], &[100, 1]);
        assert_eq!(head_step(&w, 2, 3), None);
        // One head: any step.
        assert_eq!(head_step(&w, 4, 1), Some(0));
    }

    #[test]
    fn tasks_are_found_by_steps_where_the_view_allows() {
        // [B, L, H, D] read as [B, H, L] rows: every row by the three steps.
        let (b, l, h, d) = (3, 5, 4, 8);
        let t = transposed_rows(b, l, h, d);
        let (hstep, mode, estep, lstep) = addressing(&t, Some((1, h)), b, l, h * l);
        assert_eq!(mode, 2);
        for row in 0..(b * h * l) as i64 {
            let (e, r) = (row / (h * l) as i64, row % (h * l) as i64);
            let (hh, p) = (r / l as i64, r % l as i64);
            assert_eq!(at(&t, row), e * estep + p * lstep + hh * hstep, "row {row}");
        }
        // Positions split over two axes ([B, H, 2, 3] rows): the heads' step only.
        let s = view(&[2, 2, 2, 3], &[1000, 100, 10, 1]);
        assert_eq!(addressing(&s, Some((1, 2)), 2, 6, 12).1, 1);
        // No heads' step: every row located.
        assert_eq!(addressing(&s, None, 2, 6, 12).1, 0);
    }
}
