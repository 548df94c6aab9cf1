use mesh_egress::channel::{Deliver, DeliveryError, Recorder};
use mesh_egress::{egress_boundary, AgentMessage, Attribution, CommitError, EgressError, Turn};

struct Bot {
    greeting: String,
}

impl Bot {
    #[egress_boundary(interactive)]
    async fn answer(&self, name: &str, turn: &Turn) -> Result<AgentMessage, EgressError> {
        Ok(turn.message(format!("{} {name}", self.greeting)))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let bot = Bot { greeting: "hello".into() };
    let turn = Turn::new(Attribution::new("a", "c", "r"));
    let reply = bot.answer("Ada", &turn).await;
    // The reply belongs to the turn: once the conversation is no longer owned, nothing is sent.
    turn.ownership().revoke();
    let err = Recorder::new().deliver(reply).await.unwrap_err();
    assert!(matches!(err, DeliveryError::Commit(CommitError::OwnershipLost)));
}
