use mesh_egress::channel::Deliverable;

struct RawText(String);

impl Deliverable for RawText {}

fn main() {}
