//! Test doubles for Layer A (feature `testing`): a scripted in-memory [`ScriptedConnector`] for
//! paused-time tests, and a loopback [`FakeProvider`] that speaks the OpenAI chat-completions
//! wire format with injected faults, for HTTP tests and demos.
//!
//! Both speak one scripting vocabulary: a [`Step`] scripts the in-memory connector and converts
//! into the [`FakeResponse`] that plays the same outcome over HTTP, so a test can move from
//! paused time to real sockets without rewriting its script.
//!
//! They are public so users can test their own handlers the way this crate tests itself.

mod chat_api;
mod chat_state;
mod chat_stream;
mod fake_client;
mod fake_provider;
mod loopback;
mod scripted;
mod slack_history;
mod step_http;

pub use chat_api::FakeApi;
pub use chat_state::{ChatStep, FakeStream, ReceivedCall, ReceivedDraft, ReceivedMessage};
pub use fake_provider::{FakeProvider, FakeResponse, ReceivedRequest};
pub use scripted::{Call, ScriptedConnector, SseLineEnding, Step};

pub(crate) use loopback::serve_http1;
