//! Who is asking, for the web example: a signed, HttpOnly, `SameSite=Lax` cookie holding a
//! random visitor id. A request without a valid one gets a new id (and the cookie with it).
//!
//! The signing key comes from `MESH_WEB_COOKIE_KEY` (at least 32 bytes, stretched to the
//! cookie crate's key); unset, a random key per process, with one warning: every cookie then
//! dies with the process, and so does every visitor's access to their chats.

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum_extra::extract::SignedCookieJar;
use axum_extra::extract::cookie::{Cookie, Key, SameSite};
use mesh_egress::web::Owner;

/// The cookie's name.
const COOKIE: &str = "mesh_web_visitor";
/// The shortest key `MESH_WEB_COOKIE_KEY` may hold, in bytes.
pub(crate) const MIN_KEY: usize = 32;

/// The signing key: `MESH_WEB_COOKIE_KEY`, or a random one (with one warning) when unset.
pub(crate) fn key_from_env() -> Result<Key, String> {
    match std::env::var("MESH_WEB_COOKIE_KEY") {
        Ok(value) if !value.is_empty() => {
            if value.len() < MIN_KEY {
                return Err(format!(
                    "MESH_WEB_COOKIE_KEY must be at least {MIN_KEY} bytes"
                ));
            }
            Ok(Key::derive_from(value.as_bytes()))
        }
        _ => {
            tracing::warn!(target: "mesh_egress::web", "MESH_WEB_COOKIE_KEY is not set: a random key for this process; visitors lose their chats when it exits");
            Ok(Key::generate())
        }
    }
}

/// The visitor a request comes from, put there by [`identify`].
#[derive(Clone, Debug)]
pub(crate) struct Visitor(Owner);

impl From<Visitor> for Owner {
    fn from(visitor: Visitor) -> Owner {
        visitor.0
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Visitor {
    type Rejection = ();

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ()> {
        parts.extensions.get::<Visitor>().cloned().ok_or(())
    }
}

/// Reads the visitor's signed cookie, or gives the request a new visitor and sets the cookie
/// on its response.
pub(crate) async fn identify(State(key): State<Key>, mut request: Request, next: Next) -> Response {
    let jar = SignedCookieJar::from_headers(request.headers(), key);
    let known = jar
        .get(COOKIE)
        .and_then(|cookie| Owner::new(cookie.value().to_owned()).ok());
    let (identity, new_cookie) = match known {
        Some(identity) => (identity, None),
        None => {
            let id = format!("v{:016x}{:016x}", rand_u64(), rand_u64());
            let cookie = Cookie::build((COOKIE, id.clone()))
                .http_only(true)
                .same_site(SameSite::Lax)
                .path("/")
                .build();
            match Owner::new(id) {
                Ok(identity) => (identity, Some(cookie)),
                Err(_) => return axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response(),
            }
        }
    };
    request.extensions_mut().insert(Visitor(identity));
    let response = next.run(request).await;
    match new_cookie {
        Some(cookie) => (jar.add(cookie), response).into_response(),
        None => response,
    }
}

/// 64 random bits from the operating system's source (through the standard library's
/// randomly keyed hasher, which the OS seeds per process and per `RandomState`).
fn rand_u64() -> u64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.finish()
}
