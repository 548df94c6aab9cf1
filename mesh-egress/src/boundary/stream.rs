//! `stream`: a streamed turn through the whole boundary, block by block. Crate-private: the
//! front door ([`Bot::send`](crate::Bot::send), [`Bot::send_to`](crate::Bot::send_to),
//! [`Bot::run`](crate::Bot::run), [`Bot::run_to`](crate::Bot::run_to)) is the one way in, and
//! its builder sets what a `StreamPlan` holds ([`Bot::with_gate`](crate::Bot::with_gate),
//! [`Bot::with_cutter`](crate::Bot::with_cutter), [`Bot::with_idle_flush`](crate::Bot::with_idle_flush),
//! [`Bot::with_promise_keeper`](crate::Bot::with_promise_keeper)).
//!
//! routed stream → block reader (minimum size, idle flush) → the gate's block check → render →
//! commit → send, each block a message of its own on the typed path
//! (`Block<Unchecked> → Block<Checked> → Outbound<Unrendered → Rendered → Committed>`).
//!
//! What a failure does depends on what already reached the person (issue 13):
//! - **nothing yet**: exactly what a turn that is not streamed does. Layer A has already retried
//!   and fallen back invisibly; an error that reaches here goes through [`resolve_in`] and its
//!   reply (a holding line, a handoff, silence) is delivered for the whole turn.
//! - **some blocks**: nothing is repeated and nothing after the failure is sent. Interactive: a
//!   holding line for the rest, with a promise whose follow-up delivers only what
//!   follows the delivered prefix. Proactive: the turn stops there (Layer C's silence; the job
//!   retries next cycle).
//!
//! A block the gate blocks is such a failure: it and everything after it are never sent.
//!
//! The policy's silence tokens are cut from the text deltas before they are cut into blocks
//! (a token split across deltas included); a stream that was only a token ends
//! [`StreamEnd::Silent`], with nothing sent.
//! Cancellation and a lost ownership stop the turn at once, with nothing more sent.
//!
//! [`stream_live`] is the same turn onto a [`StreamingChannel`]: the checked blocks' parts go
//! into one [`ReplyStream`], which shows them as one growing message where the surface can
//! (Slack's native streams, Telegram drafts, Discord edits; see [`crate::channel::stream`]).
//! What the surface confirmed is on [`StreamedTurnReceipt::surface`]; parts it did not confirm are
//! sent again as messages of their own, from the confirmed offset, before Layer C's line,
//! except the [uncertain](crate::channel::stream::SurfaceStreamError::uncertain) ones (a call that got
//! no answer where a repeat could show them twice): those are not sent again.

use std::sync::Arc;
use std::time::Duration;

use super::deliver::{deliver, unrenderable};
use super::promise::{PromiseKeeper, Rerun, ToKeep};
use super::resolve_in;
use super::stream_silence::Unsilenced;
use crate::block::{Block, Checked, Unchecked};
use crate::channel::stream::{ReplyStream, SurfaceStreamReceipt};
use crate::channel::{
    Channel, DeliveryError, Receipt, RenderError, deliver_rendered, send_committed_parts,
};
use crate::degrade::{DegradationPolicy, Mode};
use crate::egress::EgressError;
#[cfg(feature = "gate")]
use crate::gate::{GateInput, QualityGate};
use crate::ledger::{LedgerRecord, RenderRecord};
use crate::outbound::{CommitError, Outbound};
use crate::reply::{Commitment, Reply};
use crate::stream::{BlockCutter, BlockReader, CutterConfig, TextSource};
use crate::turn::{StopReason, Turn};

/// The idle flush unless configured: a stream quiet for this long shows what it has (cut at a
/// safe word boundary), so a slow model still shows progress. Half a second is about where a
/// pause in typing starts to read as a stall.
pub(crate) const DEFAULT_IDLE_FLUSH: Duration = Duration::from_millis(500);

/// How a streamed answer is cut into blocks: the sizes, and how long a quiet stream waits
/// before it shows what it has ([`Bot::with_cutter`](crate::Bot::with_cutter),
/// [`Bot::with_idle_flush`](crate::Bot::with_idle_flush)).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Blocks {
    pub(crate) cutter: CutterConfig,
    pub(crate) idle_flush: Option<Duration>,
}

