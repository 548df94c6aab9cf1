//! [`Bot`]: the front door. One value, built once, holds what every turn needs — Layer C's
//! policy per mode, the optional quality gate (feature `gate`) and store (features
//! `sqlite`/`postgres`), one [`SurfaceClient`] per surface, the routes registered for
//! follow-ups and the promise keeper — so nothing is passed again per call.
//!
//! One path from handler to person, for a whole answer and a streamed one alike:
//!
//! resolve (the `#[egress_boundary]` handler) → gate → render first (an answer that cannot be
//! shown goes to Layer C) → keep the promise of a holding line (before the line goes) → commit
//! (through the store's outbox when the bot has a store) → send or stream (every channel
//! streams; where the surface has no native stream, each block is a message of its own).
//!
//! - [`Bot::turn`]: a [`Turn`] with the bot's policies (and the store's ledger, with a store).
//! - [`Bot::send`]: delivers a [`Reply`] or a [`StreamedReply`] to the turn's address.
//! - [`Bot::route`] / [`Bot::run`]: a handler registered under a name with typed input, so a
//!   promise it makes is kept by re-running **the same handler** ([`Endpoint`]).
//! - [`Bot::worker`]: the durable promise keeper built from the same value.
//!
//! ```
//! use mesh_egress::channel::Recorder;
//! use mesh_egress::{egress_boundary, AgentMessage, Attribution, Bot, EgressError, Turn};
//!
//! #[egress_boundary(interactive)]
//! async fn answer(turn: &Turn, healthy: bool) -> Result<AgentMessage, EgressError> {
//!     if !healthy {
//!         return Err(EgressError::transport("LLM request failed: 503", turn.attribution().clone()));
//!     }
//!     Ok(turn.message("The build is **green**."))
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let recorder = Recorder::new();
//! let bot = Bot::new().with_client(recorder.clone());
//! let turn = bot.turn(mesh_egress::Address::Plain, Attribution::new("ci-bot", "conv-1", "run-1"));
//! bot.send(&turn, answer(&turn, true).await).await?;
//! let held = bot.send(&turn, answer(&turn, false).await).await?;
//! assert!(held.promise().is_some(), "no route: the promise comes back to the caller");
//! assert_eq!(recorder.sent()[0], "The build is green.");
//! assert!(!recorder.sent()[1].contains("503")); // a holding line, never the cause
//! # Ok(()) }
//! ```

#[cfg(all(feature = "gate", feature = "markdown"))]
mod deadline;
mod endpoint;
mod keeper;
#[cfg(all(feature = "gate", feature = "markdown"))]
mod to_channel;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

#[cfg(all(feature = "gate", feature = "markdown"))]
#[cfg(feature = "web")]
pub(crate) use deadline::Deadlined;
pub use endpoint::Endpoint;

use crate::address::{Address, Surface};
use crate::answer::{AnswerStream, Streamed, StreamedReply};
use crate::boundary::{
    Promise, PromiseKeeper, Ready, Rerun, Shown, prepare, record_delivered, resolve_in,
};
use crate::channel::stream::{StreamingChannel, SurfaceStreamReceipt};
use crate::channel::{
    Channel, DeliveryError, Receipt, SurfaceClient, UnservedAddress, deliver_rendered,
};
use crate::degrade::{DegradationPolicy, Policies};
use crate::egress::{AgentMessage, Attribution};
use crate::future::BoxFuture;
use crate::outbound::CommitError;
use crate::reply::{Commitment, Mode, Reply};
use crate::turn::{StopReason, Turn};

/// The front door (see the [module docs](self)): built once with `Bot::new()` and `with_*`,
/// cheap to clone (clones share everything, routes included).
#[derive(Clone)]
pub struct Bot {
    shared: Arc<Shared>,
}

#[derive(Clone)]
struct Shared {
    policies: Policies,
    clients: BTreeMap<Surface, Arc<dyn SurfaceClient>>,
    routes: Arc<RwLock<HashMap<String, Arc<dyn endpoint::Erased>>>>,
    keeper: Option<Arc<dyn PromiseKeeper>>,
    in_memory: Arc<keeper::InFlight>,
    #[cfg(feature = "gate")]
    gate: crate::gate::QualityGate,
    /// How a streamed answer is cut into blocks, and the idle flush.
    #[cfg(all(feature = "gate", feature = "markdown"))]
    blocks: crate::boundary::Blocks,
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    store: Option<crate::store::Store>,
    /// The store's durable ledger, opened on the first turn that needs it (it starts its
    /// writer on the runtime, which `with_store` may not be called on).
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    ledger: Arc<std::sync::OnceLock<crate::ledger::Ledger>>,
}

