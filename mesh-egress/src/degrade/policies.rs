//! [`Policies`]: Layer C's policy for each mode, given once and carried by every turn.

use std::sync::OnceLock;

use super::DegradationPolicy;
use crate::reply::Mode;

/// The [`DegradationPolicy`] of each [`Mode`]: what a person waiting on a reply is told, and what
/// a background job does, when the turn cannot answer. Cheap to clone (two shared policies);
/// clones share each policy's holding-line rotation.
///
/// A [`Turn`](crate::Turn) carries one (the bot's, or [`Policies::default`]), so the boundary
/// resolves a handler's failure with the policy of the handler's mode without being told again.
///
/// ```
/// use std::time::Duration;
/// use mesh_egress::degrade::{DegradationPolicy, Mode, Policies};
/// let policies = Policies::default()
///     .with(Mode::Interactive, DegradationPolicy::default().with_follow_up(Duration::from_secs(5), 2));
/// assert_eq!(policies.for_mode(Mode::Interactive).follow_up().attempts, 2);
/// assert_eq!(policies.for_mode(Mode::Proactive).follow_up().attempts, 3);
/// ```
#[derive(Clone, Debug)]
pub struct Policies {
    interactive: DegradationPolicy,
    proactive: DegradationPolicy,
}

impl Policies {
    /// `policy` for both modes.
    pub fn uniform(policy: DegradationPolicy) -> Self {
        Self {
            interactive: policy.clone(),
            proactive: policy,
        }
    }

    /// `policy` for `mode`, the other mode's as it was.
    pub fn with(mut self, mode: Mode, policy: DegradationPolicy) -> Self {
        match mode {
            Mode::Interactive => self.interactive = policy,
            Mode::Proactive => self.proactive = policy,
        }
        self
    }

    /// Edits both modes' policies with `edit` (e.g. the follow-up a holding line promises).
    pub fn map(self, edit: impl Fn(DegradationPolicy) -> DegradationPolicy) -> Self {
        Self {
            interactive: edit(self.interactive),
            proactive: edit(self.proactive),
        }
    }

    /// The policy of `mode`.
    pub fn for_mode(&self, mode: Mode) -> &DegradationPolicy {
        match mode {
            Mode::Interactive => &self.interactive,
            Mode::Proactive => &self.proactive,
        }
    }
}

/// The process-wide default: one [`DegradationPolicy::default`] shared by both modes and by every
/// turn built without a policy, so holding lines rotate across all of them.
impl Default for Policies {
    fn default() -> Self {
        static DEFAULT: OnceLock<Policies> = OnceLock::new();
        DEFAULT
            .get_or_init(|| Policies::uniform(DegradationPolicy::default()))
            .clone()
    }
}
