//! A decoder-only transformer in the style of Qwen3, built from this crate's layers: the
//! architecture of mlx-lm's `qwen3.py` with its parameter names
//! (`model.layers.0.self_attn.q_proj.weight`, ...).
//!
//! Each [`Block`] is pre-norm: `h = x + attention(rms_norm(x))`, `y = h + mlp(rms_norm(h))`.
//! The [`Attention`] has grouped-query heads ([`TransformerConfig::n_kv_heads`] key and value
//! heads shared by groups of query heads), an RMS norm over each query and key head before
//! the rotary embedding (Qwen3's `q_norm` and `k_norm`, optional here), no biases, and a
//! [`KvCache`] for decoding one token after another. The [`Mlp`] is SwiGLU:
//! `down(silu(gate(x)) · up(x))`. The output projection is the embedding table itself when
//! the embeddings are tied, else its own `lm_head`.
//!
//! ```
//! use nuvec_core::Array;
//! use nuvec_nn::transformer::{Transformer, TransformerConfig};
//!
//! # fn main() -> nuvec_nn::Result<()> {
//! let config = TransformerConfig {
//!     vocab_size: 16, dims: 32, n_layers: 2, n_heads: 4, n_kv_heads: 2, head_dim: 8,
//!     hidden_dims: 64, ..TransformerConfig::default()
//! };
//! let model = Transformer::new(&config)?;
//! let tokens = Array::from_slice(&[1u32, 2, 3, 4, 5, 6], &[2, 3])?;
//! assert_eq!(model.forward(&tokens, None)?.shape(), [2, 3, 16]);
//!
//! // Decoding with caches: the prompt once, then one token at a time.
//! let mut caches = model.make_caches();
//! model.forward(&tokens, Some(&mut caches))?;
//! let next = Array::from_slice(&[7u32, 8], &[2, 1])?;
//! assert_eq!(model.forward(&next, Some(&mut caches))?.shape(), [2, 1, 16]);
//! assert_eq!(caches[0].offset(), 4);
//! # Ok(())
//! # }
//! ```

use nuvec_core::fast::{self, AttentionMask};
use nuvec_core::{Array, add, transpose};

use crate::activations::swiglu;
use crate::error::{Result, invalid};
use crate::layers::Forward;
use crate::layers::attention::KvCache;
use crate::layers::embedding::Embedding;
use crate::layers::linear::Linear;
use crate::layers::norm::RMSNorm;
use crate::layers::positional::RoPE;

/// The sizes of a [`Transformer`] (the names of Qwen3's configuration, shortened).
#[derive(Debug, Clone, PartialEq)]
pub struct TransformerConfig {
    /// The number of tokens.
    pub vocab_size: usize,
    /// The width of the residual stream (`hidden_size`).
    pub dims: usize,
    /// The number of blocks.
    pub n_layers: usize,
    /// Query heads.
    pub n_heads: usize,
    /// Key and value heads (a divisor of `n_heads`).
    pub n_kv_heads: usize,
    /// The width of a head (Qwen3 sets it apart from `dims / n_heads`; even, for the rotary
    /// embedding).
    pub head_dim: usize,
    /// The width of the MLP (`intermediate_size`).
    pub hidden_dims: usize,
    /// The base of the rotary embedding's frequencies (`rope_theta`).
    pub rope_base: f32,
    /// The norms' epsilon (`rms_norm_eps`).
    pub norm_eps: f32,
    /// Whether the output projection is the embedding table (`tie_word_embeddings`).
    pub tie_embeddings: bool,
    /// Whether queries and keys are RMS-normalised per head before the rotary embedding
    /// (Qwen3's `q_norm` and `k_norm`).
    pub qk_norm: bool,
}

