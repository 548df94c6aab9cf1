use mesh_egress::{egress_boundary, AgentMessage, EgressError, Turn};

#[egress_boundary(interactive)]
async fn answer(turn: &Turn) -> Result<AgentMessage, EgressError> {
    let order = std::fs::read_to_string("order.txt")?;
    Ok(turn.message(order))
}

fn main() {}
