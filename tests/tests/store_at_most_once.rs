//! At most once, fenced at every try (issue 21), on a SQLite file and on a throwaway PostgreSQL
//! cluster, against the loopback Slack, Discord and Telegram fakes. Each test is one scenario
//! the issue reproduced on the code before it:
//!
//! 1. a sender whose lease lapsed while it waited out a rate limit, and (the race) a stale
//!    sender's mark landing on the row its conversation's new holder has claimed;
//! 2. a Telegram reply shown only as drafts, taken for messages;
//! 4. unknown outcomes repeated: (a) a stream call that must not be repeated retried after a
//!    5xx or `internal_error`, (b) an unreadable or over-cap 2xx forgotten, (c) a Discord edit
//!    applied but unanswered re-posted as a message, and a packed Discord message carrying the
//!    nonce of its first part only, (d) a Slack part maybe delivered, then rate limited, stored
//!    as a plain pending part and re-posted without a lookup.
//!
//! (3, a store failure mid-stream, needs the test-only failure hook: `store_failure.rs`.)

mod store_support;

use std::future::Future;
use std::time::{Duration, SystemTime};

use mesh_egress::Surface as Api;
use mesh_egress::bot::Delivery;
use mesh_egress::channel::SendPolicy;
use mesh_egress::channel::SlackMarkdown;
use mesh_egress::channel::stream::{BudgetConfig, StreamMode, StreamingChannel};
use mesh_egress::channel::{
    Channel, Deliver, DeliveryError, DiscordChannel, PartLookup, PartReceipt, PlainText, SendError,
    SlackChannel, TelegramChannel,
};
use mesh_egress::ledger::{Ledger, LedgerRecord, OutboxRecord};
use mesh_egress::store::{Durable, Lease, PartState, Store, StoredPart};
use mesh_egress::stream::CutterConfig;
use mesh_egress::testing::{ChatStep, FakeApi, FakeResponse};
use mesh_egress::{
    Address, AgentMessage, AnswerStream, Attribution, Bot, CommitError, CommitRecord,
    CommittedPart, EgressError, Outbound, Turn, egress_boundary,
};

use store_support::{Backend, LONG, at_once, paced};

const TOKEN: &str = "123456789:AAF-at-most-once-token";
const THREAD: &str = "1699999999.000100";
/// Every wait in these tests is bounded by this.
const BOUND: Duration = Duration::from_secs(20);

both_backends!(
    a_sender_whose_lease_lapsed_during_a_rate_limit_never_posts_what_the_new_holder_sent,
    a_stale_senders_mark_never_lands_on_the_row_the_new_holder_claimed,
    a_reply_shown_only_as_drafts_stays_pending_and_is_sent_as_messages_after_its_sender_died,
    a_stream_call_that_must_not_be_repeated_is_not_retried_after_a_5xx_or_internal_error,
    an_unreadable_or_over_cap_2xx_to_a_stream_call_is_never_followed_by_a_second_post,
    a_discord_edit_applied_but_unanswered_is_never_posted_again_as_a_message,
    a_packed_discord_message_carries_a_nonce_of_its_own_and_is_never_half_posted_again,
    a_slack_part_maybe_delivered_then_rate_limited_is_looked_up_before_it_is_sent_again,
);

/// Four blocks, each longer than the cutter's minimum, each one part on every surface.
const BLOCKS: [&str; 4] = [
    "The build finished and every test passed.",
    "Deploying to staging now, it takes a minute.",
    "Then production follows after the checks.",
    "The release notes go up once it is live.",
];

fn policy() -> SendPolicy {
    SendPolicy::new()
        .max_tries(3)
        .backoff(Duration::from_millis(2))
        .max_wait(Duration::from_secs(3))
        .request_timeout(Duration::from_secs(5))
}

fn fast() -> BudgetConfig {
    BudgetConfig::new(Duration::from_millis(5))
}

