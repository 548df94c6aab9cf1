//! [`PromiseKeeper`]: the seam through which the boundary hands a holding line's promise to
//! whoever keeps it, **before** the line goes out, so no crash can leave a person promised a
//! follow-up that nothing will deliver.
//!
//! The [`Bot`](crate::Bot) has two keepers: in memory (the promised route re-run in this
//! process, through the destination that carried the line) and the store's (stored with the
//! line's address, kept by a [`Worker`](crate::worker::Worker), after a restart too). Whole
//! answers and streamed ones are kept alike: a streamed turn's promise carries what the person
//! has already seen ([`ToKeep::delivered`]), and its follow-up delivers only what follows it.

use std::error::Error as StdError;

use crate::address::Address;
use crate::future::BoxFuture;
use crate::ledger::Ledger;
use crate::reply::{Commitment, Mode};

/// A promise about to be made: the commitment, where its holding line goes, the mode of the
/// turn that made it, what the person had already seen and said, and the route to re-run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ToKeep<'a> {
    pub(crate) commitment: &'a Commitment,
    pub(crate) address: &'a Address,
    pub(crate) mode: Mode,
    /// The answer's Markdown the person has seen (a stream's blocks before it failed).
    pub(crate) delivered: &'a str,
    pub(crate) rerun: &'a Rerun,
    /// What the person said (the gate's input on the follow-up, as on the turn).
    pub(crate) input: Option<&'a str>,
    /// The turn's ledger: the follow-up's rows land beside the turn's.
    pub(crate) ledger: &'a Ledger,
}

/// Which registered route a promise re-runs, with which input (the route's own input type,
/// serialized).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Rerun {
    pub(crate) route: String,
    pub(crate) input: serde_json::Value,
}

/// Keeps a holding line's promise: told before the line goes; an error means the promise
/// could not be made, and the line is not sent.
pub(crate) trait PromiseKeeper: Send + Sync {
    fn keep<'a>(
        &'a self,
        promise: ToKeep<'a>,
    ) -> BoxFuture<'a, Result<(), Box<dyn StdError + Send + Sync>>>;
}
