//! `turn --stream` to stdout: the surface's format a stream prints through (the front door,
//! `turn_bot`, streams onto it block by block; with `--store`, through the durable outbox).

use std::future::Future;

use mesh_egress::CommittedPart;
use mesh_egress::channel::{Channel, PartReceipt, Render, SendError};

/// A surface's format with nothing behind it: what `--stream` prints to stdout through (the
/// printing [`Tee`](crate::cli::Tee) around it does the printing).
#[derive(Clone)]
pub(crate) struct Rendering(pub(crate) std::sync::Arc<dyn Render>);

impl Channel for Rendering {
    type Renderer = std::sync::Arc<dyn Render>;

    fn renderer(&self) -> &std::sync::Arc<dyn Render> {
        &self.0
    }

    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
        std::future::ready(Ok(PartReceipt::new(part.idempotency_key())))
    }
}
