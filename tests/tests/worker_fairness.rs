//! A worker reaches every conversation with open parts within a bounded number of passes,
//! however many others are unsendable: 100 conversations whose parts cannot go (another holder
//! has each one's lease; the surface answers "not now" to each; the worker's client cannot
//! send to their address) and one sendable conversation behind them, committed last and last
//! in every order. A pass looks at one page of 64 destinations, so before the walk had a
//! cursor the 65th was never reached.

mod store_support;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mesh_egress::address::SlackAddress;
use mesh_egress::channel::{
    BoxedChannel, Channel, PartReceipt, PlainText, SendError, SurfaceClient, UnservedAddress,
};
use mesh_egress::store::{PartRetry, PartState, Store};
use mesh_egress::worker::Worker;
use mesh_egress::{Address, Bot, Cancellation, CommittedPart, Outbound, Surface};

use store_support::*;

both_backends!(
    a_sendable_conversation_behind_100_held_ones_goes_within_the_bound,
    a_sendable_conversation_behind_100_the_surface_refuses_goes_within_the_bound,
    a_sendable_conversation_behind_100_the_client_cannot_serve_goes_within_the_bound,
);

/// How many unsendable conversations stand in front.
const BUSY: usize = 100;
/// The bound: ⌈101 / 64⌉ + 1 passes.
const BOUND_PASSES: usize = 3;
const READY: &str = "zzz-ready";

fn busy(i: usize) -> String {
    format!("busy-{i:03}")
}

/// Commits one part for `conversation` through a channel to `address`, sending nothing.
async fn commit(store: &Store, conversation: &str, address: Address) {
    let channel = store.channel(Picky::new(address));
    let rendered = Outbound::new(message(conversation, &format!("hello {conversation}")))
        .render(&PlainText::new())
        .unwrap();
    let committed = rendered.commit(&channel).await.unwrap();
    drop(committed.into_parts());
}

/// The 100 busy conversations, then the ready one (committed last).
async fn seed(store: &Store, busy_address: &Address, ready_address: &Address) {
    for i in 0..BUSY {
        commit(store, &busy(i), busy_address.clone()).await;
    }
    commit(store, READY, ready_address.clone()).await;
}

/// A channel that answers "not now" to the busy conversations' parts and takes the ready one's;
/// as a client, it serves only the addresses it is told to.
#[derive(Clone)]
struct Picky {
    renderer: PlainText,
    address: Address,
    served: Arc<Vec<Address>>,
    refuse_busy: bool,
    sent: Arc<Mutex<Vec<String>>>,
    attempts: Arc<Mutex<HashMap<String, usize>>>,
}

impl Picky {
    fn new(address: Address) -> Self {
        Self {
            renderer: PlainText::new(),
            served: Arc::new(vec![address.clone()]),
            address,
            refuse_busy: false,
            sent: Arc::default(),
            attempts: Arc::default(),
        }
    }

    fn serving(mut self, served: Vec<Address>) -> Self {
        self.served = Arc::new(served);
        self
    }

    fn refusing_busy(mut self) -> Self {
        self.refuse_busy = true;
        self
    }

    fn sent(&self) -> Vec<String> {
        self.sent.lock().unwrap().clone()
    }

    fn attempts(&self, conversation: &str) -> usize {
        self.attempts
            .lock()
            .unwrap()
            .get(conversation)
            .copied()
            .unwrap_or(0)
    }
}

impl Channel for Picky {
    type Renderer = PlainText;

    fn renderer(&self) -> &PlainText {
        &self.renderer
    }

    fn address(&self) -> Address {
        self.address.clone()
    }

    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
        let conversation = part.attribution().conversation().to_owned();
        *self
            .attempts
            .lock()
            .unwrap()
            .entry(conversation.clone())
            .or_default() += 1;
        let result = if self.refuse_busy && conversation != READY {
            Err(SendError::new(part, "not now").with_retry_after(Duration::from_secs(1)))
        } else {
            let mut sent = self.sent.lock().unwrap();
            sent.push(conversation);
            Ok(PartReceipt::new(format!("m{}", sent.len())))
        };
        std::future::ready(result)
    }
}

impl SurfaceClient for Picky {
    fn surface(&self) -> Surface {
        self.address.surface()
    }

