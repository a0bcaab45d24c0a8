//! TMA descriptors (`CUtensorMap`) of `[B, H, L, D]` arrays for the Hopper kernels: boxes of
//! 64 features × `rows` rows of one head, written by the copy engine in the 128-byte swizzle
//! `wgmma` reads, rows past the array's end filled with zeros.

use std::ffi::c_void;

use cudarc::driver::DeviceRepr;
use cudarc::driver::sys;

use crate::array::ArrayData;
use crate::{DType, Error, Result};

/// An encoded descriptor, passed by value as a kernel parameter (`NvTmap` in `flash_tma.cu`).
#[repr(C, align(64))]
#[derive(Clone, Copy)]
pub(super) struct TensorMap([u64; 16]);

// SAFETY: `TensorMap` is the 128 plain bytes of a `CUtensorMap`, which the kernel declares as a
// 64-byte aligned `__grid_constant__` parameter of the same size.
unsafe impl DeviceRepr for TensorMap {}

/// The descriptor of `data` (4-D, features contiguous, 16-byte aligned rows at non-negative
/// strides) at device address `ptr`, in boxes of 64 features × `rows` rows; `None` where TMA
/// cannot address the layout (a stride that is zero, negative, not a multiple of 16 bytes or
/// past 2^40 bytes), which the caller then reads another way.
pub(super) fn encode(ptr: u64, data: &ArrayData, rows: usize) -> Result<Option<TensorMap>> {
    let kind = match data.dtype() {
        DType::BF16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        DType::F16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        _ => return Ok(None),
    };
    let l = &data.layout;
    let size = data.dtype().size();
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
    if !base.is_multiple_of(16) {
        return Ok(None);
    }
    let dims = [l.shape[3], l.shape[2], l.shape[1], l.shape[0]].map(|n| n as u64);
    let boxes = [64u32, rows as u32, 1, 1];
    let steps = [1u32; 4];
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    // SAFETY: every pointer is to a live local of the length the call reads for rank 4
    // (4 dimensions, 3 strides, 4 box sizes, 4 element steps); `base` is a device address the
    // map only records.
    unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            kind,
            4,
            base as *mut c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            steps.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    }
    .result()
    .map_err(|e| Error::Device(format!("cuda: encoding a tensor map: {e}")))?;
    Ok(Some(TensorMap(map.opaque)))
}
