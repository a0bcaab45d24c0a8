//! Reverse mode: [`vjp`], [`grad`] and [`value_and_grad`].

use std::collections::hash_map::Entry;

use super::TraceGuard;
use super::graph::{
    KeyMap, differentiable, key, key_map, key_set, recycle, recycle_map, recycle_set, tape,
};
use crate::error::invalid;
use crate::primitive::Primitive;
use crate::{Array, Result};

/// Stand-ins for a transform's inputs: identity nodes, so that an outer transform still
/// sees through them.
pub(crate) fn tracers(primals: &[Array]) -> Result<Vec<Array>> {
    primals
        .iter()
        .map(|p| Array::op1(Primitive::Identity, vec![p.clone()]))
        .collect()
}

/// An error unless the `seeds` (tangents or cotangents) pair up with the `values` they seed
/// (primals or outputs): as many, each of its value's shape. `value` and `seed` name the two
/// roles in the messages.
pub(crate) fn check_seeds(
    op: &'static str,
    values: &[Array],
    seeds: &[Array],
    [value, seed]: [&str; 2],
) -> Result<()> {
    if values.len() != seeds.len() {
        return Err(invalid(
            op,
            format!("{} {value}s but {} {seed}s", values.len(), seeds.len()),
        ));
    }
    for (i, (v, s)) in values.iter().zip(seeds).enumerate() {
        if v.shape() != s.shape() {
            return Err(invalid(
                op,
                format!(
                    "{value} {i} has shape {:?} but its {seed} {:?}",
                    v.shape(),
                    s.shape()
                ),
            ));
        }
    }
    Ok(())
}

/// The outputs of `f` at `primals` and the vector-Jacobian products of `cotangents` (one per
/// output, of its shape) with respect to each primal.
///
/// ```
/// use nuvec_core::{Array, multiply, vjp};
///
/// let x = Array::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
/// let square = |xs: &[Array]| Ok(vec![multiply(&xs[0], &xs[0])?]);
/// let ones = Array::from_slice(&[1.0f32; 3], &[3]).unwrap();
/// let (out, grads) = vjp(square, &[x], &[ones]).unwrap();
/// assert_eq!(out[0].to_vec::<f32>().unwrap(), [1.0, 4.0, 9.0]);
/// assert_eq!(grads[0].to_vec::<f32>().unwrap(), [2.0, 4.0, 6.0]);
/// ```
pub fn vjp<F>(f: F, primals: &[Array], cotangents: &[Array]) -> Result<(Vec<Array>, Vec<Array>)>
where
    F: Fn(&[Array]) -> Result<Vec<Array>>,
{
    let refs: Vec<&Array> = primals.iter().chain(cotangents).collect();
    crate::ops::check_errors(&refs)?;
    let _trace = TraceGuard::new();
    let xs = tracers(primals)?;
    let outs = f(&xs)?;
    if outs.is_empty() {
        return Err(invalid("vjp", "the function returned no outputs"));
    }
    check_seeds("vjp", &outs, cotangents, ["output", "cotangent"])?;
    let grads = backward(&xs, primals, &outs, cotangents)?;
    Ok((outs, grads))
}

/// Accumulates cotangents from the outputs back to the tracers `xs`.
fn backward(
    xs: &[Array],
    primals: &[Array],
    outs: &[Array],
    cotangents: &[Array],
) -> Result<Vec<Array>> {
    let mut stop = key_set();
    stop.extend(xs.iter().map(key));
    // Which arrays depend on a tracer (only those carry cotangents back), found as the tape
    // is recorded, inputs first.
    let mut depends = key_set();
    depends.extend(xs.iter().map(key));
    let order = tape(outs, &stop, |step| {
        let p = step.primitive();
        if step
            .inputs
            .iter()
            .enumerate()
            .any(|(i, x)| differentiable(p, i) && depends.contains(&key(x)))
        {
            depends.extend(step.output_keys());
        }
    });
    let mut cots = key_map();
    for (o, c) in outs.iter().zip(cotangents) {
        if !depends.contains(&key(o)) || !o.dtype().is_inexact() {
            continue;
        }
        accumulate(&mut cots, o, c.astype(o.dtype())?)?;
    }
    // Buffers reused from node to node.
    let (mut node_cots, mut argnums, mut node_outputs) = (Vec::new(), Vec::new(), Vec::new());
    for step in order.iter().rev() {
        node_cots.clear();
        node_cots.extend(step.output_keys().map(|k| cots.remove(&k)));
        if node_cots.iter().all(Option::is_none) {
            continue;
        }
        let ins = &step.inputs;
        let p = step.primitive();
        argnums.clear();
        argnums.extend((0..ins.len()).filter(|&i| {
            differentiable(p, i) && ins[i].dtype().is_inexact() && depends.contains(&key(&ins[i]))
        }));
        if argnums.is_empty() {
            continue;
        }
        node_outputs.clear();
        step.outputs_into(&mut node_outputs);
        let grads = p.vjp(ins, &node_outputs, &node_cots, &argnums)?;
        for (&i, g) in argnums.iter().zip(grads) {
            accumulate(&mut cots, &ins[i], g)?;
        }
    }
    let grads = xs
        .iter()
        .zip(primals)
        .map(|(x, p)| match cots.remove(&key(x)) {
            Some(g) => Ok(g),
            None => crate::zeros_like(p),
        })
        .collect();
    recycle(order);
    recycle_set(stop);
    recycle_set(depends);
    recycle_map(cots);
    grads
}

