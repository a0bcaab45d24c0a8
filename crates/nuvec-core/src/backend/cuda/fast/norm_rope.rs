//! [`FastOp::NormRope`](crate::fast::FastOp::NormRope) on the GPU
//! (`kernels/fast/norm_rope.cu`): each row RMS-normalised, rotated and written in one kernel,
//! into a fresh output or into the cache. The cache is written in place when this evaluation
//! holds it alone, else copied first (the scatters' rule, `index.rs`), so an array that still
//! sees the old cache never sees the write.
//!
//! The result equals the norm kernel, then the rotation kernel, then the cache write, bit for
//! bit (the seeds compare them exactly): the kernel lays the row out as `rms_norm` does
//! (`norms::packs`) and rotates with the rotation kernels' arithmetic.

use cudarc::driver::{DeviceRepr, LaunchConfig};

use super::norms::{block_of, pack_mode, packs, rows_view};
use super::{CudaKernel, Place, with_copies};
use crate::array::{ArrayData, Layout};
use crate::backend::cuda::elementwise::{Strided, type_names};
use crate::backend::cuda::launch::symbol;
use crate::fast::Arg;
use crate::fast::rope::NormRope;
use crate::primitive::OutputSpec;
use crate::{DType, Result};

const COMMON: &str = include_str!("../kernels/common.cuh");
const ROWS: &str = include_str!("../kernels/fast/rows.cuh");
const NORMS: &str = include_str!("../kernels/fast/norms.cu");
const ROPE: &str = include_str!("../kernels/fast/rope.cu");
const NORM_ROPE: &str = include_str!("../kernels/fast/norm_rope.cu");

/// Blocks launched at most (the kernel loops over the rest).
const MAX_BLOCKS: usize = 1 << 20;

/// The module of these kernels over `dtype` for `p` packs a thread.
fn source(dtype: DType, p: usize) -> String {
    let (ct, tn) = type_names(dtype).expect("a float type");
    format!("{COMMON}\n{ROWS}\n{NORMS}\n{ROPE}\n{NORM_ROPE}\nNV_NORM_ROPE_P({ct}, {tn}, {p})\n")
}

/// Every module of this family over `dtype` as `(name, source, symbols)` (see
/// `norms::sources`).
#[cfg(test)]
pub(super) fn sources(dtype: DType) -> Vec<(String, String, Vec<String>)> {
    let tn = type_names(dtype).expect("a float type").1;
    super::norms::FORWARD_PACKS
        .into_iter()
        .map(|p| {
            let symbols = ["packs", "elems"].map(|m| format!("norm_rope_{m}_{tn}_{p}"));
            (
                format!("norm_rope_{tn}_{p}"),
                source(dtype, p),
                symbols.to_vec(),
            )
        })
        .collect()
}

