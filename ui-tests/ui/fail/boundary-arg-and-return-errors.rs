use mesh_egress::{egress_boundary, Turn};

#[egress_boundary(interactive, retries = 3)]
async fn answer(turn: &Turn) -> String {
    turn.attribution().conversation().to_owned()
}

fn main() {}
