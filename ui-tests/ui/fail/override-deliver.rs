use std::future::Future;

use mesh_egress::channel::{
    Channel, Deliver, Deliverable, Delivering, PartReceipt, PlainText, SendError,
};
use mesh_egress::CommittedPart;

struct Chat {
    renderer: PlainText,
}

impl Channel for Chat {
    type Renderer = PlainText;
    fn renderer(&self) -> &PlainText {
        &self.renderer
    }
    fn send(&self, part: CommittedPart) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
        async move { Ok(PartReceipt::new(part.idempotency_key())) }
    }
}

// A channel cannot replace the render -> commit -> send path with its own.
impl Deliver for Chat {
    fn deliver<M: Deliverable>(&self, _message: M) -> Delivering<'_> {
        unreachable!()
    }
}

fn main() {}
