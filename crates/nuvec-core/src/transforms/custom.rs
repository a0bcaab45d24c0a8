//! Functions with derivatives or batching of their own: [`custom_function`] (a
//! [`CustomFunction`] builder, as MLX's `custom_function` with its `vjp`, `jvp` and `vmap`)
//! and [`custom_vjp`].
//!
//! Calling one records its function's ordinary graph and then a single
//! [`Primitive::Custom`] node whose inputs are the function's inputs (its primals) followed by
//! the outputs of that graph. Evaluating the node hands those outputs on without a copy; the
//! transforms see the one node and ask it for its rules. A rule the user did not give comes
//! from transforming the function itself, so a custom function behaves as the plain one
//! except where told otherwise. No derivative flows into the inner graph through the node: the
//! drivers only differentiate a custom node with respect to its primals.

use std::fmt;
use std::sync::Arc;

use super::rules::{JvpArgs, VjpArgs, all_or_zeros};
use crate::array::ArrayData;
use crate::error::invalid;
use crate::primitive::{Batched, OutputSpec, Primitive};
use crate::{Array, Result};

/// A traced function: arrays in, arrays out.
pub type Function = Arc<dyn Fn(&[Array]) -> Result<Vec<Array>> + Send + Sync>;
/// A reverse-mode rule: `(primals, cotangents, outputs)` to one cotangent per primal, each of
/// its primal's shape (MLX's argument order).
pub type VjpFunction =
    Arc<dyn Fn(&[Array], &[Array], &[Array]) -> Result<Vec<Array>> + Send + Sync>;
/// A forward-mode rule: `(primals, tangents)` (one tangent per primal, zeros for constants)
/// to one tangent per output, each of its output's shape.
pub type JvpFunction = Arc<dyn Fn(&[Array], &[Array]) -> Result<Vec<Array>> + Send + Sync>;
/// A batching rule: `(inputs, axes)` (`axes[i]` where input `i` carries the batch, `None` for
/// an input shared by the batch) to the batched outputs and where each carries the batch.
pub type VmapFunction = Arc<dyn Fn(&[Array], &[Option<usize>]) -> Result<Batched> + Send + Sync>;

const NAME: &str = "custom_function";

/// A function with optional rules of its own for [`crate::vjp`] (and [`crate::grad`]),
/// [`crate::jvp`] and [`crate::vmap`]. Build it with [`custom_function`] and the
/// [`vjp`](CustomFunction::vjp), [`jvp`](CustomFunction::jvp) and
/// [`vmap`](CustomFunction::vmap) methods; call it with [`call`](CustomFunction::call) or turn
/// it into a closure with [`into_fn`](CustomFunction::into_fn). Transforms nest through it:
/// a custom rule is itself traced by an enclosing transform (grad of grad, vmap of grad), and
/// under `vmap` the custom `vjp` and `jvp` are kept, batched.
///
/// ```
/// use nuvec_core::{Array, custom_function, grad, multiply, sin};
///
/// // sin whose reverse-mode derivative is replaced by 2·cotangent.
/// let f = custom_function(|x: &[Array]| Ok(vec![sin(&x[0])?]))
///     .vjp(|_primals, cotangents, _outputs| Ok(vec![multiply(&cotangents[0], 2.0)?]))
///     .into_fn();
/// let x = Array::scalar(0.3f64);
/// assert_eq!(f(&[x.clone()]).unwrap()[0].item::<f64>().unwrap(), 0.3f64.sin());
/// assert_eq!(grad(f, &[0])(&[x]).unwrap()[0].item::<f64>().unwrap(), 2.0);
/// ```
#[derive(Clone)]
pub struct CustomFunction {
    fun: Function,
    vjp: Option<VjpFunction>,
    jvp: Option<JvpFunction>,
    vmap: Option<VmapFunction>,
}

/// A [`CustomFunction`] computing `f`, with no rules of its own yet.
pub fn custom_function<F>(f: F) -> CustomFunction
where
    F: Fn(&[Array]) -> Result<Vec<Array>> + Send + Sync + 'static,
{
    CustomFunction::new(f)
}

