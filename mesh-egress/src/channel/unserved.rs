//! The error of a surface client asked for an address it cannot send to: a leaf of the
//! channel module, so delivery can carry it without knowing the clients.

use crate::address::{Address, Surface};

/// Why a [`SurfaceClient`](super::SurfaceClient) cannot make a channel to an address.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a {surface} client cannot send to {address}")]
pub struct UnservedAddress {
    surface: Surface,
    address: Address,
}

impl UnservedAddress {
    /// `client` cannot send to `address`.
    pub fn new(client: Surface, address: Address) -> Self {
        Self {
            surface: client,
            address,
        }
    }

    /// The surface of the client that was asked.
    pub fn client(&self) -> Surface {
        self.surface
    }

    /// The address it was asked for.
    pub fn address(&self) -> &Address {
        &self.address
    }
}
