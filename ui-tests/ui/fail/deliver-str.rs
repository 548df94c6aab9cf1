use mesh_egress::channel::{Deliver, Recorder};

async fn send_raw(channel: &Recorder) {
    let _ = channel.deliver("something went wrong").await;
}

fn main() {}
