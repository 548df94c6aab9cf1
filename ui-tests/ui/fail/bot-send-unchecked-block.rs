use mesh_egress::block::Block;
use mesh_egress::{Bot, Turn};

// A block that never passed the gate's block check.
async fn skip_the_gate(bot: &Bot, turn: &Turn, text: String) {
    let block = Block::new(text, turn.attribution().clone(), 0);
    let _ = bot.send(turn, block).await;
}

fn main() {}
