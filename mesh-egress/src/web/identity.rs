//! [`Identity`]: whose chat it is. The application says who is asking through an axum
//! extractor of its own (a session cookie, a bearer token); the router only compares.

/// The longest identity kept, in bytes.
pub const MAX_IDENTITY: usize = 256;

/// Who is asking, as the application's own id for the person (a user id, a session id). A
/// chat is readable and writable only by the identity that created it.
///
/// The router gets it from an axum extractor the application names
/// ([`WebChat::router`](super::WebChat::router)'s type parameter): any
/// `FromRequestParts<()>` whose value converts into an `Identity`.
///
/// ```
/// use mesh_egress::web::Identity;
/// assert!(Identity::new("user-42").is_ok());
/// assert!(Identity::new("").is_err());
/// assert!(Identity::new("a\u{0}b").is_err());
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Identity(String);

/// Why a value cannot be an [`Identity`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdentityError {
    /// It is empty.
    #[error("an identity is empty")]
    Empty,
    /// It is longer than [`MAX_IDENTITY`] bytes.
    #[error("an identity is longer than {MAX_IDENTITY} bytes")]
    TooLong,
    /// It holds a control character.
    #[error("an identity holds a control character")]
    Control,
}

impl Identity {
    /// `id` as an identity: non-empty, at most [`MAX_IDENTITY`] bytes, no control characters.
    pub fn new(id: impl Into<String>) -> Result<Self, IdentityError> {
        let id = id.into();
        if id.is_empty() {
            return Err(IdentityError::Empty);
        }
        if id.len() > MAX_IDENTITY {
            return Err(IdentityError::TooLong);
        }
        if id.chars().any(char::is_control) {
            return Err(IdentityError::Control);
        }
        Ok(Self(id))
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The id is the person's: logs see only its length.
impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("len", &self.0.len())
            .finish()
    }
}
