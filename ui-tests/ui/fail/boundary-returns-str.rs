use mesh_egress::{egress_boundary, Turn};

#[egress_boundary(interactive)]
fn answer(_turn: &Turn) -> &'static str {
    "hi"
}

fn main() {}
