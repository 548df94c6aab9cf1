use mesh_egress::channel::{Deliver, Recorder};
use mesh_egress::{egress_boundary, AgentMessage, Attribution, EgressError, Reply, Turn};

#[egress_boundary(interactive)]
async fn answer(turn: &Turn, ok: bool) -> Result<AgentMessage, EgressError> {
    if !ok {
        return Err(EgressError::transport("upstream 503", turn.attribution().clone()));
    }
    Ok(AgentMessage::new("hi", turn.attribution().clone()))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let turn = Turn::new(Attribution::new("a", "c", "r"));
    let channel = Recorder::new();
    let reply: Reply = answer(&turn, true).await;
    assert!(reply.is_answer());
    channel.deliver(reply).await.unwrap();
    let mut receipt = channel.deliver(answer(&turn, false).await).await.unwrap();
    let commitment = receipt.take_commitment().expect("holding line carries a promise");
    assert_eq!(commitment.attribution().conversation(), "c");
    assert_eq!(channel.sent().len(), 2);
}