impl Default for Bot {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Bot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bot")
            .field("surfaces", &self.shared.clients.keys().collect::<Vec<_>>())
            .field("routes", &self.route_names())
            .finish_non_exhaustive()
    }
}

impl Bot {
    /// A bot with the default [`Policies`], no client, the gate off, no store and the in-memory
    /// promise keeper.
    pub fn new() -> Self {
        Self {
            shared: Arc::new(Shared {
                policies: Policies::default(),
                clients: BTreeMap::new(),
                routes: Arc::default(),
                keeper: None,
                in_memory: Arc::default(),
                #[cfg(feature = "gate")]
                gate: crate::gate::QualityGate::off(),
                #[cfg(all(feature = "gate", feature = "markdown"))]
                blocks: crate::boundary::Blocks::default(),
                #[cfg(any(feature = "sqlite", feature = "postgres"))]
                store: None,
                #[cfg(any(feature = "sqlite", feature = "postgres"))]
                ledger: Arc::default(),
            }),
        }
    }

    fn edit(mut self, edit: impl FnOnce(&mut Shared)) -> Self {
        edit(Arc::make_mut(&mut self.shared));
        self
    }

    /// Layer C's policy per mode, for every turn of this bot.
    pub fn with_policies(self, policies: Policies) -> Self {
        self.edit(|shared| shared.policies = policies)
    }

    /// `policy` for both modes (see [`with_policies`](Self::with_policies)).
    pub fn with_policy(self, policy: DegradationPolicy) -> Self {
        self.with_policies(Policies::uniform(policy))
    }

    /// The follow-up a holding line promises, in both modes: the first try `first_delay` after
    /// the line, at most `attempts` tries (see [`DegradationPolicy::with_follow_up`]).
    pub fn with_follow_up(self, first_delay: std::time::Duration, attempts: u32) -> Self {
        let policies = self.shared.policies.clone();
        self.with_policies(policies.map(|policy| policy.with_follow_up(first_delay, attempts)))
    }

    /// Serves `client`'s surface: a turn addressed there is delivered through it. One client
    /// per surface; a second for the same surface replaces the first.
    pub fn with_client(self, client: impl SurfaceClient + 'static) -> Self {
        self.edit(|shared| {
            shared.clients.insert(client.surface(), Arc::new(client));
        })
    }

    /// Serves each of `clients`' surfaces (see [`with_client`](Self::with_client)).
    pub fn with_clients(self, clients: impl IntoIterator<Item = Arc<dyn SurfaceClient>>) -> Self {
        clients
            .into_iter()
            .fold(self, |bot, client| bot.with_client(client))
    }

    /// Keeps holding lines' promises with `keeper` instead of the default (the in-memory keeper
    /// without a store, the store's with one).
    pub fn with_promise_keeper(self, keeper: Arc<dyn PromiseKeeper>) -> Self {
        self.edit(|shared| shared.keeper = Some(keeper))
    }

    /// Checks every answer (and every streamed block) with `gate` before it is rendered.
    #[cfg(feature = "gate")]
    pub fn with_gate(self, gate: crate::gate::QualityGate) -> Self {
        self.edit(|shared| shared.gate = gate)
    }

