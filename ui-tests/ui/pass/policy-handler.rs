use std::sync::Arc;

use mesh_egress::degrade::DegradationPolicy;
use mesh_egress::{egress_boundary, AgentMessage, Attribution, EgressError, Reply, Turn};

fn team_policy() -> DegradationPolicy {
    DegradationPolicy::default().with_holding_lines(["One moment, checking."])
}

#[egress_boundary(interactive, policy = team_policy())]
async fn by_value(turn: &Turn) -> Result<AgentMessage, EgressError> {
    Err(EgressError::transport("down", turn.attribution().clone()))
}

#[egress_boundary(interactive, policy = policy)]
async fn by_arc(policy: Arc<DegradationPolicy>, turn: &Turn) -> Result<AgentMessage, EgressError> {
    Err(EgressError::transport("down", turn.attribution().clone()))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let turn = Turn::new(Attribution::new("a", "c", "r"));
    match by_value(&turn).await {
        Reply::Holding { message, commitment } => {
            assert_eq!(message.body().as_str(), "One moment, checking.");
            let _ = commitment;
        }
        other => panic!("{other:?}"),
    }
    let shared = Arc::new(DegradationPolicy::default().always_hand_off(true));
    assert!(matches!(by_arc(shared, &turn).await, Reply::Handoff { .. }));
}
