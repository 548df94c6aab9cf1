//! [`RetryConfig`]: the shipped model deadline policy, read from the environment.

use std::time::Duration;

use crate::setting::read_setting;
use crate::setting::{ConfigProblem, ConfigWarning};

/// `MESH_MODEL_RETRY_ATTEMPTS`: attempts per route.
pub(crate) const ENV_ATTEMPTS: &str = "MESH_MODEL_RETRY_ATTEMPTS";
/// `MESH_MODEL_RETRY_ATTEMPT_TIMEOUT_MS`: the per-attempt bound (`0` disables it).
pub(crate) const ENV_ATTEMPT_TIMEOUT_MS: &str = "MESH_MODEL_RETRY_ATTEMPT_TIMEOUT_MS";
/// `MESH_MODEL_RETRY_TOTAL_DEADLINE_MS`: the whole recovery, attempts and waits.
pub(crate) const ENV_TOTAL_DEADLINE_MS: &str = "MESH_MODEL_RETRY_TOTAL_DEADLINE_MS";
/// `MESH_MODEL_RETRY_MAX_DELAY_MS`: the ceiling of any one wait.
pub(crate) const ENV_MAX_DELAY_MS: &str = "MESH_MODEL_RETRY_MAX_DELAY_MS";
/// `MESH_MODEL_FALLBACK_MODELS`: comma-separated fallback models, in order.
pub(crate) const ENV_FALLBACK_MODELS: &str = "MESH_MODEL_FALLBACK_MODELS";
/// `MESH_MODEL_STREAM_FIRST_TOKEN_TIMEOUT_MS`: how long a stream may take to its first content
/// (`0` disables it).
pub(crate) const ENV_STREAM_FIRST_TOKEN_TIMEOUT_MS: &str =
    "MESH_MODEL_STREAM_FIRST_TOKEN_TIMEOUT_MS";
/// `MESH_MODEL_STREAM_IDLE_TIMEOUT_MS`: the longest silence between two content chunks of a
/// stream (`0` disables it).
pub(crate) const ENV_STREAM_IDLE_TIMEOUT_MS: &str = "MESH_MODEL_STREAM_IDLE_TIMEOUT_MS";

/// Default attempts per route.
pub(crate) const DEFAULT_ATTEMPTS: u32 = 3;
/// Default per-attempt timeout.
pub(crate) const DEFAULT_ATTEMPT_TIMEOUT: Duration = Duration::from_millis(60_000);
/// Default total recovery deadline.
pub(crate) const DEFAULT_TOTAL_DEADLINE: Duration = Duration::from_millis(180_000);
/// Default ceiling of one wait.
pub(crate) const DEFAULT_MAX_DELAY: Duration = Duration::from_millis(20_000);
/// Default first backoff step.
pub(crate) const DEFAULT_BASE_DELAY: Duration = Duration::from_millis(500);
/// Default share of a backoff step that jitter may take away.
pub(crate) const DEFAULT_JITTER: f64 = 0.25;
/// Default bound on a stream's time to its first content: 30 s (why: [`RetryConfig`]).
pub(crate) const DEFAULT_STREAM_FIRST_TOKEN_TIMEOUT: Duration = Duration::from_millis(30_000);
/// Default bound on the silence between two content chunks of a stream: 30 s.
pub(crate) const DEFAULT_STREAM_IDLE_TIMEOUT: Duration = Duration::from_millis(30_000);

