//! Keeps the promises `turn --store` made and sends what the outbox still holds.
//!
//! ```text
//! cargo run -q -p mesh-egress --example worker -- --store URL [--once] \
//!     [--channel plain|slack|discord|telegram] [--deliver slack|discord|telegram] [--json]
//! ```
//!
//! `--store` is `sqlite:PATH` or `postgres://…` (default `MESH_STORE_URL`). The worker serves
//! every conversation of one surface: `--deliver slack|discord|telegram` through that
//! surface's client, which needs only the bot token and API base (`SLACK_BOT_TOKEN` +
//! `MESH_SLACK_API_URL`, `DISCORD_BOT_TOKEN` + `MESH_DISCORD_API_URL`, `TELEGRAM_BOT_TOKEN` +
//! `MESH_TELEGRAM_API_URL`): each conversation's destination is the one stored with its parts
//! and promises, so `MESH_SLACK_CHANNEL`, `MESH_DISCORD_CHANNEL` and `MESH_TELEGRAM_CHAT` are
//! ignored if set. Without `--deliver` it serves the conversations `turn` printed to stdout
//! (stored with the plain address), printing them in `--channel`'s format; parts and promises
//! stored for a chat surface are left for a worker with that surface's client (one `warn`).
//!
//! Each pass sends the outbox parts still open, each to its own conversation's destination,
//! then claims due commitments and keeps them: the front door's route `turn` registered
//! re-asks the model the stored prompt (with the stored system prompt; its typed input is
//! stored with the promise) with the same `MESH_MODEL_*` settings as `turn`, the gate runs
//! again from the stored settings, and the follow-up goes through the outbox, to the
//! commitment's stored destination, with the commitment ended in the same transaction.
//! Promises an older `turn --store` stored (under its handler's name, input `{"prompt": ..}`)
//! are kept the same way. Stdout shows each delivered part exactly as `turn` prints it (`--json`:
//! `{"part": N, "text": "..."}`, plus `"id"` under `--deliver`); stderr carries JSON logs.
//! Parts and promises stored before addresses were (migration 0004) are not sent to a guessed
//! destination: they are ended and reported (see the `store` module docs).
//!
//! `--once` exits 0 when nothing is pending or due for the surface it serves (commitments due
//! later do not keep it running; one whose claim expired does). Without it the worker runs until SIGTERM
//! or SIGINT; either signal makes it finish what it committed, give back the claim it holds
//! untried and release its lease, then exit 0. `MESH_WORKER_LEASE_MS` (default 30000) is how long
//! a claim or a conversation lease lasts without renewal; `MESH_FOLLOW_UP_DELAY_MS` /
//! `MESH_FOLLOW_UP_ATTEMPTS` shape the policy as in `turn` (a stored promise keeps the plan it
//! was made with). Exit 2 with one `error:` line for a usage error, 1 when the store fails.

#[path = "support/cli.rs"]
mod cli;
#[path = "support/turn_bot.rs"]
mod turn_bot;

use std::process::ExitCode;
use std::sync::Arc;

use cli::{
    Delivery, LEGACY_HANDLER, Surface, channel_flag, chosen_surface, deliver_flag, holder_name,
    init_logs, legacy_route, model_from_env, open_store, store_url, usage_error, value,
};
use mesh_egress::channel::{Stdout, SurfaceClient};
use mesh_egress::degrade::{DegradationPolicy, FollowUp};

use mesh_egress::store::Lease;
use mesh_egress::{Bot, Cancellation};

const USAGE: &str = "usage: worker --store URL [--once] \
                     [--channel plain|slack|discord|telegram] \
                     [--deliver slack|discord|telegram] [--json]";

/// The parsed command line.
#[derive(Debug)]
struct Args {
    store: Option<String>,
    once: bool,
    surface: Surface,
    deliver: Option<Surface>,
    json: bool,
}

/// What the command line asked for.
enum Parsed {
    Run(Args),
    Help,
}

fn parse(argv: &[String]) -> Result<Parsed, String> {
    let (mut store, mut channel, mut deliver) = (None, None, None);
    let (mut once, mut json) = (false, false);
    let mut rest = argv.iter();
    while let Some(arg) = rest.next() {
        if arg == "-h" || arg == "--help" {
            return Ok(Parsed::Help);
        }
        if !arg.starts_with("--") {
            return Err(format!(
                "unexpected argument {arg:?} (worker takes no PROMPT)"
            ));
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, v)) => (flag, Some(v)),
            None => (arg.as_str(), None),
        };
        match flag {
            "--store" => store = Some(value(flag, inline, &mut rest)?.to_owned()),
            "--channel" => channel = Some(channel_flag(value(flag, inline, &mut rest)?)?),
            "--deliver" => deliver = Some(deliver_flag(value(flag, inline, &mut rest)?)?),
            "--once" if inline.is_none() => once = true,
            "--json" if inline.is_none() => json = true,
            _ => return Err(format!("unknown flag {arg}")),
        }
    }
    let surface = chosen_surface(channel, deliver)?;
    Ok(Parsed::Run(Args {
        store,
        once,
        surface,
        deliver,
        json,
    }))
}

