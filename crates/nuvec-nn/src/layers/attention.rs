//! [`MultiHeadAttention`] with grouped-query heads, and its key/value cache [`KvCache`].

use nuvec_core::fast::{self, AttentionMask};
use nuvec_core::{Array, DType, SliceArg, concatenate, slice, slice_update, transpose};

use crate::error::{Result, invalid};
use crate::layers::Forward;
use crate::layers::linear::Linear;
use crate::layers::positional::RoPE;

/// Multi-head attention with grouped-query heads: MLX's `nn.MultiHeadAttention` (its
/// parameter names `query_proj`, `key_proj`, `value_proj`, `out_proj`; no biases by default;
/// the scale `1/√head_dim`), with mlx-lm's additions: `n_kv_heads` key and value heads
/// shared by groups of `n_heads / n_kv_heads` query heads, an optional [`RoPE`] applied to
/// queries and keys at the cache's offset, and a [`KvCache`]. Inputs are `[B, L, dims]`;
/// the heads are `dims / n_heads` wide. The attention itself is
/// [`fast::scaled_dot_product_attention`].
///
/// ```
/// use nuvec_core::{DType, fast::AttentionMask, ones};
/// use nuvec_nn::{KvCache, MultiHeadAttention, RoPE};
///
/// # fn main() -> nuvec_nn::Result<()> {
/// let attn = MultiHeadAttention::new(16, 4, 2, false)?.with_rope(RoPE::new(4, false, 10000.0, 1.0)?);
/// let mut cache = KvCache::new();
/// let x = ones(&[1, 5, 16], DType::F32)?;
/// let y = attn.forward(&x, &x, &x, AttentionMask::Causal, Some(&mut cache))?;
/// assert_eq!(y.shape(), [1, 5, 16]);
/// // One more token, attending to the five cached ones.
/// let t = ones(&[1, 1, 16], DType::F32)?;
/// attn.forward(&t, &t, &t, AttentionMask::Causal, Some(&mut cache))?;
/// assert_eq!(cache.offset(), 6);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, crate::Module)]
pub struct MultiHeadAttention {
    /// `dims → n_heads · head_dim`.
    pub query_proj: Linear,
    /// `dims → n_kv_heads · head_dim`.
    pub key_proj: Linear,
    /// `dims → n_kv_heads · head_dim`.
    pub value_proj: Linear,
    /// `n_heads · head_dim → dims`.
    pub out_proj: Linear,
    /// The rotary embedding of queries and keys, if any.
    pub rope: Option<RoPE>,
    /// The number of query heads.
    pub n_heads: usize,
    /// The number of key and value heads (a divisor of `n_heads`).
    pub n_kv_heads: usize,
    /// The scale of the scores (`1/√head_dim`).
    pub scale: f32,
}

impl MultiHeadAttention {
    /// Attention over `dims` features with `n_heads` query heads and `n_kv_heads` key/value
    /// heads (`n_kv_heads == n_heads` is MLX's plain multi-head attention), with biases in
    /// the projections when `bias`.
    pub fn new(
        dims: usize,
        n_heads: usize,
        n_kv_heads: usize,
        bias: bool,
    ) -> Result<MultiHeadAttention> {
        const OP: &str = "MultiHeadAttention";
        if n_heads == 0 || n_kv_heads == 0 || !dims.is_multiple_of(n_heads) {
            return Err(invalid(
                OP,
                format!("dims ({dims}) must be a multiple of n_heads ({n_heads})"),
            ));
        }
        if !n_heads.is_multiple_of(n_kv_heads) {
            return Err(invalid(
                OP,
                format!("n_heads ({n_heads}) must be a multiple of n_kv_heads ({n_kv_heads})"),
            ));
        }
        let head_dim = dims / n_heads;
        let kv_dims = n_kv_heads * head_dim;
        Ok(MultiHeadAttention {
            query_proj: Linear::new(dims, dims, bias)?,
            key_proj: Linear::new(dims, kv_dims, bias)?,
            value_proj: Linear::new(dims, kv_dims, bias)?,
            out_proj: Linear::new(dims, dims, bias)?,
            rope: None,
            n_heads,
            n_kv_heads,
            scale: (1.0 / head_dim as f64).sqrt() as f32,
        })
    }