    fn channel_for(&self, address: &Address) -> Result<BoxedChannel, UnservedAddress> {
        if self.served.contains(address) {
            let mut channel = self.clone();
            channel.address = address.clone();
            Ok(BoxedChannel::new(channel))
        } else {
            Err(UnservedAddress::new(self.surface(), address.clone()))
        }
    }
}

fn worker(store: &Store, client: Picky) -> Worker {
    Bot::new()
        .with_store(store.clone())
        .with_client(client)
        .worker("w1")
        .expect("a store")
        .with_lease_ttl(Duration::from_secs(30))
        .with_poll_interval(Duration::from_millis(10))
}

/// Runs passes until the ready conversation's part is sent, at most `BOUND_PASSES`; how many
/// it took (`None`: not within the bound).
async fn passes_until_ready(store: &Store, worker: &Worker) -> Option<usize> {
    let shutdown = Cancellation::new();
    for pass in 1..=BOUND_PASSES {
        worker.pass(&shutdown).await.unwrap();
        if states(store, READY).await == [PartState::Sent] {
            return Some(pass);
        }
    }
    None
}

async fn a_sendable_conversation_behind_100_held_ones_goes_within_the_bound(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    seed(&store, &Address::Plain, &Address::Plain).await;
    // Another holder (a turn in each conversation, say) has every busy conversation's lease.
    let mut held = Vec::new();
    for i in 0..BUSY {
        held.push(store.acquire(&busy(i), "turns", LONG).await.unwrap());
    }
    let client = Picky::new(Address::Plain);
    let worker = worker(&store, client.clone());

    let passes = passes_until_ready(&store, &worker).await;
    assert!(passes.is_some(), "not sent within {BOUND_PASSES} passes");
    assert_eq!(client.sent(), [READY]);
    // The held conversations were left to their holder, untouched.
    for i in [0, 63, 64, 99] {
        assert_eq!(states(&store, &busy(i)).await, [PartState::Pending]);
        assert_eq!(client.attempts(&busy(i)), 0);
    }
    drop(held);
}

async fn a_sendable_conversation_behind_100_the_surface_refuses_goes_within_the_bound(
    backend: Backend,
) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    seed(&store, &Address::Plain, &Address::Plain).await;
    let client = Picky::new(Address::Plain).refusing_busy();
    // A first step far longer than these passes take: what the passes do is the question.
    let worker = worker(&store, client.clone()).with_part_retry(PartRetry::new(
        Duration::from_secs(60),
        Duration::from_secs(300),
        12,
    ));

    let passes = passes_until_ready(&store, &worker).await;
    assert!(passes.is_some(), "not sent within {BOUND_PASSES} passes");
    assert_eq!(client.sent(), [READY]);
    // One more pass: nothing is due.
    worker.pass(&Cancellation::new()).await.unwrap();
    // Each refused part waits for its backoff: tried once in those passes, not once a pass.
    for i in 0..BUSY {
        assert_eq!(client.attempts(&busy(i)), 1, "{}", busy(i));
        let parts = store.parts(&busy(i)).await.unwrap();
        assert_eq!((parts[0].state, parts[0].attempts), (PartState::Pending, 1));
    }
}

async fn a_sendable_conversation_behind_100_the_client_cannot_serve_goes_within_the_bound(
    backend: Backend,
) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    let elsewhere: Address = SlackAddress::new("C0ELSEWHERE").into();
    let ready: Address = SlackAddress::new("C0READY").into();
    seed(&store, &elsewhere, &ready).await;
    // The worker's client sends to the ready conversation's channel only: the busy ones stay
    // pending for a worker that can (nothing about them changes, so only the walk's cursor
    // gets past them).
    let client = Picky::new(ready.clone()).serving(vec![ready]);
    let worker = worker(&store, client.clone());

    let passes = passes_until_ready(&store, &worker).await;
    assert!(passes.is_some(), "not sent within {BOUND_PASSES} passes");
    assert_eq!(passes, Some(2), "the first page holds 64 of the busy ones");
    assert_eq!(client.sent(), [READY]);
    assert_eq!(states(&store, &busy(0)).await, [PartState::Pending]);
}
