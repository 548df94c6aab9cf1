use mesh_egress::{AgentMessage, EgressError};

fn leak(err: EgressError) -> AgentMessage {
    err.into()
}

fn main() {}
