//! Creation primitives on the GPU: `arange`, each value computed as the CPU computes it
//! (see `kernels/creation.cu`). `bool` (which `arange` rejects) and complex numbers are left
//! to the CPU bridge (`Ok(None)`).
//!
//! The counting sequences `0, 1, 2, …` of `u32` and `i32` (the batch indices that
//! `gather_qmm` and `gather_mm` make when none are given, positions) are kept on the device
//! per stream and handed out as views, so that asking for one again costs no launch.

use std::sync::{Arc, Mutex};

use cudarc::driver::DeviceRepr;

use super::Place;
use super::elementwise::{launch_config, type_names};
use super::launch::symbol;
use crate::array::{ArrayData, Buffer, Layout};
use crate::dtype::Canon;
use crate::ops::creation::CreationOp;
use crate::{DType, Result};

const COMMON: &str = include_str!("kernels/common.cuh");
const CREATION: &str = include_str!("kernels/creation.cu");

/// Whether `arange` of `dtype` has a kernel.
fn has_arange(dtype: DType) -> bool {
    dtype.is_float() || dtype.is_integer()
}

/// The module of the creation kernels of one element type.
fn source(dtype: DType) -> String {
    let (ct, tn) = type_names(dtype).expect("complex has no kernels");
    let mac = if dtype.is_integer() {
        "NV_ARANGE_INT"
    } else {
        "NV_ARANGE_FLOAT"
    };
    format!("{COMMON}\n{CREATION}\n{mac}({ct}, {tn})\n")
}

/// A creation primitive on the GPU, or `None` where the CPU bridge runs it.
pub(crate) fn eval(place: &Place, op: &CreationOp) -> Result<Option<Vec<ArrayData>>> {
    match *op {
        CreationOp::Arange {
            start,
            step,
            n,
            dtype,
        } => Ok(arange(place, start, step, n, dtype)?.map(|d| vec![d])),
    }
}

fn arange(
    place: &Place,
    start: f64,
    step: f64,
    n: usize,
    dtype: DType,
) -> Result<Option<ArrayData>> {
    let Some((_, tn)) = type_names(dtype) else {
        return Ok(None);
    };
    if !has_arange(dtype) {
        return Ok(None);
    }
    if start == 0.0 && step == 1.0 && counting_kept(dtype, n) {
        return counting(place, tn, n, dtype).map(Some);
    }
    launch_arange(place, tn, start, step, n, dtype).map(Some)
}

/// The longest counting sequence kept on a stream (4 MiB of 32-bit integers).
const COUNTING_MAX: usize = 1 << 20;
/// The shortest one kept: a first small request keeps room for the next ones.
const COUNTING_MIN: usize = 4096;

/// Whether `arange(0, n, 1)` of `dtype` is served from the kept counting sequences.
fn counting_kept(dtype: DType, n: usize) -> bool {
    matches!(dtype, DType::U32 | DType::I32) && (1..=COUNTING_MAX).contains(&n)
}

/// One kept counting sequence: its stream (the allocator's id, unique across devices), its
/// type, and the buffer, of at least the length asked for.
struct Counting {
    stream_id: usize,
    dtype: DType,
    buffer: Arc<Buffer>,
}

/// The counting sequences kept so far. The buffers are never freed: at most
/// [`COUNTING_MAX`] elements a stream and type.
static COUNTINGS: Mutex<Vec<Counting>> = Mutex::new(Vec::new());

/// `0, 1, …, n − 1` of `dtype` as a view of this stream's kept sequence, launching the
/// kernel only when the kept one is missing or too short. The kept `Arc` keeps the buffer
/// from ever being donated to an output or updated in place (both need the only reference),
/// and its device copy names this stream, so other streams wait for the write as for any
/// input.
fn counting(place: &Place, tn: &str, n: usize, dtype: DType) -> Result<ArrayData> {
    let mut kept = COUNTINGS.lock().map_err(|_| {
        crate::Error::Device("cuda: the kept counting sequences are poisoned".into())
    })?;
    let view = |buffer: &Arc<Buffer>| ArrayData {
        buffer: Arc::clone(buffer),
        layout: Layout::contiguous(&[n]),
    };
    let at = kept
        .iter()
        .position(|c| c.stream_id == place.stream_id && c.dtype == dtype);
    if let Some(c) = at.map(|i| &kept[i])
        && c.buffer.len() >= n
    {
        return Ok(view(&c.buffer));
    }
    let len = n.next_power_of_two().clamp(COUNTING_MIN, COUNTING_MAX);
    let data = launch_arange(place, tn, 0.0, 1.0, len, dtype)?;
    let fresh = Counting {
        stream_id: place.stream_id,
        dtype,
        buffer: Arc::clone(&data.buffer),
    };
    match at {
        Some(i) => kept[i] = fresh,
        None => kept.push(fresh),
    }
    Ok(view(&data.buffer))
}

/// Launches `arange_<tn>` into a new output of `n` elements.
fn launch_arange(
    place: &Place,
    tn: &str,
    start: f64,
    step: f64,
    n: usize,
    dtype: DType,
) -> Result<ArrayData> {
    let (out, out_ptr) = place.output(dtype, &[n])?;
    if n == 0 {
        return Ok(out);
    }
    let f = place
        .gpu
        .kernel_of("creation", Some(dtype), symbol!("arange_{tn}")?, || {
            source(dtype)
        })?;
    let n64 = n as i64;
    // MLX's integer rule, as the CPU applies it: both truncated, in 128 bits; the kernel
    // wraps modulo 2^64, which agrees once truncated to the element's width.
    let first = Canon::Float(start).as_i128();
    let delta = Canon::Float(start + step).as_i128().wrapping_sub(first);
    let (first, delta) = (first as u64, delta as u64);
    let params: [&dyn DeviceRepr; 4] = if dtype.is_integer() {
        [&out_ptr, &n64, &first, &delta]
    } else {
        [&out_ptr, &n64, &start, &step]
    };
    // SAFETY: the output block holds `n` elements of `dtype`; the arguments match
    // `arange_<type>` (integers take two u64, floats two doubles).
    unsafe { f.launch(&place.stream, launch_config(n), &params) }?;
    Ok(out)
}

/// Every kernel source of this family, complete, for compiling ahead of time (CI).
#[cfg(test)]
pub(crate) fn all_sources() -> Vec<(String, String)> {
    DType::ALL
        .into_iter()
        .filter(|&d| type_names(d).is_some() && has_arange(d))
        .map(|d| {
            let tn = type_names(d).expect("filtered").1;
            (format!("creation_{tn}"), source(d))
        })
        .collect()
}
