//! Attention over many query rows (prefill): the tiled kernels of `kernels/fast/flash*.cu`
//! for `FastOp::Attention` in f16 and bf16 on the tensor cores, and in f32 on the FMA units
//! (everything in float32, for callers who asked for that precision), with no mask, the
//! causal one (aligned at the end), a boolean or additive mask array, and per-head sinks;
//! grouped query heads read their key head in place, and keys and values may be any strided
//! view whose rows are contiguous and 16-byte aligned (the transposed `[B, L, H, D]`
//! projection among them). Scores, the running statistics and the accumulator stay in f32;
//! the output is rounded once.
//!
//! Four kernels. f32 runs `flash_f32.cu` (16 query rows a block, one key a lane). On Hopper
//! (compute capability 9.x), f16 and bf16 head sizes 64 and 128 run `flash_tma.cu` (compiled
//! for `sm_90a`: a producer warpgroup loads with the tensor-memory accelerator, two consumer
//! warpgroups, three for head size 64, multiply with `wgmma`), or `flash_sm90.cu`'s cooperative form (every warpgroup
//! loads with `cp.async`) where the tensor maps cannot be encoded; everything else runs the
//! portable `flash.cu` (`mma.sync`). Each module holds one kernel: the element type, the two
//! head sizes, the mask's kind, causality and sinks are all template arguments, so a model
//! compiles only what it runs.
//!
//! Knobs for tuning and comparison: `NUVEC_FLASH_WARPS` (4 or 8; 4 by default) sets the warps,
//! and so the query rows, a block of the portable kernel takes; `NUVEC_FLASH_PORTABLE=1`
//! keeps Hopper on the portable kernel, `NUVEC_FLASH_TMA=0` on the cooperative form;
//! the TMA form's consumers take turns at the tensor cores (FlashAttention-3's ping-pong
//! schedule: 8 to 13% faster on the H200 than running side by side), `NUVEC_FLASH_PINGPONG=0`
//! runs them side by side;
//! `NUVEC_FLASH_STAGES` (2 to 4, where they fit) sets its key and value stages (by default 3
//! for head size 64, 10% faster there on the H200, and 2 beyond, where 3 measured 3% slower on
//! 16k causal keys); head size 64 has three consumers (FlashAttention-3's 192 query rows a
//! block: `sdpa_causal_8k_d64` 13% faster than two on an H100, fifteenth session),
//! `NUVEC_FLASH_CONSUMERS=2` two; causal blocks start in FlashAttention-3's order (level at 4k keys, 5% faster at 16k in the run that compared them, though runs of
//! one kernel spread as much), `NUVEC_FLASH_ORDER=rows` in the plain order;
//! the TMA form takes FlashAttention-3's tiles of 176 keys for head size 128 without
//! causality or a mask (`sdpa_full_4k` 1.7% faster than 128 on an H100), `NUVEC_FLASH_BN=128`
//! keeps 128 (see [`keys_a_tile`]);
//! `NUVEC_FLASH_PERSISTENT=1` runs the TMA form as FlashAttention-3's persistent blocks (one a
//! multiprocessor, each walking its share of the work items, the next item's loads under the
//! last one's products and stores; 2-11% slower on an H100, off), `=2` as persistent blocks
//! that each take their next item from a counter (FlashAttention-3's dynamic scheduler: on an
//! H100 0-2% faster on `sdpa_causal_4k`, 2-6% slower on full attention, at head size 64
//! and at 16k causal keys; off);
//! `NUVEC_KERNEL_DEFINES="NV_FLASH_POLY=n"` takes every n-th tile of 8 scores' exponentials
//! by a cubic on the FMA pipes (FlashAttention-4's relief of the special-function unit, whose
//! 16 results a clock bound the softmax of head size 64; off by default until timed).
//!
//! Without a mask and with a positive scale (the usual case) the kernels take each row's
//! maximum over the unscaled scores and fold the scale into the exponent's multiply-add; only
//! the tiles that cross the causal diagonal or the keys' end test each score's position.

use std::sync::OnceLock;

use cudarc::driver::{DeviceRepr, LaunchConfig};

use super::super::tensor_map;
use super::Place;
use super::attention::{aligned, leading, rows_contiguous};
use crate::array::ArrayData;
use crate::backend::cuda::elementwise::type_names;
use crate::backend::cuda::launch::{KernelKey, symbol};
use crate::primitive::OutputSpec;
use crate::{DType, Error, Result};