    /// The layer with `rope` applied to queries and keys.
    pub fn with_rope(mut self, rope: RoPE) -> MultiHeadAttention {
        self.rope = Some(rope);
        self
    }

    /// The width of a head.
    pub fn head_dim(&self) -> usize {
        self.query_proj.output_dims() / self.n_heads
    }

    /// Attention of `queries: [B, L, dims]` over `keys` and `values: [B, S, dims]`, with
    /// `mask` ([`AttentionMask::Causal`]: query `i` sees keys up to its own position, counted
    /// after the cache's), the new keys and values appended to `cache` when given. Returns
    /// `[B, L, dims]`.
    pub fn forward(
        &self,
        queries: &Array,
        keys: &Array,
        values: &Array,
        mask: AttentionMask<'_>,
        cache: Option<&mut KvCache>,
    ) -> Result<Array> {
        const OP: &str = "MultiHeadAttention";
        for (what, a) in [("queries", queries), ("keys", keys), ("values", values)] {
            if a.ndim() != 3 {
                return Err(invalid(
                    OP,
                    format!("{what} must be [B, L, dims], got shape {:?}", a.shape()),
                ));
            }
        }
        let (b, l) = (queries.shape()[0], queries.shape()[1]);
        let heads = |x: Array, h: usize| -> Result<Array> {
            let (b, l) = (x.shape()[0] as isize, x.shape()[1] as isize);
            let x = x.reshape(&[b, l, h as isize, -1])?;
            Ok(transpose(&x, &[0, 2, 1, 3])?)
        };
        let q = heads(self.query_proj.forward(queries)?, self.n_heads)?;
        let k = heads(self.key_proj.forward(keys)?, self.n_kv_heads)?;
        let v = heads(self.value_proj.forward(values)?, self.n_kv_heads)?;
        let offset = cache.as_ref().map_or(0, |c| c.offset());
        let (q, k) = match &self.rope {
            Some(rope) => (rope.forward_at(&q, offset)?, rope.forward_at(&k, offset)?),
            None => (q, k),
        };
        let (k, v) = match cache {
            Some(c) => c.update_and_fetch(&k, &v)?,
            None => (k, v),
        };
        let o = fast::scaled_dot_product_attention(&q, &k, &v, self.scale, mask, None)?;
        let o = transpose(&o, &[0, 2, 1, 3])?.reshape(&[b as isize, l as isize, -1])?;
        self.out_proj.forward(&o)
    }

    /// MLX's `create_additive_causal_mask`: `[n, n]`, 0 where key `j <= i`, else the type's
    /// lowest value.
    pub fn create_additive_causal_mask(n: usize, dtype: DType) -> Result<Array> {
        let i = nuvec_core::arange(0.0, n as f64, 1.0, DType::I32)?;
        let row = nuvec_core::expand_dims(&i, 1)?;
        let col = nuvec_core::expand_dims(&i, 0)?;
        let above = nuvec_core::less(&row, &col)?;
        let lowest = match dtype {
            DType::F64 => f64::MIN,
            DType::F16 => f64::from(nuvec_core::f16::MIN),
            DType::BF16 => f64::from(nuvec_core::bf16::MIN),
            _ => f64::from(f32::MIN),
        };
        Ok(nuvec_core::where_(&above, lowest, 0.0)?.astype(dtype)?)
    }
}

impl Forward for MultiHeadAttention {
    /// Self-attention of `x` without a mask or cache.
    fn forward(&self, x: &Array) -> Result<Array> {
        MultiHeadAttention::forward(self, x, x, x, AttentionMask::None, None)
    }
}

/// The keys and values an attention layer has seen, `[B, H, S, D]` each, for generating one
/// token after another (mlx-lm's `KVCache`). [`KvCache::new`] concatenates each step's keys
/// to the previous ones; [`KvCache::preallocated`] keeps buffers that grow `step` positions
/// at a time and writes into them in place (when no one else holds them).
#[derive(Debug, Clone, Default)]
pub struct KvCache {
    keys: Option<Array>,
    values: Option<Array>,
    offset: usize,
    step: Option<usize>,
}

impl KvCache {
    /// An empty cache that concatenates.
    pub fn new() -> KvCache {
        KvCache::default()
    }

