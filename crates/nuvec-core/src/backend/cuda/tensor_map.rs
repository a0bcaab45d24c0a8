//! TMA descriptors (`CUtensorMap`) for the Hopper kernels, which the copy engine reads to move
//! boxes of an array into shared memory:
//! - [`encode`]: `[B, H, L, D]` arrays (attention) in boxes of 64 features × `rows` rows of
//!   one head, written in the 128-byte swizzle `wgmma` reads, rows past the array's end
//!   filled with zeros;
//! - [`encode_rows`]: row-major matrices (the quantized product's activations and packed
//!   weights) in boxes of a few columns × `rows` rows, swizzled or not.

use std::ffi::c_void;

use cudarc::driver::DeviceRepr;
use cudarc::driver::sys;

use crate::array::ArrayData;
use crate::{DType, Error, Result};

/// An encoded descriptor, passed by value as a kernel parameter (`NvTmap` in `bulk.cuh`).
#[repr(C, align(64))]
#[derive(Clone, Copy)]
pub(super) struct TensorMap([u64; 16]);

// SAFETY: `TensorMap` is the 128 plain bytes of a `CUtensorMap`, which the kernel declares as a
// 64-byte aligned `__grid_constant__` parameter of the same size.
unsafe impl DeviceRepr for TensorMap {}

/// What the copy engine does to a box's rows in shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Swizzle {
    /// Rows packed one after the other.
    None,
    /// 16-byte chunk `c` of row `r` at chunk `c ^ (r % 8)` of its 128 bytes (`wgmma`'s
    /// layout for K-major operands of 64 half values a row).
    Bytes128,
}

/// The element types the copy engine moves here.
fn data_type(dtype: DType) -> Option<sys::CUtensorMapDataType> {
    Some(match dtype {
        DType::BF16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        DType::F16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        DType::U32 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT32,
        _ => return None,
    })
}

/// The descriptor of `data` (4-D, features contiguous, 16-byte aligned rows at non-negative
/// strides) at device address `ptr`, in boxes of 64 features × `rows` rows; `None` where TMA
/// cannot address the layout (a stride that is zero, negative, not a multiple of 16 bytes or
/// past 2^40 bytes), which the caller then reads another way.
pub(super) fn encode(ptr: u64, data: &ArrayData, rows: usize) -> Result<Option<TensorMap>> {
    let dtype = data.dtype();
    if !matches!(dtype, DType::BF16 | DType::F16) {
        return Ok(None);
    }
    let l = &data.layout;
    let size = dtype.size();
    if l.shape.len() != 4 || l.strides[3] != 1 || l.shape.contains(&0) {
        return Ok(None);
    }
    // Strides in bytes of the row, head and batch axes: TMA wants them positive multiples of
    // 16 below 2^40.
    let mut strides = [0u64; 3];
    for (i, axis) in [2, 1, 0].into_iter().enumerate() {
        let s = l.strides[axis];
        let bytes = s.unsigned_abs() * size;
        if s <= 0 || !bytes.is_multiple_of(16) || bytes >= 1 << 40 {
            if l.shape[axis] == 1 {
                // One index: any stride will do, the map never steps it.
                strides[i] = (l.shape[3] * size).next_multiple_of(16) as u64;
                continue;
            }
            return Ok(None);
        }
        strides[i] = bytes as u64;
    }
    let base = ptr + (l.offset * size) as u64;
    let dims = [l.shape[3], l.shape[2], l.shape[1], l.shape[0]].map(|n| n as u64);
    tiled(
        dtype,
        base,
        &dims,
        &strides,
        &[64, rows as u32, 1, 1],
        Swizzle::Bytes128,
    )
}

/// The descriptor of a row-major matrix of `shape = [rows, columns]` values of `dtype` with
/// `row_bytes` between rows, at device address `ptr`, in boxes of `box_shape = [rows,
/// columns]`; `None` where TMA cannot address it (a start or row stride not a multiple of 16
/// bytes, a stride past 2^40 bytes, a box or dimension out of its range).
pub(super) fn encode_rows(
    ptr: u64,
    dtype: DType,
    shape: [usize; 2],
    row_bytes: usize,
    box_shape: [usize; 2],
    swizzle: Swizzle,
) -> Result<Option<TensorMap>> {
    if shape.contains(&0)
        || box_shape[0] > 256
        || box_shape[1] > 256
        || shape.iter().any(|&d| d > u32::MAX as usize)
    {
        return Ok(None);
    }
    let dims = [shape[1] as u64, shape[0] as u64];
    let boxes = [box_shape[1] as u32, box_shape[0] as u32];
    tiled(dtype, ptr, &dims, &[row_bytes as u64], &boxes, swizzle)
}

/// `cuTensorMapEncodeTiled` over `dims` (innermost first) with the byte strides of every
/// dimension past the first, after the checks TMA makes (`None` where one fails).
fn tiled(
    dtype: DType,
    base: u64,
    dims: &[u64],
    strides: &[u64],
    boxes: &[u32],
    swizzle: Swizzle,
) -> Result<Option<TensorMap>> {
    let Some(kind) = data_type(dtype) else {
        return Ok(None);
    };
    let rank = dims.len();
    let inner_bytes = boxes[0] as usize * dtype.size();
    let fits = base.is_multiple_of(16)
        && strides.len() + 1 == rank
        && boxes.len() == rank
        && strides
            .iter()
            .all(|&s| s > 0 && s.is_multiple_of(16) && s < 1 << 40)
        && inner_bytes.is_multiple_of(16)
        && (swizzle == Swizzle::None || inner_bytes <= 128);
    if !fits {
        return Ok(None);
    }
    let steps = [1u32; 5];
    let swizzle = match swizzle {
        Swizzle::None => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
        Swizzle::Bytes128 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
    };
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    // SAFETY: `dims`, `boxes` and `steps` hold at least `rank` entries and `strides` `rank - 1`
    // (checked above), which is what the call reads; `map` is a live local; `base` is a device
    // address the map only records.
    unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            kind,
            rank as u32,
            base as *mut c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            steps.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    }
    .result()
    .map_err(|e| Error::Device(format!("cuda: encoding a tensor map: {e}")))?;
    Ok(Some(TensorMap(map.opaque)))
}
