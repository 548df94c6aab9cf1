//! The Slack, Discord and Telegram connectors against loopback fakes of their APIs: success,
//! each surface's rate-limit answer, server errors, resumable delivery, token redaction and
//! bodies that are not JSON.

use std::error::Error as _;
use std::time::Duration;

use mesh_egress::Surface;
use mesh_egress::channel::{
    BoxedChannel, Deliver, DeliveryError, DiscordChannel, PlainText, SendError, SlackChannel,
    TelegramChannel,
};
use mesh_egress::channel::{ChannelError, ChannelErrorKind, SendPolicy};
use mesh_egress::testing::{ChatStep, FakeApi, FakeResponse};
use mesh_egress::{AgentMessage, Attribution};

mod support;

const SURFACES: [Surface; 3] = [Surface::Slack, Surface::Discord, Surface::Telegram];
const TOKEN: &str = "123456789:AAF-secret_TOKEN_value";
const TRIES: u32 = 3;

/// Short waits: a rate-limit answer longer than the 30 ms budget (a whole second for Slack and
/// Telegram) hands the part back at once.
fn policy() -> SendPolicy {
    SendPolicy::new()
        .max_tries(TRIES)
        .max_wait(Duration::from_millis(30))
        .backoff(Duration::from_millis(1))
        .request_timeout(Duration::from_secs(5))
}

fn message(text: impl Into<String>) -> AgentMessage {
    let text: String = text.into();
    AgentMessage::new(text, Attribution::new("ops-bot", "conv-1", "run-1"))
}

/// `n` parts of exactly ten characters each under a ten-character limit.
fn parts(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("part{i:03}abc")).collect()
}

fn connect(surface: Surface, base_url: String, limit: usize) -> BoxedChannel {
    connect_with(surface, base_url, limit, policy())
}

fn connect_with(
    surface: Surface,
    base_url: String,
    limit: usize,
    policy: SendPolicy,
) -> BoxedChannel {
    let renderer = PlainText::new().with_limit(limit);
    match surface {
        Surface::Slack => BoxedChannel::new(
            SlackChannel::new(TOKEN, "C024BE91L")
                .with_renderer(renderer)
                .base_url(base_url)
                .policy(policy),
        ),
        Surface::Discord => BoxedChannel::new(
            DiscordChannel::new(TOKEN, "1100000000000000001")
                .with_renderer(renderer)
                .base_url(base_url)
                .policy(policy),
        ),
        _ => BoxedChannel::new(
            TelegramChannel::new(TOKEN, "-1001234567890")
                .with_renderer(renderer)
                .base_url(base_url)
                .policy(policy),
        ),
    }
}

async fn fake(surface: Surface) -> FakeApi {
    FakeApi::start(surface, TOKEN).await.expect("bind loopback")
}

fn channel_error(error: &SendError) -> &ChannelError {
    error
        .source()
        .and_then(|e| e.downcast_ref::<ChannelError>())
        .expect("a connector's send error carries a ChannelError")
}

#[tokio::test]
async fn slack_posts_each_part_with_the_bot_token_channel_thread_and_part_metadata() {
    let api = fake(Surface::Slack).await;
    let slack = SlackChannel::new(TOKEN, "C024BE91L")
        .with_renderer(PlainText::new().with_limit(10))
        .in_thread("1700000000.000001")
        .base_url(api.base_url())
        .policy(policy());

    let receipt = slack.deliver(message(parts(2).concat())).await.unwrap();

    let received = api.received();
    assert_eq!(api.texts(), parts(2));
    assert_eq!(
        receipt.ids(),
        [received[0].id.as_str(), received[1].id.as_str()]
    );
    let delivery = receipt.delivery_id().unwrap().to_string();
    for (index, got) in received.iter().enumerate() {
        assert_eq!(got.target, "C024BE91L");
        assert_eq!(got.body["thread_ts"], "1700000000.000001");
        assert_eq!(
            got.body["metadata"]["event_payload"]["delivery"],
            delivery.as_str()
        );
        assert_eq!(got.body["metadata"]["event_payload"]["part"], index);
    }
}

