//! The scheduler: sorts the graph below the requested arrays once (iteratively, so graphs
//! millions of nodes deep are fine) and runs each node on its stream's device.
//!
//! It sits below both [`crate::array`] (which evaluates on demand) and [`crate::transforms`]
//! (which mark, with [`TraceGuard`], the tracing during which graphs must stay whole).

use std::cell::Cell;
use std::collections::HashSet;
use std::sync::Arc;

use crate::array::{ArrayData, Node};
use crate::{Array, Error, Result};

thread_local! {
    static TRACING: Cell<usize> = const { Cell::new(0) };
}

/// Whether a transform is tracing on this thread (evaluation then keeps graphs whole).
pub(crate) fn tracing() -> bool {
    TRACING.with(Cell::get) > 0
}

/// Marks this thread as tracing while it lives.
pub(crate) struct TraceGuard;

impl TraceGuard {
    pub(crate) fn new() -> TraceGuard {
        TRACING.with(|t| t.set(t.get() + 1));
        TraceGuard
    }
}

impl Drop for TraceGuard {
    fn drop(&mut self) {
        TRACING.with(|t| t.set(t.get() - 1));
    }
}

/// Computes `arrays` and everything they depend on that is not computed yet.
///
/// ```
/// use nuvec_core::{Array, eval};
///
/// let a = Array::from_slice(&[1i32, 2, 3], &[3]).unwrap();
/// let b = &a + &a;
/// eval(&[b.clone()]).unwrap();
/// assert!(b.is_evaluated());
/// ```
pub fn eval(arrays: &[Array]) -> Result<()> {
    let ran = schedule(arrays).and_then(|order| order.iter().try_for_each(run));
    // GPU kernels recorded for a graph are launched before returning, also after an error
    // (the nodes that ran before it hold their results).
    let launched = crate::backend::finish();
    ran.and(launched)
}

/// Starts computing `arrays` and returns; reading their values waits for them. (CPU work
/// runs before this returns; GPU work is queued.)
pub fn async_eval(arrays: &[Array]) -> Result<()> {
    eval(arrays)
}

/// Waits until `data` may be read on the host.
pub(crate) fn synchronize(_data: &ArrayData) -> Result<()> {
    Ok(())
}

/// The nodes to run, inputs before the nodes that read them.
fn schedule(arrays: &[Array]) -> Result<Vec<Arc<Node>>> {
    let mut order = Vec::new();
    let mut visited: HashSet<*const Node> = HashSet::new();
    let mut stack: Vec<(Arc<Node>, bool)> = Vec::new();
    let pending = |a: &Array| -> Result<Option<Arc<Node>>> {
        if let Some(err) = a.error() {
            return Err(err);
        }
        if a.is_evaluated() {
            return Ok(None);
        }
        match &a.0.node {
            Some((node, _)) => Ok(Some(Arc::clone(node))),
            None => Err(crate::error::invalid(
                "eval",
                "an input stands for a batch inside vmap and has no value: a function under \
                 vmap cannot read values",
            )),
        }
    };
    for a in arrays {
        if let Some(node) = pending(a)? {
            stack.push((node, false));
        }
    }
    while let Some((node, expanded)) = stack.pop() {
        if expanded {
            order.push(node);
            continue;
        }
        if !visited.insert(Arc::as_ptr(&node)) {
            continue;
        }
        let inputs = node.inputs.lock().unwrap_or_else(|e| e.into_inner());
        let mut children = Vec::with_capacity(inputs.len());
        for input in inputs.iter() {
            if let Some(child) = pending(input)?
                && !visited.contains(&Arc::as_ptr(&child))
            {
                children.push(child);
            }
        }
        drop(inputs);
        stack.push((node, true));
        stack.extend(children.into_iter().map(|c| (c, false)));
    }
    Ok(order)
}

/// Runs one node and hands its results to the outputs still held.
fn run(node: &Arc<Node>) -> Result<()> {
    let mut guard = node.inputs.lock().unwrap_or_else(|e| e.into_inner());
    let outputs = node.outputs.get().map(Vec::as_slice).unwrap_or_default();
    let live: Vec<Arc<crate::array::Inner>> = outputs.iter().filter_map(|w| w.upgrade()).collect();
    if live.iter().all(|o| o.data.get().is_some()) {
        // Computed by another thread, or nobody wants the results any more.
        guard.clear();
        return Ok(());
    }
    let stream = live[0].stream;
    crate::backend::check_device(stream.device)?;
    // Inside a transform the graph must stay whole: keep the inputs (and donate nothing).
    let inputs = if tracing() {
        guard.clone()
    } else {
        std::mem::take(&mut *guard)
    };
    let mut datas = Vec::with_capacity(inputs.len());
    for input in inputs {
        datas.push(take_data(input)?);
    }
    match crate::backend::eval(stream, &node.primitive, &mut datas, &node.specs) {
        Ok(results) => {
            for inner in live {
                let (_, index) = inner.node.as_ref().expect("a node's output has the node");
                let _ = inner.data.set(results[*index].clone());
            }
            Ok(())
        }
        Err(err) => {
            // Keep the node computable: its inputs come back as the data they held.
            if guard.is_empty() {
                *guard = datas.into_iter().map(Array::from_data).collect();
            }
            Err(err)
        }
    }
}

/// The data of a computed input. When the node held the only handle to the array, the data
/// is moved out, so that the buffer's count tells whether the kernel may write over it.
fn take_data(input: Array) -> Result<ArrayData> {
    match Arc::try_unwrap(input.0) {
        Ok(inner) => inner
            .data
            .into_inner()
            .ok_or_else(|| Error::Device("an input was not computed".into())),
        Err(shared) => shared
            .data
            .get()
            .cloned()
            .ok_or_else(|| Error::Device("an input was not computed".into())),
    }
}