impl Default for Blocks {
    /// [`CutterConfig`]'s own sizes and an idle flush of [`DEFAULT_IDLE_FLUSH`].
    fn default() -> Self {
        Self {
            cutter: CutterConfig::default(),
            idle_flush: Some(DEFAULT_IDLE_FLUSH),
        }
    }
}

/// How a streamed turn is delivered: its mode and Layer C policy, the gate and what it is told,
/// the [`Blocks`]. The [`Bot`](crate::Bot) makes one per streamed turn from what it was built
/// with.
#[derive(Clone, Debug)]
pub(crate) struct StreamPlan<'a> {
    mode: Mode,
    policy: &'a DegradationPolicy,
    #[cfg(feature = "gate")]
    gate: QualityGate,
    #[cfg(feature = "gate")]
    input: GateInput<'a>,
    blocks: Blocks,
    keeper: Option<Keeper>,
    /// The route a kept promise re-runs (the front door's).
    rerun: Option<Rerun>,
}

/// A [`StreamPlan`]'s keeper of a holding line's promise.
#[derive(Clone)]
struct Keeper(Arc<dyn PromiseKeeper>);

impl std::fmt::Debug for Keeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PromiseKeeper")
    }
}

impl<'a> StreamPlan<'a> {
    /// A plan with the gate off and the default [`Blocks`].
    pub(crate) fn new(mode: Mode, policy: &'a DegradationPolicy) -> Self {
        Self {
            mode,
            policy,
            #[cfg(feature = "gate")]
            gate: QualityGate::off(),
            #[cfg(feature = "gate")]
            input: GateInput::default(),
            blocks: Blocks::default(),
            keeper: None,
            rerun: None,
        }
    }

    /// Checks every block with `gate` (a gate that is off passes blocks unchanged), telling it
    /// the user's message (and canaries) the answer is for.
    #[cfg(feature = "gate")]
    pub(crate) fn with_gate(mut self, gate: &QualityGate, input: impl Into<GateInput<'a>>) -> Self {
        self.gate = gate.clone();
        self.input = input.into();
        self
    }

    /// The block check: the gate's (feature `gate`), read with what was delivered.
    #[cfg(feature = "gate")]
    async fn check(
        &self,
        turn: &Turn,
        delivered: &str,
        block: Block<Unchecked>,
    ) -> Result<Block<Checked>, EgressError> {
        if !self.gate.is_on() {
            refuse_markup(&block)?;
        }
        self.gate
            .check_block(turn, self.input, delivered, block)
            .await
    }

    /// Without the gate, a block passes unchanged unless it holds a text tool call
    /// ([`refuse_markup`]; the silence tokens are cut in the source the blocks are cut from).
    #[cfg(not(feature = "gate"))]
    async fn check(
        &self,
        _turn: &Turn,
        _delivered: &str,
        block: Block<Unchecked>,
    ) -> Result<Block<Checked>, EgressError> {
        refuse_markup(&block)?;
        Ok(block.passed())
    }

    /// How blocks are cut, and the idle flush (`None`: blocks end only at safe boundaries).
    pub(crate) fn with_blocks(mut self, blocks: Blocks) -> Self {
        self.blocks = blocks;
        self
    }

    /// Keeps a holding line's promise with `keeper` before the line is sent (see
    /// [`PromiseKeeper`]); without one, the promise comes back in the receipt
    /// ([`StreamedTurnReceipt::take_rest`]) once the line went.
    pub(crate) fn with_promise_keeper(mut self, keeper: Arc<dyn PromiseKeeper>) -> Self {
        self.keeper = Some(Keeper(keeper));
        self
    }

    /// The route a kept promise names, so its keeper can re-run the same handler.
    pub(crate) fn with_rerun(mut self, rerun: Rerun) -> Self {
        self.rerun = Some(rerun);
        self
    }
}

/// The holds that need no gate: a block holding a text tool call written with one of Layer A's
/// markers (outside code: `<tool_call>{…}`, `[TOOL_CALLS][…]`) ends the stream as a failure
/// Layer C answers for, the model having stopped answering to call a tool. With the gate on,
/// the gate's own tool-markup rule decides (it reads the person's message too).
fn refuse_markup(block: &Block<Unchecked>) -> Result<(), EgressError> {
    use crate::model::{ModelError, TextToolCallError, TextToolFormat};
    match crate::model::text_tool_format(block.text()) {
        // A whole block that is one JSON value or call list is left to the head check, which
        // knows the request; mid-stream it is data far more often than a call.
        None | Some(TextToolFormat::BareJson | TextToolFormat::PythonicList) => Ok(()),
        Some(format) => Err(EgressError::semantic(
            ModelError::malformed_tool_call()
                .with_source(TextToolCallError::NoToolsOffered { format }),
            block.attribution().clone(),
        )),
    }
}

