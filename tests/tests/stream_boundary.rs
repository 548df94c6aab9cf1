//! A streamed turn through the front door (`Bot::send_to`), rule by rule, in paused time
//! against the scripted connector: blocks are sent as they complete, a failure before the first
//! block is today's behaviour, a failure after it never repeats a word (continued on a
//! fallback, or Layer C for the rest), a block the gate blocks stops the stream, and
//! cancellation or a lost ownership stop it at once.

use std::sync::Arc;

use mesh_egress::bot::Promise;
use mesh_egress::bot::{Delivery, Outcome};
use mesh_egress::degrade::{DegradationPolicy, Mode};
use mesh_egress::gate::{GateVerdict, QualityGate};
use mesh_egress::ledger::{DegradationOutcome, JoinedBy, LedgerRecord, RecoveryReport};
use mesh_egress::model::FailureReason;
use mesh_egress::model::{Jitter, ModelError, RetryConfig, Route, Router};
use mesh_egress::testing::{ScriptedConnector, Step};
use mesh_egress::{Cancellation, Ownership, StopReason, Turn};
use tokio::time::Instant;

mod stream_support;
use stream_support::{
    B1, B2, B3, B4, MS, Timed, assert_held_after, assert_nothing_from_the_blocked_block_on, bot,
    stream_gated, stream_interactive, stream_routed, trimmed, turn,
};

fn router(
    connector: &ScriptedConnector,
    config: RetryConfig,
    names: &[&str],
) -> Arc<Router<ScriptedConnector>> {
    let mut routes = names.iter().map(|n| Route::new(*n));
    let primary = routes.next().expect("a primary");
    Arc::new(
        Router::with_routes(connector.clone(), primary, routes, config)
            .with_jitter(Jitter::fixed(0.0)),
    )
}

/// A primary that sends B1 and B2, then fails with a 500 before B3.
fn failing_after_two_blocks() -> ScriptedConnector {
    ScriptedConnector::new().on(
        "primary",
        [Step::chunks([B1, B2, B3]).fail_after(2, || ModelError::status(500))],
    )
}

/// Streams B1, B2, B3 100 ms apart on `turn` (a turn of `bot`), running `stop` right after the
/// first send.
async fn stream_with_stop_after_first_send(
    bot: &mesh_egress::Bot,
    turn: &Turn,
    stop: impl Fn() + Send + Sync + 'static,
) -> (Delivery, Timed) {
    let connector =
        ScriptedConnector::new().on("primary", [Step::chunks([B1, B2, B3]).chunk_delay(MS(100))]);
    let router = router(&connector, RetryConfig::default(), &["primary"]);
    let channel = Timed::new().after_first_send(stop);
    let delivery = stream_routed(bot, turn, Mode::Interactive, &channel, &router)
        .await
        .expect("stopped");
    (delivery, channel)
}

/// Whether Layer C answered the turn with silence (not the agent's own silence token).
fn layer_c_chose_silence(turn: &Turn) -> bool {
    turn.ledger().entries().iter().any(|e| {
        matches!(
            e.record(),
            LedgerRecord::Degradation(d)
                if d.mode() == Mode::Proactive
                    && matches!(d.outcome(), DegradationOutcome::Silence { .. })
        )
    })
}

fn recovery(turn: &Turn) -> RecoveryReport {
    turn.ledger()
        .entries()
        .into_iter()
        .find_map(|e| match e.into_record() {
            LedgerRecord::Recovery(r) => Some(r),
            _ => None,
        })
        .expect("a recovery report")
}

#[tokio::test(start_paused = true)]
async fn each_block_is_sent_as_its_own_message_as_soon_as_it_is_complete() {
    let connector = ScriptedConnector::new().on(
        "primary",
        [
            Step::chunks(["The build finished ", "and every test passed.\n\n", B2, B3])
                .chunk_delay(MS(100)),
        ],
    );
    let router = router(&connector, RetryConfig::default(), &["primary"]);
    let (turn, channel, result) = stream_interactive(&router).await;
    let delivery = result.expect("delivered");
    assert_eq!(delivery.outcome(), Outcome::Answered);
    assert_eq!(channel.texts(), trimmed(&[B1, B2, B3]));
    // Chunks at 100, 200, 300, 400 ms and the finish chunk at 500 ms: the first block goes
    // out with its own last chunk, long before the stream ends.
    assert_eq!(channel.times(), [MS(200), MS(300), MS(400)]);
    assert_eq!(delivery.receipts().len(), 3);
    assert_eq!(delivery.delivered(), [B1, B2, B3].concat());
    let report = recovery(&turn).stream.expect("a stream report");
    assert_eq!(report.delivered_bytes, [B1, B2, B3].concat().len());
}

