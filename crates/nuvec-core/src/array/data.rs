//! The data behind an evaluated array: a [`Buffer`] of elements and the [`Layout`] that maps an
//! index to one of them. Views (transpose, broadcast, slices, most reshapes) share a buffer
//! with a new layout.

use std::any::Any;
use std::fmt::Debug;
use std::sync::{Arc, OnceLock};

use crate::dtype::{Element, HostData};
use crate::{DType, Error, Result};

/// A buffer's elements in a device's memory, as the backend that put them there keeps them.
/// A [`Buffer`] holds one without knowing the backend; the backend gets its own type back
/// with [`Buffer::device`] (a type check, no allocation).
pub(crate) trait DeviceData: Send + Sync + Debug + Any {
    /// The `len` elements of type `dtype`, copied to the host after the work that computes
    /// them.
    fn to_host(&self, dtype: DType, len: usize) -> Result<HostData>;
}

/// Memory holding an array's elements. Several arrays (views) may share one buffer.
///
/// The elements live on the host, on a GPU, or both: a copy is made where it is needed (the
/// CPU backend reads the host copy, a GPU kernel the device copy) and then kept, so data
/// moves at most once each way. Writing through [`Buffer::host_mut`] drops the device copy.
/// The host accessors ([`Buffer::host`], [`Buffer::host_mut`], [`Buffer::into_host`]) copy
/// elements that live only on a device to the host first, and return an error if they cannot.
#[derive(Debug)]
pub struct Buffer {
    dtype: DType,
    len: usize,
    host: OnceLock<HostData>,
    device: OnceLock<Box<dyn DeviceData>>,
}

impl Buffer {
    /// A buffer of host elements.
    pub fn from_host(host: HostData) -> Buffer {
        Buffer {
            dtype: host.dtype(),
            len: host.len(),
            host: OnceLock::from(host),
            device: OnceLock::new(),
        }
    }

    /// A buffer whose elements live on a GPU.
    pub(crate) fn from_device(copy: impl DeviceData, dtype: DType, len: usize) -> Buffer {
        Buffer {
            dtype,
            len,
            host: OnceLock::new(),
            device: OnceLock::from(Box::new(copy) as Box<dyn DeviceData>),
        }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The elements on the host, copied from the device (after the work that computes them)
    /// the first time they are read there; the host copy is then kept. An error, not a
    /// panic, when that copy fails.
    pub fn host(&self) -> Result<&HostData> {
        if let Some(h) = self.host.get() {
            return Ok(h);
        }
        let copy = self.device.get().ok_or_else(missing)?;
        let host = copy.to_host(self.dtype, self.len)?;
        // Another thread may have made the copy meanwhile; either is the same data.
        let _ = self.host.set(host);
        self.host.get().ok_or_else(missing)
    }

    /// The host elements of a buffer that the CPU backend's kernels read, for the helpers
    /// that cannot return an error: the backend makes every input resident on the host
    /// before a kernel runs (and its outputs are made there), so the copy is present.
    pub(crate) fn resident_host(&self) -> &HostData {
        self.host
            .get()
            .expect("the CPU backend's inputs are resident on the host")
    }

    /// Makes the host copy resident (see [`Buffer::host`]): for callers about to read the
    /// elements on the host through other means.
    pub fn ensure_host(&self) -> Result<&HostData> {
        self.host()
    }

    /// The device copy, if there is one and it is of the backend type `D`.
    pub(crate) fn device<D: DeviceData>(&self) -> Option<&D> {
        self.device.get().and_then(|d| downcast(d.as_ref()))
    }

    /// Keeps `copy` as this buffer's device copy (made from the host copy), and returns the
    /// copy kept: another thread's, if it was first (the same elements), and `None` if that
    /// one is another backend's.
    pub(crate) fn set_device<D: DeviceData>(&self, copy: D) -> Option<&D> {
        let _ = self.device.set(Box::new(copy));
        self.device::<D>()
    }

    /// The device copy, for writing in place (the buffer is owned alone), with the host
    /// copy, about to be stale, dropped; `None` (and nothing dropped) without a device copy
    /// of type `D`.
    pub(crate) fn device_for_write<D: DeviceData>(&mut self) -> Option<&D> {
        self.device::<D>()?;
        if let Some(h) = self.host.take() {
            super::pool::release(h);
        }
        self.device::<D>()
    }

    /// The elements on the host, mutably (the buffer must be owned alone), copied from the
    /// device first if they live only there; the device copy, now stale, is dropped.
    pub fn host_mut(&mut self) -> Result<&mut HostData> {
        self.host()?;
        self.device.take();
        self.host.get_mut().ok_or_else(missing)
    }

    /// The host elements, taking the buffer (copied from the device first if they live only
    /// there).
    pub fn into_host(mut self) -> Result<HostData> {
        self.host()?;
        self.host.take().ok_or_else(missing)
    }
}

/// The error of a buffer without elements anywhere (which no constructor makes).
fn missing() -> Error {
    Error::Device("a buffer has neither host nor device elements".into())
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if let Some(h) = self.host.take() {
            super::pool::release(h);
        }
    }
}

