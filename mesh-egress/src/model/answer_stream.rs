//! [`Router::answer_stream`]: the routed stream as an owned [`AnswerStream`], so a handler can
//! return it.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::ModelConnector;
use super::router::Router;
use super::wire::ChatRequest;
use crate::answer::{AnswerStream, Driven, Pull, Pulled};
use crate::turn::Turn;

impl<C: ModelConnector + 'static> Router<C> {
    /// [`stream`](Self::stream) as an [`AnswerStream`]: the same recovery (invisible before the
    /// first delivered word, a continuation or Layer C after it), owning what it needs (the
    /// shared router, a clone of the turn, the request), so an `#[egress_boundary]` handler can
    /// return it. The routed stream runs inside the answer stream, polled only when the front
    /// door reads it: no task is spawned, and dropping the answer stream cancels the request.
    ///
    /// ```
    /// # #[cfg(feature = "testing")] {
    /// use std::sync::Arc;
    /// use mesh_egress::model::{RetryConfig, Router};
    /// use mesh_egress::testing::{ScriptedConnector, Step};
    /// use mesh_egress::{egress_boundary, AnswerStream, Attribution, EgressError, Turn};
    ///
    /// #[egress_boundary(interactive)]
    /// async fn answer(turn: &Turn, model: &Arc<Router<ScriptedConnector>>) -> Result<AnswerStream, EgressError> {
    ///     Ok(model.answer_stream(turn, "Is the build green?"))
    /// }
    ///
    /// let connector = ScriptedConnector::new().on("primary", [Step::chunks(["All ", "green."])]);
    /// let model = Arc::new(Router::new(connector, "primary", RetryConfig::default()));
    /// let turn = Turn::new(Attribution::new("ci-bot", "conv-1", "run-1"));
    /// let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// let streamed = runtime.block_on(answer(&turn, &model));
    /// assert!(streamed.is_stream());
    /// # }
    /// ```
    pub fn answer_stream(
        self: &Arc<Self>,
        turn: &Turn,
        request: impl Into<ChatRequest>,
    ) -> AnswerStream {
        let (pulls_tx, mut pulls) = mpsc::unbounded_channel();
        let (items, items_rx) = mpsc::unbounded_channel();
        let router = Arc::clone(self);
        let owned = turn.clone();
        let request = request.into();
        let driver = Box::pin(async move {
            let mut stream = router.stream(&owned, &request);
            while let Some(pull) = pulls.recv().await {
                let (delivered, next) = match pull {
                    Pull::Next { delivered } => (delivered, true),
                    Pull::Close { delivered } => (delivered, false),
                };
                if !delivered.is_empty() {
                    stream.mark_delivered(&delivered);
                }
                if !next {
                    break;
                }
                let item = stream.next().await;
                let restarted = stream.restarted();
                if items.send(Pulled { item, restarted }).is_err() {
                    break;
                }
            }
            // `stream` is dropped here, after the last delivered text was reported: its ledger
            // row counts it.
        });
        AnswerStream::driven(
            turn.attribution().clone(),
            Driven::new(driver, pulls_tx, items_rx),
        )
    }
}
