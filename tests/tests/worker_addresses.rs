//! One worker serving many conversations, on both backends: every part and promise is stored
//! with its conversation's address, and the worker, holding surface clients rather than
//! channels, sends each to its own chat (the loopback fakes record the destination of every
//! call they receive). A surface the worker has no client for is left pending and reported
//! once; a channel to an address no reader could trust is refused at commit.

mod store_support;
mod support;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use mesh_egress::address::{DiscordAddress, SlackAddress};
use mesh_egress::channel::SendPolicy;
use mesh_egress::channel::{
    BoxedChannel, Channel, Deliver, DeliveryError, DiscordClient, PartLookup, PartReceipt,
    PlainText, Recorder, SendError, SlackChannel, SlackClient, SurfaceClient,
};
use mesh_egress::degrade::{DegradationPolicy, Mode, Reply};
use mesh_egress::store::{
    CommitmentStatus, FollowUpPlan, FollowUpTask, PartState, Store, StoreError,
};
use mesh_egress::testing::FakeApi;
use mesh_egress::worker::Worker;
use mesh_egress::{
    Address, AgentMessage, Attribution, Bot, Cancellation, CommitError, CommitRecord,
    CommittedPart, EgressError, Surface, Turn, egress_boundary,
};

use store_support::{Backend, LONG};

both_backends!(
    one_worker_keeps_every_conversations_promise_and_leftover_part_in_its_own_chat,
    a_channel_to_an_address_no_reader_could_trust_commits_nothing,
);

const SLACK_TOKEN: &str = "xoxb-addresses-SECRET";
const DISCORD_TOKEN: &str = "discord-addresses-SECRET";
const HANDLER: &str = "answer";
/// How long any worker run in these tests may take.
const BOUND: Duration = Duration::from_secs(20);

fn policy() -> SendPolicy {
    SendPolicy::new()
        .max_tries(2)
        .backoff(Duration::from_millis(1))
        .max_wait(Duration::from_millis(200))
        .request_timeout(Duration::from_secs(2))
}

fn slack_client(api: &FakeApi) -> SlackClient<PlainText> {
    SlackClient::new(SLACK_TOKEN)
        .with_renderer(PlainText::new())
        .base_url(api.base_url())
        .policy(policy())
}

fn discord_client(api: &FakeApi) -> DiscordClient<PlainText> {
    DiscordClient::new(DISCORD_TOKEN)
        .with_renderer(PlainText::new())
        .base_url(api.base_url())
        .policy(policy())
}

/// The re-run turn names its conversation and the address it was given, so each answer shows
/// where the worker believed it was going.
#[egress_boundary(interactive)]
async fn answer(turn: &Turn, _input: serde_json::Value) -> Result<AgentMessage, EgressError> {
    let text = format!(
        "answer for {} at {}",
        turn.attribution().conversation(),
        turn.address()
    );
    Ok(turn.message(text))
}

/// A worker built from the one door: a bot with the store, `clients` and the route `HANDLER`.
fn worker_of(store: &Store, holder: &str, clients: Vec<Arc<dyn SurfaceClient>>) -> Worker {
    let bot = Bot::new().with_store(store.clone()).with_clients(clients);
    let _route = bot.route(HANDLER, |turn: Turn, input: serde_json::Value| async move {
        answer(&turn, input).await
    });
    bot.worker(holder).expect("a store")
}

/// A channel whose sender dies mid-send, after the outbox claimed the part: the row stays
/// `sending`, as a killed process leaves it.
struct Dying<C>(C);

impl<C: Channel> Channel for Dying<C> {
    type Renderer = C::Renderer;

    fn renderer(&self) -> &C::Renderer {
        self.0.renderer()
    }

    fn address(&self) -> Address {
        self.0.address()
    }

    fn commit(
        &self,
        record: &CommitRecord<'_>,
    ) -> impl Future<Output = Result<(), CommitError>> + Send {
        self.0.commit(record)
    }

    fn look_up(
        &self,
        part: &CommittedPart,
        since: SystemTime,
    ) -> impl Future<Output = PartLookup> + Send {
        self.0.look_up(part, since)
    }

    async fn send(&self, _part: CommittedPart) -> Result<PartReceipt, SendError> {
        panic!("the sender died mid-send")
    }
}

/// The model is down: the boundary records it on the turn and holds, with `policy`'s promise.
#[egress_boundary(interactive, policy = policy)]
fn model_down(turn: &Turn, policy: &DegradationPolicy) -> Result<AgentMessage, EgressError> {
    Err(EgressError::transport(
        "upstream 503",
        turn.attribution().clone(),
    ))
}

