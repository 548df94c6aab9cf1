//! Streamed replies through the durable outbox, on a SQLite file and on a throwaway PostgreSQL
//! cluster, against the loopback Slack, Discord and Telegram fakes: a streamed answer sent by the
//! front door (`Bot::send_to`) through `Durable<…>` records every part `sent` under the surface message that holds it, so a
//! resend sends nothing; a stream refused mid-reply re-sends exactly the unconfirmed parts,
//! once, each recorded; and a streamed part whose sender died mid-call is settled by the
//! unknown-outcome knob after a restart, never by a lookup or a nonce.

mod store_support;

use std::time::Duration;

use mesh_egress::Surface as Api;
use mesh_egress::bot::{Delivery, Outcome};
use mesh_egress::channel::SendPolicy;
use mesh_egress::channel::SlackMarkdown;
use mesh_egress::channel::stream::{BudgetConfig, StreamingChannel};
use mesh_egress::channel::{Channel, DiscordChannel, PartReceipt, SlackChannel, TelegramChannel};
use mesh_egress::store::{Durable, PartState, Store, StoredPart, UnknownOutcome};
use mesh_egress::stream::CutterConfig;
use mesh_egress::testing::{ChatStep, FakeApi, FakeResponse};
use mesh_egress::{
    Address, AgentMessage, AnswerStream, Attribution, Bot, EgressError, Outbound, Ownership, Turn,
    egress_boundary,
};

use store_support::{Backend, LONG, paced};

const TOKEN: &str = "123456789:AAF-stream-store-token";
const THREAD: &str = "1699999999.000100";
/// Every wait in these tests is bounded by this.
const BOUND: Duration = Duration::from_secs(20);

both_backends!(
    a_streamed_reply_ends_with_every_part_sent_under_the_message_that_holds_it,
    a_stream_refused_mid_reply_resends_exactly_the_unconfirmed_parts_once,
    a_streamed_part_whose_sender_died_mid_call_follows_the_knob_never_a_lookup_or_nonce,
    a_part_the_outbox_refuses_stops_the_stream_before_its_call,
    a_telegram_message_whose_answer_was_lost_is_uncertain_and_never_posted_twice,
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
        .max_tries(2)
        .backoff(Duration::from_millis(2))
        .max_wait(Duration::from_millis(200))
        .request_timeout(Duration::from_secs(5))
}

fn fast() -> BudgetConfig {
    BudgetConfig::new(Duration::from_millis(5))
}

fn slack(api: &FakeApi) -> SlackChannel<SlackMarkdown> {
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
        .policy(policy())
}

/// A private chat: drafts while the reply grows, then permanent messages.
fn telegram(api: &FakeApi) -> TelegramChannel {
    TelegramChannel::new(TOKEN, "123456789")
        .with_stream_budget(fast())
        .base_url(api.base_url())
        .policy(policy())
}

const APIS: [Api; 3] = [Api::Slack, Api::Discord, Api::Telegram];

/// One case: a store on `backend`, a fake of `api`, and the conversation's lease.
struct Case {
    _place: store_support::Place,
    store: Store,
    api: FakeApi,
    lease: mesh_egress::store::Lease,
    conversation: String,
}

impl Case {
    async fn new(backend: Backend, api: Api) -> Self {
        let place = backend.place();
        let store = Store::open(&place.url).await.unwrap();
        let conversation = format!("stream-{api:?}");
        let lease = store
            .acquire(&conversation, "worker-a", LONG)
            .await
            .unwrap();
        Self {
            _place: place,
            store,
            api: FakeApi::start(api, TOKEN).await.unwrap(),
            lease,
            conversation,
        }
    }

    /// A turn of `bot`'s in the case's conversation, under its lease.
    fn turn(&self, bot: &Bot) -> Turn {
        bot.turn(
            Address::Plain,
            Attribution::new("ops-bot", &self.conversation, "run-1"),
        )
        .with_ownership(self.lease.ownership())
    }

    async fn rows(&self) -> Vec<StoredPart> {
        self.store.parts(&self.conversation).await.unwrap()
    }