/// How one model call is retried and bounded: the spec's "Shipped model deadline policy".
///
/// | setting | env | default | bad values |
/// |---|---|---|---|
/// | attempts per route | `MESH_MODEL_RETRY_ATTEMPTS` | 3 | unparseable, negative, `0`: default + warning |
/// | per-attempt timeout | `MESH_MODEL_RETRY_ATTEMPT_TIMEOUT_MS` | 60000 | a literal `0` **disables** the bound; unparseable or negative: default + warning; unset or empty: default |
/// | total recovery deadline | `MESH_MODEL_RETRY_TOTAL_DEADLINE_MS` | 180000 | unparseable, negative, `0`: default + warning |
/// | max wait | `MESH_MODEL_RETRY_MAX_DELAY_MS` | 20000 | unparseable, negative, `0`: default + warning |
/// | fallback models | `MESH_MODEL_FALLBACK_MODELS` | none | comma-separated; blanks dropped |
/// | stream first-token timeout | `MESH_MODEL_STREAM_FIRST_TOKEN_TIMEOUT_MS` | 30000 | as the attempt timeout: only a literal `0` disables it |
/// | stream idle timeout | `MESH_MODEL_STREAM_IDLE_TIMEOUT_MS` | 30000 | as the attempt timeout: only a literal `0` disables it |
///
/// For a streamed call ([`Router::stream`](super::Router::stream)) the attempt timeout and the
/// first-token timeout bound the time to the first content; after it only the idle timeout,
/// the route's share and the total deadline apply, so a healthy long stream is never cut by
/// the attempt timeout. Both stream bounds count as a stalled route (`first_token_timeout`,
/// `stream_idle_timeout`). Both default to 30 s, for these reasons.
///
/// *First token.* The Vercel AI SDK added `timeout.firstChunkMs`
/// precisely because a stream can send headers and keep-alive framing and then stall before
/// any content (vercel/ai#16538, vercel/ai#17374), and its maintainers default it to the
/// inter-chunk bound; LangChain's OpenAI client ships a 120 s `stream_chunk_timeout`
/// (reference.langchain.com, `BaseChatOpenAI.stream_chunk_timeout`). We take 30 s, half the
/// 60 s attempt timeout: a healthy provider's first token arrives in well under a few seconds
/// (reasoning models excepted: raise it for them), so a route silent for 30 s is stalled and
/// the fallback still has most of the total deadline. It is always capped by the attempt
/// timeout, which for a stream bounds only the time to the first token.
///
/// *Idle.* Published practice: opencode recommends 15–30 s for its `chunkTimeout`, passed to the
/// Vercel AI SDK's `timeout.chunkMs` (anomalyco/opencode#25575), after first shipping 2 min
/// (anomalyco/opencode#16366, which notes others use 30 s); TabbyML/pochi raised its
/// `chunkMs` from 15 s to 30 s to stop false aborts on slow models (TabbyML/pochi#1807);
/// LangChain's 120 s default is the conservative end. 30 s sits where those converged: a
/// token stream that pauses for 30 s has stalled, and keep-alive comments (which a byte-level
/// read timeout would count as life) do not reset it.
///
/// Attempts = 1 disables retries, not deadlines. An attempt timeout at or above the total
/// deadline logs one warning at construction and is clamped to the total.
///
/// # Backoff
///
/// After the `n`-th failed attempt on a route (n from 1), the wait before the next one is
///
/// ```text
/// step(n)  = min(max_delay, base_delay · 2^(n-1))          base_delay = 500 ms
/// jittered = step(n) · (1 - jitter · u),  u uniform in [0, 1)   jitter = 0.25
/// wait     = max(jittered, min(retry_after, max_delay))
/// ```
///
/// so at the defaults the waits are about 0.5 s then 1 s (each up to a quarter shorter), a
/// provider's `Retry-After` is honoured (jitter never shortens it) but clamped to `max_delay`
/// (20 s), and no wait exceeds `max_delay`. When a wait would outlast what is left of the
/// route's share, the Router moves to the next route at once (or ends recovery on the last).
///
/// ```
/// use std::time::Duration;
/// use mesh_egress::model::RetryConfig;
/// let config = RetryConfig::from_lookup(|key| match key {
///     "MESH_MODEL_RETRY_ATTEMPT_TIMEOUT_MS" => Some("0".to_owned()),
///     "MESH_MODEL_RETRY_ATTEMPTS" => Some("-1".to_owned()),
///     "MESH_MODEL_FALLBACK_MODELS" => Some("small-model, tiny-model".to_owned()),
///     _ => None,
/// });
/// assert_eq!(config.attempt_timeout(), None); // a literal 0 disables the bound
/// assert_eq!(config.attempts(), 3); // -1 restores the default...
/// assert_eq!(config.warnings().len(), 1); // ...and says so
/// assert_eq!(config.fallback_models(), ["small-model", "tiny-model"]);
/// assert_eq!(config.total_deadline(), Duration::from_secs(180));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct RetryConfig {
    attempts: u32,
    attempt_timeout: Option<Duration>,
    total_deadline: Duration,
    max_delay: Duration,
    base_delay: Duration,
    jitter: f64,
    fallback_models: Vec<String>,
    stream_first_token_timeout: Option<Duration>,
    stream_idle_timeout: Option<Duration>,
    warnings: Vec<ConfigWarning>,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            attempts: DEFAULT_ATTEMPTS,
            attempt_timeout: Some(DEFAULT_ATTEMPT_TIMEOUT),
            total_deadline: DEFAULT_TOTAL_DEADLINE,
            max_delay: DEFAULT_MAX_DELAY,
            base_delay: DEFAULT_BASE_DELAY,
            jitter: DEFAULT_JITTER,
            fallback_models: Vec::new(),
            stream_first_token_timeout: Some(DEFAULT_STREAM_FIRST_TOKEN_TIMEOUT),
            stream_idle_timeout: Some(DEFAULT_STREAM_IDLE_TIMEOUT),
            warnings: Vec::new(),
        }
    }
}