/// A turn in `conversation` at `address` whose model is down: its holding line goes to the
/// conversation's own channel (made from `client` for the address) and its promise is stored
/// for that channel, before the line goes. The holding line's text.
async fn hold(
    store: &Store,
    client: &dyn SurfaceClient,
    conversation: &str,
    address: &Address,
) -> String {
    let lease = store.acquire(conversation, "bot", LONG).await.unwrap();
    let turn = Turn::new(Attribution::new("bot", conversation, "r1"))
        .with_address(address.clone())
        .with_ownership(lease.ownership());
    let durable = store.channel(client.channel_for(turn.address()).unwrap());
    let policy = DegradationPolicy::default().with_follow_up(Duration::ZERO, 2);
    let reply = model_down(&turn, &policy);
    let Reply::Holding {
        message,
        commitment,
    } = &reply
    else {
        panic!("expected a holding line, got {reply:?}");
    };
    let line = message.body().as_str().to_owned();
    let task = FollowUpTask::new(HANDLER, serde_json::json!("status?"), Mode::Interactive);
    durable
        .keep_commitment(
            commitment,
            &task,
            FollowUpPlan::new(Duration::ZERO, Duration::ZERO, 2),
        )
        .await
        .unwrap();
    durable.deliver(reply).await.unwrap();
    store.release(lease).await.unwrap();
    line
}

/// The texts `api` received, per destination, in order.
fn by_destination(api: &FakeApi) -> Vec<(Address, String)> {
    api.received()
        .into_iter()
        .map(|m| (m.address, m.text))
        .collect()
}

fn texts_to(received: &[(Address, String)], to: &Address) -> Vec<String> {
    received
        .iter()
        .filter(|(address, _)| address == to)
        .map(|(_, text)| text.clone())
        .collect()
}

async fn one_worker_keeps_every_conversations_promise_and_leftover_part_in_its_own_chat(
    backend: Backend,
) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    let slack_api = FakeApi::start(Surface::Slack, SLACK_TOKEN).await.unwrap();
    let discord_api = FakeApi::start(Surface::Discord, DISCORD_TOKEN)
        .await
        .unwrap();
    let slack = slack_client(&slack_api);
    let discord = discord_client(&discord_api);
    let a = Address::from(SlackAddress::new("C0AAAAAAA"));
    let b = Address::from(SlackAddress::new("C0BBBBBBB"));
    let d = Address::from(DiscordAddress::new("1100000000000000777"));

    // Conversation B: a process died mid-send of an earlier message; its part is `sending`.
    let crashed = store
        .acquire("slack-b", "crashed", Duration::from_millis(100))
        .await
        .unwrap();
    let Address::Slack(b_slack) = &b else {
        unreachable!()
    };
    let dying = store.channel(Dying(slack.channel(b_slack.clone())));
    let earlier = AgentMessage::new(
        "Earlier: the build is green.",
        Attribution::new("bot", "slack-b", "r0"),
    )
    .with_ownership(crashed.ownership());
    let died = tokio::spawn(async move { dying.deliver(earlier).await.map(drop) }).await;
    assert!(died.unwrap_err().is_panic(), "the sender died mid-send");
    assert_eq!(
        store_support::states(&store, "slack-b").await,
        [PartState::Sending]
    );
    tokio::time::sleep(Duration::from_millis(150)).await;

    // Three conversations end on holding lines, each in its own chat.
    let line_a = hold(&store, &slack, "slack-a", &a).await;
    let line_b = hold(&store, &slack, "slack-b", &b).await;
    let line_d = hold(&store, &discord, "discord-d", &d).await;
    for (conversation, address) in [("slack-a", &a), ("slack-b", &b), ("discord-d", &d)] {
        let stored = store.commitments(conversation).await.unwrap();
        assert_eq!(stored.len(), 1);
        assert_eq!(stored[0].address.as_ref(), Some(address), "{conversation}");
        assert_eq!(stored[0].status, CommitmentStatus::Pending);
    }

    // One worker, two clients, no channel of its own.
    let worker = worker_of(
        &store,
        "worker",
        vec![Arc::new(slack.clone()), Arc::new(discord.clone())],
    )
    .with_lease_ttl(Duration::from_secs(30))
    .with_poll_interval(Duration::from_millis(20));
    let report = tokio::time::timeout(BOUND, worker.run_once(&Cancellation::new()))
        .await
        .expect("bounded")
        .unwrap();
    assert_eq!(report.fulfilled, 3, "{report:?}");
    assert_eq!(
        report.parts_sent, 1,
        "the crashed sender's part: {report:?}"
    );

    let slack_got = by_destination(&slack_api);
    assert_eq!(
        texts_to(&slack_got, &a),
        [line_a, "answer for slack-a at slack:C0AAAAAAA".to_owned()]
    );
    assert_eq!(
        texts_to(&slack_got, &b),
        [
            line_b,
            "Earlier: the build is green.".to_owned(),
            "answer for slack-b at slack:C0BBBBBBB".to_owned()
        ]
    );
    assert_eq!(slack_got.len(), 5, "nothing else was posted: {slack_got:?}");
    let discord_got = by_destination(&discord_api);
    assert_eq!(
        texts_to(&discord_got, &d),
        [
            line_d,
            "answer for discord-d at discord:1100000000000000777".to_owned()
        ]
    );
    assert_eq!(discord_got.len(), 2, "{discord_got:?}");
    // Every call either fake received (sends, refusals, none anywhere else) named one of the
    // conversations' own chats.
    for to in slack_api.destinations() {
        assert!(to == a || to == b, "a Slack call went to {to}");
    }
    for to in discord_api.destinations() {
        assert_eq!(to, d, "a Discord call went elsewhere");
    }

    for (conversation, address) in [("slack-a", &a), ("slack-b", &b), ("discord-d", &d)] {
        let parts = store.parts(conversation).await.unwrap();
        assert!(
            parts
                .iter()
                .all(|p| p.state == PartState::Sent && p.address.as_ref() == Some(address)),
            "{conversation}: {parts:?}"
        );
        let stored = store.commitments(conversation).await.unwrap();
        assert_eq!(stored[0].status, CommitmentStatus::Fulfilled);
    }
    assert!(store.pending_work().await.unwrap().is_idle());
}

