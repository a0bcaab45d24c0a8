//! [`Embedding`].

use nuvec_core::{Array, DType, matmul, take};

use crate::error::{Result, invalid};
use crate::init;
use crate::layers::Forward;
use crate::module::Param;

/// A lookup table of `num_embeddings` vectors of `dims` features, as MLX's `nn.Embedding`:
/// `weight` is `[num_embeddings, dims]`, initialised from `N(0, 1/dims)`. The input holds
/// integer indices; [`Embedding::as_linear`] uses the table as an output projection (tied
/// embeddings).
///
/// ```
/// use nuvec_core::Array;
/// use nuvec_nn::{Embedding, Forward};
///
/// # fn main() -> nuvec_nn::Result<()> {
/// let emb = Embedding::new(10, 4)?;
/// let ids = Array::from_slice(&[1u32, 7, 7], &[3])?;
/// assert_eq!(emb.forward(&ids)?.shape(), [3, 4]);
/// assert_eq!(emb.as_linear(&nuvec_core::ones(&[2, 4], nuvec_core::DType::F32)?)?.shape(), [2, 10]);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, crate::Module)]
pub struct Embedding {
    /// `[num_embeddings, dims]`.
    pub weight: Param,
}

impl Embedding {
    /// A float32 table with MLX's initialisation.
    pub fn new(num_embeddings: usize, dims: usize) -> Result<Embedding> {
        if num_embeddings == 0 || dims == 0 {
            return Err(invalid(
                "Embedding",
                format!("sizes must be positive, got {num_embeddings} and {dims}"),
            ));
        }
        let scale = (1.0 / dims as f64).sqrt();
        let weight = init::normal(0.0, scale, &[num_embeddings, dims], DType::F32)?;
        Ok(Embedding {
            weight: Param::new(weight),
        })
    }

    /// A layer with the given table `[num_embeddings, dims]`.
    pub fn from_weight(weight: Array) -> Result<Embedding> {
        if weight.ndim() != 2 {
            return Err(invalid(
                "Embedding",
                format!("the weight must be 2-D, got shape {:?}", weight.shape()),
            ));
        }
        Ok(Embedding {
            weight: Param::new(weight),
        })
    }

    /// `x · weightᵀ`: scores of `x: [..., dims]` against every embedding.
    pub fn as_linear(&self, x: &Array) -> Result<Array> {
        Ok(matmul(x, &self.weight.t()?)?)
    }
}

impl Forward for Embedding {
    /// The rows of the table at the indices `x` (`x`'s shape followed by `dims`).
    fn forward(&self, x: &Array) -> Result<Array> {
        if x.dtype().is_float() {
            return Err(invalid(
                "Embedding",
                format!("indices must be integers, got {}", x.dtype()),
            ));
        }
        Ok(take(&self.weight, x, Some(0))?)
    }
}
