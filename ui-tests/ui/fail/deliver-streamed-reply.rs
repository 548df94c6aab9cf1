use mesh_egress::channel::{Deliver, Recorder};
use mesh_egress::{AnswerStream, EgressError, Turn, egress_boundary};

#[egress_boundary(interactive)]
async fn answer(turn: &Turn) -> Result<AnswerStream, EgressError> {
    Ok(AnswerStream::from_chunks(turn, [Ok("The build is green.".to_owned())]))
}

async fn bypass(turn: &Turn, channel: &Recorder) {
    let _ = channel.deliver(answer(turn).await).await;
}

fn main() {}
