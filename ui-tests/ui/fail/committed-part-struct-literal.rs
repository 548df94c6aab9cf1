use mesh_egress::CommittedPart;

fn forge() -> CommittedPart {
    CommittedPart { text: "LLM request failed".to_owned() }
}

fn main() {}
