//! Element types as the CUDA kernels name them. The backend's dtype dispatch happens here
//! once: every family asks [`type_names`] for the C++ type a source instantiates and the
//! suffix its kernel names carry, and [`kernel_types`] lists the types that have kernels.

use crate::{DType, Error, Result};

/// Every element type with kernels ([`DType::ALL`] but complex numbers, which run on the
/// host), in `DType::ALL`'s order.
pub(crate) fn kernel_types() -> impl Iterator<Item = DType> {
    DType::ALL.into_iter().filter(|&d| type_names(d).is_some())
}

/// The floating-point types, the ones the fused kernels instantiate.
pub(crate) const FLOAT_TYPES: [DType; 4] = [DType::F16, DType::BF16, DType::F32, DType::F64];

/// The CUDA type (`common.cuh`'s names) and the kernel-name suffix of an element type, or
/// `None` for complex numbers, which have no kernels.
pub(crate) fn type_names(dtype: DType) -> Option<(&'static str, &'static str)> {
    Some(match dtype {
        DType::Bool => ("bool", "bool"),
        DType::U8 => ("u8", "u8"),
        DType::U16 => ("u16", "u16"),
        DType::U32 => ("u32", "u32"),
        DType::U64 => ("u64", "u64"),
        DType::I8 => ("i8", "i8"),
        DType::I16 => ("i16", "i16"),
        DType::I32 => ("i32", "i32"),
        DType::I64 => ("i64", "i64"),
        DType::F16 => ("f16", "f16"),
        DType::BF16 => ("bf16", "bf16"),
        DType::F32 => ("float", "f32"),
        DType::F64 => ("double", "f64"),
        DType::C64 => return None,
    })
}

/// The kernel-name suffix of `dtype`, or the error for a type without kernels.
pub(crate) fn suffix(dtype: DType) -> Result<&'static str> {
    type_names(dtype)
        .map(|(_, s)| s)
        .ok_or_else(|| Error::Unsupported {
            op: "cuda",
            what: format!("kernels over {dtype}"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel types are every type but complex, each once, with distinct suffixes.
    #[test]
    fn kernel_types_are_every_real_type() {
        for d in DType::ALL {
            assert_eq!(kernel_types().any(|k| k == d), d != DType::C64, "{d}");
        }
        let mut suffixes: Vec<_> = kernel_types().map(|d| suffix(d).unwrap()).collect();
        suffixes.sort_unstable();
        suffixes.dedup();
        assert_eq!(suffixes.len(), kernel_types().count());
        assert!(suffix(DType::C64).is_err());
        assert!(FLOAT_TYPES.iter().all(|d| d.is_float()));
    }
}
