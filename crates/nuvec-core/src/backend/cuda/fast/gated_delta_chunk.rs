//! The gated delta rule over long sequences in chunks of 64 steps on the tensor cores
//! (`kernels/fast/gated_delta_chunk.cu`, whose top derives the form): the WY / UT form of
//! flash-linear-attention's `chunk_gated_delta_rule`, with the recurrence across chunks in
//! float32.
//!
//! Two launches. The first forms, for every chunk of every head at once, the chunk's operands
//! that do not depend on the state entering it (`W`, the decayed keys, the decayed queries,
//! the masked and decayed `Q Kᵀ`, `U` and the chunk's decay) into a workspace; the second walks
//! the chunks in order, 32 state rows a block, the state in registers, and writes each chunk's
//! outputs as it goes. (flash-linear-attention's split, the walk writing each chunk's entering
//! state for a third launch to form the outputs from, was 7% slower on the H200 at 32 heads of
//! 4,096 steps: the states' round trip through memory costs more than the walk saves.)
//!
//! Taken for the final state only (every step's state and the slots keep the recurrent
//! kernel), q and v of a half type (the tensor cores' operand type; q's), `Dk` and `Dv` each 64
//! or 128, and at least [`CHUNKED_FROM`] steps. The products round q, k, v, the state and the
//! chunk's operands to q's type with float32 accumulation (flash-linear-attention's rounding),
//! so results differ from the recurrent kernel's by about that type's precision.

use cudarc::driver::{DeviceRepr, LaunchConfig};

use super::{COMMON, GATED_DELTA, Place, sequence_args, starts};
use crate::array::ArrayData;
use crate::backend::cuda::elementwise::type_names;
use crate::backend::cuda::launch::symbol;
use crate::{DType, Error, Result};

const FLASH: &str = include_str!("../kernels/fast/flash.cu");
const CHUNK: &str = include_str!("../kernels/fast/gated_delta_chunk.cu");

/// Steps a chunk (`NV_GDC_C`).
const C: usize = 64;
/// State rows a block of the second kernel (`NV_GDC_RV`).
const RV: usize = 32;
/// Threads a block of every kernel (`NV_GDC_THREADS`).
const THREADS: u32 = 128;
/// The key and value sizes with kernels.
const SIZES: [usize; 2] = [64, 128];
/// The fewest steps that take the chunked form. One chunk already replaces 64 dependent
/// steps by a few tensor-core products; the H200 run should tune this against the recurrent
/// kernel, which stays ahead where the batch alone fills the device.
pub(super) const CHUNKED_FROM: usize = 64;

/// The module of the kernels over states of `state`: both operand types, every size.
fn source(state: DType) -> String {
    let (sct, stn) = type_names(state).expect("a float type");
    let mut s = format!("{COMMON}\n{GATED_DELTA}\n{FLASH}\n{CHUNK}\n");
    for ty in [DType::BF16, DType::F16] {
        let (ct, tn) = type_names(ty).expect("a float type");
        for dk in SIZES {
            for dv in SIZES {
                s.push_str(&format!("NV_GDC_PREP({ct}, {tn}, {dk}, {dv})\n"));
                s.push_str(&format!(
                    "NV_GDC_STATE({ct}, {tn}, {sct}, {stn}, {dk}, {dv})\n"
                ));
            }
        }
    }
    s
}

/// Every module of this form, for compiling ahead of time.
#[cfg(test)]
pub(super) fn all_sources() -> Vec<(String, String)> {
    super::TYPES
        .into_iter()
        .map(|d| {
            let tn = type_names(d).expect("a float type").1;
            (format!("gated_delta_chunk_{tn}"), source(d))
        })
        .collect()
}

/// Whether the chunked form takes the sequences `[q, k, v, g, beta]` (see the module's docs):
/// the grids' blocks must also fit in 31 bits.
pub(super) fn takes(inputs: &[ArrayData]) -> bool {
    let [q, _, v, ..] = inputs else {
        return false;
    };
    let (qs, vs) = (&q.layout.shape, &v.layout.shape);
    if qs.len() != 4 || vs.len() != 4 {
        return false;
    }
    let (b, t, dk, hv, dv) = (qs[0], qs[1], qs[3], vs[2], vs[3]);
    let blocks = b.checked_mul(hv).and_then(|n| n.checked_mul(t.div_ceil(C)));
    matches!(q.dtype(), DType::BF16 | DType::F16)
        && v.dtype() == q.dtype()
        && SIZES.contains(&dk)
        && SIZES.contains(&dv)
        && t >= CHUNKED_FROM
        && blocks.is_some_and(|n| n > 0 && n <= i32::MAX as usize)
}

/// Which of q, k and v (bits 0, 1, 2) the first kernel copies 16 bytes at a time
/// (`nv_gdc_stage`): of q's type (the products'), contiguous along the feature, every row
/// starting 16 bytes aligned.
fn vector_inputs(inputs: &[ArrayData], ptrs: &[u64; 5]) -> i32 {
    let dtype = inputs[0].dtype();
    let per = (16 / dtype.size()) as isize;
    let mut bits = 0;
    for (i, (a, &p)) in inputs[..3].iter().zip(ptrs).enumerate() {
        let st = &a.layout.strides;
        if a.dtype() == dtype
            && st.len() == 4
            && st[3] == 1
            && st[..3].iter().all(|&s| s % per == 0)
            && p.is_multiple_of(16)
        {
            bits |= 1 << i;
        }
    }
    bits
}

