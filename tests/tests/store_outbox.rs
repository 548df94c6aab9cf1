//! The durable outbox on both backends: a SQLite file in a temp dir and a real PostgreSQL
//! cluster started by the harness (`support/postgres.rs`): commit, send, restart, resend, the
//! part state table, concurrent committers.

mod store_support;

use std::sync::Arc;
use std::time::Duration;

use mesh_egress::channel::{Channel, Deliver, DeliveryError, Recorder};
use mesh_egress::ledger::{Ledger, LedgerRecord, OutboxRecord};
use mesh_egress::store::{PartState, Store, StoreError, UnknownOutcome};
use mesh_egress::{Outbound, Surface};

use store_support::*;

both_backends!(
    commit_and_send_marks_every_part_sent_in_order,
    a_restart_resends_pending_parts_in_order_and_none_twice,
    a_part_whose_sender_died_is_uncertain_on_plain_and_resent_on_discord,
    two_concurrent_committers_keep_messages_whole_and_ordered,
    failed_sends_move_parts_by_the_state_table,
    the_send_again_knob_resends_what_cannot_be_settled,
    uncertain_parts_are_reported_on_the_ledger,
    rows_are_refused_when_nothing_durable_is_named,
);

async fn commit_and_send_marks_every_part_sent_in_order(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    let lease = store.acquire("c1", "w1", LONG).await.unwrap();
    let inner = Scripted::new(10, &[]);
    let channel = store.channel(inner.clone());
    let receipt = channel
        .deliver(message("c1", BODY).with_ownership(lease.ownership()))
        .await
        .unwrap();
    let expected = parts_of(BODY);
    assert_eq!(expected.len(), 5);
    assert_eq!(inner.sent(), expected);
    let rows = store.parts("c1").await.unwrap();
    assert_eq!(rows.len(), 5);
    for (i, row) in rows.iter().enumerate() {
        assert_eq!((row.index, row.total, row.state), (i, 5, PartState::Sent));
        assert_eq!(row.text, expected[i]);
        assert_eq!(
            row.platform_id.as_deref(),
            Some(format!("m{}", i + 1).as_str())
        );
        assert_eq!(row.attempts, 1);
        assert_eq!(row.delivery, receipt.delivery_id().unwrap().to_string());
    }
}

async fn a_restart_resends_pending_parts_in_order_and_none_twice(backend: Backend) {
    let place = backend.place();
    let expected = parts_of(BODY);
    {
        let store = Store::open(&place.url).await.unwrap();
        let lease = store.acquire("c1", "w1", LONG).await.unwrap();
        let first = Scripted::new(10, &[]);
        let channel = store.channel(first.clone());
        let msg = message("c1", BODY).with_ownership(lease.ownership());
        let committed = Outbound::new(msg)
            .render(channel.renderer())
            .unwrap()
            .commit(&channel)
            .await
            .unwrap();
        let mut parts = committed.into_parts();
        // Two parts go, then the process "dies": the rest is never sent by it.
        for part in parts.by_ref().take(2) {
            channel.send(part).await.unwrap();
        }
        assert_eq!(first.sent(), expected[..2]);
        drop(parts);
        store.close().await;
    }
    // The restarted worker: a new Store on the same database, the same holder name.
    let store = Store::open(&place.url).await.unwrap();
    let lease = store.acquire("c1", "w1", LONG).await.unwrap();
    let second = Scripted::new(10, &[]);
    let channel = store.channel(second.clone());
    let report = store.resend(&channel, &lease).await.unwrap();
    assert_eq!(
        (report.sent, report.uncertain, report.failed, report.stopped),
        (3, 0, 0, false)
    );
    assert_eq!(second.sent(), expected[2..]);
    assert_eq!(states(&store, "c1").await, vec![PartState::Sent; 5]);
    // Nothing is sent twice.
    let again = store.resend(&channel, &lease).await.unwrap();
    assert_eq!(again.sent, 0);
    assert_eq!(second.sent(), expected[2..]);
}

