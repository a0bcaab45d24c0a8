//! Modules and their parameter trees.
//!
//! A module's parameters form a tree (fields, list entries, map entries) that nuvec-nn keeps
//! *flat*: each parameter is named by its path, the names joined with dots as MLX's
//! `tree_flatten` does (`layers.0.attention.wq.weight`). [`Params`] (a sorted map from those
//! names to arrays) is the one tree type: parameters, gradients and updates are all `Params`,
//! and what [`Module::weights`] returns is ready to save.
//!
//! A parameter is a [`Param`]: an array and whether it is frozen. Anything that holds
//! parameters implements [`Visit`] (`#[derive(Module)]` writes it), and every `Visit` is a
//! [`Module`], with MLX's methods: [`Module::parameters`], [`Module::trainable_parameters`],
//! [`Module::update`], [`Module::freeze`], [`Module::load_weights`], [`Module::train`], ...

use std::collections::{BTreeMap, HashMap};
use std::ops::Deref;
use std::path::Path;

use nuvec_core::{Array, DType, Operand};

use crate::checkpoint;

use crate::error::{Error, Result};

/// A flat parameter tree: dotted names to arrays, sorted by name.
pub type Params = BTreeMap<String, Array>;

/// `prefix.name`, or `name` when the prefix is empty (how the tree's names are built).
pub fn join_name(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else if name.is_empty() {
        prefix.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// A trainable array: its value, and whether it is frozen (left out of
/// [`Module::trainable_parameters`], so of gradients and optimizer updates).
///
/// A `Param` dereferences to its [`Array`], and `&Param` converts into an operand, so it can be
/// given to nuvec-core's functions directly.
#[derive(Debug, Clone)]
pub struct Param {
    value: Array,
    frozen: bool,
}

impl Param {
    /// A trainable parameter holding `value`.
    pub fn new(value: Array) -> Param {
        Param {
            value,
            frozen: false,
        }
    }

    /// The value.
    pub fn value(&self) -> &Array {
        &self.value
    }

    /// Replaces the value (the frozen flag is kept).
    pub fn set(&mut self, value: Array) {
        self.value = value;
    }

    /// Whether the parameter is frozen.
    pub fn is_frozen(&self) -> bool {
        self.frozen
    }

    /// Freezes (`true`) or unfreezes (`false`) the parameter.
    pub fn set_frozen(&mut self, frozen: bool) {
        self.frozen = frozen;
    }
}

impl Deref for Param {
    type Target = Array;
    fn deref(&self) -> &Array {
        &self.value
    }
}

impl From<Array> for Param {
    fn from(value: Array) -> Param {
        Param::new(value)
    }
}

impl From<&Param> for Operand {
    fn from(p: &Param) -> Operand {
        Operand::from(&p.value)
    }
}

/// What holds parameters: visits each with its full dotted name, and passes the training flag
/// down. `#[derive(Module)]` implements it for a struct from its fields; containers
/// (`Option`, `Vec`, `Box`, maps keyed by strings) visit their entries, and plain values
/// (numbers, booleans, strings, dtypes and plain [`Array`]s, which are constants rather than
/// parameters) visit nothing.
pub trait Visit {
    /// Calls `f` with each parameter's name (under `prefix`) and the parameter.
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Param));

    /// Calls `f` with each parameter's name (under `prefix`) and the parameter, mutably,
    /// stopping at the first error.
    fn visit_mut(
        &mut self,
        prefix: &str,
        f: &mut dyn FnMut(&str, &mut Param) -> Result<()>,
    ) -> Result<()>;

    /// Sets training (`true`) or evaluation mode in this value and what it holds (only layers
    /// that behave differently, such as [`crate::Dropout`], keep the flag).
    fn set_training(&mut self, training: bool) {
        let _ = training;
    }
}

impl Visit for Param {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Param)) {
        f(prefix, self)
    }

    fn visit_mut(
        &mut self,
        prefix: &str,
        f: &mut dyn FnMut(&str, &mut Param) -> Result<()>,
    ) -> Result<()> {
        f(prefix, self)
    }
}

impl<T: Visit> Visit for Option<T> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Param)) {
        if let Some(v) = self {
            v.visit(prefix, f)
        }
    }

    fn visit_mut(
        &mut self,
        prefix: &str,
        f: &mut dyn FnMut(&str, &mut Param) -> Result<()>,
    ) -> Result<()> {
        match self {
            Some(v) => v.visit_mut(prefix, f),
            None => Ok(()),
        }
    }

    fn set_training(&mut self, training: bool) {
        if let Some(v) = self {
            v.set_training(training)
        }
    }
}

