//! Per-part retries under the fencing rules: the backoff and the attempt limit are the
//! surface's answers counted, so neither overrides what a lease says. A stale sender whose
//! lease moved on during its last allowed attempt gives nothing up (its `failed` mark is
//! fenced like every other mark, so the row stays for the new holder, with no ledger row and
//! no error event), and a part handed back because the ownership was lost is due again at
//! once and never given up for it.

mod store_support;
mod support;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use mesh_egress::address::SlackAddress;
use mesh_egress::channel::{
    BoxedChannel, Channel, Deliver, PartLookup, PartReceipt, PlainText, SendError, SurfaceClient,
    UnservedAddress,
};
use mesh_egress::ledger::{Ledger, LedgerRecord, OutboxRecord};
use mesh_egress::store::{PartRetry, PartState, Store};
use mesh_egress::{Address, CommittedPart, Surface};

use store_support::{Backend, LONG, message};

const CONVERSATION: &str = "conv-fenced";

/// What the channel does with a send.
#[derive(Clone, Copy)]
enum Act {
    /// Waits until the sender's lease has lapsed, lets holder `b` take the conversation, then
    /// fails like a 5xx (the lookup finds nothing).
    LoseLeaseThen5xx,
    /// Stops before a try: the conversation's ownership no longer covers it.
    OwnershipLost,
    /// Takes the part.
    Accept,
}

#[derive(Clone)]
struct Slack {
    renderer: PlainText,
    store: Store,
    act: Act,
    sent: Arc<Mutex<Vec<String>>>,
}

impl Slack {
    fn new(store: &Store, act: Act) -> Self {
        Self {
            renderer: PlainText::new(),
            store: store.clone(),
            act,
            sent: Arc::default(),
        }
    }
}

impl Channel for Slack {
    type Renderer = PlainText;

    fn renderer(&self) -> &PlainText {
        &self.renderer
    }

    fn address(&self) -> Address {
        SlackAddress::new("C0FENCED").into()
    }

    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
        let (act, store, sent) = (self.act, self.store.clone(), Arc::clone(&self.sent));
        async move {
            match act {
                Act::LoseLeaseThen5xx => {
                    // Bounded: the sender's lease is 150 ms long.
                    // (Dropping b's handle leaves its lease, the conversation's latest, stored.)
                    let mut taken = false;
                    for _ in 0..100 {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        if store.acquire(CONVERSATION, "b", LONG).await.is_ok() {
                            taken = true;
                            break;
                        }
                    }
                    assert!(taken, "b took the conversation");
                    Err(SendError::new(part, "server error (HTTP 503)"))
                }
                Act::OwnershipLost => Err(SendError::ownership_lost(part)),
                Act::Accept => {
                    sent.lock().unwrap().push(part.text().to_owned());
                    Ok(PartReceipt::new(format!("m{}", part.index())))
                }
            }
        }
    }

    fn look_up(
        &self,
        _part: &CommittedPart,
        _since: SystemTime,
    ) -> impl Future<Output = PartLookup> + Send {
        std::future::ready(PartLookup::NotFound)
    }
}

impl SurfaceClient for Slack {
    fn surface(&self) -> Surface {
        Surface::Slack
    }

    fn channel_for(&self, address: &Address) -> Result<BoxedChannel, UnservedAddress> {
        Err(UnservedAddress::new(Surface::Slack, address.clone()))
    }
}

/// One attempt per part: the first failure is the last allowed one.
fn one_attempt() -> PartRetry {
    PartRetry::new(Duration::ZERO, Duration::ZERO, 1)
}

fn exhausted(ledger: &Ledger) -> Vec<OutboxRecord> {
    ledger
        .entries()
        .into_iter()
        .filter_map(|entry| match entry.into_record() {
            LedgerRecord::Outbox(record @ OutboxRecord::AttemptsExhausted { .. }) => Some(record),
            _ => None,
        })
        .collect()
}