/// How a streamed turn ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StreamEnd {
    /// The whole answer was delivered.
    Answered,
    /// Layer C answered for what was not delivered (the whole turn when nothing was): a
    /// holding line (its promise in [`StreamedTurnReceipt::take_rest`] unless a keeper took
    /// it), a handoff, or silence.
    Degraded,
    /// The turn was cancelled or lost its ownership: nothing more was sent.
    Stopped(StopReason),
    /// The agent answered with one of its silence tokens
    /// ([`DegradationPolicy::with_silence_tokens`]): nothing was sent, by its choice.
    Silent,
}

/// What a streamed turn delivered: one receipt per block, the Markdown that reached the person,
/// how it ended, Layer C's delivery if it had one, and the promise to keep if it made one.
#[derive(Debug)]
#[must_use = "a streamed turn that went to Layer C may carry a promise: take it with `take_rest`"]
pub(crate) struct StreamedTurnReceipt {
    blocks: Vec<Receipt>,
    delivered: String,
    end: StreamEnd,
    layer_c: Option<Receipt>,
    rest: Option<Commitment>,
    surface: Option<SurfaceStreamReceipt>,
}

impl StreamedTurnReceipt {
    /// The answer's Markdown that reached the person (the checked blocks, in order).
    pub(crate) fn delivered(&self) -> &str {
        &self.delivered
    }

    /// How the turn ended.
    pub(crate) fn end(&self) -> StreamEnd {
        self.end
    }

    /// The delivery of Layer C's line, if one was sent.
    pub(crate) fn layer_c(&self) -> Option<&Receipt> {
        self.layer_c.as_ref()
    }

    /// The promise a holding line made (also when a [`PromiseKeeper`] already kept it: the
    /// caller reads it as the holding outcome): its follow-up owes only what follows
    /// [`delivered`](Self::delivered) (see [`rest_after`](super::rest_after)).
    pub(crate) fn take_rest(&mut self) -> Option<Commitment> {
        self.rest.take()
    }

    /// Every message's receipt (the blocks sent as messages, then Layer C's line), and what
    /// the surface's stream confirmed: for [`stream_live`], each message's text and id and the
    /// calls it made; `None` for [`stream`].
    pub(crate) fn take_parts(&mut self) -> (Vec<Receipt>, Option<SurfaceStreamReceipt>) {
        let mut receipts = std::mem::take(&mut self.blocks);
        receipts.extend(self.layer_c.take());
        (receipts, self.surface.take())
    }
}

/// The internal cause of the [`EgressError`] of a stream that ended without a single visible
/// block (empty, or only reasoning). Crate-private: the only stream error a caller names is the
/// surface's, [`channel::stream::SurfaceStreamError`](crate::channel::stream::SurfaceStreamError).
#[derive(Debug, thiserror::Error)]
#[error("the streamed answer had nothing to show")]
struct NothingToShow;

/// How the block loop ended.
enum Exit {
    /// The source ended after at least one block.
    Answered,
    /// Cancellation or a lost ownership.
    Stopped(StreamEnd),
    /// A failure Layer C answers for.
    Failed(EgressError),
    /// The answer was only a silence token.
    Silent,
}