const COMMON: &str = include_str!("../kernels/common.cuh");
const FLASH: &str = include_str!("../kernels/fast/flash.cu");
const FLASH_SM90: &str = include_str!("../kernels/fast/flash_sm90.cu");
const FLASH_TMA: &str = include_str!("../kernels/fast/flash_tma.cu");
const BULK: &str = include_str!("../kernels/fast/bulk.cuh");
const FLASH_F32: &str = include_str!("../kernels/fast/flash_f32.cu");

/// Query rows a block of the float32 kernel (`NV_F32_ROWS`).
const F32_ROWS: usize = 16;

/// The float32 kernel's dynamic shared memory in bytes (`NvFlashF32Shape`): queries, one tile
/// of 32 keys (rows of an odd stride) and one of values.
fn f32_shared(d: usize, dv: usize) -> usize {
    (F32_ROWS * d + 32 * (d | 1) + 32 * dv) * 4
}

/// Whether Hopper runs the TMA form (the default; `NUVEC_FLASH_TMA=0` runs the cooperative
/// form, for comparison).
fn tma() -> bool {
    static TMA: OnceLock<bool> = OnceLock::new();
    *TMA.get_or_init(|| std::env::var_os("NUVEC_FLASH_TMA").is_none_or(|v| v != "0"))
}

/// Whether the TMA form's consumers take turns at the tensor cores (the default;
/// `NUVEC_FLASH_PINGPONG=0` runs them side by side, for comparison).
fn pingpong() -> bool {
    static PINGPONG: OnceLock<bool> = OnceLock::new();
    *PINGPONG.get_or_init(|| std::env::var_os("NUVEC_FLASH_PINGPONG").is_none_or(|v| v != "0"))
}

/// Key and value stages of the TMA form over tiles of `bn` keys: `NUVEC_FLASH_STAGES` (2 to
/// 4) where it fits the shared memory, else 3 for head size 64 and 2 beyond.
fn tma_stages(d: usize, dv: usize, bn: usize) -> usize {
    static STAGES: OnceLock<Option<usize>> = OnceLock::new();
    let asked = *STAGES.get_or_init(|| {
        std::env::var("NUVEC_FLASH_STAGES")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|s| (2..=4).contains(s))
    });
    let fits = |s: usize| tma_shared(64 * consumers(d, dv), bn, d, dv, s) <= HOPPER_SHARED;
    match asked {
        Some(s) if fits(s) => s,
        _ if d == 64 && dv == 64 && fits(3) => 3,
        _ => 2,
    }
}

/// The largest dynamic shared memory of a block on compute capability 9.0, in bytes.
const HOPPER_SHARED: usize = 227 * 1024;

/// The TMA form's dynamic shared memory in bytes: queries (`bm` rows), the key and value
/// stages (`bn` rows each), the 1,024-byte alignment of the swizzled tiles, the barriers and
/// the dynamic walk's item.
fn tma_shared(bm: usize, bn: usize, d: usize, dv: usize, stages: usize) -> usize {
    // The 1,024-aligned tiles, then 2 + 4 · stages barriers of 8 bytes, then the item.
    (bm * d + stages * bn * (d + dv)) * 2 + 1024 + 8 * (2 + 4 * stages) + 8
}

/// How the TMA form's blocks take their work items (`NV_T_PERSISTENT` in `flash_tma.cu`): a
/// block an item (0, the default), or persistent blocks, about one a multiprocessor, each
/// walking a fixed share (1, `NUVEC_FLASH_PERSISTENT=1`) or taking the next item from a
/// counter (2, `NUVEC_FLASH_PERSISTENT=2`).
fn persistent() -> u32 {
    static PERSISTENT: OnceLock<u32> = OnceLock::new();
    *PERSISTENT.get_or_init(
        || match std::env::var("NUVEC_FLASH_PERSISTENT").as_deref() {
            Ok("1") => 1,
            Ok("2") => 2,
            _ => 0,
        },
    )
}