#[tokio::test(start_paused = true)]
async fn before_the_first_block_a_broken_stream_is_retried_invisibly() {
    let connector = ScriptedConnector::new().on(
        "primary",
        [
            Step::chunks(["The build finished ", "and every test passed.\n\n", B2]).reset_after(1),
            Step::chunks([B1, B2]),
        ],
    );
    let router = router(&connector, RetryConfig::default(), &["primary"]);
    let (_turn, channel, result) = stream_interactive(&router).await;
    let delivery = result.expect("delivered");
    assert_eq!(delivery.outcome(), Outcome::Answered);
    // The half block held by the cutter was dropped, the retry's whole answer used: no word
    // twice.
    assert_eq!(channel.texts(), trimmed(&[B1, B2]));
    assert_eq!(connector.calls_to("primary").len(), 2);
}

/// A primary that streams a few words of its answer, then fails before the first block is
/// shown; the fallback, another model, answers in its own words. Nothing was shown, so the
/// fallback's whole answer is the reply: no join of one model's words onto another's (which
/// used to end in Layer C, `stream_unjoinable`, with `delivered_bytes: 0`).
#[tokio::test(start_paused = true)]
async fn before_the_first_block_a_failure_starts_over_clean_on_the_fallback() {
    let connector = ScriptedConnector::new()
        .on(
            "primary",
            [Step::chunks(["The dep", "loy is still", " running"])
                .chunk_delay(MS(50))
                .fail_after(2, || ModelError::status(500))],
        )
        .on("fb", [Step::chunks([B1, B2]).chunk_delay(MS(50))]);
    let config = RetryConfig::default().with_attempts(1);
    let router = router(&connector, config, &["primary", "fb"]);
    let (turn, channel, result) = stream_interactive(&router).await;
    let delivery = result.expect("delivered");
    assert_eq!(delivery.outcome(), Outcome::Answered);
    assert_eq!(channel.texts(), trimmed(&[B1, B2]));
    assert!(
        channel.texts().iter().all(|t| !t.contains("The dep")),
        "the primary's unshown words are dropped: {:?}",
        channel.texts()
    );
    assert_eq!(delivery.delivered(), [B1, B2].concat());
    let report = recovery(&turn);
    assert_eq!(report.answered_by, Some(1), "the fallback answered");
}

/// The same on one route: the retry answers in other words than the failed attempt's first
/// ones (a model samples afresh), and its whole answer is used.
#[tokio::test(start_paused = true)]
async fn before_the_first_block_a_retry_in_other_words_starts_over_clean() {
    let connector = ScriptedConnector::new().on(
        "primary",
        [
            Step::chunks(["Sure! The deploy", " of v2"]).fail_after(1, || ModelError::status(503)),
            Step::chunks([B1, B2]),
        ],
    );
    let router = router(&connector, RetryConfig::default(), &["primary"]);
    let (_turn, channel, result) = stream_interactive(&router).await;
    assert_eq!(result.expect("delivered").outcome(), Outcome::Answered);
    assert_eq!(channel.texts(), trimmed(&[B1, B2]));
}

