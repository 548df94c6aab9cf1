//! Procedural macros for [mesh-egress](https://docs.rs/mesh-egress). Depend on `mesh-egress`
//! and use `mesh_egress::egress_boundary`; this crate's paths are not public API.
#![forbid(unsafe_code)]

mod boundary;

use proc_macro::TokenStream;

/// Puts a handler behind the egress boundary.
///
/// ```ignore
/// #[egress_boundary(interactive)]            // or (proactive); optional `policy = <expr>`
/// async fn answer(turn: &Turn, router: &Router) -> Result<AgentMessage, EgressError> { .. }
/// ```
///
/// The body is kept as written; what leaves the function changes: callers receive a
/// `mesh_egress::Reply`. An `Err` is recorded once (the error-tracking event) and replaced by
/// what the mode's `DegradationPolicy` says the person sees. `policy = <expr>` is evaluated
/// before the body runs.
///
/// The handler must return `Result<AgentMessage, EgressError>` or `Egress` (aliases resolve);
/// anything else is a compile error in every build profile.
#[proc_macro_attribute]
pub fn egress_boundary(args: TokenStream, item: TokenStream) -> TokenStream {
    boundary::expand(args.into(), item.into()).into()
}
