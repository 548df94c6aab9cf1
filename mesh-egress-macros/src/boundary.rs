//! `#[egress_boundary]`: parse the arguments, check the signature, rewrite what leaves the fn.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::parse::{Parse, ParseStream, Parser};
use syn::spanned::Spanned;
use syn::{Expr, GenericArgument, Ident, ItemFn, PathArguments, ReturnType, Token, Type};

/// The two modes of the specification's Layer C.
#[derive(Clone, Copy)]
enum Mode {
    Interactive,
    Proactive,
}

struct Args {
    mode: Mode,
    policy: Option<Expr>,
}

const USAGE: &str = "write `#[egress_boundary(interactive)]` or `#[egress_boundary(proactive)]`, \
optionally followed by `, policy = <expr>`";

impl Parse for Args {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if input.is_empty() {
            return Err(syn::Error::new(
                Span::call_site(),
                format!("missing mode: {USAGE}"),
            ));
        }
        let mode_ident: Ident = input
            .parse()
            .map_err(|e| syn::Error::new(e.span(), format!("expected a mode: {USAGE}")))?;
        let mode = match mode_ident.to_string().as_str() {
            "interactive" => Mode::Interactive,
            "proactive" => Mode::Proactive,
            "policy" => {
                return Err(syn::Error::new(
                    mode_ident.span(),
                    format!("the mode comes first: {USAGE}"),
                ));
            }
            other => {
                return Err(syn::Error::new(
                    mode_ident.span(),
                    format!(
                        "unknown mode `{other}`: expected `interactive` (a person is waiting) or \
                         `proactive` (nobody asked)"
                    ),
                ));
            }
        };
        let mut policy = None;
        while !input.is_empty() {
            input.parse::<Token![,]>()?;
            if input.is_empty() {
                break;
            }
            let key: Ident = input.parse()?;
            if key != "policy" {
                return Err(syn::Error::new(
                    key.span(),
                    format!("unknown argument `{key}`: the only option is `policy = <expr>`"),
                ));
            }
            if policy.is_some() {
                return Err(syn::Error::new(key.span(), "`policy` is given twice"));
            }
            input.parse::<Token![=]>()?;
            policy = Some(input.parse::<Expr>()?);
        }
        Ok(Self { mode, policy })
    }
}

/// Entry point: on any error, the error plus a best-effort expansion, so one mistake gives one
/// message and the rest of the crate still type-checks.
pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let func = match syn::parse2::<ItemFn>(item.clone()) {
        Ok(func) => func,
        Err(_) => return not_a_function(item),
    };
    let parsed = Parser::parse2(Args::parse, args);
    if let Err(err) = check_return_type(&func) {
        // The declared return type is wrong: keep the function as written.
        let err = err.to_compile_error();
        return quote! { #err #func };
    }
    match parsed {
        Ok(args) => rewrite(&func, &args),
        Err(err) => {
            let fallback = Args {
                mode: Mode::Interactive,
                policy: None,
            };
            let err = err.to_compile_error();
            let rewritten = rewrite(&func, &fallback);
            quote! { #err #rewritten }
        }
    }
}

fn not_a_function(item: TokenStream) -> TokenStream {
    let span = match syn::parse2::<syn::Item>(item.clone()) {
        Ok(syn::Item::Struct(s)) => s.struct_token.span,
        Ok(syn::Item::Enum(e)) => e.enum_token.span,
        Ok(syn::Item::Impl(i)) => i.impl_token.span,
        Ok(syn::Item::Trait(t)) => t.trait_token.span,
        Ok(other) => other.span(),
        Err(_) => Span::call_site(),
    };
    let err = syn::Error::new(
        span,
        "`#[egress_boundary]` goes on a handler function (a free fn or a method with a body), \
         not on this item",
    )
    .to_compile_error();
    quote! { #err #item }
}

/// The spellings a newcomer reaches for get a message of their own; everything else is checked
/// by the `HandlerOutput` trait at the declared type, so aliases resolve.
fn check_return_type(func: &ItemFn) -> syn::Result<()> {
    const SHAPE: &str = "an `#[egress_boundary]` handler returns `Result<AgentMessage, EgressError>` \
(or `Egress`)";
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

fn rewrite(func: &ItemFn, args: &Args) -> TokenStream {
    let ReturnType::Type(_, declared) = &func.sig.output else {
        unreachable!("checked by check_return_type")
    };
    let declared = declared.as_ref();
    let ret_span = declared.span();
    let attrs = &func.attrs;
    let vis = &func.vis;
    let block = &func.block;
    let mut sig = func.sig.clone();
    sig.output = syn::parse_quote_spanned! {ret_span=> -> ::mesh_egress::Reply };

    let policy_var = Ident::new("__mesh_egress_policy", Span::mixed_site());
    let output_var = Ident::new("__mesh_egress_output", Span::mixed_site());

    // An explicit policy is evaluated (and cheaply cloned) before the body; the default one is
    // a `&'static` borrow.
    let (policy, policy_ref) = match &args.policy {
        Some(expr) => (
            quote_spanned! {expr.span()=> ::mesh_egress::__private::policy(&(#expr)) },
            quote! { &#policy_var },
        ),
        None => (
            quote! { ::mesh_egress::__private::default_policy() },
            quote! { #policy_var },
        ),
    };
    let mode = match args.mode {
        Mode::Interactive => quote! { ::mesh_egress::__private::Mode::Interactive },
        Mode::Proactive => quote! { ::mesh_egress::__private::Mode::Proactive },
    };

    let run_body = if sig.asyncness.is_some() {
        // A "fake return edge" fixes the async block's output type at the declared return type
        // before the body is checked, so `?` and `return` inside it type-check as written.
        let fake = Ident::new("__mesh_egress_fake_return", Span::mixed_site());
        quote_spanned! {ret_span=>
            async move {
                #[allow(
                    unknown_lints,
                    unreachable_code,
                    clippy::diverging_sub_expression,
                    clippy::empty_loop,
                    clippy::needless_return,
                    clippy::unreachable
                )]
                if false {
                    let #fake: #declared = loop {};
                    return #fake;
                }
                #block
            }
            .await
        }
    } else {
        quote_spanned! {ret_span=>
            (move || -> #declared #block)()
        }
    };

    let convert = quote_spanned! {ret_span=>
        ::mesh_egress::__private::into_result::<#declared>(#output_var)
    };

    quote! {
        #(#attrs)*
        #vis #sig {
            // Evaluated before the body runs, so `self.policy` is read while `self` is intact.
            let #policy_var = #policy;
            #[allow(clippy::redundant_closure_call)]
            let #output_var = #run_body;
            ::mesh_egress::__private::resolve(#mode, #policy_ref, #convert)
        }
    }
}