impl RetryConfig {
    /// Reads the process environment. Warnings are logged (target `mesh_egress::model`) and
    /// kept on the config.
    pub fn from_env() -> Self {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    /// Reads every setting through `lookup` (a variable name to its value), so tests and
    /// other configuration sources need no process environment. Warnings are logged (target
    /// `mesh_egress::model`) and kept on the config ([`warnings`](Self::warnings)).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let mut config = Self::default();
        let mut warnings = Vec::new();
        let mut read = |key: &'static str, zero_is_bad: bool| {
            read_setting(&lookup, key, zero_is_bad, &mut warnings)
        };
        if let Some(n) = read(ENV_ATTEMPTS, true) {
            config.attempts = u32::try_from(n).unwrap_or(u32::MAX);
        }
        let attempt_timeout_set = read(ENV_ATTEMPT_TIMEOUT_MS, false).map(|ms| {
            config.attempt_timeout = (ms != 0).then(|| Duration::from_millis(ms));
        });
        if let Some(ms) = read(ENV_STREAM_FIRST_TOKEN_TIMEOUT_MS, false) {
            config.stream_first_token_timeout = (ms != 0).then(|| Duration::from_millis(ms));
        }
        if let Some(ms) = read(ENV_STREAM_IDLE_TIMEOUT_MS, false) {
            config.stream_idle_timeout = (ms != 0).then(|| Duration::from_millis(ms));
        }
        if let Some(ms) = read(ENV_TOTAL_DEADLINE_MS, true) {
            config.total_deadline = Duration::from_millis(ms);
        }
        if let Some(ms) = read(ENV_MAX_DELAY_MS, true) {
            config.max_delay = Duration::from_millis(ms);
        }
        if let Some(timeout) = config.attempt_timeout
            && timeout >= config.total_deadline
        {
            warnings.push(ConfigWarning {
                key: ENV_ATTEMPT_TIMEOUT_MS,
                // Say so when the default, not the operator, is what collides with the total.
                value: match attempt_timeout_set {
                    Some(()) => timeout.as_millis().to_string(),
                    None => format!("{} (default)", timeout.as_millis()),
                },
                problem: ConfigProblem::AttemptTimeoutClamped,
            });
            config.attempt_timeout = Some(config.total_deadline);
        }
        config.fallback_models = lookup(ENV_FALLBACK_MODELS)
            .map(|list| {
                list.split(',')
                    .map(str::trim)
                    .filter(|m| !m.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        for warning in &warnings {
            tracing::warn!(
                target: "mesh_egress::model",
                key = warning.key,
                problem = ?warning.problem,
                "{warning}"
            );
        }
        config.warnings = warnings;
        config
    }

    /// Sets the attempts per route (at least 1).
    pub fn with_attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts.max(1);
        self
    }

    /// Sets the per-attempt timeout (`None` disables the bound).
    pub fn with_attempt_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.attempt_timeout = timeout;
        self
    }