    /// The surface's id and current text of every message the fake holds: Slack streams and
    /// posts, Discord messages (as last edited), Telegram permanent messages.
    fn messages(&self) -> Vec<(String, String)> {
        let mut all: Vec<(String, String)> = self
            .api
            .streams()
            .into_iter()
            .map(|s| (s.ts, s.text))
            .collect();
        let texts = self.api.texts();
        all.extend(
            self.api
                .received()
                .into_iter()
                .zip(texts)
                .map(|(m, text)| (m.id, text)),
        );
        all
    }
}

/// [`BLOCKS`] as a model sends them, 30 ms apart.
fn blocks(turn: &Turn) -> AnswerStream {
    paced(turn, &BLOCKS, Duration::from_millis(30))
}

/// A person is waiting on the streamed answer.
#[egress_boundary(interactive)]
async fn answer(turn: &Turn) -> Result<AnswerStream, EgressError> {
    Ok(blocks(turn))
}

/// Streams [`BLOCKS`] through `durable` with the front door, a few milliseconds apart (so the
/// surface's stream makes several calls).
async fn stream_blocks<C: StreamingChannel>(case: &Case, durable: &Durable<C>) -> Delivery {
    let bot = Bot::new()
        .with_cutter(CutterConfig {
            min_block: 20,
            max_block: 4000,
        })
        .with_idle_flush(None);
    let turn = case.turn(&bot);
    let reply = answer(&turn).await;
    tokio::time::timeout(BOUND, bot.send_to(&turn, durable, reply))
        .await
        .expect("the streamed turn ends in time")
        .expect("the streamed turn delivers")
}

/// Every row `sent`, each under a message the fake holds whose text contains the part.
fn assert_sent_under_held_messages(case: &Case, rows: &[StoredPart], label: &str) {
    let messages = case.messages();
    assert_eq!(rows.len(), BLOCKS.len(), "{label}: one row per block");
    for (row, block) in rows.iter().zip(BLOCKS) {
        assert_eq!(row.state, PartState::Sent, "{label}: {row:?}");
        assert_eq!(row.text, block, "{label}: in order");
        let id = row
            .platform_id
            .as_deref()
            .expect("the message id is recorded");
        let holder = messages.iter().find(|(m, _)| m == id);
        assert!(
            holder.is_some_and(|(_, text)| text.contains(block)),
            "{label}: {id} holds {block:?}: {messages:?}"
        );
    }
}

/// What the fake shows, every message's text in order: each block exactly once.
fn assert_each_block_shown_once(case: &Case, label: &str) {
    let shown: String = case
        .messages()
        .into_iter()
        .map(|(_, text)| text)
        .collect::<Vec<_>>()
        .join("\n\n");
    for block in BLOCKS {
        assert_eq!(
            shown.matches(block).count(),
            1,
            "{label}: {block:?} in {shown:?}"
        );
    }
}

async fn a_streamed_reply_ends_with_every_part_sent_under_the_message_that_holds_it(
    backend: Backend,
) {
    for api in APIS {
        let case = Case::new(backend, api).await;
        let receipt = match api {
            Api::Slack => {
                let durable = case.store.channel(slack(&case.api));
                let receipt = stream_blocks(&case, &durable).await;
                let report = case.store.resend(&durable, &case.lease).await.unwrap();
                assert_eq!(report.sent, 0, "{api:?}: nothing left to send");
                // One stream, never a post.
                assert_eq!(case.api.calls_to("chat.startStream"), 1);
                assert_eq!(case.api.calls_to("chat.postMessage"), 0);
                receipt
            }
            Api::Discord => {
                let durable = case.store.channel(discord(&case.api));
                let receipt = stream_blocks(&case, &durable).await;
                let report = case.store.resend(&durable, &case.lease).await.unwrap();
                assert_eq!(report.sent, 0, "{api:?}: nothing left to send");
                assert!(case.api.calls_to("editMessage") >= 1, "edited, not posted");
                assert_eq!(case.api.calls_to("createMessage"), 1);
                receipt
            }
            _ => {
                let durable = case.store.channel(telegram(&case.api));
                let receipt = stream_blocks(&case, &durable).await;
                let report = case.store.resend(&durable, &case.lease).await.unwrap();
                assert_eq!(report.sent, 0, "{api:?}: nothing left to send");
                assert!(case.api.calls_to("sendMessageDraft") >= 1, "drafts first");
                assert_eq!(case.api.calls_to("sendMessage"), 1, "one permanent message");
                receipt
            }
        };
        assert_eq!(receipt.outcome(), Outcome::Answered, "{api:?}");
        assert!(receipt.receipts().is_empty(), "{api:?}: nothing re-sent");
        let surface = receipt.surface().expect("a surface stream");
        let rows = case.rows().await;
        assert_sent_under_held_messages(&case, &rows, &format!("{api:?}"));
        assert!(rows.iter().all(|r| r.streamed), "{api:?}: {rows:?}");
        let ids: Vec<&str> = rows
            .iter()
            .filter_map(|r| r.platform_id.as_deref())
            .collect();
        assert!(
            ids.iter().all(|id| surface.ids().contains(id)),
            "{api:?}: the ids the stream confirmed: {ids:?}"
        );
        // One growing message holds every part.
        assert!(ids.windows(2).all(|w| w[0] == w[1]), "{api:?}: {ids:?}");
        assert_each_block_shown_once(&case, &format!("{api:?}"));
    }
}

