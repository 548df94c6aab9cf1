//! `turn --stream --store`: what the streamed turn through the durable outbox needs from the
//! command line (without a store, `--stream` goes through the front door, `turn_bot`), and the
//! stdout format a stream prints through.

use std::future::Future;

use mesh_egress::boundary::StreamPlan;
use mesh_egress::channel::{Channel, PartReceipt, Render, SendError};
use mesh_egress::degrade::Mode;
use mesh_egress::model::{ChatRequest, OpenAiCompatible, Router};
use mesh_egress::{CommittedPart, Turn};

use crate::cli::Surface;

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

/// What the streamed turn needs from the command line.
pub(crate) struct Streamed<'a> {
    pub(crate) turn: &'a Turn,
    pub(crate) mode: Mode,
    pub(crate) plan: &'a StreamPlan<'a>,
    pub(crate) router: &'a Router<OpenAiCompatible>,
    pub(crate) request: &'a ChatRequest,
    pub(crate) target: Surface,
    pub(crate) follow_up: bool,
}
