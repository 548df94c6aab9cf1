use mesh_egress::channel::{Deliver, Recorder};
use mesh_egress::{Attribution, EgressError};

async fn on_failure(channel: &Recorder) {
    let err = EgressError::transport("LLM request failed", Attribution::new("a", "c", "r"));
    let _ = channel.deliver(err).await;
}

fn main() {}
