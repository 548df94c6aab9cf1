//! End-to-end: a handler's `Reply` goes straight to `deliver`, and nothing a person receives ever
//! contains the internal cause.

mod support;

use mesh_egress::channel::{Deliver, DeliveryError, Recorder};
use mesh_egress::degrade::DegradationPolicy;
use mesh_egress::ledger::{CommitmentState, Ledger, LedgerRecord};
use mesh_egress::{
    AgentMessage, Attribution, CommitError, EgressError, Ownership, Reply, Turn, egress_boundary,
};
use support::{LogCapture, marker};

fn turn(conversation: &str) -> Turn {
    Turn::new(Attribution::new("support-bot", conversation, "run-42"))
}

#[egress_boundary(interactive)]
async fn interactive(turn: &Turn, cause: Option<String>) -> Result<AgentMessage, EgressError> {
    if let Some(cause) = cause {
        return Err(EgressError::transport(cause, turn.attribution().clone()));
    }
    Ok(AgentMessage::new(
        "Your order **#1234** shipped today.",
        turn.attribution().clone(),
    ))
}

#[egress_boundary(proactive)]
async fn digest(turn: &Turn, cause: String) -> Result<AgentMessage, EgressError> {
    Err(EgressError::transport(cause, turn.attribution().clone()))
}

#[tokio::test]
async fn an_interactive_failure_delivers_a_holding_line_and_never_the_cause() {
    let cause = marker("interactive");
    let channel = Recorder::new();
    let mut receipt = channel
        .deliver(interactive(&turn("c-1"), Some(cause.clone())).await)
        .await
        .expect("a holding line is deliverable");
    let sent = channel.sent();
    assert_eq!(sent.len(), 1);
    assert!(!sent.concat().contains(&cause), "cause leaked: {sent:?}");
    assert!(!sent.concat().contains("CAUSE-"), "cause leaked: {sent:?}");
    let promise = receipt
        .take_commitment()
        .expect("a holding line carries a commitment");
    assert_eq!(promise.attribution().conversation(), "c-1");
}

#[tokio::test]
async fn a_proactive_failure_delivers_nothing() {
    let channel = Recorder::new();
    let receipt = channel
        .deliver(digest(&turn("c-2"), marker("proactive")).await)
        .await
        .expect("silence is a valid delivery");
    assert!(receipt.is_empty());
    assert!(channel.sent().is_empty());
    assert_eq!(channel.attempts(), 0, "silence must not touch the channel");
}

#[tokio::test]
async fn a_successful_handler_delivers_its_message() {
    let channel = Recorder::new();
    let reply = interactive(&turn("c-3"), None).await;
    assert!(reply.is_answer());
    let receipt = channel.deliver(reply).await.expect("delivered");
    assert_eq!(receipt.len(), 1);
    assert!(receipt.commitment().is_none());
    assert_eq!(channel.sent(), ["Your order #1234 shipped today."]);
}

#[tokio::test]
async fn the_cause_appears_once_in_the_error_tracking_event_with_its_attribution() {
    let logs = LogCapture::default();
    let _guard = logs.install();
    let cause = marker("tracked");
    let channel = Recorder::new();
    let _ = channel
        .deliver(interactive(&turn("c-4"), Some(cause.clone())).await)
        .await
        .expect("delivered");

    let events = logs.events();
    let carrying: Vec<_> = events
        .iter()
        .filter(|e| e.to_string().contains(&cause))
        .collect();
    assert_eq!(
        carrying.len(),
        1,
        "exactly one event may carry the cause: {events:#?}"
    );
    let event = carrying[0];
    assert_eq!(event["target"], "mesh_egress::egress");
    assert_eq!(event["fields"]["cause"], cause.as_str());
    assert_eq!(event["fields"]["agent"], "support-bot");
    assert_eq!(event["fields"]["conversation"], "c-4");
    assert_eq!(event["fields"]["run"], "run-42");
    assert!(
        events.iter().any(|e| e["target"] == "mesh_egress::degrade"),
        "the degradation is logged too: {events:#?}"
    );
}

struct Bot {
    policy: DegradationPolicy,
}

impl Bot {
    #[egress_boundary(interactive, policy = self.policy)]
    async fn answer(&self, turn: &Turn, cause: String) -> Result<AgentMessage, EgressError> {
        Err(EgressError::transport(cause, turn.attribution().clone()))
    }

    #[egress_boundary(interactive, policy = self.policy)]
    fn refuse(&self, turn: &Turn, cause: String) -> Result<AgentMessage, EgressError> {
        Err(EgressError::transport(cause, turn.attribution().clone()).with_retryable(false))
    }
}

