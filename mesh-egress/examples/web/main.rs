//! A web chat on the whole boundary: the page uses the AI SDK's `useChat`, the server speaks its
//! UI message stream (v1), and no failure the provider throws at it reaches the browser.
//!
//! ```text
//! cargo run -p mesh-egress --example web -- [--port N] [--store URL]
//! ```
//!
//! Serves on 127.0.0.1 (port 3000 by default; `0` picks a free one) the chat page at `/`,
//! `POST /api/chat`, `GET /api/chat/{id}/stream` and `GET /api/chat/{id}/messages`, and prints
//! `listening on http://127.0.0.1:N` on stdout once ready (logs go to stderr as JSON lines).
//! `--store` is `sqlite:PATH` or `postgres://…` (default: an SQLite file in the OS temp dir).
//!
//! Without `MESH_MODEL_BASE_URL` the agent runs against the built-in scripted fake provider
//! (no key, no network), and the page's fault picker chooses what the provider does to each
//! message: nothing, a 503 burst, a stall mid-stream (the fallback route continues), a total
//! outage (a holding line now; the promise is kept a few seconds later by the worker this
//! process runs), or an internal error echoed in the model's text (the gate blocks it). With
//! `MESH_MODEL_BASE_URL` (and `MESH_MODEL`, `MESH_MODEL_API_KEY`, every `MESH_MODEL_RETRY_*`
//! variable of `turn`) it talks to that endpoint instead, and the picker changes nothing.
//!
//! Who is asking: a signed HttpOnly `SameSite=Lax` cookie set on the first response, keyed by
//! `MESH_WEB_COOKIE_KEY` (at least 32 bytes; random per process, with one warning, when
//! unset). A request without one gets a new identity, which owns only the chats it creates.
//! `MESH_FOLLOW_UP_DELAY_MS` / `MESH_FOLLOW_UP_ATTEMPTS` shape the promise (default here: 2.5
//! seconds, 3 tries). Exit 2 with one `error:` line for a usage error, 1 when the store or the
//! port cannot be opened.

#[path = "../support/cli.rs"]
mod cli;

mod agent;
mod identity;
mod page;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use std::sync::Arc;

use axum::routing::get;
use mesh_egress::degrade::FollowUp;
use mesh_egress::gate::QualityGate;

use mesh_egress::web::{ChatInput, WebChat};
use mesh_egress::{Bot, Cancellation, Turn};

use agent::{Model, Options, Scripted, answer};
use cli::{holder_name, init_logs, model_from_env, open_store, usage_error, value};

const USAGE: &str = "usage: web [--port N] [--store URL]";
/// The promise's first delay with the scripted provider, unless `MESH_FOLLOW_UP_DELAY_MS`.
const DEMO_FOLLOW_UP: Duration = Duration::from_millis(2_500);
/// How often the in-process worker looks for due promises.
const WORKER_POLL: Duration = Duration::from_millis(200);
/// How long a shutdown waits for open streams.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The parsed command line.
struct Args {
    port: u16,
    store: String,
}

enum Parsed {
    Run(Args),
    Help,
}

fn parse(argv: &[String]) -> Result<Parsed, String> {
    let (mut port, mut store) = (3000u16, None);
    let mut rest = argv.iter();
    while let Some(arg) = rest.next() {
        if arg == "-h" || arg == "--help" {
            return Ok(Parsed::Help);
        }
        if !arg.starts_with("--") {
            return Err(format!("unexpected argument {arg:?}"));
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, v)) => (flag, Some(v)),
            None => (arg.as_str(), None),
        };
        match flag {
            "--port" => {
                let raw = value(flag, inline, &mut rest)?;
                port = raw
                    .parse()
                    .map_err(|_| format!("--port {raw:?} is not a port (0-65535)"))?;
            }
            "--store" => store = Some(value(flag, inline, &mut rest)?.to_owned()),
            _ => return Err(format!("unknown flag {arg}")),
        }
    }
    let store = store.unwrap_or_else(|| {
        let path = std::env::temp_dir().join("mesh-egress-web.sqlite");
        format!("sqlite:{}", path.display())
    });
    Ok(Parsed::Run(Args { port, store }))
}

/// The model: the endpoint `MESH_MODEL_BASE_URL` names, or the scripted fake provider.
fn model() -> Result<Model, String> {
    if std::env::var("MESH_MODEL_BASE_URL").is_ok_and(|v| !v.trim().is_empty()) {
        Ok(Model::Real(Arc::new(model_from_env()?.router())))
    } else {
        Ok(Model::Scripted(Scripted::default()))
    }
}

