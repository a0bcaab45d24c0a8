//! Rotary position embeddings: [`rope`], and [`norm_rope`] (an attention layer's query or
//! key preparation: norm, rotation and cache write in one step).

use super::check::{Checker, like};
use super::rules::{single, substituted, vjp_of_fallback, vmap_of_fallback, vmap_rows};
use super::{Arg, FastOp, Fused, check_inputs, floating, kernel_sized, one, scalar, span};
use crate::backend::cpu::fast::CpuKernel;
use crate::backend::cuda::fast::CudaKernel;
use crate::error::invalid;
use crate::primitive::{Batched, OutputSpec};
use crate::transforms::rules::VjpArgs;
use crate::{Array, Category, DType, Result, SliceArg};
use crate::{add, concatenate, cos, divide, multiply, reshape, sin, slice, stack, subtract};

/// Rotary position embeddings, as MLX's `fast.rope`, of `x` (at least 3-D, `[B, ..., T,
/// D]`, positions along `T`). The first `dims` features (even) rotate in pairs, the two
/// halves `(i, i + dims/2)` or, `traditional`, the neighbours `(2i, 2i + 1)`, by the angle
/// `(offset + t) · scale · θᵢ` with `θᵢ = base^(−2i/dims)` or `1 / freqs[i]`; the other
/// features pass through. Exactly one of `base` and `freqs` (`[dims / 2]`) is given.
/// `offset` is an integer scalar or one per batch entry (`[B]`).
///
/// ```
/// use nuvec_core::{Array, fast};
///
/// # fn main() -> nuvec_core::Result<()> {
/// // One position, at offset 1, with the frequency 6/π: (1, 0) turns by π/6.
/// let x = Array::from_slice(&[1.0f32, 0.0], &[1, 1, 2])?;
/// let freqs = Array::from_slice(&[6.0f32 / std::f32::consts::PI], &[1])?;
/// let r = fast::rope(&x, 2, false, None, 1.0, &Array::scalar(1i32), Some(&freqs))?;
/// let v = r.to_vec::<f32>()?;
/// assert!((v[0] - 0.75f32.sqrt()).abs() < 1e-6 && (v[1] - 0.5).abs() < 1e-6);
/// # Ok(())
/// # }
/// ```
pub fn rope(
    x: &Array,
    dims: usize,
    traditional: bool,
    base: Option<f32>,
    scale: f32,
    offset: &Array,
    freqs: Option<&Array>,
) -> Result<Array> {
    const OP: &str = "rope";
    check_inputs(&[x, offset])?;
    if x.ndim() < 3 {
        return Err(invalid(
            OP,
            format!("the input needs at least 3 dimensions, got {:?}", x.shape()),
        ));
    }
    floating(OP, x.dtype())?;
    if offset.ndim() > 1 || (offset.size() != 1 && offset.size() != x.shape()[0]) {
        return Err(invalid(
            OP,
            format!(
                "offset must be a scalar or have {} elements, got shape {:?}",
                x.shape()[0],
                offset.shape()
            ),
        ));
    }
    if !matches!(
        offset.dtype().category(),
        Category::Signed | Category::Unsigned
    ) {
        return Err(invalid(
            OP,
            format!("offset must be an integer, got {}", offset.dtype()),
        ));
    }
    let d = x.shape()[x.ndim() - 1];
    if dims == 0 || !dims.is_multiple_of(2) || dims > d {
        return Err(invalid(
            OP,
            format!("dims must be even, positive and at most {d}, got {dims}"),
        ));
    }
    // 32-bit offsets are what the kernels read.
    let offset = if offset.dtype().size() == 4 {
        offset.clone()
    } else {
        offset.astype(DType::I32)?
    };
    let mut inputs = vec![x.clone(), offset];
    let base = match (base, freqs) {
        (Some(b), None) => b,
        (None, Some(f)) => {
            check_inputs(&[f])?;
            if f.ndim() != 1 || f.size() != dims / 2 {
                return Err(invalid(
                    OP,
                    format!(
                        "freqs must be 1-D with {} elements, got shape {:?}",
                        dims / 2,
                        f.shape()
                    ),
                ));
            }
            inputs.push(f.astype(DType::F32)?);
            // Unused with explicit frequencies.
            1.0
        }
        _ => {
            return Err(invalid(OP, "exactly one of base and freqs must be given"));
        }
    };
    let op = FastOp::Rope {
        dims,
        traditional,
        base: base.to_bits(),
        scale: scale.to_bits(),
        forward: true,
    };
    one(op, inputs)
}

