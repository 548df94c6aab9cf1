use mesh_egress::CommittedPart;

fn duplicate(part: &CommittedPart) -> CommittedPart {
    part.clone()
}

fn main() {}
