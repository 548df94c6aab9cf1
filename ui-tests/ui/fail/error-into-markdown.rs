use mesh_egress::{EgressError, Markdown};

fn leak(err: EgressError) -> Markdown {
    err.into()
}

fn main() {}
