//! A property of every HTTP connector: under any schedule of failures on the surface, each part
//! is delivered exactly once and in order, or the error names precisely the undelivered ones;
//! delivering those again picks up exactly where the last try stopped. A reply longer than the
//! renderer's part budget is the budget's parts, the last ending in the marker, delivered the
//! same way.

use std::time::Duration;

use mesh_egress::Surface;
use mesh_egress::channel::SendPolicy;
use mesh_egress::channel::{
    BoxedChannel, DEFAULT_MAX_PARTS, Deliver, DeliveryError, DiscordChannel, PlainText, Render,
    SlackChannel, TelegramChannel,
};
use mesh_egress::testing::{ChatStep, FakeApi, FakeResponse};
use mesh_egress::{AgentMessage, Attribution, Markdown};
use proptest::prelude::*;

const TOKEN: &str = "prop-token";

fn connect(surface: Surface, base_url: String) -> BoxedChannel {
    let policy = SendPolicy::new()
        .max_tries(2)
        .max_wait(Duration::from_millis(10))
        .backoff(Duration::from_millis(1))
        .request_timeout(Duration::from_secs(5));
    let renderer = PlainText::new().with_limit(10);
    match surface {
        Surface::Slack => BoxedChannel::new(
            SlackChannel::new(TOKEN, "C1")
                .with_renderer(renderer)
                .base_url(base_url)
                .policy(policy),
        ),
        Surface::Discord => BoxedChannel::new(
            DiscordChannel::new(TOKEN, "1")
                .with_renderer(renderer)
                .base_url(base_url)
                .policy(policy),
        ),
        _ => BoxedChannel::new(
            TelegramChannel::new(TOKEN, "1")
                .with_renderer(renderer)
                .base_url(base_url)
                .policy(policy),
        ),
    }
}

fn surface() -> impl Strategy<Value = Surface> {
    prop_oneof![
        Just(Surface::Slack),
        Just(Surface::Discord),
        Just(Surface::Telegram)
    ]
}

/// The surface's trouble, as a strategy draws it; [`Fault::step`] scripts it on the fake.
#[derive(Clone, Debug, PartialEq)]
enum Fault {
    Pass,
    RateLimited,
    GlobalRateLimited,
    ServerError(u16),
    NotJson(u16),
    Reset,
    LoseResponse,
    Refuse,
}

impl Fault {
    fn step(&self, surface: Surface) -> ChatStep {
        let wait = Duration::from_millis(2);
        match self {
            Self::Pass => ChatStep::Accept,
            Self::RateLimited => FakeResponse::chat_rate_limited(surface, wait).into(),
            Self::GlobalRateLimited => FakeResponse::chat_global_rate_limited(surface, wait).into(),
            Self::ServerError(status) => FakeResponse::chat_server_error(surface, *status).into(),
            Self::NotJson(status) => FakeResponse::not_json(*status).into(),
            Self::Reset => FakeResponse::close_mid_response().into(),
            Self::LoseResponse => ChatStep::AcceptThen(FakeResponse::close_mid_response()),
            Self::Refuse => FakeResponse::chat_refusal(surface, "invalid_blocks").into(),
        }
    }
}

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        3 => Just(Fault::Pass),
        1 => Just(Fault::RateLimited),
        1 => Just(Fault::GlobalRateLimited),
        1 => Just(Fault::ServerError(500)),
        1 => Just(Fault::ServerError(503)),
        1 => Just(Fault::NotJson(502)),
        1 => Just(Fault::NotJson(200)),
        1 => Just(Fault::Reset),
        1 => Just(Fault::LoseResponse),
        1 => Just(Fault::Refuse),
    ]
}

fn check(surface: Surface, n: usize, schedule: Vec<Fault>) -> Result<(), TestCaseError> {
    // Slack and Telegram have no idempotency key: a lost response there may duplicate by
    // design, so only Discord gets that fault.
    let schedule: Vec<Fault> = schedule
        .into_iter()
        .map(|f| match f {
            Fault::LoseResponse if surface != Surface::Discord => Fault::Reset,
            f => f,
        })
        .collect();
    // A lost response leaves one part posted that the connector could not know went: the error
    // still names it, and Discord's nonce makes sending it again harmless.
    let ambiguous = schedule.contains(&Fault::LoseResponse);
    let rounds = schedule.len() + 1;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let api = FakeApi::start(surface, TOKEN).await.expect("bind loopback");
        api.script(schedule.iter().map(|fault| fault.step(surface)));
        let mut channel = connect(surface, api.base_url());
        let words: Vec<String> = (0..n).map(|i| format!("part{i:03}abc")).collect();
        let expected = if n <= DEFAULT_MAX_PARTS {
            words.clone()
        } else {
            // Past the budget the last part makes room for the marker.
            let cut = PlainText::new()
                .with_limit(10)
                .render_parts(&Markdown::new(words.concat()));
            let cut = cut.expect("renders");
            prop_assert!(cut.cut().is_some());
            cut.into_parts()
        };
        let n = expected.len();
        prop_assert!(n <= DEFAULT_MAX_PARTS);
        prop_assert_eq!(
            &expected[..n.min(DEFAULT_MAX_PARTS - 1)],
            &words[..n.min(DEFAULT_MAX_PARTS - 1)]
        );
        if words.len() > DEFAULT_MAX_PARTS {
            prop_assert!(expected[n - 1].ends_with('…'), "{:?}", expected);
        }
        let message = AgentMessage::new(words.concat(), Attribution::new("a", "c", "r"));

        let mut outcome = channel.deliver(message).await;
        // Each failed round consumes at least one scripted fault, so this ends. (A part handed
        // back at once because the conversation's budget is still paused by a 429 consumed
        // none. Waiting its `retry_after` out would cost a second per Slack 429, whose
        // Retry-After is whole seconds, so the next round resumes through a fresh connector,
        // as another worker resuming the outbox would: it makes a request.)
        for _ in 0..rounds {
            match outcome {
                Ok(receipt) => {
                    prop_assert_eq!(api.texts(), expected.clone());
                    let indexes: Vec<usize> = receipt.parts().iter().map(|p| p.index()).collect();
                    prop_assert_eq!(indexes, (0..n).collect::<Vec<_>>());
                    return Ok(());
                }
                Err(DeliveryError::Send {
                    failed,
                    total,
                    source,
                    undelivered,
                }) => {
                    if source.retry_after().is_some() {
                        channel = connect(surface, api.base_url());
                    }
                    prop_assert_eq!(total, n);
                    let texts = api.texts();
                    let lost_one = ambiguous && texts == expected[..failed + 1];
                    prop_assert!(
                        texts == expected[..failed] || lost_one,
                        "posted {:?} after part {} failed",
                        texts,
                        failed
                    );
                    prop_assert_eq!(undelivered.indexes(), (failed..n).collect::<Vec<_>>());
                    prop_assert_eq!(undelivered.delivered().len(), failed);
                    outcome = channel.deliver(*undelivered).await;
                }
                Err(other) => {
                    return Err(TestCaseError::fail(format!("not a send failure: {other}")));
                }
            }
        }
        Err(TestCaseError::fail(
            "the schedule was spent but delivery still failed",
        ))
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn every_part_is_delivered_exactly_once_in_order_or_named_undelivered(
        surface in surface(),
        n in prop_oneof![3 => 1usize..6, 1 => 9usize..14],
        schedule in proptest::collection::vec(fault(), 0..14),
    ) {
        check(surface, n, schedule)?;
    }
}
