//! Creation primitives on the GPU: `arange`, each value computed as the CPU computes it
//! (see `kernels/creation.cu`). `bool` (which `arange` rejects) and complex numbers are left
//! to the CPU bridge (`Ok(None)`).

use cudarc::driver::DeviceRepr;

use super::Place;
use super::elementwise::{launch_config, type_names};
use super::launch::symbol;
use crate::array::ArrayData;
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
    let (out, out_ptr) = place.output(dtype, &[n])?;
    if n == 0 {
        return Ok(Some(out));
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
    Ok(Some(out))
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
