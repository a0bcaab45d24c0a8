//! [`RoPE`]: rotary position embeddings.

use nuvec_core::{Array, fast};

use crate::error::{Result, invalid};
use crate::layers::Forward;

/// Rotary position embeddings, as MLX's `nn.RoPE` (over [`fast::rope`]): the first `dims`
/// features of `x: [..., T, D]` rotate in pairs by the angle `(offset + t) · scale ·
/// base^(−2i/dims)`, the pairs `(i, i + dims/2)` or, `traditional`, `(2i, 2i + 1)`. The
/// layer has no parameters. MLX's defaults: `traditional` false, `base` 10000, `scale` 1.
///
/// ```
/// use nuvec_core::{DType, ones};
/// use nuvec_nn::{Forward, RoPE};
///
/// # fn main() -> nuvec_nn::Result<()> {
/// let rope = RoPE::new(4, false, 10000.0, 1.0)?;
/// let x = ones(&[1, 3, 4], DType::F32)?;
/// // Position 0 does not turn.
/// assert_eq!(rope.forward(&x)?.to_vec::<f32>()?[..4], [1.0; 4]);
/// assert_eq!(rope.forward_at(&x, 5)?.shape(), [1, 3, 4]);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, crate::Module)]
pub struct RoPE {
    /// The number of features that rotate (even).
    pub dims: usize,
    /// Whether neighbouring features pair up (the original formulation).
    pub traditional: bool,
    /// The base of the frequencies.
    pub base: f32,
    /// The scale of the positions.
    pub scale: f32,
}

impl RoPE {
    /// Rotary embeddings of `dims` features (even and positive).
    pub fn new(dims: usize, traditional: bool, base: f32, scale: f32) -> Result<RoPE> {
        if dims == 0 || !dims.is_multiple_of(2) {
            return Err(invalid(
                "RoPE",
                format!("dims must be even and positive, got {dims}"),
            ));
        }
        Ok(RoPE {
            dims,
            traditional,
            base,
            scale,
        })
    }

    /// The embeddings with the first position at `offset` (the length of a key/value cache).
    pub fn forward_at(&self, x: &Array, offset: usize) -> Result<Array> {
        let offset = i32::try_from(offset)
            .map_err(|_| invalid("RoPE", format!("offset {offset} is too large")))?;
        self.forward_offsets(x, &Array::scalar(offset))
    }

    /// The embeddings with the first position at `offset`: an integer scalar, or one offset
    /// per batch entry (`[B]`).
    pub fn forward_offsets(&self, x: &Array, offset: &Array) -> Result<Array> {
        Ok(fast::rope(
            x,
            self.dims,
            self.traditional,
            Some(self.base),
            self.scale,
            offset,
            None,
        )?)
    }
}

impl Forward for RoPE {
    /// The embeddings at offset 0.
    fn forward(&self, x: &Array) -> Result<Array> {
        self.forward_at(x, 0)
    }
}
