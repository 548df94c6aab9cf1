use std::fmt::Display;

use mesh_egress::{egress_boundary, AgentMessage, Attribution, EgressError, EgressResultExt, Reply, Turn};

#[egress_boundary(interactive)]
async fn echo<T: Display + Send>(turn: &Turn, value: T) -> Result<AgentMessage, EgressError> {
    let parsed: u32 = value.to_string().parse().egress(turn)?;
    Ok(AgentMessage::new(format!("{}", parsed + 1), turn.attribution().clone()))
}

#[egress_boundary(proactive)]
fn sync_generic<S>(turn: &Turn, source: S) -> Result<AgentMessage, EgressError>
where
    S: AsRef<str>,
{
    Ok(AgentMessage::new(source.as_ref().to_owned(), turn.attribution().clone()))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let turn = Turn::new(Attribution::new("a", "c", "r"));
    assert!(matches!(echo(&turn, 41).await, Reply::Answer(m) if m.body().as_str() == "42"));
    assert!(matches!(echo(&turn, "x").await, Reply::Holding { .. }));
    assert!(sync_generic(&turn, "digest").is_answer());
}
