//! A text-protocol tool call over real HTTP with tools offered: read into structured calls by
//! the OpenAI-compatible connector, repaired exactly once (the correction carried in the second
//! request's body) when it cannot be read, and read from a stream's head as well.

use std::time::Duration;

use mesh_egress::ledger::LedgerRecord;
use mesh_egress::model::{
    ChatMessage, ChatRequest, Jitter, ModelConnector, ModelErrorKind, OpenAiCompatible,
    RetryConfig, Router, TextToolCallError, TextToolFormat, TextToolProblem, ToolDefinition,
};
use mesh_egress::testing::{FakeProvider, FakeResponse, Step};
use mesh_egress::{Attribution, Turn};

fn turn() -> Turn {
    Turn::new(Attribution::new("agent", "conv", "run"))
}

fn request() -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::user("Did the deploy go out?")]).with_tools(vec![
        ToolDefinition::function(
            "search_logs",
            "Search the service logs",
            serde_json::json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        ),
    ])
}

fn connector(provider: &FakeProvider) -> OpenAiCompatible {
    OpenAiCompatible::with_timeouts(
        provider.base_url(),
        Duration::from_secs(5),
        Duration::from_secs(5),
    )
    .expect("connector")
}

fn router(provider: &FakeProvider) -> Router<OpenAiCompatible> {
    let config = RetryConfig::from_lookup(|key| {
        (key == "MESH_MODEL_RETRY_MAX_DELAY_MS").then(|| "20".to_owned())
    });
    Router::new(connector(provider), "m", config).with_jitter(Jitter::fixed(0.0))
}

fn outcomes(turn: &Turn) -> Vec<String> {
    turn.ledger()
        .entries()
        .into_iter()
        .filter_map(|e| match e.into_record() {
            LedgerRecord::Recovery(r) => Some(r.attempts().to_vec()),
            _ => None,
        })
        .flat_map(|attempts| {
            attempts
                .iter()
                .map(|a| a.outcome.to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

const CALL: &str = "Let me look.\n<tool_call>{\"name\": \"search_logs\", \"arguments\": {\"q\": \"deploy\"}}</tool_call>";

#[tokio::test]
async fn with_tools_offered_a_text_tool_call_comes_back_as_a_structured_one() {
    let provider = FakeProvider::start([FakeResponse::completion(CALL)])
        .await
        .expect("provider");
    let turn = turn();
    let done = router(&provider)
        .complete(&turn, request())
        .await
        .expect("answered");
    assert_eq!(done.content.as_deref(), Some("Let me look."));
    assert_eq!(done.tool_calls.len(), 1);
    assert_eq!(done.tool_calls[0].function.name, "search_logs");
    assert_eq!(
        done.tool_calls[0].parsed_arguments().expect("json"),
        serde_json::json!({"q": "deploy"})
    );
    assert!(done.tool_calls[0].id.starts_with("call_"));
    assert_eq!(outcomes(&turn), ["ok"]);
    assert_eq!(
        provider.received().len(),
        1,
        "no repair for a call that reads"
    );
}

#[tokio::test]
async fn a_broken_text_tool_call_gets_exactly_one_repair_whose_body_carries_the_correction() {
    let broken =
        "<tool_call>{\"name\": \"search_logs\", \"arguments\": {\"q\": \"deploy\"</tool_call>";
    let provider = FakeProvider::start([
        FakeResponse::completion(broken),
        FakeResponse::completion(CALL),
    ])
    .await
    .expect("provider");
    let turn = turn();
    let done = router(&provider)
        .complete(&turn, request())
        .await
        .expect("repaired");
    assert_eq!(done.tool_calls[0].function.name, "search_logs");
    // One attempt, two HTTP requests.
    assert_eq!(outcomes(&turn), ["ok"]);
    let received = provider.received();
    assert_eq!(received.len(), 2);
    let messages = received[1].body["messages"].as_array().expect("messages");
    assert_eq!(
        messages.len(),
        3,
        "the request, the model's reply, the correction"
    );
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(
        messages[1]["content"], broken,
        "the model's reply as it came"
    );
    assert_eq!(messages[2]["role"], "user");
    let correction = messages[2]["content"].as_str().expect("text");
    assert!(
        correction.contains("could not be read") && correction.contains("not valid JSON"),
        "{correction}"
    );
    assert_eq!(received[1].body["tools"], received[0].body["tools"]);
}

#[tokio::test]
async fn a_call_of_an_unknown_function_is_repaired_with_the_functions_named() {
    let unknown = "<tool_call>{\"name\": \"drop_database\", \"arguments\": {}}</tool_call>";
    let provider = FakeProvider::start([
        FakeResponse::completion(unknown),
        FakeResponse::completion(unknown),
    ])
    .await
    .expect("provider");
    let error = connector(&provider)
        .complete("m", &request())
        .await
        .expect_err("still unknown after the repair");
    assert_eq!(error.kind(), ModelErrorKind::MalformedToolCall);
    let cause = std::error::Error::source(&error)
        .and_then(|s| s.downcast_ref::<TextToolCallError>())
        .expect("typed cause");
    assert_eq!(
        cause,
        &TextToolCallError::Unreadable {
            format: TextToolFormat::Hermes,
            problem: TextToolProblem::UnknownFunction
        }
    );
    let received = provider.received();
    assert_eq!(received.len(), 2, "exactly one repair, never a second");
    let correction = received[1].body["messages"][2]["content"]
        .as_str()
        .expect("text");
    assert!(correction.contains("search_logs"), "{correction}");
}

#[tokio::test]
async fn without_tools_the_call_is_a_failed_attempt_with_no_repair() {
    let provider = FakeProvider::start([
        FakeResponse::completion(CALL),
        FakeResponse::completion("The deploy went out at 09:12."),
    ])
    .await
    .expect("provider");
    let turn = turn();
    let done = router(&provider)
        .complete(&turn, ChatRequest::new(vec![ChatMessage::user("Deploy?")]))
        .await
        .expect("the retry answers");
    assert_eq!(
        done.content.as_deref(),
        Some("The deploy went out at 09:12.")
    );
    assert_eq!(outcomes(&turn), ["malformed_tool_call", "ok"]);
    let received = provider.received();
    assert_eq!(received.len(), 2);
    assert_eq!(
        received[1].body["messages"].as_array().map(Vec::len),
        Some(1),
        "a retry of the same request, not a repair"
    );
}

#[tokio::test]
async fn a_stream_that_opens_with_a_call_yields_no_text_and_the_structured_call() {
    let provider = FakeProvider::start_steps([Step::chunks([
        "<tool_call>\n{\"name\": \"search_logs\", ",
        "\"arguments\": {\"q\": \"deploy\"}}\n</tool_call>",
    ])])
    .await
    .expect("provider");
    let router = router(&provider);
    let turn = turn();
    let request = request();
    let mut stream = router.stream(&turn, &request);
    let mut shown = String::new();
    for _ in 0..100 {
        match stream.next().await {
            Some(Ok(delta)) => shown.push_str(&delta),
            Some(Err(error)) => panic!("failed: {:?}", error.internal_cause().to_string()),
            None => break,
        }
    }
    assert_eq!(shown, "", "nothing of the markup is yielded");
    let calls = stream.tool_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].function.name, "search_logs");
    assert_eq!(
        calls[0].parsed_arguments().expect("json"),
        serde_json::json!({"q": "deploy"})
    );
}
