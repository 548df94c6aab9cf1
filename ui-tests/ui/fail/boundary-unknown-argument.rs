use mesh_egress::{egress_boundary, AgentMessage, EgressError, Turn};

#[egress_boundary(interactive, retries = 3)]
async fn answer(turn: &Turn) -> Result<AgentMessage, EgressError> {
    Ok(AgentMessage::new("hi", turn.attribution().clone()))
}

fn main() {}