/// `f` with its reverse-mode derivative given by `vjp(primals, cotangents, outputs)`, which
/// returns one cotangent per primal (of its shape). Forward mode and batching transform `f`.
///
/// ```
/// use nuvec_core::{Array, custom_vjp, round, vjp};
///
/// // The straight-through estimator: round forward, identity backward.
/// let ste = custom_vjp(
///     |x: &[Array]| Ok(vec![round(&x[0], 0)?]),
///     |_primals, cotangents, _outputs| Ok(vec![cotangents[0].clone()]),
/// );
/// let x = Array::from_slice(&[0.4f32, 1.7], &[2]).unwrap();
/// let ct = Array::from_slice(&[1.0f32, 3.0], &[2]).unwrap();
/// let (out, grads) = vjp(&ste, &[x], &[ct]).unwrap();
/// assert_eq!(out[0].to_vec::<f32>().unwrap(), [0.0, 2.0]);
/// assert_eq!(grads[0].to_vec::<f32>().unwrap(), [1.0, 3.0]);
/// ```
pub fn custom_vjp<F, G>(
    f: F,
    vjp: G,
) -> impl Fn(&[Array]) -> Result<Vec<Array>> + Clone + Send + Sync + 'static
where
    F: Fn(&[Array]) -> Result<Vec<Array>> + Send + Sync + 'static,
    G: Fn(&[Array], &[Array], &[Array]) -> Result<Vec<Array>> + Send + Sync + 'static,
{
    CustomFunction::new(f).vjp(vjp).into_fn()
}

impl CustomFunction {
    /// A custom function computing `f`, with no rules of its own yet.
    pub fn new<F>(f: F) -> CustomFunction
    where
        F: Fn(&[Array]) -> Result<Vec<Array>> + Send + Sync + 'static,
    {
        CustomFunction {
            fun: Arc::new(f),
            vjp: None,
            jvp: None,
            vmap: None,
        }
    }

    /// Sets the reverse-mode rule: `rule(primals, cotangents, outputs)` returns one cotangent
    /// per primal, of its shape (one cotangent is given per output; zeros for outputs that had
    /// none).
    pub fn vjp<G>(mut self, rule: G) -> CustomFunction
    where
        G: Fn(&[Array], &[Array], &[Array]) -> Result<Vec<Array>> + Send + Sync + 'static,
    {
        self.vjp = Some(Arc::new(rule));
        self
    }

    /// Sets the forward-mode rule: `rule(primals, tangents)` returns one tangent per output, of
    /// its shape (one tangent is given per primal; zeros for constants).
    pub fn jvp<G>(mut self, rule: G) -> CustomFunction
    where
        G: Fn(&[Array], &[Array]) -> Result<Vec<Array>> + Send + Sync + 'static,
    {
        self.jvp = Some(Arc::new(rule));
        self
    }

    /// Sets the batching rule: `rule(inputs, axes)` gets the batched inputs and where each
    /// carries the batch (`None`: shared by the batch), and returns the batched outputs and
    /// where each carries it (`None`: the same for every example).
    pub fn vmap<G>(mut self, rule: G) -> CustomFunction
    where
        G: Fn(&[Array], &[Option<usize>]) -> Result<Batched> + Send + Sync + 'static,
    {
        self.vmap = Some(Arc::new(rule));
        self
    }

    /// The function's outputs at `primals`, recorded so that the transforms use its rules.
    pub fn call(&self, primals: &[Array]) -> Result<Vec<Array>> {
        let refs: Vec<&Array> = primals.iter().collect();
        crate::ops::check_errors(&refs)?;
        let outputs = (self.fun)(primals)?;
        record(self.clone(), primals.to_vec(), outputs)
    }

    /// The custom function as a closure, to pass to the transforms or call directly.
    pub fn into_fn(
        self,
    ) -> impl Fn(&[Array]) -> Result<Vec<Array>> + Clone + Send + Sync + 'static {
        move |primals: &[Array]| self.call(primals)
    }
}

