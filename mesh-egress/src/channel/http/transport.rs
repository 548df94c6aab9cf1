//! The HTTP side of a connector: its client, policy and token, the bot-wide rate-limit pause,
//! and how a surface's answer is read. The per-part retry loop (`retry.rs`) and the one
//! exchange every call makes (`exchange.rs`) are both written against it.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use tokio::time::Instant;

use super::answer::CallEnd;
use super::policy::{MAX_RETRY_AFTER, SendPolicy};
use super::{ChannelErrorKind, Surface, Token};

/// Reads a surface's answer: status, headers and body bytes.
pub(crate) type Classify = fn(StatusCode, &HeaderMap, &[u8], &Token) -> CallEnd;

/// The HTTP side of a connector: client, policy, token and the bot-wide rate-limit pause.
///
/// A route's (one conversation's) own pause is not here: it is the conversation's
/// [`RateBudget`], which the streaming sessions spend too, so a 429 on a plain send holds back
/// a stream on the same conversation and the other way round.
#[derive(Clone)]
pub(crate) struct Transport {
    pub(crate) surface: Surface,
    pub(crate) client: reqwest::Client,
    pub(crate) policy: SendPolicy,
    pub(crate) token: Token,
    /// Until when the whole bot is rate limited (Discord's global limit); clones and siblings
    /// share it.
    bot_paused: Pause,
}

/// An instant before which no request should be sent, shared by whoever holds a clone.
#[derive(Clone, Default)]
struct Pause(Arc<Mutex<Option<Instant>>>);

impl Pause {
    fn left(&self) -> Duration {
        let until = *self.0.lock().unwrap_or_else(PoisonError::into_inner);
        until.map_or(Duration::ZERO, |until| {
            until.saturating_duration_since(Instant::now())
        })
    }

    fn extend(&self, wait: Duration) {
        // A surface may ask for any wait; the clamp cannot overflow an instant.
        let until = Instant::now() + wait.min(MAX_RETRY_AFTER);
        let mut paused = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if paused.is_none_or(|p| p < until) {
            *paused = Some(until);
        }
    }
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transport")
            .field("surface", &self.surface)
            .field("policy", &self.policy)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

impl Transport {
    pub(crate) fn new(surface: Surface, token: Token) -> Self {
        Self {
            surface,
            client: reqwest::Client::new(),
            policy: SendPolicy::default(),
            token,
            bot_paused: Pause::default(),
        }
    }

    /// How long from now until the bot-wide pause (Discord's global limit) ends.
    pub(crate) fn bot_pause_left(&self) -> Duration {
        self.bot_paused.left()
    }

    /// Pauses the whole bot for `wait` (Discord's `global: true`).
    pub(crate) fn pause_bot_for(&self, wait: Duration) {
        self.bot_paused.extend(wait);
    }

    /// A transport failure's description, without the request URL (which may hold the token).
    pub(crate) fn transport_failure(&self, error: reqwest::Error) -> ChannelErrorKind {
        let what = if error.is_builder() {
            "the request could not be built"
        } else if error.is_timeout() {
            "timed out"
        } else if error.is_connect() {
            "could not connect"
        } else {
            "connection failed"
        };
        let error = error.without_url();
        let mut detail = what.to_owned();
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            detail.push_str(": ");
            detail.push_str(&cause.to_string());
            source = cause.source();
        }
        ChannelErrorKind::Transport {
            detail: self.token.scrub(&detail),
        }
    }
}
