use mesh_egress::{egress_boundary, EgressError, Turn};

#[egress_boundary(interactive)]
async fn answer(_turn: &Turn) -> Result<String, EgressError> {
    Ok("hi".to_owned())
}

fn main() {}
