//! How a promise is kept, once for every keeper: one try of the promised follow-up
//! ([`one_try`]: the answer delivered, or a failure retried on the promise's plan, or the mode's
//! last word after the last try), and the plan walked in this process ([`keep_in_process`]: the
//! commitment's backoff between tries, cancellation, the ledger's rows).
//!
//! The [`Bot`](crate::Bot)'s in-memory keeper walks the plan here; the
//! [`Worker`](crate::worker::Worker) keeps a stored promise one try per claim (the store holds
//! the plan) through the same [`one_try`]; the unit tests drive it through a keeper of this
//! kind around a closure (`follow_up.rs`).

use std::future::Future;
use std::time::Duration;

use crate::egress::EgressError;
use crate::ledger::{CommitmentRecord, CommitmentState, Ledger, LedgerRecord};
use crate::ownership::Cancellation;
use crate::reply::Commitment;
use crate::retry::Backoff;

/// The longest wait between two follow-ups unless configured otherwise (the in-memory keeper's
/// and the store's plan alike).
pub(crate) const MAX_FOLLOW_UP_DELAY: Duration = Duration::from_secs(600);

/// What one try of a promised follow-up came to.
pub(crate) enum Tried<D> {
    /// The try ended the promise's business (delivered, the agent's silence, or a stop): no
    /// further try.
    Ended(D),
    /// The try failed: retried on the plan, or the mode's last word after the last try.
    Failed(EgressError),
}

/// What [`one_try`] leaves to the plan.
pub(crate) enum Step<D> {
    /// The promise is kept (or handed off, or stopped).
    Done(D),
    /// Try again at the plan's next step; the failure is handed back (already recorded where
    /// the keeper records it, see [`Tries::attempt`]). Only the worker reads it (it records
    /// the failure itself before putting the claim back on the plan).
    Again(
        #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
        EgressError,
    ),
}

/// A keeper's tries of one promise: what re-runs the promised turn and delivers its answer,
/// and what says the mode's last word. `D` is how a promise ends for this keeper (a receipt,
/// the worker's [`Kept`](crate::worker::Kept)).
pub(crate) trait Tries {
    /// How a promise ends for this keeper.
    type Done;
    /// What stops the keeper (a delivery error, a store error).
    type Error;

    /// Try `k` (from 1): the follow-up re-run, gated, rendered and delivered, or its failure.
    fn attempt(&mut self, k: u32) -> impl Future<Output = Result<Tried<Self::Done>, Self::Error>>;

    /// After the last try (or a failure no retry can mend): Layer C's line for the mode
    /// (`failure` is marked not retryable, so interactive hands off and proactive stays silent).
    fn give_up(
        &mut self,
        failure: EgressError,
        k: u32,
    ) -> impl Future<Output = Result<Self::Done, Self::Error>>;
}

/// One try of a promise, for every keeper: the attempt, then another try on the plan when the
/// failure is retryable and `last` is false, else the mode's last word.
pub(crate) async fn one_try<T: Tries>(
    tries: &mut T,
    k: u32,
    last: bool,
) -> Result<Step<T::Done>, T::Error> {
    match tries.attempt(k).await? {
        Tried::Ended(done) => Ok(Step::Done(done)),
        Tried::Failed(failure) if failure.retryable() && !last => Ok(Step::Again(failure)),
        Tried::Failed(failure) => Ok(Step::Done(
            tries.give_up(failure.with_retryable(false), k).await?,
        )),
    }
}

/// How a promise kept in process ended, for its ledger row.
pub(crate) trait Ending {
    /// The commitment's state once it ended this way.
    fn state(&self) -> CommitmentState;
}

/// The plan of a promise kept in this process: the commitment's backoff, a cap on the wait, a
/// cancellation and the ledger its rows go on.
pub(crate) struct InProcess<'a> {
    pub(crate) commitment: &'a Commitment,
    pub(crate) ledger: Option<&'a Ledger>,
    pub(crate) cancellation: Option<&'a Cancellation>,
    pub(crate) max_delay: Duration,
}

impl InProcess<'_> {
    /// The wait before follow-up `k` (from 1): `first_delay × 2^(k-1)`, capped.
    pub(crate) fn delay_before(&self, k: u32) -> Duration {
        Backoff::new(self.commitment.first_delay(), self.max_delay).step(k)
    }
}

/// How [`keep_in_process`] ended.
pub(crate) enum InProcessEnd<D> {
    /// Kept (or handed off) after `follow_ups` tries.
    Done {
        done: D,
        // Read by the unit tests' driver (`follow_up.rs`).
        #[cfg_attr(not(test), allow(dead_code))]
        follow_ups: u32,
    },
    /// The cancellation fired after `follow_ups` tries; nothing more was sent.
    Cancelled {
        #[cfg_attr(not(test), allow(dead_code))]
        follow_ups: u32,
    },
}

/// Keeps a promise in this process: [`one_try`] after each backoff step of the commitment's
/// plan, at most `attempts` tries, each try's end recorded on the ledger. Starts no task;
/// dropping the future or firing the cancellation stops it at once.
pub(crate) async fn keep_in_process<T>(
    plan: &InProcess<'_>,
    tries: &mut T,
) -> Result<InProcessEnd<T::Done>, T::Error>
where
    T: Tries,
    T::Done: Ending,
{
    let commitment = plan.commitment;
    let attempts = commitment.attempts().max(1);
    let mut k = 1;
    loop {
        let delay = plan.delay_before(k);
        let step = match plan.cancellation {
            Some(cancellation) => tokio::select! {
                biased;
                () = cancellation.cancelled() => None,
                step = async {
                    tokio::time::sleep(delay).await;
                    one_try(tries, k, k >= attempts).await
                } => Some(step),
            },
            None => {
                tokio::time::sleep(delay).await;
                Some(one_try(tries, k, k >= attempts).await)
            }
        };
        match step {
            None => {
                record_commitment(plan.ledger, commitment, CommitmentState::Cancelled, k - 1);
                return Ok(InProcessEnd::Cancelled { follow_ups: k - 1 });
            }
            Some(step) => match step? {
                Step::Done(done) => {
                    record_commitment(plan.ledger, commitment, done.state(), k);
                    return Ok(InProcessEnd::Done {
                        done,
                        follow_ups: k,
                    });
                }
                // `one_try` gives up on the last try, so `k < attempts` here.
                Step::Again(_) => {
                    record_commitment(plan.ledger, commitment, CommitmentState::Pending, k);
                    k += 1;
                }
            },
        }
    }
}

/// A kept promise's new state: one event and, given a ledger, one row.
pub(crate) fn record_commitment(
    ledger: Option<&Ledger>,
    commitment: &Commitment,
    state: CommitmentState,
    follow_ups: u32,
) {
    let attr = commitment.attribution();
    tracing::info!(
        target: "mesh_egress::degrade",
        agent = attr.agent(),
        conversation = attr.conversation(),
        run = attr.run(),
        commitment = %commitment.id(),
        state = state.as_str(),
        follow_ups,
        "commitment updated"
    );
    if let Some(ledger) = ledger {
        ledger.record(
            attr,
            LedgerRecord::Commitment(CommitmentRecord::new(
                commitment.id(),
                state,
                follow_ups,
                commitment.attempts(),
            )),
        );
    }
}
