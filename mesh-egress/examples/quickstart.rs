//! The README's front door: two surfaces (loopback fakes), one streamed handler, a durable promise.
use mesh_egress::model::Router;
use mesh_egress::store::Store;
use mesh_egress::testing::{FakeApi, ScriptedConnector, Step};
use mesh_egress::{Address, AnswerStream, Attribution, Bot, EgressError, Turn, egress_boundary};
use std::{sync::Arc, time::Duration};

type Model = Arc<Router<ScriptedConnector>>;
#[egress_boundary(interactive)]
async fn answer(turn: &Turn, model: &Model, question: String) -> Result<AnswerStream, EgressError> {
    Ok(model.answer_stream(turn, question))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (alice, bob) = (Address::slack("C0ALICE"), Address::discord("2234567890"));
    let slack = FakeApi::serving(&alice).await?;
    let discord = FakeApi::serving(&bob).await?;
    let db = std::env::temp_dir().join(format!("quickstart-{}.db", std::process::id()));
    let url = format!("sqlite:{}", db.display());
    let start = async |script: Step| -> Result<_, Box<dyn std::error::Error>> {
        let connector = ScriptedConnector::new().otherwise(Step::status(503));
        let connector = connector.on("m", [script]); // then the model is down
        let model: Model = Arc::new(Router::new(connector, "m", Default::default()));
        let bot = Bot::new().with_follow_up(Duration::ZERO, 2);
        let bot = bot.with_clients([slack.client(), discord.client()]);
        let bot = bot.with_store(Store::open(&url).await?); // the one value, built once
        let ask = bot.route("answer", move |turn: Turn, question: String| {
            let model = Arc::clone(&model);
            async move { answer(&turn, &model, question).await }
        });
        Ok((bot, ask))
    };
    // Alice is answered as the model streams; Bob asks while it is down, and is held.
    let (bot, ask) = start(Step::chunks(["The build ", "is **green**."])).await?;
    for (to, who) in [(alice, "alice"), (bob, "bob")] {
        let turn = bot.turn(to, Attribution::new("ops-bot", who, "run-1"));
        let delivery = bot.run(&turn, &ask, format!("{who}: status?")).await?;
        println!("{who}: {:?}", delivery.outcome()); // alice: Answered, bob: Holding
    }
    // The restart: a new process opens the same file; its worker re-runs the route for Bob.
    let (bot, _) = start(Step::chunks(["Deployed ", "at 09:12."])).await?;
    let worker = bot.worker("worker-2").ok_or("the bot has no store")?;
    worker.run_once(&Default::default()).await?;
    let sent = [slack.texts(), discord.texts()].concat();
    assert!(!sent.iter().any(|text| text.contains("503"))); // never a cause
    println!("sent: {sent:#?}");
    Ok(())
}
