use mesh_egress::model::RoutedStream;
use mesh_egress::{Bot, Turn};

// A model delta forwarded to the front door as it came.
async fn forward(bot: &Bot, turn: &Turn, stream: &mut RoutedStream<'_>) {
    while let Some(Ok(delta)) = stream.next().await {
        let _ = bot.send(turn, delta).await;
    }
}

fn main() {}
