//! Layer A against text-protocol tool decisions (`data/text_tool_calls.json`, each sample
//! cited): what open-weight models write into `content` when served without their tool parser.
//!
//! Every call sample must be recognised as its format; through the `Router` (paused time,
//! scripted connector) it is read into the structured calls the sample names when the request
//! offers tools, and is a failed attempt (`malformed_tool_call`, retried, the retry answering)
//! when it offers none; an unreadable one is a failed attempt either way (the Router makes no
//! repair; the HTTP connector's one repair is tested in `model_http`). Every benign sample must
//! come back untouched, on the first attempt, with tools offered or not.
//!
//! The held-out part is fixed by a hash of each sample's id ([`held_out`]) and was committed
//! with the corpus before the check was tuned on it; its figures are printed and asserted apart.
//! `cargo test -p mesh-egress-tests --test model_text_tools -- --nocapture` prints them.

use mesh_egress::ledger::LedgerRecord;
use mesh_egress::model::{
    ChatMessage, ChatRequest, Completion, Jitter, RetryConfig, Router, ToolDefinition,
    text_tool_format,
};
use mesh_egress::testing::{ScriptedConnector, Step};
use mesh_egress::{Attribution, Turn};
use serde_json::Value;

const CORPUS: &str = include_str!("data/text_tool_calls.json");

/// What the retry answers after a failed attempt.
const RETRY_ANSWER: &str = "It is 18°C in Paris.";

/// FNV-1a of the id: a quarter of the corpus (by hash) is held out, the same on every machine.
fn held_out(id: &str) -> bool {
    let hash = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    hash % 4 == 0
}

fn corpus() -> Value {
    serde_json::from_str(CORPUS).expect("corpus is JSON")
}

fn tools(corpus: &Value) -> Vec<ToolDefinition> {
    serde_json::from_value(corpus["tools"].clone()).expect("tools")
}

fn request(user: &str, tools: Vec<ToolDefinition>) -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::user(user)]).with_tools(tools)
}

fn text<'a>(sample: &'a Value, key: &str) -> &'a str {
    sample[key].as_str().unwrap_or_default()
}

/// The attempts' outcomes on the turn's ledger.
fn outcomes(turn: &Turn) -> Vec<String> {
    turn.ledger()
        .entries()
        .into_iter()
        .filter_map(|e| match e.into_record() {
            LedgerRecord::Recovery(report) => Some(
                report
                    .attempts()
                    .iter()
                    .map(|a| a.outcome.to_string())
                    .collect::<Vec<_>>(),
            ),
            _ => None,
        })
        .flatten()
        .collect()
}

/// One completion of `text` (then the retry's answer), through a Router.
async fn complete(text: &str, request: &ChatRequest) -> (Result<Completion, String>, Vec<String>) {
    let connector =
        ScriptedConnector::new().on("m", [Step::answer(text), Step::answer(RETRY_ANSWER)]);
    let router =
        Router::new(connector, "m", RetryConfig::default()).with_jitter(Jitter::fixed(0.0));
    let turn = Turn::new(Attribution::new("agent", "corpus", "run"));
    let result = router
        .complete(&turn, request)
        .await
        .map_err(|e| e.internal_cause().to_string());
    (result, outcomes(&turn))
}

#[test]
fn the_split_is_fixed_by_the_id_hash_and_ids_are_unique() {
    let corpus = corpus();
    let mut ids = Vec::new();
    for set in ["calls", "benign"] {
        let samples = corpus[set].as_array().expect("samples");
        let held = samples.iter().filter(|s| held_out(text(s, "id"))).count();
        assert!(
            held > 0 && held < samples.len(),
            "{set}: {held}/{}",
            samples.len()
        );
        ids.extend(samples.iter().map(|s| text(s, "id").to_owned()));
        assert!(
            samples
                .iter()
                .all(|s| !text(s, "source").is_empty() || set == "benign")
        );
    }
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n, "sample ids are unique");
    assert!(n >= 60, "the corpus has {n} samples");
}

/// One part's figures.
#[derive(Default)]
struct Tally {
    calls: usize,
    recognised: usize,
    read_right: usize,
    refused_without_tools: usize,
    benign: usize,
    false_positives: usize,
}

