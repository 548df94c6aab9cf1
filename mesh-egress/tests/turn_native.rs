//! `turn` as a black box against loopback fakes of each provider API it speaks (DESIGN.md,
//! fourth round, "Providers"): `MESH_MODEL_API` = `chat` (default) | `responses` | `anthropic` |
//! `gemini`, each API's endpoint, auth and token bound (`MESH_MODEL_MAX_TOKENS`, default
//! 4096), each API's failure shapes falling back to an `api=model` entry of
//! `MESH_MODEL_FALLBACK_MODELS` without a word of the provider's on stdout, a fallback on
//! another API with its own base and key, and the configuration errors (exit 2, one `error:`
//! line).
//!
//! The fakes' bodies are in each API's own wire format (`native_support`). A `FakeProvider`
//! answers any path with its next scripted response, so every test runs one attempt per route
//! (`MESH_MODEL_RETRY_ATTEMPTS=1`): the primary is asked first, the fallback second, and the
//! received requests say which route asked what, where and with which key.
//!
//! Each table-driven test runs all its cases and then fails once, listing every case that
//! failed and how, so one run shows the whole picture.

mod example_binary;
mod native_support;

use std::fmt::Debug;
use std::process::Stdio;
use std::time::Duration;

use example_binary::example_binary;
use mesh_egress::testing::{FakeProvider, FakeResponse, ReceivedRequest, Step};
use native_support::{Api, Event, anthropic, gemini, json_response, responses};
use serde_json::{Value, json};

const PROMPT: &str = "Is the deploy done?";
const PRIMARY: &str = "native-primary";
const BACKUP: &str = "backup-model";
const PRIMARY_KEY: &str = "sk-primary-7f3a";
const BACKUP_KEY: &str = "sk-backup-91c2";
const ANSWER: &str = "The deploy finished and every check passed.";
const BACKUP_ANSWER: &str = "The backup model says the deploy is done.";
/// The bound every API is sent when `MESH_MODEL_MAX_TOKENS` is unset.
const DEFAULT_MAX_TOKENS: u64 = 4096;
/// Longer than any run should take: a hung `turn` is killed and reported, never waited on.
const WATCHDOG: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------------
// Running `turn`.

/// What one run of `turn` left.
struct Ran {
    /// The exit code (`None`: killed by a signal or by the watchdog).
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// The variables of one run, on top of the retry settings every run shares.
#[derive(Clone, Default)]
struct Env(Vec<(String, String)>);

impl Env {
    /// The primary on `api` at `base_url` with the primary key and model. `chat` is left to
    /// the default when `explicit_chat` is false (the contract's default is `chat`).
    fn primary(api: Api, base_url: &str, explicit_chat: bool) -> Self {
        let env = Self::default()
            .set("MESH_MODEL_BASE_URL", base_url)
            .set("MESH_MODEL_API_KEY", PRIMARY_KEY)
            .set("MESH_MODEL", PRIMARY);
        if api == Api::Chat && !explicit_chat {
            env
        } else {
            env.set("MESH_MODEL_API", api.name())
        }
    }

    /// A fallback entry `api=model` on `api` at `base_url` with `key`.
    fn fallback_on(self, api: Api, model: &str, base_url: &str, key: &str) -> Self {
        self.set(
            "MESH_MODEL_FALLBACK_MODELS",
            &format!("{}={model}", api.name()),
        )
        .set(&api.base_url_var(), base_url)
        .set(&api.api_key_var(), key)
    }

