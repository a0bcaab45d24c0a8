//! Walking recorded graphs for the transforms.

use std::collections::HashSet;
use std::sync::Arc;

use crate::Array;
use crate::array::{Inner, Node};
use crate::primitive::Primitive;

/// A key identifying an array (its node output) while the graph is alive.
pub(crate) fn key(a: &Array) -> *const Inner {
    Arc::as_ptr(&a.0)
}

/// The nodes that produce `outputs`, inputs before the nodes that read them, not descending
/// below arrays in `stop` (the transform's stand-ins for its inputs).
pub(crate) fn tape(outputs: &[Array], stop: &HashSet<*const Inner>) -> Vec<Arc<Node>> {
    let mut order = Vec::new();
    let mut visited: HashSet<*const Node> = HashSet::new();
    let mut stack: Vec<(Arc<Node>, bool)> = Vec::new();
    let node_of = |a: &Array| -> Option<Arc<Node>> {
        if stop.contains(&key(a)) {
            return None;
        }
        a.0.node.as_ref().map(|(n, _)| Arc::clone(n))
    };
    stack.extend(outputs.iter().filter_map(node_of).map(|n| (n, false)));
    while let Some((node, expanded)) = stack.pop() {
        if expanded {
            order.push(node);
            continue;
        }
        if !visited.insert(Arc::as_ptr(&node)) {
            continue;
        }
        let children: Vec<Arc<Node>> = node
            .inputs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(node_of)
            .filter(|c| !visited.contains(&Arc::as_ptr(c)))
            .collect();
        stack.push((node, true));
        stack.extend(children.into_iter().map(|c| (c, false)));
    }
    order
}

/// The node's inputs (held while tracing).
pub(crate) fn inputs(node: &Node) -> Vec<Array> {
    node.inputs
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

/// The node's outputs that are still held (`None` for dropped ones).
pub(crate) fn outputs(node: &Node) -> Vec<Option<Array>> {
    node.outputs
        .get()
        .map(|outs| outs.iter().map(|w| w.upgrade().map(Array)).collect())
        .unwrap_or_default()
}

/// Whether a derivative flows from a node's outputs back into its input `i`: not through
/// `stop_gradient`, nor into the graph that a custom function's outputs came from (its rules
/// work from its primals).
pub(crate) fn differentiable(p: &Primitive, i: usize) -> bool {
    match p {
        Primitive::StopGradient => false,
        Primitive::Custom(op) => i < op.primals(),
        _ => true,
    }
}

/// Whether batching a node needs its input `i` batched: a custom function with a batching
/// rule of its own needs only its primals.
pub(crate) fn batching_reads(p: &Primitive, i: usize) -> bool {
    match p {
        Primitive::Custom(op) if op.has_vmap() => i < op.primals(),
        _ => true,
    }
}

/// For each node of `order` (a tape of `outputs`), whether one of its outputs reaches
/// `outputs` through inputs that `reads` accepts: the nodes a transform must visit.
pub(crate) fn needed(
    order: &[Arc<Node>],
    outputs: &[Array],
    reads: fn(&Primitive, usize) -> bool,
) -> Vec<bool> {
    let mut wanted: HashSet<*const Inner> = outputs.iter().map(key).collect();
    let mut keep = vec![false; order.len()];
    for (k, node) in order.iter().enumerate().rev() {
        if !outputs_of(node).any(|o| wanted.contains(&o)) {
            continue;
        }
        keep[k] = true;
        let ins = node.inputs.lock().unwrap_or_else(|e| e.into_inner());
        for (i, x) in ins.iter().enumerate() {
            if reads(&node.primitive, i) {
                wanted.insert(key(x));
            }
        }
    }
    keep
}

/// Keys of the node's outputs (alive or not: a key is only compared, never read).
fn outputs_of(node: &Node) -> impl Iterator<Item = *const Inner> + '_ {
    node.outputs
        .get()
        .into_iter()
        .flatten()
        .map(std::sync::Weak::as_ptr)
}
