//! The expansion, read as text: which boundary function is called, through which path, and
//! which errors are reported together.

use super::expand;
use proc_macro2::TokenStream;
use quote::quote;

fn expanded(args: TokenStream, item: TokenStream) -> String {
    expand(args, item).to_string().split_whitespace().collect()
}

fn errors(out: &str) -> usize {
    out.matches("compile_error!").count()
}

#[test]
fn a_turn_parameter_anywhere_selects_resolve_in() {
    let out = expanded(
        quote!(interactive),
        quote!(
            async fn a(&self, x: u8, ctx: &'a mesh_egress::Turn) -> Result<AgentMessage, E> {
                todo()
            }
        ),
    );
    assert!(
        out.contains("::mesh_egress::__private::resolve_answer_in::<Result<AgentMessage,E>>(__mesh_egress_output,ctx,"),
        "{out}"
    );
    // No `policy = …`: the turn's policy for the handler's mode.
    assert!(
        out.contains("::mesh_egress::__private::Turn::policy_for(ctx,::mesh_egress::__private::Mode::Interactive)"),
        "{out}"
    );
    assert_eq!(errors(&out), 0, "{out}");
}

#[test]
fn the_callers_receive_a_reply_a_streamed_reply_or_what_an_alias_resolves_to() {
    for (ret, expected) in [
        (
            quote!(Result<AgentMessage, EgressError>),
            "->::mesh_egress::Reply",
        ),
        (quote!(mesh_egress::Egress), "->::mesh_egress::Reply"),
        (
            quote!(Result<mesh_egress::AnswerStream, EgressError>),
            "->::mesh_egress::StreamedReply",
        ),
        (
            quote!(Answer),
            "-><Answeras::mesh_egress::__private::HandlerOutput>::Reply",
        ),
    ] {
        let out = expanded(
            quote!(interactive),
            quote!(
                async fn a(turn: &Turn) -> #ret {
                    todo()
                }
            ),
        );
        assert!(out.contains(expected), "{expected}: {out}");
    }
}

#[test]
fn a_handler_without_a_shared_turn_reference_uses_plain_resolve() {
    for item in [
        quote!(
            fn a(x: u8) -> R {
                todo()
            }
        ),
        quote!(
            fn a(turn: &mut Turn) -> R {
                todo()
            }
        ),
        quote!(
            fn a(turn: Turn) -> R {
                todo()
            }
        ),
        quote!(
            fn a(turn: &TurnOf<X>) -> R {
                todo()
            }
        ),
    ] {
        let out = expanded(quote!(proactive), item);
        assert!(
            out.contains("::mesh_egress::__private::resolve::<R>(__mesh_egress_output,"),
            "{out}"
        );
        assert!(out.contains("__private::default_policy("), "{out}");
        assert!(!out.contains("resolve_in"), "{out}");
    }
}

#[test]
fn an_unnamed_turn_is_reached_through_a_hidden_name_and_rebound() {
    let out = expanded(
        quote!(interactive),
        quote!(
            fn a(_: &Turn) -> R {
                todo()
            }
        ),
    );
    assert!(out.contains("fna(turn:&Turn)"), "{out}");
    assert!(out.contains("let_:&Turn=turn;"), "{out}");
    assert!(
        out.contains("resolve_in::<R>(__mesh_egress_output,turn,"),
        "{out}"
    );
}

#[test]
fn two_turns_are_one_error_and_the_first_is_used() {
    let out = expanded(
        quote!(interactive),
        quote!(
            fn a(first: &Turn, second: &Turn) -> R {
                todo()
            }
        ),
    );
    assert_eq!(errors(&out), 1, "{out}");
    assert!(out.contains("bothtakea`&Turn`"), "{out}");
    assert!(
        out.contains("resolve_in::<R>(__mesh_egress_output,first,"),
        "{out}"
    );
}

#[test]
fn crate_path_replaces_every_absolute_runtime_path() {
    for krate in [quote!(rt::runtime), quote!("rt::runtime")] {
        let out = expanded(
            quote!(interactive, policy = p, crate = #krate),
            quote!(
                async fn a(turn: &Turn) -> Result<AgentMessage, EgressError> {
                    todo()
                }
            ),
        );
        assert!(!out.contains("mesh_egress::"), "{out}");
        assert!(out.contains("->rt::runtime::Reply"), "{out}");
        assert!(
            out.contains("rt::runtime::__private::resolve_answer_in::<"),
            "{out}"
        );
        assert!(out.contains("rt::runtime::__private::policy("), "{out}");
        assert_eq!(errors(&out), 0, "{out}");
    }
}

#[test]
fn argument_and_return_type_errors_are_reported_together() {
    let out = expanded(
        quote!(interactive, retries = 3, crate = "not a path"),
        quote!(
            fn a(turn: &Turn) -> String {
                todo()
            }
        ),
    );
    assert_eq!(errors(&out), 3, "{out}");
    // The return type is wrong, so the function is kept as written.
    assert!(out.contains("fna(turn:&Turn)->String"), "{out}");
}

#[test]
fn a_wrong_argument_still_expands_with_what_was_understood() {
    let out = expanded(
        quote!(proactive, crate = 42, policy = p),
        quote!(
            fn a() -> R {
                todo()
            }
        ),
    );
    assert_eq!(errors(&out), 1, "{out}");
    assert!(out.contains("Mode::Proactive"), "{out}");
    assert!(
        out.contains("::mesh_egress::__private::policy(&(p))"),
        "{out}"
    );
}

#[test]
fn misplaced_repeated_or_missing_modes_are_errors() {
    for (args, message) in [
        (quote!(), "missingmode"),
        (quote!(policy = p), "missingmode"),
        (quote!(policy = p, interactive), "themodecomesfirst"),
        (quote!(interactive, proactive), "themodeisgiventwice"),
        (quote!(background), "unknownmode`background`"),
        (quote!(interactive, policy), "`policy`needsavalue"),
        (
            quote!(interactive, policy = a, policy = b),
            "`policy`isgiventwice",
        ),
    ] {
        let out = expanded(
            args,
            quote!(
                fn a() -> R {
                    todo()
                }
            ),
        );
        assert_eq!(errors(&out), 1, "{out}");
        assert!(out.contains(message), "{message}: {out}");
    }
}