impl<T: Visit> Visit for Vec<T> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Param)) {
        for (i, v) in self.iter().enumerate() {
            v.visit(&join_name(prefix, &i.to_string()), f);
        }
    }

    fn visit_mut(
        &mut self,
        prefix: &str,
        f: &mut dyn FnMut(&str, &mut Param) -> Result<()>,
    ) -> Result<()> {
        for (i, v) in self.iter_mut().enumerate() {
            v.visit_mut(&join_name(prefix, &i.to_string()), f)?;
        }
        Ok(())
    }

    fn set_training(&mut self, training: bool) {
        self.iter_mut().for_each(|v| v.set_training(training));
    }
}

impl<T: Visit + ?Sized> Visit for Box<T> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Param)) {
        (**self).visit(prefix, f)
    }

    fn visit_mut(
        &mut self,
        prefix: &str,
        f: &mut dyn FnMut(&str, &mut Param) -> Result<()>,
    ) -> Result<()> {
        (**self).visit_mut(prefix, f)
    }

    fn set_training(&mut self, training: bool) {
        (**self).set_training(training)
    }
}

macro_rules! map_visit {
    ($($map:ident),*) => {$(
        impl<T: Visit> Visit for $map<String, T> {
            fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Param)) {
                for (k, v) in self {
                    v.visit(&join_name(prefix, k), f);
                }
            }

            fn visit_mut(
                &mut self,
                prefix: &str,
                f: &mut dyn FnMut(&str, &mut Param) -> Result<()>,
            ) -> Result<()> {
                for (k, v) in self.iter_mut() {
                    v.visit_mut(&join_name(prefix, k), f)?;
                }
                Ok(())
            }

            fn set_training(&mut self, training: bool) {
                self.values_mut().for_each(|v| v.set_training(training));
            }
        }
    )*};
}

map_visit!(BTreeMap, HashMap);

macro_rules! no_params {
    ($($t:ty),*) => {$(
        impl Visit for $t {
            fn visit(&self, _prefix: &str, _f: &mut dyn FnMut(&str, &Param)) {}

            fn visit_mut(
                &mut self,
                _prefix: &str,
                _f: &mut dyn FnMut(&str, &mut Param) -> Result<()>,
            ) -> Result<()> {
                Ok(())
            }
        }
    )*};
}

no_params!(
    bool, f32, f64, i8, i16, i32, i64, isize, u8, u16, u32, u64, usize, String, DType, Array
);

/// A map from names to arrays that weights can be read from ([`HashMap`] and [`BTreeMap`]).
pub trait NamedArrays {
    /// The array named `name`.
    fn get_array(&self, name: &str) -> Option<&Array>;
    /// Every name.
    fn array_names(&self) -> Vec<&str>;
}

impl NamedArrays for HashMap<String, Array> {
    fn get_array(&self, name: &str) -> Option<&Array> {
        self.get(name)
    }
    fn array_names(&self) -> Vec<&str> {
        self.keys().map(String::as_str).collect()
    }
}

impl NamedArrays for BTreeMap<String, Array> {
    fn get_array(&self, name: &str) -> Option<&Array> {
        self.get(name)
    }
    fn array_names(&self) -> Vec<&str> {
        self.keys().map(String::as_str).collect()
    }
}

/// Whether `pattern` names the parameter `name`: the name itself, or a dotted prefix of it
/// (`layers.0` names every parameter of the first layer).
fn matches(pattern: &str, name: &str) -> bool {
    pattern.is_empty()
        || name == pattern
        || (name.starts_with(pattern) && name.as_bytes().get(pattern.len()) == Some(&b'.'))
}

/// A neural-network module: anything that holds parameters ([`Visit`]), with MLX's
/// `nn.Module` methods. Implemented for every [`Visit`]; a struct becomes one with
/// `#[derive(Module)]`.
///
/// ```
/// use nuvec_nn::{Linear, Module};
///
/// # fn main() -> nuvec_nn::Result<()> {
/// #[derive(nuvec_nn::Module)]
/// struct Mlp {
///     layers: Vec<Linear>,
///     #[module(skip)]
///     note: &'static str,
/// }
/// let mut mlp = Mlp { layers: vec![Linear::new(4, 8, true)?, Linear::new(8, 2, true)?], note: "" };
/// let names: Vec<String> = mlp.parameters().into_keys().collect();
/// assert_eq!(names, ["layers.0.bias", "layers.0.weight", "layers.1.bias", "layers.1.weight"]);
/// mlp.freeze_params(&["layers.0"])?;
/// assert_eq!(mlp.trainable_parameters().len(), 2);
/// # Ok(())
/// # }
/// ```
pub trait Module: Visit {
    /// Every parameter by its dotted name (MLX's `parameters()`, flattened).
    fn parameters(&self) -> Params {
        let mut out = Params::new();
        self.visit("", &mut |name, p| {
            out.insert(name.to_string(), p.value().clone());
        });
        out
    }

