//! [`DynChannel`] and [`BoxedChannel`]: several chat surfaces behind one type.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use std::time::SystemTime;

use super::stream::{ReplyStream, SendEach, StreamMode, StreamOpenError, StreamingChannel};
use super::{Channel, PartLookup, PartReceipt, Render, RenderError, RenderedParts, SendError};
use crate::address::Address;
use crate::egress::{Attribution, Markdown};
use crate::outbound::{CommitError, CommitRecord, CommittedPart};

use crate::future::BoxFuture;

mod sealed {
    /// Seals [`DynChannel`](super::DynChannel): only the blanket impl for channels exists.
    #[allow(unnameable_types)] // sealed: reachable on purpose, never named outside
    pub trait SealedDyn {}
}

/// The object-safe face of a [`Channel`], so one bot can hold several surfaces as
/// `Arc<dyn DynChannel>`.
///
/// Sealed and implemented for every `Channel`: its methods are the channel's own, boxed. It is
/// not delivered to directly: wrap it in a [`BoxedChannel`], which is a `Channel` and so goes
/// through the same [`Deliver`](super::Deliver) path (render, commit, send each committed part
/// in order) as any other.
pub trait DynChannel: sealed::SealedDyn + Send + Sync {
    /// The channel's renderer, applied to `body`.
    ///
    /// # Errors
    ///
    /// The [`RenderError`] the channel's renderer returns.
    fn render_dyn(&self, body: &Markdown) -> Result<Vec<String>, RenderError>;

    /// The channel's renderer, applied to `body`, with the part budget's cut.
    ///
    /// # Errors
    ///
    /// The [`RenderError`] the channel's renderer returns.
    fn render_parts_dyn(&self, body: &Markdown) -> Result<RenderedParts, RenderError>;

    /// The channel's [`Channel::address`].
    fn address_dyn(&self) -> Address;

    /// The channel's [`Channel::commit`], boxed.
    fn commit_dyn<'a>(
        &'a self,
        record: &'a CommitRecord<'_>,
    ) -> BoxFuture<'a, Result<(), CommitError>>;

    /// The channel's [`Channel::send`], boxed.
    fn send_dyn(&self, part: CommittedPart) -> BoxFuture<'_, Result<PartReceipt, SendError>>;

    /// The channel's [`Channel::look_up`], boxed.
    fn look_up_dyn<'a>(
        &'a self,
        part: &'a CommittedPart,
        since: SystemTime,
    ) -> BoxFuture<'a, PartLookup>;
}

impl<C: Channel + ?Sized> sealed::SealedDyn for C {}

impl<C: Channel + ?Sized> DynChannel for C {
    fn render_dyn(&self, body: &Markdown) -> Result<Vec<String>, RenderError> {
        self.renderer().render(body)
    }

    fn render_parts_dyn(&self, body: &Markdown) -> Result<RenderedParts, RenderError> {
        self.renderer().render_parts(body)
    }

    fn address_dyn(&self) -> Address {
        Channel::address(self)
    }

    fn commit_dyn<'a>(
        &'a self,
        record: &'a CommitRecord<'_>,
    ) -> BoxFuture<'a, Result<(), CommitError>> {
        Box::pin(Channel::commit(self, record))
    }

    fn send_dyn(&self, part: CommittedPart) -> BoxFuture<'_, Result<PartReceipt, SendError>> {
        Box::pin(Channel::send(self, part))
    }

    fn look_up_dyn<'a>(
        &'a self,
        part: &'a CommittedPart,
        since: SystemTime,
    ) -> BoxFuture<'a, PartLookup> {
        Box::pin(Channel::look_up(self, part, since))
    }
}