impl fmt::Debug for CustomFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CustomFunction")
            .field("vjp", &self.vjp.is_some())
            .field("jvp", &self.jvp.is_some())
            .field("vmap", &self.vmap.is_some())
            .finish_non_exhaustive()
    }
}

/// Records the node of `function` applied to `primals`, whose graph gave `outputs`.
fn record(
    function: CustomFunction,
    primals: Vec<Array>,
    outputs: Vec<Array>,
) -> Result<Vec<Array>> {
    if outputs.is_empty() {
        return Err(invalid(NAME, "the function returned no outputs"));
    }
    let op = CustomOp {
        primals: primals.len(),
        function,
    };
    let mut inputs = primals;
    inputs.extend(outputs);
    Array::from_op(Primitive::Custom(op), inputs)
}

/// What a [`Primitive::Custom`] node holds: the function with its rules, and how many of the
/// node's inputs are its primals (the others are the outputs of the function's graph, which
/// the node hands on).
#[derive(Clone, Debug)]
pub struct CustomOp {
    function: CustomFunction,
    primals: usize,
}

impl PartialEq for CustomOp {
    /// The same function and rules (compared by identity: closures have no other equality).
    fn eq(&self, other: &CustomOp) -> bool {
        fn same<T: ?Sized>(a: &Option<Arc<T>>, b: &Option<Arc<T>>) -> bool {
            match (a, b) {
                (Some(a), Some(b)) => std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b)),
                (None, None) => true,
                _ => false,
            }
        }
        let (a, b) = (&self.function, &other.function);
        self.primals == other.primals
            && std::ptr::addr_eq(Arc::as_ptr(&a.fun), Arc::as_ptr(&b.fun))
            && same(&a.vjp, &b.vjp)
            && same(&a.jvp, &b.jvp)
            && same(&a.vmap, &b.vmap)
    }
}

impl CustomOp {
    /// The primitive's name.
    pub fn name(&self) -> &'static str {
        NAME
    }

    /// How many of the node's inputs are the function's primals.
    pub fn primals(&self) -> usize {
        self.primals
    }

    /// Whether the function has a batching rule of its own (then batching the node does not
    /// need the graph of its outputs batched).
    pub(crate) fn has_vmap(&self) -> bool {
        self.function.vmap.is_some()
    }

    /// The outputs: those of the function's graph, the inputs after the primals.
    pub(crate) fn output_specs(&self, inputs: &[Array]) -> Result<Vec<OutputSpec>> {
        if inputs.len() <= self.primals {
            return Err(invalid(
                NAME,
                format!(
                    "needs the outputs after its {} primals, got {} inputs",
                    self.primals,
                    inputs.len()
                ),
            ));
        }
        Ok(inputs[self.primals..]
            .iter()
            .map(|a| (a.shape().to_vec(), a.dtype()))
            .collect())
    }

    /// Evaluation on any device: the computed outputs of the function's graph, handed on.
    pub(crate) fn forward(&self, inputs: &[ArrayData]) -> Vec<ArrayData> {
        inputs[self.primals..].to_vec()
    }
}

/// `got` (what a custom rule returned) has one array per entry of `like`, of its shape.
fn check_results(rule: &str, got: &[Array], like: &[Array], role: &str) -> Result<()> {
    if got.len() != like.len() {
        return Err(invalid(
            NAME,
            format!(
                "the custom {rule} returned {} arrays for {} {role}s",
                got.len(),
                like.len()
            ),
        ));
    }
    for (i, (g, l)) in got.iter().zip(like).enumerate() {
        if let Some(err) = g.error() {
            return Err(err);
        }
        if g.shape() != l.shape() {
            return Err(invalid(
                NAME,
                format!(
                    "the custom {rule} returned shape {:?} for {role} {i} of shape {:?}",
                    g.shape(),
                    l.shape()
                ),
            ));
        }
    }
    Ok(())
}

