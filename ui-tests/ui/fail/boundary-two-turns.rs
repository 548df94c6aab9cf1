use mesh_egress::{egress_boundary, AgentMessage, EgressError, Turn};

#[egress_boundary(interactive)]
async fn answer(turn: &Turn, parent: &Turn) -> Result<AgentMessage, EgressError> {
    Ok(turn.message(parent.attribution().run().to_owned()))
}

fn main() {}
