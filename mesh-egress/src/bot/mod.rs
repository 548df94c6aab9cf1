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
//! - [`Bot::send`]: delivers a [`Reply`](crate::Reply) or a
//!   [`StreamedReply`](crate::StreamedReply) to the turn's address.
//! - [`Bot::route`] / [`Bot::run`]: a handler registered under a name with typed input, so a
//!   promise it makes is kept by re-running **the same handler** ([`Endpoint`]), through the
//!   destination that carried its holding line.
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

mod deadline;
mod delivery;
mod endpoint;
pub(crate) mod follow_up;
mod path;
mod sendable;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

#[cfg(feature = "web")]
pub(crate) use deadline::Deadlined;
pub use delivery::{Delivery, Outcome, Promise};
pub use endpoint::Endpoint;
pub use sendable::Sendable;
use sendable::{Outgoing, Shape, sealed};

use deadline::within_deadline;
use follow_up::{Destination, Started};
use serde::Serialize;

use crate::address::{Address, Surface};
use crate::channel::stream::StreamingChannel;
use crate::channel::{BoxedChannel, Channel, DeliveryError, SurfaceClient};
use crate::degrade::{DegradationPolicy, Policies};
use crate::egress::Attribution;
use crate::future::BoxFuture;
use crate::turn::Turn;

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
    in_memory: Arc<follow_up::InFlight>,
    #[cfg(feature = "gate")]
    gate: crate::gate::QualityGate,
    /// How a streamed answer is cut into blocks, and the idle flush.
    #[cfg(feature = "markdown")]
    blocks: crate::boundary::Blocks,
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    store: Option<crate::store::Store>,
    /// The store's durable ledger, opened on the first turn that needs it (it starts its
    /// writer on the runtime, which `with_store` may not be called on).
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    ledger: Arc<std::sync::OnceLock<crate::ledger::Ledger>>,
    /// The ledger was given ([`Bot::with_ledger`]): a store set later does not replace it.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    ledger_given: bool,
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
                in_memory: Arc::default(),
                #[cfg(feature = "gate")]
                gate: crate::gate::QualityGate::off(),
                #[cfg(feature = "markdown")]
                blocks: crate::boundary::Blocks::default(),
                #[cfg(any(feature = "sqlite", feature = "postgres"))]
                store: None,
                #[cfg(any(feature = "sqlite", feature = "postgres"))]
                ledger: Arc::default(),
                #[cfg(any(feature = "sqlite", feature = "postgres"))]
                ledger_given: false,
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
    #[cfg(feature = "markdown")]
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
    #[cfg(feature = "markdown")]
    pub fn with_idle_flush(self, idle: Option<std::time::Duration>) -> Self {
        self.edit(|shared| shared.blocks.idle_flush = idle)
    }

    /// Commits every delivery through `store`'s outbox, and keeps promises durably: stored
    /// before their holding line goes, kept by a [`worker`](Self::worker) (after a restart too).
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub fn with_store(self, store: crate::store::Store) -> Self {
        self.edit(|shared| {
            shared.store = Some(store);
            if !shared.ledger_given {
                shared.ledger = Arc::default();
            }
        })
    }

    /// Records the bot's turns ([`turn`](Self::turn)) and its worker's follow-ups on `ledger`
    /// instead of a durable ledger of the store's own (opened on first use): a process that
    /// flushes a [`DurableLedger`](crate::store::DurableLedger) it holds before it exits gives
    /// it here, so every row the bot writes is in that flush.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub fn with_ledger(self, ledger: crate::ledger::Ledger) -> Self {
        self.edit(|shared| {
            shared.ledger = Arc::new(std::sync::OnceLock::from(ledger));
            shared.ledger_given = true;
        })
    }

    /// The store's durable ledger (one for the bot, opened on first use), or `None` without a
    /// store, or outside a runtime (the turn then records in memory, with a warning).
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn store_ledger(&self) -> Option<crate::ledger::Ledger> {
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

    /// The store the bot commits through and keeps its promises in, if it has one.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn store(&self) -> Option<&crate::store::Store> {
        self.shared.store.as_ref()
    }

    /// The bot's clients, one per surface (its worker's too).
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn clients(&self) -> &BTreeMap<Surface, Arc<dyn SurfaceClient>> {
        &self.shared.clients
    }

    pub(crate) fn route_names(&self) -> Vec<String> {
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

    /// Delivers what a handler gave (a [`Reply`](crate::Reply), or the
    /// [`StreamedReply`](crate::answer::StreamedReply) of one that streams) to the turn's
    /// address, through the client of its surface, on the one path of the
    /// [module docs](crate::bot). A promise the reply makes comes back to the caller
    /// ([`Promise::Caller`]: no route started the turn, so there is no handler to re-run; see
    /// [`run`](Self::run)).
    ///
    /// # Errors
    ///
    /// [`DeliveryError::Unserved`] when no client of the bot serves the turn's address (nothing
    /// is rendered or sent); otherwise what delivery itself could not do (see
    /// [`DeliveryError`]). A reply that cannot be rendered is not an error: Layer C answers.
    pub fn send<'a>(
        &'a self,
        turn: &'a Turn,
        reply: impl Sendable,
    ) -> BoxFuture<'a, Result<Delivery, DeliveryError>> {
        // Converted before the future is made (and the future's type names no `Sendable`), so
        // a misuse is one error, at the argument.
        let reply = sealed::Sealed::into_outgoing(reply);
        Box::pin(self.send_started(turn, reply, None))
    }

    /// [`send`](Self::send) to a channel the caller built (any [`StreamingChannel`]: a
    /// `BoxedChannel` streams every channel), instead of the client of the turn's surface.
    ///
    /// # Errors
    ///
    /// What delivery could not do (see [`DeliveryError`]).
    pub fn send_to<'a, C: StreamingChannel>(
        &'a self,
        turn: &'a Turn,
        channel: &'a C,
        reply: impl Sendable,
    ) -> BoxFuture<'a, Result<Delivery, DeliveryError>> {
        let reply = sealed::Sealed::into_outgoing(reply);
        Box::pin(self.deliver(turn, channel, reply, None))
    }

    /// Runs `route` (a handler registered with [`route`](Self::route)) with `input` and
    /// delivers what it gives to the turn's address, as [`send`](Self::send) does. A promise
    /// it makes is the bot's to keep ([`Promise::Bot`]): the same route re-run with the same
    /// input, in this process (the commitment's plan), or with a store by a
    /// [`worker`](Self::worker), after a restart too. The turn's deadline holds whatever the
    /// handler does: a handler that has not answered by then is held (or, proactive, silent),
    /// in the mode it declared.
    ///
    /// # Errors
    ///
    /// As [`send`](Self::send).
    pub async fn run<I: Serialize>(
        &self,
        turn: &Turn,
        route: &Endpoint<I>,
        input: I,
    ) -> Result<Delivery, DeliveryError> {
        let rerun = route.rerun(&input);
        let reply = within_deadline(turn, route.call(turn, input)).await;
        let started = rerun.as_ref().map(|rerun| Started {
            rerun,
            destination: &Destination::Client,
        });
        self.send_started(turn, reply, started).await
    }

    /// [`run`](Self::run) into `channel`, a destination the caller built for the turn (the web
    /// chat's live reply), block by block. The promise goes where its holding line went: with
    /// a store and a client for the channel's surface, stored with the channel's address and
    /// kept by a worker through that client; otherwise kept in this process, through
    /// `channel` itself.
    ///
    /// # Errors
    ///
    /// What delivery could not do (see [`DeliveryError`]).
    pub async fn run_to<C, I>(
        &self,
        turn: &Turn,
        channel: &C,
        route: &Endpoint<I>,
        input: I,
    ) -> Result<Delivery, DeliveryError>
    where
        C: Channel + Clone + 'static,
        I: Serialize,
    {
        let rerun = route.rerun(&input);
        let reply = within_deadline(turn, route.call(turn, input)).await;
        let destination = match self.durably_serves(&channel.address()) {
            true => Destination::Client,
            false => Destination::Channel(BoxedChannel::new(channel.clone())),
        };
        let started = rerun.as_ref().map(|rerun| Started {
            rerun,
            destination: &destination,
        });
        self.respond(turn, channel, reply, started, |_| None).await
    }
}
