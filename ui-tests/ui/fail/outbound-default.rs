use mesh_egress::state::Committed;
use mesh_egress::Outbound;

fn forge() -> Outbound<Committed> {
    Outbound::default()
}

fn main() {}
