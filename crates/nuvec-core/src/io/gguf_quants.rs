//! GGUF's block quantizations `Q4_0`, `Q4_1` and `Q8_0`, converted to nuvec's affine layout
//! (see [`crate::ops::quantized`]): packed `uint32` words, and a `float16` scale and bias per
//! group of 32 values, so that each ggml block becomes one group.
//!
//! A ggml block of 32 values stores a `float16` scale `d` (and for `Q4_1` a `float16` offset
//! `m`) and then the values:
//!
//! - `Q4_0`: 16 bytes of 4-bit `q`; byte `j` holds value `j` in its low nibble and value
//!   `j + 16` in its high one; the value is `d · (q − 8)`, so scale `d`, bias `−8d`.
//! - `Q4_1`: as `Q4_0` after `d` and `m`; the value is `d · q + m`, so scale `d`, bias `m`.
//! - `Q8_0`: 32 signed bytes `q`; the value is `d · q`. Stored unsigned as `q + 128` (the top
//!   bit flipped), it is `d · (q + 128) − 128d`: scale `d`, bias `−128d`.

use crate::dtype::f16;
use crate::{Array, Result};

/// A ggml block quantization nuvec converts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub(crate) enum Quant {
    /// 4 bits, symmetric around 8.
    Q4_0,
    /// 4 bits with an offset.
    Q4_1,
    /// 8 bits, signed.
    Q8_0,
}

/// Values per block (and per group of the converted layout).
const BLOCK: usize = 32;

impl Quant {
    /// Values per block.
    pub(crate) fn block_len(self) -> usize {
        BLOCK
    }

    /// Bytes per block.
    pub(crate) fn block_bytes(self) -> usize {
        match self {
            Quant::Q4_0 => 18,
            Quant::Q4_1 => 20,
            Quant::Q8_0 => 34,
        }
    }

    /// Bits per value.
    fn bits(self) -> usize {
        match self {
            Quant::Q4_0 | Quant::Q4_1 => 4,
            Quant::Q8_0 => 8,
        }
    }
}

/// The `float16` at `b[at..at + 2]`, little endian.
fn half(b: &[u8], at: usize) -> f16 {
    f16::from_le_bytes([b[at], b[at + 1]])
}

/// `k · d` rounded to `float16`, as MLX computes the bias.
fn times(k: f32, d: f16) -> f16 {
    f16::from_f32(k * d.to_f32())
}

/// Appends the four words of 32 4-bit values whose nibbles are in `qs` (16 bytes, value `j`
/// low in byte `j`, value `j + 16` high), value `i` at bits `4i` of the block's stream.
fn pack_4bit(qs: &[u8], words: &mut Vec<u32>) {
    for half_index in 0..2 {
        for word in 0..2 {
            let mut w = 0u32;
            for k in 0..8 {
                let byte = qs[word * 8 + k];
                let nibble = if half_index == 0 {
                    byte & 0x0F
                } else {
                    byte >> 4
                };
                w |= u32::from(nibble) << (4 * k);
            }
            words.push(w);
        }
    }
}

/// Converts the blocks in `data` (a whole tensor of row-major `shape`, whose last axis is a
/// multiple of 32 and whose length the caller has checked) to `(weights, scales, biases)`:
/// `weights` of `shape` with the last axis in `uint32` words, `scales` and `biases` of
/// `shape` with the last axis in groups of 32.
pub(crate) fn convert(q: Quant, data: &[u8], shape: &[usize]) -> Result<(Array, Array, Array)> {
    let n_blocks = data.len() / q.block_bytes();
    let mut words = Vec::with_capacity(n_blocks * BLOCK * q.bits() / 32);
    let mut scales = Vec::with_capacity(n_blocks);
    let mut biases = Vec::with_capacity(n_blocks);
    for block in data.chunks_exact(q.block_bytes()) {
        let d = half(block, 0);
        scales.push(d);
        match q {
            Quant::Q4_0 => {
                biases.push(times(-8.0, d));
                pack_4bit(&block[2..18], &mut words);
            }
            Quant::Q4_1 => {
                biases.push(half(block, 2));
                pack_4bit(&block[4..20], &mut words);
            }
            Quant::Q8_0 => {
                biases.push(times(-128.0, d));
                for four in block[2..34].chunks_exact(4) {
                    let u = [
                        four[0] ^ 0x80,
                        four[1] ^ 0x80,
                        four[2] ^ 0x80,
                        four[3] ^ 0x80,
                    ];
                    words.push(u32::from_le_bytes(u));
                }
            }
        }
    }
    let Some(last) = shape.len().checked_sub(1) else {
        return Err(crate::error::invalid(
            "load_gguf",
            "a quantized tensor needs at least one axis",
        ));
    };
    let mut w_shape = shape.to_vec();
    w_shape[last] = shape[last] * q.bits() / 32;
    let mut g_shape = shape.to_vec();
    g_shape[last] = shape[last] / BLOCK;
    Ok((
        Array::from_vec(words, &w_shape)?,
        Array::from_vec(scales, &g_shape)?,
        Array::from_vec(biases, &g_shape)?,
    ))
}