/// Reverse mode: the user's rule, or the vjp of the function itself.
pub(crate) fn vjp(op: &CustomOp, call: VjpArgs<'_>) -> Result<Vec<Array>> {
    let (primals, outputs) = call.inputs.split_at(op.primals);
    let cotangents = all_or_zeros(call.cotangents, outputs)?;
    let grads = match &op.function.vjp {
        Some(rule) => {
            let grads = rule(primals, &cotangents, outputs)?;
            check_results("vjp", &grads, primals, "input")?;
            grads
        }
        None => crate::vjp(&*op.function.fun, primals, &cotangents)?.1,
    };
    call.argnums
        .iter()
        .map(|&i| match grads.get(i) {
            Some(g) => Ok(g.clone()),
            // The outputs of the inner graph carry no derivative through the node.
            None => crate::zeros_like(&call.inputs[i]),
        })
        .collect()
}

/// Forward mode: the user's rule, or the jvp of the function itself.
pub(crate) fn jvp(op: &CustomOp, call: JvpArgs<'_>) -> Result<Vec<Array>> {
    let (primals, outputs) = call.inputs.split_at(op.primals);
    let tangents = all_or_zeros(call.tangents, primals)?;
    let out_tangents = match &op.function.jvp {
        Some(rule) => {
            let ts = rule(primals, &tangents)?;
            check_results("jvp", &ts, outputs, "output")?;
            ts
        }
        None => crate::jvp(&*op.function.fun, primals, &tangents)?.1,
    };
    out_tangents
        .into_iter()
        .zip(outputs)
        .map(|(t, o)| {
            if t.dtype() == o.dtype() {
                Ok(t)
            } else {
                t.astype(o.dtype())
            }
        })
        .collect()
}

/// `x` with its batch axis (`None`: none, broadcast to `size`) first.
fn to_front(x: &Array, axis: Option<usize>, size: usize) -> Result<Array> {
    match axis {
        Some(a) => super::move_axis(x, a, 0),
        None => {
            let mut shape = vec![size];
            shape.extend_from_slice(x.shape());
            crate::broadcast_to(&crate::expand_dims(x, 0)?, &shape)
        }
    }
}

/// Batching: a custom node again, of the batched function, whose rules are the user's rules
/// batched, so that derivatives taken outside the `vmap` still use them. Its outputs carry
/// the batch first.
pub(crate) fn vmap(op: &CustomOp, inputs: &[Array], axes: &[Option<usize>]) -> Result<Batched> {
    let n = op.primals;
    let size = inputs
        .iter()
        .zip(axes)
        .find_map(|(x, ax)| ax.map(|a| x.shape()[a]))
        .ok_or_else(|| invalid(NAME, "batching rule called with no batched input"))?;
    let (primals, inner) = inputs.split_at(n);
    let axes_in = axes[..n].to_vec();
    let outputs: Vec<Array> = match &op.function.vmap {
        Some(rule) => {
            let (outs, out_axes) = rule(primals, &axes_in)?;
            let count = inner.len();
            if outs.len() != count || out_axes.len() != count {
                return Err(invalid(
                    NAME,
                    format!(
                        "the custom vmap returned {} outputs and {} axes for {count} outputs",
                        outs.len(),
                        out_axes.len()
                    ),
                ));
            }
            let fronted = outs
                .iter()
                .zip(&out_axes)
                .map(|(o, &ax)| {
                    if ax.is_some_and(|a| a >= o.ndim()) {
                        return Err(invalid(
                            NAME,
                            format!(
                                "the custom vmap's out axis {ax:?} is out of range for shape {:?}",
                                o.shape()
                            ),
                        ));
                    }
                    to_front(o, ax, size)
                })
                .collect::<Result<Vec<Array>>>()?;
            // Each output must be a batch of the plain function's output.
            for (i, ((f, o), ax)) in fronted.iter().zip(inner).zip(&axes[n..]).enumerate() {
                let mut want = o.shape().to_vec();
                match ax {
                    Some(a) => want[*a] = size,
                    None => want.insert(0, size),
                }
                if let Some(a) = ax {
                    let b = want.remove(*a);
                    want.insert(0, b);
                }
                if f.shape() != want.as_slice() || f.dtype() != o.dtype() {
                    return Err(invalid(
                        NAME,
                        format!(
                            "the custom vmap's output {i} is {} {:?}, not {} {want:?}",
                            f.dtype(),
                            f.shape(),
                            o.dtype(),
                        ),
                    ));
                }
            }
            fronted
        }
        // The driver has batched the function's graph already: reuse it.
        None => inner
            .iter()
            .zip(&axes[n..])
            .map(|(x, &ax)| to_front(x, ax, size))
            .collect::<Result<Vec<Array>>>()?,
    };
    let batched = batched_function(&op.function, axes_in, outputs.len(), size);
    let results = record(batched, primals.to_vec(), outputs)?;
    let count = results.len();
    Ok((results, vec![Some(0); count]))
}

