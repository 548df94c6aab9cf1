// The turn is found by its type, whatever the parameter is called or how it is spelled.
use mesh_egress::{egress_boundary, AgentMessage, Attribution, EgressError, Reply, Turn};

#[egress_boundary(interactive)]
async fn unused(_turn: &Turn) -> Result<AgentMessage, EgressError> {
    Err(EgressError::transport("down", Attribution::new("a", "c", "r")))
}

#[egress_boundary(interactive)]
fn unnamed(_: &Turn) -> Result<AgentMessage, EgressError> {
    Err(EgressError::transport("down", Attribution::new("a", "c", "r")))
}

#[egress_boundary(interactive)]
fn full_path<'a>(request: &str, ctx: &'a mesh_egress::Turn) -> Result<AgentMessage, EgressError> {
    Err(EgressError::transport(request.to_owned(), ctx.attribution().clone()))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let turn = Turn::new(Attribution::new("a", "c", "r"));
    assert!(matches!(unused(&turn).await, Reply::Holding { .. }));
    assert!(matches!(unnamed(&turn), Reply::Holding { .. }));
    assert!(matches!(full_path("down", &turn), Reply::Holding { .. }));
    // Each call recorded its promise on the turn's ledger.
    assert_eq!(turn.ledger().commitments().len(), 3);
}