#[tokio::test(start_paused = true)]
async fn before_the_first_block_every_route_failing_is_layer_c_for_the_whole_turn() {
    let connector = ScriptedConnector::new()
        .on("primary", [Step::status(503)])
        .otherwise(Step::status(503));
    let config = RetryConfig::default().with_attempts(1);
    let router = router(&connector, config, &["primary"]);
    let (turn, channel, result) = stream_interactive(&router).await;
    let delivery = result.expect("a holding line is delivered");
    assert_held_after(&delivery, 0);
    let sent = channel.texts();
    assert_eq!(sent.len(), 1);
    assert!(!sent[0].contains("503"));
    let Some(Promise::Caller(_promise)) = delivery.promise() else {
        panic!("a promise")
    };
    assert_eq!(delivery.delivered(), "");
    assert_eq!(turn.ledger().commitments().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn after_a_block_a_stall_is_continued_on_the_fallback_without_repeating_a_word() {
    let connector = ScriptedConnector::new()
        .on(
            "primary",
            [Step::chunks([B1, "Deploying to staging ", "now, it takes"])
                .chunk_delay(MS(100))
                .stall_after(2)],
        )
        .on("fb", [Step::chunks([B1, B2, B3])]);
    let config = RetryConfig::default().with_stream_idle_timeout(Some(MS(500)));
    let router = router(&connector, config, &["primary", "fb"]);
    let start = Instant::now();
    let (turn, channel, result) = stream_interactive(&router).await;
    let delivery = result.expect("delivered");
    assert_eq!(delivery.outcome(), Outcome::Answered);
    assert_eq!(channel.texts(), trimmed(&[B1, B2, B3]));
    // Last content at 200 ms, idle bound 500 ms: the fallback is asked at 700 ms.
    assert_eq!(connector.calls_to("fb")[0].at - start, MS(700));
    let report = recovery(&turn).stream.expect("a stream report");
    assert_eq!(report.failed_route, Some(0));
    assert_eq!(report.failure, Some(FailureReason::StreamIdleTimeout));
    assert_eq!(report.failed_after_bytes, Some(B1.len()));
    assert_eq!(report.rest_answered_by, Some(1));
    assert_eq!(report.joined_by, Some(JoinedBy::Afresh));
}

#[tokio::test(start_paused = true)]
async fn after_two_blocks_an_error_without_fallback_is_a_holding_line_whose_follow_up_sends_only_the_rest()
 {
    let connector = failing_after_two_blocks();
    let router = router(&connector, RetryConfig::default(), &["primary"]);
    let bot = bot(DegradationPolicy::default().with_follow_up(MS(1000), 2));
    let turn = turn(&bot);
    let channel = Timed::new();
    let delivery = stream_routed(&bot, &turn, Mode::Interactive, &channel, &router)
        .await
        .expect("delivered");
    assert_held_after(&delivery, 2);
    let sent = channel.texts();
    assert_eq!(sent[..2], trimmed(&[B1, B2]));
    assert_eq!(sent.len(), 3, "the two blocks and a holding line: {sent:?}");
    assert!(!sent[2].contains("500"));
    assert!(
        !matches!(delivery.promise(), Some(Promise::Bot(_))),
        "no route started the turn"
    );
    let Some(Promise::Caller(rest)) = delivery.promise() else {
        panic!("a promise for the rest")
    };
    assert_eq!(delivery.delivered(), [B1, B2].concat());
    let report = recovery(&turn).stream.expect("a stream report");
    assert_eq!(report.delivered_bytes, [B1, B2].concat().len());
    assert_eq!(report.failed_route, Some(0));

    // What the promise's follow-up sends (only what follows the delivered prefix) is the
    // `Bot`'s keepers' to do: tests/bot.rs,
    // `a_streamed_answer_is_one_slack_stream_and_a_mid_stream_failure_is_kept_after_the_prefix`.
    assert_eq!(
        (rest.first_delay(), rest.attempts()),
        (MS(1000), 2),
        "the policy's plan"
    );
}

#[tokio::test(start_paused = true)]
async fn proactive_after_blocks_a_failure_stops_with_nothing_more_sent() {
    let connector = failing_after_two_blocks();
    let router = router(&connector, RetryConfig::default(), &["primary"]);
    let bot = bot(DegradationPolicy::default());
    let turn = turn(&bot);
    let channel = Timed::new();
    let delivery = stream_routed(&bot, &turn, Mode::Proactive, &channel, &router)
        .await
        .expect("delivered");
    // Layer C answered for the rest with silence, after the two blocks.
    assert_eq!(delivery.outcome(), Outcome::Silent);
    assert!(
        layer_c_chose_silence(&turn),
        "{:?}",
        turn.ledger().entries()
    );
    assert_eq!(delivery.delivered(), [B1, B2].concat());
    assert_eq!(channel.texts(), trimmed(&[B1, B2]));
    assert!(delivery.promise().is_none());
    assert!(!matches!(delivery.promise(), Some(Promise::Bot(_))));
    assert_eq!(
        delivery.receipts().len(),
        2,
        "the two blocks and no Layer C line"
    );
}

#[tokio::test(start_paused = true)]
async fn the_gate_blocking_the_third_block_means_no_later_block_is_ever_sent() {
    let leak = "LLM request failed: 503 Service Unavailable from upstream\n\n";
    let connector = ScriptedConnector::new().on(
        "primary",
        [Step::chunks([B1, B2, leak, B3, B4]).chunk_delay(MS(10))],
    );
    let router = router(&connector, RetryConfig::default(), &["primary"]);
    let (turn, channel, result) = stream_gated(&router).await;
    let delivery = result.expect("delivered");
    assert_held_after(&delivery, 2);
    let sent = channel.texts();
    assert_eq!(sent.len(), 3, "{sent:?}");
    assert_eq!(sent[..2], trimmed(&[B1, B2]));
    assert_nothing_from_the_blocked_block_on(&sent, "LLM request failed");
    let gate_rows = turn
        .ledger()
        .entries()
        .into_iter()
        .filter(|e| matches!(e.record(), LedgerRecord::Gate(g) if matches!(g.verdict(), GateVerdict::Blocked { .. })))
        .count();
    assert!(gate_rows >= 1);
}

#[tokio::test(start_paused = true)]
async fn a_gate_that_is_off_passes_every_block_unchanged() {
    let leak = "LLM request failed: 503 Service Unavailable from upstream\n\n";
    let connector = ScriptedConnector::new().on("primary", [Step::chunks([B1, leak])]);
    let router = router(&connector, RetryConfig::default(), &["primary"]);
    let bot = bot(DegradationPolicy::default()).with_gate(QualityGate::off());
    let turn = turn(&bot);
    let channel = Timed::new();
    let delivery = stream_routed(&bot, &turn, Mode::Interactive, &channel, &router)
        .await
        .expect("delivered");
    assert_eq!(delivery.outcome(), Outcome::Answered);
    assert_eq!(channel.texts(), trimmed(&[B1, leak]));
}

#[tokio::test(start_paused = true)]
async fn cancelling_the_turn_stops_the_stream_with_nothing_more_sent() {
    let cancellation = Cancellation::new();
    let bot = bot(DegradationPolicy::default());
    let turn = turn(&bot).with_cancellation(cancellation.clone());
    let (delivery, channel) =
        stream_with_stop_after_first_send(&bot, &turn, move || cancellation.cancel()).await;
    assert_eq!(delivery.outcome(), Outcome::Stopped(StopReason::Cancelled));
    assert_eq!(channel.texts(), trimmed(&[B1]));
    assert_eq!(
        delivery.receipts().len(),
        1,
        "the first block, and no Layer C line"
    );
}

#[tokio::test(start_paused = true)]
async fn losing_the_conversation_stops_the_stream_with_nothing_more_sent() {
    let ownership = Ownership::held();
    let bot = bot(DegradationPolicy::default());
    let turn = turn(&bot).with_ownership(ownership.clone());
    let (delivery, channel) =
        stream_with_stop_after_first_send(&bot, &turn, move || ownership.revoke()).await;
    assert_eq!(
        delivery.outcome(),
        Outcome::Stopped(StopReason::OwnershipLost)
    );
    assert_eq!(channel.texts(), trimmed(&[B1]));
}

#[tokio::test(start_paused = true)]
async fn a_slow_stream_shows_progress_at_the_idle_flush_and_loses_no_text() {
    let words = [
        "The rollout ",
        "is slow ",
        "today because ",
        "the cache ",
        "is cold.",
    ];
    let connector =
        ScriptedConnector::new().on("primary", [Step::chunks(words).chunk_delay(MS(1000))]);
    let config = RetryConfig::default().with_stream_idle_timeout(Some(MS(5000)));
    let router = router(&connector, config, &["primary"]);
    let bot = bot(DegradationPolicy::default()).with_idle_flush(Some(MS(300)));
    let turn = turn(&bot);
    let channel = Timed::new();
    let delivery = stream_routed(&bot, &turn, Mode::Interactive, &channel, &router)
        .await
        .expect("delivered");
    assert_eq!(delivery.outcome(), Outcome::Answered);
    let times = channel.times();
    // "The rollout " arrives at 1 s; quiet for 300 ms, the safe part ("The ") is shown at
    // 1.3 s, long before the stream ends at 6 s.
    assert_eq!(times[0], MS(1300));
    assert!(times.len() >= 3, "{times:?}");
    let joined: String = channel.texts().join(" ");
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(squash(&joined), squash(&words.concat()));
}
