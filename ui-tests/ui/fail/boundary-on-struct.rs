use mesh_egress::egress_boundary;

#[egress_boundary(interactive)]
struct Handler {
    name: String,
}

fn main() {}
