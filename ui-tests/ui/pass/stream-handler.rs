//! A handler that streams: callers receive a `StreamedReply`, whatever the return type's
//! spelling (an alias included), with or without a turn.
use mesh_egress::{AnswerStream, Attribution, EgressError, StreamedReply, Turn, egress_boundary};

type Streamed = Result<AnswerStream, EgressError>;

#[egress_boundary(interactive)]
async fn answer(turn: &Turn) -> Result<AnswerStream, EgressError> {
    Ok(AnswerStream::from_chunks(turn, [Ok("The build is green.".to_owned())]))
}

#[egress_boundary(proactive)]
fn digest(turn: &Turn, fail: bool) -> Streamed {
    if fail {
        return Err(EgressError::transport("metrics db down", turn.attribution().clone()));
    }
    Ok(AnswerStream::from_chunks(turn, [Ok("Digest.".to_owned())]))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let turn = Turn::new(Attribution::new("a", "c", "r"));
    let streamed: StreamedReply = answer(&turn).await;
    assert!(streamed.is_stream());
    let failed: StreamedReply = digest(&turn, true);
    assert!(!failed.is_stream(), "Layer C answered for the whole turn");
    assert!(digest(&turn, false).is_stream());
}
