//! The handler's signature: the declared return type, and the `&Turn` parameter the reply
//! belongs to.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::{FnArg, GenericArgument, Ident, ItemFn, Pat, PathArguments, ReturnType, Signature, Type};

/// What the handler's callers receive, read from how the return type is spelled.
pub(super) enum ReplyType {
    /// `Result<AgentMessage, _>` or `Egress`: a `Reply`.
    Reply,
    /// `Result<AnswerStream, _>`: a `StreamedReply`.
    Streamed,
    /// Anything else (an alias): the sealed trait's associated type, so aliases still resolve.
    Projected,
}

/// Reads the reply type from the declared return type's spelling (the sealed trait checks the
/// type itself); an alias gets the trait's projection.
pub(super) fn reply_type(declared: &Type) -> ReplyType {
    let Type::Path(p) = strip(declared) else {
        return ReplyType::Projected;
    };
    let Some(last) = p.path.segments.last() else {
        return ReplyType::Projected;
    };
    if last.ident == "Egress" && last.arguments.is_none() {
        return ReplyType::Reply;
    }
    if last.ident != "Result" {
        return ReplyType::Projected;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return ReplyType::Projected;
    };
    let Some(GenericArgument::Type(Type::Path(ok))) = args.args.first() else {
        return ReplyType::Projected;
    };
    match ok.path.segments.last() {
        Some(ok) if ok.ident == "AgentMessage" => ReplyType::Reply,
        Some(ok) if ok.ident == "AnswerStream" => ReplyType::Streamed,
        _ => ReplyType::Projected,
    }
}

