//! The ingress classifier's row.

use serde::{Deserialize, Serialize};

use crate::address::Surface;
use crate::engagement::Engagement;

/// What the ingress classifier decided about one inbound message, and why: the rule, its
/// confidence, and whether the judge was asked and what it answered. Never the message's text;
/// the row's attribution names the conversation (its address) and the message id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IngressRecord {
    /// The surface the message came from.
    pub surface: Surface,
    /// The decision.
    pub engagement: Engagement,
}
