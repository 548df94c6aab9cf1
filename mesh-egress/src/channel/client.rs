//! [`SurfaceClient`]: what can send to any conversation of one surface, and make the channel for
//! one of them.

use std::fmt;

use super::unserved::UnservedAddress;
use super::{BoxedChannel, Channel, Recorder, Render, Stdout};
use crate::address::{Address, Surface};

/// A sender for every conversation of one surface: one per bot token (`SlackClient`,
/// `DiscordClient`, `TelegramClient`, feature `http`), or the single destination of
/// [`Stdout`] and [`Recorder`].
///
/// It is how code that learns a conversation's [`Address`] at run time (a worker reading the
/// outbox, a front door reading an event) gets a channel to it, without knowing the surface
/// at compile time: [`channel_for`](Self::channel_for) gives the conversation's channel
/// boxed, and delivering to it goes through the usual sealed
/// [`Deliver`](super::Deliver) path. Dyn-compatible, so one process holds several surfaces
/// as `Arc<dyn SurfaceClient>`.
///
/// ```
/// use std::sync::Arc;
/// use mesh_egress::channel::{Channel, Recorder, SurfaceClient};
/// use mesh_egress::{Address, Surface};
/// use mesh_egress::address::SlackAddress;
///
/// let clients: Vec<Arc<dyn SurfaceClient>> = vec![Arc::new(Recorder::new())];
/// let plain = clients.iter().find(|c| c.surface() == Surface::Plain).unwrap();
/// assert_eq!(plain.channel_for(&Address::Plain).unwrap().address(), Address::Plain);
/// let slack = Address::from(SlackAddress::new("C0123456789"));
/// assert!(plain.channel_for(&slack).is_err());
/// ```
pub trait SurfaceClient: Send + Sync {
    /// The surface whose addresses it sends to.
    fn surface(&self) -> Surface;

    /// The channel to the conversation at `address`, or why this client cannot send there
    /// (another surface's address, or one this client does not serve).
    ///
    /// # Errors
    ///
    /// [`UnservedAddress`] when `address` is another surface's, or one this client does not
    /// serve.
    fn channel_for(&self, address: &Address) -> Result<BoxedChannel, UnservedAddress>;
}

/// Stdout has one destination: it serves [`Address::Plain`], printing every conversation's
/// parts in its renderer's format.
impl<R: Render + Clone + 'static> SurfaceClient for Stdout<R> {
    fn surface(&self) -> Surface {
        Surface::Plain
    }

    fn channel_for(&self, address: &Address) -> Result<BoxedChannel, UnservedAddress> {
        match address {
            Address::Plain => Ok(BoxedChannel::new(self.clone())),
            other => Err(UnservedAddress::new(Surface::Plain, other.clone())),
        }
    }
}

/// A recorder serves the one address it stands for ([`Address::Plain`] unless
/// [`Recorder::with_address`] says otherwise); the channels it gives share its record.
impl SurfaceClient for Recorder {
    fn surface(&self) -> Surface {
        self.address().surface()
    }

    fn channel_for(&self, address: &Address) -> Result<BoxedChannel, UnservedAddress> {
        if *address == self.address() {
            Ok(BoxedChannel::new(self.clone()))
        } else {
            Err(UnservedAddress::new(self.surface(), address.clone()))
        }
    }
}

/// A shared client is a client: one `Arc` can serve a front door and a worker at once.
impl<T: SurfaceClient + ?Sized> SurfaceClient for std::sync::Arc<T> {
    fn surface(&self) -> Surface {
        (**self).surface()
    }

    fn channel_for(&self, address: &Address) -> Result<BoxedChannel, UnservedAddress> {
        (**self).channel_for(address)
    }
}

impl fmt::Debug for dyn SurfaceClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SurfaceClient")
            .field("surface", &self.surface())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::address::DiscordAddress;
    use crate::channel::Deliver;
    use crate::egress::{AgentMessage, Attribution};

    static_assertions::assert_obj_safe!(SurfaceClient);

    #[tokio::test]
    async fn a_recorder_serves_only_the_address_it_stands_for_and_shares_its_record() {
        let discord = Address::from(DiscordAddress::new("1100000000000000001"));
        let recorder = Recorder::new().with_address(discord.clone());
        assert_eq!(SurfaceClient::surface(&recorder), Surface::Discord);
        let channel = recorder.channel_for(&discord).unwrap();
        channel
            .deliver(AgentMessage::new("hi", Attribution::new("a", "c", "r")))
            .await
            .unwrap();
        assert_eq!(recorder.sent(), ["hi"]);
        let other = Address::from(DiscordAddress::new("1100000000000000002"));
        let refused = recorder.channel_for(&other).unwrap_err();
        assert_eq!(refused.address(), &other);
        assert_eq!(refused.client(), Surface::Discord);
    }

    #[test]
    fn stdout_serves_the_plain_address_only() {
        let stdout = Stdout::new();
        assert!(stdout.channel_for(&Address::Plain).is_ok());
        let discord = Address::from(DiscordAddress::new("1"));
        assert_eq!(
            stdout.channel_for(&discord).unwrap_err().to_string(),
            "a plain client cannot send to discord:1"
        );
    }
}