/// The spellings a newcomer reaches for get a message of their own; everything else is checked
/// by the `HandlerOutput` trait at the declared type, so aliases resolve.
pub(super) fn check_return_type(func: &ItemFn) -> syn::Result<()> {
    const SHAPE: &str = "an `#[egress_boundary]` handler returns `Result<AgentMessage, EgressError>` \
(or `Result<AnswerStream, EgressError>` for a streamed answer, or `Egress`)";
    let ty = match &func.sig.output {
        ReturnType::Default => {
            return Err(syn::Error::new(
                func.sig.ident.span(),
                format!(
                    "{SHAPE}, but `{}` returns `()`: add `-> Result<AgentMessage, EgressError>` and \
                     return the answer as `Ok(AgentMessage::new(text, attribution))`",
                    func.sig.ident
                ),
            ));
        }
        ReturnType::Type(_, ty) => ty.as_ref(),
    };
    let plain_text = |what: &str| {
        syn::Error::new_spanned(
            ty,
            format!(
                "{SHAPE}, not `{what}`: plain text has no attribution and cannot cross the boundary; \
                 wrap it as `Ok(AgentMessage::new(text, turn.attribution().clone()))`"
            ),
        )
    };
    match ty {
        Type::Tuple(t) if t.elems.is_empty() => Err(syn::Error::new_spanned(
            ty,
            format!(
                "{SHAPE}, not `()`: return the answer as `Ok(AgentMessage::new(text, attribution))`"
            ),
        )),
        _ if is_text(ty) => Err(plain_text(text_name(ty))),
        Type::ImplTrait(_) => Err(syn::Error::new_spanned(
            ty,
            format!("{SHAPE}; `impl Trait` cannot be checked, so name the type"),
        )),
        Type::Path(p) => {
            let Some(last) = p.path.segments.last() else {
                return Ok(());
            };
            if last.ident != "Result" {
                return Ok(());
            }
            if let PathArguments::AngleBracketed(args) = &last.arguments
                && let Some(GenericArgument::Type(ok)) = args.args.first()
                && is_text(ok)
            {
                return Err(syn::Error::new_spanned(
                    ok,
                    format!(
                        "{SHAPE}: the `Ok` side must be `AgentMessage`, not `{}`; wrap the text as \
                         `AgentMessage::new(text, turn.attribution().clone())`",
                        text_name(ok)
                    ),
                ));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// How to name a text type in a message.
fn text_name(ty: &Type) -> &'static str {
    match ty {
        Type::Reference(_) => "&str",
        Type::Paren(p) => text_name(&p.elem),
        _ => "String",
    }
}

/// `String`, `&str`, `&'a str`, `std::string::String`, `Cow<str>` style text types.
fn is_text(ty: &Type) -> bool {
    match ty {
        Type::Reference(r) => matches!(&*r.elem, Type::Path(p) if p.path.is_ident("str")),
        Type::Path(p) => p
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident == "String" && s.arguments.is_none()),
        Type::Paren(p) => is_text(&p.elem),
        _ => false,
    }
}

/// How generated code reaches the handler's turn.
pub(super) struct TurnParam {
    /// An expression of type `&Turn`, usable after the body ran (`&Turn` is `Copy`).
    pub(super) expr: TokenStream,
    /// For a parameter whose pattern binds no plain name (`_`, `_turn`, `(turn)`): the signature takes
    /// a hidden name instead, and this `let` restores the user's pattern before the body.
    pub(super) rebind: Option<TokenStream>,
}

/// Finds the `&Turn` parameter by its type, whatever its name or position: a shared reference
/// to any path ending in `Turn` (`&Turn`, `&'a mesh_egress::Turn`). The type itself is checked
/// by the compiler where the turn is handed to `resolve_in`.
///
/// A second `&Turn` is an error: the reply is recorded on one turn's ledger and tied to one
/// turn's ownership, and silently picking one could put both on the wrong conversation. The
/// best-effort expansion still uses the first, so the rest of the crate type-checks.
pub(super) fn find_turn(sig: &mut Signature) -> (Option<TurnParam>, Option<syn::Error>) {
    let mut turn: Option<(TurnParam, String)> = None;
    let mut error: Option<syn::Error> = None;
    for input in sig.inputs.iter_mut() {
        let FnArg::Typed(param) = input else {
            continue;
        };
        if !is_turn_ref(&param.ty) {
            continue;
        }
        let name = param.pat.to_token_stream().to_string();
        if let Some((_, first)) = &turn {
            let err = syn::Error::new_spanned(
                &*param,
                format!(
                    "`#[egress_boundary]` ties the reply to one turn, but `{first}` and `{name}` \
                     both take a `&Turn`: keep one `&Turn` parameter, the turn that owns the \
                     reply, and take what you need from the other as a parameter of its own \
                     (such as its `Attribution`)"
                ),
            );
            match &mut error {
                Some(errors) => errors.combine(err),
                None => error = Some(err),
            }
            continue;
        }
        let found = match &*param.pat {
            // `_turn` says "unused": generated code does not use it either (pedantic clippy
            // would flag the use), it takes the hidden name below.
            Pat::Ident(binding)
                if binding.by_ref.is_none()
                    && binding.subpat.is_none()
                    && !binding.ident.to_string().starts_with('_') =>
            {
                let ident = &binding.ident;
                TurnParam {
                    expr: quote! { #ident },
                    rebind: None,
                }
            }
            pattern => {
                // Mixed-site: only generated code sees this name; rustdoc shows `turn`.
                let hidden = Ident::new("turn", Span::mixed_site());
                let ty = &param.ty;
                let rebind = quote! { let #pattern: #ty = #hidden; };
                *param.pat = syn::parse_quote! { #hidden };
                TurnParam {
                    expr: quote! { #hidden },
                    rebind: Some(rebind),
                }
            }
        };
        turn = Some((found, name));
    }
    (turn.map(|(found, _)| found), error)
}

/// `&Turn`, `&'a Turn`, `&path::to::Turn`, `&(Turn)`; not `&mut Turn`, not `Turn` by value.
fn is_turn_ref(ty: &Type) -> bool {
    let Type::Reference(reference) = strip(ty) else {
        return false;
    };
    if reference.mutability.is_some() {
        return false;
    }
    match strip(&reference.elem) {
        Type::Path(path) => {
            path.qself.is_none()
                && path
                    .path
                    .segments
                    .last()
                    .is_some_and(|last| last.ident == "Turn" && last.arguments.is_none())
        }
        _ => false,
    }
}

/// Sees through parentheses and the invisible groups `macro_rules!` wraps `$t:ty` in.
fn strip(ty: &Type) -> &Type {
    match ty {
        Type::Paren(inner) => strip(&inner.elem),
        Type::Group(inner) => strip(&inner.elem),
        other => other,
    }
}