#[tokio::test]
async fn discord_posts_each_part_with_the_idempotency_key_as_an_enforced_nonce() {
    let api = fake(Surface::Discord).await;
    let discord = DiscordChannel::new(TOKEN, "1100000000000000001")
        .with_renderer(PlainText::new().with_limit(10))
        .base_url(api.base_url())
        .policy(policy());

    let receipt = discord.deliver(message(parts(3).concat())).await.unwrap();

    assert_eq!(api.texts(), parts(3));
    let delivery = receipt.delivery_id().unwrap();
    for (index, got) in api.received().iter().enumerate() {
        assert_eq!(got.target, "1100000000000000001");
        assert_eq!(got.body["nonce"], format!("{delivery}-{index}"));
        assert_eq!(got.body["enforce_nonce"], true);
    }
}

#[tokio::test]
async fn telegram_sends_each_part_in_html_parse_mode_to_the_numeric_chat() {
    let api = fake(Surface::Telegram).await;
    let telegram = TelegramChannel::new(TOKEN, "-1001234567890")
        .with_renderer(PlainText::new().with_limit(10))
        .in_topic(42)
        .base_url(api.base_url())
        .policy(policy());

    let receipt = telegram.deliver(message(parts(2).concat())).await.unwrap();

    assert_eq!(api.texts(), parts(2));
    assert_eq!(receipt.ids(), ["1", "2"]);
    for got in api.received() {
        assert_eq!(got.body["parse_mode"], "HTML");
        assert_eq!(got.body["chat_id"], -1_001_234_567_890_i64);
        assert_eq!(got.body["message_thread_id"], 42);
    }
}

#[tokio::test]
async fn each_surface_retries_after_its_own_429_form_and_delivers_once() {
    for surface in SURFACES {
        let api = fake(surface).await;
        api.script([FakeResponse::chat_rate_limited(
            surface,
            Duration::from_millis(5),
        )]);
        // Slack's and Telegram's waits are whole seconds (5 ms is 1 s): a budget that holds it.
        let channel = connect_with(
            surface,
            api.base_url(),
            10,
            policy().max_wait(Duration::from_millis(1500)),
        );

        let receipt = channel.deliver(message(parts(2).concat())).await.unwrap();

        assert_eq!(receipt.len(), 2, "{surface}");
        assert_eq!(api.texts(), parts(2), "{surface}");
        assert_eq!(api.attempts(), 3, "{surface}: one 429, then two posts");
    }
}

#[tokio::test]
async fn a_discord_global_rate_limit_is_honoured_and_reported_when_it_outlasts_the_budget() {
    let api = fake(Surface::Discord).await;
    api.script([FakeResponse::chat_global_rate_limited(
        Surface::Discord,
        Duration::from_millis(3),
    )]);
    let channel = connect(Surface::Discord, api.base_url(), 100);
    let receipt = channel.deliver(message("first")).await.unwrap();
    assert_eq!(receipt.len(), 1);
    assert_eq!(api.texts(), ["first"]);

    api.script(vec![
        FakeResponse::chat_global_rate_limited(
            Surface::Discord,
            Duration::from_secs(9)
        );
        TRIES as usize
    ]);
    let error = channel.deliver(message("second")).await.unwrap_err();
    let DeliveryError::Send { source, .. } = &error else {
        panic!("expected a send failure, got {error:?}");
    };
    assert_eq!(source.retry_after(), Some(Duration::from_secs(9)));
    assert!(source.retryable());
    assert_eq!(
        channel_error(source).kind(),
        &ChannelErrorKind::RateLimited {
            retry_after: Some(Duration::from_secs(9)),
            global: true
        }
    );
    assert_eq!(api.texts(), ["first"]);
}

#[tokio::test]
async fn slack_and_discord_retry_a_5xx_and_a_reset_connection_then_deliver_once() {
    // A reset is retried only where a repeat cannot post twice (Slack looks the part up first,
    // Discord dedupes by nonce); Telegram's case is the test below.
    for surface in [Surface::Slack, Surface::Discord] {
        let api = fake(surface).await;
        api.script([
            FakeResponse::chat_server_error(surface, 503).into(),
            ChatStep::Accept,
            FakeResponse::close_mid_response().into(),
        ]);
        let channel = connect(surface, api.base_url(), 10);

        let receipt = channel.deliver(message(parts(2).concat())).await.unwrap();

        assert_eq!(receipt.len(), 2, "{surface}");
        assert_eq!(api.texts(), parts(2), "{surface}");
        assert_eq!(api.attempts(), 4, "{surface}");
    }
}