/// The promise a holding line makes: the follow-up from `MESH_FOLLOW_UP_*`, or a demo-sized
/// one (its first delay, its tries).
fn follow_up() -> (Duration, u32) {
    let (follow_up, _warnings) = FollowUp::from_env();
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
    let first_delay = if set("MESH_FOLLOW_UP_DELAY_MS") {
        follow_up.first_delay
    } else {
        DEMO_FOLLOW_UP
    };
    (first_delay, follow_up.attempts)
}

/// Cancels `shutdown` on SIGTERM or SIGINT.
fn on_signals(shutdown: Cancellation) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        shutdown.cancel();
    });
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = match parse(&argv) {
        Ok(Parsed::Run(args)) => args,
        Ok(Parsed::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => return usage_error(&message),
    };
    let model = match model() {
        Ok(model) => model,
        Err(message) => return usage_error(&message),
    };
    init_logs();
    let key = match identity::key_from_env() {
        Ok(key) => key,
        Err(message) => return usage_error(&message),
    };
    let store = match open_store(Some(&args.store)).await {
        Ok(Some(store)) => store,
        Ok(None) => return usage_error("missing --store URL"),
        Err(code) => return code,
    };
    // The gate's heuristics (no judge): failure text in the model's answer never streams.
    let gate = match QualityGate::builder().build() {
        Ok(gate) => gate,
        Err(error) => {
            eprintln!("error: the quality gate could not be built: {error}");
            return ExitCode::FAILURE;
        }
    };
    // The one value, built once: Layer C's policy, the gate, the store (and so the durable
    // promise keeper); the web chat serves its route and is the client it delivers with.
    let (first_delay, attempts) = follow_up();
    let bot = Bot::new()
        .with_follow_up(first_delay, attempts)
        .with_gate(gate)
        .with_store(store.clone());
    let model = Arc::new(model);
    let ask = bot.route(
        "release-assistant",
        move |turn: Turn, input: ChatInput<Options>| {
            let model = Arc::clone(&model);
            async move { answer(&turn, &model, input).await }
        },
    );
    let Some(chat) = WebChat::from_bot(bot, ask) else {
        eprintln!("error: the web chat needs the bot's store");
        return ExitCode::FAILURE;
    };

    let shutdown = Cancellation::new();
    if let Err(error) = on_signals(shutdown.clone()) {
        tracing::error!(target: "mesh_egress::web", error = %error, "signal handlers could not be installed");
        eprintln!("error: signal handlers could not be installed");
        return ExitCode::FAILURE;
    }
    // The worker that keeps this chat's promises, in this process.
    let worker = chat
        .worker(holder_name("web-worker"))
        .with_poll_interval(WORKER_POLL);
    let worker_shutdown = shutdown.clone();
    let worker = tokio::spawn(async move { worker.run(&worker_shutdown).await });

    let app = axum::Router::new()
        .route("/", get(page::index))
        .route("/app.js", get(page::app_js))
        .route("/favicon.ico", get(page::favicon))
        .route("/third-party-notices.txt", get(page::notices))
        .merge(chat.router::<identity::Visitor>())
        .layer(axum::middleware::from_fn_with_state(
            key,
            identity::identify,
        ));

    let listener = match tokio::net::TcpListener::bind(SocketAddr::from((
        [127, 0, 0, 1],
        args.port,
    )))
    .await
    {
        Ok(listener) => listener,
        Err(error) => {
            tracing::error!(target: "mesh_egress::web", error = %error, port = args.port, "the port could not be opened");
            eprintln!("error: port {} could not be opened", args.port);
            return ExitCode::FAILURE;
        }
    };
    let port = listener.local_addr().map_or(args.port, |a| a.port());
    println!("listening on http://127.0.0.1:{port}");
    let stopping = shutdown.clone();
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async move { stopping.cancelled().await });
    let result = tokio::select! {
        result = served => result,
        () = async {
            shutdown.cancelled().await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } => Ok(()),
    };
    shutdown.cancel();
    let _ = worker.await;
    store.close().await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(target: "mesh_egress::web", error = %error, "the server stopped");
            eprintln!("error: the server stopped");
            ExitCode::FAILURE
        }
    }
}