/// Dynamic shared memory of the first kernel (`NvGdcPrepShape`).
fn prep_shared(dk: usize, dv: usize) -> usize {
    (2 * C * (dk + 8) + C * (dv + 8)) * 2 + (2 * C * (C + 1) + 4 * C) * 4
}

/// Dynamic shared memory of the second kernel (`NvGdcStateShape`).
fn state_shared(dk: usize) -> usize {
    (2 * (3 * C * (dk + 8) + C * (C + 8)) + RV * (dk + 8) + C * (RV + 8)) * 2
        + 2 * (C * (RV + 4) + 4) * 4
}

/// Queues both kernels: the sequences `inputs` (`[q, k, v, g, beta]`, accepted by
/// [`takes`]) from the states at `from` (row-major, 16-byte aligned, of type `state`) to the
/// final states at `to` and the outputs at `y` (`[B, T, Hv, Dv]` row-major in q's type).
pub(super) fn launch(
    place: &Place,
    inputs: &[ArrayData],
    state: DType,
    from: u64,
    to: u64,
    y: u64,
) -> Result<()> {
    let [q, _, v, ..] = inputs else {
        return Err(Error::Device(
            "cuda: gated_delta: five sequence inputs expected".into(),
        ));
    };
    let (qs, vs) = (&q.layout.shape, &v.layout.shape);
    let (b, t, dk, hv, dv) = (qs[0], qs[1], qs[3], vs[2], vs[3]);
    let nt = t.div_ceil(C);
    let heads = b * hv;
    let args = sequence_args(inputs)?;
    let ptrs = starts(place, inputs)?;
    // The workspace: W, Kd, Qg and P in q's type, U and the decay in float, a chunk each.
    let alloc = |bytes: usize| place.gpu.alloc.alloc(bytes, place.stream_id);
    let half = alloc(heads * nt * (3 * C * dk + C * C) * 2)?;
    let float = alloc(heads * nt * (C * dv + 64) * 4)?;
    let (wsh, wsf) = (half.ptr(), float.ptr());
    let tn = type_names(q.dtype()).expect("a float type").1;
    let sn = type_names(state).expect("a float type").1;
    let kernel = |name: String| {
        let f = place.gpu.kernel_in(
            "gated_delta_chunk",
            Some(state),
            0,
            symbol!("{name}")?,
            || source(state),
        )?;
        f.allow_shared(place.gpu.props.shared_per_block)?;
        Ok::<_, Error>(f)
    };
    let nt32 = nt as i32;
    let vec = vector_inputs(inputs, &ptrs);

    let prep = kernel(format!("gdc_prep_{tn}_{dk}_{dv}"))?;
    let cfg = LaunchConfig {
        grid_dim: ((heads * nt) as u32, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: prep_shared(dk, dv) as u32,
    };
    let params: [&dyn DeviceRepr; 10] = [
        &ptrs[0], &ptrs[1], &ptrs[2], &ptrs[3], &ptrs[4], &wsh, &wsf, &args, &nt32, &vec,
    ];
    // SAFETY: q, k, v, g and beta are read at their first elements plus their strides over
    // their shapes ([B, T, Hk, Dk], [B, T, Hv, Dv], [B, T, Hv]; the unit's checks) in the
    // types `args.types` names, only at steps below T (16 bytes at a time only for the
    // inputs `vector_inputs` found contiguous and aligned, within their rows); the workspaces
    // hold `heads · nt` chunks of `3 C Dk + C²` elements of q's type and `C Dv + 64` floats,
    // each block writing its own chunk; the grid is `heads · nt` blocks (within 31 bits:
    // `takes`) and the shared memory `prep_shared`, allowed above 48 KiB just before; the
    // arguments match `gdc_prep_*`.
    unsafe { prep.launch(&place.stream, cfg, &params) }?;

    let walk = kernel(format!("gdc_state_{tn}_{sn}_{dk}_{dv}"))?;
    let cfg = LaunchConfig {
        grid_dim: ((heads * (dv / RV)) as u32, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: state_shared(dk) as u32,
    };
    let params: [&dyn DeviceRepr; 7] = [&from, &to, &y, &wsh, &wsf, &args, &nt32];
    // SAFETY: `from` starts B row-major states of `Hv · Dv · Dk` elements of `state`'s
    // type and `to` a block of this evaluation's own of as many, each block reading and
    // writing its own 32 rows of one head; `y` is a fresh `[B, T, Hv, Dv]` block of q's
    // type written at steps below T; the workspaces are the first launch's, written
    // before this one on the same stream; the grid is `heads · Dv / 32` blocks and the
    // shared memory `state_shared`, allowed above 48 KiB just before; the arguments match
    // `gdc_state_*`.
    unsafe { walk.launch(&place.stream, cfg, &params) }?;
    // The workspaces go back to the stream's pool after the launches queued on it.
    drop((half, float));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host's shared sizes match the kernels' (`NvGdc*Shape`) for the benchmark's heads,
    /// and fit an H100/H200 block (227 KiB).
    #[test]
    fn shared_sizes() {
        assert_eq!(
            prep_shared(128, 128),
            3 * 64 * 136 * 2 + (2 * 64 * 65 + 256) * 4
        );
        assert!(state_shared(128) <= 227 << 10);
        assert!(prep_shared(128, 128) <= 227 << 10);
    }
}
