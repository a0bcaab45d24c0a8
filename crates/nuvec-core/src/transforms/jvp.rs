//! Forward mode: [`jvp`].

use super::TraceGuard;
use super::graph::{
    differentiable, key, key_map, key_set, needed, recycle, recycle_map, recycle_set, tape,
};
use super::vjp::{check_seeds, tracers};
use crate::error::invalid;
use crate::{Array, Result};

/// The outputs of `f` at `primals` and the Jacobian-vector products with `tangents` (one per
/// primal, of its shape): the directional derivative of each output.
///
/// ```
/// use nuvec_core::{Array, jvp, multiply};
///
/// let x = Array::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
/// let t = Array::from_slice(&[1.0f32, 0.5], &[2]).unwrap();
/// let cube = |xs: &[Array]| Ok(vec![multiply(&multiply(&xs[0], &xs[0])?, &xs[0])?]);
/// let (_, dy) = jvp(cube, &[x], &[t]).unwrap();
/// assert_eq!(dy[0].to_vec::<f32>().unwrap(), [3.0, 6.0]); // 3x² · t
/// ```
pub fn jvp<F>(f: F, primals: &[Array], tangents: &[Array]) -> Result<(Vec<Array>, Vec<Array>)>
where
    F: Fn(&[Array]) -> Result<Vec<Array>>,
{
    let refs: Vec<&Array> = primals.iter().chain(tangents).collect();
    crate::ops::check_errors(&refs)?;
    check_seeds("jvp", primals, tangents, ["primal", "tangent"])?;
    let _trace = TraceGuard::new();
    let xs = tracers(primals)?;
    let outs = f(&xs)?;
    if outs.is_empty() {
        return Err(invalid("jvp", "the function returned no outputs"));
    }
    let mut stop = key_set();
    stop.extend(xs.iter().map(key));
    let mut tans = key_map();
    for (x, t) in xs.iter().zip(tangents) {
        if x.dtype().is_inexact() {
            tans.insert(key(x), t.astype(x.dtype())?);
        }
    }
    let order = tape(&outs, &stop, |_| {});
    // Tangents that cannot reach the outputs (below stop_gradient, or the graph inside a
    // custom function, whose rule works from its primals) are not built.
    let keep = needed(&order, &outs, differentiable);
    for (step, _) in order.iter().zip(keep).filter(|(_, k)| *k) {
        let ins = &step.inputs;
        let p = step.primitive();
        let in_tans: Vec<Option<Array>> = ins
            .iter()
            .enumerate()
            .map(|(i, x)| {
                differentiable(p, i)
                    .then(|| tans.get(&key(x)).cloned())
                    .flatten()
            })
            .collect();
        if in_tans.iter().all(Option::is_none) {
            continue;
        }
        let node_outputs = step.outputs();
        let out_tans = p.jvp(ins, &node_outputs, &in_tans)?;
        for (o, t) in node_outputs.iter().zip(out_tans) {
            if let Some(o) = o
                && o.dtype().is_inexact()
            {
                tans.insert(key(o), t);
            }
        }
    }
    let tangents_out = outs
        .iter()
        .map(|o| match tans.get(&key(o)) {
            Some(t) => Ok(t.clone()),
            None => crate::zeros_like(o),
        })
        .collect::<Result<Vec<_>>>()?;
    recycle(order);
    recycle_set(stop);
    recycle_map(tans);
    Ok((outs, tangents_out))
}
