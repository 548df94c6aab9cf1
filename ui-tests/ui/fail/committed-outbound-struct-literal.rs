#![allow(unreachable_code)]

use mesh_egress::state::Committed;
use mesh_egress::Outbound;

// Skipping the commit boundary by writing the committed value directly.
fn forge() -> Outbound<Committed> {
    Outbound { data: loop {}, _state: std::marker::PhantomData }
}

fn main() {}
