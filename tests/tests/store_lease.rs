//! Conversation leases with fencing on both backends: takeover, stale holders, renewal.

mod store_support;

use std::time::Duration;

use mesh_egress::channel::{Channel, Deliver, DeliveryError, Recorder};
use mesh_egress::store::{PartState, Store, StoreError};
use mesh_egress::{CommitError, Outbound};

use store_support::*;

both_backends!(
    a_stale_lease_cannot_commit_or_send,
    an_expired_lease_is_taken_over_with_a_greater_token,
    a_background_renewal_keeps_the_lease_until_dropped,
);

async fn a_stale_lease_cannot_commit_or_send(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    let old = store.acquire("c1", "w1", LONG).await.unwrap();
    let inner = Recorder::new().with_limit(10);
    let channel = store.channel(inner.clone());
    // Commit under the old lease, then the conversation moves on while the old holder still
    // believes it holds it (its local deadline is a minute away).
    let committed = Outbound::new(message("c1", BODY).with_ownership(old.ownership()))
        .render(channel.renderer())
        .unwrap()
        .commit(&channel)
        .await
        .unwrap();
    let new = store.acquire("c1", "w1", LONG).await.unwrap();
    assert!(new.token() > old.token());
    assert!(
        old.is_held(),
        "the stale worker still believes it holds the lease"
    );
    // It cannot commit...
    let refused = channel
        .deliver(message("c1", "late answer").with_ownership(old.ownership()))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, DeliveryError::Commit(CommitError::OwnershipLost)),
        "{refused:?}"
    );
    // ...nor send what it had committed.
    let mut parts = committed.into_parts();
    let error = channel.send(parts.next().unwrap()).await.unwrap_err();
    assert!(!error.retryable());
    let source = std::error::Error::source(&error).unwrap();
    assert!(
        matches!(
            source.downcast_ref::<StoreError>(),
            Some(StoreError::NotClaimable { .. })
        ),
        "{source}"
    );
    assert!(inner.sent().is_empty());
    // A lease on another conversation proves nothing about this one.
    let other = store.acquire("c2", "w1", LONG).await.unwrap();
    let refused = channel
        .deliver(message("c1", "wrong lease").with_ownership(other.ownership()))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, DeliveryError::Commit(CommitError::OwnershipLost)),
        "{refused:?}"
    );
    // Its renewal fails and revokes it.
    assert!(matches!(
        store.renew(&old, LONG).await,
        Err(StoreError::LeaseLost { .. })
    ));
    assert!(!old.is_held());
    // The new holder sends everything, once, in order.
    let report = store.resend(&channel, &new).await.unwrap();
    assert_eq!(report.sent, 5);
    assert_eq!(inner.sent(), parts_of(BODY));
    assert_eq!(states(&store, "c1").await, vec![PartState::Sent; 5]);
}

async fn an_expired_lease_is_taken_over_with_a_greater_token(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    let first = store
        .acquire("c1", "w1", Duration::from_millis(300))
        .await
        .unwrap();
    match store.acquire("c1", "w2", LONG).await {
        Err(StoreError::LeaseHeld { holder, .. }) => assert_eq!(holder, "w1"),
        other => panic!("a live lease was taken: {other:?}"),
    }
    // Renewal keeps it; then it is left to expire (real time: the database's clock decides).
    store
        .renew(&first, Duration::from_millis(300))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert!(!first.is_held());
    let second = store.acquire("c1", "w2", LONG).await.unwrap();
    assert!(second.token() > first.token());
    let channel = store.channel(Recorder::new());
    let refused = channel
        .deliver(message("c1", "stale").with_ownership(first.ownership()))
        .await
        .unwrap_err();
    assert!(matches!(
        refused,
        DeliveryError::Commit(CommitError::OwnershipLost)
    ));
    assert!(store.parts("c1").await.unwrap().is_empty());
    // Release hands it on at once, and the token still only grows.
    let token = second.token();
    store.release(second).await.unwrap();
    let third = store.acquire("c1", "w3", LONG).await.unwrap();
    assert!(third.token() > token);
}

async fn a_background_renewal_keeps_the_lease_until_dropped(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    let ttl = Duration::from_millis(300);
    let lease = store.acquire("c1", "w1", ttl).await.unwrap();
    let renewal = store.keep_renewed(&lease, ttl);
    // Real time (the database's clock decides): more than two lease lengths.
    tokio::time::sleep(Duration::from_millis(750)).await;
    assert!(lease.is_held());
    assert!(renewal.is_running());
    assert!(matches!(
        store.acquire("c1", "w2", LONG).await,
        Err(StoreError::LeaseHeld { .. })
    ));
    drop(renewal);
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert!(!lease.is_held());
    let taken = store.acquire("c1", "w2", LONG).await.unwrap();
    assert!(taken.token() > lease.token());
    // Renewing a lost lease in the background stops at once and leaves it lost.
    let renewal = store.keep_renewed(&lease, Duration::from_millis(30));
    for _ in 0..50 {
        if !renewal.is_running() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!renewal.is_running());
}
