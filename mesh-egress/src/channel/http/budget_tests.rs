//! The conversation's rate budget as the connectors spend it, against the loopback fakes
//! (moved from the integration tests when the budget itself became crate-private; the
//! behaviour a person sees through a channel is still tested there): a Telegram group whose
//! window a stream's previews filled still takes the final messages its reserve holds, and no
//! more; a budget wait past `max_wait` fails at once; which chats are windowed.

use std::time::{Duration, Instant};

use super::retry::tests::committed;
use crate::address::Surface;
use crate::channel::TelegramChannel;
use crate::channel::stream::{BudgetConfig, CallKind, StreamingChannel};
use crate::channel::{Channel, ChannelError, ChannelErrorKind, PlainText, SendPolicy};
use crate::egress::Attribution;
use crate::testing::FakeApi;

const TOKEN: &str = "123456789:AAF-secret_TOKEN_value";
const GROUP: &str = "-1001234567890";
/// Every wait in these tests is bounded by this.
const BOUND: Duration = Duration::from_secs(20);
/// What a test allows for work that must not wait on the budget (loopback calls only).
const AT_ONCE: Duration = Duration::from_secs(1);

fn attribution() -> Attribution {
    Attribution::new("ops-bot", "conv-1", "run-1")
}

fn policy() -> SendPolicy {
    SendPolicy::new()
        .max_tries(3)
        .max_wait(Duration::from_secs(2))
        .backoff(Duration::from_millis(2))
        .request_timeout(Duration::from_secs(2))
}

/// Telegram's group window (twenty calls a minute, five held for final messages), spaced
/// 5 ms apart so the test fills it quickly.
fn group_window() -> BudgetConfig {
    BudgetConfig::new(Duration::from_millis(5))
        .window(20, Duration::from_secs(60))
        .final_reserve(5)
}

/// A channel to a Telegram group on `api`, its window [`group_window`].
fn group_chat(api: &FakeApi) -> TelegramChannel<PlainText> {
    TelegramChannel::new(TOKEN, GROUP)
        .with_renderer(PlainText::new())
        .with_stream_budget(group_window())
        .base_url(api.base_url())
        .policy(policy())
}

fn rate_limited_wait(error: &(dyn std::error::Error + 'static)) -> Option<Duration> {
    let mut source = Some(error);
    while let Some(error) = source {
        if let Some(channel) = error.downcast_ref::<ChannelError>()
            && let ChannelErrorKind::RateLimited { retry_after, .. } = channel.kind()
        {
            return *retry_after;
        }
        source = error.source();
    }
    None
}

#[tokio::test]
async fn telegram_a_group_window_full_of_previews_still_takes_the_reserved_final_messages() {
    let api = FakeApi::start(Surface::Telegram, TOKEN).await.unwrap();
    let channel = group_chat(&api);
    // A stream's previews take every slot they may: the window's 20 less the 5 reserved.
    let budget = channel.stream_budget().clone();
    for _ in 0..15 {
        budget.acquire(CallKind::Preview).await;
    }
    let preview_slot = budget.next_slot(CallKind::Preview);
    assert!(
        preview_slot > tokio::time::Instant::now() + Duration::from_secs(50),
        "the previews' share is spent"
    );

    // A holding line and a fallback reply: five plain sends, all at once, within the reserve.
    let started = Instant::now();
    let mut sent = committed(6).await.into_iter();
    for part in sent.by_ref().take(5) {
        channel.send(part).await.expect("the reserve holds a slot");
    }
    assert!(started.elapsed() < AT_ONCE, "{:?}", started.elapsed());
    assert_eq!(api.texts().len(), 5);

    // The window is full now: the sixth is handed back at once, never slept past max_wait.
    let started = Instant::now();
    let error = channel.send(sent.next().unwrap()).await.unwrap_err();
    assert!(started.elapsed() < AT_ONCE, "{:?}", started.elapsed());
    assert_eq!(api.attempts(), 5, "no request for the sixth part");
    let wait = error
        .retry_after()
        .expect("the wait until the window's slot");
    assert!(wait > Duration::from_secs(50), "{wait:?}");
    assert_eq!(rate_limited_wait(&error), Some(wait));
    assert!(error.part().is_some(), "the part comes back to resend");
}

#[tokio::test]
async fn telegram_a_stream_whose_window_slot_is_beyond_max_wait_fails_at_once() {
    let api = FakeApi::start(Surface::Telegram, TOKEN).await.unwrap();
    let channel = group_chat(&api);
    for _ in 0..20 {
        channel.stream_budget().acquire(CallKind::Final).await;
    }
    let started = Instant::now();
    let mut stream = channel.open_stream(&attribution()).unwrap();
    for part in committed(2).await {
        stream.append(part);
    }
    let error = tokio::time::timeout(BOUND, stream.finish())
        .await
        .expect("bounded")
        .unwrap_err();
    assert!(started.elapsed() < AT_ONCE, "{:?}", started.elapsed());
    assert_eq!(api.attempts(), 0, "nothing sent inside a full window");
    assert_eq!(error.unconfirmed().len(), 2, "both parts come back");
    let wait = rate_limited_wait(&error).expect("rate limited, with the wait");
    assert!(wait > Duration::from_secs(50), "{wait:?}");
}

#[test]
fn telegram_windows_only_groups_and_a_sibling_takes_its_own_chats_limits() {
    let second = Duration::from_secs(1);
    let group_limits = BudgetConfig::new(second)
        .window(20, Duration::from_secs(60))
        .final_reserve(5);
    let private = TelegramChannel::new("1:t", "123456789");
    assert_eq!(private.stream_budget().config(), BudgetConfig::new(second));
    let group = TelegramChannel::new("1:t", "-1001234567890");
    assert_eq!(group.stream_budget().config(), group_limits);
    assert_eq!(
        private.for_chat("@channelname").stream_budget().config(),
        group_limits
    );
    assert_eq!(
        group.for_chat("42").stream_budget().config(),
        BudgetConfig::new(second)
    );
    // A budget set by hand is kept for the sibling.
    let custom = BudgetConfig::new(Duration::from_millis(10));
    let tuned = TelegramChannel::new("1:t", "123456789").with_stream_budget(custom);
    assert_eq!(tuned.for_chat("-100").stream_budget().config(), custom);
}