    /// The block sizes of every streamed answer, in bytes (default: [`CutterConfig`]'s own,
    /// 80 and 4000): a block ends at a safe Markdown boundary (after a blank line, a closing
    /// fence, before a list item) once it holds at least `min_block`, and one that grows past
    /// `max_block` is cut at the best safe point there is.
    ///
    /// [`CutterConfig`]: crate::stream::CutterConfig
    ///
    /// ```
    /// use mesh_egress::channel::Recorder;
    /// use mesh_egress::stream::CutterConfig;
    /// use mesh_egress::{egress_boundary, Address, AnswerStream, Attribution, Bot, EgressError, Turn};
    ///
    /// #[egress_boundary(interactive)]
    /// async fn answer(turn: &Turn) -> Result<AnswerStream, EgressError> {
    ///     let chunks = ["The build ", "is green.\n\n", "Deploying now."];
    ///     Ok(AnswerStream::from_chunks(turn, chunks.map(|c| Ok(c.to_owned()))))
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let recorder = Recorder::new();
    /// let bot = Bot::new()
    ///     .with_client(recorder.clone())
    ///     .with_cutter(CutterConfig { min_block: 1, max_block: 4000 });
    /// let turn = bot.turn(Address::Plain, Attribution::new("ci-bot", "conv-1", "run-1"));
    /// let delivery = bot.send(&turn, answer(&turn).await).await?;
    /// assert_eq!(delivery.outcome(), mesh_egress::bot::Outcome::Answered);
    /// // Each block is a message of its own on a surface without a native stream.
    /// assert_eq!(recorder.sent(), ["The build is green.", "Deploying now."]);
    /// # Ok(()) }
    /// ```
    #[cfg(all(feature = "gate", feature = "markdown"))]
    pub fn with_cutter(self, cutter: crate::stream::CutterConfig) -> Self {
        self.edit(|shared| shared.blocks.cutter = cutter)
    }

    /// How long a streamed answer may be quiet before the bot shows what it has (cut at a safe
    /// word boundary, so a slow model still shows progress); `None` turns the idle flush off,
    /// and blocks then end only at the cutter's boundaries. The default is 500 ms, about where
    /// a pause in typing starts to read as a stall.
    ///
    /// ```
    /// use std::time::Duration;
    /// use mesh_egress::channel::Recorder;
    /// use mesh_egress::{egress_boundary, Address, AnswerStream, Attribution, Bot, EgressError, Turn};
    ///
    /// #[egress_boundary(interactive)]
    /// async fn answer(
    ///     turn: &Turn,
    ///     words: tokio::sync::mpsc::Receiver<Result<String, EgressError>>,
    /// ) -> Result<AnswerStream, EgressError> {
    ///     Ok(AnswerStream::from_receiver(turn, words))
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let recorder = Recorder::new();
    /// let bot = Bot::new()
    ///     .with_client(recorder.clone())
    ///     .with_idle_flush(Some(Duration::from_millis(300)));
    /// let turn = bot.turn(Address::Plain, Attribution::new("ci-bot", "conv-1", "run-1"));
    /// // A slow model: a word a second.
    /// let (tx, rx) = tokio::sync::mpsc::channel(1);
    /// tokio::spawn(async move {
    ///     for word in ["The rollout ", "is slow ", "today."] {
    ///         tokio::time::sleep(Duration::from_secs(1)).await;
    ///         let _ = tx.send(Ok(word.to_owned())).await;
    ///     }
    /// });
    /// let _answered = bot.send(&turn, answer(&turn, rx).await).await?;
    /// // Shown while the model was still writing, not as one message at its end, and no word
    /// // lost at the cuts.
    /// let sent = recorder.sent();
    /// assert!(sent.len() > 1, "{sent:?}");
    /// let words: Vec<&str> = sent.iter().flat_map(|s| s.split_whitespace()).collect();
    /// assert_eq!(words, ["The", "rollout", "is", "slow", "today."]);
    /// # Ok(()) }
    /// ```
    #[cfg(all(feature = "gate", feature = "markdown"))]
    pub fn with_idle_flush(self, idle: Option<std::time::Duration>) -> Self {
        self.edit(|shared| shared.blocks.idle_flush = idle)
    }

    /// Commits every delivery through `store`'s outbox, and keeps promises durably: stored
    /// before their holding line goes, kept by a [`worker`](Self::worker) (after a restart too).
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub fn with_store(self, store: crate::store::Store) -> Self {
        self.edit(|shared| {
            shared.store = Some(store);
            shared.ledger = Arc::default();
        })
    }

    /// The store's durable ledger (one for the bot, opened on first use), or `None` without a
    /// store, or outside a runtime (the turn then records in memory, with a warning).
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    fn store_ledger(&self) -> Option<crate::ledger::Ledger> {
        let store = self.shared.store.as_ref()?;
        if let Some(ledger) = self.shared.ledger.get() {
            return Some(ledger.clone());
        }
        match store.durable_ledger() {
            Ok(durable) => Some(
                self.shared
                    .ledger
                    .get_or_init(|| crate::ledger::Ledger::new(durable))
                    .clone(),
            ),
            Err(error) => {
                tracing::warn!(target: "mesh_egress::bot", error = %error, "the store's ledger could not be opened; this turn records in memory");
                None
            }
        }
    }

