use mesh_egress::channel::{Channel, PlainText, Recorder};
use mesh_egress::{AgentMessage, Attribution, Outbound};

async fn send_twice(channel: &Recorder) {
    let msg = AgentMessage::new("hi", Attribution::new("a", "c", "r"));
    let committed = Outbound::new(msg)
        .render(&PlainText::new())
        .unwrap()
        .commit(channel)
        .await
        .unwrap();
    for part in committed.into_parts() {
        let _ = channel.send(part).await;
        let _ = channel.send(part).await;
    }
}

fn main() {}
