use mesh_egress::block::Block;
use mesh_egress::channel::{Deliver, Recorder};
use mesh_egress::Turn;

async fn skip_the_gate(channel: &Recorder, turn: &Turn, text: String) {
    let block = Block::new(text, turn.attribution().clone(), 0);
    let _ = channel.deliver(block).await;
}

fn main() {}