/// The angle parameters of a rotation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Angles {
    /// How many leading features rotate (even).
    pub(crate) dims: usize,
    /// Interleaved pairs instead of halves.
    pub(crate) traditional: bool,
    /// The frequency base (unused with explicit frequencies).
    pub(crate) base: f32,
    /// The position scale.
    pub(crate) scale: f32,
}

impl Angles {
    /// The angles of a node's parameters (floats as their bits).
    pub(super) fn new(dims: usize, traditional: bool, base: u32, scale: u32) -> Angles {
        Angles {
            dims,
            traditional,
            base: f32::from_bits(base),
            scale: f32::from_bits(scale),
        }
    }
}

/// [`FastOp::Rope`]: `(x, offset[, freqs])`.
pub(crate) struct Rope {
    pub(crate) angles: Angles,
    /// The rotation itself (else its inverse).
    pub(crate) forward: bool,
}

impl Rope {
    /// The inputs both devices' rotation kernels take: `(x, offset[, freqs])`, `x` of a kernel
    /// type with at least 3 axes, 32-bit integer offsets (one, or one per batch entry), float32
    /// frequencies of `dims / 2`.
    pub(crate) fn kernel_takes(&self, inputs: &[Arg<'_>]) -> bool {
        let dims = self.angles.dims;
        if !kernel_sized(inputs) || !(2..=3).contains(&inputs.len()) {
            return false;
        }
        let (x, offsets) = (inputs[0], inputs[1]);
        x.shape.len() >= 3
            && matches!(offsets.dtype, DType::I32 | DType::U32)
            && offsets.shape.len() <= 1
            && (offsets.size() == 1 || offsets.size() == x.shape[0])
            && dims > 0
            && dims.is_multiple_of(2)
            && dims <= x.last()
            && inputs
                .get(2)
                .is_none_or(|f| f.shape == [dims / 2] && f.dtype == DType::F32)
    }

    /// The node of this rotation, forwards or backwards.
    fn op(&self, forward: bool) -> FastOp {
        FastOp::Rope {
            dims: self.angles.dims,
            traditional: self.angles.traditional,
            base: self.angles.base.to_bits(),
            scale: self.angles.scale.to_bits(),
            forward,
        }
    }
}

impl Fused for Rope {
    fn name(&self) -> &'static str {
        "rope"
    }

    fn specs(&self, c: &Checker<'_>) -> Result<Vec<OutputSpec>> {
        c.count(2, 3)?;
        let x = c.rank(0, None)?;
        c.float(0)?;
        c.holds(x.ndim() >= 3, || {
            format!("the input needs 3 dimensions, got {:?}", x.shape())
        })?;
        c.rotation(0, 2, self.angles.dims)?;
        let offset = &c.inputs[1];
        c.integer(1)?;
        c.holds(
            offset.ndim() <= 1 && (offset.size() == 1 || offset.size() == x.shape()[0]),
            || format!("offset of shape {:?} for {:?}", offset.shape(), x.shape()),
        )?;
        Ok(vec![like(x)])
    }

    fn fallback(&self, inputs: &[Array]) -> Result<Vec<Array>> {
        Ok(vec![rope_graph(inputs, self.angles, self.forward)?])
    }

    /// The rotation is orthogonal: its transpose is the rotation backwards.
    fn vjp(&self, call: VjpArgs<'_>) -> Result<Vec<Array>> {
        if call.argnums != [0] {
            return vjp_of_fallback(self, call);
        }
        let node = substituted(
            call.inputs,
            &[0],
            std::slice::from_ref(single(call.cotangents)?),
        );
        Ok(vec![one(self.op(!self.forward), node)?])
    }

