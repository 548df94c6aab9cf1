//! [`SendPolicy`]: how hard a connector tries to send one part.

use std::time::Duration;

#[cfg(doc)]
use crate::channel::SendError;
use crate::retry::Backoff;

/// How hard a connector tries to send one part before handing it back.
///
/// For each part, at most [`max_tries`](Self::max_tries) requests are made, and the waits
/// between them add up to at most [`max_wait`](Self::max_wait). A wait is the surface's own
/// rate-limit answer when it gives one (Discord's `retry_after` body field, Telegram's
/// `parameters.retry_after`, otherwise the `retry-after-ms`, `x-ms-retry-after-ms` or
/// `Retry-After` header, in seconds or as an HTTP-date), otherwise exponential backoff for
/// 5xx answers and connection failures: a [`Backoff`] from [`backoff`](Self::backoff), doubling
/// with each try and capped at the wait budget. Every wait is cut to what is left of the part's
/// budget; once the budget or the tries are spent, the part comes back in a
/// [`SendError`](crate::channel::SendError) (with the surface's requested wait in
/// [`retry_after`](crate::channel::SendError::retry_after) when there was one). A requested wait
/// is clamped to [`MAX_RETRY_AFTER`](crate::retry::MAX_RETRY_AFTER) (24 hours), whatever number the surface sent.
///
/// A try that may have been applied (no answer to a request that left, a 5xx, Slack's
/// `internal_error`, a 2xx that cannot be read) is repeated only where a repeat cannot post
/// twice (each connector says where); the part that comes back after such a try is
/// [maybe delivered](crate::channel::SendError::maybe_delivered), whatever the later tries
/// answered. Before every try the part's ownership is re-checked, and no try's
/// [`request_timeout`](Self::request_timeout) outlasts the lease the part is sent under: it is
/// cut to the lease's time left, and a lease too close to its end hands the part back
/// [untried](crate::channel::SendError::ownership_lost).
///
/// A rate limit also pauses the conversation's rate budget, which streams and clones of the
/// connector share: later parts wait until the surface's requested instant when that is within
/// what is left of their own wait budget, and otherwise come back at once (with the wait in
/// `retry_after`) rather than sleeping to the cap and trying inside the pause. A bot-wide limit
/// (Discord's `global: true`) pauses every connector made from the same one with
/// `for_channel`/`for_chat`.
///
/// Every answer's body is read incrementally, at most
/// [`max_response_bytes`](Self::max_response_bytes) of it (default
/// [`DEFAULT_MAX_RESPONSE_BYTES`], 64 KiB: the surfaces' answers to a send are a few KiB); a
/// longer one is never buffered and ends that request as
/// [`ChannelErrorKind::ResponseTooLarge`](super::ChannelErrorKind::ResponseTooLarge).
///
/// Defaults: 5 tries, 30 s of waiting per part, 250 ms initial backoff, 10 s per request,
/// 64 KiB per answer. No jitter: a connector sends one part at a time and the surface's own
/// wait, when it gives one, is what the wait follows.
///
/// ```
/// use std::time::Duration;
/// use mesh_egress::channel::SendPolicy;
///
/// let policy = SendPolicy::default().max_tries(3).max_wait(Duration::from_secs(5));
/// assert_eq!(policy.tries(), 3);
/// assert_eq!(policy.response_limit(), 64 * 1024);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendPolicy {
    // Read by the send loop beside this module.
    pub(crate) max_tries: u32,
    pub(crate) max_wait: Duration,
    pub(crate) backoff: Duration,
    pub(crate) timeout: Duration,
    pub(crate) max_response_bytes: usize,
}

/// The most a connector waits for a surface's requested wait, and reports in
/// [`SendError::retry_after`](crate::channel::SendError::retry_after): the one bound on asked
/// waits, shared with Layer A.
pub(crate) use crate::retry::MAX_RETRY_AFTER;

/// The default cap on one answer's body: 64 KiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 64 * 1024;

impl Default for SendPolicy {
    fn default() -> Self {
        Self {
            max_tries: 5,
            max_wait: Duration::from_secs(30),
            backoff: Duration::from_millis(250),
            timeout: Duration::from_secs(10),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }
}

impl SendPolicy {
    /// The default policy (see the type's docs).
    pub fn new() -> Self {
        Self::default()
    }

    /// At most `tries` requests per part (at least 1; `1` disables retries).
    pub fn max_tries(mut self, tries: u32) -> Self {
        self.max_tries = tries.max(1);
        self
    }

    /// At most `wait` of waiting, in total, per part (`Duration::ZERO` disables retries).
    pub fn max_wait(mut self, wait: Duration) -> Self {
        self.max_wait = wait;
        self
    }

    /// The first backoff after a 5xx or a connection failure; it doubles with each try.
    pub fn backoff(mut self, backoff: Duration) -> Self {
        self.backoff = backoff;
        self
    }

    /// How long one request may take before it counts as a transport failure.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Reads at most `bytes` of each answer's body; a longer answer fails that request with
    /// [`ChannelErrorKind::ResponseTooLarge`](super::ChannelErrorKind::ResponseTooLarge).
    pub fn max_response_bytes(mut self, bytes: usize) -> Self {
        self.max_response_bytes = bytes;
        self
    }

    /// The configured cap on one answer's body, in bytes.
    pub fn response_limit(&self) -> usize {
        self.max_response_bytes
    }

    /// The configured number of tries per part.
    pub fn tries(&self) -> u32 {
        self.max_tries
    }

    /// The configured wait budget per part.
    pub fn wait_budget(&self) -> Duration {
        self.max_wait
    }

    /// The backoff after the `tries`-th failed try: doubling from the configured start, never
    /// past the wait budget (a longer step could not be waited out anyway).
    pub(crate) fn backoff_for(&self, tries: u32) -> Duration {
        Backoff::new(self.backoff, self.max_wait).step(tries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_the_configured_start_up_to_the_wait_budget() {
        let policy = SendPolicy::new()
            .backoff(Duration::from_millis(100))
            .max_wait(Duration::from_secs(30));
        assert_eq!(policy.backoff_for(1), Duration::from_millis(100));
        assert_eq!(policy.backoff_for(3), Duration::from_millis(400));
        assert_eq!(policy.backoff_for(200), Duration::from_secs(30));
        let huge = SendPolicy::new()
            .backoff(Duration::MAX)
            .max_wait(Duration::MAX);
        assert_eq!(huge.backoff_for(u32::MAX), Duration::MAX);
    }

    #[test]
    fn zero_tries_is_raised_to_one() {
        assert_eq!(SendPolicy::new().max_tries(0).tries(), 1);
    }
}
