use mesh_egress::{egress_boundary, AgentMessage, Attribution, EgressError, Turn};

type Answer = Result<AgentMessage, EgressError>;

#[egress_boundary(interactive)]
async fn answer(turn: &Turn) -> Answer {
    Ok(AgentMessage::new("aliased", turn.attribution().clone()))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let turn = Turn::new(Attribution::new("a", "c", "r"));
    assert!(answer(&turn).await.is_answer());
}
