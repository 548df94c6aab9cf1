use mesh_egress::channel::{Channel, PlainText, Recorder};
use mesh_egress::{AgentMessage, Attribution, Outbound, Ownership};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let channel = Recorder::new();
    let msg = AgentMessage::new("one two three", Attribution::new("a", "c", "r"));
    let rendered = Outbound::new(msg).render(&PlainText::new().with_limit(8)).unwrap();
    let committed = rendered.commit(&Ownership::held()).await.unwrap();
    for part in committed.into_parts() {
        channel.send(part).await.unwrap();
    }
    assert_eq!(channel.sent().concat().replace(' ', ""), "onetwothree");
}
