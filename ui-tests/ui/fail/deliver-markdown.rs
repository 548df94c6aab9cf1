use mesh_egress::channel::{Deliver, Recorder};
use mesh_egress::Markdown;

async fn send_raw(channel: &Recorder) {
    let _ = channel.deliver(Markdown::new("**done**")).await;
}

fn main() {}