fn accumulate(cots: &mut KeyMap<Array>, a: &Array, g: Array) -> Result<()> {
    let g = if g.dtype() != a.dtype() {
        g.astype(a.dtype())?
    } else {
        g
    };
    match cots.entry(key(a)) {
        Entry::Occupied(mut prev) => {
            let sum = crate::add(prev.get(), &g)?;
            prev.insert(sum);
        }
        Entry::Vacant(slot) => {
            slot.insert(g);
        }
    }
    Ok(())
}

/// A function returning `f`'s gradient with respect to the inputs `argnums`. `f`'s first
/// output is the loss, of one element; any further outputs are auxiliary values that no
/// gradient flows from (see [`value_and_grad`]). As in MLX, `argnums` must name at least one
/// input, none twice, and the gradients come in increasing input order whatever order
/// `argnums` lists them in. Integer and boolean inputs are constants: their gradient is zeros
/// of their type.
///
/// ```
/// use nuvec_core::{Array, grad, multiply};
///
/// // f(x, y) = x² y at (3, 2): df/dx = 2xy = 12.
/// let f = |xs: &[Array]| Ok(vec![multiply(&multiply(&xs[0], &xs[0])?, &xs[1])?]);
/// let (x, y) = (Array::scalar(3.0f64), Array::scalar(2.0f64));
/// let g = grad(f, &[0])(&[x, y]).unwrap();
/// assert_eq!(g[0].item::<f64>().unwrap(), 12.0);
/// ```
pub fn grad<F>(f: F, argnums: &[usize]) -> impl Fn(&[Array]) -> Result<Vec<Array>>
where
    F: Fn(&[Array]) -> Result<Vec<Array>>,
{
    let vg = value_and_grad(f, argnums);
    move |xs: &[Array]| Ok(vg(xs)?.1)
}

/// A function returning every output of `f` and the gradient of the first (the loss, of one
/// element) with respect to the inputs `argnums`, in increasing input order (see [`grad`]).
/// The other outputs are returned as they are, as MLX's auxiliary outputs.
///
/// ```
/// use nuvec_core::{Array, square, value_and_grad};
///
/// // A loss and, beside it, a value to report: only the loss is differentiated.
/// let f = |xs: &[Array]| Ok(vec![square(&xs[0])?, xs[0].clone()]);
/// let (values, grads) = value_and_grad(f, &[0])(&[Array::scalar(3.0f32)]).unwrap();
/// assert_eq!(values[0].item::<f32>().unwrap(), 9.0);
/// assert_eq!(values[1].item::<f32>().unwrap(), 3.0);
/// assert_eq!(grads[0].item::<f32>().unwrap(), 6.0);
/// ```
pub fn value_and_grad<F>(
    f: F,
    argnums: &[usize],
) -> impl Fn(&[Array]) -> Result<(Vec<Array>, Vec<Array>)>
where
    F: Fn(&[Array]) -> Result<Vec<Array>>,
{
    let argnums = argnums.to_vec();
    move |xs: &[Array]| {
        let argnums = checked_argnums(&argnums, xs.len())?;
        let refs: Vec<&Array> = xs.iter().collect();
        crate::ops::check_errors(&refs)?;
        let _trace = TraceGuard::new();
        let chosen: Vec<Array> = argnums.iter().map(|&i| xs[i].clone()).collect();
        let traced = tracers(&chosen)?;
        let mut inputs = xs.to_vec();
        for (&i, t) in argnums.iter().zip(&traced) {
            inputs[i] = t.clone();
        }
        let outs = f(&inputs)?;
        let Some(loss) = outs.first() else {
            return Err(invalid("grad", "the function returned no outputs"));
        };
        if loss.size() != 1 {
            return Err(invalid(
                "grad",
                format!(
                    "the loss (first output) must have one element, not shape {:?}",
                    loss.shape()
                ),
            ));
        }
        let seed = crate::ones_like(loss)?;
        let grads = backward(
            &traced,
            &chosen,
            std::slice::from_ref(loss),
            std::slice::from_ref(&seed),
        )?;
        Ok((outs, grads))
    }
}

/// `argnums` sorted, after MLX's checks: at least one, none repeated, each below `inputs`.
fn checked_argnums(argnums: &[usize], inputs: usize) -> Result<Vec<usize>> {
    if argnums.is_empty() {
        return Err(invalid("grad", "argnums must name at least one input"));
    }
    let mut sorted = argnums.to_vec();
    sorted.sort_unstable();
    if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(invalid(
            "grad",
            format!("argnum {} is repeated in {argnums:?}", w[0]),
        ));
    }
    if let Some(&bad) = sorted.last().filter(|&&i| i >= inputs) {
        return Err(invalid(
            "grad",
            format!("argnum {bad} is out of range for {inputs} inputs"),
        ));
    }
    Ok(sorted)
}
