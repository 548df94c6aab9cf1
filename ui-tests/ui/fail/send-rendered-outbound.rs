use mesh_egress::channel::{Channel, PlainText, Recorder};
use mesh_egress::{AgentMessage, Attribution, Outbound};

async fn skip_commit(channel: &Recorder) {
    let msg = AgentMessage::new("hi", Attribution::new("a", "c", "r"));
    let rendered = Outbound::new(msg).render(&PlainText::new()).unwrap();
    let _ = channel.send(rendered).await;
}

fn main() {}