    /// The parameters that are not frozen (MLX's `trainable_parameters()`).
    fn trainable_parameters(&self) -> Params {
        let mut out = Params::new();
        self.visit("", &mut |name, p| {
            if !p.is_frozen() {
                out.insert(name.to_string(), p.value().clone());
            }
        });
        out
    }

    /// The names of the frozen parameters.
    fn frozen_parameters(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.visit("", &mut |name, p| {
            if p.is_frozen() {
                out.push(name.to_string());
            }
        });
        out
    }

    /// The number of scalars in all parameters.
    fn num_parameters(&self) -> usize {
        let mut n = 0;
        self.visit("", &mut |_, p| n += p.size());
        n
    }

    /// Every parameter by its dotted name, as a map ready to save (MLX's
    /// `dict(tree_flatten(model.parameters()))`).
    fn weights(&self) -> HashMap<String, Array> {
        self.parameters().into_iter().collect()
    }

    /// Replaces the parameters named in `params` (a subset is fine, as MLX's `update`); a name
    /// that is not a parameter of the module is an [`Error::UnexpectedParameters`] and
    /// nothing is changed.
    fn update(&mut self, params: &impl NamedArrays) -> Result<()>
    where
        Self: Sized,
    {
        let known = self.parameters();
        let mut unknown: Vec<String> = params
            .array_names()
            .into_iter()
            .filter(|n| !known.contains_key(*n))
            .map(str::to_string)
            .collect();
        if !unknown.is_empty() {
            unknown.sort();
            return Err(Error::UnexpectedParameters(unknown));
        }
        self.visit_mut("", &mut |name, p| {
            if let Some(v) = params.get_array(name) {
                p.set(v.clone());
            }
            Ok(())
        })
    }

    /// Loads `weights` into the module (MLX's `load_weights`). Strict: every parameter must
    /// have a weight ([`Error::MissingParameters`]) and every weight a parameter
    /// ([`Error::UnexpectedParameters`]); otherwise the weights present are loaded and the
    /// rest ignored. In both modes a weight's shape must be its parameter's
    /// ([`Error::ShapeMismatch`]). Nothing is changed when an error is returned. Weights keep
    /// their dtype (as MLX).
    fn load_weights(&mut self, weights: &impl NamedArrays, strict: bool) -> Result<()>
    where
        Self: Sized,
    {
        let known = self.parameters();
        if strict {
            let mut missing: Vec<String> = known
                .keys()
                .filter(|k| weights.get_array(k).is_none())
                .cloned()
                .collect();
            if !missing.is_empty() {
                missing.sort();
                return Err(Error::MissingParameters(missing));
            }
            let mut extra: Vec<String> = weights
                .array_names()
                .into_iter()
                .filter(|n| !known.contains_key(*n))
                .map(str::to_string)
                .collect();
            if !extra.is_empty() {
                extra.sort();
                return Err(Error::UnexpectedParameters(extra));
            }
        }
        for (name, p) in &known {
            if let Some(w) = weights.get_array(name)
                && w.shape() != p.shape()
            {
                return Err(Error::ShapeMismatch {
                    name: name.clone(),
                    expected: p.shape().to_vec(),
                    got: w.shape().to_vec(),
                });
            }
        }
        self.visit_mut("", &mut |name, p| {
            if let Some(w) = weights.get_array(name) {
                p.set(w.clone());
            }
            Ok(())
        })
    }