    /// Sets the total recovery deadline.
    pub fn with_total_deadline(mut self, total: Duration) -> Self {
        self.total_deadline = total;
        self
    }

    /// Sets the ceiling of one wait.
    pub fn with_max_delay(mut self, max_delay: Duration) -> Self {
        self.max_delay = max_delay;
        self
    }

    /// Sets the first backoff step.
    pub fn with_base_delay(mut self, base_delay: Duration) -> Self {
        self.base_delay = base_delay;
        self
    }

    /// Sets how much of a backoff step jitter may take away, from 0 (none) to 1 (all of it).
    pub fn with_jitter(mut self, jitter: f64) -> Self {
        self.jitter = if jitter.is_finite() {
            jitter.clamp(0.0, 1.0)
        } else {
            DEFAULT_JITTER
        };
        self
    }

    /// Sets the fallback models, in order.
    pub fn with_fallback_models<I, S>(mut self, models: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.fallback_models = models.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the stream first-token timeout (`None` disables it).
    pub fn with_stream_first_token_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.stream_first_token_timeout = timeout;
        self
    }

    /// Sets the stream idle timeout (`None` disables it).
    pub fn with_stream_idle_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.stream_idle_timeout = timeout;
        self
    }

    /// The bound on a stream's time to its first content (`None` when disabled).
    pub fn stream_first_token_timeout(&self) -> Option<Duration> {
        self.stream_first_token_timeout
    }

    /// The bound on the silence between two content chunks of a stream (`None` when
    /// disabled).
    pub fn stream_idle_timeout(&self) -> Option<Duration> {
        self.stream_idle_timeout
    }

    /// Attempts per route (1 disables retries, not deadlines).
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The effective per-attempt timeout: `None` when disabled, never above the total deadline.
    pub fn attempt_timeout(&self) -> Option<Duration> {
        self.attempt_timeout.map(|t| t.min(self.total_deadline))
    }

    /// The total recovery deadline, attempts and waits included.
    pub fn total_deadline(&self) -> Duration {
        self.total_deadline
    }

    /// The ceiling of one wait (Retry-After included).
    pub fn max_delay(&self) -> Duration {
        self.max_delay
    }

    /// The first backoff step.
    pub fn base_delay(&self) -> Duration {
        self.base_delay
    }

    /// The share of a backoff step jitter may take away.
    pub fn jitter(&self) -> f64 {
        self.jitter
    }

    /// The backoff these settings describe (base delay, max delay, jitter).
    pub fn backoff(&self) -> crate::retry::Backoff {
        crate::retry::Backoff::new(self.base_delay, self.max_delay).with_jitter(self.jitter)
    }

    /// The fallback models, in order.
    pub fn fallback_models(&self) -> &[String] {
        &self.fallback_models
    }

    /// Every value that was ignored or clamped at construction (each was also logged).
    pub fn warnings(&self) -> &[ConfigWarning] {
        &self.warnings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> RetryConfig {
        RetryConfig::from_lookup(|key| {
            pairs
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn defaults_match_the_spec() {
        let c = config(&[]);
        assert_eq!(c.attempts(), 3);
        assert_eq!(c.attempt_timeout(), Some(Duration::from_millis(60_000)));
        assert_eq!(c.total_deadline(), Duration::from_millis(180_000));
        assert_eq!(c.max_delay(), Duration::from_millis(20_000));
        assert!(c.fallback_models().is_empty());
        assert!(c.warnings().is_empty());
    }

    #[test]
    fn only_a_literal_zero_disables_the_attempt_timeout() {
        let default = Some(DEFAULT_ATTEMPT_TIMEOUT);
        for (value, expected, warned) in [
            ("0", None, None),
            ("-1", default, Some(ConfigProblem::Negative)),
            ("abc", default, Some(ConfigProblem::Unparseable)),
            ("", default, None),
            ("1500", Some(Duration::from_millis(1500)), None),
        ] {
            let c = config(&[(ENV_ATTEMPT_TIMEOUT_MS, value)]);
            assert_eq!(c.attempt_timeout(), expected, "{value:?}");
            assert_eq!(c.warnings().first().map(|w| w.problem), warned, "{value:?}");
        }
    }

    #[test]
    fn only_a_literal_zero_disables_the_stream_bounds() {
        for key in [
            ENV_STREAM_FIRST_TOKEN_TIMEOUT_MS,
            ENV_STREAM_IDLE_TIMEOUT_MS,
        ] {
            let read = |c: &RetryConfig| {
                if key == ENV_STREAM_IDLE_TIMEOUT_MS {
                    c.stream_idle_timeout()
                } else {
                    c.stream_first_token_timeout()
                }
            };
            let default = Some(Duration::from_millis(30_000));
            for (value, expected, warned) in [
                ("0", None, None),
                ("-1", default, Some(ConfigProblem::Negative)),
                ("abc", default, Some(ConfigProblem::Unparseable)),
                ("", default, None),
                ("1500", Some(Duration::from_millis(1500)), None),
            ] {
                let c = config(&[(key, value)]);
                assert_eq!(read(&c), expected, "{key}={value:?}");
                assert_eq!(
                    c.warnings().first().map(|w| w.problem),
                    warned,
                    "{key}={value:?}"
                );
            }
        }
    }

    #[test]
    fn bad_attempts_total_and_max_delay_restore_defaults_with_a_warning_each() {
        for key in [ENV_ATTEMPTS, ENV_TOTAL_DEADLINE_MS, ENV_MAX_DELAY_MS] {
            for (value, problem) in [
                ("0", ConfigProblem::Zero),
                ("-5", ConfigProblem::Negative),
                ("ten", ConfigProblem::Unparseable),
            ] {
                let c = config(&[(key, value)]);
                assert_eq!(
                    c,
                    RetryConfig {
                        warnings: c.warnings.clone(),
                        ..RetryConfig::default()
                    }
                );
                assert_eq!(
                    c.warnings(),
                    [ConfigWarning {
                        key,
                        value: value.to_owned(),
                        problem
                    }],
                    "{key}={value}"
                );
            }
        }
    }

    #[test]
    fn attempt_timeout_at_or_above_total_warns_once_and_clamps() {
        let c = config(&[
            (ENV_ATTEMPT_TIMEOUT_MS, "5000"),
            (ENV_TOTAL_DEADLINE_MS, "5000"),
        ]);
        assert_eq!(c.attempt_timeout(), Some(Duration::from_millis(5000)));
        assert_eq!(c.warnings().len(), 1);
        assert_eq!(
            c.warnings()[0].problem,
            ConfigProblem::AttemptTimeoutClamped
        );

        let c = config(&[
            (ENV_ATTEMPT_TIMEOUT_MS, "90000"),
            (ENV_TOTAL_DEADLINE_MS, "30000"),
        ]);
        assert_eq!(c.attempt_timeout(), Some(Duration::from_millis(30_000)));
        assert_eq!(c.warnings().len(), 1);
    }

    #[test]
    fn a_total_below_the_default_attempt_timeout_clamps_and_names_the_default() {
        let c = config(&[(ENV_TOTAL_DEADLINE_MS, "5000")]);
        assert_eq!(c.attempt_timeout(), Some(Duration::from_millis(5000)));
        assert_eq!(c.warnings().len(), 1);
        assert_eq!(c.warnings()[0].value, "60000 (default)");
    }

    #[test]
    fn attempts_of_one_keeps_the_deadlines() {
        let c = config(&[(ENV_ATTEMPTS, "1")]);
        assert_eq!(c.attempts(), 1);
        assert_eq!(c.attempt_timeout(), Some(DEFAULT_ATTEMPT_TIMEOUT));
        assert_eq!(c.total_deadline(), DEFAULT_TOTAL_DEADLINE);
    }

    #[test]
    fn fallback_models_are_split_trimmed_and_blanks_dropped() {
        let c = config(&[(ENV_FALLBACK_MODELS, " a ,, b,")]);
        assert_eq!(c.fallback_models(), ["a", "b"]);
    }
}
