use mesh_egress::{AgentMessage, Attribution, EgressError};

fn leak(err: EgressError) -> AgentMessage {
    let attribution = Attribution::new("a", "c", "r");
    AgentMessage::new(format!("Sorry: {err}"), attribution)
}

fn main() {}