/// Any [`Channel`] behind one type: a `Channel` itself, so delivering to it takes the usual
/// sealed [`Deliver`](super::Deliver) path and only committed parts reach the surface.
///
/// Every boxed channel can stream (it is a [`StreamingChannel`]): one boxed with
/// [`streaming`](Self::streaming) streams the way its surface does (a Slack stream, Telegram
/// drafts, Discord edits); any other sends each streamed block as a message of its own
/// ([`StreamMode::Blocks`]).
///
/// Clones share the channel.
///
/// ```
/// use std::sync::Arc;
/// use mesh_egress::{AgentMessage, Attribution};
/// use mesh_egress::channel::{BoxedChannel, Deliver, DynChannel, Recorder, Stdout};
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let recorder = Recorder::new();
/// let surfaces: Vec<BoxedChannel> = vec![BoxedChannel::new(recorder.clone()), BoxedChannel::new(Stdout::new())];
/// for surface in &surfaces {
///     surface.deliver(AgentMessage::new("Deployed.", Attribution::new("ops", "c1", "r1"))).await?;
/// }
/// let shared: Arc<dyn DynChannel> = Arc::new(Recorder::new());
/// BoxedChannel::from(shared).deliver(AgentMessage::new("Hi.", Attribution::new("ops", "c1", "r2"))).await?;
/// assert_eq!(recorder.sent(), ["Deployed."]);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct BoxedChannel {
    renderer: BoxedRenderer,
    /// The channel's own streaming, when it was boxed as a streaming channel.
    streaming: Option<Arc<dyn DynStreaming>>,
}

/// The dyn-compatible face of a [`StreamingChannel`] (crate-private: only a [`BoxedChannel`]
/// holds one).
trait DynStreaming: Send + Sync {
    fn stream_mode_dyn(&self) -> StreamMode;
    fn open_stream_dyn(&self, attribution: &Attribution) -> Result<ReplyStream, StreamOpenError>;
    fn streams_natively_dyn(&self) -> bool;
}

impl<C: StreamingChannel> DynStreaming for C {
    fn stream_mode_dyn(&self) -> StreamMode {
        self.stream_mode()
    }

    fn open_stream_dyn(&self, attribution: &Attribution) -> Result<ReplyStream, StreamOpenError> {
        self.open_stream(attribution)
    }

    fn streams_natively_dyn(&self) -> bool {
        self.streams_natively()
    }
}

impl BoxedChannel {
    /// Boxes `channel`; a reply streamed to it goes block by block, each a message of its own.
    pub fn new(channel: impl Channel + 'static) -> Self {
        Self::from(Arc::new(channel) as Arc<dyn DynChannel>)
    }

    /// Boxes a channel that streams the way its surface does, and keeps that: a reply streamed
    /// to the box streams as it would to `channel`.
    pub fn streaming(channel: impl StreamingChannel + 'static) -> Self {
        let channel = Arc::new(channel);
        Self {
            renderer: BoxedRenderer {
                channel: Arc::clone(&channel) as Arc<dyn DynChannel>,
            },
            streaming: Some(channel),
        }
    }

    /// The shared channel inside.
    pub fn as_dyn(&self) -> &Arc<dyn DynChannel> {
        &self.renderer.channel
    }
}

impl From<Arc<dyn DynChannel>> for BoxedChannel {
    fn from(channel: Arc<dyn DynChannel>) -> Self {
        Self {
            renderer: BoxedRenderer { channel },
            streaming: None,
        }
    }
}

/// Streams as the boxed channel does ([`BoxedChannel::streaming`]), or block by block.
impl StreamingChannel for BoxedChannel {
    fn stream_mode(&self) -> StreamMode {
        self.streaming
            .as_ref()
            .map_or(StreamMode::Blocks, |s| s.stream_mode_dyn())
    }

    fn open_stream(&self, attribution: &Attribution) -> Result<ReplyStream, StreamOpenError> {
        match &self.streaming {
            Some(streaming) => streaming.open_stream_dyn(attribution),
            None => {
                ReplyStream::spawn(SendEach::new(self.clone()), StreamMode::Blocks, attribution)
            }
        }
    }

    fn streams_natively(&self) -> bool {
        self.streaming
            .as_ref()
            .is_some_and(|streaming| streaming.streams_natively_dyn())
    }
}

impl fmt::Debug for BoxedChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BoxedChannel").finish_non_exhaustive()
    }
}

/// The renderer of a [`BoxedChannel`]: the boxed channel's own.
#[derive(Clone)]
pub struct BoxedRenderer {
    channel: Arc<dyn DynChannel>,
}

impl fmt::Debug for BoxedRenderer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BoxedRenderer").finish_non_exhaustive()
    }
}

impl Render for BoxedRenderer {
    fn render(&self, body: &Markdown) -> Result<Vec<String>, RenderError> {
        self.channel.render_dyn(body)
    }

    fn render_parts(&self, body: &Markdown) -> Result<RenderedParts, RenderError> {
        self.channel.render_parts_dyn(body)
    }
}

impl Channel for BoxedChannel {
    type Renderer = BoxedRenderer;

