//! The one path: every front-door entry decides the mode once, keeps a promise through the
//! destination that carried its holding line, and runs the gate and Layer C once per try.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use mesh_egress::bot::Outcome;
use mesh_egress::channel::Recorder;
use mesh_egress::{Address, AgentMessage, Attribution, Bot, EgressError, Turn, egress_boundary};

/// Every wait is bounded by this (paused time: it costs nothing).
const BOUND: Duration = Duration::from_secs(600);
const CAUSE: &str = "CAUSE-upstream-503-one-path";

fn attribution(run: &str) -> Attribution {
    Attribution::new("ops-bot", "conv-1", run)
}

/// Never answers.
#[egress_boundary(proactive)]
async fn digest_that_hangs(turn: &Turn) -> Result<AgentMessage, EgressError> {
    let _ = turn;
    std::future::pending().await
}

#[tokio::test(start_paused = true)]
async fn a_proactive_route_that_misses_its_deadline_stays_silent() {
    let bot = Bot::new();
    let digest = bot.route("digest", |turn: Turn, (): ()| async move {
        digest_that_hangs(&turn).await
    });
    let page = Recorder::new();
    let turn = bot
        .turn(Address::Plain, attribution("run-deadline"))
        .with_timeout(Duration::from_secs(2));
    let delivery = tokio::time::timeout(BOUND, bot.run_to(&turn, &page, &digest, ()))
        .await
        .expect("the turn ends at its deadline")
        .expect("nothing failed to send");
    assert_eq!(delivery.outcome(), Outcome::Silent);
    assert!(page.sent().is_empty(), "{:?}", page.sent());
}

/// Fails with the cause while `failures` is above zero (counting it down), then answers.
#[egress_boundary(interactive)]
async fn status(turn: &Turn, failures: &AtomicU32) -> Result<AgentMessage, EgressError> {
    if failures
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
    {
        return Err(EgressError::transport(CAUSE, turn.attribution().clone()));
    }
    Ok(turn.message("The deploy finished at 09:12."))
}

/// A bot whose `status` route fails once, then answers; promises kept 10 ms after the line.
fn flaky_bot(bot: Bot) -> (Bot, mesh_egress::bot::Endpoint<()>) {
    let bot = bot.with_follow_up(Duration::from_millis(10), 2);
    let failures = Arc::new(AtomicU32::new(1));
    let route = bot.route("status", move |turn: Turn, (): ()| {
        let failures = Arc::clone(&failures);
        async move { status(&turn, &failures).await }
    });
    (bot, route)
}

async fn held_then_kept(bot: &Bot, route: &mesh_egress::bot::Endpoint<()>, page: &Recorder) {
    let turn = bot.turn(Address::Plain, attribution("run-promise"));
    let delivery = bot.run_to(&turn, page, route, ()).await.expect("sent");
    assert_eq!(delivery.outcome(), Outcome::Holding);
    let kept = tokio::time::timeout(BOUND, bot.promises_kept())
        .await
        .expect("the promise ends");
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(*kept[0].as_ref().expect("kept"), Outcome::Answered);
}

#[tokio::test(start_paused = true)]
async fn run_to_keeps_its_promise_through_the_channel_that_carried_the_line_with_no_client() {
    let (bot, route) = flaky_bot(Bot::new());
    let page = Recorder::new();
    held_then_kept(&bot, &route, &page).await;
    let sent = page.sent();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(sent[1], "The deploy finished at 09:12.");
    assert!(!sent.iter().any(|text| text.contains(CAUSE)));
}

#[tokio::test(start_paused = true)]
async fn run_to_keeps_its_promise_through_its_channel_not_a_client_for_the_same_address() {
    let console = Recorder::new();
    let (bot, route) = flaky_bot(Bot::new().with_client(console.clone()));
    let page = Recorder::new();
    held_then_kept(&bot, &route, &page).await;
    let sent = page.sent();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(sent[1], "The deploy finished at 09:12.");
    assert!(console.sent().is_empty(), "{:?}", console.sent());
}
