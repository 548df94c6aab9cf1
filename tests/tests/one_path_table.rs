//! The entries agree. The same handler outputs (an answer, a holding line, a handoff, silence,
//! an unrenderable answer, a gate-blocked answer, a mid-stream failure) go through every entry
//! of the front door (`send`, `send_to`, `run`, `run_to`) and, as a promise's follow-up,
//! through both keepers (in memory, and a store's worker); each group shows a person the same
//! thing and writes the same ledger rows, and a kept follow-up runs the gate and Layer C once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use mesh_egress::bot::{Endpoint, Outcome};
use mesh_egress::channel::Recorder;
use mesh_egress::degrade::DegradationPolicy;
use mesh_egress::gate::QualityGate;
use mesh_egress::ledger::{LedgerEntry, LedgerRecord};
use mesh_egress::silence::SilenceTokens;
use mesh_egress::store::Store;
use mesh_egress::{
    Address, AgentMessage, AnswerStream, Attribution, Bot, Cancellation, EgressError,
    StreamedReply, Turn, egress_boundary,
};

const CAUSE: &str = "CAUSE-table-7f3a";
const BOUND: Duration = Duration::from_secs(60);
const B1: &str = "The build finished on the main branch and every one of the tests passed.\n\n";
const B2: &str = "Deploying to staging now; it takes about a minute, then the checks run.\n\n";

/// What the handler gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
enum Case {
    Answer,
    Holding,
    Handoff,
    Silence,
    Unrenderable,
    GateBlocked,
    MidStream,
}

const CASES: [Case; 7] = [
    Case::Answer,
    Case::Holding,
    Case::Handoff,
    Case::Silence,
    Case::Unrenderable,
    Case::GateBlocked,
    Case::MidStream,
];

#[egress_boundary(interactive)]
async fn whole(turn: &Turn, case: Case) -> Result<AgentMessage, EgressError> {
    let attribution = turn.attribution().clone();
    match case {
        Case::Answer | Case::MidStream => Ok(turn.message("The deploy finished at 09:12.")),
        Case::Holding => Err(EgressError::transport(CAUSE, attribution)),
        Case::Handoff => Err(EgressError::transport(CAUSE, attribution).with_retryable(false)),
        Case::Silence => Ok(turn.message("NO_REPLY")),
        // An empty fence renders to nothing a person can see.
        Case::Unrenderable => Ok(turn.message("```\n```")),
        Case::GateBlocked => Ok(turn.message(format!("LLM request failed: {CAUSE}"))),
    }
}

/// Two blocks, then the provider fails (or, `held`, it fails before the first word).
#[egress_boundary(interactive)]
async fn streamed(turn: &Turn, held: bool) -> Result<AnswerStream, EgressError> {
    let failure = EgressError::transport(CAUSE, turn.attribution().clone());
    if held {
        return Err(failure);
    }
    Ok(AnswerStream::from_chunks(
        turn,
        [Ok(B1.to_owned()), Ok(B2.to_owned()), Err(failure)],
    ))
}

/// The handler's reply for `case`: a stream for the mid-stream failure, whole otherwise.
async fn reply(turn: &Turn, case: Case) -> Reply {
    match case {
        Case::MidStream => Reply::Streamed(streamed(turn, false).await),
        _ => Reply::Whole(whole(turn, case).await),
    }
}

enum Reply {
    Whole(mesh_egress::Reply),
    Streamed(StreamedReply),
}

fn policy() -> DegradationPolicy {
    DegradationPolicy::default()
        .with_silence_tokens(SilenceTokens::new(["NO_REPLY"]).expect("a token"))
        // A follow-up is due long after the turn: a turn's rows are read before it runs.
        .with_follow_up(Duration::from_secs(3600), 1)
        .with_handoff("Sam", "Sam will take it from here.")
}

fn gate() -> QualityGate {
    QualityGate::builder().build().expect("the default gate")
}

/// A route of `case` that fails (retryably) `failures` times first: whole, or (the
/// mid-stream failure) streamed.
fn route(bot: &Bot, failures: u32, case: Case) -> Endpoint<Case> {
    let failures = Arc::new(AtomicU32::new(failures));
    let first = move || {
        failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    };
    match case {
        Case::MidStream => bot.route("case", move |turn: Turn, case: Case| {
            let held = first();
            let _ = case;
            async move { streamed(&turn, held).await }
        }),
        _ => bot.route("case", move |turn: Turn, case: Case| {
            let case = if first() { Case::Holding } else { case };
            async move { whole(&turn, case).await }
        }),
    }
}

/// The kinds of `rows`, in order: what the ledger says happened, without ids or times.
fn kinds(rows: &[LedgerEntry]) -> Vec<String> {
    rows.iter()
        .map(|row| match row.record() {
            LedgerRecord::Degradation(d) => {
                // The outcome's name, without the commitment's id.
                let outcome = format!("{:?}", d.outcome());
                let name = outcome.split([' ', '{', '(']).next().unwrap_or_default();
                format!("degradation:{name}")
            }
            LedgerRecord::Commitment(c) => format!("commitment:{}", c.state().as_str()),
            LedgerRecord::BoundaryError(e) => format!("boundary_error:{}", e.retryable()),
            LedgerRecord::Gate(_) => "gate".to_owned(),
            LedgerRecord::Render(r) => format!("render:{r:?}"),
            LedgerRecord::Silence(s) => format!("silence:{s:?}"),
            other => format!("{other:?}"),
        })
        .collect()
}

/// What one entry showed and recorded.
#[derive(Debug, PartialEq)]
struct Seen {
    outcome: Outcome,
    sent: Vec<String>,
    rows: Vec<String>,
}

