//! The front door, `Bot`, on loopback fakes of the surfaces and the scripted provider, one value
//! for the three cases the issue names: (a) a whole answer to Slack, (b) a streamed one, (c) a
//! durable promise kept by a worker after a restart (a second bot and worker opening the same
//! SQLite file). In every case the person never sees a cause.

mod store_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use mesh_egress::address::{DiscordAddress, SlackAddress};
use mesh_egress::bot::Outcome;
use mesh_egress::bot::Promise;
use mesh_egress::channel::SendPolicy;
use mesh_egress::channel::SlackMarkdown;
use mesh_egress::channel::stream::BLOCK_SEPARATOR;
use mesh_egress::channel::{DiscordClient, PlainText, SlackClient};
use mesh_egress::degrade::DegradationPolicy;
use mesh_egress::model::{RetryConfig, Router};
use mesh_egress::store::{CommitmentStatus, Store};
use mesh_egress::testing::{FakeApi, ScriptedConnector, Step};
use mesh_egress::{
    AgentMessage, AnswerStream, Attribution, Bot, Cancellation, EgressError, Surface, Turn,
    egress_boundary,
};

use store_support::Backend;

const SLACK_TOKEN: &str = "xoxb-front-door-SECRET";
const DISCORD_TOKEN: &str = "discord-front-door-SECRET";
/// The internal cause every failure carries; no message may contain it.
const CAUSE: &str = "CAUSE-upstream-503-7f3a";
/// Every wait in these tests is bounded by this.
const BOUND: Duration = Duration::from_secs(20);

const B1: &str = "The build finished on the main branch and every one of the tests passed.\n\n";
const B2: &str = "Deploying to staging now; it takes about a minute, then the checks run.\n\n";
const B3: &str = "Production follows once the checks are green, with the usual canary.\n\n";

fn send_policy() -> SendPolicy {
    SendPolicy::new()
        .max_tries(2)
        .backoff(Duration::from_millis(1))
        .max_wait(Duration::from_millis(200))
        .request_timeout(Duration::from_secs(2))
}

fn slack(api: &FakeApi) -> SlackClient<PlainText> {
    SlackClient::new(SLACK_TOKEN)
        .with_renderer(PlainText::new())
        .base_url(api.base_url())
        .policy(send_policy())
}

fn discord(api: &FakeApi) -> DiscordClient<PlainText> {
    DiscordClient::new(DISCORD_TOKEN)
        .with_renderer(PlainText::new())
        .base_url(api.base_url())
        .policy(send_policy())
}