/// `data` as the backend type `D`, if it is one.
fn downcast<D: DeviceData>(data: &dyn DeviceData) -> Option<&D> {
    (data as &dyn Any).downcast_ref::<D>()
}

/// How an index maps to a buffer element: `offset + Σ index[i] · strides[i]`, in elements.
/// Strides may be zero (broadcast) or negative (reversed slices).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The array's shape.
    pub shape: Vec<usize>,
    /// The step in elements along each axis.
    pub strides: Vec<isize>,
    /// The element of index zero.
    pub offset: usize,
}

/// Row-major strides of `shape`.
pub fn row_major_strides(shape: &[usize]) -> Vec<isize> {
    let mut strides = vec![0isize; shape.len()];
    let mut acc = 1isize;
    for (s, &n) in strides.iter_mut().zip(shape).rev() {
        *s = acc;
        acc *= n.max(1) as isize;
    }
    strides
}

impl Layout {
    /// A row-major layout of `shape` from element 0.
    pub fn contiguous(shape: &[usize]) -> Layout {
        Layout {
            shape: shape.to_vec(),
            strides: row_major_strides(shape),
            offset: 0,
        }
    }

    /// The number of elements.
    pub fn size(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the elements are in row-major order, one after another, from `offset` (axes of
    /// size 1 may have any stride; a layout of no elements always is).
    pub fn is_row_contiguous(&self) -> bool {
        if self.size() == 0 {
            return true;
        }
        let mut expected = 1isize;
        for (&n, &s) in self.shape.iter().zip(&self.strides).rev() {
            if n == 1 {
                continue;
            }
            if s != expected {
                return false;
            }
            expected *= n as isize;
        }
        true
    }

    /// Whether every index maps to the same element.
    pub fn is_scalar_broadcast(&self) -> bool {
        self.shape
            .iter()
            .zip(&self.strides)
            .all(|(&n, &s)| n <= 1 || s == 0)
    }

    /// The buffer element of a multi-index.
    pub fn element(&self, index: &[usize]) -> usize {
        let mut at = self.offset as isize;
        for (&i, &s) in index.iter().zip(&self.strides) {
            at += i as isize * s;
        }
        at as usize
    }
}

/// Merges adjacent axes that every layout traverses as one (and drops axes of size 1), so
/// strided loops run over as few, as long, axes as possible. Returns the merged shape and the
/// merged strides of each layout.
pub fn collapse(shape: &[usize], strides: &[&[isize]]) -> (Vec<usize>, Vec<Vec<isize>>) {
    let mut out_shape: Vec<usize> = Vec::with_capacity(shape.len());
    let mut out_strides: Vec<Vec<isize>> = vec![Vec::with_capacity(shape.len()); strides.len()];
    for (axis, &n) in shape.iter().enumerate() {
        if n == 1 {
            continue;
        }
        let mergeable = !out_shape.is_empty()
            && strides.iter().zip(&out_strides).all(|(s, o)| {
                let last = *o.last().expect("same length as out_shape");
                last == s[axis] * n as isize
            });
        if mergeable {
            let last = out_shape.len() - 1;
            out_shape[last] *= n;
            for (s, o) in strides.iter().zip(out_strides.iter_mut()) {
                o[last] = s[axis];
            }
        } else {
            out_shape.push(n);
            for (s, o) in strides.iter().zip(out_strides.iter_mut()) {
                o.push(s[axis]);
            }
        }
    }
    (out_shape, out_strides)
}

/// Visits the buffer positions of `count` consecutive elements (in row-major order of `shape`)
/// starting at linear index `start`, for several layouts at once: `f(positions)` is called
/// with one buffer position per layout, and the inner axis runs as a tight loop.
pub fn for_each_strided<const N: usize>(
    shape: &[usize],
    strides: [&[isize]; N],
    offsets: [usize; N],
    start: usize,
    count: usize,
    mut f: impl FnMut([usize; N]),
) {
    if count == 0 {
        return;
    }
    let nd = shape.len();
    if nd == 0 {
        f(offsets);
        return;
    }
    // The multi-index of `start`.
    let mut index = vec![0usize; nd];
    let mut rem = start;
    for axis in (0..nd).rev() {
        index[axis] = rem % shape[axis];
        rem /= shape[axis];
    }
    let mut pos = [0isize; N];
    for k in 0..N {
        pos[k] = offsets[k] as isize;
        for axis in 0..nd {
            pos[k] += index[axis] as isize * strides[k][axis];
        }
    }
    let inner = shape[nd - 1];
    let inner_strides: [isize; N] = std::array::from_fn(|k| strides[k][nd - 1]);
    let mut left = count;
    loop {
        let run = (inner - index[nd - 1]).min(left);
        for _ in 0..run {
            f(pos.map(|p| p as usize));
            for k in 0..N {
                pos[k] += inner_strides[k];
            }
        }
        left -= run;
        if left == 0 {
            return;
        }
        // Carry into the outer axes.
        for k in 0..N {
            pos[k] -= inner_strides[k] * (index[nd - 1] + run) as isize;
        }
        index[nd - 1] = 0;
        let mut axis = nd - 1;
        loop {
            if axis == 0 {
                return;
            }
            axis -= 1;
            index[axis] += 1;
            for k in 0..N {
                pos[k] += strides[k][axis];
            }
            if index[axis] < shape[axis] {
                break;
            }
            for k in 0..N {
                pos[k] -= strides[k][axis] * shape[axis] as isize;
            }
            index[axis] = 0;
        }
    }
}

/// An evaluated array's data: a shared buffer and the layout of this array within it.
#[derive(Debug, Clone)]
pub struct ArrayData {
    /// The elements (possibly shared with other arrays).
    pub buffer: Arc<Buffer>,
    /// Where this array's elements are.
    pub layout: Layout,
}

impl ArrayData {
    /// Data owning `host` laid out row-major as `shape`.
    pub fn from_host(host: HostData, shape: &[usize]) -> ArrayData {
        debug_assert_eq!(host.len(), shape.iter().product::<usize>());
        ArrayData {
            buffer: Arc::new(Buffer::from_host(host)),
            layout: Layout::contiguous(shape),
        }
    }

    /// Data owning `v` laid out row-major as `shape`.
    pub fn from_vec<T: Element>(v: Vec<T>, shape: &[usize]) -> ArrayData {
        ArrayData::from_host(T::into_host(v), shape)
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.buffer.dtype()
    }

    /// The same buffer seen through another layout.
    pub fn view(&self, layout: Layout) -> ArrayData {
        ArrayData {
            buffer: Arc::clone(&self.buffer),
            layout,
        }
    }

    /// Whether this data is the only holder of its buffer, so that an operation may write its
    /// result there (donation).
    pub fn is_donatable(&self) -> bool {
        Arc::strong_count(&self.buffer) == 1
    }

    /// The elements in row-major order, as a new vector.
    pub fn to_vec<T: Element>(&self, op: &'static str) -> Result<Vec<T>> {
        let src = self.buffer.host()?.typed::<T>(op)?;
        Ok(gather_row_major(src, &self.layout))
    }

    /// The elements as a row-major slice when the layout allows it without copying.
    pub fn contiguous_slice<T: Element>(&self) -> Option<&[T]> {
        if !self.layout.is_row_contiguous() {
            return None;
        }
        let src = T::host_slice(self.buffer.host().ok()?)?;
        Some(&src[self.layout.offset..self.layout.offset + self.layout.size()])
    }
}

/// The elements of a strided layout in row-major order.
pub fn gather_row_major<T: Copy>(src: &[T], layout: &Layout) -> Vec<T> {
    let n = layout.size();
    if layout.is_row_contiguous() {
        return src[layout.offset..layout.offset + n].to_vec();
    }
    let mut out = Vec::with_capacity(n);
    let (shape, strides) = collapse(&layout.shape, &[&layout.strides]);
    for_each_strided(&shape, [&strides[0]], [layout.offset], 0, n, |[p]| {
        out.push(src[p])
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device that hands back the elements it was given, or fails when it has none.
    #[derive(Debug)]
    struct FakeDevice(Option<HostData>);

    impl DeviceData for FakeDevice {
        fn to_host(&self, _dtype: DType, _len: usize) -> Result<HostData> {
            self.0
                .clone()
                .ok_or_else(|| Error::Device("the fake device lost its elements".into()))
        }
    }

    #[test]
    fn host_accessors_copy_from_the_device_or_return_an_error() {
        let elements = HostData::F32(vec![1.0, 2.0]);
        let on_device = || Buffer::from_device(FakeDevice(Some(elements.clone())), DType::F32, 2);
        assert_eq!(on_device().host().unwrap(), &elements);
        assert_eq!(on_device().into_host().unwrap(), elements);
        let mut b = on_device();
        if let HostData::F32(v) = b.host_mut().unwrap() {
            v[0] = 5.0;
        }
        assert!(
            b.device::<FakeDevice>().is_none(),
            "the stale device copy is dropped"
        );
        assert_eq!(b.into_host().unwrap(), HostData::F32(vec![5.0, 2.0]));
        let on_host = Buffer::from_host(elements.clone());
        assert_eq!(on_host.host().unwrap(), &elements);

        let lost = || Buffer::from_device(FakeDevice(None), DType::F32, 2);
        assert!(matches!(lost().host(), Err(Error::Device(_))));
        assert!(matches!(lost().host_mut(), Err(Error::Device(_))));
        assert!(matches!(lost().into_host(), Err(Error::Device(_))));
        let mut b = lost();
        assert!(b.host_mut().is_err());
        assert!(
            b.device::<FakeDevice>().is_some(),
            "a failed copy keeps the device copy"
        );
    }

    #[test]
    fn collapse_merges_contiguous_axes() {
        let (s, st) = collapse(&[2, 3, 4], &[&[12, 4, 1]]);
        assert_eq!(s, vec![24]);
        assert_eq!(st, vec![vec![1]]);
        let (s, st) = collapse(&[2, 1, 3, 4], &[&[1, 99, 8, 2]]);
        assert_eq!(s, vec![2, 12]);
        assert_eq!(st, vec![vec![1, 2]]);
    }

    #[test]
    fn strided_walk_starts_anywhere() {
        // A transposed 3x4: element (i, j) at j * 3 + i.
        let shape = [4usize, 3];
        let strides: &[isize] = &[1, 4];
        let mut all = Vec::new();
        for_each_strided(&shape, [strides], [0], 0, 12, |[p]| all.push(p));
        assert_eq!(all, vec![0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]);
        let mut part = Vec::new();
        for_each_strided(&shape, [strides], [0], 5, 4, |[p]| part.push(p));
        assert_eq!(part, all[5..9].to_vec());
    }
}