    /// The node again with the batch first, unless offsets per batch entry would then mean
    /// the wrong rows.
    fn vmap(&self, inputs: &[Array], axes: &[Option<usize>]) -> Result<Batched> {
        if inputs[1].size() != 1 {
            return vmap_of_fallback(self, inputs, axes);
        }
        vmap_rows(self, self.op(self.forward), &[0], inputs, axes)
    }

    fn cpu(&self) -> Option<&dyn CpuKernel> {
        Some(self)
    }

    fn cuda(&self) -> Option<&dyn CudaKernel> {
        Some(self)
    }
}

/// [`FastOp::Rope`]'s fallback, `(x, offset[, freqs])`: the rotated pairs rebuilt into the
/// feature axis (the inverse rotation when `forward` is false). The angles are computed in
/// float32 (float64 for float64 inputs) and rounded to `x`'s type, as MLX's fallback.
fn rope_graph(inputs: &[Array], angles: Angles, forward: bool) -> Result<Array> {
    let x = &inputs[0];
    if x.size() == 0 {
        return Ok(x.clone());
    }
    let nd = x.ndim();
    let (b, t, d) = (x.shape()[0], x.shape()[nd - 2], x.shape()[nd - 1]);
    let x4 = reshape(x, &[b as isize, -1, t as isize, d as isize])?;
    let ct = if x.dtype() == DType::F64 {
        DType::F64
    } else {
        DType::F32
    };
    let half = angles.dims / 2;
    let offset = &inputs[1];
    // One offset for all, or one per batch entry (broadcast over heads and positions).
    let offset = if offset.size() > 1 {
        reshape(offset, &[-1, 1, 1])?
    } else {
        reshape(offset, &[])?
    }
    .astype(ct)?;
    let positions = multiply(
        add(crate::arange(0.0, t as f64, 1.0, ct)?, &offset)?,
        f64::from(angles.scale),
    )?;
    let inverse_freqs = match inputs.get(2) {
        Some(f) => divide(1.0, &f.astype(ct)?)?,
        None => {
            let step = -f64::from(angles.base).ln() / half as f64;
            crate::exp(&multiply(crate::arange(0.0, half as f64, 1.0, ct)?, step)?)?
        }
    };
    let theta = multiply(crate::expand_dims(&positions, -1)?, &inverse_freqs)?;
    let (c, s) = (
        cos(&theta)?.astype(x.dtype())?,
        sin(&theta)?.astype(x.dtype())?,
    );
    let features = |start: usize, step: isize| {
        let mut args = vec![SliceArg::full(); 4];
        let stop = start as isize + step * half as isize;
        args[3] = SliceArg::new(Some(start as isize), Some(stop), step);
        slice(&x4, &args)
    };
    let (x1, x2) = if angles.traditional {
        (features(0, 2)?, features(1, 2)?)
    } else {
        (features(0, 1)?, features(half, 1)?)
    };
    let (r1, r2) = if forward {
        (
            subtract(multiply(&x1, &c)?, multiply(&x2, &s)?)?,
            add(multiply(&x1, &s)?, multiply(&x2, &c)?)?,
        )
    } else {
        (
            add(multiply(&x1, &c)?, multiply(&x2, &s)?)?,
            subtract(multiply(&x2, &c)?, multiply(&x1, &s)?)?,
        )
    };
    let rotated = if angles.traditional {
        let pairs = stack(&[r1, r2], -1)?;
        let mut shape = super::dims(x1.shape());
        shape[3] = angles.dims as isize;
        reshape(&pairs, &shape)?
    } else {
        concatenate(&[r1, r2], -1)?
    };
    let out = if angles.dims < d {
        let mut args = vec![SliceArg::full(); 4];
        args[3] = span(angles.dims, d);
        concatenate(&[rotated, slice(&x4, &args)?], -1)?
    } else {
        rotated
    };
    reshape(&out, &super::dims(x.shape()))
}