/// Follow-ups 30 ms after the holding line, two tries.
fn quick_follow_up() -> DegradationPolicy {
    DegradationPolicy::default().with_follow_up(Duration::from_millis(30), 2)
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Question {
    text: String,
}

/// Answers, or fails with the cause while `failures` is above zero (counting it down).
#[egress_boundary(interactive)]
async fn answer(
    turn: &Turn,
    q: Question,
    failures: &AtomicU32,
) -> Result<AgentMessage, EgressError> {
    if failures
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
    {
        return Err(EgressError::transport(CAUSE, turn.attribution().clone()));
    }
    Ok(turn.message(format!("You asked: {}. It is green.", q.text)))
}

/// The `answer` route on `bot`, failing `failures` times first.
fn answer_route(bot: &Bot, failures: u32) -> mesh_egress::bot::Endpoint<Question> {
    let failures = Arc::new(AtomicU32::new(failures));
    bot.route("answer", move |turn: Turn, q: Question| {
        let failures = Arc::clone(&failures);
        async move { answer(&turn, q, &failures).await }
    })
}

fn never_the_cause(texts: &[String]) {
    for text in texts {
        assert!(
            !text.contains(CAUSE),
            "a cause reached the person: {text:?}"
        );
    }
}

/// Waits (bounded) until `api` has received `n` messages.
async fn received(api: &FakeApi, n: usize) -> Vec<String> {
    let waited = tokio::time::timeout(BOUND, async {
        loop {
            if api.texts().len() >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "only {:?} arrived", api.texts());
    api.texts()
}

#[tokio::test]
async fn a_whole_answer_reaches_slack_and_an_unrenderable_one_goes_to_layer_c() {
    let api = FakeApi::start(Surface::Slack, SLACK_TOKEN).await.unwrap();
    let bot = Bot::new().with_client(slack(&api));
    let route = answer_route(&bot, 0);
    let turn = bot.turn(
        SlackAddress::new("C0123456789"),
        Attribution::new("ci-bot", "conv-a", "run-1"),
    );
    let q = Question {
        text: "Is the build green?".into(),
    };
    let delivery = bot.run(&turn, &route, q).await.unwrap();
    assert_eq!(delivery.outcome(), Outcome::Answered);
    assert_eq!(
        api.texts(),
        ["You asked: Is the build green?. It is green."]
    );
    assert_eq!(api.received()[0].target, "C0123456789");

    // A hand-built reply that renders to nothing: Layer C on the front door, not a RenderError.
    #[egress_boundary(interactive)]
    fn empty(turn: &Turn) -> Result<AgentMessage, EgressError> {
        Ok(turn.message("```\n```"))
    }
    let delivery = bot.send(&turn, empty(&turn)).await.unwrap();
    assert_eq!(delivery.outcome(), Outcome::Holding);
    assert!(
        matches!(delivery.promise(), Some(Promise::Caller(_))),
        "no route: the promise is the caller's"
    );
    assert!(!matches!(delivery.promise(), Some(Promise::Bot(_))));
    assert_eq!(api.texts().len(), 2);

    // A turn addressed where the bot has no client: a typed error, nothing sent.
    let elsewhere = bot.turn(DiscordAddress::new("123"), turn.attribution().clone());
    let refused = bot.send(&elsewhere, empty(&elsewhere)).await;
    assert!(
        matches!(
            refused,
            Err(mesh_egress::channel::DeliveryError::Unserved(_))
        ),
        "{refused:?}"
    );
    assert_eq!(api.texts().len(), 2);
}

#[tokio::test]
async fn a_failed_route_holds_then_the_in_memory_keeper_re_runs_the_same_handler() {
    let api = FakeApi::start(Surface::Slack, SLACK_TOKEN).await.unwrap();
    let bot = Bot::new()
        .with_client(slack(&api))
        .with_policy(quick_follow_up());
    let route = answer_route(&bot, 1);
    let turn = bot.turn(
        SlackAddress::new("C0123456789"),
        Attribution::new("ci-bot", "conv-m", "run-1"),
    );
    let q = Question {
        text: "Deployed?".into(),
    };
    let delivery = bot.run(&turn, &route, q).await.unwrap();
    assert_eq!(delivery.outcome(), Outcome::Holding);
    assert!(
        matches!(delivery.promise(), Some(Promise::Bot(_))),
        "the route is re-run by the bot's keeper, nothing is left to the caller"
    );
    let texts = received(&api, 2).await;
    assert_eq!(texts[1], "You asked: Deployed?. It is green.");
    never_the_cause(&texts);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(api.texts().len(), 2, "one follow-up, nothing after it");
}

#[tokio::test]
async fn a_streamed_answer_is_one_slack_stream_and_a_mid_stream_failure_is_kept_after_the_prefix() {
    let api = FakeApi::start(Surface::Slack, SLACK_TOKEN).await.unwrap();
    // Slack's stream calls are spaced a second apart per conversation: wait for the slot.
    let client = SlackClient::new(SLACK_TOKEN)
        .with_renderer(SlackMarkdown::new())
        .base_url(api.base_url())
        .policy(send_policy().max_wait(Duration::from_secs(5)));
    let bot = Bot::new()
        .with_client(client)
        .with_policy(quick_follow_up());
    let address = SlackAddress::new("C024BE91L")
        .in_thread("1699999999.000100")
        .for_recipient("U0123456789", "T0123456789");

    // The scripted provider behind the Router: a healthy stream.
    let connector = ScriptedConnector::new().on("primary", [Step::chunks([B1, B2, B3])]);
    let model = Arc::new(Router::new(connector, "primary", RetryConfig::default()));
    #[egress_boundary(interactive)]
    async fn streamed(
        turn: &Turn,
        model: &Arc<Router<ScriptedConnector>>,
    ) -> Result<AnswerStream, EgressError> {
        Ok(model.answer_stream(turn, "Is the build green?"))
    }
    let turn = bot.turn(
        address.clone(),
        Attribution::new("ci-bot", "conv-s", "run-1"),
    );
    let delivery = tokio::time::timeout(BOUND, async {
        bot.send(&turn, streamed(&turn, &model).await).await
    })
    .await
    .expect("in time")
    .unwrap();
    assert_eq!(delivery.outcome(), Outcome::Answered);
    assert_eq!(api.calls_to("chat.startStream"), 1);
    assert_eq!(
        api.calls_to("chat.postMessage"),
        0,
        "no block posted on its own: {:?} {:?}",
        api.texts(),
        api.streams()
            .iter()
            .map(|s| s.text.clone())
            .collect::<Vec<_>>()
    );
    let whole = [B1, B2, B3].map(str::trim).join(BLOCK_SEPARATOR);
    assert_eq!(api.streams()[0].text, whole);

    // A route whose first stream fails after two blocks: the rest is promised, and the
    // in-memory keeper's follow-up (the same handler, healthy now) sends only the rest.
    let calls = Arc::new(AtomicU32::new(0));
    let route = bot.route("stream", {
        let calls = Arc::clone(&calls);
        move |turn: Turn, (): ()| {
            let first = calls.fetch_add(1, Ordering::SeqCst) == 0;
            async move { chunked(&turn, first).await }
        }
    });
    #[egress_boundary(interactive)]
    async fn chunked(turn: &Turn, fail: bool) -> Result<AnswerStream, EgressError> {
        let mut chunks = vec![Ok(B1.to_owned()), Ok(B2.to_owned())];
        chunks.push(if fail {
            Err(EgressError::transport(CAUSE, turn.attribution().clone()))
        } else {
            Ok(B3.to_owned())
        });
        Ok(AnswerStream::from_chunks(turn, chunks))
    }
    let turn = bot.turn(address, Attribution::new("ci-bot", "conv-s2", "run-1"));
    let delivery = tokio::time::timeout(BOUND, bot.run(&turn, &route, ()))
        .await
        .expect("in time")
        .unwrap();
    assert_eq!(delivery.outcome(), Outcome::Holding);
    assert!(matches!(delivery.promise(), Some(Promise::Bot(_))));
    assert_eq!(delivery.delivered(), [B1, B2].concat());
    let streams = api.streams();
    assert_eq!(
        streams[1].text,
        [B1, B2].map(str::trim).join(BLOCK_SEPARATOR)
    );
    let texts = received(&api, 2).await;
    assert_eq!(texts.len(), 2, "the holding line, then the rest: {texts:?}");
    assert_eq!(texts[1].trim(), B3.trim(), "only what follows the prefix");
    never_the_cause(&texts);
    never_the_cause(
        &api.streams()
            .into_iter()
            .map(|s| s.text)
            .collect::<Vec<_>>(),
    );
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "the same handler, re-run once"
    );
}

#[tokio::test]
async fn a_durable_promise_is_kept_by_a_worker_after_a_restart_on_the_same_sqlite_file() {
    let place = Backend::Sqlite.place();
    let slack_api = FakeApi::start(Surface::Slack, SLACK_TOKEN).await.unwrap();
    let discord_api = FakeApi::start(Surface::Discord, DISCORD_TOKEN)
        .await
        .unwrap();
    let slack_address = SlackAddress::new("C0123456789");
    let discord_address = DiscordAddress::new("223456789012345678");

    // The first process: its answers fail, so both conversations get a holding line, each
    // promise stored before its line goes.
    {
        let store = Store::open(&place.url).await.unwrap();
        let bot = Bot::new()
            .with_client(slack(&slack_api))
            .with_client(discord(&discord_api))
            .with_policy(quick_follow_up())
            .with_store(store.clone());
        let route = answer_route(&bot, u32::MAX);
        for (address, conversation) in [
            (
                mesh_egress::Address::from(slack_address.clone()),
                "conv-slack",
            ),
            (discord_address.clone().into(), "conv-discord"),
        ] {
            let turn = bot.turn(address, Attribution::new("ci-bot", conversation, "run-1"));
            let q = Question {
                text: format!("status of {conversation}"),
            };
            let delivery = bot.run(&turn, &route, q).await.unwrap();
            assert_eq!(delivery.outcome(), Outcome::Holding);
            assert!(
                matches!(delivery.promise(), Some(Promise::Bot(_))),
                "stored with the store's keeper"
            );
            let stored = store.commitments(conversation).await.unwrap();
            assert_eq!(stored.len(), 1);
            assert_eq!(stored[0].status, CommitmentStatus::Pending);
        }
        store.close().await;
    }
    assert_eq!(slack_api.texts().len(), 1);
    assert_eq!(discord_api.texts().len(), 1);

    // The restart: a new bot (the same route, healthy now) and its worker on the same file.
    let store = Store::open(&place.url).await.unwrap();
    let bot = Bot::new()
        .with_client(slack(&slack_api))
        .with_client(discord(&discord_api))
        .with_policy(quick_follow_up())
        .with_store(store.clone());
    let _route = answer_route(&bot, 0);
    let worker = bot
        .worker("worker-after-restart")
        .expect("the bot has a store")
        .with_poll_interval(Duration::from_millis(10));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let report = tokio::time::timeout(BOUND, worker.run_once(&Cancellation::new()))
        .await
        .expect("in time")
        .unwrap();
    assert_eq!(report.fulfilled, 2, "{report:?}");
    let slack_texts = slack_api.texts();
    let discord_texts = discord_api.texts();
    assert_eq!(
        slack_texts[1],
        "You asked: status of conv-slack. It is green."
    );
    assert_eq!(
        discord_texts[1],
        "You asked: status of conv-discord. It is green."
    );
    assert_eq!(slack_api.received()[1].target, "C0123456789");
    never_the_cause(&slack_texts);
    never_the_cause(&discord_texts);
    for conversation in ["conv-slack", "conv-discord"] {
        let stored = store.commitments(conversation).await.unwrap();
        assert_eq!(stored[0].status, CommitmentStatus::Fulfilled);
    }
}
