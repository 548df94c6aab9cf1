use mesh_egress::{egress_boundary, AgentMessage, EgressError, Turn};

#[egress_boundary(interactive)]
async fn answer(turn: &Turn) -> Result<AgentMessage, EgressError> {
    Ok(AgentMessage::new("hi", turn.attribution().clone()))
}

async fn caller(turn: &Turn) -> Result<AgentMessage, EgressError> {
    let message = answer(turn).await?;
    Ok(message)
}

fn main() {}
