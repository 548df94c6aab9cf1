use mesh_egress::channel::{Deliver, Recorder};
use mesh_egress::degrade::{DegradationPolicy, Mode};
use mesh_egress::boundary::resolve;
use mesh_egress::{AgentMessage, Attribution, EgressError};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let attr = Attribution::new("a", "c", "r");
    let channel = Recorder::new();
    channel.deliver(AgentMessage::new("direct", attr.clone())).await.unwrap();
    let reply = resolve(
        Mode::Proactive,
        &DegradationPolicy::default(),
        Err(EgressError::transport("down", attr)),
    );
    let receipt = channel.deliver(reply).await.unwrap();
    assert!(receipt.is_empty());
    assert_eq!(channel.sent(), ["direct"]);
}
