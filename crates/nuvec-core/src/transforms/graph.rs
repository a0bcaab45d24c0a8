//! Walking recorded graphs for the transforms.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::thread::LocalKey;

use crate::Array;
use crate::array::{Inner, Node};
use crate::primitive::Primitive;

/// A key identifying an array (its node output) while the graph is alive.
pub(crate) type Key = *const Inner;

/// A key identifying an array (its node output) while the graph is alive.
pub(crate) fn key(a: &Array) -> Key {
    Arc::as_ptr(&a.0)
}

/// Hashes addresses: one multiplication and a fold, where SipHash would cost more than the
/// rest of a transform's work per node. Addresses are not chosen by an adversary.
#[derive(Default, Clone, Copy)]
pub(crate) struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        // The product's high bits are the well-mixed ones: fold them into the low bits that
        // pick the bucket (aligned addresses have zero low bits).
        self.0 ^ (self.0 >> 32)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(21) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// A map keyed by addresses.
pub(crate) type KeyMap<V> = HashMap<Key, V, BuildHasherDefault<AddressHasher>>;
/// A set of addresses.
pub(crate) type KeySet = HashSet<Key, BuildHasherDefault<AddressHasher>>;

/// One node of a tape, with its inputs (held while the transform walks it).
pub(crate) struct Step {
    pub(crate) node: Arc<Node>,
    pub(crate) inputs: Vec<Array>,
}

impl Step {
    /// The primitive.
    pub(crate) fn primitive(&self) -> &Primitive {
        &self.node.primitive
    }

    /// Keys of the node's outputs (alive or not: a key is only compared, never read; the node's
    /// weak handles keep the addresses from being reused).
    pub(crate) fn output_keys(&self) -> impl Iterator<Item = Key> + '_ {
        self.node
            .outputs
            .get()
            .into_iter()
            .flatten()
            .map(std::sync::Weak::as_ptr)
    }

    /// The node's outputs that are still held (`None` for dropped ones).
    pub(crate) fn outputs(&self) -> Vec<Option<Array>> {
        let mut outs = Vec::new();
        self.outputs_into(&mut outs);
        outs
    }

    /// [`Step::outputs`], appended to `outs`.
    pub(crate) fn outputs_into(&self, outs: &mut Vec<Option<Array>>) {
        let held = self.node.outputs.get().into_iter().flatten();
        outs.extend(held.map(|w| w.upgrade().map(Array)));
    }
}

/// A buffer kept between transforms on this thread: tracing a large graph again then reuses
/// the tables it grew last time instead of allocating them anew (with glibc, each large
/// allocation also consolidates the memory the last graph freed, which cost more than the
/// walk). A transform nested in another finds the slot empty and allocates its own.
type Slot<T> = LocalKey<Cell<Option<T>>>;

/// Tables above this many entries are not kept.
const KEEP_AT_MOST: usize = 1 << 16;

fn take<T: Default>(slot: &'static Slot<T>) -> T {
    slot.with(Cell::take).unwrap_or_default()
}

fn keep<T>(slot: &'static Slot<T>, value: T) {
    slot.with(|s| s.set(Some(value)));
}

/// A walk's pending visit: a node to expand, or one whose inputs are all recorded.
enum Visit {
    Enter(Arc<Node>),
    Leave(Arc<Node>, Vec<Array>),
}

type NodeSet = HashSet<*const Node, BuildHasherDefault<AddressHasher>>;

thread_local! {
    static VISITED: Cell<Option<NodeSet>> = const { Cell::new(None) };
    static STACK: Cell<Option<Vec<Visit>>> = const { Cell::new(None) };
    static ORDER: Cell<Option<Vec<Step>>> = const { Cell::new(None) };
    static SETS: Cell<Option<Vec<KeySet>>> = const { Cell::new(None) };
    static MAPS: Cell<Option<Vec<KeyMap<Array>>>> = const { Cell::new(None) };
}

/// A value from `pools`, or a new one: how the key sets and maps are reused.
fn from_pool<T: Default>(pools: &'static Slot<Vec<T>>) -> T {
    let mut pool = take(pools);
    let value = pool.pop().unwrap_or_default();
    keep(pools, pool);
    value
}

