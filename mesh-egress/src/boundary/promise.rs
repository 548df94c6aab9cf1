//! [`PromiseKeeper`]: the one way a holding line's promise is kept. It is handed the
//! [`Promise`] **before** the holding line goes out, so no crash can leave a person promised a
//! follow-up that nothing will deliver.
//!
//! Two keepers come with the crate: the [`Bot`](crate::Bot)'s in-memory one (it re-runs the
//! promised route in this process, on the commitment's backoff) and the store's (feature
//! `sqlite`/`postgres`: the promise is stored and a [`Worker`](crate::worker::Worker) keeps it,
//! after a restart too). Whole answers and streamed ones are kept alike: a streamed turn's
//! promise carries what the person has already seen ([`Promise::delivered`]), and its
//! follow-up delivers only what follows it.

use std::error::Error as StdError;

use crate::address::Address;
use crate::future::BoxFuture;
use crate::ledger::Ledger;
use crate::reply::{Commitment, Mode};

/// A promise about to be made: the commitment, where its holding line (and so its follow-up)
/// goes, the mode of the turn that made it, what the person had already seen, and which
/// registered route to re-run with which input, when the turn was started by one.
#[derive(Clone, Copy, Debug)]
pub struct Promise<'a> {
    commitment: &'a Commitment,
    address: &'a Address,
    mode: Mode,
    delivered: &'a str,
    rerun: Option<&'a Rerun>,
    /// What the person said (the gate's input on the follow-up, as on the turn).
    input: Option<&'a str>,
    /// The ledger of the turn that made the promise (the in-memory keeper records there).
    ledger: Option<&'a Ledger>,
}

impl<'a> Promise<'a> {
    /// A promise for `commitment`, whose holding line goes to `address`, made in `mode` after
    /// `delivered` was shown (empty for a whole answer).
    pub fn new(
        commitment: &'a Commitment,
        address: &'a Address,
        mode: Mode,
        delivered: &'a str,
    ) -> Self {
        Self {
            commitment,
            address,
            mode,
            delivered,
            rerun: None,
            input: None,
            ledger: None,
        }
    }

    /// The same promise, from a turn whose person said `input` (the follow-up's gate reads it).
    pub fn with_input(mut self, input: Option<&'a str>) -> Self {
        self.input = input;
        self
    }

    /// The same promise, made on a turn recording on `ledger`.
    pub(crate) fn with_ledger(mut self, ledger: &'a Ledger) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// What the person said on the turn that made the promise, if the turn was told
    /// ([`Turn::with_input`](crate::Turn::with_input)).
    pub fn input(&self) -> Option<&'a str> {
        self.input
    }

    /// The ledger of the turn that made the promise.
    pub(crate) fn ledger(&self) -> Option<&'a Ledger> {
        self.ledger
    }

    /// The same promise, kept by re-running `rerun`.
    pub fn with_rerun(mut self, rerun: Option<&'a Rerun>) -> Self {
        self.rerun = rerun;
        self
    }

    /// The commitment (its id, attribution and backoff plan).
    pub fn commitment(&self) -> &'a Commitment {
        self.commitment
    }

    /// Where the holding line goes, and so the follow-up.
    pub fn address(&self) -> &'a Address {
        self.address
    }

    /// The mode of the turn that made the promise (it decides the last failed try).
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The Markdown the person had already seen (empty unless a stream failed mid-way).
    pub fn delivered(&self) -> &'a str {
        self.delivered
    }

    /// The registered route to re-run, and its input, if a route started the turn.
    pub fn rerun(&self) -> Option<&'a Rerun> {
        self.rerun
    }
}

/// A registered route's name and its serialized input: what re-runs the same handler for a
/// follow-up (see [`Bot::route`](crate::Bot::route)).
#[derive(Clone, Debug, PartialEq)]
pub struct Rerun {
    route: String,
    input: serde_json::Value,
}

impl Rerun {
    /// Re-run the route registered as `route` with `input`.
    pub fn new(route: impl Into<String>, input: serde_json::Value) -> Self {
        Self {
            route: route.into(),
            input,
        }
    }

    /// The route's name.
    pub fn route(&self) -> &str {
        &self.route
    }

    /// The route's input, as it was serialized.
    pub fn input(&self) -> &serde_json::Value {
        &self.input
    }
}

/// Keeps a holding line's promise: told by the [`Bot`](crate::Bot) before the line is delivered,
/// for a whole answer and a streamed one alike, when a route started the turn (set one with
/// [`Bot::with_promise_keeper`](crate::Bot::with_promise_keeper); the default keeps it in
/// memory, or in the bot's store).
///
/// If `keep` fails, the line is not sent: the turn ends in a
/// [`DeliveryError::Commit`](crate::channel::DeliveryError::Commit), as a holding line whose
/// commit failed would, never in a promise nobody holds.
pub trait PromiseKeeper: Send + Sync {
    /// Keeps `promise`.
    fn keep<'a>(
        &'a self,
        promise: Promise<'a>,
    ) -> BoxFuture<'a, Result<(), Box<dyn StdError + Send + Sync>>>;
}
