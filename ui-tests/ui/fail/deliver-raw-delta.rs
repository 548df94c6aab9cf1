use mesh_egress::channel::{Deliver, Recorder};
use mesh_egress::model::RoutedStream;

async fn forward(channel: &Recorder, stream: &mut RoutedStream<'_>) {
    while let Some(Ok(delta)) = stream.next().await {
        let _ = channel.deliver(delta).await;
    }
}

fn main() {}