/// Runs a streamed turn end to end: reads `source` block by block and delivers each block that
/// passes the block check, then hands any failure to Layer C as the module docs say. `source` is
/// usually an [`AnswerStream`](crate::AnswerStream) (the [`Bot`](crate::Bot)'s); a
/// `store::Durable` channel commits each block through the outbox like any other message.
///
/// Without `live`, each block is a message of its own on `channel`. With `live` (a
/// [`StreamingChannel`](crate::channel::stream::StreamingChannel)'s [`ReplyStream`]), the
/// checked blocks go into it (one growing message where the surface can), and Layer C's line
/// goes after the surface's stream has ended. What the surface confirmed is
/// [`StreamedTurnReceipt`]'s; parts it did not confirm (its stream failed for good) are sent
/// again as messages of their own, in order, except uncertain ones, which may be shown already.
/// When a durable outbox's store fails mid-stream nothing more goes from here and the turn ends
/// with the store's [`CommitError::Store`](crate::CommitError::Store): the parts not shown are `pending` in the outbox for a worker.
///
/// Returns the [`StreamedTurnReceipt`], or the [`DeliveryError`] of a block or line the channel
/// could not take (nothing is sent after it).
pub(crate) async fn stream<C, S>(
    turn: &Turn,
    plan: &StreamPlan<'_>,
    channel: &C,
    source: S,
    mut live: Option<ReplyStream>,
) -> Result<StreamedTurnReceipt, DeliveryError>
where
    C: Channel + ?Sized,
    S: TextSource<Error = EgressError>,
{
    let source = Unsilenced::new(source, plan.policy.silence_tokens());
    let reader = BlockReader::new(
        source,
        BlockCutter::new(plan.blocks.cutter),
        plan.blocks.idle_flush,
    );
    // A block is never shown ending in a marker that may still open a tool call: its end
    // waits for what decides it, whatever cut the block.
    #[cfg(feature = "model")]
    let reader = reader
        .with_hold(|text| crate::model::tool_text::undecided_from(text, crate::stream::MAX_HELD));
    let mut reader = reader;
    let mut out = StreamedTurnReceipt {
        blocks: Vec::new(),
        delivered: String::new(),
        end: StreamEnd::Answered,
        layer_c: None,
        rest: None,
        surface: None,
    };
    let mut index = 0usize;
    let exit = loop {
        let next = tokio::select! {
            biased;
            reason = turn.stopped() => {
                if let Some(stop) = stop_for(reason) {
                    break Exit::Stopped(stop);
                }
                // The deadline: the source reports it as its own failure next.
                reader.next_block().await
            }
            next = reader.next_block() => next,
        };
        let text = match next {
            // Only a silence token: the agent chose to say nothing.
            None if out.delivered.is_empty() && reader.source_mut().silence_token().is_some() => {
                break Exit::Silent;
            }
            None if out.delivered.is_empty() => {
                break Exit::Failed(EgressError::semantic(
                    NothingToShow,
                    turn.attribution().clone(),
                ));
            }
            None => break Exit::Answered,
            Some(Err(error)) => break Exit::Failed(error),
            Some(Ok(text)) => text,
        };
        let block = Block::new(text.as_str(), turn.attribution().clone(), index)
            .with_ownership(turn.ownership().clone());
        index += 1;
        let checked = match plan.check(turn, &out.delivered, block).await {
            Ok(checked) => checked,
            Err(blocked) => break Exit::Failed(blocked),
        };
        if checked.is_blank() {
            continue;
        }
        let shown = checked.text().to_owned();
        let attribution = checked.attribution().clone();
        let rendered = match Outbound::new(checked.into_message()).render(channel.renderer()) {
            Ok(rendered) => rendered,
            // A block with nothing visible (a lone `>`, stray whitespace): nothing to send.
            Err(RenderError::Empty) => continue,
            Err(error) => {
                turn.ledger().record(
                    &attribution,
                    LedgerRecord::Render(RenderRecord::Failed {
                        error: error.clone(),
                    }),
                );
                break Exit::Failed(unrenderable(error, attribution));
            }
        };
        if let Some(cut) = rendered.cut() {
            turn.ledger().record(
                &attribution,
                LedgerRecord::Render(RenderRecord::Shortened { cut }),
            );
        }
        let sent = match live.as_mut() {
            None => deliver_rendered(channel, rendered, None).await.map(Some),
            Some(session) => rendered
                .commit(channel)
                .await
                .map_err(DeliveryError::from)
                .map(|committed| {
                    committed.into_parts().for_each(|part| session.append(part));
                    None
                }),
        };
        match sent {
            Ok(receipt) => {
                if let Some(receipt) = &receipt {
                    record_receipt(turn, channel, receipt);
                }
                out.blocks.extend(receipt);
            }
            Err(error) if error.is_ownership_lost() => {
                break Exit::Stopped(StreamEnd::Stopped(StopReason::OwnershipLost));
            }
            Err(error) => {
                finish_live(turn, channel, live.take(), &mut out).await?;
                return Err(error);
            }
        }
        out.delivered.push_str(&shown);
        reader.source_mut().mark_delivered(&text);
    };
    // The surface's stream ends before anything else goes out (Layer C's line is a message of
    // its own, after the streamed one).
    if finish_live(turn, channel, live, &mut out).await? {
        out.end = StreamEnd::Stopped(StopReason::OwnershipLost);
        return Ok(out);
    }
    let silent = matches!(exit, Exit::Silent);
    reader
        .source_mut()
        .record(turn.ledger(), turn.attribution(), silent);
    let failure = match exit {
        Exit::Answered => return Ok(out),
        Exit::Silent => {
            out.end = StreamEnd::Silent;
            return Ok(out);
        }
        Exit::Stopped(end) => {
            out.end = end;
            return Ok(out);
        }
        Exit::Failed(failure) => failure,
    };
    // The source is dropped before Layer C's line goes out, so its ledger row (what was
    // delivered, where and why it failed) is written first.
    drop(reader);
    if let Some(stop) = turn.stop_reason().and_then(stop_for) {
        out.end = stop;
        return Ok(out);
    }
    let reply = resolve_in(turn, plan.mode, plan.policy, Err(failure));
    out.end = StreamEnd::Degraded;
    if matches!(reply, Reply::Silence) {
        return Ok(out);
    }
    if let (Reply::Holding { commitment, .. }, Some(Keeper(keeper)), Some(rerun)) =
        (&reply, &plan.keeper, &plan.rerun)
    {
        // Kept before the line goes: a crash after it leaves a promise a worker keeps.
        let address = channel.address();
        let promise = ToKeep {
            commitment,
            address: &address,
            mode: plan.mode,
            delivered: &out.delivered,
            rerun,
            input: turn.input(),
            ledger: turn.ledger(),
        };
        keeper
            .keep(promise)
            .await
            .map_err(|error| DeliveryError::Commit(CommitError::Store(error)))?;
    }
    let mut receipt = deliver(turn, plan.mode, plan.policy, channel, reply).await?;
    if let Some(commitment) = receipt.take_commitment() {
        out.rest = Some(commitment);
    }
    out.layer_c = Some(receipt);
    Ok(out)
}