/// The rotation of [`norm_rope`]: [`rope`]'s parameters.
#[derive(Debug, Clone, Copy)]
pub struct Rotation<'a> {
    /// How many leading features rotate (even, at most the head size).
    pub dims: usize,
    /// Interleaved pairs instead of halves.
    pub traditional: bool,
    /// The frequency base (exactly one of `base` and `freqs` is given).
    pub base: Option<f32>,
    /// The position scale.
    pub scale: f32,
    /// Per-pair frequencies (`[dims / 2]`).
    pub freqs: Option<&'a Array>,
}

/// The largest head size the fused [`norm_rope`] takes.
const NORM_ROPE_MAX: usize = 1024;

/// An attention layer's query or key preparation as one operation: each head's rows of `x`
/// (`[B, H, L, D]`, any strides, as a transposed projection is) optionally normalised as
/// [`rms_norm`](super::rms_norm) with `norm = (weight, eps)` (Qwen 3's `q_norm` and
/// `k_norm`), then rotated as [`rope`] at positions `offset..offset + L`.
///
/// Without `cache` the result is a new `[B, H, L, D]` array. With `cache` (`[B, H, C, D]`,
/// `C ≥ offset + L`) it is the cache with positions `offset..offset + L` replaced, as
/// [`crate::slice_update`] (in place when evaluation owns the cache alone), so keys reach a
/// key cache without another copy.
///
/// The results equal [`rms_norm`](super::rms_norm), [`rope`] and [`crate::slice_update`]
/// composed; mixed dtypes, other ranks and head sizes over 1024 run that composition.
///
/// ```
/// use nuvec_core::{Array, DType, fast, zeros};
///
/// # fn main() -> nuvec_core::Result<()> {
/// let x = Array::from_slice(&[1.0f32, 0.0], &[1, 1, 1, 2])?;
/// let cache = zeros(&[1, 1, 4, 2], DType::F32)?;
/// let rotation = fast::Rotation { dims: 2, traditional: false, base: Some(1.0), scale: 1.0,
///     freqs: None };
/// // Written at position 2, rotated by 2 radians (θ = 1 with base 1).
/// let c = fast::norm_rope(&x, None, rotation, 2, Some(&cache))?.to_vec::<f32>()?;
/// assert_eq!(c[..4], [0.0; 4]);
/// assert!((c[4] - 2f32.cos()).abs() < 1e-6 && (c[5] - 2f32.sin()).abs() < 1e-6);
/// # Ok(())
/// # }
/// ```
pub fn norm_rope(
    x: &Array,
    norm: Option<(&Array, f32)>,
    rotation: Rotation<'_>,
    offset: usize,
    cache: Option<&Array>,
) -> Result<Array> {
    check_inputs(&[x])?;
    let mut inputs = Vec::with_capacity(4);
    let mut fused = x.ndim() == 4
        && x.dtype().category() == Category::Float
        && x.shape()[3] <= NORM_ROPE_MAX
        && offset + x.shape()[2] <= i32::MAX as usize;
    if let Some(c) = cache {
        check_inputs(&[c])?;
        let s = x.shape();
        let fits = s.len() == 4
            && c.ndim() == 4
            && c.shape()[..2] == s[..2]
            && c.shape()[3] == s[3]
            && c.shape()[2] >= offset + s[2];
        if !fits {
            return Err(invalid(
                "norm_rope",
                format!(
                    "a cache of shape {:?} cannot take {s:?} at position {offset}",
                    c.shape()
                ),
            ));
        }
        fused &= c.dtype() == x.dtype();
        inputs.push(c.clone());
    }
    if let Some((w, _)) = norm {
        check_inputs(&[w])?;
        fused &= w.dtype() == x.dtype()
            && w.ndim() == 1
            && x.ndim() > 0
            && w.size() == x.shape()[x.ndim() - 1];
    }
    let freqs_ok = rotation
        .freqs
        .is_none_or(|f| f.error().is_none() && f.ndim() == 1 && f.size() == rotation.dims / 2);
    let dims_ok = rotation.dims > 0
        && rotation.dims.is_multiple_of(2)
        && x.ndim() > 0
        && rotation.dims <= x.shape()[x.ndim() - 1];
    let one_source = rotation.base.is_some() != rotation.freqs.is_some();
    if !(fused && freqs_ok && dims_ok && one_source) {
        // The composition, which also reports any invalid argument.
        return norm_rope_composed(x, norm, rotation, offset, cache);
    }
    inputs.push(x.clone());
    inputs.push(match norm {
        Some((w, _)) => w.clone(),
        None => scalar(1.0, x.dtype()),
    });
    if let Some(f) = rotation.freqs {
        inputs.push(f.astype(DType::F32)?);
    }
    let op = FastOp::NormRope {
        eps: norm.map(|(_, eps)| eps.to_bits()),
        dims: rotation.dims,
        traditional: rotation.traditional,
        base: rotation.base.unwrap_or(1.0).to_bits(),
        scale: rotation.scale.to_bits(),
        offset,
        cache: cache.is_some(),
    };
    one(op, inputs)
}