    /// Waits until every promise the bot's in-memory keeper holds has ended (its answer or
    /// its last word sent), and says how each ended, in the order they ended: what the person
    /// was finally shown, or the delivery error that left it pending. Each end is reported
    /// once (a second call gives only what ended since). A process that must not exit with a
    /// promise unkept (a command-line turn) awaits this; promises kept by a store's worker are
    /// not counted.
    pub async fn promises_kept(&self) -> Vec<Result<Outcome, DeliveryError>> {
        self.shared.in_memory.settled().await
    }

    /// Layer C's policies.
    pub fn policies(&self) -> &Policies {
        &self.shared.policies
    }

    /// The surfaces the bot has a client for, in a fixed order.
    pub fn surfaces(&self) -> impl Iterator<Item = Surface> + '_ {
        self.shared.clients.keys().copied()
    }

    /// The worker that keeps this bot's durable promises, built from the same value: the
    /// store, the clients, the policies and a handler for every route registered so far (it
    /// re-runs the same route with the stored input, on a follow-up turn). `None` without a
    /// store. Register routes before building it; `holder` names the worker process (unique
    /// per process, see [`Worker::new`](crate::worker::Worker::new)).
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub fn worker(&self, holder: impl Into<String>) -> Option<crate::worker::Worker> {
        let store = self.shared.store.clone()?;
        Some(self.worker_on(store, holder.into()))
    }

    /// The store the bot commits through and keeps its promises in, if it has one.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn store(&self) -> Option<&crate::store::Store> {
        self.shared.store.as_ref()
    }

    /// [`worker`](Self::worker) on `store` (the bot's own: a surface that checked
    /// [`store`](Self::store) once builds its workers without asking again).
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn worker_on(
        &self,
        store: crate::store::Store,
        holder: String,
    ) -> crate::worker::Worker {
        let mut worker = crate::worker::Worker::new(store, holder)
            .with_policy(self.shared.policies.for_mode(Mode::Interactive).clone());
        if let Some(ledger) = self.store_ledger() {
            worker = worker.with_ledger(ledger);
        }
        for client in self.shared.clients.values() {
            worker = worker.with_client(Arc::clone(client));
        }
        for name in self.route_names() {
            let bot = self.clone();
            worker = worker.register(name, move |task: crate::store::FollowUpTask, turn: Turn| {
                let bot = bot.clone();
                async move { bot.kept_by_worker(task, turn).await }
            });
        }
        worker
    }

    /// A worker's follow-up of a route's promise: the route re-run on a follow-up turn, gated;
    /// its failure (left on the turn) for the worker to retry or hand off.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    async fn kept_by_worker(
        &self,
        task: crate::store::FollowUpTask,
        turn: Turn,
    ) -> Result<AgentMessage, crate::egress::EgressError> {
        use crate::egress::EgressError;
        let mode = task.mode;
        // The route's input as it was stored (its own type is the route's business).
        let input: serde_json::Value = task.input_as().map_err(|error| {
            EgressError::semantic(error, turn.attribution().clone()).with_retryable(false)
        })?;
        let mut turn = turn
            .with_policies(self.shared.policies.clone())
            .with_mode(mode);
        if let Some(said) = task.said() {
            turn = turn.with_input(said);
        }
        let turn = turn.into_follow_up();
        let rerun = Rerun::new(task.handler.as_str(), input);
        let reply = self
            .follow_up_reply(&turn, mode, &rerun, task.delivered())
            .await;
        let policy = turn.policy_for(mode);
        match self.gate(&turn, mode, policy, reply).await {
            Reply::Answer(message) => Ok(message),
            other => match turn.take_follow_up_failure() {
                Some(failure) => Err(failure),
                // The agent chose silence with one of its tokens: the worker's boundary reads
                // the same token and keeps the promise with nothing sent.
                None => match policy.silence_tokens().tokens().first() {
                    Some(token) => Ok(turn.message(token.as_str())),
                    None => Err(EgressError::semantic(
                        UnexpectedFollowUp(other.kind()),
                        turn.attribution().clone(),
                    )
                    .with_retryable(false)),
                },
            },
        }
    }

    fn route_names(&self) -> Vec<String> {
        let routes = self
            .shared
            .routes
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let mut names: Vec<String> = routes.keys().cloned().collect();
        names.sort();
        names
    }

    /// A turn of the conversation at `address`, spoken as `attribution`, with the bot's
    /// policies, recording on the bot's one ledger: the store's durable ledger when the bot has
    /// a store (its rows outlive the process; see
    /// [`Store::durable_ledger`](crate::store::Store::durable_ledger)); the rest as [`Turn::new`] (add a deadline, the person's message for the gate,
    /// ... with `Turn`'s own `with_*`).
    pub fn turn(&self, address: impl Into<Address>, attribution: Attribution) -> Turn {
        let turn = Turn::new(attribution)
            .with_address(address)
            .with_policies(self.shared.policies.clone());
        #[cfg(any(feature = "sqlite", feature = "postgres"))]
        if let Some(ledger) = self.store_ledger() {
            return turn.with_ledger(ledger);
        }
        turn
    }

    /// Delivers what a handler gave (a [`Reply`], or the [`StreamedReply`] of one that
    /// streams) to the turn's address, through the client of its surface, on the one path of
    /// the [module docs](self). A promise the reply makes comes back in the [`Delivery`] (no
    /// route started the turn, so there is no handler to re-run: see [`run`](Self::run)).
    pub fn send<'a>(
        &'a self,
        turn: &'a Turn,
        reply: impl Sendable,
    ) -> BoxFuture<'a, Result<Delivery, DeliveryError>> {
        // Converted before the future is made (and the future's type names no `Sendable`), so
        // a misuse is one error, at the argument.
        let reply = sealed::Sealed::into_outgoing(reply);
        Box::pin(self.send_rerun(turn, reply, None))
    }

    /// [`send`](Self::send) to a channel the caller built (any [`StreamingChannel`]: a
    /// `BoxedChannel` streams every channel), instead of the client of the turn's surface.
    pub fn send_to<'a, C: StreamingChannel>(
        &'a self,
        turn: &'a Turn,
        channel: &'a C,
        reply: impl Sendable,
    ) -> BoxFuture<'a, Result<Delivery, DeliveryError>> {
        let reply = sealed::Sealed::into_outgoing(reply);
        Box::pin(self.deliver(turn, channel, reply, None))
    }

    async fn send_rerun(
        &self,
        turn: &Turn,
        reply: Outgoing,
        rerun: Option<&Rerun>,
    ) -> Result<Delivery, DeliveryError> {
        let channel = match self.channel_for(turn.address()) {
            Ok(channel) => channel,
            Err(unserved) => return Err(unserved_error(turn, unserved)),
        };
        #[cfg(any(feature = "sqlite", feature = "postgres"))]
        if let Some(store) = &self.shared.store {
            let durable = store.channel(channel);
            return self.deliver(turn, &durable, reply, rerun).await;
        }
        self.deliver(turn, &channel, reply, rerun).await
    }

    fn channel_for(
        &self,
        address: &Address,
    ) -> Result<crate::channel::BoxedChannel, UnservedAddress> {
        match self.shared.clients.get(&address.surface()) {
            Some(client) => client.channel_for(address),
            None => Err(UnservedAddress::new(address.surface(), address.clone())),
        }
    }

    async fn deliver<C: StreamingChannel>(
        &self,
        turn: &Turn,
        channel: &C,
        reply: Outgoing,
        rerun: Option<&Rerun>,
    ) -> Result<Delivery, DeliveryError> {
        match reply.0 {
            Shape::Whole(reply) => self.whole(turn, channel, reply, rerun).await,
            Shape::Streamed(streamed) => match streamed.into_inner() {
                Streamed::Resolved(reply) => self.whole(turn, channel, reply, rerun).await,
                Streamed::Stream { stream, mode } => {
                    self.streamed(turn, channel, stream, mode, rerun).await
                }
            },
        }
    }

    /// The promise keeper: the one set, the store's with a store, the in-memory one otherwise.
    fn keeper(&self) -> Arc<dyn PromiseKeeper> {
        if let Some(keeper) = &self.shared.keeper {
            return Arc::clone(keeper);
        }
        #[cfg(any(feature = "sqlite", feature = "postgres"))]
        if let Some(store) = &self.shared.store {
            return Arc::new(store.clone());
        }
        Arc::new(keeper::InMemory::new(self.clone()))
    }

    async fn whole<C: Channel + ?Sized>(
        &self,
        turn: &Turn,
        channel: &C,
        reply: Reply,
        rerun: Option<&Rerun>,
    ) -> Result<Delivery, DeliveryError> {
        let mode = reply
            .message()
            .and_then(AgentMessage::mode)
            .unwrap_or(turn.mode());
        let policy = turn.policy_for(mode);
        let reply = self.gate(turn, mode, policy, reply).await;
        let answer = match &reply {
            Reply::Answer(message) => message.body().as_str().to_owned(),
            _ => String::new(),
        };
        let (rendered, commitment, shown) = match prepare(turn, mode, policy, channel, reply)? {
            Ready::Silence => return Ok(Delivery::new(Outcome::Silent)),
            Ready::Send {
                rendered,
                commitment,
                shown,
            } => (rendered, commitment, shown),
        };
        let kept = match (&commitment, rerun) {
            (Some(commitment), Some(rerun)) => {
                let address = channel.address();
                let promise = Promise::new(commitment, &address, mode, "")
                    .with_rerun(Some(rerun))
                    .with_input(turn.input())
                    .with_ledger(turn.ledger());
                // Kept before the line goes: a crash after it leaves a promise to keep.
                self.keeper()
                    .keep(promise)
                    .await
                    .map_err(|error| DeliveryError::Commit(CommitError::Store(error)))?;
                true
            }
            _ => false,
        };
        let attribution = rendered.attribution().clone();
        let delivered = deliver_rendered(channel, rendered, commitment).await;
        record_delivered(turn.ledger(), &attribution, channel, &delivered);
        let mut receipt = delivered?;
        let promise = receipt.take_commitment();
        let mut delivery = Delivery::new(match shown {
            Shown::Answer => Outcome::Answered,
            Shown::Holding => Outcome::Holding,
            Shown::Handoff => Outcome::Handoff,
        });
        if shown == Shown::Answer {
            delivery.delivered = answer;
        }
        delivery.receipts.push(receipt);
        delivery.kept = kept;
        if kept {
            delivery.kept_promise = promise;
        } else {
            delivery.promise = promise;
        }
        Ok(delivery)
    }

    #[cfg(feature = "gate")]
    async fn gate(
        &self,
        turn: &Turn,
        mode: Mode,
        policy: &DegradationPolicy,
        reply: Reply,
    ) -> Reply {
        let gate = &self.shared.gate;
        match reply {
            Reply::Answer(message) if gate.is_on() => {
                let input = turn.input().unwrap_or_default();
                match gate.check(turn, input, Ok(message)).await {
                    Ok(message) => Reply::Answer(message),
                    Err(blocked) => resolve_in(turn, mode, policy, Err(blocked)),
                }
            }
            other => other,
        }
    }

    #[cfg(not(feature = "gate"))]
    async fn gate(&self, _: &Turn, _: Mode, _: &DegradationPolicy, reply: Reply) -> Reply {
        reply
    }

    /// A stream, block by block through the gate's block check onto the channel's own stream.
    #[cfg(all(feature = "gate", feature = "markdown"))]
    async fn streamed<C: StreamingChannel>(
        &self,
        turn: &Turn,
        channel: &C,
        stream: AnswerStream,
        mode: Mode,
        rerun: Option<&Rerun>,
    ) -> Result<Delivery, DeliveryError> {
        let plan = self.stream_plan(turn, mode, rerun);
        // A channel that is its own surface gets the blocks as messages of their own, each
        // committed and sent like any message (through the outbox, with a store).
        let receipt = if channel.streams_natively() {
            crate::boundary::stream_live(turn, &plan, channel, stream).await?
        } else {
            crate::boundary::stream(turn, &plan, channel, stream).await?
        };
        Ok(streamed_delivery(receipt, rerun))
    }

    /// How a streamed turn of `mode` goes: Layer C's policy for the mode, the gate's block
    /// check, and, when a route started the turn, the bot's keeper for a promise.
    #[cfg(all(feature = "gate", feature = "markdown"))]
    fn stream_plan<'a>(
        &'a self,
        turn: &'a Turn,
        mode: Mode,
        rerun: Option<&Rerun>,
    ) -> crate::boundary::StreamPlan<'a> {
        let policy = turn.policy_for(mode);
        let mut plan = crate::boundary::StreamPlan::new(mode, policy)
            .with_gate(&self.shared.gate, turn.input().unwrap_or_default())
            .with_blocks(self.shared.blocks);
        if let Some(rerun) = rerun {
            plan = plan
                .with_promise_keeper(self.keeper())
                .with_rerun(Some(rerun.clone()));
        }
        plan
    }

    /// Without the block check (features `gate` and `markdown`), a stream is read to its end
    /// and delivered as one answer: nothing reached the person before it ended, so a failure
    /// anywhere in it is a failure before the first word.
    #[cfg(not(all(feature = "gate", feature = "markdown")))]
    async fn streamed<C: StreamingChannel>(
        &self,
        turn: &Turn,
        channel: &C,
        stream: AnswerStream,
        mode: Mode,
        rerun: Option<&Rerun>,
    ) -> Result<Delivery, DeliveryError> {
        let reply = collect(turn, stream, mode).await;
        self.whole(turn, channel, reply, rerun).await
    }
}

