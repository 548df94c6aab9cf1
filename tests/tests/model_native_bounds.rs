//! The bounds a user relies on, held by every native API's connector (`model::Provider`): a
//! whole body past the 8 MiB completion cap, a stream past it in total, and one stream line
//! past the 1 MiB line cap each end the attempt with a typed failure, never an unbounded read.
//! (The caps are the shared transport's, `model/http.rs`; chat completions' are held by
//! `model_http.rs`.)

use std::time::Duration;

use mesh_egress::model::{
    Api, ChatMessage, ChatRequest, Jitter, Provider, RetryConfig, Route, Router,
};
use mesh_egress::testing::{FakeProvider, FakeResponse};
use mesh_egress::{Attribution, Turn};

mod model_support;
use model_support::recovery;

const MIB: usize = 1024 * 1024;

/// The first attempt's outcome label for `response`, asked whole or streamed through `api`.
async fn outcome(api: Api, streamed: bool, response: FakeResponse) -> String {
    let fake = FakeProvider::start([response]).await.expect("fake starts");
    let provider = Provider::new(api, fake.base_url())
        .expect("url")
        .with_api_key("k");
    let config = RetryConfig::default()
        .with_attempts(1)
        .with_total_deadline(Duration::from_secs(20));
    let router = Router::with_routes(provider, Route::new("bound-model"), [], config)
        .with_jitter(Jitter::fixed(0.0));
    let turn = Turn::new(Attribution::new("bounds", api.name(), "run"));
    let request = ChatRequest::new(vec![ChatMessage::user("Is the build green?")]);
    if streamed {
        let mut stream = router.stream(&turn, &request);
        for _ in 0..100_000 {
            match stream.next().await {
                Some(Ok(delta)) => stream.mark_delivered(&delta),
                Some(Err(_)) | None => break,
            }
        }
    } else {
        let _ = router.complete(&turn, &request).await;
    }
    let report = recovery(&turn);
    report.attempts()[0].outcome.as_str().to_owned()
}

/// `count` keep-alive events of `api`'s stream, each a few dozen bytes.
fn keep_alives(api: Api, count: usize) -> String {
    let one = match api {
        Api::Anthropic => "event: ping\ndata: {\"type\": \"ping\"}\n\n",
        Api::Responses => {
            "event: response.in_progress\ndata: {\"type\":\"response.in_progress\"}\n\n"
        }
        _ => "data: {\"candidates\": [{\"content\": {\"parts\": []}}]}\n\n",
    };
    one.repeat(count)
}

const NATIVE: [Api; 3] = [Api::Anthropic, Api::Responses, Api::Gemini];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_body_past_the_completion_cap_is_response_too_large() {
    for api in NATIVE {
        let got = outcome(api, false, FakeResponse::large_body(200, 9 * MIB)).await;
        assert_eq!(got, "response_too_large", "{api}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_past_the_completion_cap_in_total_is_response_too_large() {
    for api in NATIVE {
        // Over 8 MiB of well-formed events that carry nothing: only the total cap ends it.
        let body = keep_alives(api, 9 * MIB / 40);
        assert!(body.len() > 8 * MIB);
        let response =
            FakeResponse::raw(200, body).with_header("content-type", "text/event-stream");
        let got = outcome(api, true, response).await;
        assert_eq!(got, "response_too_large", "{api}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_stream_line_past_its_cap_is_an_invalid_response() {
    for api in NATIVE {
        // A line that never ends, and a JSON document written outside any field that never
        // closes: both are cut at the 1 MiB line cap.
        let endless =
            FakeResponse::large_body(200, 3 * MIB).with_header("content-type", "text/event-stream");
        assert_eq!(
            outcome(api, true, endless).await,
            "invalid_response",
            "{api}"
        );
        let stray = format!("{{\n{}", "  \"error\": 1,\n".repeat(2 * MIB / 14));
        let stray = FakeResponse::raw(200, stray).with_header("content-type", "text/event-stream");
        assert_eq!(
            outcome(api, true, stray).await,
            "invalid_response",
            "{api} stray"
        );
    }
}
