use mesh_egress::block::Checked;

fn forge() -> Checked {
    Checked { _sealed: () }
}

fn main() {}
