use mesh_egress::degrade::DegradationPolicy;
use mesh_egress::{egress_boundary, AgentMessage, Attribution, EgressError, Reply, Turn};

struct Bot {
    policy: DegradationPolicy,
    greeting: String,
}

impl Bot {
    #[egress_boundary(interactive, policy = self.policy)]
    async fn answer(&self, turn: &Turn) -> Result<AgentMessage, EgressError> {
        Ok(AgentMessage::new(self.greeting.clone(), turn.attribution().clone()))
    }

    #[egress_boundary(proactive)]
    fn digest(&self, turn: &Turn) -> Result<AgentMessage, EgressError> {
        Err(EgressError::transport("scheduler down", turn.attribution().clone()))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let bot = Bot { policy: DegradationPolicy::default(), greeting: "hello".into() };
    let turn = Turn::new(Attribution::new("a", "c", "r"));
    assert!(matches!(bot.answer(&turn).await, Reply::Answer(_)));
    assert!(matches!(bot.digest(&turn), Reply::Silence));
}
