//! Procedural macros for [mesh-egress](https://docs.rs/mesh-egress). Depend on `mesh-egress`
//! and use `mesh_egress::egress_boundary`; this crate's paths are not public API.
#![forbid(unsafe_code)]

mod boundary;

use proc_macro::TokenStream;

/// Puts a handler behind the egress boundary.
///
/// ```ignore
/// #[egress_boundary(interactive)]            // or (proactive); optional `policy = <expr>`, `crate = <path>`
/// async fn answer(turn: &Turn, router: &Router) -> Result<AgentMessage, EgressError> { .. }
///
/// #[egress_boundary(interactive)]            // a streamed answer
/// async fn stream(turn: &Turn, model: &Arc<Router>) -> Result<AnswerStream, EgressError> { .. }
/// ```
///
/// The body is kept as written; what leaves the function changes: callers receive a
/// `mesh_egress::Reply` (for `Result<AgentMessage, EgressError>` or `Egress`), or a
/// `mesh_egress::StreamedReply` (for `Result<AnswerStream, EgressError>`: the stream, which
/// only the front door delivers, block by block). An `Err` is recorded once (the
/// error-tracking event) and replaced by what the mode's `DegradationPolicy` says the person
/// sees; every message that leaves carries the declared mode. `policy = <expr>` (a policy, a
/// reference to one or an `Arc`) is evaluated before the body runs, so `self.policy` works.
/// Without it, a handler with a turn resolves with the turn's policy for its mode (a bot's
/// `Policies`, see `Turn::policy_for`), and one without a turn with one process-wide default
/// policy, shared so holding lines rotate across calls.
///
/// # The turn
///
/// A parameter whose type is a shared reference to a path ending in `Turn` (`&Turn`,
/// `&'a Turn`, `&mesh_egress::Turn`) is the handler's turn, whatever its name or pattern
/// (`turn`, `ctx`, `_turn`, `_`) and wherever it stands (after `&self` too). With it, the
/// boundary is the turn-aware one (the runtime's crate-private `resolve_in`): Layer C's rows
/// (the boundary error, the degradation, the commitment) go on the **turn's** ledger, and
/// every message of the reply is tied to the turn's ownership, so no channel sends it once the
/// conversation is no longer owned. Without one (`&mut Turn` and `Turn` by value do not count),
/// the boundary is `boundary::resolve`, which records on the policy's ledger if it has one. Two
/// `&Turn` parameters are an error: the reply belongs to one turn, and the macro will not guess
/// which; keep the one that owns the reply and pass what you need from the other (its
/// `Attribution`) as a parameter of its own.
///
/// # `crate = <path>`
///
/// Generated code names the runtime as `::mesh_egress`. When it is reachable only through a
/// re-export (a facade crate, a renamed dependency), give that path, as serde's
/// `#[serde(crate = "...")]` and `#[tokio::main(crate = "...")]` allow. Both a path and, as
/// tokio and serde spell it, a string holding one are accepted:
///
/// ```ignore
/// #[egress_boundary(interactive, crate = my_facade::mesh_egress)]
/// #[egress_boundary(interactive, crate = "my_facade::mesh_egress")]
/// ```
///
/// # Errors
///
/// The handler must return `Result<AgentMessage, EgressError>`, `Result<AnswerStream,
/// EgressError>` or `Egress` (aliases resolve);
/// anything else is a compile error in every build profile. Mistakes in the arguments, the
/// parameters and the return type are all reported in one compile; errors in the body point
/// into the body, with rustc's "return type" note at the declared return type.
#[proc_macro_attribute]
pub fn egress_boundary(args: TokenStream, item: TokenStream) -> TokenStream {
    boundary::expand(args.into(), item.into()).into()
}