/// Whether causal blocks on Hopper start in FlashAttention-3's order (the default: heads in
/// groups whose keys and values fit in L2, the blocks with the most keys first within a group;
/// `NV_H_ORDER` in `flash.cu`), or in the plain order with `NUVEC_FLASH_ORDER=rows`.
fn grouped_order() -> bool {
    static GROUPED: OnceLock<bool> = OnceLock::new();
    *GROUPED.get_or_init(|| {
        std::env::var("NUVEC_FLASH_ORDER")
            .ok()
            .is_none_or(|v| v != "rows")
    })
}

/// Consumer warpgroups of the TMA form (64 query rows each): 3 for head size 64
/// (FlashAttention-3's 192-row tiles; on an H100 `sdpa_causal_8k_d64` ran at 469 TFLOP/s with
/// three, 407-416 with two), unless `NUVEC_FLASH_CONSUMERS=2`; else 2 (their registers).
fn consumers(d: usize, dv: usize) -> usize {
    static TWO: OnceLock<bool> = OnceLock::new();
    let two = *TWO.get_or_init(|| std::env::var("NUVEC_FLASH_CONSUMERS").is_ok_and(|v| v == "2"));
    if !two && d == 64 && dv == 64 { 3 } else { 2 }
}

/// Query rows and key rows a tile of the Hopper kernel (`NV_H_BM`, `NV_H_BN`).
const SM90_TILE: (usize, usize) = (128, 128);

/// Whether the TMA form takes FlashAttention-3's wide key tiles where they apply
/// ([`keys_a_tile`]) when the environment does not say: on an H100 `sdpa_full_4k` ran at
/// 660-663 TFLOP/s with them, 648-651 without (fifteenth session).
const WIDE_KEYS_BY_DEFAULT: bool = true;

/// Key rows a tile of the TMA form (`NV_H_BN` in its module): [`keys_a_tile`], wide where
/// `NUVEC_FLASH_BN=176` (or [`WIDE_KEYS_BY_DEFAULT`] without `NUVEC_FLASH_BN=128`) asks.
fn tma_keys(d: usize, dv: usize, form: Form) -> usize {
    static WIDE: OnceLock<bool> = OnceLock::new();
    let wide = *WIDE.get_or_init(|| match std::env::var("NUVEC_FLASH_BN").as_deref() {
        Ok("176") => true,
        Ok("128") => false,
        _ => WIDE_KEYS_BY_DEFAULT,
    });
    keys_a_tile(d, dv, form, wide)
}

/// Key rows a tile: FlashAttention-3's 176 (`wide`) for head size 128 without causality or a
/// mask (fewer, longer tiles; a causal row of blocks wastes more of a wide tile on the
/// diagonal, and a mask's loads take the registers), else 128.
fn keys_a_tile(d: usize, dv: usize, form: Form, wide: bool) -> usize {
    if wide && d == 128 && dv == 128 && !form.causal && !form.mask {
        176
    } else {
        SM90_TILE.1
    }
}

/// The kernel's arguments (`NvFlash` in `flash.cu`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct FlashArgs {
    q_strides: [i64; 3],
    q_offset: i64,
    k_strides: [i64; 3],
    k_offset: i64,
    v_strides: [i64; 3],
    v_offset: i64,
    m_strides: [i64; 4],
    m_offset: i64,
    s_stride: i64,
    s_offset: i64,
    hq: i32,
    group: i32,
    lq: i32,
    lk: i32,
    scale: f32,
    batch: i32,
    items: i32,
}

// SAFETY: `FlashArgs` is `repr(C)` plain data with the field order, types and alignment of
// `NvFlash`, so its bytes are what the kernel reads as its parameter.
unsafe impl DeviceRepr for FlashArgs {}

/// What an attention node asks of the kernel.
#[derive(Debug, Clone, Copy)]
pub(super) struct Form {
    pub(super) scale: f32,
    pub(super) causal: bool,
    pub(super) mask: bool,
    pub(super) sinks: bool,
}

/// Warps a block (16 query rows each).
fn warps() -> usize {
    static W: OnceLock<usize> = OnceLock::new();
    *W.get_or_init(|| match std::env::var("NUVEC_FLASH_WARPS").as_deref() {
        Ok("8") => 8,
        _ => 4,
    })
}

/// Whether the Hopper kernel runs head sizes `(d, dv)` on this device.
fn hopper(place: &Place, d: usize, dv: usize) -> bool {
    static PORTABLE: OnceLock<bool> = OnceLock::new();
    let portable = *PORTABLE
        .get_or_init(|| std::env::var_os("NUVEC_FLASH_PORTABLE").is_some_and(|v| v != "0"));
    place.gpu.props.arch.major == 9 && !portable && d == dv && matches!(d, 64 | 128)
}

