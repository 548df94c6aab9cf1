//! How a promise is kept, once for every keeper: one try of the promised follow-up
//! ([`one_try`]: the answer delivered, or a failure retried on the promise's plan, or the mode's
//! last word after the last try), and the plan walked in this process ([`keep_in_process`]: the
//! commitment's backoff between tries, the ledger's rows).
//!
//! The [`Bot`](crate::Bot)'s in-memory keeper walks the plan here; the
//! [`Worker`](crate::worker::Worker) keeps a stored promise one try per claim (the store holds
//! the plan) through the same [`one_try`]. Both wait [`delay_before`] a try: one schedule,
//! `retry::Backoff`'s.

use std::future::Future;
use std::time::Duration;

use crate::egress::EgressError;
use crate::ledger::{CommitmentRecord, CommitmentState, Ledger, LedgerRecord};
use crate::reply::Commitment;
use crate::retry::Backoff;

/// The longest wait between two follow-ups (the in-memory keeper's and the store's plan alike).
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
    /// Try again at the plan's next step; the failure is handed back for the worker, which
    /// records it before it puts the claim back on the plan.
    Again(
        #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
        EgressError,
    ),
}

/// A keeper's tries of one promise: what re-runs the promised route and delivers its answer,
/// and what says the mode's last word. `Done` is how a promise ends for this keeper.
pub(crate) trait Tries {
    /// How a promise ends for this keeper.
    type Done;
    /// What stops the keeper (a delivery error, a store error).
    type Error;

    /// One try: the follow-up re-run, gated, rendered and delivered, or its failure.
    fn attempt(&mut self) -> impl Future<Output = Result<Tried<Self::Done>, Self::Error>>;

    /// After the last try (or a failure no retry can mend): Layer C's line for the mode
    /// (`failure` is marked not retryable, so interactive hands off and proactive stays silent).
    fn give_up(
        &mut self,
        failure: EgressError,
    ) -> impl Future<Output = Result<Self::Done, Self::Error>>;
}

/// One try of a promise, for every keeper: the attempt, then another try on the plan when the
/// failure is retryable and `last` is false, else the mode's last word.
pub(crate) async fn one_try<T: Tries>(
    tries: &mut T,
    last: bool,
) -> Result<Step<T::Done>, T::Error> {
    match tries.attempt().await? {
        Tried::Ended(done) => Ok(Step::Done(done)),
        Tried::Failed(failure) if failure.retryable() && !last => Ok(Step::Again(failure)),
        Tried::Failed(failure) => Ok(Step::Done(
            tries.give_up(failure.with_retryable(false)).await?,
        )),
    }
}

/// How a promise kept in process ended, for its ledger row.
pub(crate) trait Ending {
    /// The commitment's state once it ended this way.
    fn state(&self) -> CommitmentState;
}

/// The wait before the `k`-th try of a promise (from 1): `first_delay · 2^(k-1)`, at most
/// `max_delay` ([`Backoff::step`]), for the in-memory keeper and the store's plan alike.
pub(crate) fn delay_before(first_delay: Duration, max_delay: Duration, k: u32) -> Duration {
    Backoff::new(first_delay, max_delay).step(k)
}

/// Keeps a promise in this process: [`one_try`] after each backoff step of the commitment's
/// plan ([`delay_before`], at most [`MAX_FOLLOW_UP_DELAY`]), at most its `attempts` tries, each
/// try's end recorded on `ledger`. Starts no task; dropping the future stops it at once.
pub(crate) async fn keep_in_process<T>(
    commitment: &Commitment,
    ledger: &Ledger,
    tries: &mut T,
) -> Result<T::Done, T::Error>
where
    T: Tries,
    T::Done: Ending,
{
    let attempts = commitment.attempts().max(1);
    let mut k = 1;
    loop {
        tokio::time::sleep(delay_before(
            commitment.first_delay(),
            MAX_FOLLOW_UP_DELAY,
            k,
        ))
        .await;
        match one_try(tries, k >= attempts).await? {
            Step::Done(done) => {
                record_commitment(Some(ledger), commitment, done.state(), k);
                return Ok(done);
            }
            // `one_try` gives up on the last try, so `k < attempts` here.
            Step::Again(_) => {
                record_commitment(Some(ledger), commitment, CommitmentState::Pending, k);
                k += 1;
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_before_each_try_doubles_and_is_capped() {
        let delays: Vec<u64> = (1..=4)
            .map(|k| delay_before(Duration::from_secs(10), Duration::from_secs(35), k).as_secs())
            .collect();
        assert_eq!(delays, [10, 20, 35, 35]);
        assert_eq!(
            delay_before(Duration::MAX, Duration::MAX, u32::MAX),
            Duration::MAX
        );
    }
}