async fn a_stale_senders_last_attempt_gives_nothing_up(backend: Backend) {
    let (events, _guard) = support::capture();
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    let ledger = Ledger::in_memory();
    let lease = store
        .acquire(CONVERSATION, "a", Duration::from_millis(150))
        .await
        .unwrap();
    let stale = store
        .channel(Slack::new(&store, Act::LoseLeaseThen5xx))
        .with_retry(one_attempt())
        .with_ledger(ledger.clone());

    let error = stale
        .deliver(message(CONVERSATION, "the deploy finished").with_ownership(lease.ownership()))
        .await;
    assert!(error.is_err());

    // Its `failed` mark did not land: the row is as a's claim left it, for b to settle.
    let parts = store.parts(CONVERSATION).await.unwrap();
    assert_eq!(parts[0].state, PartState::Sending, "{parts:?}");
    assert!(exhausted(&ledger).is_empty(), "{:?}", exhausted(&ledger));
    let gave_up: Vec<_> = events
        .events()
        .into_iter()
        .filter(|e| e.target == "mesh_egress::egress")
        .collect();
    assert!(gave_up.is_empty(), "{gave_up:?}");

    // b, the conversation's holder now, settles it by the unknown-outcome rules and sends it.
    let b = store.acquire(CONVERSATION, "b", LONG).await.unwrap();
    let fresh = Slack::new(&store, Act::Accept);
    let report = store
        .resend(&store.channel(fresh.clone()), &b)
        .await
        .unwrap();
    assert_eq!(report.sent, 1, "{report:?}");
    assert_eq!(*fresh.sent.lock().unwrap(), ["the deploy finished"]);
    assert_eq!(
        store.parts(CONVERSATION).await.unwrap()[0].state,
        PartState::Sent
    );
}

async fn a_part_handed_back_for_lost_ownership_is_due_at_once_and_never_given_up(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    let ledger = Ledger::in_memory();
    let lease = store.acquire(CONVERSATION, "a", LONG).await.unwrap();
    // Backoff a minute long, one attempt: neither may apply to a hand-back.
    let retry = PartRetry::new(Duration::from_secs(60), Duration::from_secs(300), 1);
    let channel = store
        .channel(Slack::new(&store, Act::OwnershipLost))
        .with_retry(retry)
        .with_ledger(ledger.clone());

    assert!(
        channel
            .deliver(message(CONVERSATION, "the deploy finished").with_ownership(lease.ownership()))
            .await
            .is_err()
    );

    let parts = store.parts(CONVERSATION).await.unwrap();
    assert_eq!(parts[0].state, PartState::Pending, "{parts:?}");
    assert!(exhausted(&ledger).is_empty());
    assert_eq!(
        store.next_attempt_on(Surface::Slack).await.unwrap(),
        None,
        "no backoff runs for it"
    );
    // The holder's next resend sends it at once.
    let fresh = Slack::new(&store, Act::Accept);
    let report = store
        .resend(&store.channel(fresh.clone()).with_retry(retry), &lease)
        .await
        .unwrap();
    assert_eq!((report.sent, report.stopped), (1, false), "{report:?}");
    assert_eq!(*fresh.sent.lock().unwrap(), ["the deploy finished"]);
}

#[tokio::test]
async fn sqlite_a_stale_senders_last_attempt_gives_nothing_up() {
    a_stale_senders_last_attempt_gives_nothing_up(Backend::Sqlite).await;
}

#[tokio::test]
async fn pg_a_stale_senders_last_attempt_gives_nothing_up() {
    a_stale_senders_last_attempt_gives_nothing_up(Backend::Postgres).await;
}

#[tokio::test]
async fn sqlite_a_part_handed_back_for_lost_ownership_is_due_at_once_and_never_given_up() {
    a_part_handed_back_for_lost_ownership_is_due_at_once_and_never_given_up(Backend::Sqlite).await;
}

#[tokio::test]
async fn pg_a_part_handed_back_for_lost_ownership_is_due_at_once_and_never_given_up() {
    a_part_handed_back_for_lost_ownership_is_due_at_once_and_never_given_up(Backend::Postgres)
        .await;
}
