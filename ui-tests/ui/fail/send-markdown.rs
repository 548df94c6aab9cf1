use mesh_egress::channel::{Channel, Recorder};
use mesh_egress::Markdown;

async fn send_raw(channel: &Recorder) {
    let _ = channel.send(Markdown::new("**hi**")).await;
}

fn main() {}
