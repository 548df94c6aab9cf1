use mesh_egress::block::{Block, Checked};
use mesh_egress::Attribution;

fn forge(attribution: Attribution) -> Block<Checked> {
    Block { text: "unchecked".to_owned(), attribution, ownership: None, index: 0, _state: std::marker::PhantomData }
}

fn main() {}
