//! Layer A against real bodies of the providers' own APIs (`data/provider_native.json`:
//! Anthropic Messages, OpenAI Responses, Gemini `generateContent`, and chat-completions routers'
//! in-stream errors; each sample cited, streamed and not).
//!
//! Every sample is served by the loopback fake exactly as recorded (status, headers, body) and
//! asked through a one-route `Router` over `model::Provider` for that API: an answer must come
//! back with exactly the sample's text; a failure must be recorded on the ledger with the
//! sample's class and retry verdict, and never come back as text.
//!
//! The held-out part is fixed by a SHA-256 of each sample's id (first byte below 64) and was
//! committed with the corpus before the connectors were checked against it; its figure is
//! printed and held apart.

use std::collections::BTreeMap;
use std::time::Duration;

use mesh_egress::model::{
    Api, ChatMessage, ChatRequest, Jitter, Provider, RetryConfig, Route, Router,
};
use mesh_egress::testing::{FakeProvider, FakeResponse};
use mesh_egress::{Attribution, Turn};
use serde_json::Value;
use sha2::{Digest, Sha256};

mod model_support;
use model_support::recovery;

const CORPUS: &str = include_str!("data/provider_native.json");

struct Sample {
    id: String,
    api: Api,
    streamed: bool,
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
    /// `Ok(text)` for an answer, `Err((reason, retryable))` for a failure.
    expect: Result<String, (String, bool)>,
}

fn samples() -> Vec<Sample> {
    let corpus: Value = serde_json::from_str(CORPUS).expect("corpus is JSON");
    corpus["samples"]
        .as_array()
        .expect("samples")
        .iter()
        .map(|s| {
            let text = |key: &str| s[key].as_str().unwrap_or_default().to_owned();
            let expect = &s["expect"];
            let headers = s["headers"]
                .as_object()
                .map(|h| {
                    h.iter()
                        .map(|(k, v)| (k.to_ascii_lowercase(), v.as_str().unwrap_or("").to_owned()))
                        .collect()
                })
                .unwrap_or_default();
            Sample {
                id: text("id"),
                api: Api::from_name(&text("api")).expect("a known api"),
                streamed: s["streamed"].as_bool().expect("streamed"),
                status: u16::try_from(s["status"].as_u64().unwrap_or(0)).unwrap_or(0),
                headers,
                body: text("body"),
                expect: match expect["outcome"].as_str() {
                    Some("answer") => Ok(expect["text"].as_str().unwrap_or_default().to_owned()),
                    _ => Err((
                        expect["reason"].as_str().unwrap_or_default().to_owned(),
                        expect["retryable"].as_bool().expect("retryable"),
                    )),
                },
            }
        })
        .collect()
}

fn held_out(id: &str) -> bool {
    Sha256::digest(id.as_bytes())[0] < 64
}

/// What the Router made of one sample: `Ok(text)` answered, `Err((reason, retryable))` the
/// first attempt's failure as the ledger holds it.
async fn ask(sample: &Sample) -> Result<String, (String, bool)> {
    let mut response = FakeResponse::raw(sample.status, sample.body.clone());
    for (name, value) in &sample.headers {
        response = response.with_header(name, value);
    }
    let fake = FakeProvider::start([response]).await.expect("fake starts");
    let provider = Provider::new(sample.api, fake.base_url())
        .expect("url")
        .with_api_key("test-key");
    let config = RetryConfig::default()
        .with_attempts(1)
        .with_total_deadline(Duration::from_secs(5));
    let router = Router::with_routes(provider, Route::new("corpus-model"), [], config)
        .with_jitter(Jitter::fixed(0.0));
    let turn = Turn::new(Attribution::new("corpus", sample.id.as_str(), "run"));
    let request = ChatRequest::new(vec![ChatMessage::user("Is the build green?")]);
    let answered = if sample.streamed {
        let mut stream = router.stream(&turn, &request);
        let mut text = String::new();
        let mut failed = false;
        for _ in 0..10_000 {
            match stream.next().await {
                Some(Ok(delta)) => {
                    stream.mark_delivered(&delta);
                    text.push_str(&delta);
                }
                Some(Err(_)) => {
                    failed = true;
                    break;
                }
                None => break,
            }
        }
        drop(stream);
        (!failed).then_some(text)
    } else {
        router
            .complete(&turn, &request)
            .await
            .ok()
            .map(|c| c.content.unwrap_or_default())
    };
    let report = recovery(&turn);
    let first = report.attempts().first().expect("an attempt");
    match answered {
        Some(text) if first.outcome.as_str() == "ok" => Ok(text),
        // A stream that failed after text: the failure is the attempt's.
        _ => Err((first.outcome.as_str().to_owned(), first.retryable)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_native_shape_is_an_answer_or_a_classified_failure_never_text() {
    let samples = samples();
    assert!(samples.len() >= 60, "{} samples", samples.len());
    // (held out, api) -> (right, total); misses listed.
    let mut figures: BTreeMap<(bool, &str), (usize, usize)> = BTreeMap::new();
    let mut misses = Vec::new();
    for sample in &samples {
        let got = ask(sample).await;
        let right = got == sample.expect;
        let entry = figures
            .entry((held_out(&sample.id), sample.api.name()))
            .or_default();
        entry.1 += 1;
        if right {
            entry.0 += 1;
        } else {
            misses.push(format!(
                "{}{}: got {got:?}, want {:?}",
                if held_out(&sample.id) {
                    "[held out] "
                } else {
                    ""
                },
                sample.id,
                sample.expect
            ));
        }
        // Whatever the verdict, a failure's body never comes back as the answer.
        if let (Ok(text), Err(_)) = (&got, &sample.expect) {
            assert!(
                !text.contains("error") && !text.contains("Overloaded"),
                "{}: provider text came back as an answer: {text:?}",
                sample.id
            );
        }
    }
    for ((held, api), (right, total)) in &figures {
        let part = if *held { "held out" } else { "tuning" };
        println!("{part} {api}: {right}/{total}");
    }
    for miss in &misses {
        println!("miss {miss}");
    }
    let (held_right, held_total) = figures
        .iter()
        .filter(|((held, _), _)| *held)
        .fold((0, 0), |(r, t), (_, (right, total))| (r + right, t + total));
    let (all_right, all_total) = figures
        .values()
        .fold((0, 0), |(r, t), (right, total)| (r + right, t + total));
    println!("held out: {held_right}/{held_total}; all: {all_right}/{all_total}");
    assert!(
        misses.is_empty(),
        "{} misses:\n{}",
        misses.len(),
        misses.join("\n")
    );
}