#[tokio::test]
async fn a_part_failing_midway_is_named_and_redelivery_sends_exactly_the_missing_parts() {
    for surface in SURFACES {
        let api = fake(surface).await;
        // A 5xx may follow a posted message: repeated where a repeat cannot post twice (Slack
        // looks the part up first, Discord dedupes by nonce), never on Telegram.
        let tries = if surface == Surface::Telegram {
            1
        } else {
            TRIES
        };
        let mut script = vec![ChatStep::Accept];
        script.extend(vec![
            FakeResponse::chat_server_error(surface, 500).into();
            tries as usize
        ]);
        api.script(script);
        let channel = connect(surface, api.base_url(), 10);

        let error = channel
            .deliver(message(parts(4).concat()))
            .await
            .unwrap_err();

        let DeliveryError::Send {
            failed,
            total,
            source,
            undelivered,
        } = error
        else {
            panic!("{surface}: expected a send failure");
        };
        assert_eq!((failed, total), (1, 4), "{surface}");
        assert_eq!(channel_error(&source).tries(), tries, "{surface}");
        assert!(source.maybe_delivered(), "{surface}: a 5xx may have posted");
        assert_eq!(undelivered.indexes(), [1, 2, 3], "{surface}");
        assert_eq!(undelivered.delivered().len(), 1, "{surface}");
        assert_eq!(api.texts(), parts(1), "{surface}");

        let receipt = channel.deliver(*undelivered).await.unwrap();

        assert_eq!(
            api.texts(),
            parts(4),
            "{surface}: each part exactly once, in order"
        );
        assert_eq!(receipt.len(), 4, "{surface}");
        let indexes: Vec<usize> = receipt.parts().iter().map(|p| p.index()).collect();
        assert_eq!(indexes, [0, 1, 2, 3], "{surface}");
    }
}

#[tokio::test]
async fn telegram_hands_back_a_part_after_a_5xx_or_a_lost_answer_never_posting_twice() {
    let api = fake(Surface::Telegram).await;
    // A 5xx may follow a posted message as a lost answer may: neither is repeated.
    api.script([
        ChatStep::AcceptThen(FakeResponse::chat_server_error(Surface::Telegram, 502)),
        ChatStep::Accept,
        ChatStep::Accept,
        ChatStep::lost_response(),
    ]);
    let channel = connect(Surface::Telegram, api.base_url(), 10);

    let error = channel
        .deliver(message(parts(3).concat()))
        .await
        .unwrap_err();
    // Part 1 posted, answered 502: handed back, maybe delivered, not sent again.
    assert_eq!(api.texts(), parts(1));
    assert_eq!(api.attempts(), 1);
    let DeliveryError::Send {
        failed,
        source: first,
        undelivered,
        ..
    } = error
    else {
        panic!("a send error");
    };
    assert_eq!(failed, 0);
    assert!(first.retryable() && first.maybe_delivered(), "{first:?}");
    assert!(matches!(
        channel_error(&first).kind(),
        ChannelErrorKind::Server { status: 502 }
    ));

    // The caller's choice (here: at least once) sends it again, and part 2; part 3 is
    // posted but its answer lost: not sent again.
    let error = channel.deliver(*undelivered).await.unwrap_err();
    assert_eq!(api.texts(), [&parts(1)[..], &parts(3)[..]].concat());
    assert_eq!(api.attempts(), 4);
    let DeliveryError::Send {
        failed,
        source: error,
        ..
    } = &error
    else {
        panic!("a send error: {error:?}");
    };
    assert_eq!(*failed, 2);
    assert!(error.retryable(), "the outcome is unknown, not a refusal");
    assert!(error.maybe_delivered());
    assert_eq!(error.retry_after(), None);
    assert!(matches!(
        channel_error(error).kind(),
        ChannelErrorKind::Transport { .. }
    ));
}

#[tokio::test]
async fn a_lost_discord_response_is_deduplicated_by_the_nonce_on_retry() {
    let api = fake(Surface::Discord).await;
    api.script([ChatStep::AcceptThen(FakeResponse::close_mid_response())]);
    let channel = connect(Surface::Discord, api.base_url(), 100);

    let receipt = channel.deliver(message("only once")).await.unwrap();

    assert_eq!(api.attempts(), 2);
    assert_eq!(api.texts(), ["only once"]);
    assert_eq!(receipt.ids(), [api.received()[0].id.as_str()]);
}

