use mesh_egress::channel::{Channel, Recorder};
use mesh_egress::{AgentMessage, Attribution, Outbound};

async fn skip_render(channel: &Recorder) {
    let msg = AgentMessage::new("**hi**", Attribution::new("a", "c", "r"));
    let _ = channel.send(Outbound::new(msg)).await;
}

fn main() {}