fn slack_plain(api: &FakeApi) -> SlackChannel<PlainText> {
    SlackChannel::new(TOKEN, "C024BE91L")
        .with_renderer(PlainText::new())
        .with_stream_budget(fast())
        .base_url(api.base_url())
        .policy(policy())
}

fn slack_native(api: &FakeApi) -> SlackChannel<SlackMarkdown> {
    SlackChannel::new(TOKEN, "C024BE91L")
        .with_renderer(SlackMarkdown::new())
        .in_thread(THREAD)
        .with_stream_recipient("U0123456789", "T0123456789")
        .with_stream_budget(fast())
        .base_url(api.base_url())
        .policy(policy())
}

fn discord(api: &FakeApi) -> DiscordChannel {
    DiscordChannel::new(TOKEN, "1100000000000000001")
        .with_stream_budget(fast())
        .base_url(api.base_url())
        .policy(policy().max_tries(2))
}

/// A private chat: drafts while the reply grows, then permanent messages.
fn telegram(api: &FakeApi) -> TelegramChannel {
    TelegramChannel::new(TOKEN, "123456789")
        .with_stream_budget(fast())
        .base_url(api.base_url())
        .policy(policy())
}

/// A store on `backend`, a fake of `api`, a conversation and its ledger.
struct Case {
    _place: store_support::Place,
    store: Store,
    api: FakeApi,
    conversation: String,
    ledger: Ledger,
}

impl Case {
    async fn new(backend: Backend, api: Api, name: &str) -> Self {
        let place = backend.place();
        let store = Store::open(&place.url).await.unwrap();
        Self {
            _place: place,
            store,
            api: FakeApi::start(api, TOKEN).await.unwrap(),
            conversation: format!("at-most-once-{name}"),
            ledger: Ledger::in_memory(),
        }
    }

    async fn lease(&self, holder: &str, ttl: Duration) -> Lease {
        self.store
            .acquire(&self.conversation, holder, ttl)
            .await
            .unwrap()
    }

    fn durable<C: Channel>(&self, channel: C) -> Durable<C> {
        self.store.channel(channel).with_ledger(self.ledger.clone())
    }

    async fn rows(&self) -> Vec<StoredPart> {
        self.store.parts(&self.conversation).await.unwrap()
    }

    async fn states(&self) -> Vec<PartState> {
        self.rows().await.iter().map(|r| r.state).collect()
    }

    fn turn(&self, lease: &Lease) -> Turn {
        Turn::new(Attribution::new("ops-bot", &self.conversation, "run-1"))
            .with_ownership(lease.ownership())
    }

    /// Every text the fake holds: Slack streams, then messages (as last edited).
    fn shown(&self) -> Vec<String> {
        let mut shown: Vec<String> = self.api.streams().into_iter().map(|s| s.text).collect();
        shown.extend(self.api.texts());
        shown
    }

    /// How many calls that may show text as a message carried `text` (drafts are not
    /// messages).
    fn calls_showing(&self, text: &str) -> usize {
        self.api
            .calls()
            .iter()
            .filter(|c| {
                matches!(
                    c.method.as_str(),
                    "chat.startStream" | "chat.appendStream" | "chat.postMessage" | "sendMessage"
                ) && c.body.to_string().contains(text)
            })
            .count()
    }

    /// How many times `text` is on the fake, over all its messages.
    fn times_shown(&self, text: &str) -> usize {
        self.shown().iter().map(|t| t.matches(text).count()).sum()
    }

    /// The parts the ledger reports `uncertain`, as `(delivery, part)`.
    fn uncertain_on_the_ledger(&self) -> Vec<(String, usize)> {
        self.ledger
            .entries()
            .iter()
            .filter_map(|entry| match entry.record() {
                LedgerRecord::Outbox(OutboxRecord::Uncertain { delivery, part, .. }) => {
                    Some((delivery.clone(), *part))
                }
                _ => None,
            })
            .collect()
    }

