//! Durable commitments on both backends: stored with what keeps them, claimed once when due,
//! an expired claim taken over and the stale holder fenced out, re-scheduled on the stored plan.

mod store_support;

use std::time::Duration;

use mesh_egress::boundary::resolve;
use mesh_egress::degrade::{Commitment, DegradationPolicy, Mode, Reply};
use mesh_egress::store::{CommitmentEnd, CommitmentStatus, FollowUpPlan, FollowUpTask, Store};
use mesh_egress::{Address, Attribution, EgressError};

use store_support::*;

both_backends!(
    a_due_commitment_is_claimed_once_and_ended_once,
    an_expired_claim_is_taken_over_and_the_stale_holder_is_fenced_out,
    a_retryable_failure_reschedules_on_the_stored_plan,
);

fn promise(conversation: &str, first_delay: Duration) -> Commitment {
    let policy = DegradationPolicy::default().with_follow_up(first_delay, 3);
    let failed = Err(EgressError::transport(
        "503",
        Attribution::new("bot", conversation, "r1"),
    ));
    match resolve(Mode::Interactive, &policy, failed) {
        Reply::Holding { commitment, .. } => commitment,
        other => panic!("expected a holding line, got {other:?}"),
    }
}

fn task() -> FollowUpTask {
    FollowUpTask::new(
        "ask",
        serde_json::json!({"prompt": "status?"}),
        Mode::Interactive,
    )
    .with_system_prompt("be brief")
}

async fn a_due_commitment_is_claimed_once_and_ended_once(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    let due = promise("c1", Duration::ZERO);
    let later = promise("c1", Duration::from_secs(3600));
    for c in [&due, &later] {
        let plan = FollowUpPlan::for_commitment(c, Duration::from_secs(600));
        store
            .keep_commitment(c, &Address::Plain, &task(), plan)
            .await
            .unwrap();
    }
    let work = store.pending_work().await.unwrap();
    assert_eq!(work.due_commitments, 1, "the due-later one does not count");
    let claims = store.claim_due("w1", LONG, 10).await.unwrap();
    assert_eq!(claims.len(), 1);
    let claim = &claims[0];
    assert_eq!(claim.id(), due.id());
    assert_eq!(claim.task(), &task());
    assert_eq!(claim.attribution().conversation(), "c1");
    assert!(
        store.claim_due("w2", LONG, 10).await.unwrap().is_empty(),
        "claimed twice"
    );
    assert!(
        store
            .end_commitment(claim, CommitmentEnd::Fulfilled)
            .await
            .unwrap()
    );
    assert!(
        !store
            .end_commitment(claim, CommitmentEnd::Fulfilled)
            .await
            .unwrap(),
        "ended twice"
    );
    let rows = store.commitments("c1").await.unwrap();
    let statuses: Vec<_> = rows.iter().map(|r| r.status).collect();
    assert_eq!(statuses.len(), 2);
    assert!(statuses.contains(&CommitmentStatus::Fulfilled));
    assert!(statuses.contains(&CommitmentStatus::Pending));
    assert!(store.pending_work().await.unwrap().is_idle());
}

async fn an_expired_claim_is_taken_over_and_the_stale_holder_is_fenced_out(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    let c = promise("c2", Duration::ZERO);
    store
        .keep_commitment(
            &c,
            &Address::Plain,
            &task(),
            FollowUpPlan::for_commitment(&c, LONG),
        )
        .await
        .unwrap();
    let stale = store
        .claim_due("w1", Duration::from_millis(50), 1)
        .await
        .unwrap();
    assert_eq!(stale.len(), 1);
    // Loopback database, real clock: bounded by the claim's 50 ms plus slack.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        store.pending_work().await.unwrap().due_commitments,
        1,
        "an expired claim counts as due"
    );
    let fresh = store.claim_due("w2", LONG, 1).await.unwrap();
    assert_eq!(fresh.len(), 1);
    assert!(
        !store
            .end_commitment(&stale[0], CommitmentEnd::Fulfilled)
            .await
            .unwrap()
    );
    assert!(!store.retry_later(&stale[0]).await.unwrap());
    assert!(
        store
            .end_commitment(&fresh[0], CommitmentEnd::HandedOff)
            .await
            .unwrap()
    );
    let rows = store.commitments("c2").await.unwrap();
    assert_eq!(rows[0].status, CommitmentStatus::HandedOff);
    assert_eq!(rows[0].attempts_made, 1);
}

async fn a_retryable_failure_reschedules_on_the_stored_plan(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    let c = promise("c3", Duration::ZERO);
    // First try at once; the second one 0 × 2 = 0 ms later too, so it is due again at once.
    store
        .keep_commitment(
            &c,
            &Address::Plain,
            &task(),
            FollowUpPlan::for_commitment(&c, LONG),
        )
        .await
        .unwrap();
    let first = store.claim_due("w1", LONG, 1).await.unwrap();
    assert!(!first[0].is_last_try());
    assert!(store.retry_later(&first[0]).await.unwrap());
    let second = store.claim_due("w1", LONG, 1).await.unwrap();
    assert_eq!(second[0].attempts_made(), 1);
    assert_eq!(second[0].plan().attempts(), 3);
    let rows = store.commitments("c3").await.unwrap();
    assert_eq!(
        (rows[0].status, rows[0].attempts_made),
        (CommitmentStatus::Claimed, 1)
    );
}
