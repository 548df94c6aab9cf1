//! # mesh-egress
//!
//! One front door: a [`Bot`] built once, an `#[egress_boundary]` handler that answers whole or
//! streams, and one path from handler to person that never shows a cause (the README's example,
//! `examples/quickstart.rs`: two surfaces, a streamed answer, a durable promise kept by a
//! worker after a restart; it needs the `testing` and `sqlite` features):
//!
#![cfg_attr(all(feature = "testing", feature = "sqlite"), doc = "```rust,no_run")]
#![cfg_attr(
    not(all(feature = "testing", feature = "sqlite")),
    doc = "```rust,ignore"
)]
#![doc = include_str!("../examples/quickstart.rs")]
#![doc = "```"]
//!
//! A typed egress boundary for LLM agents that talk to people. The compiler guards the types:
//! an [`EgressError`] or unrendered [`Markdown`] cannot be sent to a user channel. Layer A
//! absorbs transient model failures with bounded retries and route fallback that cost nothing
//! when nothing fails; Layer C decides what a person sees when the turn truly cannot answer (a
//! warm holding line, a handoff, or silence — never the cause). The opt-in quality gate guards
//! the strings: failure text disguised as ordinary model output.
//!
//! Layer A lives in [`model`]: a [`model::Router`] wraps any [`model::ModelConnector`] (the
//! HTTP ones, feature `http`: `model::OpenAiCompatible` for chat completions, and
//! `model::Provider` for Anthropic's Messages API, OpenAI's Responses API, Gemini's
//! `generateContent` and chat completions alike; a route may carry its own) with classification,
//! bounded retries, deadlines and route fallback, and returns a completion or an
//! [`EgressError`]. The `testing` feature holds scripted connectors and a loopback fake
//! provider for your own tests.
//!
//! The boundary is [`channel::Deliver`] (render → commit → send each part in order, for every
//! [`channel::Channel`]) and [`egress_boundary`] / [`boundary::resolve`] on the handler side.
//! Layer C lives in [`degrade`]: [`degrade::DegradationPolicy`] chooses a holding line (with a
//! [`degrade::Commitment`] that the [`Bot`]'s promise keeper keeps), a handoff or silence. The
//! renderers (plain, Slack, Discord, Telegram) and the HTTP chat connectors are in [`channel`];
//! the quality gate (feature `gate`) is `gate::QualityGate`. What happened in a turn is on its
//! [`ledger`].
//!
//! ```
//! use mesh_egress::channel::{Deliver, Recorder};
//! use mesh_egress::{egress_boundary, AgentMessage, Attribution, EgressError, Reply, Turn};
//!
//! #[egress_boundary(interactive)]
//! async fn answer(turn: &Turn, healthy: bool) -> Result<AgentMessage, EgressError> {
//!     if !healthy {
//!         return Err(EgressError::transport("LLM request failed: 503", turn.attribution().clone()));
//!     }
//!     Ok(AgentMessage::new("The build is **green**.", turn.attribution().clone()))
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let turn = Turn::new(Attribution::new("ci-bot", "conv-1", "run-1"));
//! let channel = Recorder::new();
//!
//! let reply: Reply = answer(&turn, true).await;
//! channel.deliver(reply).await?;
//!
//! let mut receipt = channel.deliver(answer(&turn, false).await).await?;
//! let promise = receipt.take_commitment().expect("a holding line promises a follow-up");
//! # let _ = promise;
//!
//! let sent = channel.sent();
//! assert_eq!(sent[0], "The build is green.");
//! assert!(!sent[1].contains("503")); // a holding line, never the cause
//! # Ok(()) }
//! ```
//!
//! Trying to deliver the error itself does not compile:
//!
//! ```compile_fail
//! use mesh_egress::channel::{Deliver, Recorder};
//! use mesh_egress::{Attribution, EgressError};
//! # async fn f() {
//! let err = EgressError::transport("boom", Attribution::new("a", "c", "r"));
//! Recorder::new().deliver(err).await;
//! # }
//! ```
#![forbid(unsafe_code)]
// A type a public signature shows must be nameable; only the sealed helpers are exempt.
#![warn(unnameable_types)]
// Every fallible public function says when it fails.
#![warn(clippy::missing_errors_doc)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod address;
mod answer;
#[cfg(feature = "model")]
mod asked;
pub mod block;
pub mod bot;
pub mod boundary;
pub mod channel;
#[cfg(feature = "model")]
mod code_region;
pub mod degrade;
mod egress;
pub mod engagement;
#[allow(
    dead_code,
    reason = "the store and the worker call it; absent without them"
)]
mod failpoint;
mod failure;
mod future;
#[cfg(feature = "gate")]
#[cfg_attr(docsrs, doc(cfg(feature = "gate")))]
pub mod gate;
mod id;
#[cfg(feature = "ingress")]
#[cfg_attr(docsrs, doc(cfg(feature = "ingress")))]
pub mod ingress;
pub mod ledger;
mod mode;
#[cfg(feature = "model")]
#[cfg_attr(docsrs, doc(cfg(feature = "model")))]
pub mod model;
mod outbound;
mod ownership;
mod render;
mod reply;
pub mod retry;
mod setting;
pub mod silence;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "sqlite", feature = "postgres"))))]
pub mod store;
#[cfg(feature = "markdown")]
#[cfg_attr(docsrs, doc(cfg(feature = "markdown")))]
pub mod stream;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;
mod turn;
pub mod verdict;
#[cfg(all(feature = "web", any(feature = "sqlite", feature = "postgres")))]
#[cfg_attr(
    docsrs,
    doc(cfg(all(feature = "web", any(feature = "sqlite", feature = "postgres"))))
)]
pub mod web;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "sqlite", feature = "postgres"))))]
pub mod worker;

// Every web reply goes through the outbox: the surface has no meaning without a store.
#[cfg(all(feature = "web", not(any(feature = "sqlite", feature = "postgres"))))]
compile_error!("the `web` feature needs a store: enable `sqlite` or `postgres` too");

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

#[doc(hidden)]
#[path = "internals.rs"]
pub mod __internals;

/// The README's examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

pub use address::{destination::Address, surface::Surface};
pub use answer::{AnswerStream, StreamedReply};
pub use bot::Bot;
pub use degrade::Reply;
pub use egress::{
    AgentMessage, Attribution, Egress, EgressError, EgressResultExt, FailureClass, Markdown,
};
pub use future::BoxFuture;
pub use mesh_egress_macros::egress_boundary;
pub use outbound::state;
pub use outbound::{
    CommitBoundary, CommitError, CommitRecord, CommittedPart, DeliveryId, Outbound,
};
pub use ownership::{Cancellation, Ownership, StopReason};
pub use setting::{ConfigProblem, ConfigWarning};
pub use turn::Turn;