/// `NvFlashShape`: (query rows, key rows) a tile and the dynamic shared memory in bytes.
fn tile(d: usize, dv: usize) -> (usize, usize, usize) {
    let (dp, dvp) = (d.next_multiple_of(16), dv.next_multiple_of(16));
    let bm = 16 * warps();
    let bn = if dp > 128 || dvp > 128 { 32 } else { 64 };
    let shared = (bm * (dp + 8) + 2 * bn * (dp + 8) + 2 * bn * (dvp + 8)) * 2;
    (bm, bn, shared)
}

/// Whether the kernel computes attention of these shapes and types (any layout: what it
/// cannot read in place, [`attention`] refuses and the caller copies).
pub(super) fn covers(shapes: &[&[usize]], dtype: DType, mask: Option<DType>, form: Form) -> bool {
    let (q, k, v) = (shapes[0], shapes[1], shapes[2]);
    let (batch, hq, lq, d) = (q[0], q[1], q[2], q[3]);
    let (hkv, lk, dv) = (k[1], k[2], v[3]);
    matches!(dtype, DType::F16 | DType::BF16 | DType::F32)
        && head(d)
        && head(dv)
        && ![batch, hq, lq, lk, hkv].contains(&0)
        && hq.is_multiple_of(hkv)
        && batch <= 65_535
        && hq <= 65_535
        && lq.max(lk) <= i32::MAX as usize / 2
        && (!form.causal || lq <= lk)
        && mask.is_none_or(|m| m == DType::Bool || m == dtype)
}

/// Head sizes with a kernel: multiples of 8 up to 256.
fn head(d: usize) -> bool {
    d.is_multiple_of(8) && (8..=256).contains(&d)
}

/// The module of one kernel: `arg` packs both head sizes, the mask's kind, causality, sinks
/// and whether the scale folds into the exponentials.
fn module_arg(d: usize, dv: usize, mask: u32, form: Form) -> u32 {
    d as u32
        | (dv as u32) << 9
        | mask << 18
        | u32::from(form.causal) << 20
        | u32::from(form.sinks) << 21
        | u32::from(folds(form)) << 22
}

/// Whether the kernel takes each row's maximum over the unscaled scores and applies the scale
/// inside the exponential (`NV_FLASH_FOLD`): only a positive, finite scale keeps the order of
/// the scores, and a mask is added after scaling.
fn folds(form: Form) -> bool {
    let scale = form.scale * std::f32::consts::LOG2_E;
    !form.mask && scale > 0.0 && scale.is_finite()
}

/// The source of the module holding one kernel of `family` (`flash`, `flash90`, `flashtma`
/// or `flashf32`).
fn source(dtype: DType, d: usize, dv: usize, mask: u32, form: Form, family: &str) -> String {
    let (ct, tn) = type_names(dtype).expect("float types have kernels");
    let w = warps();
    let (c, s) = (u32::from(form.causal), u32::from(form.sinks));
    let args = format!("({ct}, {tn}, {d}, {dv}, {mask}, {c}, {s})");
    let fold = format!("#define NV_FLASH_FOLD {}\n", u32::from(folds(form)));
    let body = match family {
        "flashf32" => {
            format!("{COMMON}\n{FLASH}\n{FLASH_F32}\nNV_FLASH_F32({d}, {dv}, {mask}, {c}, {s})\n")
        }
        "flashtma" => {
            let bn = tma_keys(d, dv, form);
            format!(
                "#define NV_T_STAGES {}\n#define NV_T_PINGPONG {}\n#define NV_T_CONSUMERS {}\n\
                 #define NV_T_PERSISTENT {}\n#define NV_H_ORDER {}\n#define NV_H_BN {bn}\n\
                 {COMMON}\n{FLASH}\n{FLASH_SM90}\n{BULK}\n{FLASH_TMA}\nNV_FLASH_TMA{args}\n",
                tma_stages(d, dv, bn),
                u32::from(pingpong()),
                consumers(d, dv),
                persistent(),
                u32::from(grouped_order()),
            )
        }
        "flash90" => format!(
            "#define NV_H_ORDER {}\n{COMMON}\n{FLASH}\n{FLASH_SM90}\nNV_FLASH_SM90{args}\n",
            u32::from(grouped_order())
        ),
        _ => format!("#define NV_FLASH_WARPS {w}\n{COMMON}\n{FLASH}\nNV_FLASH{args}\n"),
    };
    fold + &body
}

