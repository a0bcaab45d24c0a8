//! [`Array`]: a cheap, lazy handle to an n-dimensional array.
//!
//! An array is either data (from [`Array::from_slice`] and friends, or once evaluated) or the
//! output of a [`Primitive`] applied to other arrays. Operations only record nodes; [`eval`],
//! [`Array::to_vec`] and [`Array::item`] compute them. After a node is computed it drops its
//! inputs, so a graph never pins memory it no longer needs.
//!
//! ```
//! use nuvec_core::{Array, Result};
//!
//! # fn main() -> Result<()> {
//! let a = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
//! let b = &a * 2.0 + 1.0; // recorded, not computed
//! assert_eq!(b.to_vec::<f32>()?, [3.0, 5.0, 7.0, 9.0]);
//! # Ok(())
//! # }
//! ```
//!
//! [`eval`]: crate::eval

mod constant;
mod data;
mod display;
pub(crate) mod operand;
mod operators;
pub mod pool;

use std::sync::{Arc, Mutex, OnceLock, Weak};

pub use crate::dtype::HostData;
pub(crate) use data::DeviceData;
pub use data::{
    ArrayData, Buffer, Layout, collapse, for_each_strided, gather_row_major, row_major_strides,
};
pub use operand::{Operand, Scalar};

use crate::dtype::{Canon, Element};
use crate::primitive::Primitive;
use crate::{DType, Error, Result, Stream, default_stream};

/// An n-dimensional array: a shape, an element type, the stream it is computed on, and either
/// its data or the operation that produces it. Cloning is cheap (a reference count).
#[derive(Clone)]
pub struct Array(pub(crate) Arc<Inner>);

pub(crate) struct Inner {
    pub(crate) shape: Vec<usize>,
    pub(crate) dtype: DType,
    pub(crate) stream: Stream,
    /// Set for arrays that stand for a failed operation (see [`Array::error`]).
    pub(crate) error: Option<Error>,
    /// The node computing this array and which of its outputs this is; `None` for data.
    pub(crate) node: Option<(Arc<Node>, usize)>,
    pub(crate) data: OnceLock<ArrayData>,
}

/// One application of a primitive: its inputs until it is computed, and its outputs.
pub(crate) struct Node {
    pub(crate) primitive: Primitive,
    /// The shape and type of each output.
    pub(crate) specs: Vec<(Vec<usize>, DType)>,
    /// Taken (emptied) when the node is computed.
    pub(crate) inputs: Mutex<Vec<Array>>,
    /// The arrays this node computes; outputs nobody holds any more are skipped.
    pub(crate) outputs: OnceLock<Vec<Weak<Inner>>>,
}

impl Drop for Node {
    /// Drops a long chain of unevaluated nodes without recursing once per node.
    fn drop(&mut self) {
        let mut pending: Vec<Array> =
            std::mem::take(self.inputs.get_mut().unwrap_or_else(|e| e.into_inner()));
        while let Some(array) = pending.pop() {
            let Ok(inner) = Arc::try_unwrap(array.0) else {
                continue;
            };
            let Some((node, _)) = inner.node else {
                continue;
            };
            if let Ok(mut node) = Arc::try_unwrap(node) {
                let inputs = node.inputs.get_mut().unwrap_or_else(|e| e.into_inner());
                pending.append(inputs);
            }
        }
    }
}

impl Array {
    fn from_inner(inner: Inner) -> Array {
        Array(Arc::new(inner))
    }

    /// An array holding `data` with this logical shape and type, computed already.
    pub(crate) fn from_data(data: ArrayData) -> Array {
        let shape = data.layout.shape.clone();
        let dtype = data.dtype();
        let cell = OnceLock::new();
        let _ = cell.set(data);
        Array::leaf(shape, dtype, None, cell)
    }

    /// An array without a node, on the default stream.
    fn leaf(
        shape: Vec<usize>,
        dtype: DType,
        error: Option<Error>,
        data: OnceLock<ArrayData>,
    ) -> Array {
        Array::from_inner(Inner {
            shape,
            dtype,
            stream: default_stream(),
            error,
            node: None,
            data,
        })
    }

