//! What streaming a 600-token reply onto each surface costs: the API calls each surface gets,
//! and how long each block waits between its commit and the surface confirming it (the delay
//! the conversation's rate budget adds). A small timed harness (not criterion: one run is 12 s
//! of wall time by design), one run per surface against the loopback fakes.
//!
//! The fake provider streams 600 tokens at 50 tokens/s (one SSE event per token, a paragraph
//! break every 25 tokens, so 24 blocks); the front door (`Bot::send_to`, an `#[egress_boundary]`
//! handler's `Router::answer_stream`) shows them on the surface with its default mode and budget.
//!
//! `cargo bench -p mesh-egress --bench surface_stream`

#[path = "support/paced.rs"]
mod paced;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mesh_egress::Surface;
use mesh_egress::channel::SlackMarkdown;
use mesh_egress::channel::stream::{
    ReplyStream, StreamMode, StreamOpenError, StreamProgress, StreamingChannel,
};
use mesh_egress::channel::{
    Channel, DiscordChannel, PartReceipt, SendError, SlackChannel, TelegramChannel,
};
use mesh_egress::model::{ChatMessage, ChatRequest, OpenAiCompatible, Router};
use mesh_egress::testing::FakeApi;
use mesh_egress::{
    Address, AnswerStream, Attribution, Bot, CommitError, CommitRecord, CommittedPart, DeliveryId,
    EgressError, Turn, egress_boundary,
};
use paced::{PARAGRAPH, PER_TOKEN, paced_router};
use tokio::time::Instant;

const TOKENS: usize = 600;
const TOKEN: &str = "123456:bench-SECRET";

/// When each block was committed, first shown (a preview counts) and confirmed.
#[derive(Default)]
struct Times {
    committed: HashMap<DeliveryId, (Instant, String)>,
    shown: HashMap<DeliveryId, Instant>,
    confirmed: HashMap<DeliveryId, Instant>,
}

/// A streaming connector that notes those instants.
struct Timed<C> {
    inner: C,
    times: Arc<Mutex<Times>>,
}

impl<C: StreamingChannel> Channel for Timed<C> {
    type Renderer = C::Renderer;

    fn renderer(&self) -> &C::Renderer {
        self.inner.renderer()
    }

    fn address(&self) -> mesh_egress::Address {
        self.inner.address()
    }

    fn commit(
        &self,
        record: &CommitRecord<'_>,
    ) -> impl Future<Output = Result<(), CommitError>> + Send {
        self.times
            .lock()
            .expect("not poisoned")
            .committed
            .insert(record.delivery, (Instant::now(), record.parts.join("")));
        self.inner.commit(record)
    }

    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
        self.inner.send(part)
    }
}

impl<C: StreamingChannel> StreamingChannel for Timed<C> {
    fn stream_mode(&self) -> StreamMode {
        self.inner.stream_mode()
    }

    fn open_stream(&self, attribution: &Attribution) -> Result<ReplyStream, StreamOpenError> {
        let mut stream = self.inner.open_stream(attribution)?;
        let times = Arc::clone(&self.times);
        stream.observe(move |progress: &StreamProgress<'_>| {
            let now = Instant::now();
            let mut times = times.lock().expect("not poisoned");
            let Times {
                committed,
                shown,
                confirmed,
            } = &mut *times;
            for (id, (_, text)) in committed.iter() {
                if !shown.contains_key(id)
                    && progress
                        .updates()
                        .iter()
                        .any(|u| u.text().contains(text.as_str()))
                {
                    shown.insert(*id, now);
                }
            }
            for (part, _) in progress.newly_confirmed() {
                confirmed.entry(part.delivery_id()).or_insert(now);
            }
        });
        Ok(stream)
    }
}

/// The model's streamed answer.
#[egress_boundary(interactive)]
async fn answer(
    turn: &Turn,
    router: &Arc<Router<OpenAiCompatible>>,
) -> Result<AnswerStream, EgressError> {
    Ok(router.answer_stream(turn, ChatRequest::new(vec![ChatMessage::user("status?")])))
}

async fn one_run<C: StreamingChannel>(label: &str, channel: C, api: &FakeApi) {
    let (_provider, router) = paced_router(TOKENS).await;
    let router = Arc::new(router);
    let bot = Bot::new();
    let turn = bot.turn(Address::Plain, Attribution::new("bench", "c", "r"));
    let times = Arc::new(Mutex::new(Times::default()));
    let channel = Timed {
        inner: channel,
        times: Arc::clone(&times),
    };
    let reply = answer(&turn, &router).await;
    let delivery = bot
        .send_to(&turn, &channel, reply)
        .await
        .expect("delivered");
    drop(delivery);
    let times = times.lock().expect("not poisoned");
    let blocks = times.committed.len();
    let waits = |after: &HashMap<DeliveryId, Instant>| {
        let mut waits: Vec<Duration> = times
            .committed
            .iter()
            .filter_map(|(id, (at, _))| after.get(id).map(|c| c.saturating_duration_since(*at)))
            .collect();
        waits.sort();
        let median = waits.get(waits.len() / 2).copied().unwrap_or_default();
        let max = waits.last().copied().unwrap_or_default();
        (
            waits.len(),
            median.as_secs_f64() * 1e3,
            max.as_secs_f64() * 1e3,
        )
    };
    let (shown, shown_median, shown_max) = waits(&times.shown);
    let (confirmed, confirmed_median, confirmed_max) = waits(&times.confirmed);
    let mut calls: BTreeMap<String, usize> = BTreeMap::new();
    for call in api.calls() {
        *calls.entry(call.method).or_default() += 1;
    }
    let total: usize = calls.values().sum();
    println!("{label}: {blocks} blocks, {total} calls {calls:?}");
    println!(
        "    commit -> shown:     {shown}/{blocks}, median {shown_median:.0} ms, max {shown_max:.0} ms"
    );
    println!(
        "    commit -> confirmed: {confirmed}/{blocks}, median {confirmed_median:.0} ms, max {confirmed_max:.0} ms"
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    println!(
        "{TOKENS} tokens at {} tokens/s, a block every {PARAGRAPH} tokens, default budgets",
        1000 / PER_TOKEN.as_millis()
    );
    let api = FakeApi::start(Surface::Slack, TOKEN).await.expect("fake");
    let slack = SlackChannel::new(TOKEN, "C024BE91L")
        .base_url(api.base_url())
        .in_thread("1700000000.000100")
        .with_stream_recipient("U0123ABCD", "T0123ABCD")
        .with_renderer(SlackMarkdown::new());
    one_run("slack stream", slack, &api).await;

    let api = FakeApi::start(Surface::Telegram, TOKEN)
        .await
        .expect("fake");
    let private = TelegramChannel::new(TOKEN, "123456789").base_url(api.base_url());
    one_run("telegram private", private, &api).await;

    let api = FakeApi::start(Surface::Telegram, TOKEN)
        .await
        .expect("fake");
    let group = TelegramChannel::new(TOKEN, "-1001234567890").base_url(api.base_url());
    one_run("telegram group", group, &api).await;

    let api = FakeApi::start(Surface::Discord, TOKEN).await.expect("fake");
    let discord = DiscordChannel::new(TOKEN, "1100000000000000001").base_url(api.base_url());
    one_run("discord", discord, &api).await;
}
