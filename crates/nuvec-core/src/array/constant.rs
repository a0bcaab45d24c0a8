//! Constants of any shape made from a Rust scalar: one element seen through zero strides, so a
//! weakly typed scalar next to an array of shape `S` is an input of shape `S` with no
//! broadcast node of its own.
//!
//! On a CPU stream, each thread keeps the constants it made last and hands them out again:
//! a chain such as `y = add(&y, 1.0)` then costs what it costs with an array operand (no
//! buffer made, nothing to schedule). Sharing is safe because a constant is never written:
//! a kernel only writes over a buffer that nobody else holds, and the cache holds these.
//! GPU streams get a fresh constant each time, so that no device memory is pinned by a cache.

use std::cell::RefCell;
use std::sync::Arc;

use super::{Array, ArrayData, Buffer, Layout};
use crate::dtype::{Canon, Element};
use crate::{DType, DeviceKind, Stream, default_stream};

/// Constants kept per thread; a new one replaces the one in its slot.
const SLOTS: usize = 64;

/// What identifies a constant: its value's bits (so `-0.0` and `0.0`, or two NaNs, are told
/// apart), its type, its stream and its shape.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Key {
    value: [u64; 3],
    dtype: DType,
    stream: Stream,
}

impl Key {
    fn new(value: Canon, dtype: DType, stream: Stream) -> Key {
        let value = match value {
            Canon::Bool(b) => [0, u64::from(b), 0],
            // Two halves of the i128, reinterpreted bit for bit.
            Canon::Int(i) => [1, i as u64, (i >> 64) as u64],
            Canon::Float(f) => [2, f.to_bits(), 0],
            Canon::Complex(re, im) => [3, re.to_bits(), im.to_bits()],
        };
        Key {
            value,
            dtype,
            stream,
        }
    }

    /// The slot of this key with `shape`: a multiplicative hash of every word.
    fn slot(&self, shape: &[usize]) -> usize {
        let words = self.value.iter().copied().chain([
            self.dtype as u64,
            self.stream.device.index as u64 * 2
                + (self.stream.device.kind == DeviceKind::Gpu) as u64,
            self.stream.index as u64,
        ]);
        let words = words.chain(shape.iter().map(|&n| n as u64));
        let h = words.fold(0u64, |h, w| {
            (h.rotate_left(23) ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        });
        (h >> 40) as usize % SLOTS
    }
}

thread_local! {
    static CACHE: RefCell<Vec<Option<(Key, Array)>>> = RefCell::new(vec![None; SLOTS]);
}

impl Array {
    /// An evaluated array of `shape` (on the default stream) whose elements are all `value`
    /// converted to `dtype`. Not for arrays a user may differentiate with respect to: two
    /// requests for the same constant may return the same array.
    pub(crate) fn constant(value: Canon, dtype: DType, shape: &[usize]) -> Array {
        let stream = default_stream();
        if stream.device.kind != DeviceKind::Cpu {
            return fresh(value, dtype, shape);
        }
        let key = Key::new(value, dtype, stream);
        let slot = key.slot(shape);
        CACHE.with(|cache| {
            let mut cache = cache.borrow_mut();
            if let Some((k, a)) = &cache[slot]
                && *k == key
                && a.shape() == shape
            {
                return a.clone();
            }
            let a = fresh(value, dtype, shape);
            cache[slot] = Some((key, a.clone()));
            a
        })
    }
}

/// A new constant: one element, zero strides.
fn fresh(value: Canon, dtype: DType, shape: &[usize]) -> Array {
    let host = crate::with_dtype!(dtype, T => T::into_host(vec![T::from_canon(value)]));
    Array::from_data(ArrayData {
        buffer: Arc::new(Buffer::from_host(host)),
        layout: Layout {
            shape: shape.to_vec(),
            strides: vec![0; shape.len()],
            offset: 0,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_are_shared_by_value_type_and_shape() {
        let a = Array::constant(Canon::Float(1.0), DType::F32, &[2, 3]);
        let b = Array::constant(Canon::Float(1.0), DType::F32, &[2, 3]);
        assert!(a.same(&b));
        assert_eq!(a.to_vec::<f32>().unwrap(), [1.0; 6]);
        let others = [
            Array::constant(Canon::Float(-1.0), DType::F32, &[2, 3]),
            Array::constant(Canon::Float(1.0), DType::F16, &[2, 3]),
            Array::constant(Canon::Float(1.0), DType::F32, &[3, 2]),
            Array::constant(Canon::Int(1), DType::F32, &[2, 3]),
        ];
        for o in &others {
            assert!(!a.same(o));
        }
        // Zero's sign is kept apart.
        let neg = Array::constant(Canon::Float(-0.0), DType::F32, &[]);
        assert!(neg.item::<f32>().unwrap().is_sign_negative());
        let pos = Array::constant(Canon::Float(0.0), DType::F32, &[]);
        assert!(pos.item::<f32>().unwrap().is_sign_positive());
    }
}