impl Default for TransformerConfig {
    /// Qwen3-0.6B's shape choices at a toy size: 4 layers of width 128, 4 query heads over 2
    /// key/value heads of 32, an MLP of 384, tied embeddings, q/k norms, `rope_theta` 1e6.
    fn default() -> TransformerConfig {
        TransformerConfig {
            vocab_size: 256,
            dims: 128,
            n_layers: 4,
            n_heads: 4,
            n_kv_heads: 2,
            head_dim: 32,
            hidden_dims: 384,
            rope_base: 1_000_000.0,
            norm_eps: 1e-6,
            tie_embeddings: true,
            qk_norm: true,
        }
    }
}

impl TransformerConfig {
    /// Checks that the sizes fit together.
    pub fn validate(&self) -> Result<()> {
        const OP: &str = "TransformerConfig";
        let sizes = [
            ("vocab_size", self.vocab_size),
            ("dims", self.dims),
            ("n_layers", self.n_layers),
            ("n_heads", self.n_heads),
            ("n_kv_heads", self.n_kv_heads),
            ("head_dim", self.head_dim),
            ("hidden_dims", self.hidden_dims),
        ];
        if let Some((name, _)) = sizes.iter().find(|(_, v)| *v == 0) {
            return Err(invalid(OP, format!("{name} must be positive")));
        }
        if !self.n_heads.is_multiple_of(self.n_kv_heads) {
            return Err(invalid(
                OP,
                format!(
                    "n_heads ({}) must be a multiple of n_kv_heads ({})",
                    self.n_heads, self.n_kv_heads
                ),
            ));
        }
        if !self.head_dim.is_multiple_of(2) {
            return Err(invalid(
                OP,
                format!("head_dim must be even, got {}", self.head_dim),
            ));
        }
        Ok(())
    }
}

/// Grouped-query self-attention with per-head q/k norms and rotary embeddings (mlx-lm's
/// Qwen3 `Attention`).
#[derive(Debug, Clone, crate::Module)]
pub struct Attention {
    /// `dims → n_heads · head_dim`.
    pub q_proj: Linear,
    /// `dims → n_kv_heads · head_dim`.
    pub k_proj: Linear,
    /// `dims → n_kv_heads · head_dim`.
    pub v_proj: Linear,
    /// `n_heads · head_dim → dims`.
    pub o_proj: Linear,
    /// The norm of each query head, `[head_dim]`, if any.
    pub q_norm: Option<RMSNorm>,
    /// The norm of each key head, `[head_dim]`, if any.
    pub k_norm: Option<RMSNorm>,
    /// The rotary embedding of queries and keys (over the whole head).
    pub rope: RoPE,
    /// Query heads.
    pub n_heads: usize,
    /// Key and value heads.
    pub n_kv_heads: usize,
    /// The width of a head.
    pub head_dim: usize,
}

impl Attention {
    /// The attention of a block of `config`.
    pub fn new(config: &TransformerConfig) -> Result<Attention> {
        config.validate()?;
        let (d, h, kv, hd) = (
            config.dims,
            config.n_heads,
            config.n_kv_heads,
            config.head_dim,
        );
        let norm = || -> Result<Option<RMSNorm>> {
            Ok(match config.qk_norm {
                true => Some(RMSNorm::new(hd, config.norm_eps)?),
                false => None,
            })
        };
        Ok(Attention {
            q_proj: Linear::new(d, h * hd, false)?,
            k_proj: Linear::new(d, kv * hd, false)?,
            v_proj: Linear::new(d, kv * hd, false)?,
            o_proj: Linear::new(h * hd, d, false)?,
            q_norm: norm()?,
            k_norm: norm()?,
            rope: RoPE::new(hd, false, config.rope_base, 1.0)?,
            n_heads: h,
            n_kv_heads: kv,
            head_dim: hd,
        })
    }

