//! A paced token stream from the loopback provider, shared by the streaming benchmarks: the
//! same words at the same pace, a paragraph break every `PARAGRAPH` tokens.

use std::time::Duration;

use mesh_egress::model::{OpenAiCompatible, RetryConfig, Router};
use mesh_egress::testing::{FakeProvider, Step};

/// The time between two tokens: 50 tokens a second.
pub(crate) const PER_TOKEN: Duration = Duration::from_millis(20);
/// Tokens per paragraph: the first block is complete after `PARAGRAPH * PER_TOKEN`.
pub(crate) const PARAGRAPH: usize = 25;

/// `count` tokens of prose; every `PARAGRAPH`-th ends a paragraph.
pub(crate) fn tokens(count: usize) -> Vec<String> {
    let words = [
        "the ", "rollout ", "is ", "steady ", "and ", "errors ", "stay ", "flat ",
    ];
    (1..=count)
        .map(|i| {
            if i % PARAGRAPH == 0 {
                "done.\n\n".to_owned()
            } else {
                words[i % words.len()].to_owned()
            }
        })
        .collect()
}

/// A loopback provider that streams `count` tokens at `PER_TOKEN`, and a router to it with a
/// 60 s total deadline. Keep the provider alive while the router is used.
pub(crate) async fn paced_router(count: usize) -> (FakeProvider, Router<OpenAiCompatible>) {
    let provider = FakeProvider::start_steps([Step::chunks(tokens(count)).chunk_delay(PER_TOKEN)])
        .await
        .expect("fake provider");
    let config = RetryConfig::default().with_total_deadline(Duration::from_secs(60));
    let router = Router::new(
        OpenAiCompatible::new(provider.base_url()).expect("url"),
        "m",
        config,
    );
    (provider, router)
}
