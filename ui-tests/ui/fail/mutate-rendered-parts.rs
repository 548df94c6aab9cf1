use mesh_egress::channel::PlainText;
use mesh_egress::{AgentMessage, Attribution, Outbound};

fn tamper() {
    let msg = AgentMessage::new("hi", Attribution::new("a", "c", "r"));
    let rendered = Outbound::new(msg).render(&PlainText::new()).unwrap();
    rendered.parts()[0].push_str(" LLM request failed");
}

fn main() {}