async fn a_part_whose_sender_died_is_uncertain_on_plain_and_resent_on_discord(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    for (conversation, surface) in [("plain", Surface::Plain), ("discord", Surface::Discord)] {
        let lease = store.acquire(conversation, "w1", LONG).await.unwrap();
        // The second send dies after its claim: the row stays `sending`.
        let dying = Scripted::new(10, &[Step::Accept, Step::Die]);
        let channel = Arc::new(store.channel(dying.clone().with_address(stand_in(surface))));
        let msg = message(conversation, BODY).with_ownership(lease.ownership());
        let task = {
            let channel = Arc::clone(&channel);
            tokio::spawn(async move { channel.deliver(msg).await.map(drop) })
        };
        assert!(task.await.unwrap_err().is_panic());
        assert_eq!(
            states(&store, conversation).await,
            [
                PartState::Sent,
                PartState::Sending,
                PartState::Pending,
                PartState::Pending,
                PartState::Pending
            ]
        );
        let next = Scripted::new(10, &[]);
        let channel = store.channel(next.clone().with_address(stand_in(surface)));
        let report = store.resend(&channel, &lease).await.unwrap();
        let expected = parts_of(BODY);
        match surface {
            Surface::Plain => {
                assert_eq!((report.sent, report.uncertain), (3, 1));
                assert_eq!(next.sent(), expected[2..]);
                let rows = store.parts(conversation).await.unwrap();
                assert_eq!(rows[1].state, PartState::Uncertain);
                assert!(rows[1].maybe_delivered);
            }
            _ => {
                // Discord dedupes the nonce within its window: re-sending is safe.
                assert_eq!((report.sent, report.uncertain), (4, 0));
                assert_eq!(next.sent(), expected[1..]);
                let rows = store.parts(conversation).await.unwrap();
                assert_eq!(rows[1].attempts, 2);
                assert_eq!(rows[1].state, PartState::Sent);
            }
        }
    }
    // Outside the window a Discord part with an unknown outcome is uncertain too.
    let lease = store.acquire("late", "w1", LONG).await.unwrap();
    let dying = Scripted::new(10, &[Step::Die]);
    let channel = Arc::new(store.channel(dying.with_address(stand_in(Surface::Discord))));
    let msg = message("late", "short").with_ownership(lease.ownership());
    let task = {
        let channel = Arc::clone(&channel);
        tokio::spawn(async move { channel.deliver(msg).await.map(drop) })
    };
    assert!(task.await.unwrap_err().is_panic());
    let next = Scripted::new(10, &[]);
    let channel = store
        .channel(next.clone().with_address(stand_in(Surface::Discord)))
        .with_dedupe_window(Duration::ZERO);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let report = store.resend(&channel, &lease).await.unwrap();
    assert_eq!((report.sent, report.uncertain), (0, 1));
    assert!(next.sent().is_empty());
}

