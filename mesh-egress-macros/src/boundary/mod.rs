//! `#[egress_boundary]`: parse the arguments, check the signature, rewrite what leaves the fn.

mod args;
mod signature;
#[cfg(test)]
mod tests;

use args::{Args, Mode};
use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use signature::TurnParam;
use syn::spanned::Spanned;
use syn::{Ident, ItemFn, ReturnType, Signature};

/// Entry point. Every error found (in the attribute's arguments, the parameters and the return
/// type) is reported in one compile, each next to a best-effort expansion, so one mistake gives
/// one message and the rest of the crate still type-checks.
pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let func = match syn::parse2::<ItemFn>(item.clone()) {
        Ok(func) => func,
        Err(_) => return not_a_function(item),
    };
    let (args, args_error) = args::parse(args);
    let mut sig = func.sig.clone();
    let (turn, turn_error) = signature::find_turn(&mut sig);
    let return_error = signature::check_return_type(&func).err();
    // The declared return type is wrong: keep the function as written, its body still checked.
    let expansion = match &return_error {
        Some(_) => quote! { #func },
        None => rewrite(&func, sig, &args, turn.as_ref()),
    };
    let errors = [args_error, turn_error, return_error]
        .into_iter()
        .flatten()
        .reduce(|mut all, next| {
            all.combine(next);
            all
        })
        .map(|errors| errors.to_compile_error());
    quote! { #errors #expansion }
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

/// The handler as written, with what leaves it changed: the body runs unchanged (its own spans,
/// so its errors point into it), then its output goes through the boundary: `resolve_in` (with
/// the `&Turn`) or `resolve` (without one), into a `Reply` (a whole answer) or a
/// `StreamedReply` (a stream).
fn rewrite(
    func: &ItemFn,
    mut sig: Signature,
    args: &Args,
    turn: Option<&TurnParam>,
) -> TokenStream {
    let ReturnType::Type(_, declared) = &func.sig.output else {
        unreachable!("checked by check_return_type")
    };
    let declared = declared.as_ref();
    let ret_span = declared.span();
    let body_span = func.block.brace_token.span.join();
    let attrs = &func.attrs;
    let vis = &func.vis;
    let block = &func.block;
    let runtime = args.runtime();
    let reply_type = signature::reply_type(declared);
    sig.output = match reply_type {
        signature::ReplyType::Reply => syn::parse_quote_spanned! {ret_span=> -> #runtime::Reply },
        signature::ReplyType::Streamed => {
            syn::parse_quote_spanned! {ret_span=> -> #runtime::StreamedReply }
        }
        // An alias: what its callers receive is whatever the sealed trait says it resolves to.
        signature::ReplyType::Projected => syn::parse_quote_spanned! {ret_span=>
            -> <#declared as #runtime::__private::HandlerOutput>::Reply
        },
    };

    let policy_var = Ident::new("__mesh_egress_policy", Span::mixed_site());
    let output_var = Ident::new("__mesh_egress_output", Span::mixed_site());

    let mode = match args.mode {
        Mode::Interactive => quote! { #runtime::__private::Mode::Interactive },
        Mode::Proactive => quote! { #runtime::__private::Mode::Proactive },
    };
    // An explicit policy is evaluated (and cheaply cloned) before the body. Without one, a
    // handler with a turn resolves with the turn's policy for its mode (a front door's
    // policies); one without a turn with the process-wide default, a `&'static` borrow.
    let (policy, policy_ref) = match (&args.policy, turn) {
        (Some(expr), _) => (
            Some(quote_spanned! {expr.span()=> #runtime::__private::policy(&(#expr)) }),
            quote! { &#policy_var },
        ),
        (None, Some(TurnParam { expr, .. })) => (
            None,
            quote! { #runtime::__private::Turn::policy_for(#expr, #mode) },
        ),
        (None, None) => (
            Some(quote! { #runtime::__private::default_policy(#mode) }),
            quote! { #policy_var },
        ),
    };
    let policy = policy.map(|policy| {
        quote! {
            // Evaluated before the body runs, so `self.policy` is read while `self` is intact.
            let #policy_var = #policy;
        }
    });

    let run_body = if sig.asyncness.is_some() {
        // The "fake return edge" (as tracing-attributes and tokio-macros do) fixes the async
        // block's output type at the declared return type before the body is checked, so `?`
        // and `return` inside it type-check as written; only it carries the return type's span.
        // Located at the return type too, so rustc's "return type inferred to be ... here"
        // points at the signature, not at the attribute.
        let fake = Ident::new(
            "__mesh_egress_fake_return",
            Span::mixed_site().located_at(ret_span),
        );
        let fake_return = quote_spanned! {ret_span=>
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
        };
        quote_spanned! {body_span=>
            async move {
                #fake_return
                #block
            }
            .await
        }
    } else {
        quote_spanned! {body_span=>
            (move || -> #declared #block)()
        }
    };

    // The sealed `HandlerOutput` check, spanned at the declared type so aliases resolve and the
    // error points at the signature.
    // One function per shape, each with a fixed return type, so a declared type that is not a
    // handler output is one error at its span (an alias takes the generic one).
    let (plain, in_turn) = match reply_type {
        signature::ReplyType::Reply => ("resolve_answer", "resolve_answer_in"),
        signature::ReplyType::Streamed => ("resolve_stream", "resolve_stream_in"),
        signature::ReplyType::Projected => ("resolve", "resolve_in"),
    };
    let (rebind, resolve) = match turn {
        Some(TurnParam { expr, rebind }) => {
            let function = Ident::new(in_turn, ret_span);
            (
                // The mode is declared on the turn before the body runs, so whoever holds the
                // turn (a deadline that fires before the handler returns) answers in it.
                Some(quote! {
                    #rebind
                    #runtime::__private::declare_mode(#expr, #mode);
                }),
                quote_spanned! {ret_span=>
                    #runtime::__private::#function::<#declared>(#output_var, #expr, #mode, #policy_ref)
                },
            )
        }
        None => {
            let function = Ident::new(plain, ret_span);
            (
                None,
                quote_spanned! {ret_span=>
                    #runtime::__private::#function::<#declared>(#output_var, #mode, #policy_ref)
                },
            )
        }
    };

    quote! {
        #(#attrs)*
        #vis #sig {
            #rebind
            #policy
            #[allow(clippy::redundant_closure_call)]
            let #output_var = #run_body;
            #resolve
        }
    }
}
