use mesh_egress::{egress_boundary, AgentMessage, EgressError, Turn};

#[egress_boundary(interactive)]
async fn answer(turn: &Turn) -> Result<AgentMessage, EgressError> {
    Ok(AgentMessage::new("hi", turn.attribution().clone()))
}

async fn caller(turn: &Turn) {
    let err = answer(turn).await.unwrap_err();
}

fn main() {}