async fn a_stream_refused_mid_reply_resends_exactly_the_unconfirmed_parts_once(backend: Backend) {
    for api in APIS {
        let case = Case::new(backend, api).await;
        // The call that would show the third block is refused for good (Telegram: the final
        // permanent message, so nothing of the reply was confirmed).
        let (receipt, resend) = match api {
            Api::Slack => {
                case.api.script_method(
                    "chat.appendStream",
                    [
                        ChatStep::Accept,
                        FakeResponse::chat_refusal(Api::Slack, "msg_too_long").into(),
                    ],
                );
                let durable = case.store.channel(slack(&case.api));
                let receipt = stream_blocks(&case, &durable).await;
                (
                    receipt,
                    case.store.resend(&durable, &case.lease).await.unwrap(),
                )
            }
            Api::Discord => {
                case.api.script_method(
                    "editMessage",
                    [
                        ChatStep::Accept,
                        FakeResponse::chat_refusal(Api::Discord, "Missing Permissions").into(),
                    ],
                );
                let durable = case.store.channel(discord(&case.api));
                let receipt = stream_blocks(&case, &durable).await;
                (
                    receipt,
                    case.store.resend(&durable, &case.lease).await.unwrap(),
                )
            }
            _ => {
                case.api.script_method(
                    "sendMessage",
                    [FakeResponse::chat_refusal(
                        Api::Telegram,
                        "Bad Request: message is too long",
                    )],
                );
                let durable = case.store.channel(telegram(&case.api));
                let receipt = stream_blocks(&case, &durable).await;
                (
                    receipt,
                    case.store.resend(&durable, &case.lease).await.unwrap(),
                )
            }
        };
        let label = format!("{api:?}");
        let confirmed = match api {
            Api::Telegram => 0,
            _ => 2,
        };
        assert_eq!(receipt.outcome(), Outcome::Answered, "{label}");
        let surface = receipt.surface().expect("a surface stream");
        assert_eq!(
            surface.confirmed_text(),
            BLOCKS[..confirmed].join("\n\n"),
            "{label}"
        );
        // Exactly the unconfirmed parts went again, as messages of their own, once each.
        let rows = case.rows().await;
        let resent: Vec<&str> = receipt
            .receipts()
            .iter()
            .flat_map(|r| r.parts().iter().map(PartReceipt::id))
            .collect();
        let recorded: Vec<&str> = rows[confirmed..]
            .iter()
            .filter_map(|r| r.platform_id.as_deref())
            .collect();
        assert_eq!(resent, recorded, "{label}: the re-sends, recorded");
        assert_eq!(resent.len(), BLOCKS.len() - confirmed, "{label}");
        assert_eq!(resend.sent, 0, "{label}: the resend found nothing open");
        assert_sent_under_held_messages(&case, &rows, &label);
        let streamed: Vec<bool> = rows.iter().map(|r| r.streamed).collect();
        let expected: Vec<bool> = (0..BLOCKS.len()).map(|i| i < confirmed).collect();
        assert_eq!(
            streamed, expected,
            "{label}: confirmed on the stream, or re-sent"
        );
        assert_each_block_shown_once(&case, &label);
    }
}

