use mesh_egress::{egress_boundary, AgentMessage, EgressError, Turn};

#[egress_boundary(interactive, crate = "mesh-egress")]
async fn answer(turn: &Turn) -> Result<AgentMessage, EgressError> {
    Ok(turn.message("hi"))
}

fn main() {}
