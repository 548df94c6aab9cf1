//! [`Owner`]: whose chat it is. The application says who is asking through an axum
//! extractor of its own (a session cookie, a bearer token); the router only compares.

/// The longest identity kept, in bytes.
pub const MAX_OWNER: usize = 256;

/// Who is asking, as the application's own id for the person (a user id, a session id). A
/// chat is readable and writable only by the identity that created it.
///
/// The router gets it from an axum extractor the application names
/// ([`WebChat::router`](super::WebChat::router)'s type parameter): any
/// `FromRequestParts<()>` whose value converts into an `Owner`.
///
/// ```
/// use mesh_egress::web::Owner;
/// assert!(Owner::new("user-42").is_ok());
/// assert!(Owner::new("").is_err());
/// assert!(Owner::new("a\u{0}b").is_err());
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Owner(String);

/// Why a value cannot be an [`Owner`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OwnerError {
    /// It is empty.
    #[error("an identity is empty")]
    Empty,
    /// It is longer than [`MAX_OWNER`] bytes.
    #[error("an identity is longer than {MAX_OWNER} bytes")]
    TooLong,
    /// It holds a control character.
    #[error("an identity holds a control character")]
    Control,
}

impl Owner {
    /// `id` as an identity: non-empty, at most [`MAX_OWNER`] bytes, no control characters.
    ///
    /// # Errors
    ///
    /// [`OwnerError::Empty`] for an empty `id`, [`OwnerError::TooLong`] past [`MAX_OWNER`]
    /// bytes, and [`OwnerError::Control`] when it holds a control character.
    pub fn new(id: impl Into<String>) -> Result<Self, OwnerError> {
        let id = id.into();
        if id.is_empty() {
            return Err(OwnerError::Empty);
        }
        if id.len() > MAX_OWNER {
            return Err(OwnerError::TooLong);
        }
        if id.chars().any(char::is_control) {
            return Err(OwnerError::Control);
        }
        Ok(Self(id))
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The id is the person's: logs see only its length.
impl std::fmt::Debug for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Owner").field("len", &self.0.len()).finish()
    }
}