    fn set(mut self, name: &str, value: &str) -> Self {
        self.0.push((name.to_owned(), value.to_owned()));
        self
    }
}

/// Runs `turn` with `args` and `env`, none of the parent's `MESH_*` variables, one attempt per
/// route and short real-time bounds.
async fn run(env: &Env, args: &[&str]) -> Ran {
    let mut command = tokio::process::Command::new(example_binary("turn"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("MESH_") {
            command.env_remove(name);
        }
    }
    command
        .env_remove("RUST_LOG")
        .env("MESH_MODEL_RETRY_ATTEMPTS", "1")
        .env("MESH_MODEL_RETRY_MAX_DELAY_MS", "50")
        .env("MESH_MODEL_RETRY_TOTAL_DEADLINE_MS", "6000")
        .env("MESH_MODEL_RETRY_ATTEMPT_TIMEOUT_MS", "3000")
        .env("MESH_MODEL_STREAM_FIRST_TOKEN_TIMEOUT_MS", "2500")
        .env("MESH_MODEL_STREAM_IDLE_TIMEOUT_MS", "2500")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (name, value) in &env.0 {
        command.env(name, value);
    }
    let child = command.spawn().expect("turn starts");
    match tokio::time::timeout(WATCHDOG, child.wait_with_output()).await {
        Ok(output) => {
            let output = output.expect("turn ends");
            Ran {
                code: output.status.code(),
                stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            }
        }
        // Dropping the future drops the child, which kills it.
        Err(_) => Ran {
            code: None,
            stdout: String::new(),
            stderr: format!("killed: still running after {WATCHDOG:?}"),
        },
    }
}

/// `turn`'s arguments for one prompt, streamed or not.
fn args(stream: bool) -> Vec<&'static str> {
    if stream {
        vec!["--stream", PROMPT]
    } else {
        vec![PROMPT]
    }
}

/// Starts a fake on 127.0.0.1 playing `script`.
async fn fake(script: impl IntoIterator<Item = FakeResponse>) -> FakeProvider {
    FakeProvider::start(script).await.expect("fake provider")
}

/// The path part of `base_url` (`/v1`, `/v1beta`).
fn base_path(base_url: &str) -> &str {
    let after_scheme = base_url.split_once("//").map_or(base_url, |(_, rest)| rest);
    after_scheme.find('/').map_or("", |at| &after_scheme[at..])
}

// ---------------------------------------------------------------------------------------------
// Collecting what went wrong.

/// What went wrong in one case.
struct Problems {
    case: String,
    list: Vec<String>,
}

impl Problems {
    fn new(case: impl Into<String>) -> Self {
        Self {
            case: case.into(),
            list: Vec::new(),
        }
    }

    fn that(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.list.push(what());
        }
    }

    fn eq<T: PartialEq + Debug>(&mut self, what: &str, got: T, want: T) {
        if got != want {
            self.list
                .push(format!("{what}: got {got:?}, want {want:?}"));
        }
    }

    /// The run ended with exit 0 and exactly `text` on stdout, none of `leaks` among it.
    fn printed(&mut self, ran: &Ran, text: &str, leaks: &[&str]) {
        self.eq("exit code", ran.code, Some(0));
        for leak in leaks.iter().chain(&[PRIMARY_KEY, BACKUP_KEY]) {
            self.that(!ran.stdout.contains(leak), || {
                format!("stdout shows provider wording {leak:?}: {:?}", ran.stdout)
            });
        }
        self.eq("stdout", ran.stdout.as_str(), &format!("{text}\n"));
        if ran.code != Some(0) || ran.stdout.is_empty() {
            self.list.push(format!("stderr: {}", tail(&ran.stderr)));
        }
    }
}

/// The last few lines of `text`, for a report.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(4)..].join("\n")
}

/// Fails, listing every case with problems, when any has one.
fn report(cases: Vec<Problems>) {
    let failed: Vec<String> = cases
        .iter()
        .filter(|case| !case.list.is_empty())
        .map(|case| format!("- {}:\n    {}", case.case, case.list.join("\n    ")))
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} cases failed:\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n")
    );
}

/// A request header's value (names are lower-case).
fn header<'a>(request: &'a ReceivedRequest, name: &str) -> Option<&'a str> {
    request
        .headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// What one request should look like.
struct Expected<'a> {
    who: &'a str,
    api: Api,
    base_url: &'a str,
    model: &'a str,
    key: &'a str,
    stream: bool,
    max_tokens: u64,
}

