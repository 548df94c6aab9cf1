use mesh_egress::{AgentMessage, Attribution, EgressError};

fn leak(err: EgressError) -> AgentMessage {
    let attribution = Attribution::new("a", "c", "r");
    AgentMessage::new(err.to_string(), attribution)
}

fn main() {}