/// What a streamed turn delivered, as the front door reports it: the promise kept when a
/// route started the turn (the plan had the keeper), else handed back.
#[cfg(all(feature = "gate", feature = "markdown"))]
fn streamed_delivery(
    mut receipt: crate::boundary::StreamedTurnReceipt,
    rerun: Option<&Rerun>,
) -> Delivery {
    use crate::boundary::StreamEnd;
    let rest = receipt.take_rest();
    let outcome = match receipt.end() {
        StreamEnd::Answered => Outcome::Answered,
        StreamEnd::Stopped(reason) => Outcome::Stopped(reason),
        StreamEnd::Degraded if rest.is_some() => Outcome::Holding,
        StreamEnd::Degraded if receipt.layer_c().is_some() => Outcome::Handoff,
        _ => Outcome::Silent,
    };
    let mut delivery = Delivery::new(outcome);
    delivery.delivered = receipt.delivered().to_owned();
    delivery.kept = rerun.is_some() && rest.is_some();
    if delivery.kept {
        delivery.kept_promise = rest;
    } else {
        delivery.promise = rest;
    }
    (delivery.receipts, delivery.surface) = receipt.into_parts();
    delivery
}

/// `stream` read to its end as one reply of `turn` in `mode` (the boundary's: a failure goes
/// to Layer C, or is left for the keeper on a follow-up turn).
pub(crate) async fn collect(turn: &Turn, mut stream: AnswerStream, mode: Mode) -> Reply {
    let mut text = String::new();
    loop {
        match stream.next().await {
            Some(Ok(delta)) => text.push_str(&delta),
            Some(Err(error)) => return resolve_in(turn, mode, turn.policy_for(mode), Err(error)),
            None => break,
        }
    }
    stream.mark_delivered(&text);
    resolve_in(turn, mode, turn.policy_for(mode), Ok(turn.message(text)))
}

