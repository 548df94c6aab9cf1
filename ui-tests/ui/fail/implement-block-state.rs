use mesh_egress::block::BlockState;

struct Sneaky;

impl BlockState for Sneaky {}

fn main() {}