/// How many times the fake shows `block`, over all its messages.
fn shown(case: &Case, block: &str) -> usize {
    case.messages()
        .iter()
        .map(|(_, text)| text.matches(block).count())
        .sum()
}

/// Commits three blocks; streams the first until it is confirmed, then the second onto a fake
/// whose call for it (Slack's append, Discord's edit) shows it and never answers; drops the
/// stream while that call is in flight (the sender's death, in-process) and resends with
/// `knob`. Returns the case, the resend's report and the rows.
async fn die_mid_call(
    backend: Backend,
    api: Api,
    knob: UnknownOutcome,
) -> (Case, mesh_egress::store::ResendReport, Vec<StoredPart>) {
    let case = Case::new(backend, api).await;
    let method = match api {
        Api::Slack => "chat.appendStream",
        _ => "editMessage",
    };
    case.api
        .script_method(method, [ChatStep::accept_then_stall()]);
    let report = match api {
        Api::Slack => {
            let durable = case
                .store
                .channel(slack(&case.api))
                .with_unknown_outcome(knob);
            stream_then_die(&case, &durable, method).await;
            case.store.resend(&durable, &case.lease).await.unwrap()
        }
        _ => {
            let durable = case
                .store
                .channel(discord(&case.api))
                .with_unknown_outcome(knob);
            stream_then_die(&case, &durable, method).await;
            case.store.resend(&durable, &case.lease).await.unwrap()
        }
    };
    let rows = case.rows().await;
    (case, report, rows)
}