    /// Every `uncertain` row has its ledger row, and every ledger row its `uncertain` row.
    async fn assert_uncertain_reported(&self, label: &str) {
        let mut rows: Vec<(String, usize)> = self
            .rows()
            .await
            .into_iter()
            .filter(|r| r.state == PartState::Uncertain)
            .map(|r| (r.delivery, r.index))
            .collect();
        let mut reported = self.uncertain_on_the_ledger();
        rows.sort();
        reported.sort();
        assert_eq!(
            rows, reported,
            "{label}: uncertain rows and their ledger rows"
        );
    }
}

/// Waits (bounded) until `done` holds.
async fn until<F: Future<Output = bool>>(what: &str, mut done: impl FnMut() -> F) {
    let reached = tokio::time::timeout(BOUND, async {
        while !done().await {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(reached.is_ok(), "never reached: {what}");
}

/// [`BLOCKS`] as a model sends them, 30 ms apart.
#[egress_boundary(interactive)]
async fn answer(turn: &Turn) -> Result<AnswerStream, EgressError> {
    Ok(paced(turn, &BLOCKS, Duration::from_millis(30)))
}

/// Streams [`BLOCKS`] through `durable` with the front door (`Bot::send_to`), a few
/// milliseconds apart.
async fn stream_blocks<C: StreamingChannel>(
    case: &Case,
    lease: &Lease,
    durable: &Durable<C>,
) -> Result<Delivery, DeliveryError> {
    let bot = Bot::new()
        .with_cutter(CutterConfig {
            min_block: 20,
            max_block: 4000,
        })
        .with_idle_flush(None);
    let turn = bot
        .turn(
            Address::Plain,
            Attribution::new("ops-bot", &case.conversation, "run-1"),
        )
        .with_ownership(lease.ownership())
        .with_ledger(case.ledger.clone());
    let reply = answer(&turn).await;
    tokio::time::timeout(BOUND, bot.send_to(&turn, durable, reply))
        .await
        .expect("the streamed turn ends in time")
}

/// Commits `blocks` through `durable` under `lease`, one message each.
async fn commit_blocks<C: Channel>(
    durable: &Durable<C>,
    turn: &Turn,
    blocks: &[&str],
) -> Vec<CommittedPart> {
    let mut parts = Vec::new();
    for block in blocks {
        let message = AgentMessage::new(*block, turn.attribution().clone())
            .with_ownership(turn.ownership().clone());
        let committed = Outbound::new(message)
            .render(durable.renderer())
            .unwrap()
            .commit(durable)
            .await
            .unwrap();
        parts.extend(committed.into_parts());
    }
    parts
}

// 1. A sender whose lease lapsed still posts.

/// Worker A waits out Slack's one-second rate limit while its lease (never renewed: a stalled
/// renewal) lapses; worker B takes the conversation, finds nothing on the surface and sends
/// the part. Before this issue A then woke and posted it again: its loop never re-checked the
/// ownership. Now A re-checks it before every try and hands the part back untried.
async fn a_sender_whose_lease_lapsed_during_a_rate_limit_never_posts_what_the_new_holder_sent(
    backend: Backend,
) {
    let case = Case::new(backend, Api::Slack, "lapse").await;
    case.api.script([FakeResponse::chat_rate_limited(
        Api::Slack,
        Duration::from_secs(1),
    )]);
    let a_lease = case.lease("worker-a", Duration::from_millis(400)).await;
    let a = case.durable(slack_plain(&case.api));
    let message = AgentMessage::new(
        "Deployed.",
        Attribution::new("ops", &case.conversation, "r1"),
    )
    .with_ownership(a_lease.ownership());
    let sender_a = async { a.deliver(message).await };
    let worker_b = async {
        // A's lease has run out on the database's clock.
        tokio::time::sleep(Duration::from_millis(550)).await;
        let b_lease = case.lease("worker-b", LONG).await;
        let b = case.durable(slack_plain(&case.api));
        let report = case.store.resend(&b, &b_lease).await.unwrap();
        (report, b_lease)
    };
    let (a_result, (report, _b_lease)) =
        tokio::time::timeout(BOUND, async { tokio::join!(sender_a, worker_b) })
            .await
            .expect("both end in time");

    assert_eq!(report.sent, 1, "B sent what A left: {report:?}");
    assert_eq!(
        case.api.texts(),
        ["Deployed."],
        "posted once, by B: A never posts after its lease lapsed"
    );
    assert!(
        matches!(&a_result, Err(e @ DeliveryError::Send { .. }) if e.is_ownership_lost()),
        "A handed the part back for its lost ownership: {a_result:?}"
    );
    let rows = case.rows().await;
    assert_eq!(rows[0].state, PartState::Sent);
    assert_eq!(
        rows[0].platform_id.as_deref(),
        Some(case.api.received()[0].id.as_str()),
        "B's message, recorded by B"
    );
}

/// A channel that stalls after each send before it returns (a process paused by the host),
/// so what the outbox records for the send lands later.
struct Stalled<C> {
    inner: C,
    stall: Duration,
}

impl<C: Channel> Channel for Stalled<C> {
    type Renderer = C::Renderer;

    fn renderer(&self) -> &C::Renderer {
        self.inner.renderer()
    }

    fn address(&self) -> Address {
        self.inner.address()
    }

    fn commit(
        &self,
        record: &CommitRecord<'_>,
    ) -> impl Future<Output = Result<(), CommitError>> + Send {
        self.inner.commit(record)
    }

    async fn send(&self, part: CommittedPart) -> Result<PartReceipt, SendError> {
        let result = self.inner.send(part).await;
        tokio::time::sleep(self.stall).await;
        result
    }

    fn look_up(
        &self,
        part: &CommittedPart,
        since: SystemTime,
    ) -> impl Future<Output = PartLookup> + Send {
        self.inner.look_up(part, since)
    }
}

/// The race: A's send is rate limited past its wait cap and A stalls before recording it;
/// meanwhile its lease lapses and B takes the conversation, claims the part and sends it
/// (slowly). Before this issue A's "try later" mark bound no lease and landed on B's claim:
/// the part was `pending` again, B's `sent` mark found nothing to mark, and the next pass sent
/// it a second time. Now every mark is fenced on the lease the part was sent under.
async fn a_stale_senders_mark_never_lands_on_the_row_the_new_holder_claimed(backend: Backend) {
    let case = Case::new(backend, Api::Slack, "race").await;
    case.api.script([
        // A's try: "not now", for longer than A's wait cap.
        ChatStep::Answer(FakeResponse::chat_rate_limited(
            Api::Slack,
            Duration::from_secs(60),
        )),
        // B's send: posted, answered a second later.
        ChatStep::AcceptThen(
            FakeResponse::chat_success(Api::Slack, "C024BE91L", "1700000000.000777")
                .after(Duration::from_millis(1000)),
        ),
    ]);
    let a_lease = case.lease("worker-a", Duration::from_millis(400)).await;
    let a = case.durable(Stalled {
        inner: slack_plain(&case.api),
        stall: Duration::from_millis(1000),
    });
    let message = AgentMessage::new(
        "Deployed.",
        Attribution::new("ops", &case.conversation, "r1"),
    )
    .with_ownership(a_lease.ownership());
    let sender_a = async { a.deliver(message).await };
    let worker_b = async {
        tokio::time::sleep(Duration::from_millis(550)).await;
        let b_lease = case.lease("worker-b", LONG).await;
        let b = case.durable(slack_plain(&case.api));
        let first = case.store.resend(&b, &b_lease).await.unwrap();
        (first, b_lease)
    };
    let (a_result, (first, b_lease)) =
        tokio::time::timeout(BOUND, async { tokio::join!(sender_a, worker_b) })
            .await
            .expect("both end in time");
    assert!(a_result.is_err(), "A did not send it: {a_result:?}");
    assert_eq!(first.sent, 1, "B sent it: {first:?}");
    // B's next pass finds nothing open: A's late mark did not reopen the row.
    let b = case.durable(slack_plain(&case.api));
    let second = case.store.resend(&b, &b_lease).await.unwrap();

    assert_eq!(second.sent, 0, "nothing left to send: {second:?}");
    assert_eq!(case.api.texts(), ["Deployed."], "posted once");
    let rows = case.rows().await;
    assert_eq!(rows[0].state, PartState::Sent, "{rows:?}");
    assert_eq!(rows[0].platform_id.as_deref(), Some("1700000000.000777"));
}

// 2. A draft is taken for a message.

/// A Telegram reply in a private chat is shown through `sendMessageDraft` while it grows; its
/// sender dies before the permanent `sendMessage`. No message ever existed, so the parts are
/// still `pending` (before this issue each was marked `sending` before its draft call, and a
/// restart made them `uncertain`, never sent): the restarted worker sends each once.
async fn a_reply_shown_only_as_drafts_stays_pending_and_is_sent_as_messages_after_its_sender_died(
    backend: Backend,
) {
    let case = Case::new(backend, Api::Telegram, "drafts").await;
    let lease = case.lease("worker-a", LONG).await;
    let durable = case.durable(telegram(&case.api));
    let turn = case.turn(&lease);
    let parts = commit_blocks(&durable, &turn, &BLOCKS[..3]).await;
    let mut stream = durable.open_stream(turn.attribution()).unwrap();
    for part in parts {
        stream.append(part);
    }
    let all = BLOCKS[..3].join("\n\n");
    until("a draft shows every block", || {
        let drafted = case.api.drafts().last().is_some_and(|d| d.text == all);
        std::future::ready(drafted)
    })
    .await;
    // The sender dies (in-process: the stream is dropped mid-reply, before its message).
    drop(stream);
    assert_eq!(
        case.api.calls_to("sendMessage"),
        0,
        "only drafts were shown"
    );
    assert_eq!(
        case.states().await,
        [PartState::Pending; 3],
        "a draft is not a message: nothing was marked sending"
    );

    let restarted = case.durable(telegram(&case.api));
    let report = case.store.resend(&restarted, &lease).await.unwrap();

    assert_eq!((report.sent, report.uncertain), (3, 0), "{report:?}");
    assert_eq!(
        case.api.texts(),
        BLOCKS[..3],
        "each paragraph once, as a message"
    );
    assert_eq!(case.states().await, [PartState::Sent; 3]);
}

// 4a. Stream calls that must not be repeated, repeated after a 5xx or `internal_error`.

/// Slack's `chat.startStream` (a native stream) and `chat.postMessage` (blocks), and
/// Telegram's `sendMessage`, applied and answered with a 5xx or `internal_error`: the call may
/// have shown its parts, and repeating it would show them twice (before this issue it was
/// repeated: the reply appeared in two streams, or twice in the chat). It goes once; its parts
/// are `uncertain`, each on the ledger; the rest goes as messages of their own.
async fn a_stream_call_that_must_not_be_repeated_is_not_retried_after_a_5xx_or_internal_error(
    backend: Backend,
) {
    let internal_error = || {
        FakeResponse::raw(
            200,
            serde_json::json!({ "ok": false, "error": "internal_error" }).to_string(),
        )
    };
    let cases: [(&str, Api, &str, FakeResponse); 4] = [
        (
            "slack-start-5xx",
            Api::Slack,
            "chat.startStream",
            FakeResponse::chat_server_error(Api::Slack, 500),
        ),
        (
            "slack-start-internal",
            Api::Slack,
            "chat.startStream",
            internal_error(),
        ),
        (
            "slack-post-internal",
            Api::Slack,
            "chat.postMessage",
            internal_error(),
        ),
        (
            "telegram-send-5xx",
            Api::Telegram,
            "sendMessage",
            FakeResponse::chat_server_error(Api::Telegram, 502),
        ),
    ];
    for (name, api, method, answer) in cases {
        let case = Case::new(backend, api, name).await;
        case.api
            .script_method(method, [ChatStep::AcceptThen(answer)]);
        let lease = case.lease("worker-a", LONG).await;
        let result = match (api, method) {
            (Api::Slack, "chat.startStream") => {
                let durable = case.durable(slack_native(&case.api));
                stream_blocks(&case, &lease, &durable).await
            }
            (Api::Slack, _) => {
                // Plain text: each block a `chat.postMessage` of the stream (blocks mode).
                let durable = case.durable(
                    slack_plain(&case.api)
                        .in_thread(THREAD)
                        .with_stream_mode(StreamMode::Blocks),
                );
                stream_blocks(&case, &lease, &durable).await
            }
            _ => {
                let durable = case.durable(telegram(&case.api));
                stream_blocks(&case, &lease, &durable).await
            }
        };
        let _receipt = result.unwrap_or_else(|e| panic!("{name}: {e:?}"));
        for block in BLOCKS {
            assert!(
                case.calls_showing(block) <= 1,
                "{name}: {block:?} went in two calls: {:?}",
                case.api.calls()
            );
            assert!(
                case.times_shown(block) <= 1,
                "{name}: {block:?} shown twice"
            );
        }
        let rows = case.rows().await;
        assert!(
            rows.iter()
                .all(|r| matches!(r.state, PartState::Sent | PartState::Uncertain)),
            "{name}: {rows:?}"
        );
        for row in &rows {
            if row.state == PartState::Sent {
                assert_eq!(case.times_shown(&row.text), 1, "{name}: {row:?}");
            }
        }
        assert!(
            rows.iter().any(|r| r.state == PartState::Uncertain),
            "{name}: the unanswered call's parts are uncertain"
        );
        case.assert_uncertain_reported(name).await;
        // A restart sends nothing of them.
        let report = match (api, method) {
            (Api::Slack, "chat.startStream") => {
                let again = case.durable(slack_native(&case.api));
                case.store.resend(&again, &lease).await.unwrap()
            }
            (Api::Slack, _) => {
                let again = case.durable(slack_plain(&case.api).in_thread(THREAD));
                case.store.resend(&again, &lease).await.unwrap()
            }
            _ => {
                let again = case.durable(telegram(&case.api));
                case.store.resend(&again, &lease).await.unwrap()
            }
        };
        assert_eq!(report.sent, 0, "{name}: {report:?}");
    }
}

// 4b. A 2xx whose body is unreadable or over the cap means "may have posted".

/// Slack's `chat.postMessage` of a stream (blocks mode) and Telegram's `sendMessage` are
/// posted and answered with a 2xx the connector cannot read (not JSON, or past its size cap).
/// Before this issue the stream dropped the "may have posted" flag and the boundary posted the
/// parts again as messages; now they are `uncertain`, on the ledger, never posted twice.
async fn an_unreadable_or_over_cap_2xx_to_a_stream_call_is_never_followed_by_a_second_post(
    backend: Backend,
) {
    let cases = [
        (
            "slack-not-json",
            Api::Slack,
            "chat.postMessage",
            FakeResponse::not_json(200),
        ),
        (
            "slack-too-large",
            Api::Slack,
            "chat.postMessage",
            FakeResponse::large_body(200, 4096),
        ),
        (
            "telegram-not-json",
            Api::Telegram,
            "sendMessage",
            FakeResponse::not_json(200),
        ),
        (
            "telegram-too-large",
            Api::Telegram,
            "sendMessage",
            FakeResponse::large_body(200, 4096),
        ),
    ];
    for (name, api, method, answer) in cases {
        let case = Case::new(backend, api, name).await;
        case.api
            .script_method(method, [ChatStep::AcceptThen(answer)]);
        let lease = case.lease("worker-a", LONG).await;
        // A cap a normal answer fits under and the large one does not.
        let capped = policy().max_response_bytes(1024);
        let result = match api {
            Api::Slack => {
                let channel = slack_plain(&case.api)
                    .in_thread(THREAD)
                    .with_stream_mode(StreamMode::Blocks)
                    .policy(capped);
                stream_blocks(&case, &lease, &case.durable(channel)).await
            }
            _ => {
                let channel = telegram(&case.api).policy(capped);
                stream_blocks(&case, &lease, &case.durable(channel)).await
            }
        };
        let _receipt = result.unwrap_or_else(|e| panic!("{name}: {e:?}"));
        for block in BLOCKS {
            assert!(
                case.times_shown(block) <= 1,
                "{name}: {block:?} shown twice: {:?}",
                case.shown()
            );
        }
        let rows = case.rows().await;
        assert!(
            rows.iter().any(|r| r.state == PartState::Uncertain),
            "{name}: {rows:?}"
        );
        for row in &rows {
            match row.state {
                PartState::Sent => assert_eq!(case.times_shown(&row.text), 1, "{name}"),
                PartState::Uncertain => assert!(row.maybe_delivered, "{name}: {row:?}"),
                other => panic!("{name}: a part left {other:?}"),
            }
        }
        case.assert_uncertain_reported(name).await;
    }
}

// 4c. A Discord edit applied but unanswered.

/// The last edit of a Discord stream is applied but its answer never arrives, on every try
/// (the edit is idempotent, so it is repeated). Before this issue the stream handed its parts
/// back as unconfirmed and the boundary posted them again as a new message: shown twice. Now
/// they are `uncertain`, on the ledger, and never posted again.
async fn a_discord_edit_applied_but_unanswered_is_never_posted_again_as_a_message(
    backend: Backend,
) {
    let case = Case::new(backend, Api::Discord, "edit").await;
    // Every edit, the retried refreshes of the growing message included.
    case.api
        .script_method("editMessage", vec![ChatStep::lost_response(); 500]);
    let lease = case.lease("worker-a", LONG).await;
    let durable = case.durable(discord(&case.api));
    let result = stream_blocks(&case, &lease, &durable).await;

    let _receipt = result.expect("the turn ends as the contract says");
    assert_eq!(
        case.api.calls_to("createMessage"),
        1,
        "never posted again: {:?}",
        case.shown()
    );
    for block in BLOCKS {
        assert_eq!(case.times_shown(block), 1, "{block:?}: {:?}", case.shown());
    }
    let rows = case.rows().await;
    assert_eq!(rows[0].state, PartState::Sent, "{rows:?}");
    assert!(
        rows[1..]
            .iter()
            .all(|r| r.state == PartState::Uncertain && r.maybe_delivered),
        "the edited-in parts may be shown: {rows:?}"
    );
    case.assert_uncertain_reported("edit").await;
}

/// A Discord reply in `Final` mode packs its blocks into one message. That create is posted
/// but its answer is lost on both tries (the repeat, under the same nonce, is deduped into the
/// same message). Before this issue the packed message carried the nonce of its first part and
/// its parts were handed back: the boundary re-sent them one by one, the first was deduped
/// into the packed message and the rest posted a second time. Now the packed message's nonce
/// is its own, and its parts, maybe shown, are `uncertain`.
async fn a_packed_discord_message_carries_a_nonce_of_its_own_and_is_never_half_posted_again(
    backend: Backend,
) {
    let case = Case::new(backend, Api::Discord, "packed").await;
    case.api.script_method(
        "createMessage",
        [ChatStep::lost_response(), ChatStep::lost_response()],
    );
    let lease = case.lease("worker-a", LONG).await;
    let durable = case.durable(discord(&case.api).with_stream_mode(StreamMode::Final));
    let result = stream_blocks(&case, &lease, &durable).await;

    let _receipt = result.expect("the turn ends as the contract says");
    let calls = case.api.calls();
    let creates: Vec<&serde_json::Value> = calls
        .iter()
        .filter(|c| c.method == "createMessage")
        .map(|c| &c.body)
        .collect();
    let rows = case.rows().await;
    let keys: Vec<String> = rows
        .iter()
        .map(|r| format!("{}-{}", r.delivery, r.index))
        .collect();
    for block in BLOCKS {
        assert_eq!(case.times_shown(block), 1, "{block:?}: {:?}", case.shown());
    }
    let packed_nonce = creates[0]["nonce"].as_str().expect("a nonce");
    assert!(
        !keys.iter().any(|k| k == packed_nonce),
        "a packed message's nonce is no part's key: {packed_nonce}"
    );
    assert!(
        rows.iter().all(|r| r.state == PartState::Uncertain),
        "the packed message may be shown: {rows:?}"
    );
    case.assert_uncertain_reported("packed").await;
}

// 4d. "Maybe delivered" cleared by a later answer within the send.

/// A plain Slack part is posted and answered `internal_error`; the connector's lookup does
/// not see it yet (history lags) and tries again, and that try is rate limited past the wait
/// cap. Before this issue the part came back as a plain "not now" and was stored `pending`
/// without its "maybe delivered" flag, so the restarted worker posted it again without a
/// lookup. Now the flag survives, and the resend looks the part up first.
async fn a_slack_part_maybe_delivered_then_rate_limited_is_looked_up_before_it_is_sent_again(
    backend: Backend,
) {
    let case = Case::new(backend, Api::Slack, "maybe").await;
    case.api.script([
        ChatStep::AcceptThen(FakeResponse::raw(
            200,
            serde_json::json!({ "ok": false, "error": "internal_error" }).to_string(),
        )),
        FakeResponse::chat_rate_limited(Api::Slack, Duration::from_secs(60)).into(),
    ]);
    // The first lookup comes before Slack's history shows the post.
    case.api.script_lookups([FakeResponse::raw(
        200,
        serde_json::json!({ "ok": true, "messages": [], "has_more": false }).to_string(),
    )]);
    let lease = case.lease("worker-a", LONG).await;
    // Due again at once: this is about the lookup before the next attempt, not its backoff
    // (which would hold the part for Slack's 60 s: `worker_retry.rs`).
    let durable = case.durable(slack_plain(&case.api)).with_retry(at_once());
    let message = AgentMessage::new(
        "Deployed.",
        Attribution::new("ops", &case.conversation, "r1"),
    )
    .with_ownership(lease.ownership());
    let error = durable.deliver(message).await.unwrap_err();
    assert!(
        matches!(&error, DeliveryError::Send { source, .. } if source.retry_after().is_some()),
        "handed back rate limited: {error:?}"
    );
    let rows = case.rows().await;
    assert_eq!(rows[0].state, PartState::Pending);
    assert!(
        rows[0].maybe_delivered,
        "the flag survived the rate limit: {rows:?}"
    );

    // After a restart (a fresh connector: no pause), the resend looks before it posts.
    let restarted = case.durable(slack_plain(&case.api));
    let lookups_before = case.api.lookups();
    let report = case.store.resend(&restarted, &lease).await.unwrap();

    assert_eq!(report.reconciled, 1, "found on the surface: {report:?}");
    assert_eq!(report.sent, 0, "{report:?}");
    assert_eq!(case.api.lookups(), lookups_before + 1);
    assert_eq!(case.api.texts(), ["Deployed."], "posted once");
    assert_eq!(case.rows().await[0].state, PartState::Sent);
}