/// The custom function of a batch: `axes[i]` is where primal `i` carries it; the outputs (of
/// which there are `count`) carry it first. The user's rules are batched with [`crate::vmap`].
fn batched_function(
    f: &CustomFunction,
    axes: Vec<Option<usize>>,
    count: usize,
    size: usize,
) -> CustomFunction {
    let fun: Function = {
        let (f, axes) = (f.clone(), axes.clone());
        Arc::new(move |xs: &[Array]| match &f.vmap {
            Some(rule) => {
                let (outs, out_axes) = rule(xs, &axes)?;
                outs.iter()
                    .zip(out_axes)
                    .map(|(o, ax)| to_front(o, ax, size))
                    .collect()
            }
            None if axes.iter().all(Option::is_none) => {
                // Nothing varies over the batch among the primals: one call, broadcast.
                (f.fun)(xs)?
                    .iter()
                    .map(|o| to_front(o, None, size))
                    .collect()
            }
            None => crate::vmap(&*f.fun, &axes, &vec![0; count])(xs),
        })
    };
    let vjp: Option<VjpFunction> = f.vjp.clone().map(|rule| {
        let axes = axes.clone();
        let rule: VjpFunction =
            Arc::new(move |primals: &[Array], cts: &[Array], outs: &[Array]| {
                let n = primals.len();
                let one = |args: &[Array]| {
                    let (p, rest) = args.split_at(n);
                    let (c, o) = rest.split_at(count);
                    rule(p, c, o)
                };
                let mut in_axes = axes.clone();
                in_axes.extend(std::iter::repeat_n(Some(0), 2 * count));
                let out_axes: Vec<usize> = axes.iter().map(|a| a.unwrap_or(0)).collect();
                let args: Vec<Array> = primals.iter().chain(cts).chain(outs).cloned().collect();
                let grads = crate::vmap(one, &in_axes, &out_axes)(&args)?;
                // A primal shared by the batch gets the sum of every example's cotangent.
                grads
                    .iter()
                    .zip(&axes)
                    .map(|(g, a)| match a {
                        Some(_) => Ok(g.clone()),
                        None => crate::sum(g, &[0], false),
                    })
                    .collect()
            });
        rule
    });
    let jvp: Option<JvpFunction> = f.jvp.clone().map(|rule| {
        let axes = axes.clone();
        let rule: JvpFunction = Arc::new(move |primals: &[Array], tangents: &[Array]| {
            let n = primals.len();
            let one = |args: &[Array]| {
                let (p, t) = args.split_at(n);
                rule(p, t)
            };
            let args: Vec<Array> = primals.iter().chain(tangents).cloned().collect();
            if axes.iter().all(Option::is_none) {
                return one(&args)?
                    .iter()
                    .map(|t| to_front(t, None, size))
                    .collect();
            }
            let in_axes: Vec<Option<usize>> = axes.iter().chain(&axes).copied().collect();
            crate::vmap(one, &in_axes, &vec![0; count])(&args)
        });
        rule
    });
    CustomFunction {
        fun,
        vjp,
        jvp,
        vmap: None,
    }
}