/// A turn whose address no client of the bot serves: nothing was rendered or sent.
fn unserved_error(turn: &Turn, unserved: UnservedAddress) -> DeliveryError {
    tracing::warn!(
        target: "mesh_egress::bot",
        conversation = turn.attribution().conversation(),
        error = %unserved,
        "no client of this bot serves the turn's address; nothing was sent"
    );
    DeliveryError::Unserved(unserved)
}

/// A route's follow-up gave a Layer C line of its own (a hand-built reply): not an answer.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
#[derive(Debug, thiserror::Error)]
#[error("the follow-up gave a {0} line, not an answer")]
struct UnexpectedFollowUp(crate::reply::ReplyKind);

/// What the front door sends: only what an `#[egress_boundary]` handler returns, a [`Reply`]
/// or a [`StreamedReply`] (sealed: text, an [`AnswerStream`] or a block never skips the
/// boundary).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be sent by the front door",
    label = "only what an `#[egress_boundary]` handler returns can be sent: a `Reply` or a `StreamedReply`",
    note = "an `AnswerStream` must leave through the boundary first: return `Result<AnswerStream, EgressError>` from an `#[egress_boundary]` handler and send the `StreamedReply` it gives you",
    note = "text (a delta, a `String`, `Markdown`) or an unchecked `Block` is never sent as it is: return `Ok(turn.message(text))` (or an `AnswerStream`) from an `#[egress_boundary]` handler, so it is gated, rendered and committed on the way",
    note = "an `EgressError` (or an unresolved `Result`) goes through the boundary too: the handler's `Err` becomes Layer C's reply"
)]
pub trait Sendable: sealed::Sealed {}