/// `cache` with positions `offset..offset + r.shape[2]` of its third axis replaced by `r`.
fn write_rows(cache: &Array, r: &Array, offset: usize) -> Result<Array> {
    let mut region = vec![SliceArg::full(); 4];
    region[2] = span(offset, offset + r.shape()[2]);
    crate::slice_update(cache, r, &region)
}

/// [`norm_rope`] as the public operations it equals.
fn norm_rope_composed(
    x: &Array,
    norm: Option<(&Array, f32)>,
    rotation: Rotation<'_>,
    offset: usize,
    cache: Option<&Array>,
) -> Result<Array> {
    let x = match norm {
        Some((w, eps)) => super::rms_norm(x, Some(w), eps)?,
        None => x.clone(),
    };
    let r = rope(
        &x,
        rotation.dims,
        rotation.traditional,
        rotation.base,
        rotation.scale,
        &Array::scalar(offset as i32),
        rotation.freqs,
    )?;
    match cache {
        Some(c) => write_rows(c, &r, offset),
        None => Ok(r),
    }
}

/// [`FastOp::NormRope`]: `([cache,] x, w[, freqs])`.
pub(crate) struct NormRope {
    /// The norm's epsilon, or no norm.
    pub(crate) eps: Option<f32>,
    pub(crate) angles: Angles,
    /// The position of the first row.
    pub(crate) offset: usize,
    /// Whether the first input is a cache the rows are written into.
    pub(crate) cache: bool,
}

impl Fused for NormRope {
    fn name(&self) -> &'static str {
        "norm_rope"
    }

    fn specs(&self, c: &Checker<'_>) -> Result<Vec<OutputSpec>> {
        let at = usize::from(self.cache);
        c.count(2 + at, 3 + at)?;
        let x = c.rank(at, Some(4))?;
        c.float(at)?;
        let s = x.shape();
        c.param(at + 1, s[3])?;
        c.rotation(at, at + 2, self.angles.dims)?;
        if self.cache {
            let cache = c.rank(0, Some(4))?;
            c.same_dtype(0, at)?;
            let cs = cache.shape();
            let offset = self.offset;
            c.holds(
                cs[..2] == s[..2] && cs[3] == s[3] && cs[2] >= offset + s[2],
                || format!("a cache of shape {cs:?} cannot take {s:?} at {offset}"),
            )?;
        }
        Ok(vec![like(&c.inputs[0])])
    }

    fn cuda(&self) -> Option<&dyn CudaKernel> {
        Some(self)
    }

    /// The norm and rotation nodes (fused themselves where kernels take them), then the cache
    /// write.
    fn fallback(&self, inputs: &[Array]) -> Result<Vec<Array>> {
        let at = usize::from(self.cache);
        let (x, w) = (&inputs[at], &inputs[at + 1]);
        let h = match self.eps {
            Some(eps) => one(
                FastOp::RmsNorm { eps: eps.to_bits() },
                vec![x.clone(), w.clone()],
            )?,
            None => x.clone(),
        };
        let mut rope_inputs = vec![h, Array::scalar(self.offset as i32)];
        rope_inputs.extend(inputs.get(at + 2).cloned());
        let rotation = Rope {
            angles: self.angles,
            forward: true,
        };
        let r = one(rotation.op(true), rope_inputs)?;
        Ok(vec![if self.cache {
            write_rows(&inputs[0], &r, self.offset)?
        } else {
            r
        }])
    }
}