#[tokio::test(start_paused = true)]
async fn every_text_tool_call_is_caught_and_every_look_alike_passes_on_both_parts() {
    let corpus = corpus();
    let offered = tools(&corpus);
    let mut tallies = [Tally::default(), Tally::default()];
    let mut failures = Vec::new();
    for sample in corpus["calls"].as_array().expect("calls") {
        let id = text(sample, "id");
        let part = usize::from(held_out(id));
        let t = &mut tallies[part];
        t.calls += 1;
        let body = text(sample, "text");
        let fail = |failures: &mut Vec<String>, what: String| {
            // The held-out part's misses are counted, not shown: its samples stay unseen while
            // the check is tuned.
            failures.push(if part == 1 {
                "a miss in the held-out part".to_owned()
            } else {
                format!("calls/{id}: {what}")
            });
        };
        let found = text_tool_format(body).map(|f| f.as_str().to_owned());
        if found.as_deref() == Some(text(sample, "format")) {
            t.recognised += 1;
        } else {
            fail(&mut failures, format!("recognised as {found:?}"));
        }

        // Tools offered: the calls the sample names, or (unreadable) a failed attempt.
        let (result, seen) = complete(body, &request("What's the weather?", offered.clone())).await;
        match (sample.get("calls"), result) {
            (Some(expected), Ok(done)) => {
                let got: Vec<Value> = done
                    .tool_calls
                    .iter()
                    .map(|c| {
                        serde_json::json!({
                            "name": c.function.name,
                            "arguments": c.parsed_arguments().unwrap_or(Value::Null),
                        })
                    })
                    .collect();
                let content_ok = done.content.as_deref() == sample["content"].as_str();
                if &Value::Array(got.clone()) == expected && content_ok && seen == ["ok"] {
                    t.read_right += 1;
                } else {
                    fail(
                        &mut failures,
                        format!(
                            "read as {got:?}, content {:?}, attempts {seen:?}",
                            done.content
                        ),
                    );
                }
            }
            (None, Ok(done)) => {
                if seen == ["malformed_tool_call", "ok"]
                    && done.content.as_deref() == Some(RETRY_ANSWER)
                {
                    t.read_right += 1;
                } else {
                    fail(
                        &mut failures,
                        format!("unreadable, yet {done:?} after {seen:?}"),
                    );
                }
            }
            (_, Err(cause)) => fail(&mut failures, format!("gave up: {cause}")),
        }

        // No tools offered: a failed attempt, never the markup; the retry answers.
        let (result, seen) = complete(body, &request("What's the weather?", Vec::new())).await;
        match result {
            Ok(done)
                if seen == ["malformed_tool_call", "ok"]
                    && done.content.as_deref() == Some(RETRY_ANSWER) =>
            {
                t.refused_without_tools += 1;
            }
            other => fail(
                &mut failures,
                format!("without tools: {other:?} after {seen:?}"),
            ),
        }
    }
    for sample in corpus["benign"].as_array().expect("benign") {
        let id = text(sample, "id");
        let part = usize::from(held_out(id));
        let t = &mut tallies[part];
        t.benign += 1;
        let body = text(sample, "text");
        let user = sample["user"].as_str().unwrap_or("What's the weather?");
        let mut clean = text_tool_format(body).is_none() || sample.get("user").is_some();
        for tools in [offered.clone(), Vec::new()] {
            let (result, seen) = complete(body, &request(user, tools)).await;
            clean &= matches!(&result, Ok(done) if done.content.as_deref() == Some(body)
                && done.tool_calls.is_empty())
                && seen == ["ok"];
        }
        if !clean {
            t.false_positives += 1;
            failures.push(if part == 1 {
                "a false positive in the held-out part".to_owned()
            } else {
                format!("benign/{id} did not pass untouched")
            });
        }
    }
    for (part, t) in ["tuning", "held-out"].iter().zip(&tallies) {
        println!(
            "text tool calls [{part}]: recognised {}/{}, read right {}/{}, refused without \
             tools {}/{}; benign {} samples, {} false positives",
            t.recognised,
            t.calls,
            t.read_right,
            t.calls,
            t.refused_without_tools,
            t.calls,
            t.benign,
            t.false_positives
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// One notion of "not machinery here" (`asked`, shared with the gate): a bare-JSON call the
/// person pasted, or asked how it is written, is the answer when no tools were offered; with
/// tools offered it stays the model's decision.
#[tokio::test(start_paused = true)]
async fn a_bare_json_call_the_person_quoted_or_asked_about_is_the_answer() {
    let call = r#"{"name": "get_weather", "arguments": {"city": "Paris"}}"#;
    for user in [
        r#"Pretty-print this JSON for me: {"name":"get_weather","arguments":{"city":"Paris"}}"#,
        "What does the JSON of a function call look like? Give me one example, JSON only.",
        "How is a tool call written in JSON?",
    ] {
        let (result, attempts) = complete(call, &request(user, Vec::new())).await;
        assert_eq!(
            result.as_ref().map(|c| c.content.as_deref()),
            Ok(Some(call)),
            "{user}"
        );
        assert_eq!(attempts, ["ok"], "{user}");
    }
    // Not asked for: a failed attempt, retried.
    let (result, attempts) =
        complete(call, &request("What's the weather in Paris?", Vec::new())).await;
    assert_eq!(result.map(|c| c.content), Ok(Some(RETRY_ANSWER.to_owned())));
    assert_eq!(attempts, ["malformed_tool_call", "ok"]);
    // With tools offered, asking about the format does not turn a call into text.
    let corpus = corpus();
    let (result, _) = complete(
        call,
        &request("How is a tool call written in JSON?", tools(&corpus)),
    )
    .await;
    let completion = result.expect("a call");
    assert_eq!(completion.tool_calls.len(), 1);
}