mod sealed {
    /// The conversion the front door makes (unnameable outside the crate: the trait cannot
    /// be implemented there).
    #[allow(unnameable_types)] // sealed: reachable on purpose, never named outside
    pub trait Sealed {
        fn into_outgoing(self) -> Outgoing;
    }

    /// What a handler gave, in the shape the front door delivers.
    #[allow(unnameable_types)] // sealed: reachable on purpose, never named outside
    #[derive(Debug)]
    pub struct Outgoing(pub(in crate::bot) super::Shape);
}

use sealed::Outgoing;

impl Sendable for Reply {}
impl Sendable for StreamedReply {}

impl sealed::Sealed for Reply {
    fn into_outgoing(self) -> Outgoing {
        Outgoing(Shape::Whole(self))
    }
}

impl sealed::Sealed for StreamedReply {
    fn into_outgoing(self) -> Outgoing {
        Outgoing(Shape::Streamed(self))
    }
}

#[derive(Debug)]
enum Shape {
    Whole(Reply),
    Streamed(StreamedReply),
}

impl From<Reply> for Outgoing {
    fn from(reply: Reply) -> Self {
        Self(Shape::Whole(reply))
    }
}

/// What the person was shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The answer (all of it).
    Answered,
    /// A holding line: the answer, or the rest of a stream, is promised.
    Holding,
    /// A handoff line.
    Handoff,
    /// Nothing (a proactive failure, or the agent's silence token).
    Silent,
    /// The turn stopped (cancelled, or its ownership was lost): nothing more was sent.
    Stopped(StopReason),
}