/// Ends the surface's stream, if there is one, and records what it confirmed; what it did not
/// confirm is sent as messages of their own, in order. `true` when the ownership was lost
/// meanwhile (nothing more may be sent).
async fn finish_live<C: Channel + ?Sized>(
    turn: &Turn,
    channel: &C,
    live: Option<ReplyStream>,
    out: &mut StreamedTurnReceipt,
) -> Result<bool, DeliveryError> {
    let Some(session) = live else {
        return Ok(false);
    };
    let finished = session.finish().await;
    let confirmed = match &finished {
        Ok(receipt) => receipt,
        Err(error) => error.receipt(),
    };
    // Messages the surface refused the formatting of went as plain text: on the ledger.
    let surface = channel.address().surface();
    for message in confirmed
        .messages()
        .iter()
        .filter(|m| m.is_plain_text_fallback())
    {
        turn.ledger()
            .sent_as_plain_text(turn.attribution(), surface, message.id(), None, None);
    }
    match finished {
        Ok(receipt) => {
            out.surface = Some(receipt);
            Ok(false)
        }
        // The outbox's store failed: not a lost ownership. Nothing more goes from here (the
        // store cannot record it); what was not shown is `pending` again, and a worker sends
        // it once the store answers. The turn ends with the store's error.
        Err(error) if error.is_store_failure() => {
            out.surface = Some(error.receipt().clone());
            tracing::error!(
                target: "mesh_egress::boundary",
                unconfirmed = error.unconfirmed().len(),
                "the durable outbox failed mid-stream; the rest is left to a worker"
            );
            Err(DeliveryError::Commit(CommitError::Store(Box::new(error))))
        }
        // The outbox refused the next call: the conversation is someone else's now, so
        // nothing more goes.
        Err(error) if error.is_refused() => {
            out.surface = Some(error.receipt().clone());
            Ok(true)
        }
        Err(error) => {
            out.surface = Some(error.receipt().clone());
            // Parts whose call got no answer may be on the surface: never sent again here (at
            // most once; a durable outbox has them `uncertain`).
            tracing::warn!(
                target: "mesh_egress::boundary",
                uncertain = error.uncertain().len(),
                unconfirmed = error.unconfirmed().len(),
                "the surface's stream failed; sending the unconfirmed rest as messages"
            );
            match send_committed_parts(channel, error.into_unconfirmed()).await {
                Ok(receipts) => {
                    for receipt in &receipts {
                        record_receipt(turn, channel, receipt);
                    }
                    out.blocks.extend(receipts);
                    Ok(false)
                }
                Err(error) if error.is_ownership_lost() => Ok(true),
                Err(error) => Err(error),
            }
        }
    }
}

