use mesh_egress::{egress_boundary, Turn};

#[egress_boundary(proactive)]
async fn digest(_turn: &Turn) {}

fn main() {}