/// What [`Bot::send`] and [`Bot::run`] delivered.
#[derive(Debug)]
#[must_use = "a holding line's promise may be in it: see `promise`"]
pub struct Delivery {
    outcome: Outcome,
    receipts: Vec<Receipt>,
    delivered: String,
    promise: Option<Commitment>,
    kept_promise: Option<Commitment>,
    kept: bool,
    surface: Option<SurfaceStreamReceipt>,
}

impl Delivery {
    fn new(outcome: Outcome) -> Self {
        Self {
            outcome,
            receipts: Vec::new(),
            delivered: String::new(),
            promise: None,
            kept_promise: None,
            kept: false,
            surface: None,
        }
    }

    /// What the person was shown.
    pub fn outcome(&self) -> Outcome {
        self.outcome
    }

    /// The receipt of each message sent (a stream's blocks sent as messages, then Layer C's
    /// line), in order. A stream the surface showed its own way (a Slack stream, Telegram
    /// drafts, Discord edits) is in [`surface`](Self::surface); here are only the parts it did
    /// not confirm, sent again as messages of their own, and Layer C's line.
    pub fn receipts(&self) -> &[Receipt] {
        &self.receipts
    }

    /// What the surface's own stream confirmed, when the answer was streamed onto one (each
    /// message's text and id, the calls it made); `None` for a whole answer, and for a stream
    /// sent block by block as messages (a channel that is its own surface, such as the
    /// [`Recorder`](crate::channel::Recorder)).
    pub fn surface(&self) -> Option<&SurfaceStreamReceipt> {
        self.surface.as_ref()
    }

    /// The answer's Markdown that reached the person.
    pub fn delivered(&self) -> &str {
        &self.delivered
    }

    /// Whether the bot's promise keeper took the holding line's promise (a route started the
    /// turn): it will re-run the route.
    pub fn is_kept(&self) -> bool {
        self.kept
    }

    /// The holding line's promise the bot's keeper took ([`is_kept`](Self::is_kept)), for a
    /// caller that waits for it: with a store, a command-line turn keeps the stored promise in
    /// its own process (`Worker::keep_in_process` on the bot's `worker`) instead of leaving it
    /// to another worker process.
    pub fn kept_promise(&self) -> Option<&Commitment> {
        self.kept_promise.as_ref()
    }

    /// The holding line's promise when nobody keeps it yet (no route started the turn): keep
    /// it yourself, e.g. by running the turn again through a route.
    pub fn promise(&self) -> Option<&Commitment> {
        self.promise.as_ref()
    }
}
