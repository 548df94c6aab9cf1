//! [`Mode`]: the shape of a conversation, which decides what a failure looks like. A leaf value:
//! the handler declares it, the boundary stamps it on what it lets out, and every later step
//! (the gate, the renderer, a stream that fails after its first block) reads it from there.

/// The shape of the conversation, which decides what a failure looks like.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// A person is waiting on a direct reply.
    #[default]
    Interactive,
    /// Nobody asked: a digest, a heads-up, a background result.
    Proactive,
}

impl Mode {
    /// `interactive` or `proactive`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Interactive => "interactive",
            Self::Proactive => "proactive",
        }
    }

    /// Reads a mode from its name ([`as_str`](Self::as_str)).
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "interactive" => Some(Self::Interactive),
            "proactive" => Some(Self::Proactive),
            _ => None,
        }
    }
}