#[tokio::test]
async fn a_refusal_is_not_retried_and_carries_the_surfaces_code() {
    for surface in SURFACES {
        let api = fake(surface).await;
        api.script([FakeResponse::chat_refusal(surface, "channel_not_found")]);
        let channel = connect(surface, api.base_url(), 100);

        let error = channel.deliver(message("hello")).await.unwrap_err();

        let DeliveryError::Send {
            source,
            undelivered,
            ..
        } = &error
        else {
            panic!("{surface}: expected a send failure");
        };
        assert!(!source.retryable(), "{surface}");
        assert_eq!(api.attempts(), 1, "{surface}");
        assert_eq!(undelivered.indexes(), [0], "{surface}");
        let ChannelErrorKind::Refused { detail, .. } = channel_error(source).kind() else {
            panic!("{surface}: expected a refusal");
        };
        assert!(detail.contains("channel_not_found"), "{surface}: {detail}");
    }
}

#[tokio::test]
async fn a_non_json_answer_may_have_posted_so_only_a_reconciled_or_deduped_send_repeats_it() {
    for (status, what) in [(502, "after the proxy"), (200, "ambiguous")] {
        for surface in SURFACES {
            let api = fake(surface).await;
            api.script([FakeResponse::not_json(status)]);
            let channel = connect(surface, api.base_url(), 100);
            let result = channel.deliver(message(what)).await;
            if surface == Surface::Telegram {
                // Nothing to dedupe by, nothing to look up: handed back, maybe delivered.
                let Err(DeliveryError::Send {
                    source,
                    undelivered,
                    ..
                }) = &result
                else {
                    panic!("{surface} {status}: expected a send failure: {result:?}");
                };
                let expected = if status == 200 {
                    ChannelErrorKind::Malformed { status }
                } else {
                    ChannelErrorKind::Server { status }
                };
                assert_eq!(channel_error(source).kind(), &expected, "{surface}");
                assert!(source.retryable() && source.maybe_delivered(), "{surface}");
                assert_eq!(api.attempts(), 1, "{surface}: never repeated");
                assert_eq!(undelivered.indexes(), [0], "{surface}");
            } else {
                // Slack looked the part up (absent) before the repeat; Discord's repeat
                // carries the nonce.
                let receipt = result.unwrap_or_else(|e| panic!("{surface} {status}: {e:?}"));
                assert_eq!(receipt.len(), 1, "{surface}");
                assert_eq!(api.texts(), [what], "{surface}");
                assert_eq!(api.attempts(), 2, "{surface}");
                let lookups = if surface == Surface::Slack { 1 } else { 0 };
                assert_eq!(api.lookups(), lookups, "{surface}");
            }
        }
    }
}

#[tokio::test]
async fn a_token_no_header_can_carry_is_refused_before_any_request() {
    for surface in [Surface::Slack, Surface::Discord] {
        let api = fake(surface).await;
        let renderer = PlainText::new();
        let channel = match surface {
            Surface::Slack => BoxedChannel::new(
                SlackChannel::new("xoxb-bad\ntoken", "C1")
                    .with_renderer(renderer)
                    .base_url(api.base_url()),
            ),
            _ => BoxedChannel::new(
                DiscordChannel::new("bad\ntoken", "1")
                    .with_renderer(renderer)
                    .base_url(api.base_url()),
            ),
        };

        let error = channel.deliver(message("hello")).await.unwrap_err();

        let DeliveryError::Send { source, .. } = &error else {
            panic!("{surface}: expected a send failure");
        };
        assert_eq!(
            channel_error(source).kind(),
            &ChannelErrorKind::InvalidToken
        );
        assert!(!source.retryable());
        assert_eq!(api.attempts(), 0, "{surface}");
    }
}

/// Everything a failed delivery shows: its text, every source's text, and its Debug form.
fn everything_shown(error: &DeliveryError) -> String {
    let mut shown = format!("{error}\n{error:?}\n");
    let mut source = error.source();
    while let Some(cause) = source {
        shown.push_str(&format!("{cause}\n{cause:?}\n"));
        source = cause.source();
    }
    shown
}

