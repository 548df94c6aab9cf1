use mesh_egress::channel::{Deliver, Recorder};
use mesh_egress::Egress;

async fn forward(channel: &Recorder, egress: Egress) {
    let _ = channel.deliver(egress).await;
}

fn main() {}