/// `request` went where `expected` says, with its API's auth, model, stream flag, token bound
/// and the user's prompt.
fn check_request(p: &mut Problems, request: &ReceivedRequest, expected: &Expected<'_>) {
    let Expected {
        who,
        api,
        base_url,
        model,
        key,
        stream,
        max_tokens,
    } = *expected;
    let query = request.query.as_deref().unwrap_or("");
    p.eq(
        &format!("{who}'s path"),
        request.path.as_str(),
        &api.path(base_path(base_url), model, stream),
    );
    match api {
        Api::Chat | Api::Responses => p.eq(
            &format!("{who}'s authorization"),
            request.authorization.as_deref(),
            Some(format!("Bearer {key}").as_str()),
        ),
        Api::Anthropic => {
            p.eq(
                &format!("{who}'s x-api-key"),
                header(request, "x-api-key"),
                Some(key),
            );
            p.eq(
                &format!("{who}'s anthropic-version"),
                header(request, "anthropic-version"),
                Some("2023-06-01"),
            );
        }
        Api::Gemini => {
            p.eq(
                &format!("{who}'s x-goog-api-key"),
                header(request, "x-goog-api-key"),
                Some(key),
            );
            p.that(!query.contains("key="), || {
                format!("{who} put the key in the query {query:?}, not x-goog-api-key")
            });
        }
    }
    if api == Api::Gemini {
        // The model is in the path; the stream is the method and `alt=sse`.
        p.eq(
            &format!("{who}'s alt=sse query"),
            query.split('&').any(|pair| pair == "alt=sse"),
            stream,
        );
    } else {
        p.eq(
            &format!("{who}'s body model"),
            &request.body["model"],
            &Value::from(model),
        );
        p.eq(
            &format!("{who}'s body stream flag"),
            request.body["stream"].as_bool().unwrap_or(false),
            stream,
        );
    }
    p.eq(
        &format!("{who}'s {}", api.max_tokens_field()),
        api.max_tokens_of(&request.body),
        &Value::from(max_tokens),
    );
    p.that(request.body.to_string().contains(PROMPT), || {
        format!("{who}'s body does not carry the prompt: {}", request.body)
    });
}

// ---------------------------------------------------------------------------------------------
// 1. The healthy path, per API, streamed and not, default and set token bound.

/// One healthy turn on `api`: the answer on stdout, one request as the contract says.
async fn healthy(api: Api, stream: bool, max_tokens: Option<u64>) -> Problems {
    let mut p = Problems::new(format!(
        "{} {}, MESH_MODEL_MAX_TOKENS {max_tokens:?}",
        api.name(),
        if stream { "streamed" } else { "whole" }
    ));
    let provider = fake([api.answer(PRIMARY, ANSWER, stream)]).await;
    let base_url = api.base_url(provider.addr());
    // Chat's default is exercised with MESH_MODEL_API unset, the explicit value with it set.
    let mut env = Env::primary(api, &base_url, max_tokens.is_some());
    if let Some(n) = max_tokens {
        env = env.set("MESH_MODEL_MAX_TOKENS", &n.to_string());
    }
    let ran = run(&env, &args(stream)).await;
    p.printed(&ran, ANSWER, &[]);
    let received = provider.received();
    p.eq("requests", received.len(), 1);
    if let Some(request) = received.first() {
        let expected = Expected {
            who: "the primary",
            api,
            base_url: &base_url,
            model: PRIMARY,
            key: PRIMARY_KEY,
            stream,
            max_tokens: max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        };
        check_request(&mut p, request, &expected);
    }
    p
}