#[tokio::test]
async fn a_method_handler_uses_its_own_policy_and_records_on_its_ledger() {
    // The handlers take a `&Turn`, so Layer C records on the turn's ledger.
    let ledger = Ledger::in_memory();
    let bot = Bot {
        policy: DegradationPolicy::default()
            .with_holding_lines(["First, one sec.", "Second, nearly there."])
            .with_handoff("Priya from support", "Handing you to {to} now."),
    };
    let turn = || turn("c-5").with_ledger(ledger.clone());
    let channel = Recorder::new();
    let cause = marker("method");
    for _ in 0..2 {
        let mut receipt = channel
            .deliver(bot.answer(&turn(), cause.clone()).await)
            .await
            .expect("delivered");
        let _ = receipt.take_commitment().expect("promise");
    }
    let reply = bot.refuse(&turn(), cause.clone());
    assert!(matches!(reply, Reply::Handoff { .. }));
    let receipt = channel.deliver(reply).await.expect("delivered");
    assert!(receipt.commitment().is_none(), "a handoff makes no promise");

    assert_eq!(
        channel.sent(),
        [
            "First, one sec.",
            "Second, nearly there.",
            "Handing you to Priya from support now."
        ]
    );
    let rows = ledger.entries();
    assert!(
        !format!("{rows:?}").contains(&cause),
        "the ledger never holds a cause"
    );
    assert_eq!(
        rows.iter()
            .filter(|r| matches!(r.record(), LedgerRecord::BoundaryError(_)))
            .count(),
        3
    );
    let promises = ledger.commitments();
    assert_eq!(promises.len(), 2);
    assert!(
        promises
            .iter()
            .all(|(_, p)| p.state() == CommitmentState::Pending)
    );
}

#[tokio::test]
async fn a_failed_part_is_resumed_without_resending_what_went() {
    let channel = Recorder::new().with_limit(5);
    channel.fail_sends_after(1, 1); // part 0 goes, part 1 fails once
    let err = channel
        .deliver(AgentMessage::new(
            "11111222223333",
            Attribution::new("a", "c", "r"),
        ))
        .await
        .expect_err("the second part fails");
    let DeliveryError::Send { failed, total, .. } = &err else {
        panic!("expected a send failure, got {err:?}");
    };
    assert_eq!((*failed, *total), (1, 3));
    assert_eq!(err.delivered().len(), 1);
    let rest = err.into_undelivered().expect("undelivered parts");
    assert_eq!(rest.indexes(), [1, 2]);
    assert_eq!(channel.sent(), ["11111"]);

    let receipt = channel.deliver(rest).await.expect("resumed");
    assert_eq!(
        receipt.len(),
        3,
        "the receipt covers every part of the message"
    );
    assert_eq!(
        receipt
            .parts()
            .iter()
            .map(|p| p.index())
            .collect::<Vec<_>>(),
        [0, 1, 2]
    );
    assert_eq!(channel.sent(), ["11111", "22222", "3333"]);
    assert_eq!(
        channel.attempts(),
        4,
        "three parts sent once each, plus the one failure"
    );
}

#[tokio::test]
async fn losing_ownership_before_commit_sends_nothing() {
    let ownership = Ownership::held();
    let channel = Recorder::new().with_ownership(ownership.clone());
    ownership.revoke();
    let err = channel
        .deliver(AgentMessage::new(
            "late answer",
            Attribution::new("a", "c", "r"),
        ))
        .await
        .expect_err("ownership was lost");
    assert!(matches!(
        err,
        DeliveryError::Commit(CommitError::OwnershipLost)
    ));
    assert_eq!(channel.attempts(), 0);
}

// Through the macro, a handler that takes a `&Turn` (found by its type, whatever its name or
// position) resolves on that turn: its ledger, its ownership.

#[egress_boundary(interactive)]
async fn unnamed_turn(_: &Turn, cause: String) -> Result<AgentMessage, EgressError> {
    Err(EgressError::transport(
        cause,
        Attribution::new("support-bot", "c-6", "run-42"),
    ))
}

#[egress_boundary(interactive)]
fn turn_last(cause: String, this_turn: &mesh_egress::Turn) -> Result<AgentMessage, EgressError> {
    Err(EgressError::transport(
        cause,
        this_turn.attribution().clone(),
    ))
}

/// One failed turn through the macro left exactly Layer C's rows on the turn's ledger.
fn assert_layer_c_rows_on(turn: &Turn, reply: &Reply, cause: &str) {
    assert!(matches!(reply, Reply::Holding { .. }), "{reply:?}");
    let rows = turn.ledger().entries();
    let count = |pick: fn(&LedgerRecord) -> bool| rows.iter().filter(|r| pick(r.record())).count();
    assert_eq!(
        count(|r| matches!(r, LedgerRecord::BoundaryError(_))),
        1,
        "{rows:?}"
    );
    assert_eq!(
        count(|r| matches!(r, LedgerRecord::Degradation(_))),
        1,
        "{rows:?}"
    );
    assert_eq!(
        count(|r| matches!(r, LedgerRecord::Commitment(_))),
        1,
        "{rows:?}"
    );
    assert_eq!(turn.ledger().commitments().len(), 1);
    assert!(
        !format!("{rows:?}").contains(cause),
        "the ledger never holds a cause"
    );
}