/// Puts a cleared `value` back into `pools` for the next transform.
fn into_pool<T>(pools: &'static Slot<Vec<T>>, value: T) {
    let mut pool = take(pools);
    pool.push(value);
    keep(pools, pool);
}

/// An empty key set, reusing one a transform gave back.
pub(crate) fn key_set() -> KeySet {
    from_pool(&SETS)
}

/// An empty key map, reusing one a transform gave back.
pub(crate) fn key_map() -> KeyMap<Array> {
    from_pool(&MAPS)
}

/// Gives a key set back for the next transform.
pub(crate) fn recycle_set(mut set: KeySet) {
    if set.capacity() <= KEEP_AT_MOST {
        set.clear();
        into_pool(&SETS, set);
    }
}

/// Gives a key map back for the next transform (its arrays are dropped).
pub(crate) fn recycle_map(mut map: KeyMap<Array>) {
    if map.capacity() <= KEEP_AT_MOST {
        map.clear();
        into_pool(&MAPS, map);
    }
}

/// Gives a tape back for the next transform (its steps are dropped).
pub(crate) fn recycle(mut order: Vec<Step>) {
    if order.capacity() <= KEEP_AT_MOST {
        order.clear();
        keep(&ORDER, order);
    }
}

/// The nodes that produce `outputs`, inputs before the nodes that read them, not descending
/// below arrays in `stop` (the transform's stand-ins for its inputs). `on_step` sees each step
/// as it is recorded (so, after the steps of its inputs). Give the tape back with [`recycle`].
pub(crate) fn tape(outputs: &[Array], stop: &KeySet, mut on_step: impl FnMut(&Step)) -> Vec<Step> {
    let mut order = take(&ORDER);
    let mut visited = take(&VISITED);
    let mut stack = take(&STACK);
    let mut children: Vec<Arc<Node>> = Vec::new();
    fn node_of<'a>(a: &'a Array, stop: &KeySet) -> Option<&'a Arc<Node>> {
        if stop.contains(&key(a)) {
            return None;
        }
        a.0.node.as_ref().map(|(n, _)| n)
    }
    stack.extend(
        outputs
            .iter()
            .filter_map(|a| node_of(a, stop))
            .map(|n| Visit::Enter(Arc::clone(n))),
    );
    while let Some(visit) = stack.pop() {
        let node = match visit {
            Visit::Leave(node, inputs) => {
                let step = Step { node, inputs };
                on_step(&step);
                order.push(step);
                continue;
            }
            Visit::Enter(node) => node,
        };
        if !visited.insert(Arc::as_ptr(&node)) {
            continue;
        }
        let inputs = node
            .inputs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        // Children already visited are skipped when popped (one lookup per edge, not two).
        children.extend(inputs.iter().filter_map(|a| node_of(a, stop)).cloned());
        stack.push(Visit::Leave(node, inputs));
        stack.extend(children.drain(..).map(Visit::Enter));
    }
    if visited.capacity() <= KEEP_AT_MOST {
        visited.clear();
        keep(&VISITED, visited);
    }
    if stack.capacity() <= KEEP_AT_MOST {
        keep(&STACK, stack);
    }
    order
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

/// For each step of `order` (a tape of `outputs`), whether one of its outputs reaches
/// `outputs` through inputs that `reads` accepts: the nodes a transform must visit.
pub(crate) fn needed(
    order: &[Step],
    outputs: &[Array],
    reads: fn(&Primitive, usize) -> bool,
) -> Vec<bool> {
    let mut wanted = key_set();
    wanted.extend(outputs.iter().map(key));
    let mut keep = vec![false; order.len()];
    for (k, step) in order.iter().enumerate().rev() {
        if !step.output_keys().any(|o| wanted.contains(&o)) {
            continue;
        }
        keep[k] = true;
        for (i, x) in step.inputs.iter().enumerate() {
            if reads(step.primitive(), i) {
                wanted.insert(key(x));
            }
        }
    }
    recycle_set(wanted);
    keep
}