/// The Hopper kernel's dynamic shared memory in bytes: queries, two key stages and three
/// value stages, and the alignment of the swizzled tiles (`NvHRows` and `nv_flash_sm90`).
fn sm90_shared(d: usize, dv: usize) -> usize {
    let (bm, bn) = SM90_TILE;
    (bm * d + 2 * bn * d + 3 * bn * dv) * 2 + 1024
}

/// `FastOp::Attention` through the tiled kernel: `(q, k, v[, mask][, sinks])`, into a new
/// row-major `[B, Hq, Lq, Dv]` output; `Ok(None)` when some input's layout is not one the
/// kernel reads in place.
pub(super) fn attention(
    place: &Place,
    form: Form,
    inputs: &[ArrayData],
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    let (q, k, v) = (&inputs[0], &inputs[1], &inputs[2]);
    let dtype = outputs[0].1;
    let size = dtype.size();
    let (qs, ks, vs) = (&q.layout.shape, &k.layout.shape, &v.layout.shape);
    let (batch, hq, lq, d) = (qs[0], qs[1], qs[2], qs[3]);
    let (hkv, lk, dv) = (ks[1], ks[2], vs[3]);
    let mask = form.mask.then(|| &inputs[3]);
    let sinks = form.sinks.then(|| &inputs[inputs.len() - 1]);
    let shapes = [qs.as_slice(), ks.as_slice(), vs.as_slice()];
    if !covers(&shapes, dtype, mask.map(ArrayData::dtype), form)
        || ![q, k, v].iter().all(|a| a.dtype() == dtype)
        || sinks.is_some_and(|s| s.dtype() != dtype)
    {
        return Ok(None);
    }
    let ptrs = [place.input(q)?, place.input(k)?, place.input(v)?];
    if ![q, k, v]
        .iter()
        .zip(ptrs)
        .all(|(a, p)| rows_contiguous(a) && aligned(p, a, size))
    {
        return Ok(None);
    }
    let (q_strides, q_offset) = leading(q);
    let (k_strides, k_offset) = leading(k);
    let (v_strides, v_offset) = leading(v);
    let mut args = FlashArgs {
        q_strides,
        q_offset,
        k_strides,
        k_offset,
        v_strides,
        v_offset,
        hq: hq as i32,
        group: (hq / hkv) as i32,
        lq: lq as i32,
        lk: lk as i32,
        scale: form.scale * std::f32::consts::LOG2_E,
        batch: batch as i32,
        ..FlashArgs::default()
    };
    let (mut mask_ptr, mut mask_kind) = (0u64, 0u32);
    if let Some(m) = mask {
        let s = &m.layout.strides;
        args.m_strides = [s[0] as i64, s[1] as i64, s[2] as i64, s[3] as i64];
        args.m_offset = m.layout.offset as i64;
        mask_ptr = place.input(m)?;
        mask_kind = if m.dtype() == DType::Bool { 1 } else { 2 };
    }
    let mut sinks_ptr = 0u64;
    if let Some(s) = sinks {
        args.s_stride = s.layout.strides[0] as i64;
        args.s_offset = s.layout.offset as i64;
        sinks_ptr = place.input(s)?;
    }
    let single = dtype == DType::F32;
    let sm90 = !single && hopper(place, d, dv);
    // The TMA form's descriptors: queries in boxes of the block's rows, keys and values of a
    // tile's.
    let (tma_rows, tma_bn) = (64 * consumers(d, dv), tma_keys(d, dv, form));
    let maps = if sm90 && tma() {
        let (bm, bn) = (tma_rows, tma_bn);
        match (
            tensor_map::encode(ptrs[0], q, bm)?,
            tensor_map::encode(ptrs[1], k, bn)?,
            tensor_map::encode(ptrs[2], v, bn)?,
        ) {
            (Some(qm), Some(km), Some(vm)) => Some((qm, km, vm)),
            _ => None,
        }
    } else {
        None
    };
    let (bm, shared, threads) = if maps.is_some() {
        let threads = 128 * (tma_rows as u32 / 64 + 1);
        (
            tma_rows,
            tma_shared(tma_rows, tma_bn, d, dv, tma_stages(d, dv, tma_bn)),
            threads,
        )
    } else if sm90 {
        (SM90_TILE.0, sm90_shared(d, dv), 256)
    } else if single {
        (F32_ROWS, f32_shared(d, dv), 128)
    } else {
        let (bm, _, shared) = tile(d, dv);
        (bm, shared, 32 * warps() as u32)
    };
    let family = match (sm90, maps.is_some()) {
        _ if single => "flashf32",
        (true, true) => "flashtma",
        (true, false) => "flash90",
        _ => "flash",
    };
    let mut module = place
        .gpu
        .module(family, Some(dtype), module_arg(d, dv, mask_kind, form));
    if sm90 {
        module.arch = module.arch.specific()?;
    }
    let tn = type_names(dtype).expect("float types have kernels").1;
    let (c, s) = (u32::from(form.causal), u32::from(form.sinks));
    let key = KernelKey {
        module,
        symbol: symbol!("{family}_{tn}_{d}_{dv}_m{mask_kind}_c{c}_s{s}")?,
    };
    let f = place
        .gpu
        .kernel(&key, || source(dtype, d, dv, mask_kind, form, family))?;
    f.allow_shared(place.gpu.props.shared_per_block)?;
    let (out, out_ptr) = place.output(dtype, &outputs[0].0)?;
    let config = LaunchConfig {
        grid_dim: (lq.div_ceil(bm) as u32, hq as u32, batch as u32),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: shared as u32,
    };
    if let Some((qm, km, vm)) = &maps {
        let mut config = config;
        let mut counters = 0u64;
        if persistent() > 0 {
            // Every block walks its share of the items or takes them one by one (the kernel
            // is compiled for it: `source`); one a multiprocessor, as the shared memory allows.
            let items = lq.div_ceil(bm) * hq * batch;
            let sms = place.gpu.props.sms as usize;
            args.items = i32::try_from(items)
                .map_err(|_| Error::Device(format!("cuda: attention: {items} blocks of work")))?;
            config.grid_dim = (items.min(sms) as u32, 1, 1);
            if persistent() == 2 {
                counters = place.zeroed_counters(2)?;
            }
        }
        let params: [&dyn DeviceRepr; 8] = [
            qm, km, vm, &mask_ptr, &sinks_ptr, &out_ptr, &counters, &args,
        ];
        // SAFETY: the tensor maps address q, k and v within their shapes (the copy engine fills
        // rows past them with zeros); the mask is read at its strides for query rows below Lq
        // and keys below Lk, the sinks at Hq indices; the output holds B·Hq·Lq·Dv elements; the
        // grid fits (B and Hq at most 65,535, checked by `covers`; a persistent grid walks
        // exactly `items` work items, the module compiled for it); the counters, read only by
        // the dynamic walk, are two of the stream's, zero at the launch and set back to zero
        // by the kernel; and the arguments match the kernel's signature.
        unsafe { f.launch(&place.stream, config, &params) }?;
        return Ok(Some(vec![out]));
    }
    let params: [&dyn DeviceRepr; 7] = [
        &ptrs[0], &ptrs[1], &ptrs[2], &mask_ptr, &sinks_ptr, &out_ptr, &args,
    ];
    // SAFETY: q, k and v are read at the offsets their layouts give for indices inside their
    // shapes (rows past Lq or Lk are zero-filled, not read); the mask at its strides for
    // query rows below Lq and keys below Lk, the sinks at Hq indices; the output holds
    // B·Hq·Lq·Dv elements; the grid fits (B and Hq at most 65,535, checked by `covers`) and
    // the arguments match the kernel's signature.
    unsafe { f.launch(&place.stream, config, &params) }?;
    Ok(Some(vec![out]))
}

