//! Three handlers behind the egress boundary: one answers, one fails while a person waits, one
//! fails in a background job. For each, what the person saw beside what the operator's log saw.
//!
//! Run: `cargo run -p mesh-egress --example quickstart`

use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use mesh_egress::channel::{Deliver, Recorder};
use mesh_egress::{AgentMessage, Attribution, EgressError, Turn, egress_boundary};

/// A handler that answers.
#[egress_boundary(interactive)]
async fn build_status(turn: &Turn) -> Result<AgentMessage, EgressError> {
    Ok(AgentMessage::new(
        "The nightly build is **green**: 412 tests, 0 failures.",
        turn.attribution().clone(),
    ))
}

/// A handler whose model call failed while a person was waiting.
#[egress_boundary(interactive)]
async fn summarise_incident(turn: &Turn) -> Result<AgentMessage, EgressError> {
    let provider_said = r#"LLM request failed: 503 {"error":{"message":"upstream overloaded","type":"server_error"}}"#;
    Err(EgressError::transport(
        provider_said,
        turn.attribution().clone(),
    ))
}

/// A scheduled digest whose data source is down.
#[egress_boundary(proactive)]
async fn morning_digest(turn: &Turn) -> Result<AgentMessage, EgressError> {
    let cause = io::Error::new(
        io::ErrorKind::ConnectionRefused,
        "metrics db: connection refused (os error 111)",
    );
    Err(EgressError::transport(cause, turn.attribution().clone()))
}

#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl Log {
    fn take(&self) -> Vec<String> {
        let mut buf = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let text = String::from_utf8_lossy(&buf).into_owned();
        buf.clear();
        text.lines().map(str::to_owned).collect()
    }
}

impl io::Write for Log {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn show(title: &str, user_saw: &[String], operator_saw: &[String]) {
    println!(
        "── {title} {}",
        "─".repeat(70usize.saturating_sub(title.len()))
    );
    let user = if user_saw.is_empty() {
        vec!["(nothing: silence)".to_owned()]
    } else {
        user_saw.to_vec()
    };
    for line in user {
        println!("  user saw      │ {line}");
    }
    if operator_saw.is_empty() {
        println!("  operator saw  │ (no events)");
    }
    for line in operator_saw {
        println!("  operator saw  │ {line}");
    }
    println!();
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let log = Log::default();
    let writer = log.clone();
    tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .without_time()
        .compact()
        .init();

    let attribution = |conversation: &str| Attribution::new("ops-bot", conversation, "run-7");

    let channel = Recorder::new();
    let _answered = channel
        .deliver(build_status(&Turn::new(attribution("dm-alice"))).await)
        .await?;
    show("1. a handler that answers", &channel.sent(), &log.take());

    let channel = Recorder::new();
    let mut receipt = channel
        .deliver(summarise_incident(&Turn::new(attribution("dm-bob"))).await)
        .await?;
    let promise = receipt
        .take_commitment()
        .expect("a holding line carries a promise");
    let mut operator = log.take();
    operator.push(format!(
        "commitment {} : follow up with {} in {:?}, up to {} tries",
        promise.id(),
        promise.attribution().conversation(),
        promise.first_delay(),
        promise.attempts()
    ));
    show(
        "2. an interactive handler whose model call failed",
        &channel.sent(),
        &operator,
    );

    let channel = Recorder::new();
    let _silent = channel
        .deliver(morning_digest(&Turn::new(attribution("#standup"))).await)
        .await?;
    show(
        "3. a proactive digest whose data source is down",
        &channel.sent(),
        &log.take(),
    );

    println!(
        "The cause is in the operator's log exactly once per failure, and never in what a person saw."
    );
    Ok(())
}