#[tokio::test]
async fn layer_c_rows_land_on_the_turns_ledger_through_the_macro() {
    let (named, cause) = (turn("c-6"), marker("named"));
    let reply = interactive(&named, Some(cause.clone())).await;
    assert_layer_c_rows_on(&named, &reply, &cause);

    let (unnamed, cause) = (turn("c-6"), marker("unnamed"));
    let reply = unnamed_turn(&unnamed, cause.clone()).await;
    assert_layer_c_rows_on(&unnamed, &reply, &cause);

    let (last, cause) = (turn("c-6"), marker("last"));
    let reply = turn_last(cause.clone(), &last);
    assert_layer_c_rows_on(&last, &reply, &cause);
}

#[tokio::test]
async fn a_handler_without_a_turn_records_on_its_policys_ledger() {
    let ledger = Ledger::in_memory();
    let policy = DegradationPolicy::default().with_ledger(ledger.clone());
    #[egress_boundary(interactive, policy = policy)]
    fn no_turn(policy: &DegradationPolicy) -> Result<AgentMessage, EgressError> {
        let _ = policy;
        Err(EgressError::transport(
            marker("no-turn"),
            Attribution::new("a", "c-7", "r"),
        ))
    }
    let reply = no_turn(&policy);
    assert!(matches!(reply, Reply::Holding { .. }));
    assert!(
        reply
            .message()
            .expect("a holding line")
            .ownership()
            .is_none()
    );
    assert_eq!(ledger.commitments().len(), 1);
}

fn holding_line(reply: Reply) -> String {
    match reply {
        Reply::Holding { message, .. } => message.body().as_str().to_owned(),
        other => panic!("expected a holding line, got {other:?}"),
    }
}

#[tokio::test]
async fn consecutive_holding_lines_in_one_conversation_differ_with_the_default_policy() {
    let mut lines = Vec::new();
    for run in 0..4 {
        // A fresh turn (and a fresh ledger) per call, as a server makes them.
        let turn = Turn::new(Attribution::new("support-bot", "c-8", format!("run-{run}")));
        lines.push(holding_line(
            interactive(&turn, Some(marker("rotation"))).await,
        ));
    }
    for pair in lines.windows(2) {
        assert_ne!(
            pair[0], pair[1],
            "consecutive holding lines repeat: {lines:?}"
        );
    }
}

#[tokio::test]
async fn consecutive_holding_lines_in_one_conversation_differ_with_an_explicit_policy() {
    let bot = Bot {
        policy: DegradationPolicy::default().with_holding_lines(["One sec.", "Nearly there."]),
    };
    let mut lines = Vec::new();
    for run in 0..4 {
        let turn = Turn::new(Attribution::new("support-bot", "c-9", format!("run-{run}")));
        lines.push(holding_line(bot.answer(&turn, marker("rotation")).await));
    }
    assert_eq!(
        lines,
        ["One sec.", "Nearly there.", "One sec.", "Nearly there."]
    );
}

#[tokio::test]
async fn a_reply_from_a_turn_handler_is_refused_once_ownership_is_lost() {
    let channel = Recorder::new();
    for cause in [None, Some(marker("revoked"))] {
        let turn = turn("c-10");
        let reply = interactive(&turn, cause).await;
        turn.ownership().revoke();
        let err = channel
            .deliver(reply)
            .await
            .expect_err("the conversation is no longer owned");
        assert!(
            matches!(err, DeliveryError::Commit(CommitError::OwnershipLost)),
            "{err:?}"
        );
    }
    assert!(channel.sent().is_empty());
    assert_eq!(channel.attempts(), 0);
}

#[tokio::test]
async fn a_handler_with_a_turn_and_no_policy_resolves_with_the_turns_policy_for_its_mode() {
    use mesh_egress::degrade::{Mode, Policies};
    let own = DegradationPolicy::default()
        .with_holding_lines(["The bot's own holding line."])
        .with_handoff("the desk", "The desk has it.");
    let turn =
        turn("conv-policies").with_policies(Policies::default().with(Mode::Interactive, own));
    let reply = interactive(&turn, Some(marker("policies"))).await;
    assert_eq!(holding_line(reply), "The bot's own holding line.");
    // Stamped with the handler's mode, for the front door's later steps.
    let answered = interactive(&turn, None).await;
    assert_eq!(
        answered.message().expect("an answer").mode(),
        Some(Mode::Interactive)
    );
}