    /// Causal self-attention of `x: [B, L, dims]`, after the positions already in `cache`
    /// (whose keys and values it extends) when one is given.
    pub fn forward(&self, x: &Array, cache: Option<&mut KvCache>) -> Result<Array> {
        let (b, l) = batch_and_length("Attention", x)?;
        let heads = |proj: &Linear, n: usize, norm: Option<&RMSNorm>| -> Result<Array> {
            let y = proj.forward(x)?.reshape(&[b, l, n as isize, -1])?;
            let y = match norm {
                Some(norm) => norm.forward(&y)?,
                None => y,
            };
            Ok(transpose(&y, &[0, 2, 1, 3])?)
        };
        let q = heads(&self.q_proj, self.n_heads, self.q_norm.as_ref())?;
        let k = heads(&self.k_proj, self.n_kv_heads, self.k_norm.as_ref())?;
        let v = heads(&self.v_proj, self.n_kv_heads, None)?;
        let offset = cache.as_ref().map_or(0, |c| c.offset());
        let (q, k) = (
            self.rope.forward_at(&q, offset)?,
            self.rope.forward_at(&k, offset)?,
        );
        let (k, v) = match cache {
            Some(c) => c.update_and_fetch(&k, &v)?,
            None => (k, v),
        };
        let scale = (1.0 / self.head_dim as f64).sqrt() as f32;
        let o = fast::scaled_dot_product_attention(&q, &k, &v, scale, AttentionMask::Causal, None)?;
        let o = transpose(&o, &[0, 2, 1, 3])?.reshape(&[b, l, -1])?;
        self.o_proj.forward(&o)
    }
}

/// `[B, L]` of an input of three axes, as `isize`s for reshapes.
fn batch_and_length(op: &str, x: &Array) -> Result<(isize, isize)> {
    match x.shape() {
        [b, l, _] => Ok((*b as isize, *l as isize)),
        s => Err(invalid(
            op,
            format!("the input must be [B, L, dims], got {s:?}"),
        )),
    }
}

/// The SwiGLU feed-forward layer: `down_proj(silu(gate_proj(x)) · up_proj(x))`.
#[derive(Debug, Clone, crate::Module)]
pub struct Mlp {
    /// `dims → hidden_dims`, through the SiLU.
    pub gate_proj: Linear,
    /// `dims → hidden_dims`.
    pub up_proj: Linear,
    /// `hidden_dims → dims`.
    pub down_proj: Linear,
}

impl Mlp {
    /// The MLP of a block of `config`.
    pub fn new(config: &TransformerConfig) -> Result<Mlp> {
        let (d, h) = (config.dims, config.hidden_dims);
        Ok(Mlp {
            gate_proj: Linear::new(d, h, false)?,
            up_proj: Linear::new(d, h, false)?,
            down_proj: Linear::new(h, d, false)?,
        })
    }
}

impl Forward for Mlp {
    fn forward(&self, x: &Array) -> Result<Array> {
        let gated = swiglu(&self.gate_proj.forward(x)?, &self.up_proj.forward(x)?)?;
        self.down_proj.forward(&gated)
    }
}

/// One pre-norm block: attention and MLP, each after an RMS norm and added to the residual.
#[derive(Debug, Clone, crate::Module)]
pub struct Block {
    /// The attention.
    pub self_attn: Attention,
    /// The feed-forward layer.
    pub mlp: Mlp,
    /// The norm before the attention.
    pub input_layernorm: RMSNorm,
    /// The norm before the MLP.
    pub post_attention_layernorm: RMSNorm,
}

impl Block {
    /// A block of `config`.
    pub fn new(config: &TransformerConfig) -> Result<Block> {
        Ok(Block {
            self_attn: Attention::new(config)?,
            mlp: Mlp::new(config)?,
            input_layernorm: RMSNorm::new(config.dims, config.norm_eps)?,
            post_attention_layernorm: RMSNorm::new(config.dims, config.norm_eps)?,
        })
    }

    /// The block applied to `x: [B, L, dims]` (see [`Attention::forward`] for `cache`).
    pub fn forward(&self, x: &Array, cache: Option<&mut KvCache>) -> Result<Array> {
        let h = add(
            x,
            self.self_attn
                .forward(&self.input_layernorm.forward(x)?, cache)?,
        )?;
        let m = self
            .mlp
            .forward(&self.post_attention_layernorm.forward(&h)?)?;
        Ok(add(&h, &m)?)
    }
}

