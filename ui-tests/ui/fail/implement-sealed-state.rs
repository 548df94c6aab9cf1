use mesh_egress::state::State;

struct Sneaky;

impl State for Sneaky {}

fn main() {}