    /// An array in an error state: every operation given it, and [`crate::eval`], report
    /// `err` (how operators such as `+` carry an error they cannot return).
    pub fn from_error(err: Error) -> Array {
        Array::leaf(Vec::new(), DType::F32, Some(err), OnceLock::new())
    }

    /// An array of this shape and type with neither data nor a node: a stand-in that
    /// [`crate::vmap`] records a function's graph on. Evaluating it is an error.
    pub(crate) fn placeholder(shape: Vec<usize>, dtype: DType) -> Array {
        Array::leaf(shape, dtype, None, OnceLock::new())
    }

    /// The error this array stands for, if it is the result of a failed operation.
    pub fn error(&self) -> Option<Error> {
        self.0.error.clone()
    }

    /// Records `primitive` applied to `inputs` on the default stream, returning one array per
    /// output. The primitive's output shapes and types are computed (and the inputs checked)
    /// here, when the node is built.
    pub fn from_op(primitive: Primitive, inputs: Vec<Array>) -> Result<Vec<Array>> {
        if let Some(err) = inputs.iter().find_map(Array::error) {
            return Err(err);
        }
        let outputs = primitive.output_specs(&inputs)?;
        Ok(Array::record(primitive, inputs, outputs))
    }

    /// Records a node whose output shapes and types are already known and checked.
    pub(crate) fn record(
        primitive: Primitive,
        inputs: Vec<Array>,
        outputs: Vec<(Vec<usize>, DType)>,
    ) -> Vec<Array> {
        let stream = default_stream();
        let node = Arc::new(Node {
            primitive,
            specs: outputs.clone(),
            inputs: Mutex::new(inputs),
            outputs: OnceLock::new(),
        });
        let arrays: Vec<Array> = outputs
            .into_iter()
            .enumerate()
            .map(|(i, (shape, dtype))| {
                Array::from_inner(Inner {
                    shape,
                    dtype,
                    stream,
                    error: None,
                    node: Some((Arc::clone(&node), i)),
                    data: OnceLock::new(),
                })
            })
            .collect();
        let _ = node
            .outputs
            .set(arrays.iter().map(|a| Arc::downgrade(&a.0)).collect());
        arrays
    }

    /// Records a single-output primitive.
    pub(crate) fn op1(primitive: Primitive, inputs: Vec<Array>) -> Result<Array> {
        Ok(Array::from_op(primitive, inputs)?.swap_remove(0))
    }

    /// An array of the elements of `data` (row-major) with shape `shape`.
    pub fn from_slice<T: Element>(data: &[T], shape: &[usize]) -> Result<Array> {
        check_fill("from_slice", data.len(), shape)?;
        Ok(Array::from_data(ArrayData::from_vec(data.to_vec(), shape)))
    }

    /// An array taking ownership of `data` (row-major) with shape `shape`.
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> Result<Array> {
        check_fill("from_vec", data.len(), shape)?;
        Ok(Array::from_data(ArrayData::from_vec(data, shape)))
    }

    /// An array of host data of any element type (row-major) with shape `shape`.
    pub fn from_buffer(data: HostData, shape: &[usize]) -> Result<Array> {
        check_fill("from_buffer", data.len(), shape)?;
        Ok(Array::from_data(ArrayData::from_host(data, shape)))
    }

    /// A 0-dimensional array holding `value`, of `T`'s element type.
    pub fn scalar<T: Element>(value: T) -> Array {
        Array::from_data(ArrayData::from_vec(vec![value], &[]))
    }

    /// A 0-dimensional array holding `value` converted to `dtype`.
    pub(crate) fn scalar_of(value: Canon, dtype: DType) -> Array {
        crate::with_dtype!(dtype, T => Array::scalar(T::from_canon(value)))
    }

    /// An array of shape `shape` whose elements are all `value`.
    pub fn full<T: Element>(shape: &[usize], value: T) -> Result<Array> {
        crate::ops::broadcast_to(&Array::scalar(value), shape)
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.0.shape
    }

    /// The number of dimensions.
    pub fn ndim(&self) -> usize {
        self.0.shape.len()
    }

    /// The number of elements.
    pub fn size(&self) -> usize {
        self.0.shape.iter().product()
    }

