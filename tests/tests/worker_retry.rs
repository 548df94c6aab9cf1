//! Per-part retries on paused time, through the worker and a real store: a part whose surface
//! keeps failing with a 5xx is tried at exactly the backoff's instants (1 s doubling to the
//! 5-minute cap), never before, never on a pass in between, and after its twelfth attempt it is
//! `failed` with a ledger row and one `error` event at `mesh_egress::egress` naming the
//! conversation, never the text.
//!
//! Time: the runtime's clock is paused and moved only by `tokio::time::advance`. A task that
//! only yields keeps the runtime from ever idling, so the clock never jumps ahead while a query
//! is out on the database's thread or socket (auto-advance would otherwise move it to the next
//! timer, a lease renewal say); the store schedules retries on its own clock, which counts on
//! from Tokio's (migration 0005).

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
use mesh_egress::{Address, Bot, Cancellation, CommittedPart, Surface};
use tokio::time::Instant;

use store_support::{Backend, message};

const CONVERSATION: &str = "conv-5xx";
const TEXT: &str = "SECRET-PART-TEXT the deploy finished";

/// The instant of each attempt after the first, in seconds from it: the waits 1, 2, 4, … 256,
/// then the cap (300) twice, summed.
const SCHEDULE: [u64; 12] = [0, 1, 3, 7, 15, 31, 63, 127, 255, 511, 811, 1111];

/// A Slack channel whose every send fails like a 5xx (retryable, no wait asked) and whose lookup
/// finds the part absent, so each failure is a plain retry; it records when each attempt came.
#[derive(Clone)]
struct Failing {
    renderer: PlainText,
    address: Address,
    attempts: Arc<Mutex<Vec<Instant>>>,
}

impl Failing {
    fn new() -> Self {
        Self {
            renderer: PlainText::new(),
            address: SlackAddress::new("C0FAILING").into(),
            attempts: Arc::default(),
        }
    }

    fn attempts(&self) -> Vec<Instant> {
        self.attempts.lock().unwrap().clone()
    }
}

impl Channel for Failing {
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
        self.attempts.lock().unwrap().push(Instant::now());
        std::future::ready(Err(SendError::new(part, "server error (HTTP 503)")))
    }

    fn look_up(
        &self,
        _part: &CommittedPart,
        _since: SystemTime,
    ) -> impl Future<Output = PartLookup> + Send {
        std::future::ready(PartLookup::NotFound)
    }
}

impl SurfaceClient for Failing {
    fn surface(&self) -> Surface {
        Surface::Slack
    }

    fn channel_for(&self, address: &Address) -> Result<BoxedChannel, UnservedAddress> {
        if *address == self.address {
            Ok(BoxedChannel::new(self.clone()))
        } else {
            Err(UnservedAddress::new(Surface::Slack, address.clone()))
        }
    }
}

/// Moves the paused clock to `at` (never back).
async fn advance_to(at: Instant) {
    let now = Instant::now();
    if at > now {
        tokio::time::advance(at - now).await;
    }
}

async fn a_5xx_part_is_retried_on_the_backoff_schedule_then_failed(backend: Backend) {
    // Keeps the runtime busy so the paused clock moves only when the test moves it.
    let spinner = tokio::spawn(async {
        loop {
            tokio::task::yield_now().await;
        }
    });
    let (events, _guard) = support::capture();
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    let retry = PartRetry::default().with_jitter(0.0);
    let ledger = Ledger::in_memory();
    let channel = Failing::new();
    let durable = store
        .channel(channel.clone())
        .with_retry(retry)
        .with_ledger(ledger.clone());
    let worker = Bot::new()
        .with_store(store.clone())
        .with_client(channel.clone())
        .with_ledger(ledger.clone())
        .worker("w1")
        .expect("a store")
        .with_lease_ttl(Duration::from_secs(30))
        .with_part_retry(retry);
    let shutdown = Cancellation::new();

    // The first attempt: the turn's own send.
    let t0 = Instant::now();
    assert!(durable.deliver(message(CONVERSATION, TEXT)).await.is_err());
    assert_eq!(channel.attempts(), [t0]);

    for (k, &at) in SCHEDULE.iter().enumerate().skip(1) {
        let due = t0 + Duration::from_secs(at);
        // The worker would sleep exactly until the part is due.
        assert_eq!(
            store.next_attempt_on(Surface::Slack).await.unwrap(),
            Some(due - Instant::now()),
            "attempt {}",
            k + 1
        );
        // A millisecond early: a pass sends nothing.
        advance_to(due - Duration::from_millis(1)).await;
        worker.pass(&shutdown).await.unwrap();
        assert_eq!(channel.attempts().len(), k, "attempt {} went early", k + 1);
        // On time: the next pass tries it.
        advance_to(due).await;
        let report = worker.pass(&shutdown).await.unwrap();
        let attempts = channel.attempts();
        assert_eq!(attempts.len(), k + 1, "attempt {} did not go", k + 1);
        assert_eq!(attempts[k], due, "attempt {}", k + 1);
        // And a second pass at the same instant does not try it again.
        worker.pass(&shutdown).await.unwrap();
        assert_eq!(
            channel.attempts().len(),
            k + 1,
            "attempt {} went twice",
            k + 1
        );
        if k + 1 == SCHEDULE.len() {
            assert_eq!(report.parts_failed, 1, "{report:?}");
        }
    }

    // After the twelfth attempt: failed, on the ledger, one error event; never tried again.
    let parts = store.parts(CONVERSATION).await.unwrap();
    assert_eq!((parts[0].state, parts[0].attempts), (PartState::Failed, 12));
    assert_eq!(store.next_attempt_on(Surface::Slack).await.unwrap(), None);
    advance_to(t0 + Duration::from_secs(3 * 3600)).await;
    worker.pass(&shutdown).await.unwrap();
    assert_eq!(channel.attempts().len(), 12);

    let rows: Vec<OutboxRecord> = ledger
        .entries()
        .into_iter()
        .filter_map(|entry| match entry.into_record() {
            LedgerRecord::Outbox(record) => Some(record),
            _ => None,
        })
        .collect();
    assert_eq!(
        rows,
        [OutboxRecord::AttemptsExhausted {
            delivery: parts[0].delivery.clone(),
            part: 0,
            surface: "slack".to_owned(),
            attempts: 12,
        }]
    );
    let errors: Vec<_> = events
        .events()
        .into_iter()
        .filter(|e| e.target == "mesh_egress::egress")
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].field("conversation"), Some(CONVERSATION));
    assert_eq!(errors[0].field("attempts"), Some("12"));
    let everything = format!("{:?}", events.events());
    assert!(
        !everything.contains("SECRET-PART-TEXT"),
        "the part's text reached an event"
    );
    spinner.abort();
}