/// Puts the parts of `receipt` that went as plain text on the turn's ledger.
fn record_receipt<C: Channel + ?Sized>(turn: &Turn, channel: &C, receipt: &Receipt) {
    super::deliver::record_plain_text(
        turn.ledger(),
        turn.attribution(),
        channel.address().surface(),
        receipt.delivery_id(),
        receipt.parts(),
    );
}

/// What stopping for `reason` ends the turn as: cancellation and a lost ownership stop it; a
/// passed deadline is a failure like any other (Layer C answers for it).
fn stop_for(reason: StopReason) -> Option<StreamEnd> {
    match reason {
        StopReason::Cancelled | StopReason::OwnershipLost => Some(StreamEnd::Stopped(reason)),
        StopReason::DeadlineReached => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::answer::AnswerStream;
    use crate::channel::Recorder;
    use crate::egress::Attribution;
    use crate::future::BoxFuture;

    const B1: &str = "The build finished and every test passed.\n\n";
    const B2: &str = "Deploying to staging now, it takes a minute.\n\n";

    /// A keeper that notes how many messages had gone out and what had been delivered when
    /// it was asked, and fails when told to.
    struct Noting {
        channel: Recorder,
        fail: bool,
        seen: Mutex<Vec<(usize, String)>>,
    }

    impl PromiseKeeper for Noting {
        fn keep<'a>(
            &'a self,
            promise: ToKeep<'a>,
        ) -> BoxFuture<'a, Result<(), Box<dyn std::error::Error + Send + Sync>>> {
            let sent = self.channel.sent().len();
            self.seen
                .lock()
                .unwrap()
                .push((sent, promise.delivered.to_owned()));
            let fail = self.fail;
            Box::pin(async move {
                if fail {
                    Err("the store is down".into())
                } else {
                    Ok(())
                }
            })
        }
    }

    /// The keeper is asked once, after the blocks that were shown and before the holding line,
    /// with what was shown; a keeper that fails means no line (a promise nobody holds is not
    /// made) and the turn ends with a commit error.
    #[tokio::test]
    async fn the_keeper_is_asked_before_the_line_and_a_failed_keep_sends_no_line() {
        for fail in [false, true] {
            let channel = Recorder::new();
            let keeper = Arc::new(Noting {
                channel: channel.clone(),
                fail,
                seen: Mutex::new(Vec::new()),
            });
            let policy = DegradationPolicy::default().with_follow_up(Duration::from_secs(1), 2);
            let plan = StreamPlan::new(Mode::Interactive, &policy)
                .with_promise_keeper(keeper.clone())
                .with_rerun(Rerun {
                    route: "answer".into(),
                    input: serde_json::Value::Null,
                });
            let turn = Turn::new(Attribution::new("bot", "c1", "r1"));
            let failure =
                EgressError::transport("CAUSE-7f3 upstream 500", turn.attribution().clone());
            let source = AnswerStream::from_chunks(
                &turn,
                [Ok(B1.to_owned()), Ok(B2.to_owned()), Err(failure)],
            );
            let result = stream(&turn, &plan, &channel, source, None).await;
            // The blocks may go as one message or two (the cutter joins what is ready at
            // once); what counts is that the keeper saw all of them shown and no line yet.
            let seen = keeper.seen.lock().unwrap().clone();
            assert_eq!(seen.len(), 1, "asked once: {seen:?} (fail: {fail})");
            let (shown_before, delivered) = &seen[0];
            assert_eq!(delivered, &[B1, B2].concat(), "fail: {fail}");
            assert!(*shown_before >= 1, "asked after the blocks were shown");
            if fail {
                assert!(
                    matches!(result, Err(DeliveryError::Commit(_))),
                    "{result:?}"
                );
                assert_eq!(
                    channel.sent().len(),
                    *shown_before,
                    "no line for a promise nobody holds"
                );
            } else {
                let mut receipt = result.expect("delivered");
                assert_eq!(receipt.end(), StreamEnd::Degraded);
                assert_eq!(
                    channel.sent().len(),
                    shown_before + 1,
                    "the blocks, then the line"
                );
                // Kept by the keeper and still handed back: the Bot reads it as a holding line
                // and reports whose promise it is.
                assert!(receipt.take_rest().is_some(), "the holding line's promise");
            }
        }
    }
}