    /// The number of bytes the elements take.
    pub fn nbytes(&self) -> usize {
        self.size() * self.dtype().size()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }

    /// The stream this array is computed on.
    pub fn stream(&self) -> Stream {
        self.0.stream
    }

    /// The primitive that computes this array, if it is not data.
    pub fn primitive(&self) -> Option<&Primitive> {
        self.0.node.as_ref().map(|(node, _)| &node.primitive)
    }

    /// Which output of its primitive this array is (0 for data and single outputs).
    pub fn output_index(&self) -> usize {
        self.0.node.as_ref().map_or(0, |(_, i)| *i)
    }

    /// The inputs of the node computing this array (empty for data and once computed).
    pub fn inputs(&self) -> Vec<Array> {
        match &self.0.node {
            Some((node, _)) => node
                .inputs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            None => Vec::new(),
        }
    }

    /// The other outputs of this array's node that are still held, with their indices.
    pub fn siblings(&self) -> Vec<(usize, Array)> {
        let Some((node, me)) = &self.0.node else {
            return Vec::new();
        };
        node.outputs
            .get()
            .map(|outs| {
                outs.iter()
                    .enumerate()
                    .filter(|(i, _)| i != me)
                    .filter_map(|(i, w)| w.upgrade().map(|inner| (i, Array(inner))))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether this array's value has been computed (or was given as data).
    pub fn is_evaluated(&self) -> bool {
        self.data().is_some()
    }

    /// The computed data, if any.
    pub(crate) fn data(&self) -> Option<&ArrayData> {
        self.0.data.get()
    }

    /// Whether two handles are the same array.
    pub fn same(&self, other: &Array) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Computes the array (and what it depends on).
    pub fn eval(&self) -> Result<()> {
        crate::scheduler::eval(std::slice::from_ref(self))
    }

    /// The computed data, evaluating first.
    pub(crate) fn evaluated(&self) -> Result<&ArrayData> {
        if let Some(err) = &self.0.error {
            return Err(err.clone());
        }
        if self.0.data.get().is_none() {
            self.eval()?;
        }
        self.0
            .data
            .get()
            .ok_or_else(|| Error::Device("the array was not computed".into()))
    }

    /// The elements in row-major order; `T` must be the array's element type (see
    /// [`Array::astype`]).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        let data = self.evaluated()?;
        crate::scheduler::synchronize(data)?;
        data.to_vec("to_vec")
    }

    /// The single element of a one-element array; `T` must be the array's element type.
    pub fn item<T: Element>(&self) -> Result<T> {
        if self.size() != 1 {
            return Err(crate::error::invalid(
                "item",
                format!("the array has {} elements, not one", self.size()),
            ));
        }
        Ok(self.to_vec::<T>()?[0])
    }

    /// The array converted to `dtype` (C casts: floats truncate toward zero into integers).
    pub fn astype(&self, dtype: DType) -> Result<Array> {
        crate::ops::astype(self, dtype)
    }

    /// The array with a new shape of the same size; one entry may be `-1` (inferred).
    pub fn reshape(&self, shape: &[isize]) -> Result<Array> {
        crate::ops::reshape(self, shape)
    }

    /// The array with its axes reversed (the transpose of a matrix).
    pub fn t(&self) -> Result<Array> {
        let axes: Vec<usize> = (0..self.ndim()).rev().collect();
        crate::ops::transpose(self, &axes)
    }
}

/// Checks that `len` elements fill `shape` exactly (the error names `op`).
fn check_fill(op: &'static str, len: usize, shape: &[usize]) -> Result<()> {
    let n: usize = shape.iter().product();
    if n != len {
        return Err(crate::error::invalid(
            op,
            format!("{len} elements do not fill shape {shape:?} ({n} elements)"),
        ));
    }
    Ok(())
}

impl Default for Array {
    /// The 0-dimensional `0.0f32`.
    fn default() -> Array {
        Array::scalar(0.0f32)
    }
}

impl<T: Element> From<T> for Array {
    fn from(value: T) -> Array {
        Array::scalar(value)
    }
}

// Arrays cross threads: checked when the crate compiles.
const _: fn() = || {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Array>();
};
