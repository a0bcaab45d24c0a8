//! The random-bits primitive on the GPU: threefry-2x32 blocks laid out exactly as the CPU
//! backend lays them out (see `backend/cpu/random.rs`), so both give the same bits. One
//! thread computes one block and writes the (up to two) words it feeds. Every case has a
//! kernel (no `Ok(None)`).

use cudarc::driver::DeviceRepr;

use super::Place;
use super::elementwise::{Strided, launch_config};
use super::launch::symbol;
use crate::Result;
use crate::array::ArrayData;
use crate::ops::random::RandomOp;
use crate::primitive::OutputSpec;

const COMMON: &str = include_str!("kernels/common.cuh");
const RANDOM: &str = include_str!("kernels/random.cu");

/// The module of the bits kernels of every width.
fn random_source() -> String {
    format!(
        "{COMMON}\n{RANDOM}\nNV_RANDOM_BITS(u8, u8)\nNV_RANDOM_BITS(u16, u16)\nNV_RANDOM_BITS(u32, u32)\n"
    )
}

/// A random primitive on the GPU.
pub(crate) fn eval(
    place: &Place,
    op: &RandomOp,
    inputs: &[ArrayData],
    outputs: &[OutputSpec],
) -> Result<Option<Vec<ArrayData>>> {
    let RandomOp::Bits { width, .. } = op;
    let (shape, dtype) = (&outputs[0].0, outputs[0].1);
    let keys = &inputs[0];
    let (out, out_ptr) = place.output(dtype, shape)?;
    let n = out.layout.size();
    let num_keys = keys.layout.size() / 2;
    if n == 0 || num_keys == 0 {
        return Ok(Some(vec![out]));
    }
    let Ok(view) = Strided::of(&keys.layout) else {
        return Ok(None);
    };
    let per_key = n / num_keys;
    let words = (per_key * width).div_ceil(4);
    let half = words.div_ceil(2);
    let odd = i32::from(words % 2 == 1);
    let tn = match width {
        1 => "u8",
        2 => "u16",
        _ => "u32",
    };
    let f = place.gpu.kernel_of(
        "random_bits",
        None,
        symbol!("random_bits_{tn}")?,
        random_source,
    )?;
    let src = place.input(keys)?;
    let (num_keys64, per_key64, half64) = (num_keys as i64, per_key as i64, half as i64);
    let params: [&dyn DeviceRepr; 7] = [
        &src,
        &view,
        &out_ptr,
        &num_keys64,
        &per_key64,
        &half64,
        &odd,
    ];
    // SAFETY: the view addresses the `2 · num_keys` key words inside the key's block (alive
    // until the stream passes this work); the kernel writes elements below
    // `num_keys · per_key = n` of the output, a fresh block of `n` elements of `width`
    // bytes; the arguments match `random_bits_<type>`.
    unsafe { f.launch(&place.stream, launch_config(num_keys * half), &params) }?;
    Ok(Some(vec![out]))
}

/// Every kernel source of this family, complete, for compiling ahead of time (CI).
#[cfg(test)]
pub(crate) fn all_sources() -> Vec<(String, String)> {
    vec![("random_bits".to_string(), random_source())]
}
