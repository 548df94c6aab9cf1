//! A loopback fake OpenAI-compatible provider, for trying the `turn` example by hand.
//!
//! ```text
//! cargo run -q -p mesh-egress --example fake_provider -- \
//!     [--port 8080] [--otherwise SPEC] SPEC...
//! ```
//!
//! Each SPEC answers one request, in order; `--otherwise` answers every request after that
//! (default: a 500). SPECs: `ok:TEXT`, `empty`, `never` (accept, never answer), `close`
//! (close mid-response), `STATUS` (e.g. `503`), `429:SECONDS` (with `Retry-After`),
//! `STATUS:CODE` (e.g. `400:context_length_exceeded`, `401:invalid_api_key`).
//! It prints its base URL on stdout and serves until interrupted.

use std::net::SocketAddr;
use std::process::ExitCode;

use mesh_egress::testing::{FakeProvider, FakeResponse};

fn spec(text: &str) -> Result<FakeResponse, String> {
    let (head, tail) = match text.split_once(':') {
        Some((head, tail)) => (head, Some(tail)),
        None => (text, None),
    };
    Ok(match (head, tail) {
        ("ok", text) => FakeResponse::completion(text.unwrap_or("Hello from the fake provider.")),
        ("empty", None) => FakeResponse::empty_completion(),
        ("never", None) => FakeResponse::never_answer(),
        ("close", None) => FakeResponse::close_mid_response(),
        (status, rest) => {
            let status: u16 = status
                .parse()
                .map_err(|_| format!("unknown response spec {text:?}"))?;
            match rest {
                None => FakeResponse::status(status),
                Some(secs) if status == 429 && secs.parse::<f64>().is_ok() => {
                    FakeResponse::error(429, "rate_limit_exceeded", "Rate limit reached")
                        .with_header("retry-after", secs)
                }
                Some(code) => {
                    FakeResponse::error(status, code, &format!("fake provider error: {code}"))
                }
            }
        }
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let mut port = 8080u16;
    let mut otherwise = None;
    let mut script = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let parsed = match arg.as_str() {
            "--port" => args
                .next()
                .and_then(|p| p.parse().ok())
                .map(|p| port = p)
                .ok_or_else(|| "--port needs a number".to_owned()),
            "--otherwise" => args
                .next()
                .ok_or_else(|| "--otherwise needs a spec".to_owned())
                .and_then(|s| spec(&s))
                .map(|r| otherwise = Some(r)),
            other => spec(other).map(|r| script.push(r)),
        };
        if let Err(message) = parsed {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    }
    let provider =
        match FakeProvider::start_on(SocketAddr::from(([127, 0, 0, 1], port)), script).await {
            Ok(provider) => provider,
            Err(e) => {
                eprintln!("error: cannot listen on 127.0.0.1:{port}: {e}");
                return ExitCode::FAILURE;
            }
        };
    let provider = match otherwise {
        Some(response) => provider.otherwise(response),
        None => provider,
    };
    println!("{}", provider.base_url());
    let _ = tokio::signal::ctrl_c().await;
    ExitCode::SUCCESS
}
