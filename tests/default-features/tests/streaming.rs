//! A streamed answer streams on the default features: no `gate`, no `http`.

use std::time::Duration;

use mesh_egress::channel::Recorder;
use mesh_egress::{Address, AnswerStream, Attribution, Bot, EgressError, Turn, egress_boundary};

const B1: &str = "The build finished on the main branch and every one of the tests passed.\n\n";
const B2: &str = "Deploying to staging now; it takes about a minute, then the checks run.\n\n";
const B3: &str = "Production follows once the checks are green, with the usual canary.";

#[egress_boundary(interactive)]
async fn answer(
    turn: &Turn,
    deltas: tokio::sync::mpsc::Receiver<Result<String, EgressError>>,
) -> Result<AnswerStream, EgressError> {
    Ok(AnswerStream::from_receiver(turn, deltas))
}

#[tokio::test(start_paused = true)]
async fn an_answer_stream_reaches_the_surface_in_several_calls_before_it_ends() {
    let recorder = Recorder::new();
    let bot = Bot::new().with_client(recorder.clone());
    let turn = bot.turn(
        Address::Plain,
        Attribution::new("ops-bot", "conv-1", "run-1"),
    );
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let watcher = recorder.clone();
    let model = tokio::spawn(async move {
        let mut seen_before_the_end = 0;
        for block in [B1, B2, B3] {
            tx.send(Ok(block.to_owned())).await.expect("the bot reads");
            tokio::time::sleep(Duration::from_secs(2)).await;
            seen_before_the_end = watcher.sent().len();
        }
        seen_before_the_end
    });
    let delivery = bot
        .send(&turn, answer(&turn, rx).await)
        .await
        .expect("delivered");
    let seen_before_the_end = model.await.expect("the model task ends");
    assert_eq!(delivery.outcome(), mesh_egress::bot::Outcome::Answered);
    assert!(
        seen_before_the_end >= 2,
        "only {seen_before_the_end} message(s) had reached the surface before the stream ended"
    );
    // Every word, in order (an idle flush may cut a block at a word boundary).
    let words: Vec<String> = recorder
        .sent()
        .iter()
        .flat_map(|text| {
            text.split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    let written: Vec<&str> = [B1, B2, B3]
        .iter()
        .flat_map(|b| b.split_whitespace())
        .collect();
    assert_eq!(words, written);
}
