//! `#[derive(Module)]` for nuvec-nn: a struct whose fields are parameters
//! (`nuvec_nn::Param`), layers, or containers of them (`Option`, `Vec`, `Box`, maps) becomes a
//! module whose parameters are named after its fields, joined with dots
//! (`layers.0.attention.wq.weight`).
//!
//! Field attributes:
//! - `#[module(skip)]`: the field is neither a parameter nor a layer (configuration of a type
//!   that does not implement `Visit`). Numbers, booleans, strings and plain `Array`s (constant
//!   buffers) need no attribute: their `Visit` does nothing.
//! - `#[module(rename = "name")]`: the field's parameters are named `name` instead of the
//!   field's name.
//!
//! A generic struct's type parameters are required to implement `Visit`.
//!
//! See `nuvec_nn::Module` for the methods every module gets.

#![warn(missing_docs)]

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::{Data, DeriveInput, Fields, LitStr, parse_macro_input};

/// Implements `nuvec_nn::Visit` (and so `nuvec_nn::Module`) for a struct, visiting every field
/// under its name (see the crate documentation for the attributes).
#[proc_macro_derive(Module, attributes(module))]
pub fn derive_module(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(tokens) => tokens.into(),
        Err(err) => err.to_compile_error().into(),
    }
}

/// What the attributes of one field say.
struct FieldAttrs {
    skip: bool,
    rename: Option<String>,
}

fn field_attrs(attrs: &[syn::Attribute]) -> syn::Result<FieldAttrs> {
    let mut out = FieldAttrs {
        skip: false,
        rename: None,
    };
    for attr in attrs.iter().filter(|a| a.path().is_ident("module")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("skip") {
                out.skip = true;
                Ok(())
            } else if meta.path.is_ident("rename") {
                let name: LitStr = meta.value()?.parse()?;
                out.rename = Some(name.value());
                Ok(())
            } else {
                Err(meta.error("expected `skip` or `rename = \"...\"`"))
            }
        })?;
    }
    Ok(out)
}

fn expand(input: &DeriveInput) -> syn::Result<TokenStream2> {
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "#[derive(Module)] supports structs only",
        ));
    };
    // (accessor, parameter name) of every visited field.
    let mut fields: Vec<(TokenStream2, String)> = Vec::new();
    match &data.fields {
        Fields::Named(named) => {
            for f in &named.named {
                let attrs = field_attrs(&f.attrs)?;
                if attrs.skip {
                    continue;
                }
                let Some(ident) = &f.ident else { continue };
                let name = attrs.rename.unwrap_or_else(|| {
                    let s = ident.to_string();
                    s.strip_prefix("r#").map(str::to_string).unwrap_or(s)
                });
                fields.push((quote!(#ident), name));
            }
        }
        Fields::Unnamed(unnamed) => {
            for (i, f) in unnamed.unnamed.iter().enumerate() {
                let attrs = field_attrs(&f.attrs)?;
                if attrs.skip {
                    continue;
                }
                let index = syn::Index::from(i);
                let name = attrs.rename.unwrap_or_else(|| i.to_string());
                fields.push((quote!(#index), name));
            }
        }
        Fields::Unit => {}
    }
    let ident = &input.ident;
    // Every type parameter must itself be visitable.
    let mut generics = input.generics.clone();
    let params: Vec<syn::Ident> = generics.type_params().map(|p| p.ident.clone()).collect();
    let where_clause = generics.make_where_clause();
    for p in params {
        where_clause
            .predicates
            .push(syn::parse_quote!(#p: ::nuvec_nn::Visit));
    }
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    let visits = fields.iter().map(|(acc, name)| {
        quote! {
            ::nuvec_nn::Visit::visit(&self.#acc, &::nuvec_nn::join_name(prefix, #name), f);
        }
    });
    let visits_mut = fields.iter().map(|(acc, name)| {
        quote! {
            ::nuvec_nn::Visit::visit_mut(&mut self.#acc, &::nuvec_nn::join_name(prefix, #name), f)?;
        }
    });
    let trains = fields.iter().map(|(acc, _)| {
        quote! {
            ::nuvec_nn::Visit::set_training(&mut self.#acc, training);
        }
    });
    Ok(quote! {
        impl #impl_generics ::nuvec_nn::Visit for #ident #ty_generics #where_clause {
            #[allow(unused_variables)]
            fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &::nuvec_nn::Param)) {
                #(#visits)*
            }
            #[allow(unused_variables)]
            fn visit_mut(
                &mut self,
                prefix: &str,
                f: &mut dyn FnMut(&str, &mut ::nuvec_nn::Param) -> ::nuvec_nn::Result<()>,
            ) -> ::nuvec_nn::Result<()> {
                #(#visits_mut)*
                Ok(())
            }
            #[allow(unused_variables)]
            fn set_training(&mut self, training: bool) {
                #(#trains)*
            }
        }
    })
}