    /// Saves every parameter to the file `path` (MLX's `save_weights`), under its dotted name:
    /// a safetensors file (with the metadata `format: mlx`, as MLX writes) when the path ends
    /// in `.safetensors`, NumPy's `.npz` when it ends in `.npz`; any other extension is an
    /// [`Error::InvalidArgument`]. The parameters are evaluated first and keep their dtype.
    ///
    /// ```
    /// use nuvec_core::{DType, ones};
    /// use nuvec_nn::{Forward, Linear, Module};
    ///
    /// # fn main() -> nuvec_nn::Result<()> {
    /// let path = std::env::temp_dir().join(format!("nuvec-nn-doc-{}.safetensors", std::process::id()));
    /// let layer = Linear::new(4, 3, true)?;
    /// layer.save_weights(&path)?;
    /// let mut fresh = Linear::new(4, 3, true)?;
    /// fresh.load_weights_file(&path, true)?;
    /// let x = ones(&[2, 4], DType::F32)?;
    /// assert_eq!(fresh.forward(&x)?.to_vec::<f32>()?, layer.forward(&x)?.to_vec::<f32>()?);
    /// # std::fs::remove_file(&path).ok();
    /// # Ok(())
    /// # }
    /// ```
    fn save_weights(&self, path: impl AsRef<Path>) -> Result<()>
    where
        Self: Sized,
    {
        checkpoint::save("save_weights", path.as_ref(), &self.weights())
    }

    /// Loads the weights of the file `path` (safetensors or `.npz`, by its extension, as
    /// [`Module::save_weights`] writes) into the module, as [`Module::load_weights`] does,
    /// strict or not; nothing is changed when an error is returned (a file that cannot be
    /// read is nuvec-core's [`nuvec_core::Error::Io`] or [`nuvec_core::Error::Format`]).
    fn load_weights_file(&mut self, path: impl AsRef<Path>, strict: bool) -> Result<()>
    where
        Self: Sized,
    {
        let weights = checkpoint::load("load_weights_file", path.as_ref())?;
        self.load_weights(&weights, strict)
    }

    /// Freezes every parameter (MLX's `freeze()`).
    fn freeze(&mut self) {
        let _ = self.visit_mut("", &mut |_, p| {
            p.set_frozen(true);
            Ok(())
        });
    }

    /// Unfreezes every parameter (MLX's `unfreeze()`).
    fn unfreeze(&mut self) {
        let _ = self.visit_mut("", &mut |_, p| {
            p.set_frozen(false);
            Ok(())
        });
    }

    /// Freezes the parameters named by `names`: full dotted names, or prefixes naming a whole
    /// submodule (`layers.0`). A name that matches no parameter is an
    /// [`Error::UnknownParameter`] and nothing is changed.
    fn freeze_params(&mut self, names: &[&str]) -> Result<()>
    where
        Self: Sized,
    {
        set_frozen_matching(self, names, true)
    }

    /// Unfreezes the parameters named by `names` (as [`Module::freeze_params`]).
    fn unfreeze_params(&mut self, names: &[&str]) -> Result<()>
    where
        Self: Sized,
    {
        set_frozen_matching(self, names, false)
    }

    /// Converts every floating-point parameter to `dtype` (MLX's `set_dtype`; integer
    /// parameters, such as quantized weights, are left as they are). `dtype` should be a
    /// floating type.
    fn set_dtype(&mut self, dtype: DType) {
        let _ = self.visit_mut("", &mut |_, p| {
            if p.dtype().is_float() && p.dtype() != dtype {
                let converted = p.astype(dtype)?;
                p.set(converted);
            }
            Ok(())
        });
    }

    /// Sets training mode (`true`, the default of every layer, as MLX) or evaluation mode.
    fn train(&mut self, mode: bool) {
        self.set_training(mode)
    }

    /// Sets evaluation mode (`train(false)`).
    fn eval(&mut self) {
        self.set_training(false)
    }
}

impl<T: Visit + ?Sized> Module for T {}

fn set_frozen_matching<M: Module>(m: &mut M, names: &[&str], frozen: bool) -> Result<()> {
    let known = m.parameters();
    for pattern in names {
        if !known.keys().any(|k| matches(pattern, k)) {
            return Err(Error::UnknownParameter(pattern.to_string()));
        }
    }
    m.visit_mut("", &mut |name, p| {
        if names.iter().any(|pat| matches(pat, name)) {
            p.set_frozen(frozen);
        }
        Ok(())
    })
}

/// Sets the parameters of `m` named in `names` to `values`, in order (used by the gradient
/// transform to swap tracers in and out).
pub(crate) fn set_named<M: Module + ?Sized>(
    m: &mut M,
    names: &[String],
    values: &[Array],
) -> Result<()> {
    let lookup: HashMap<&str, &Array> = names
        .iter()
        .map(String::as_str)
        .zip(values.iter())
        .collect();
    m.visit_mut("", &mut |name, p| {
        if let Some(v) = lookup.get(name) {
            p.set((*v).clone());
        }
        Ok(())
    })
}