/// The stack: embeddings, blocks and the final norm (mlx-lm's `Qwen3Model`).
#[derive(Debug, Clone, crate::Module)]
pub struct Decoder {
    /// The token embeddings, `[vocab_size, dims]`.
    pub embed_tokens: Embedding,
    /// The blocks.
    pub layers: Vec<Block>,
    /// The final norm.
    pub norm: RMSNorm,
}

/// A decoder-only language model (mlx-lm's Qwen3 `Model`): [`Decoder`] under `model`, and
/// `lm_head` unless the embeddings are tied.
#[derive(Debug, Clone, crate::Module)]
pub struct Transformer {
    /// The stack.
    pub model: Decoder,
    /// The output projection `dims → vocab_size`, when the embeddings are not tied.
    pub lm_head: Option<Linear>,
}

impl Transformer {
    /// A model of `config`, float32, with MLX's initialisation of each layer (drawn from
    /// nuvec-core's global generator: seed it with [`nuvec_core::random::seed`]).
    pub fn new(config: &TransformerConfig) -> Result<Transformer> {
        config.validate()?;
        let layers = (0..config.n_layers)
            .map(|_| Block::new(config))
            .collect::<Result<Vec<_>>>()?;
        Ok(Transformer {
            model: Decoder {
                embed_tokens: Embedding::new(config.vocab_size, config.dims)?,
                layers,
                norm: RMSNorm::new(config.dims, config.norm_eps)?,
            },
            lm_head: match config.tie_embeddings {
                true => None,
                false => Some(Linear::new(config.dims, config.vocab_size, false)?),
            },
        })
    }

    /// One empty [`KvCache`] per block, for [`Transformer::forward`] when decoding.
    pub fn make_caches(&self) -> Vec<KvCache> {
        self.model.layers.iter().map(|_| KvCache::new()).collect()
    }

    /// The final-normed hidden states `[B, L, dims]` of `tokens: [B, L]` (integers). With
    /// `caches` (one per block), the tokens follow the positions already cached and are
    /// added to them.
    pub fn hidden(&self, tokens: &Array, caches: Option<&mut [KvCache]>) -> Result<Array> {
        if tokens.ndim() != 2 {
            return Err(invalid(
                "Transformer",
                format!("tokens must be [B, L], got shape {:?}", tokens.shape()),
            ));
        }
        let mut h = self.model.embed_tokens.forward(tokens)?;
        match caches {
            Some(caches) => {
                if caches.len() != self.model.layers.len() {
                    return Err(invalid(
                        "Transformer",
                        format!(
                            "{} caches for {} blocks",
                            caches.len(),
                            self.model.layers.len()
                        ),
                    ));
                }
                for (block, cache) in self.model.layers.iter().zip(caches.iter_mut()) {
                    h = block.forward(&h, Some(cache))?;
                }
            }
            None => {
                for block in &self.model.layers {
                    h = block.forward(&h, None)?;
                }
            }
        }
        self.model.norm.forward(&h)
    }

    /// The logits of hidden states `[..., dims]` (from [`Transformer::hidden`]): through the
    /// embedding table when tied, else `lm_head`.
    pub fn logits(&self, hidden: &Array) -> Result<Array> {
        match &self.lm_head {
            Some(head) => head.forward(hidden),
            None => self.model.embed_tokens.as_linear(hidden),
        }
    }

    /// The logits `[B, L, vocab_size]` of `tokens: [B, L]` (see [`Transformer::hidden`] for
    /// `caches`).
    pub fn forward(&self, tokens: &Array, caches: Option<&mut [KvCache]>) -> Result<Array> {
        self.logits(&self.hidden(tokens, caches)?)
    }
}
