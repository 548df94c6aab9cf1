use mesh_egress::channel::{Deliver, Recorder};

async fn send_raw(channel: &Recorder, text: String) {
    let _ = channel.deliver(text).await;
}

fn main() {}
