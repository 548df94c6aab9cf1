use mesh_egress::bot::Outcome;
use mesh_egress::channel::Recorder;
use mesh_egress::{egress_boundary, AgentMessage, AnswerStream, Attribution, Bot, EgressError, Turn};

#[egress_boundary(interactive)]
async fn whole(turn: &Turn) -> Result<AgentMessage, EgressError> {
    Ok(turn.message("The build is **green**."))
}

#[egress_boundary(interactive)]
async fn streamed(turn: &Turn) -> Result<AnswerStream, EgressError> {
    Ok(AnswerStream::from_chunks(turn, [Ok("Deploying now.".to_owned())]))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let recorder = Recorder::new();
    let bot = Bot::new().with_client(recorder.clone());
    let turn = bot.turn(mesh_egress::Address::Plain, Attribution::new("ci-bot", "conv-1", "run-1"));
    let answered = bot.send(&turn, whole(&turn).await).await.unwrap();
    assert_eq!(answered.outcome(), Outcome::Answered);
    let streamed = bot.send(&turn, streamed(&turn).await).await.unwrap();
    assert_eq!(streamed.delivered(), "Deploying now.");
    assert_eq!(recorder.sent(), ["The build is green.", "Deploying now."]);
}
