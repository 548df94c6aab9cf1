//! A message tied to a conversation's ownership is never sent once ownership is lost, by any
//! channel: the check is on the one typed path (`Outbound::commit`, then before every part), not
//! in each connector. (The HTTP connectors' tests, against their loopback fakes, are in
//! `channels_http.rs`.)

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use mesh_egress::channel::{
    BoxedChannel, Channel, Deliver, DeliveryError, PartReceipt, PlainText, Recorder, SendError,
    Stdout,
};
use mesh_egress::{AgentMessage, Attribution, CommitError, CommittedPart, Outbound, Turn};

/// A user-written channel that counts what reaches its `send`.
#[derive(Debug, Default)]
struct Counting {
    renderer: PlainText,
    sends: Arc<AtomicUsize>,
    /// Revokes this ownership after the first send (a lease lost mid-delivery).
    revoke_after_first: Option<mesh_egress::Ownership>,
}

impl Channel for Counting {
    type Renderer = PlainText;

    fn renderer(&self) -> &PlainText {
        &self.renderer
    }

    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
        self.sends.fetch_add(1, Ordering::SeqCst);
        if let Some(ownership) = &self.revoke_after_first {
            ownership.revoke();
        }
        std::future::ready(Ok(PartReceipt::new(part.idempotency_key())))
    }
}

fn turn() -> Turn {
    Turn::new(Attribution::new("bot", "conv-owned", "run-1"))
}

fn lost(result: Result<mesh_egress::channel::Receipt, DeliveryError>) -> bool {
    matches!(
        result,
        Err(DeliveryError::Commit(CommitError::OwnershipLost))
    )
}

#[tokio::test]
async fn no_channel_commits_a_message_whose_ownership_was_revoked() {
    let turn = turn();
    let msg = turn.message("Deployed **v2**.");
    turn.ownership().revoke();

    let recorder = Recorder::new();
    assert!(lost(recorder.deliver(msg.clone()).await));
    assert_eq!(recorder.attempts(), 0);

    let inner = Recorder::new();
    assert!(lost(
        BoxedChannel::new(inner.clone()).deliver(msg.clone()).await
    ));
    assert_eq!(inner.attempts(), 0);

    let counting = Counting::default();
    let sends = Arc::clone(&counting.sends);
    assert!(lost(counting.deliver(msg.clone()).await));
    assert_eq!(sends.load(Ordering::SeqCst), 0);

    // Stdout refuses before printing anything (the refusal is the typed error).
    assert!(lost(Stdout::new().deliver(msg.clone()).await));

    // By hand, through the typestate: the commit itself refuses.
    let rendered = Outbound::new(msg).render(&PlainText::new()).unwrap();
    assert!(matches!(
        rendered.commit(&Recorder::new()).await,
        Err(CommitError::OwnershipLost)
    ));
}

#[tokio::test]
async fn ownership_lost_mid_delivery_stops_before_the_next_part() {
    let turn = turn();
    let counting = Counting {
        renderer: PlainText::new().with_limit(12),
        revoke_after_first: Some(turn.ownership().clone()),
        ..Counting::default()
    };
    let sends = Arc::clone(&counting.sends);
    let msg = turn.message("First part here. Second part here. Third part here.");
    let error = counting.deliver(msg).await.unwrap_err();
    assert_eq!(sends.load(Ordering::SeqCst), 1);
    assert_eq!(error.delivered().len(), 1);
    assert!(
        error.is_ownership_lost(),
        "expected a lost ownership, got {error:?}"
    );
    let rest = match error {
        DeliveryError::Send { undelivered, .. } => undelivered,
        other => panic!("expected the rest back, got {other:?}"),
    };
    assert!(!rest.parts().is_empty());
    // Delivering the rest is refused too while ownership stays lost.
    assert!(
        counting
            .deliver(*rest)
            .await
            .is_err_and(|e| e.is_ownership_lost())
    );
    assert_eq!(sends.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_message_without_ownership_is_the_callers_to_check() {
    let turn = turn();
    turn.ownership().revoke();
    // `AgentMessage::new` carries no ownership: it is sent (documented on `AgentMessage::new`).
    let recorder = Recorder::new();
    recorder
        .deliver(AgentMessage::new("hi", turn.attribution().clone()))
        .await
        .unwrap();
    assert_eq!(recorder.sent(), ["hi"]);
}
