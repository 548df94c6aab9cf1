use mesh_egress::{egress_boundary, AgentMessage, Attribution, Egress, EgressError, Reply, Turn};

#[egress_boundary(interactive)]
fn classify(turn: &Turn, ok: bool) -> Egress {
    if ok {
        Egress::Message(AgentMessage::new("fine", turn.attribution().clone()))
    } else {
        Egress::Error(EgressError::transport("boom", turn.attribution().clone()).with_retryable(false))
    }
}

fn main() {
    let turn = Turn::new(Attribution::new("a", "c", "r"));
    assert!(classify(&turn, true).is_answer());
    assert!(matches!(classify(&turn, false), Reply::Handoff { .. }));
}