/// Cancels `shutdown` on SIGTERM or SIGINT.
fn on_signals(shutdown: Cancellation) -> Result<(), std::io::Error> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        tracing::info!(target: "mesh_egress::store", "shutdown requested: finishing what is committed, giving back the rest");
        shutdown.cancel();
    });
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
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
    let Some(url) = store_url(args.store.clone()) else {
        return usage_error("missing --store URL (or MESH_STORE_URL)");
    };
    let models = match model_from_env() {
        Ok(found) => found,
        Err(message) => return usage_error(&message),
    };
    let delivery = match args.deliver.map(Delivery::from_env).transpose() {
        Ok(delivery) => delivery,
        Err(message) => return usage_error(&message),
    };
    init_logs();
    let store = match open_store(Some(&url)).await {
        Ok(Some(store)) => store,
        Ok(None) => return usage_error("missing --store URL (or MESH_STORE_URL)"),
        Err(code) => return code,
    };

    let (follow_up, _warnings) = FollowUp::from_env();
    let policy =
        DegradationPolicy::default().with_follow_up(follow_up.first_delay, follow_up.attempts);
    let (ttl, _warnings) = Lease::ttl_from_env();
    let router = Arc::new(models.router());
    let ledger = match store.durable_ledger() {
        Ok(ledger) => ledger,
        Err(error) => {
            tracing::error!(target: "mesh_egress::store", error = %error, "the store's ledger could not be opened");
            eprintln!("error: the store's ledger could not be opened");
            return ExitCode::FAILURE;
        }
    };
    // The front door, built once: the store, the policy and the one surface client, and the
    // route `turn --store` stores its promises for, with the same typed input; the worker is
    // built from it and re-runs that route, its answer checked by the gate the promise's turn
    // ran (rebuilt from the stored settings). Promises an older `turn --store` stored under
    // its handler's name are kept too, the gate re-run from the stored settings.
    let client: Arc<dyn SurfaceClient> = match delivery {
        // Every conversation of the surface, each to its stored destination.
        Some(delivery) => Arc::new(delivery.printing_client(args.json)),
        // Stdout's one destination, in `--channel`'s format.
        None => Arc::new(Stdout::with_renderer(args.surface.renderer()).json(args.json)),
    };
    let bot = Bot::new()
        .with_store(store.clone())
        .with_policy(policy)
        .with_clients([client])
        // Parts the outbox cannot settle, and how each promise ended, are kept on the store's
        // ledger for operators; it is flushed before the worker exits.
        .with_ledger(mesh_egress::ledger::Ledger::new(ledger.clone()));
    let model = turn_bot::Model {
        router: Arc::clone(&router),
    };
    let _route = bot.route(turn_bot::ROUTE, turn_bot::checked(model, models.clone()));
    // Promises an older `turn --store` stored under its own handler name are kept too.
    let _legacy = bot.route(LEGACY_HANDLER, legacy_route(router, models));
    let Some(worker) = bot.worker(holder_name("worker")) else {
        return usage_error("missing --store URL (or MESH_STORE_URL)");
    };
    let worker = worker.with_lease_ttl(ttl);

    let shutdown = Cancellation::new();
    if let Err(error) = on_signals(shutdown.clone()) {
        tracing::error!(target: "mesh_egress::store", error = %error, "signal handlers could not be installed");
        eprintln!("error: signal handlers could not be installed");
        return ExitCode::FAILURE;
    }
    let result = if args.once {
        worker.run_once(&shutdown).await
    } else {
        worker.run(&shutdown).await
    };
    // The ledger's rows are written in the background: wait for them before closing.
    if let Err(error) = ledger.flush().await {
        tracing::error!(target: "mesh_egress::store", error = %error, "ledger rows not written");
    }
    store.close().await;
    match result {
        Ok(report) => {
            tracing::info!(target: "mesh_egress::store", report = ?report, holder = worker.holder(), "worker stopped");
            ExitCode::SUCCESS
        }
        Err(error) => {
            tracing::error!(target: "mesh_egress::store", error = %error, "worker stopped on a store error");
            eprintln!("error: the store failed");
            ExitCode::FAILURE
        }
    }
}
