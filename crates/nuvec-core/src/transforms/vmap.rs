//! Batching: [`vmap`].

use super::graph::{KeyMap, batching_reads, key, key_set, needed, recycle, recycle_set, tape};
use crate::error::invalid;
use crate::{Array, Result};

/// `f` mapped over a batch axis of its inputs: `in_axes[i]` is the batch axis of input `i`
/// (`None`: the input is shared by every example), `out_axes[j]` where output `j` puts it.
/// The batch runs as one computation, not a loop: each primitive's batching rule handles it.
///
/// ```
/// use nuvec_core::{Array, add, vmap};
///
/// let xs = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
/// let bias = Array::from_slice(&[10.0f32, 20.0], &[2]).unwrap();
/// // Each column of xs (batch axis 1) plus the shared bias.
/// let f = |v: &[Array]| Ok(vec![add(&v[0], &v[1])?]);
/// let out = vmap(f, &[Some(1), None], &[0])(&[xs, bias]).unwrap();
/// assert_eq!(out[0].to_vec::<f32>().unwrap(), [11.0, 24.0, 12.0, 25.0, 13.0, 26.0]);
/// ```
pub fn vmap<F>(
    f: F,
    in_axes: &[Option<usize>],
    out_axes: &[usize],
) -> impl Fn(&[Array]) -> Result<Vec<Array>>
where
    F: Fn(&[Array]) -> Result<Vec<Array>>,
{
    let in_axes = in_axes.to_vec();
    let out_axes = out_axes.to_vec();
    move |xs: &[Array]| batch(&f, xs, &in_axes, &out_axes)
}

fn batch<F>(
    f: &F,
    xs: &[Array],
    in_axes: &[Option<usize>],
    out_axes: &[usize],
) -> Result<Vec<Array>>
where
    F: Fn(&[Array]) -> Result<Vec<Array>>,
{
    let refs: Vec<&Array> = xs.iter().collect();
    crate::ops::check_errors(&refs)?;
    if in_axes.len() != xs.len() {
        return Err(invalid(
            "vmap",
            format!("{} in_axes for {} inputs", in_axes.len(), xs.len()),
        ));
    }
    let mut size: Option<usize> = None;
    for (i, (x, ax)) in xs.iter().zip(in_axes).enumerate() {
        let Some(ax) = *ax else { continue };
        if ax >= x.ndim() {
            return Err(invalid(
                "vmap",
                format!(
                    "in_axes[{i}] = {ax} is out of range for shape {:?}",
                    x.shape()
                ),
            ));
        }
        let n = x.shape()[ax];
        match size {
            Some(s) if s != n => {
                return Err(invalid(
                    "vmap",
                    format!("inputs have different batch sizes, {s} and {n}"),
                ));
            }
            _ => size = Some(n),
        }
    }
    let Some(size) = size else {
        return Err(invalid("vmap", "no input is batched"));
    };
    // Stand-ins with one example's shape, which the function's graph is recorded on.
    let mut batched: KeyMap<(Array, usize)> = KeyMap::default();
    let stand_ins: Vec<Array> = xs
        .iter()
        .zip(in_axes)
        .map(|(x, ax)| match ax {
            Some(ax) => {
                let mut shape = x.shape().to_vec();
                shape.remove(*ax);
                let s = Array::placeholder(shape, x.dtype());
                batched.insert(key(&s), (x.clone(), *ax));
                s
            }
            None => x.clone(),
        })
        .collect();
    let outs = f(&stand_ins)?;
    if outs.is_empty() {
        return Err(invalid("vmap", "the function returned no outputs"));
    }
    if out_axes.len() != outs.len() {
        return Err(invalid(
            "vmap",
            format!("{} out_axes for {} outputs", out_axes.len(), outs.len()),
        ));
    }
    let mut stop = key_set();
    stop.extend(batched.keys().copied());
    let order = tape(&outs, &stop, |_| {});
    // A custom function with its own batching rule does not need its inner graph batched.
    let keep = needed(&order, &outs, batching_reads);
    for (step, _) in order.iter().zip(keep).filter(|(_, k)| *k) {
        let ins = &step.inputs;
        if !ins.iter().any(|i| batched.contains_key(&key(i))) {
            continue;
        }
        let (args, axes): (Vec<Array>, Vec<Option<usize>>) = ins
            .iter()
            .map(|i| match batched.get(&key(i)) {
                Some((b, ax)) => (b.clone(), Some(*ax)),
                None => (i.clone(), None),
            })
            .unzip();
        let (results, result_axes) = step.primitive().vmap(&args, &axes)?;
        for ((o, r), ax) in step.outputs().into_iter().zip(results).zip(result_axes) {
            let Some(o) = o else { continue };
            match ax {
                Some(ax) => {
                    batched.insert(key(&o), (r, ax));
                }
                None => {
                    // An output that does not vary over the batch: the same for every
                    // example (a broadcast view, so that every rule sees one batch size).
                    let mut shape = vec![size];
                    shape.extend_from_slice(r.shape());
                    let b = crate::broadcast_to(&crate::expand_dims(&r, 0)?, &shape)?;
                    batched.insert(key(&o), (b, 0));
                }
            }
        }
    }
    recycle(order);
    recycle_set(stop);
    outs.iter()
        .zip(out_axes)
        .map(|(o, &to)| {
            let (b, from) = match batched.get(&key(o)) {
                Some((b, ax)) => (b.clone(), *ax),
                None => (crate::expand_dims(o, 0)?, 0),
            };
            let mut shape = b.shape().to_vec();
            shape[from] = size;
            let b = crate::broadcast_to(&b, &shape)?;
            if to > b.ndim() - 1 {
                return Err(invalid(
                    "vmap",
                    format!("out_axes {to} is out of range for {} dimensions", b.ndim()),
                ));
            }
            move_axis(&b, from, to)
        })
        .collect()
}

/// `a` with axis `from` moved to position `to` (a view).
pub(crate) fn move_axis(a: &Array, from: usize, to: usize) -> Result<Array> {
    if from == to {
        return Ok(a.clone());
    }
    let mut perm: Vec<usize> = (0..a.ndim()).filter(|&i| i != from).collect();
    perm.insert(to, from);
    crate::transpose(a, &perm)
}