    fn renderer(&self) -> &BoxedRenderer {
        &self.renderer
    }

    fn address(&self) -> Address {
        self.renderer.channel.address_dyn()
    }

    // An async fn, not the boxed future itself: the box's lifetime is the shorter of `self`'s
    // and `record`'s, which the trait's opaque return type cannot name.
    async fn commit(&self, record: &CommitRecord<'_>) -> Result<(), CommitError> {
        self.renderer.channel.commit_dyn(record).await
    }

    fn send(
        &self,
        part: CommittedPart,
    ) -> impl Future<Output = Result<PartReceipt, SendError>> + Send {
        self.renderer.channel.send_dyn(part)
    }

    // An async fn for the same reason as `commit`.
    async fn look_up(&self, part: &CommittedPart, since: SystemTime) -> PartLookup {
        self.renderer.channel.look_up_dyn(part, since).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::channel::{Deliver, Recorder};
    use crate::egress::{AgentMessage, Attribution};
    use crate::ownership::Ownership;

    fn msg(text: &str) -> AgentMessage {
        AgentMessage::new(text, Attribution::new("a", "c", "r"))
    }

    static_assertions::assert_obj_safe!(DynChannel);

    #[tokio::test]
    async fn a_boxed_channel_renders_with_the_inner_renderer_and_splits_alike() {
        let inner = Recorder::new().with_limit(4);
        let boxed = BoxedChannel::new(inner.clone());
        let receipt = boxed.deliver(msg("abcdefgh")).await.unwrap();
        assert_eq!(receipt.len(), 2);
        assert_eq!(inner.sent(), ["abcd", "efgh"]);
    }

    #[test]
    fn a_boxed_channel_sends_where_the_inner_channel_sends() {
        let discord = Address::from(crate::address::DiscordAddress::new("1100000000000000001"));
        let boxed = BoxedChannel::new(Recorder::new().with_address(discord.clone()));
        assert_eq!(boxed.address(), discord);
        assert_eq!(BoxedChannel::new(Recorder::new()).address(), Address::Plain);
    }

    #[tokio::test]
    async fn a_boxed_channel_keeps_the_inner_commit_boundary() {
        let ownership = Ownership::held();
        let inner = Recorder::new().with_ownership(ownership.clone());
        let boxed = BoxedChannel::from(Arc::new(inner.clone()) as Arc<dyn DynChannel>);
        ownership.revoke();
        let error = boxed.deliver(msg("late")).await.unwrap_err();
        assert!(matches!(
            error,
            crate::channel::DeliveryError::Commit(CommitError::OwnershipLost)
        ));
        assert!(inner.sent().is_empty());
    }

    #[tokio::test]
    async fn a_boxed_channel_streams_as_its_surface_does_or_block_by_block() {
        let plain = BoxedChannel::new(Recorder::new());
        assert_eq!(plain.stream_mode(), StreamMode::Blocks);
        let recorder = Recorder::new();
        let boxed = BoxedChannel::streaming(recorder.clone());
        assert_eq!(boxed.stream_mode(), recorder.stream_mode());
        let attribution = Attribution::new("a", "c", "r");
        for channel in [&plain, &boxed] {
            let mut stream = channel.open_stream(&attribution).unwrap();
            let committed = crate::outbound::Outbound::new(msg("one block"))
                .render(channel.renderer())
                .unwrap()
                .commit(&Ownership::held())
                .await
                .unwrap();
            committed.into_parts().for_each(|part| stream.append(part));
            let receipt = stream.finish().await.unwrap();
            assert_eq!(receipt.confirmed_text(), "one block");
        }
        assert_eq!(recorder.sent(), ["one block"]);
    }

    #[tokio::test]
    async fn a_failed_boxed_delivery_resumes_with_only_the_missing_parts() {
        let inner = Recorder::new().with_limit(1);
        let boxed = BoxedChannel::new(inner.clone());
        let first = boxed.deliver(msg("ab")).await.unwrap();
        assert_eq!(first.len(), 2);
        inner.fail_next_sends(1);
        let error = boxed.deliver(msg("xyz")).await.unwrap_err();
        let rest = error.into_undelivered().unwrap();
        assert_eq!(rest.indexes(), [0, 1, 2]);
        let receipt = boxed.deliver(rest).await.unwrap();
        assert_eq!(receipt.len(), 3);
        assert_eq!(inner.sent(), ["a", "b", "x", "y", "z"]);
    }
}
