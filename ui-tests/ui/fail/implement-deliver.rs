use mesh_egress::channel::{Deliver, Deliverable, Delivering};

struct Bypass;

impl Deliver for Bypass {
    fn deliver<M: Deliverable>(&self, _message: M) -> Delivering<'_> {
        unreachable!()
    }
}

fn main() {}