/// The sources of `heads` over both half types and five forms (no mask; causal, with the
/// scale folded and with a negative one that does not fold; a boolean mask with sinks; an
/// additive mask, causal, with sinks), named `{prefix}_...`.
#[cfg(test)]
fn sources_over(heads: &[(usize, usize)], families: &[&str]) -> Vec<(String, String)> {
    let forms = [
        (0, false, false, 1.0),
        (0, true, false, 1.0),
        (0, true, false, -0.5),
        (1, false, true, 1.0),
        (2, true, true, 1.0),
    ];
    let mut out = Vec::new();
    for dtype in [DType::F16, DType::BF16] {
        let tn = type_names(dtype).expect("float").1;
        for &(d, dv) in heads {
            for (mask, causal, sinks, scale) in forms {
                let form = Form {
                    scale,
                    causal,
                    mask: mask > 0,
                    sinks,
                };
                let fold = u32::from(folds(form));
                for family in families {
                    out.push((
                        format!(
                            "{family}_{tn}_{d}_{dv}_m{mask}_c{}_f{fold}",
                            u32::from(causal)
                        ),
                        source(dtype, d, dv, mask, form, family),
                    ));
                }
            }
        }
    }
    out
}

/// The float32 kernel's sources over `heads` and four of the forms of [`sources_over`].
#[cfg(test)]
fn f32_sources(heads: &[(usize, usize)]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for &(d, dv) in heads {
        for (mask, causal, sinks) in [
            (0, false, false),
            (0, true, false),
            (1, false, true),
            (2, true, true),
        ] {
            let form = Form {
                scale: 1.0,
                causal,
                mask: mask > 0,
                sinks,
            };
            out.push((
                format!("flashf32_f32_{d}_{dv}_m{mask}"),
                source(DType::F32, d, dv, mask, form, "flashf32"),
            ));
        }
    }
    out
}