async fn a_channel_to_an_address_no_reader_could_trust_commits_nothing(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    // Built with the infallible constructor from a bad configuration value.
    let bad = store.channel(SlackChannel::new(SLACK_TOKEN, "C01 23"));
    let message = AgentMessage::new("hello", Attribution::new("bot", "bad", "r1"));
    let refused = bad.deliver(message).await.unwrap_err();
    let DeliveryError::Commit(CommitError::Store(cause)) = refused else {
        panic!("expected a refused commit, got {refused:?}");
    };
    assert!(
        matches!(
            cause.downcast_ref::<StoreError>(),
            Some(StoreError::BadAddress { conversation, .. }) if conversation == "bad"
        ),
        "{cause}"
    );
    assert!(store.parts("bad").await.unwrap().is_empty());
}

/// A worker with a client for stdout's surface only, and a Slack promise in the store: `run_once`
/// ends (nothing it can serve is left), the promise stays `pending` for a worker with a Slack
/// client, and the worker says so once.
async fn a_surface_without_a_client_is_left_pending_and_reported_once(backend: Backend) {
    let place = backend.place();
    let store = Store::open(&place.url).await.unwrap();
    let slack_api = FakeApi::start(Surface::Slack, SLACK_TOKEN).await.unwrap();
    let slack = slack_client(&slack_api);
    let to = Address::from(SlackAddress::new("C0AAAAAAA"));
    hold(&store, &slack, "slack-a", &to).await;
    let posted = slack_api.received().len();

    let (events, _guard) = support::capture();
    let stdout = Recorder::new();
    let worker = worker_of(&store, "plain-worker", vec![Arc::new(stdout.clone())])
        .with_poll_interval(Duration::from_millis(20));
    for _ in 0..3 {
        let report = tokio::time::timeout(BOUND, worker.run_once(&Cancellation::new()))
            .await
            .expect("run_once ends: nothing it serves is pending")
            .unwrap();
        assert_eq!(report.fulfilled, 0, "{report:?}");
    }
    assert!(stdout.sent().is_empty(), "nothing guessed onto stdout");
    assert_eq!(slack_api.received().len(), posted, "nothing sent to Slack");
    let stored = store.commitments("slack-a").await.unwrap();
    assert_eq!(stored[0].status, CommitmentStatus::Pending);
    let warned: Vec<_> = events
        .events()
        .into_iter()
        .filter(|e| {
            e.target == "mesh_egress::store"
                && e.message
                    .starts_with("work on a surface this worker has no client for")
        })
        .collect();
    assert_eq!(warned.len(), 1, "one warning, not one per pass: {warned:?}");
    assert_eq!(warned[0].field("surface"), Some("slack"));

    // A worker with the client keeps it.
    let slack_worker = worker_of(&store, "slack-worker", vec![Arc::new(slack)])
        .with_poll_interval(Duration::from_millis(20));
    let report = tokio::time::timeout(BOUND, slack_worker.run_once(&Cancellation::new()))
        .await
        .expect("bounded")
        .unwrap();
    assert_eq!(report.fulfilled, 1, "{report:?}");
    assert_eq!(
        texts_to(&by_destination(&slack_api), &to)
            .last()
            .map(String::as_str),
        Some("answer for slack-a at slack:C0AAAAAAA")
    );
}

// The event capture is per thread: these run on one.
#[tokio::test(flavor = "current_thread")]
async fn sqlite_a_surface_without_a_client_is_left_pending_and_reported_once() {
    a_surface_without_a_client_is_left_pending_and_reported_once(Backend::Sqlite).await;
}

#[tokio::test(flavor = "current_thread")]
async fn pg_a_surface_without_a_client_is_left_pending_and_reported_once() {
    a_surface_without_a_client_is_left_pending_and_reported_once(Backend::Postgres).await;
}

#[test]
fn a_boxed_worker_channel_keeps_the_conversations_address() {
    // What the worker's durable channels are made of: the client's channel for the address,
    // boxed. Its address is the stored one, so the outbox's rows and duplicate rules follow it.
    let slack = SlackClient::new(SLACK_TOKEN);
    let thread = Address::from(SlackAddress::new("C0AAAAAAA").in_thread("1700000000.000100"));
    let channel: BoxedChannel = slack.channel_for(&thread).unwrap();
    assert_eq!(channel.address(), thread);
    let discord = Address::from(DiscordAddress::new("1"));
    assert_eq!(
        slack.channel_for(&discord).unwrap_err().to_string(),
        "a Slack client cannot send to discord:1"
    );
}
