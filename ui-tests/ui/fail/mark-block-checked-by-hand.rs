use mesh_egress::block::{Block, Checked, Unchecked};

fn skip_the_gate(block: Block<Unchecked>) -> Block<Checked> {
    let text = block.text().to_owned();
    block.into_checked(text)
}

fn main() {}
