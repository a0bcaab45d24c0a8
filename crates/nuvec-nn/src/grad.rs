//! Gradients with respect to a module's trainable parameters (MLX's `nn.value_and_grad`).

use std::cell::RefCell;

use nuvec_core::Array;

use crate::error::{Error, Result};
use crate::module::{Module, Params, set_named};

/// The loss `f(model)` and its gradient with respect to every trainable parameter of
/// `model`, keyed as [`Module::trainable_parameters`] (MLX's `nn.value_and_grad(model, fn)`,
/// called at once). `f` computes the loss (one element) from the model; whatever else it
/// needs (inputs, targets) it captures. Frozen parameters are constants. The model is left
/// with its own parameters, as before the call, whatever `f` returns.
///
/// Built over [`nuvec_core::value_and_grad`]: the trainable parameters are swapped for the
/// transform's tracers while `f` runs.
///
/// ```
/// use nuvec_core::{Array, sum, square};
/// use nuvec_nn::{Forward, Linear, Module, value_and_grad};
///
/// # fn main() -> nuvec_nn::Result<()> {
/// let mut layer = Linear::new(3, 1, false)?;
/// layer.update(&[("weight".to_string(), Array::from_slice(&[1.0f32, 2.0, 3.0], &[1, 3])?)]
///     .into_iter().collect::<nuvec_nn::Params>())?;
/// let x = Array::from_slice(&[1.0f32, 1.0, 1.0], &[1, 3])?;
/// // loss = (w · x)², d loss / d w = 2 (w · x) x = 12 x.
/// let (loss, grads) = value_and_grad(&mut layer, |m| Ok(sum(&square(&m.forward(&x)?)?, &[], false)?))?;
/// assert_eq!(loss.item::<f32>()?, 36.0);
/// assert_eq!(grads["weight"].to_vec::<f32>()?, [12.0, 12.0, 12.0]);
/// # Ok(())
/// # }
/// ```
pub fn value_and_grad<M, F>(model: &mut M, f: F) -> Result<(Array, Params)>
where
    M: Module + ?Sized,
    F: FnMut(&M) -> Result<Array>,
{
    let trainable = model.trainable_parameters();
    let (names, originals): (Vec<String>, Vec<Array>) = trainable.into_iter().unzip();
    let mut f = f;
    if names.is_empty() {
        return Ok((f(model)?, Params::new()));
    }
    // The model and the closure are used inside nuvec-core's `Fn` closure; an error of `f`
    // is kept here so that it comes back unchanged.
    let state = RefCell::new((&mut *model, f, None::<Error>));
    let argnums: Vec<usize> = (0..names.len()).collect();
    let result = {
        let inner = |xs: &[Array]| -> nuvec_core::Result<Vec<Array>> {
            let mut guard = state.borrow_mut();
            let (m, f, err) = &mut *guard;
            if let Err(e) = set_named(&mut **m, &names, xs) {
                *err = Some(e.clone());
                return Err(e.into());
            }
            match f(&**m) {
                Ok(loss) => Ok(vec![loss]),
                Err(e) => {
                    *err = Some(e.clone());
                    Err(e.into())
                }
            }
        };
        nuvec_core::value_and_grad(inner, &argnums)(&originals)
    };
    let (m, _, err) = state.into_inner();
    set_named(m, &names, &originals)?;
    match result {
        Ok((mut values, grads)) => {
            let loss = values.swap_remove(0);
            Ok((loss, names.into_iter().zip(grads).collect()))
        }
        Err(e) => Err(err.unwrap_or(Error::Core(e))),
    }
}