/// Every healthy case of `api`.
async fn healthy_cases(api: Api) -> Vec<Problems> {
    let mut cases = Vec::new();
    for stream in [false, true] {
        for max_tokens in [None, Some(777)] {
            cases.push(healthy(api, stream, max_tokens).await);
        }
    }
    cases
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_answers_at_chat_completions_with_a_bearer_key_and_max_tokens() {
    report(healthy_cases(Api::Chat).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_answers_at_responses_with_a_bearer_key_and_max_output_tokens() {
    report(healthy_cases(Api::Responses).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_answers_at_messages_with_x_api_key_the_version_and_max_tokens() {
    report(healthy_cases(Api::Anthropic).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_answers_at_generate_content_with_x_goog_api_key_and_max_output_tokens() {
    report(healthy_cases(Api::Gemini).await);
}

// ---------------------------------------------------------------------------------------------
// 2. Each API's failure shapes as the primary, with a fallback `<api>=backup-model` on the same
//    fake that answers.

/// One way the primary fails: its response, whether the turn streams, and the provider's
/// wording that must never reach stdout.
struct Shape {
    name: &'static str,
    stream: bool,
    primary: FakeResponse,
    leaks: &'static [&'static str],
}

impl Shape {
    fn whole(name: &'static str, primary: FakeResponse, leaks: &'static [&'static str]) -> Self {
        Self {
            name,
            stream: false,
            primary,
            leaks,
        }
    }

    fn streamed(name: &'static str, primary: FakeResponse, leaks: &'static [&'static str]) -> Self {
        Self {
            name,
            stream: true,
            primary,
            leaks,
        }
    }
}

/// The primary on `api` fails as `shape` says; the fallback entry `api=backup-model` on the
/// same fake (with its own key) answers, and only its answer is printed.
async fn falls_back(api: Api, shape: Shape) -> Problems {
    let stream = shape.stream;
    let mut p = Problems::new(format!(
        "{}: {} ({})",
        api.name(),
        shape.name,
        if stream { "streamed" } else { "whole" }
    ));
    let provider = fake([shape.primary, api.answer(BACKUP, BACKUP_ANSWER, stream)]).await;
    let base_url = api.base_url(provider.addr());
    let env = Env::primary(api, &base_url, true).fallback_on(api, BACKUP, &base_url, BACKUP_KEY);
    let ran = run(&env, &args(stream)).await;
    p.printed(&ran, BACKUP_ANSWER, shape.leaks);
    let received = provider.received();
    p.eq(
        "requests (the primary's, then the fallback's)",
        received.len(),
        2,
    );
    let routes = [
        ("the primary", PRIMARY, PRIMARY_KEY),
        ("the fallback", BACKUP, BACKUP_KEY),
    ];
    for (request, (who, model, key)) in received.iter().zip(routes) {
        let expected = Expected {
            who,
            api,
            base_url: &base_url,
            model,
            key,
            stream,
            max_tokens: DEFAULT_MAX_TOKENS,
        };
        check_request(&mut p, request, &expected);
    }
    p
}

async fn fallback_cases(api: Api, shapes: Vec<Shape>) {
    let mut cases = Vec::new();
    for shape in shapes {
        cases.push(falls_back(api, shape).await);
    }
    report(cases);
}

/// Anthropic's overload wording, in both its places.
const OVERLOADED: &[&str] = &["Overloaded", "overloaded_error", "529"];
/// A refusal's wording (`stop_details` of the streaming-refusals guide).
const REFUSED: &[&str] = &["refusal", "cyber", "This request was declined"];

fn anthropic_shapes() -> Vec<Shape> {
    let overloaded = || {
        json_response(529, &anthropic::error("overloaded_error", "Overloaded"))
            .with_header("request-id", "req_011CSHoEeqs5C35K2UUqR7Fy")
    };
    // docs.anthropic.com/en/docs/test-and-evaluate/strengthen-guardrails/
    // handle-streaming-refusals: Claude 4 models end with `stop_reason: "refusal"` and no
    // refusal message of their own ("You must ... provide appropriate user-facing messaging");
    // `stop_details` rides the `message_delta`.
    let stop_details = json!({"stop_details": {"type": "refusal", "category": "cyber",
        "explanation": "This request was declined because it could enable cyber harm."}});
    let mut refused_whole = anthropic::message(PRIMARY, json!([]), "refusal");
    refused_whole["stop_details"] = stop_details["stop_details"].clone();
    // Extended thinking spent the whole bound: a thinking block and no text block.
    let thinking = json!([{"type": "thinking", "thinking": "PRIVATE-REASONING weighing the rollout",
                           "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}]);
    vec![
        Shape::whole("529 overloaded_error", overloaded(), OVERLOADED),
        Shape::streamed(
            "529 overloaded_error before the stream",
            overloaded(),
            OVERLOADED,
        ),
        // The streaming guide's "Error events": "during periods of high usage, you may receive
        // an overloaded_error, which would normally correspond to an HTTP 529 in a
        // non-streaming context", inside a 200, and no message_stop follows.
        Shape::streamed(
            "a 200 stream with event: error and no message_stop",
            anthropic::sse(&[
                anthropic::message_start(PRIMARY),
                anthropic::ping(),
                anthropic::error_event("overloaded_error", "Overloaded"),
            ]),
            OVERLOADED,
        ),
        // Cut short: a few words (less than a block, so nothing was shown), no message_delta,
        // no message_stop.
        Shape::streamed(
            "a stream that ends without message_stop",
            anthropic::sse(&[
                anthropic::message_start(PRIMARY),
                anthropic::text_block_start(0),
                anthropic::ping(),
                anthropic::text_delta(0, "The dep"),
            ]),
            &["The dep"],
        ),
        Shape::whole(
            "stop_reason refusal",
            json_response(200, &refused_whole),
            REFUSED,
        ),
        Shape::streamed(
            "stop_reason refusal after no text",
            anthropic::sse(&[
                anthropic::message_start(PRIMARY),
                anthropic::ping(),
                anthropic::message_delta("refusal", stop_details.clone()),
                anthropic::message_stop(),
            ]),
            REFUSED,
        ),
        Shape::whole(
            "max_tokens with nothing to show",
            json_response(200, &anthropic::message(PRIMARY, thinking, "max_tokens")),
            &["PRIVATE-REASONING", "max_tokens"],
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_failures_fall_back_to_an_anthropic_entry_and_show_no_provider_wording() {
    fallback_cases(Api::Anthropic, anthropic_shapes()).await;
}

const SERVER_ERROR: &[&str] = &["server_error", "response.failed", "The model failed"];

fn responses_shapes() -> Vec<Shape> {
    let failed_message = "The model failed to generate a response.";
    let failed = responses::failed(PRIMARY, "server_error", failed_message);
    let incomplete = |reason| responses::incomplete(PRIMARY, reason);
    let incomplete_stream = |reason| {
        let mut events = responses::opening(PRIMARY);
        events.push(responses::event(
            "response.incomplete",
            json!({"response": incomplete(reason)}),
        ));
        responses::sse(&events)
    };
    let with_opening = |last: Event| {
        let mut events = responses::opening(PRIMARY);
        events.push(last);
        responses::sse(&events)
    };
    let mut cut_short = responses::opening(PRIMARY);
    cut_short.extend(responses::message_opening());
    cut_short.push(responses::text_delta("The dep"));
    vec![
        // The `response` object's `status` may be `failed`, with the documented `error`.
        Shape::whole("status failed", json_response(200, &failed), SERVER_ERROR),
        Shape::streamed(
            "response.failed",
            with_opening(responses::event(
                "response.failed",
                json!({"response": failed}),
            )),
            SERVER_ERROR,
        ),
        Shape::whole(
            "status incomplete, max_output_tokens",
            json_response(200, &incomplete("max_output_tokens")),
            &["max_output_tokens", "incomplete"],
        ),
        Shape::streamed(
            "response.incomplete, max_output_tokens",
            incomplete_stream("max_output_tokens"),
            &["max_output_tokens", "incomplete"],
        ),
        Shape::whole(
            "status incomplete, content_filter",
            json_response(200, &incomplete("content_filter")),
            &["content_filter", "incomplete"],
        ),
        Shape::streamed(
            "response.incomplete, content_filter",
            incomplete_stream("content_filter"),
            &["content_filter", "incomplete"],
        ),
        // The reference documents `error` with code and message at the top level, but the live
        // API nests them under `error` (openai/openai-dotnet#881: `{"type": "error",
        // "sequence_number": 2, "error": {"type": ..., "code": ..., "message": ...}}`).
        Shape::streamed(
            "an error event nested under error",
            with_opening(responses::event(
                "error",
                json!({"error": {"type": "server_error", "code": "server_error",
                                 "message": "An error occurred while processing your request.",
                                 "param": null}}),
            )),
            &["server_error", "An error occurred"],
        ),
        Shape::streamed(
            "an error event as the reference documents it",
            with_opening(responses::event(
                "error",
                json!({"code": "server_error",
                       "message": "An error occurred while processing your request.",
                       "param": null}),
            )),
            &["server_error", "An error occurred"],
        ),
        Shape::streamed(
            "a stream without a terminal event",
            responses::sse(&cut_short),
            &["The dep"],
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_failures_fall_back_to_a_responses_entry_and_show_no_provider_wording() {
    fallback_cases(Api::Responses, responses_shapes()).await;
}

const BLOCKED: &[&str] = &["SAFETY", "blockReason", "HARM_CATEGORY"];

fn gemini_shapes() -> Vec<Shape> {
    let blocked = gemini::prompt_blocked(PRIMARY, "SAFETY");
    // A candidate stopped by the safety filter carries no content (whole), or a part with no
    // text (a stream's last chunk).
    let safety_whole = gemini::response(
        PRIMARY,
        json!([{"finishReason": "SAFETY", "index": 0, "safetyRatings": [
            {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": true}]}]),
    );
    let safety_chunk = gemini::response(PRIMARY, json!([gemini::candidate("", Some("SAFETY"))]));
    let recitation = gemini::response(PRIMARY, json!([gemini::candidate("", Some("RECITATION"))]));
    let overloaded = gemini::error(
        503,
        "UNAVAILABLE",
        "The model is overloaded. Please try again later.",
    );
    let exhausted = || {
        json_response(
            429,
            &gemini::error(
                429,
                "RESOURCE_EXHAUSTED",
                "Resource has been exhausted (e.g. check quota).",
            ),
        )
    };
    let first_words = gemini::response(PRIMARY, json!([gemini::candidate("The dep", None)]));
    let more_words = gemini::response(PRIMARY, json!([gemini::candidate("loy is", None)]));
    vec![
        Shape::whole(
            "promptFeedback.blockReason, no candidates",
            json_response(200, &blocked),
            BLOCKED,
        ),
        Shape::streamed(
            "promptFeedback.blockReason, no candidates",
            gemini::sse(&[Event::data(blocked.clone())]),
            BLOCKED,
        ),
        Shape::whole(
            "finishReason SAFETY, no content",
            json_response(200, &safety_whole),
            BLOCKED,
        ),
        Shape::streamed(
            "finishReason SAFETY, empty text",
            gemini::sse(&[Event::data(safety_chunk)]),
            BLOCKED,
        ),
        Shape::whole(
            "finishReason RECITATION",
            json_response(200, &recitation),
            &["RECITATION"],
        ),
        Shape::streamed(
            "finishReason RECITATION",
            gemini::sse(&[Event::data(recitation.clone())]),
            &["RECITATION"],
        ),
        // A 200 stream whose chunk is the Google error document rather than a response.
        Shape::streamed(
            "an error object inside the stream",
            gemini::sse(&[Event::data(overloaded)]),
            &["overloaded", "UNAVAILABLE", "503"],
        ),
        // Gemini has no terminal event: only a finishReason says the answer is whole.
        Shape::streamed(
            "a stream whose last chunk has no finishReason",
            gemini::sse(&[Event::data(first_words), Event::data(more_words)]),
            &["The dep"],
        ),
        Shape::whole(
            "429 RESOURCE_EXHAUSTED",
            exhausted(),
            &["RESOURCE_EXHAUSTED", "Resource has been exhausted", "429"],
        ),
        Shape::streamed(
            "429 RESOURCE_EXHAUSTED before the stream",
            exhausted(),
            &["RESOURCE_EXHAUSTED", "Resource has been exhausted", "429"],
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_failures_fall_back_to_a_gemini_entry_and_show_no_provider_wording() {
    fallback_cases(Api::Gemini, gemini_shapes()).await;
}

// ---------------------------------------------------------------------------------------------
// 3. A fallback on another API, with its own base and key.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overloaded_anthropic_primary_falls_back_to_a_chat_entry_on_its_own_base_and_key() {
    let mut cases = Vec::new();
    for stream in [false, true] {
        let mut p = Problems::new(if stream { "streamed" } else { "whole" });
        let primary = fake([json_response(
            529,
            &anthropic::error("overloaded_error", "Overloaded"),
        )])
        .await;
        let backup_answer = if stream {
            FakeResponse::from(Step::chunks([
                "The backup model says ",
                "the deploy is done.",
            ]))
        } else {
            FakeResponse::completion(BACKUP_ANSWER)
        };
        let backup = fake([backup_answer]).await;
        let primary_url = Api::Anthropic.base_url(primary.addr());
        let backup_url = backup.base_url();
        let env = Env::primary(Api::Anthropic, &primary_url, true).fallback_on(
            Api::Chat,
            "gpt-backup",
            &backup_url,
            BACKUP_KEY,
        );
        let ran = run(&env, &args(stream)).await;
        p.printed(&ran, BACKUP_ANSWER, OVERLOADED);
        let asked_primary = primary.received();
        p.eq("requests to the anthropic fake", asked_primary.len(), 1);
        if let Some(request) = asked_primary.first() {
            let expected = Expected {
                who: "the anthropic primary",
                api: Api::Anthropic,
                base_url: &primary_url,
                model: PRIMARY,
                key: PRIMARY_KEY,
                stream,
                max_tokens: DEFAULT_MAX_TOKENS,
            };
            check_request(&mut p, request, &expected);
        }
        let asked_backup = backup.received();
        p.eq("requests to the chat fake", asked_backup.len(), 1);
        if let Some(request) = asked_backup.first() {
            let expected = Expected {
                who: "the chat fallback",
                api: Api::Chat,
                base_url: &backup_url,
                model: "gpt-backup",
                key: BACKUP_KEY,
                stream,
                max_tokens: DEFAULT_MAX_TOKENS,
            };
            check_request(&mut p, request, &expected);
            p.that(header(request, "x-api-key").is_none(), || {
                "the chat fallback was sent the anthropic x-api-key".to_owned()
            });
        }
        cases.push(p);
    }
    report(cases);
}

// ---------------------------------------------------------------------------------------------
// 4. Configuration.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_api_or_a_named_api_without_its_base_url_or_key_exits_2_with_one_error_line() {
    let provider = fake([FakeResponse::completion(ANSWER)]).await;
    let base_url = provider.base_url();
    let primary = Env::primary(Api::Chat, &base_url, false);
    let cases: [(&str, Env); 3] = [
        (
            "MESH_MODEL_API=cohere",
            primary.clone().set("MESH_MODEL_API", "cohere"),
        ),
        (
            "gemini=gemini-2.5-flash without MESH_MODEL_GEMINI_BASE_URL",
            primary
                .clone()
                .set("MESH_MODEL_FALLBACK_MODELS", "gemini=gemini-2.5-flash")
                .set("MESH_MODEL_GEMINI_API_KEY", BACKUP_KEY),
        ),
        (
            "anthropic=claude-backup without MESH_MODEL_ANTHROPIC_API_KEY",
            primary
                .clone()
                .set("MESH_MODEL_FALLBACK_MODELS", "anthropic=claude-backup")
                .set("MESH_MODEL_ANTHROPIC_BASE_URL", &base_url),
        ),
    ];
    let mut problems = Vec::new();
    for (name, env) in cases {
        let mut p = Problems::new(name);
        let asked_before = provider.received().len();
        let ran = run(&env, &[PROMPT]).await;
        p.eq("exit code", ran.code, Some(2));
        p.eq("stdout", ran.stdout.as_str(), "");
        p.eq("stderr lines", ran.stderr.lines().count(), 1);
        p.that(ran.stderr.starts_with("error:"), || {
            format!("stderr does not start with `error:`: {}", tail(&ran.stderr))
        });
        p.eq("requests made", provider.received().len() - asked_before, 0);
        problems.push(p);
    }
    report(problems);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fallback_entry_that_names_no_api_is_a_model_on_the_primarys_api_base_and_key() {
    // (primary API, entry): `llama3:8b` has no `=`; `ollama=llama3` has one, but `ollama` is no
    // API, so the whole entry is the model name.
    let cases = [
        (Api::Chat, "llama3:8b"),
        (Api::Chat, "ollama=llama3"),
        (Api::Anthropic, "llama3:8b"),
    ];
    let mut problems = Vec::new();
    for (api, entry) in cases {
        let mut p = Problems::new(format!("{} primary, entry {entry:?}", api.name()));
        let failure = match api {
            Api::Anthropic => {
                json_response(529, &anthropic::error("overloaded_error", "Overloaded"))
            }
            _ => FakeResponse::status(503),
        };
        let provider = fake([failure, api.answer(entry, BACKUP_ANSWER, false)]).await;
        let base_url = api.base_url(provider.addr());
        let env = Env::primary(api, &base_url, true).set("MESH_MODEL_FALLBACK_MODELS", entry);
        let ran = run(&env, &[PROMPT]).await;
        p.printed(&ran, BACKUP_ANSWER, &[]);
        let received = provider.received();
        p.eq("requests", received.len(), 2);
        if let Some(request) = received.get(1) {
            let expected = Expected {
                who: "the fallback",
                api,
                base_url: &base_url,
                model: entry,
                key: PRIMARY_KEY,
                stream: false,
                max_tokens: DEFAULT_MAX_TOKENS,
            };
            check_request(&mut p, request, &expected);
        }
        problems.push(p);
    }
    report(problems);
}
