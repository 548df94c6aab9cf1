use mesh_egress::block::{Block, Unchecked};
use mesh_egress::AgentMessage;

fn skip_the_gate(block: Block<Unchecked>) -> AgentMessage {
    block.into_message()
}

fn main() {}