/// Kernel sources of this family over the head sizes the seeds route to kernels, for
/// compiling ahead of time (tests).
#[cfg(test)]
pub(super) fn all_sources() -> Vec<(String, String)> {
    let heads = [
        (64, 64),
        (72, 72),
        (80, 80),
        (96, 96),
        (128, 128),
        (256, 256),
        (96, 64),
        (192, 128),
    ];
    let mut out = sources_over(&heads, &["flash"]);
    out.extend(f32_sources(&heads));
    out
}

/// The Hopper kernel's sources (head sizes 64 and 128, every mask kind), for compiling
/// ahead of time for `sm_90a` (tests).
#[cfg(test)]
pub(crate) fn sm90_sources() -> Vec<(String, String)> {
    sources_over(&[(64, 64), (128, 128)], &["flash90", "flashtma"])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(scale: f32, mask: bool) -> Form {
        Form {
            scale,
            causal: true,
            mask,
            sinks: false,
        }
    }

    #[test]
    fn only_a_positive_finite_scale_without_a_mask_folds() {
        assert!(folds(form(0.125, false)));
        assert!(folds(form(f32::MIN_POSITIVE, false)));
        assert!(!folds(form(0.125, true)));
        assert!(!folds(form(-0.125, false)));
        assert!(!folds(form(0.0, false)));
        assert!(!folds(form(-0.0, false)));
        assert!(!folds(form(f32::NAN, false)));
        assert!(!folds(form(f32::INFINITY, false)));
        // Finite, but not once multiplied by log2(e), as the kernel takes it.
        assert!(!folds(form(f32::MAX, false)));
        // Folded and unfolded kernels are distinct modules.
        assert_ne!(
            module_arg(64, 64, 0, form(0.125, false)),
            module_arg(64, 64, 0, form(-0.125, false))
        );
    }

    /// The wide key tiles go only where FlashAttention-3 takes them, and their stages fit the
    /// shared memory of a block.
    #[test]
    fn wide_key_tiles_fit_and_go_to_head_size_128_without_causality_or_a_mask() {
        let plain = Form {
            causal: false,
            ..form(0.125, false)
        };
        assert_eq!(keys_a_tile(128, 128, plain, true), 176);
        assert_eq!(keys_a_tile(128, 128, plain, false), 128);
        assert_eq!(keys_a_tile(128, 128, form(0.125, false), true), 128);
        assert_eq!(keys_a_tile(64, 64, plain, true), 128);
        let masked = Form {
            mask: true,
            ..plain
        };
        assert_eq!(keys_a_tile(128, 128, masked, true), 128);
        let bn = keys_a_tile(128, 128, plain, true);
        let stages = tma_stages(128, 128, bn);
        assert!(stages >= 2);
        assert!(tma_shared(64 * consumers(128, 128), bn, 128, 128, stages) <= HOPPER_SHARED);
    }
}