fn turn(bot: &Bot, run: &str) -> Turn {
    bot.turn(
        Address::Plain,
        Attribution::new("ops-bot", "conv-table", run),
    )
    .with_input("status?")
}

async fn direct(entry: &str, case: Case) -> Seen {
    let page = Recorder::new();
    let bot = Bot::new()
        .with_policy(policy())
        .with_gate(gate())
        .with_client(page.clone());
    let route = route(&bot, 0, case);
    let turn = turn(&bot, entry);
    let delivery = match entry {
        "send" => match reply(&turn, case).await {
            Reply::Whole(reply) => bot.send(&turn, reply).await,
            Reply::Streamed(reply) => bot.send(&turn, reply).await,
        },
        "send_to" => match reply(&turn, case).await {
            Reply::Whole(reply) => bot.send_to(&turn, &page, reply).await,
            Reply::Streamed(reply) => bot.send_to(&turn, &page, reply).await,
        },
        "run" => bot.run(&turn, &route, case).await,
        "run_to" => bot.run_to(&turn, &page, &route, case).await,
        other => unreachable!("{other}"),
    }
    .expect("delivered");
    Seen {
        outcome: delivery.outcome(),
        sent: page.sent(),
        rows: kinds(&turn.ledger().entries()),
    }
}

#[tokio::test(start_paused = true)]
async fn every_entry_shows_the_same_and_records_the_same() {
    for case in CASES {
        let send = direct("send", case).await;
        assert!(
            !send.sent.iter().any(|text| text.contains(CAUSE)),
            "{case:?}: {send:?}"
        );
        let answer = "The deploy finished at 09:12.";
        match case {
            Case::Answer => assert_eq!(send.sent, [answer]),
            Case::Silence => assert!(send.sent.is_empty(), "{send:?}"),
            Case::Handoff => assert_eq!(send.sent, ["Sam will take it from here."]),
            Case::MidStream => {
                assert_eq!(send.outcome, Outcome::Holding);
                // What was written before the failure, then the holding line for the rest.
                assert_eq!(send.sent.len(), 2, "{send:?}");
                assert_eq!(send.sent[0], format!("{B1}{}", B2.trim_end()));
            }
            Case::Holding | Case::Unrenderable | Case::GateBlocked => {
                assert_eq!(send.outcome, Outcome::Holding, "{case:?}: {send:?}");
                assert_eq!(send.sent.len(), 1, "{case:?}: {send:?}");
            }
        }
        for entry in ["send_to", "run", "run_to"] {
            let seen = direct(entry, case).await;
            assert_eq!(seen, send, "{case:?} through {entry} differs from send");
        }
    }
}

/// The follow-up of a promise whose route then gives `case`: what the person saw after the
/// holding line, and the rows written after the turn's own.
async fn kept(keeper: &str, case: Case) -> (Vec<String>, Vec<String>) {
    let page = Recorder::new();
    let mut bot = Bot::new()
        .with_policy(policy().with_follow_up(Duration::ZERO, 1))
        .with_gate(gate())
        .with_client(page.clone());
    let db = std::env::temp_dir().join(format!(
        "one-path-table-{}-{case:?}-{}.db",
        std::process::id(),
        keeper
    ));
    let _ = std::fs::remove_file(&db);
    if keeper == "worker" {
        let store = Store::open(&format!("sqlite:{}", db.display()))
            .await
            .expect("a store");
        bot = bot.with_store(store);
    }
    let route = route(&bot, 1, case);
    let turn = turn(&bot, keeper);
    let delivery = bot.run(&turn, &route, case).await.expect("held");
    assert_eq!(delivery.outcome(), Outcome::Holding, "{case:?}");
    let before = turn.ledger().entries().len();
    match keeper {
        "memory" => {
            let ended = tokio::time::timeout(BOUND, bot.promises_kept())
                .await
                .expect("kept in time");
            assert_eq!(ended.len(), 1, "{ended:?}");
        }
        "worker" => {
            let worker = bot.worker("table-worker").expect("a store");
            tokio::time::timeout(BOUND, worker.run_once(&Cancellation::new()))
                .await
                .expect("kept in time")
                .expect("the store answers");
        }
        other => unreachable!("{other}"),
    }
    let _ = std::fs::remove_file(&db);
    let rows = turn.ledger().entries();
    (page.sent()[1..].to_vec(), kinds(&rows[before..]))
}

#[tokio::test]
async fn both_keepers_show_the_same_follow_up_and_record_the_same() {
    for case in CASES {
        let memory = kept("memory", case).await;
        let worker = kept("worker", case).await;
        assert_eq!(memory, worker, "{case:?}: in memory vs the worker");
        let (sent, rows) = &memory;
        assert!(!sent.iter().any(|text| text.contains(CAUSE)), "{case:?}");
        // One try: a failure gives up at once (interactive: the handoff line).
        let handoff = ["Sam will take it from here.".to_owned()];
        match case {
            Case::Answer => assert_eq!(sent, &["The deploy finished at 09:12."]),
            Case::Silence => assert!(sent.is_empty(), "{rows:?}"),
            // A follow-up reads its stream to the end: a failure in it is a failed try.
            Case::Holding
            | Case::Handoff
            | Case::Unrenderable
            | Case::GateBlocked
            | Case::MidStream => {
                assert_eq!(sent, &handoff, "{case:?}: {rows:?}")
            }
        }
        // One gate run, one Layer C decision per try.
        let count = |prefix: &str| rows.iter().filter(|r| r.starts_with(prefix)).count();
        assert!(count("gate") <= 1, "{case:?}: {rows:?}");
        assert!(count("degradation") <= 1, "{case:?}: {rows:?}");
        assert!(count("silence") <= 1, "{case:?}: {rows:?}");
    }
}