async fn two_concurrent_committers_keep_messages_whole_and_ordered(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    let lease = store.acquire("c1", "w1", LONG).await.unwrap();
    let inner = Recorder::new().with_limit(16);
    let channel = Arc::new(store.channel(inner.clone()));
    let mut tasks = Vec::new();
    for writer in 0..2 {
        let channel = Arc::clone(&channel);
        let ownership = lease.ownership();
        tasks.push(tokio::spawn(async move {
            for n in 0..10 {
                let committed = Outbound::new(
                    message(
                        "c1",
                        &format!("w{writer} m{n:02} first. w{writer} m{n:02} last."),
                    )
                    .with_ownership(ownership.clone()),
                )
                .render(channel.renderer())
                .unwrap()
                .commit(&*channel)
                .await
                .unwrap();
                assert_eq!(committed.len(), 2);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let rows = store.parts("c1").await.unwrap();
    assert_eq!(rows.len(), 40);
    // Commit order is seq order: a message's parts are adjacent and in index order.
    for pair in rows.chunks(2) {
        assert_eq!(pair[0].delivery, pair[1].delivery);
        assert_eq!((pair[0].index, pair[1].index), (0, 1));
    }
    // Each writer's messages are in its own commit order.
    for writer in 0..2 {
        let mine: Vec<&str> = rows
            .iter()
            .filter(|r| r.index == 0 && r.text.starts_with(&format!("w{writer} ")))
            .map(|r| r.text.as_str())
            .collect();
        let mut sorted = mine.clone();
        sorted.sort_unstable();
        assert_eq!(mine.len(), 10);
        assert_eq!(mine, sorted);
    }
    let report = store.resend(&channel, &lease).await.unwrap();
    assert_eq!(report.sent, 40);
    // Workers racing for one conversation: exactly one gets it.
    let racers: Vec<_> = (0..8)
        .map(|n| {
            let store = store.clone();
            tokio::spawn(async move { store.acquire("race", &format!("w{n}"), LONG).await })
        })
        .collect();
    let mut won = 0;
    for racer in racers {
        match racer.await.unwrap() {
            Ok(_) => won += 1,
            Err(StoreError::LeaseHeld { .. }) => {}
            Err(other) => panic!("{other:?}"),
        }
    }
    assert_eq!(won, 1);
    let texts: Vec<String> = rows.iter().map(|r| r.text.clone()).collect();
    assert_eq!(inner.sent(), texts);
}

async fn failed_sends_move_parts_by_the_state_table(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    let lease = store.acquire("c1", "w1", LONG).await.unwrap();

    // Unknown outcome on a surface without dedupe: `uncertain`, and delivering the rest again
    // does not re-post it.
    let inner = Scripted::new(10, &[Step::Accept, Step::Unknown]);
    let channel = store.channel(inner.clone().with_address(stand_in(Surface::Telegram)));
    let error = channel
        .deliver(message("c1", BODY).with_ownership(lease.ownership()))
        .await
        .unwrap_err();
    let undelivered = error.into_undelivered().unwrap();
    assert_eq!(
        states(&store, "c1").await,
        [
            PartState::Sent,
            PartState::Uncertain,
            PartState::Pending,
            PartState::Pending,
            PartState::Pending
        ]
    );
    let again = channel.deliver(undelivered).await.unwrap_err();
    assert!(
        matches!(again, DeliveryError::Send { failed: 1, .. }),
        "{again:?}"
    );
    assert_eq!(inner.sent(), parts_of(BODY)[..1]);
    // A resend skips the uncertain part and sends the rest in order.
    let report = store.resend(&channel, &lease).await.unwrap();
    assert_eq!((report.sent, report.uncertain), (3, 0));
    assert_eq!(
        states(&store, "c1").await,
        [
            PartState::Sent,
            PartState::Uncertain,
            PartState::Sent,
            PartState::Sent,
            PartState::Sent
        ]
    );

    // A refusal fails the part and the rest of its message.
    let lease2 = store.acquire("c2", "w1", LONG).await.unwrap();
    let inner = Scripted::new(10, &[Step::Accept, Step::Refuse]);
    let channel = store.channel(inner.clone().with_address(stand_in(Surface::Slack)));
    channel
        .deliver(message("c2", BODY).with_ownership(lease2.ownership()))
        .await
        .unwrap_err();
    let rows = store.parts("c2").await.unwrap();
    assert_eq!(
        rows.iter().map(|r| r.state).collect::<Vec<_>>(),
        [
            PartState::Sent,
            PartState::Failed,
            PartState::Failed,
            PartState::Failed,
            PartState::Failed
        ]
    );
    assert!(
        rows[1]
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("scripted failure"))
    );
    assert_eq!(store.resend(&channel, &lease2).await.unwrap().sent, 0);

    // "Not now" leaves the part pending (it did not post); a resend sends it, then the rest.
    let lease3 = store.acquire("c3", "w1", LONG).await.unwrap();
    let inner = Scripted::new(10, &[Step::RetryAfter]);
    // Retried at once: this is the state table, not the backoff (`worker_retry.rs`).
    let channel = store.channel(inner.clone()).with_retry(at_once());
    channel
        .deliver(message("c3", BODY).with_ownership(lease3.ownership()))
        .await
        .unwrap_err();
    let rows = store.parts("c3").await.unwrap();
    assert_eq!(rows[0].state, PartState::Pending);
    assert!(!rows[0].maybe_delivered);
    // The next "not now" stops the resend before anything later goes.
    inner.script.lock().unwrap().push_back(Step::RetryAfter);
    let stopped = store.resend(&channel, &lease3).await.unwrap();
    assert!(stopped.stopped && stopped.sent == 0);
    let report = store.resend(&channel, &lease3).await.unwrap();
    assert_eq!(report.sent, 5);
    assert_eq!(inner.sent(), parts_of(BODY));

    // Unknown outcome on Discord: pending and maybe delivered; re-sent within the window.
    let lease4 = store.acquire("c4", "w1", LONG).await.unwrap();
    let inner = Scripted::new(10, &[Step::Unknown]);
    let channel = store
        .channel(inner.clone().with_address(stand_in(Surface::Discord)))
        .with_retry(at_once());
    channel
        .deliver(message("c4", "hello").with_ownership(lease4.ownership()))
        .await
        .unwrap_err();
    let rows = store.parts("c4").await.unwrap();
    assert_eq!(
        (rows[0].state, rows[0].maybe_delivered),
        (PartState::Pending, true)
    );
    assert_eq!(store.resend(&channel, &lease4).await.unwrap().sent, 1);
    assert_eq!(inner.sent(), ["hello"]);
}

async fn the_send_again_knob_resends_what_cannot_be_settled(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    let lease = store.acquire("c1", "w1", LONG).await.unwrap();
    // At least once, as configured: the unknown outcome is tried again, not kept `uncertain`.
    let inner = Scripted::new(10, &[Step::Unknown]);
    let channel = store
        .channel(inner.clone().with_address(stand_in(Surface::Telegram)))
        .with_unknown_outcome(UnknownOutcome::SendAgain)
        .with_retry(at_once());
    channel
        .deliver(message("c1", "hello").with_ownership(lease.ownership()))
        .await
        .unwrap_err();
    assert_eq!(states(&store, "c1").await, [PartState::Pending]);
    let report = store.resend(&channel, &lease).await.unwrap();
    assert_eq!((report.sent, report.uncertain), (1, 0));
    assert_eq!(states(&store, "c1").await, [PartState::Sent]);
    assert_eq!(inner.sent(), ["hello"]);

    // A part its sender left `sending` (it died mid-send) is sent again by the resend too.
    let lease2 = store.acquire("c2", "w1", LONG).await.unwrap();
    let inner = Scripted::new(10, &[Step::Die]);
    let dying = store.channel(inner.clone().with_address(stand_in(Surface::Telegram)));
    let message = message("c2", "again").with_ownership(lease2.ownership());
    let died = tokio::spawn(async move { dying.deliver(message).await });
    assert!(died.await.is_err(), "the sender died mid-send");
    assert_eq!(states(&store, "c2").await, [PartState::Sending]);
    let channel = store
        .channel(inner.clone().with_address(stand_in(Surface::Telegram)))
        .with_unknown_outcome(UnknownOutcome::SendAgain);
    let report = store.resend(&channel, &lease2).await.unwrap();
    assert_eq!((report.sent, report.uncertain), (1, 0));
    assert_eq!(states(&store, "c2").await, [PartState::Sent]);
}

async fn uncertain_parts_are_reported_on_the_ledger(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    // On the store's own ledger, so operators can query it per conversation.
    let ledger = Ledger::new(store.durable_ledger().unwrap());
    let lease = store.acquire("c1", "w1", LONG).await.unwrap();
    let inner = Scripted::new(10, &[Step::Unknown]);
    let channel = store
        .channel(inner.clone().with_address(stand_in(Surface::Telegram)))
        .with_ledger(ledger.clone());
    channel
        .deliver(message("c1", "hello").with_ownership(lease.ownership()))
        .await
        .unwrap_err();
    // A sender that died mid-send leaves a part its restart cannot settle either.
    let lease2 = store.acquire("c2", "w1", LONG).await.unwrap();
    let dying = Scripted::new(10, &[Step::Die]);
    let dead = store.channel(dying.with_address(stand_in(Surface::Telegram)));
    let message2 = message("c2", "again").with_ownership(lease2.ownership());
    assert!(
        tokio::spawn(async move { dead.deliver(message2).await.map(drop) })
            .await
            .is_err()
    );
    let restarted = store
        .channel(Scripted::new(10, &[]).with_address(stand_in(Surface::Telegram)))
        .with_ledger(ledger.clone());
    assert_eq!(
        store.resend(&restarted, &lease2).await.unwrap().uncertain,
        1
    );

    let rows: Vec<(String, OutboxRecord)> = ledger
        .entries()
        .into_iter()
        .filter_map(|entry| match entry.record() {
            LedgerRecord::Outbox(record) => Some((
                entry.attribution().conversation().to_owned(),
                record.clone(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    for ((conversation, record), (want, restart)) in rows.iter().zip([("c1", false), ("c2", true)])
    {
        assert_eq!(conversation, want);
        assert!(
            matches!(record, OutboxRecord::Uncertain { part: 0, surface, after_restart, .. }
                if surface == "telegram" && *after_restart == restart),
            "{record:?}"
        );
    }
    let json = serde_json::to_string(&ledger.entries()).unwrap();
    assert!(
        !json.contains("hello") && !json.contains("again"),
        "never the text: {json}"
    );
}

async fn rows_are_refused_when_nothing_durable_is_named(backend: Backend) {
    // Not backend-specific, but cheap: the URL rules hold whatever the tests run on.
    let _ = backend;
    assert!(matches!(
        Store::open("sqlite::memory:").await,
        Err(StoreError::NotDurable)
    ));
    assert!(matches!(
        Store::open("mysql://localhost/x").await,
        Err(StoreError::UnsupportedUrl { scheme }) if scheme == "mysql"
    ));
    // A part committed elsewhere is not sendable through the outbox.
    let place = Backend::Sqlite.place();
    let store = Store::open(&place.url).await.unwrap();
    let channel = store.channel(Recorder::new());
    let elsewhere = Recorder::new();
    let committed = Outbound::new(message("c1", "hi"))
        .render(channel.renderer())
        .unwrap()
        .commit(&elsewhere)
        .await
        .unwrap();
    let error = channel
        .send(committed.into_parts().next().unwrap())
        .await
        .unwrap_err();
    assert!(!error.retryable());
    assert!(channel.inner().sent().is_empty());
}
