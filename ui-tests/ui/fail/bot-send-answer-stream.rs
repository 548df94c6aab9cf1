use mesh_egress::{AnswerStream, Bot, Turn};

// A stream made by hand and sent without going through an `#[egress_boundary]` handler.
async fn bypass(bot: &Bot, turn: &Turn) {
    let stream = AnswerStream::from_chunks(turn, [Ok("The build is green.".to_owned())]);
    let _ = bot.send(turn, stream).await;
}

fn main() {}