#[tokio::test(start_paused = true)]
async fn sqlite_a_5xx_part_is_retried_on_the_backoff_schedule_then_failed() {
    a_5xx_part_is_retried_on_the_backoff_schedule_then_failed(Backend::Sqlite).await;
}

#[tokio::test(start_paused = true)]
async fn pg_a_5xx_part_is_retried_on_the_backoff_schedule_then_failed() {
    a_5xx_part_is_retried_on_the_backoff_schedule_then_failed(Backend::Postgres).await;
}

/// Waits (bounded, in real time: the store's queries run on other threads) until `channel` has
/// seen `count` attempts; how many it saw.
async fn settle(channel: &Failing, count: usize) -> usize {
    let bound = std::time::Instant::now() + Duration::from_secs(10);
    while channel.attempts().len() < count && std::time::Instant::now() < bound {
        tokio::task::yield_now().await;
    }
    channel.attempts().len()
}

/// Lets a running worker do whatever it would do now, for a short real-time while.
async fn let_run() {
    let bound = std::time::Instant::now() + Duration::from_millis(300);
    while std::time::Instant::now() < bound {
        tokio::task::yield_now().await;
    }
}

/// A running worker with nothing else to do sleeps until the next part's backoff ends, not a
/// poll interval (here an hour) and not in a loop: each retry goes at exactly its instant, and
/// nothing goes in between.
async fn a_running_worker_wakes_when_the_backoff_ends_not_at_its_poll(backend: Backend) {
    let spinner = tokio::spawn(async {
        loop {
            tokio::task::yield_now().await;
        }
    });
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    let retry = PartRetry::default().with_jitter(0.0);
    let channel = Failing::new();
    let durable = store.channel(channel.clone()).with_retry(retry);
    let worker = std::sync::Arc::new(
        Bot::new()
            .with_store(store.clone())
            .with_client(channel.clone())
            .worker("w1")
            .expect("a store")
            .with_lease_ttl(Duration::from_secs(30))
            .with_poll_interval(Duration::from_secs(3600))
            .with_part_retry(retry),
    );
    let t0 = Instant::now();
    assert!(durable.deliver(message(CONVERSATION, TEXT)).await.is_err());
    let shutdown = Cancellation::new();
    let running = tokio::spawn({
        let (worker, shutdown) = (worker.clone(), shutdown.clone());
        async move { worker.run(&shutdown).await }
    });

    for (k, &at) in SCHEDULE.iter().enumerate().take(5).skip(1) {
        let due = t0 + Duration::from_secs(at);
        advance_to(due - Duration::from_millis(1)).await;
        let_run().await;
        assert_eq!(channel.attempts().len(), k, "attempt {} went early", k + 1);
        advance_to(due).await;
        assert_eq!(
            settle(&channel, k + 1).await,
            k + 1,
            "attempt {} did not go",
            k + 1
        );
        assert_eq!(channel.attempts()[k], due, "attempt {}", k + 1);
        let_run().await;
        assert_eq!(
            channel.attempts().len(),
            k + 1,
            "attempt {} went twice",
            k + 1
        );
    }

    shutdown.cancel();
    running.await.unwrap().unwrap();
    spinner.abort();
}

#[tokio::test(start_paused = true)]
async fn sqlite_a_running_worker_wakes_when_the_backoff_ends_not_at_its_poll() {
    a_running_worker_wakes_when_the_backoff_ends_not_at_its_poll(Backend::Sqlite).await;
}

#[tokio::test(start_paused = true)]
async fn pg_a_running_worker_wakes_when_the_backoff_ends_not_at_its_poll() {
    a_running_worker_wakes_when_the_backoff_ends_not_at_its_poll(Backend::Postgres).await;
}
