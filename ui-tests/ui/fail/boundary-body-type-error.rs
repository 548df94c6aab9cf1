use mesh_egress::{egress_boundary, AgentMessage, EgressError, Turn};

#[egress_boundary(interactive)]
async fn answer(turn: &Turn) -> Result<AgentMessage, EgressError> {
    let message = turn.message("Your order shipped today.");
    message
}

fn main() {}
