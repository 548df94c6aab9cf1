use mesh_egress::{egress_boundary, AgentMessage, Turn};

#[egress_boundary(interactive)]
async fn answer(turn: &Turn) -> Result<AgentMessage, std::io::Error> {
    Ok(AgentMessage::new("hi", turn.attribution().clone()))
}

fn main() {}