    /// An empty cache with buffers grown `step` positions at a time (mlx-lm uses 256).
    pub fn preallocated(step: usize) -> Result<KvCache> {
        if step == 0 {
            return Err(invalid("KvCache", "step must be positive"));
        }
        Ok(KvCache {
            step: Some(step),
            ..KvCache::default()
        })
    }

    /// The number of positions held.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Forgets every position.
    pub fn reset(&mut self) {
        self.keys = None;
        self.values = None;
        self.offset = 0;
    }

    /// The keys and values held, `[B, H, offset, D]` (`None` while empty).
    pub fn state(&self) -> Option<(Array, Array)> {
        let (k, v) = (self.keys.as_ref()?, self.values.as_ref()?);
        Some((self.valid(k).ok()?, self.valid(v).ok()?))
    }

    fn valid(&self, a: &Array) -> Result<Array> {
        if a.shape()[2] == self.offset {
            return Ok(a.clone());
        }
        let stop = self.offset as isize;
        let full = SliceArg::full();
        Ok(slice(
            a,
            &[full, full, SliceArg::new(Some(0), Some(stop), 1), full],
        )?)
    }

    /// Appends `keys` and `values` (`[B, H, L, D]`, the same `B`, `H` and `D` every time) and
    /// returns every position's, `[B, H, offset + L, D]`.
    pub fn update_and_fetch(&mut self, keys: &Array, values: &Array) -> Result<(Array, Array)> {
        const OP: &str = "KvCache";
        if keys.ndim() != 4 || values.ndim() != 4 || keys.shape()[..3] != values.shape()[..3] {
            return Err(invalid(
                OP,
                format!(
                    "keys and values must be [B, H, L, D] of one B, H and L, got {:?} and {:?}",
                    keys.shape(),
                    values.shape()
                ),
            ));
        }
        if let (Some(k), Some(v)) = (&self.keys, &self.values) {
            let fits = |old: &Array, new: &Array| {
                old.shape()[..2] == new.shape()[..2] && old.shape()[3] == new.shape()[3]
            };
            if !fits(k, keys) || !fits(v, values) {
                return Err(invalid(
                    OP,
                    format!(
                        "new keys {:?} and values {:?} do not fit the cached {:?} and {:?}",
                        keys.shape(),
                        values.shape(),
                        k.shape(),
                        v.shape()
                    ),
                ));
            }
        }
        let l = keys.shape()[2];
        match self.step {
            None => {
                let (k, v) = match (&self.keys, &self.values) {
                    (Some(k), Some(v)) => (
                        concatenate(&[k.clone(), keys.clone()], 2)?,
                        concatenate(&[v.clone(), values.clone()], 2)?,
                    ),
                    _ => (keys.clone(), values.clone()),
                };
                self.offset += l;
                self.keys = Some(k.clone());
                self.values = Some(v.clone());
                Ok((k, v))
            }
            Some(step) => {
                let prev = self.offset;
                let capacity = self.keys.as_ref().map_or(0, |k| k.shape()[2]);
                if prev + l > capacity {
                    let grow = (prev + l - capacity).div_ceil(step) * step;
                    self.keys = Some(grown(self.keys.take(), keys, grow)?);
                    self.values = Some(grown(self.values.take(), values, grow)?);
                }
                let region = [
                    SliceArg::full(),
                    SliceArg::full(),
                    SliceArg::new(Some(prev as isize), Some((prev + l) as isize), 1),
                ];
                let (Some(k), Some(v)) = (self.keys.take(), self.values.take()) else {
                    return Err(invalid(OP, "the buffers are missing"));
                };
                let k = slice_update(&k, keys, &region)?;
                let v = slice_update(&v, values, &region)?;
                self.offset = prev + l;
                self.keys = Some(k.clone());
                self.values = Some(v.clone());
                Ok((self.valid(&k)?, self.valid(&v)?))
            }
        }
    }
}

/// `old` (or nothing) followed by `grow` zero positions shaped like `new`.
fn grown(old: Option<Array>, new: &Array, grow: usize) -> Result<Array> {
    let s = new.shape();
    let zeros = nuvec_core::zeros(&[s[0], s[1], grow, s[3]], new.dtype())?;
    Ok(match old {
        Some(old) => concatenate(&[old, zeros], 2)?,
        None => zeros,
    })
}
