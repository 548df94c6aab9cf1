//! [`PartLookup`]: what a channel can say about a part whose send had an unknown outcome.

use super::PartReceipt;

/// What a channel found when asked whether a part already reached its surface
/// ([`Channel::look_up`](super::Channel::look_up)): the question a sender asks before sending
/// again a part whose earlier try timed out, was cut off, or was interrupted by a crash.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PartLookup {
    /// The surface holds the part: its receipt carries the surface's id for it.
    Found(PartReceipt),
    /// The surface answered, and the part is not there: sending it again cannot duplicate it.
    NotFound,
    /// The channel cannot tell: it has no lookup, lacks the permission (Slack's
    /// `missing_scope`), the lookup failed, or the bounded lookup did not reach far enough.
    Unknown {
        /// Why, for logs and the outbox row (never a token or a request body).
        reason: String,
    },
}

impl PartLookup {
    /// [`Unknown`](Self::Unknown) with `reason`.
    pub fn unknown(reason: impl Into<String>) -> Self {
        Self::Unknown {
            reason: reason.into(),
        }
    }
}
