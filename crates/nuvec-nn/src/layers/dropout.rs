//! [`Dropout`].

use nuvec_core::{Array, multiply, random, where_};

use crate::error::{Result, invalid};
use crate::layers::Forward;
use crate::module::{Param, Visit};

/// Dropout, as MLX's `nn.Dropout`: in training mode (the default) each element is zeroed
/// with probability `p` and the others scaled by `1 / (1 − p)`; in evaluation mode
/// ([`crate::Module::eval`]) the input passes unchanged. The masks come from nuvec-core's
/// global key.
///
/// ```
/// use nuvec_core::{DType, ones};
/// use nuvec_nn::{Dropout, Forward, Module};
///
/// # fn main() -> nuvec_nn::Result<()> {
/// let mut drop = Dropout::new(0.5)?;
/// let y = drop.forward(&ones(&[1000], DType::F32)?)?.to_vec::<f32>()?;
/// assert!(y.iter().all(|&v| v == 0.0 || v == 2.0));
/// drop.eval();
/// assert!(drop.forward(&ones(&[4], DType::F32)?)?.to_vec::<f32>()?.iter().all(|&v| v == 1.0));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Dropout {
    /// The probability of zeroing an element, in `[0, 1)` (MLX's default is 0.5).
    pub p: f32,
    /// Whether the layer is in training mode.
    pub training: bool,
}

impl Dropout {
    /// Dropout with probability `p`, in training mode.
    pub fn new(p: f32) -> Result<Dropout> {
        if !(0.0..1.0).contains(&p) {
            return Err(invalid(
                "Dropout",
                format!("the probability must be in [0, 1), got {p}"),
            ));
        }
        Ok(Dropout { p, training: true })
    }
}

impl Forward for Dropout {
    fn forward(&self, x: &Array) -> Result<Array> {
        if !self.training || self.p == 0.0 {
            return Ok(x.clone());
        }
        let keep = 1.0 - f64::from(self.p);
        let mask = random::bernoulli(keep, Some(x.shape()), None)?;
        Ok(where_(&mask, multiply(x, 1.0 / keep)?, 0.0)?)
    }
}

impl Visit for Dropout {
    fn visit(&self, _prefix: &str, _f: &mut dyn FnMut(&str, &Param)) {}

    fn visit_mut(
        &mut self,
        _prefix: &str,
        _f: &mut dyn FnMut(&str, &mut Param) -> Result<()>,
    ) -> Result<()> {
        Ok(())
    }

    fn set_training(&mut self, training: bool) {
        self.training = training;
    }
}
