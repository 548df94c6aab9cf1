// `crate = <path>` names the runtime through a re-export, as `#[serde(crate = "...")]` does.
mod reexports {
    pub use ::mesh_egress;
}

use mesh_egress::{egress_boundary, AgentMessage, Attribution, EgressError, Reply, Turn};

#[egress_boundary(interactive, crate = reexports::mesh_egress)]
async fn answer(turn: &Turn) -> Result<AgentMessage, EgressError> {
    Ok(turn.message("hi"))
}

// tokio's spelling, a string literal, is accepted too.
#[egress_boundary(proactive, crate = "crate::reexports::mesh_egress")]
fn digest(turn: &Turn) -> Result<AgentMessage, EgressError> {
    Err(EgressError::transport("down", turn.attribution().clone()))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let turn = Turn::new(Attribution::new("a", "c", "r"));
    assert!(matches!(answer(&turn).await, Reply::Answer(_)));
    assert!(matches!(digest(&turn), Reply::Silence));
}
