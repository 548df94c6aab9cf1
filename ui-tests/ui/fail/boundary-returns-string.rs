use mesh_egress::{egress_boundary, Turn};

#[egress_boundary(interactive)]
async fn answer(_turn: &Turn) -> String {
    "hi".to_owned()
}

fn main() {}