async fn stream_then_die<C: StreamingChannel>(case: &Case, durable: &Durable<C>, method: &str) {
    let turn = case.turn(&Bot::new());
    let mut stream = durable.open_stream(turn.attribution()).unwrap();
    let mut parts = Vec::new();
    for block in &BLOCKS[..3] {
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
    let mut parts = parts.into_iter();
    stream.append(parts.next().unwrap());
    let confirmed = tokio::time::timeout(BOUND, async {
        while case.rows().await[0].state != PartState::Sent {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(confirmed.is_ok(), "the first block was never confirmed");
    stream.append(parts.next().unwrap());
    let held = tokio::time::timeout(BOUND, async {
        while case.api.calls_to(method) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(held.is_ok(), "the fake never received the second block");
    assert_eq!(case.rows().await[1].state, PartState::Sending);
    drop(stream);
}

async fn a_streamed_part_whose_sender_died_mid_call_follows_the_knob_never_a_lookup_or_nonce(
    backend: Backend,
) {
    // An ordinary part left `sending` would be re-sent inside Discord's nonce window, or
    // looked up on Slack: a streamed one is neither, it is `uncertain` by default.
    for api in [Api::Discord, Api::Slack] {
        let (case, report, rows) = die_mid_call(backend, api, UnknownOutcome::Uncertain).await;
        let label = format!("{api:?}, uncertain");
        assert_eq!(
            (report.uncertain, report.sent),
            (1, 1),
            "{label}: {report:?}"
        );
        let states: Vec<PartState> = rows.iter().map(|r| r.state).collect();
        assert_eq!(
            states,
            [PartState::Sent, PartState::Uncertain, PartState::Sent],
            "{label}"
        );
        assert!(
            rows[1].streamed && rows[1].maybe_delivered,
            "{label}: {:?}",
            rows[1]
        );
        assert!(
            !rows[2].streamed,
            "{label}: never given to a call, sent as a message"
        );
        assert_eq!(case.api.lookups(), 0, "{label}: no lookup");
        for block in &BLOCKS[..3] {
            assert_eq!(shown(&case, block), 1, "{label}: {block:?}");
        }
    }
    for api in [Api::Discord, Api::Slack] {
        let (case, report, rows) = die_mid_call(backend, api, UnknownOutcome::SendAgain).await;
        let label = format!("{api:?}, send again");
        assert_eq!(
            (report.uncertain, report.sent),
            (0, 2),
            "{label}: {report:?}"
        );
        let states: Vec<PartState> = rows.iter().map(|r| r.state).collect();
        assert_eq!(states, [PartState::Sent; 3], "{label}");
        assert!(
            !rows[1].streamed,
            "{label}: re-sent as a message of its own"
        );
        assert_eq!(case.api.lookups(), 0, "{label}: no lookup");
        // At least once, as configured: the stalled edit showed it, and so does the re-send.
        assert_eq!(shown(&case, BLOCKS[1]), 2, "{label}");
        assert_eq!(shown(&case, BLOCKS[0]), 1, "{label}");
        assert_eq!(shown(&case, BLOCKS[2]), 1, "{label}");
    }
}

/// The journal's refusal: a part that is no longer `pending` when the stream is about to show
/// it (here another worker's resend sent it first; the reply was committed without a lease, so
/// nothing else fenced it) is not marked, its ownership is revoked, and the stream's driver
/// makes no call for it: the person sees it once.
async fn a_part_the_outbox_refuses_stops_the_stream_before_its_call(backend: Backend) {
    let case = Case::new(backend, Api::Discord).await;
    let conversation = "stream-unfenced";
    let durable = case.store.channel(discord(&case.api));
    let attribution = Attribution::new("ops-bot", conversation, "run-1");
    let ownership = Ownership::held();
    let mut parts = Vec::new();
    for block in &BLOCKS[..2] {
        let message =
            AgentMessage::new(*block, attribution.clone()).with_ownership(ownership.clone());
        let committed = Outbound::new(message)
            .render(durable.renderer())
            .unwrap()
            .commit(&durable)
            .await
            .unwrap();
        parts.extend(committed.into_parts());
    }
    let mut parts = parts.into_iter();
    let mut stream = durable.open_stream(&attribution).unwrap();
    stream.append(parts.next().unwrap());
    let confirmed = tokio::time::timeout(BOUND, async {
        while case.store.parts(conversation).await.unwrap()[0].state != PartState::Sent {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(confirmed.is_ok(), "the first block was never confirmed");

    // Another worker takes the conversation and sends what it finds pending: the second block.
    let other = case
        .store
        .acquire(conversation, "worker-b", LONG)
        .await
        .unwrap();
    let elsewhere = case.store.channel(discord(&case.api));
    let report = case.store.resend(&elsewhere, &other).await.unwrap();
    assert_eq!(report.sent, 1);

    stream.append(parts.next().unwrap());
    let finished = tokio::time::timeout(BOUND, stream.finish())
        .await
        .expect("the stream ends in time");
    let stopped = finished.expect_err("the stream stopped");
    assert!(
        stopped.is_refused(),
        "the outbox refused the call: {stopped:?}"
    );
    assert_eq!(stopped.unconfirmed().len(), 1, "the refused part came back");
    assert_eq!(
        case.api.calls_to("editMessage"),
        0,
        "no call showed it again"
    );
    assert_eq!(
        shown(&case, BLOCKS[1]),
        1,
        "shown once, by the other worker"
    );
    let rows = case.store.parts(conversation).await.unwrap();
    let states: Vec<PartState> = rows.iter().map(|r| r.state).collect();
    assert_eq!(states, [PartState::Sent, PartState::Sent]);
    assert!(
        !rows[1].streamed,
        "sent as a message of its own, not on the stream"
    );
}

/// Telegram's permanent message of a streamed reply is posted, but its answer is lost: its
/// parts may be shown, and `sendMessage` cannot dedupe a repeat, so neither the stream, nor the
/// boundary's re-send, nor a later `resend` posts it again; the outbox has them `uncertain`.
async fn a_telegram_message_whose_answer_was_lost_is_uncertain_and_never_posted_twice(
    backend: Backend,
) {
    let case = Case::new(backend, Api::Telegram).await;
    case.api
        .script_method("sendMessage", [ChatStep::lost_response()]);
    let durable = case.store.channel(telegram(&case.api));
    let receipt = stream_blocks(&case, &durable).await;
    let resend = case.store.resend(&durable, &case.lease).await.unwrap();

    assert_eq!(
        case.api.calls_to("sendMessage"),
        1,
        "posted once, never repeated"
    );
    assert_eq!(case.api.texts(), [BLOCKS.join("\n\n")]);
    assert!(receipt.receipts().is_empty(), "nothing re-sent as messages");
    assert_eq!(resend.sent, 0);
    let states: Vec<PartState> = case.rows().await.iter().map(|r| r.state).collect();
    assert_eq!(states, [PartState::Uncertain; 4]);
}
