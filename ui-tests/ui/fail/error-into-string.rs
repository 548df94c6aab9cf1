use mesh_egress::EgressError;

fn leak(err: EgressError) -> String {
    err.into()
}

fn main() {}