impl CudaKernel for NormRope {
    /// `([cache,] x, w[, freqs])`: `x` 4-D of a kernel type with rows the registers hold,
    /// the weight and cache of its type, the frequencies float32.
    fn takes(&self, inputs: &[Arg<'_>]) -> bool {
        let at = usize::from(self.cache);
        let (Some(x), Some(w)) = (inputs.get(at), inputs.get(at + 1)) else {
            return false;
        };
        x.kernel_float()
            && x.shape.len() == 4
            && x.size() > 0
            && x.size() < u32::MAX as usize
            && w.dtype == x.dtype
            && packs(x.last(), x.dtype.size(), 8).is_some()
            && inputs.get(at + 2).is_none_or(|f| f.dtype == DType::F32)
            && (!self.cache || (inputs[0].dtype == x.dtype && inputs[0].shape.len() == 4))
            && inputs.len() <= at + 3
    }

    fn eval(
        &self,
        place: &Place,
        inputs: &mut [ArrayData],
        _: &[OutputSpec],
    ) -> Result<Vec<ArrayData>> {
        // The cache is the destination, not read by the kernel: only the rows' inputs may
        // need row-major copies.
        let at = usize::from(self.cache);
        let (cache, rest) = inputs.split_at_mut(at);
        let mut cache = cache.first_mut();
        with_copies(place, "norm_rope", rest, |i| {
            norm_rope(place, self, cache.as_deref_mut(), i)
        })
    }
}

/// The rows of `(x, w[, freqs])` normalised and rotated into `cache` (taken over or copied)
/// or a fresh output; `None` for layouts the kernel cannot read.
fn norm_rope(
    place: &Place,
    p: &NormRope,
    cache: Option<&mut ArrayData>,
    inputs: &[ArrayData],
) -> Result<Option<Vec<ArrayData>>> {
    let (x, w) = (&inputs[0], &inputs[1]);
    let dtype = x.dtype();
    let shape = x.layout.shape.clone();
    let (positions, n) = (shape[2], shape[3]);
    let half = p.angles.dims / 2;
    let Some((lanes, packs_a_thread)) = packs(n, dtype.size(), 8) else {
        return Ok(None);
    };
    let Some((rows, xs)) = rows_view(&x.layout) else {
        return Ok(None);
    };
    let freqs = inputs.get(2);
    if freqs.is_some_and(|f| f.layout.shape != [half]) {
        return Ok(None);
    }
    // The weight: its first element and step, or none (no norm, or a 0-D weight).
    let (wp, ws) = match (p.eps, w.layout.shape.as_slice()) {
        (Some(_), [len]) if *len == n => (
            place.input(w)? + (w.layout.offset * dtype.size()) as u64,
            w.layout.strides[0] as i64,
        ),
        (Some(_), []) | (None, _) => (0u64, 0i64),
        _ => return Ok(None),
    };
    let xp = place.input(x)?;
    let (fp, fstride) = match freqs {
        Some(f) => (
            place.input(f)? + (f.layout.offset * 4) as u64,
            f.layout.strides[0] as i64,
        ),
        None => (0u64, 0i64),
    };
    // The destination: rows `loff..` of `lc` per (batch, head) entry, row-major.
    let lc = cache.as_ref().map_or(positions, |c| c.layout.shape[2]);
    let Some((dst_rows, _)) = rows_view(&Layout::contiguous(&[shape[0] * shape[1] * lc, n])) else {
        return Ok(None);
    };
    let (out, dst) = match cache {
        Some(c) => match super::super::index::target(place, c)? {
            Some(target) => target,
            None => return Ok(None),
        },
        None => place.output(dtype, &shape)?,
    };
    let loff = if p.cache { p.offset } else { 0 };
    let nrows = x.layout.size() / n;
    let one = Strided::of(&Layout::contiguous(&[1]))?;
    let mut views = vec![(xp, &rows, xs), (dst, &dst_rows, 1)];
    if wp != 0 {
        views.push((wp, &one, ws));
    }
    let mode = pack_mode(n, dtype, &views);
    let tn = type_names(dtype).expect("a float type").1;
    let f = place.gpu.kernel_in(
        "norm_rope",
        Some(dtype),
        packs_a_thread as u32,
        symbol!("norm_rope_{mode}_{tn}_{packs_a_thread}")?,
        || source(dtype, packs_a_thread),
    )?;
    let block = block_of(lanes);
    let groups = block / lanes;
    // A float row a group, the normalised row's exchange.
    let span = lanes * packs_a_thread * (16 / dtype.size());
    let shared = groups * span * 4;
    if shared > 48 << 10 {
        f.allow_shared(place.gpu.props.shared_per_block)?;
    }
    // As the rotation kernel: inv_freq[i] = exp(i · step) in float32, step = −ln(base) / half.
    let step = (-f64::from(p.angles.base).ln() / half.max(1) as f64) as f32;
    let normed = i32::from(p.eps.is_some());
    let eps = p.eps.unwrap_or(0.0);
    // The offset as the rotation kernel reads it: an int32, then a float.
    let off = p.offset as i32 as f32;
    let trad = i32::from(p.angles.traditional);
    let (nr, n64, pos64, lc64, loff64) = (
        nrows as i64,
        n as i64,
        positions as i64,
        lc as i64,
        loff as i64,
    );
    let (half64, lanes32) = (half as i64, lanes as i32);
    let params: [&dyn DeviceRepr; 21] = [
        &xp,
        &rows,
        &xs,
        &wp,
        &ws,
        &dst,
        &nr,
        &n64,
        &pos64,
        &lc64,
        &loff64,
        &normed,
        &eps,
        &off,
        &p.angles.scale,
        &step,
        &fp,
        &fstride,
        &half64,
        &trad,
        &lanes32,
    ];
    let cfg = LaunchConfig {
        grid_dim: (nrows.div_ceil(groups).clamp(1, MAX_BLOCKS) as u32, 1, 1),
        block_dim: (block as u32, 1, 1),
        shared_mem_bytes: shared as u32,
    };
    // SAFETY: `rows` (x's layout without its last axis) locates each of the `nrows` rows of
    // x's block, their `n` elements `xs` apart; `wp` is null or the first of `n` weights `ws`
    // apart; `fp` is null or the first of `half` floats `fstride` apart; `dst` is a row-major
    // block of this evaluation's own (fresh, copied or taken over) of `B · H · lc` rows of
    // `n` elements, and row `(t / L) · lc + loff + t % L` lies inside it for every row t
    // (the unit's checks: `loff + L <= lc`); the packed kernel gets only aligned rows
    // (`packable`); `shared` bytes hold each group's row (the limit raised above 48 KiB);
    // the arguments match `norm_rope_*`.
    unsafe { f.launch(&place.stream, cfg, &params) }?;
    Ok(Some(vec![out]))
}