#[tokio::test]
async fn the_token_never_shows_in_any_error_text_debug_output_or_log_line() {
    let logs = support::LogCapture::default();
    let _guard = logs.install();

    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let mut shown = String::new();
    for surface in SURFACES {
        // Nothing listening: the transport error would carry the URL, which for Telegram holds
        // the token.
        let unreachable = connect(surface, format!("http://{closed}"), 100);
        let error = unreachable.deliver(message("hello")).await.unwrap_err();
        assert!(matches!(
            channel_error(match &error {
                DeliveryError::Send { source, .. } => source,
                _ => panic!("{surface}: expected a send failure"),
            })
            .kind(),
            ChannelErrorKind::Transport { .. }
        ));
        shown += &everything_shown(&error);

        let api = fake(surface).await;
        let echo = format!("Bad Request: /bot{TOKEN}/sendMessage");
        let mut script = vec![FakeResponse::chat_refusal(surface, &echo)];
        // A 1 s wait is beyond the 30 ms budget: the part comes back after this one try.
        script.push(FakeResponse::chat_rate_limited(
            surface,
            Duration::from_secs(1),
        ));
        script.extend(vec![FakeResponse::close_mid_response(); TRIES as usize]);
        api.script(script);
        for _ in 0..3 {
            // A connector of its own each time: the rate limit pauses the one that met it.
            let channel = connect(surface, api.base_url(), 100);
            shown += &format!("{channel:?}\n{api:?}\n");
            let error = channel.deliver(message("hello")).await.unwrap_err();
            shown += &everything_shown(&error);
        }
        // A reset answer is tried again where a repeat cannot post twice; Telegram hands the
        // part back after the one try whose outcome it cannot know.
        let reset_tries = if surface == Surface::Telegram {
            1
        } else {
            TRIES as usize
        };
        assert_eq!(api.attempts(), 2 + reset_tries, "{surface}");
    }
    let debug_channels = format!(
        "{:?}{:?}{:?}",
        SlackChannel::new(TOKEN, "C1").with_renderer(PlainText::new()),
        DiscordChannel::new(TOKEN, "1").with_renderer(PlainText::new()),
        TelegramChannel::new(TOKEN, "1").with_renderer(PlainText::new()),
    );
    let logged = logs.text();

    assert!(
        shown.contains("[redacted]"),
        "the echoed token was scrubbed, not dropped: {shown}"
    );
    assert!(
        logged.contains("gave up on part"),
        "logs were captured: {logged}"
    );
    assert!(!shown.contains(TOKEN), "an error shows the token: {shown}");
    assert!(
        !debug_channels.contains(TOKEN),
        "a Debug shows the token: {debug_channels}"
    );
    assert!(
        !logged.contains(TOKEN),
        "a log line shows the token: {logged}"
    );
    assert!(
        !logged.contains("AAF-secret"),
        "a log line shows part of the token: {logged}"
    );
}

#[tokio::test]
async fn a_header_wait_in_milliseconds_or_as_an_http_date_is_honoured_and_reported() {
    let api = fake(Surface::Slack).await;
    let ratelimited = || FakeResponse::raw(429, r#"{"ok":false,"error":"ratelimited"}"#);
    api.script([ratelimited().with_header("retry-after-ms", "5")]);
    let channel = connect(Surface::Slack, api.base_url(), 100);
    let receipt = channel.deliver(message("after 5 ms")).await.unwrap();
    assert_eq!(receipt.len(), 1);
    assert_eq!(api.attempts(), 2);

    let in_two_minutes =
        httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(120));
    api.script(vec![
        ratelimited()
            .with_header("retry-after", &in_two_minutes);
        TRIES as usize
    ]);
    let error = channel.deliver(message("later")).await.unwrap_err();
    let DeliveryError::Send { source, .. } = &error else {
        panic!("expected a send failure, got {error:?}");
    };
    let asked = source.retry_after().expect("the HTTP-date was read");
    assert!(
        asked > Duration::from_secs(110) && asked <= Duration::from_secs(120),
        "{asked:?}"
    );
    assert_eq!(api.texts(), ["after 5 ms"]);
}

#[tokio::test]
async fn each_connector_renders_its_surfaces_format_by_default() {
    let expected = [
        (Surface::Slack, "*bold*"),
        (Surface::Discord, "**bold**"),
        (Surface::Telegram, "<b>bold</b>"),
    ];
    for (surface, wire) in expected {
        let api = fake(surface).await;
        let channel = match surface {
            Surface::Slack => {
                BoxedChannel::new(SlackChannel::new(TOKEN, "C1").base_url(api.base_url()))
            }
            Surface::Discord => {
                BoxedChannel::new(DiscordChannel::new(TOKEN, "1").base_url(api.base_url()))
            }
            _ => BoxedChannel::new(TelegramChannel::new(TOKEN, "1").base_url(api.base_url())),
        };
        let receipt = channel.deliver(message("**bold**")).await.unwrap();
        assert_eq!(receipt.len(), 1, "{surface}");
        assert_eq!(api.texts(), [wire], "{surface}");
    }
}
